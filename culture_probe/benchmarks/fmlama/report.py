"""FmLAMA report views: mAP (and mWS) per group as mean ± std over the templates of each family; mAP
bars per country group (the paper's figure); the template x group heatmap; in chat mode, accuracy
per template and instruction.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from culture_probe.benchmarks.fmlama.metrics import ALL, FAMILIES
from culture_probe.metrics.display import Scale, format_number, marked, with_n
from culture_probe.record import ResultsTable, RunRecord
from culture_probe.report.views import Heatmap, Section, Table, result_bars
from culture_probe.tasks import Record

SCALES: dict[str, Scale] = {"map_country": "%", "map_hasParts": "%", "chat_accuracy": "%"}
# options of the mode a run did not use: chat generation, or ranking the ingredient pool
_CHAT_ONLY = {"chat_max_new_tokens", "chat_decoding", "chat_temperature"}
_RANK_ONLY = {
    "split_gold",
    "max_candidate_tokens",
    "ap_denominator",
    "fill",
    "candidate_tokenization",
    "group_set",
    "round_template_map",
    "vectors",
    "keep_scores",
}


def inert_options(config: RunRecord) -> set[str]:
    """The options of the mode this run did not use, the sampling temperature of greedy replies, and
    the token cap that only masked models' rankings apply (F2).
    """
    options = config.options
    if options.get("mode") == "chat":
        return _RANK_ONLY | (
            {"chat_temperature"} if options.get("chat_decoding", "greedy") == "greedy" else set()
        )
    masked = config.model.kind in (None, "masked")
    return _CHAT_ONLY | (set() if masked else {"max_candidate_tokens"})


def sections(
    config: RunRecord, records: Sequence[Record], metrics: Mapping[str, Any]
) -> list[Section]:
    """The views of one FmLAMA run."""
    if "chat" in metrics:
        return [chat_section(config, records, metrics["chat"])]
    out = []
    measures: tuple[tuple[str, str, Scale], ...] = (
        ("map", "mAP (%)", "%"),
        ("mws", "mWS (cosine, 0-1)", "0-1"),
    )
    for measure, title, scale in measures:
        if measure in metrics:
            out.append(
                Section(
                    f"{title}: mean ± std over the templates of each family, n dishes",
                    text=correlation_text(metrics.get("map_mws_correlation"))
                    if measure == "mws"
                    else "",
                    tables=(family_markdown(metrics[measure], dish_counts(metrics), scale),),
                )
            )
    overall = ResultsTable.of(metrics).overall
    figures: list[Any] = [
        result_bars(
            metrics,
            "group",
            f"map_{family}",
            "mAP (%)",
            title=f"mAP per country group, {family} templates",
        )
        for family in FAMILIES
        if f"map_{family}" in overall
    ]
    heat = template_heatmap(
        metrics.get("templates", {}), dish_counts(metrics), template_families(records)
    )
    if heat is not None:
        figures.append(heat)
    out.append(
        Section(
            "mAP per country group and per template",
            text="Bars (the paper's per-group view): mAP of each group, the mean over the family's "
            "templates, with its 95% interval over dishes and n.",
            figures=tuple(figures),
        )
    )
    return out


def chat_section(config: RunRecord, records: Sequence[Record], chat: Mapping[str, Any]) -> Section:
    """Chat mode: accuracy (%) per prompt cell (template / instruction) and group, each with its n
    dishes.
    """
    group_by = config.options.get("group_by", "group")
    counts: Counter[tuple[str, str]] = Counter()
    for r in records:
        if not r.skipped:
            cell = f"{r['template']} / {r['instruction']}"
            counts.update([(cell, r[group_by] or "unknown"), (cell, ALL)])
    groups = sorted({g for cell in chat.values() for g in cell}, key=lambda g: (g != ALL, g))
    rows = tuple(
        (cell, *(with_n(v.get(g), counts[cell, g], "%") for g in groups))
        for cell, v in chat.items()
    )
    return Section(
        "Chat mode: accuracy (%) per template and instruction",
        text="A dish counts when an item of the reply equals a gold ingredient after "
        "normalisation (an approximation of the paper's unreleased parser). Each cell: accuracy and its n dishes.",
        tables=(Table(("template / instruction", *groups), rows),),
    )


def dish_counts(metrics: Mapping[str, Any]) -> dict[tuple[str, str], int]:
    """{(family, group): dishes ranked}, from the results block (ALL: every group)."""
    table = ResultsTable.of(metrics)
    counts = {(f, ALL): e["n"] for f in FAMILIES if (e := table.overall.get(f"map_{f}"))}
    for group, cells in table.by("group").items():
        counts.update({(f, group): cells[f"map_{f}"]["n"] for f in FAMILIES if f"map_{f}" in cells})
    return counts


def template_families(records: Sequence[Record]) -> dict[str, str]:
    """{template: its family} of the ranking records."""
    return {r["template"]: r["family"] for r in records if not r.skipped and "family" in r}


def correlation_text(correlation: Mapping[str, Any] | None) -> str:
    """One sentence on how alike mAP and mWS rank this table's cells (the paper reports r = 0.66 for
    English).
    """
    if not correlation or correlation["pearson_r"] is None:
        return ""
    return (
        f"Pearson r between the mAP and mWS cells: {format_number(correlation['pearson_r'])} "
        f"({correlation['n_cells']} cells)."
    )


def family_markdown(
    table: Mapping[str, Mapping[str, Any]],
    counts: Mapping[tuple[str, str], int] | None = None,
    scale: Scale = "%",
) -> Table:
    """Groups as rows, families as columns, cells 'mean ± std' on `scale` (mAP: %, mWS: a cosine
    shown as a 0-1 score) and, given `counts` ({(family, group): dishes}), each cell's n, marked
    when small.
    """
    families = list(table)
    groups = sorted({g for cells in table.values() for g in cells}, key=lambda g: (g != ALL, g))

    def cell(family: str, group: str) -> str:
        value = table[family].get(group)
        if not value or value["mean"] is None:
            return ""
        std = "" if value["std"] is None else f" ± {format_number(value['std'], scale)}"
        n = (counts or {}).get((family, group))
        return marked(
            f"{format_number(value['mean'], scale)}{std}" + (f" (n={n})" if n is not None else ""),
            n,
        )

    return Table(("group", *families), tuple((g, *(cell(f, g) for f in families)) for g in groups))


def template_heatmap(
    per_template: Mapping[str, Mapping[str, Any]],
    counts: Mapping[tuple[str, str], int] | None = None,
    families: Mapping[str, str] | None = None,
) -> Heatmap | None:
    """The mAP per template (rows) and group (columns), each cell with its n dishes where known."""
    if not per_template:
        return None
    relations = list(per_template)
    groups = sorted(
        {g for v in per_template.values() for g in v["map"]}, key=lambda g: (g != ALL, g)
    )
    values = tuple(tuple(per_template[r]["map"].get(g) for g in groups) for r in relations)
    n = tuple(
        tuple((counts or {}).get(((families or {}).get(r, ""), g)) for g in groups)
        for r in relations
    )
    return Heatmap(
        tuple(relations),
        tuple(groups),
        values,
        label="mAP (%)",
        title="mAP per template and group",
        scale="%",
        counts=n if counts and families else (),
    )
