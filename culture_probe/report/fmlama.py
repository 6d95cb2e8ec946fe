"""FmLAMA report views: mAP (and mWS) per group as mean ± std over the templates of each family; mAP bars per
country group (the paper's figure); the template x group heatmap; in chat mode, accuracy per template and
instruction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from culture_probe.metrics.display import format_score
from culture_probe.metrics.fmlama import ALL, FAMILIES
from culture_probe.report.views import Heatmap, Section, Table, result_bars
from culture_probe.tasks import Record


def sections(config: Mapping[str, Any], records: Sequence[Record], metrics: Mapping[str, Any]) -> list[Section]:
    """The views of one FmLAMA run."""
    out = []
    if "chat" in metrics:
        groups = sorted({g for cell in metrics["chat"].values() for g in cell}, key=lambda g: (g != ALL, g))
        rows = tuple((cell, *(format_score(v.get(g), 2) for g in groups)) for cell, v in metrics["chat"].items())
        out.append(
            Section(
                "Chat mode: accuracy (%) per template and instruction",
                text="A dish counts when an item of the reply equals a gold ingredient after "
                "normalisation (an approximation of the paper's unreleased parser).",
                tables=(Table(("template / instruction", *groups), rows),),
            )
        )
        return out
    for measure, title in (("map", "mAP (%)"), ("mws", "mWS")):
        if measure in metrics:
            out.append(
                Section(
                    f"{title}: mean ± std over the templates of each family",
                    text=correlation_text(metrics.get("map_mws_correlation")) if measure == "mws" else "",
                    tables=(family_markdown(metrics[measure]),),
                )
            )
    figures: list[Any] = [
        result_bars(metrics, "group", f"map_{family}", "mAP (%)", title=f"mAP per country group, {family} templates")
        for family in FAMILIES
        if f"map_{family}" in metrics.get("results", {}).get("overall", {})
    ]
    heat = template_heatmap(metrics.get("templates", {}))
    if heat is not None:
        figures.append(heat)
    out.append(
        Section(
            "mAP per country group and per template",
            text="Bars (the paper's per-group view): mAP of each group, the mean over the family's "
            "templates, with a bootstrap 95% interval over dishes.",
            figures=tuple(figures),
        )
    )
    return out


def correlation_text(correlation: Mapping[str, Any] | None) -> str:
    """One sentence on how alike mAP and mWS rank this table's cells (the paper reports r = 0.66 for English)."""
    if not correlation or correlation["pearson_r"] is None:
        return ""
    return (
        f"Pearson r between the mAP and mWS cells: {format_score(correlation['pearson_r'], 2)} "
        f"({correlation['n_cells']} cells)."
    )


def family_markdown(table: Mapping[str, Mapping[str, Any]]) -> Table:
    """Groups as rows, families as columns, cells 'mean ± std'."""
    families = list(table)
    groups = sorted({g for cells in table.values() for g in cells}, key=lambda g: (g != ALL, g))

    def cell(family: str, group: str) -> str:
        value = table[family].get(group)
        if not value or value["mean"] is None:
            return ""
        digits = 2 if value["mean"] > 1 else 4  # spec 5: mAP (%) with 2 decimals, mWS (cosine) with 4
        std = "" if value["std"] is None else f" ± {format_score(value['std'], digits)}"
        return f"{format_score(value['mean'], digits)}{std}"

    return Table(("group", *families), tuple((g, *(cell(f, g) for f in families)) for g in groups))


def template_heatmap(per_template: Mapping[str, Mapping[str, Any]]) -> Heatmap | None:
    """The mAP per template (rows) and group (columns)."""
    if not per_template:
        return None
    relations = list(per_template)
    groups = sorted({g for v in per_template.values() for g in v["map"]}, key=lambda g: (g != ALL, g))
    values = tuple(tuple(per_template[r]["map"].get(g) for g in groups) for r in relations)
    return Heatmap(tuple(relations), tuple(groups), values, label="mAP (%)", title="mAP per template and group")
