"""`culture-probe compare SUITE_A SUITE_B ...`: two models' suites (or more) compared config by
config in one report, instead of one `compare` per config.

Each config that the first suite and another hold is paired as `compare RUN_A RUN_B` pairs two runs
(same items, the first suite the base: `report.compare.comparison_of`). Multiplicity: across configs
there is no single planned comparison, so every paired row of every config (each config's headline
overall included) is one family, its p-values Holm-adjusted together (`p (Holm)`), and the report
says how many tests it holds. A config that only one suite holds, that a suite skipped (with the
reason it gave), or whose runs cannot be paired (different items) is named as left out, never
dropped silently.

The report reads top down: the headline of each config (its metric overall in every suite and the
paired difference), the notes and what was left out, then every paired row.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from culture_probe import rundir
from culture_probe.errors import CultureProbeError
from culture_probe.metrics.compare import HOLM, holm
from culture_probe.metrics.display import format_number, format_p, interval_text
from culture_probe.report.compare import (
    Comparison,
    as_estimate,
    compare_runs,
    comparison_of,
    estimate_cell,
    load_for_comparison,
)
from culture_probe.report.markdown import table_markdown
from culture_probe.report.summary import planned_of, read_summary
from culture_probe.report.views import Table
from culture_probe.tasks.options import json_ready
from culture_probe.util.typecheck import checked


@dataclass(frozen=True)
class SuiteComparison:
    """What `compare` found across suites: each paired config's comparison (its rows' `p_holm`
    adjusted over the one family of every config's rows), and the configs left out, each with why.
    """

    suites: tuple[str, ...]
    configs: tuple[tuple[str, Comparison], ...]
    left_out: tuple[tuple[str, str], ...] = ()

    @property
    def rows(self) -> list[dict[str, Any]]:
        """Every paired row of every config, with its config."""
        return [{"config": name, **row} for name, c in self.configs for row in c.paired]

    @property
    def procedures(self) -> str:
        """`metric: procedure` for each metric paired, the procedure of its intervals and
        p-values.
        """
        found = {p["metric"]: p["method"] for p in self.rows}
        return "; ".join(f"{metric}: {method}" for metric, method in found.items())

    @property
    def tests(self) -> int:
        """How many tests the one Holm family holds (rows with a p-value)."""
        return sum(row["p_value"] is not None for row in self.rows)

    def markdown(self) -> str:
        """The headline of each config, the notes and the configs left out, then every paired
        row.
        """
        parts = [f"# {' vs '.join(self.suites)}, config by config", "", self.headline_markdown()]
        notes = [f"- **note** ({name}): {note}" for name, c in self.configs for note in c.notes]
        left = [f"- **left out**: {name}: {why}" for name, why in self.left_out]
        parts += ["", *notes, *left] if notes or left else []
        if self.rows:
            parts += [
                "",
                f"Paired differences (each suite's run minus the base's, {self.suites[0]}, on the same items; the "
                f"interval and p of each row come from one procedure, so the interval excludes 0 exactly when p < "
                f"0.05. {self.procedures}):",
                "",
                table_markdown(Table(PAIRED_COLUMNS, tuple(_paired_cells(self.configs)))),
            ]
        parts += ["", self.multiplicity_text()]
        return "\n".join(parts).strip() + "\n"

    def headline_markdown(self) -> str:
        """One row per config and suite beside the base: the headline overall in the base and in the
        suite, the paired difference, its p and Holm-adjusted p.
        """
        rows = []
        for name, c in self.configs:
            scale, values = c.scales.get(c.metric or ""), dict(c.headlines)
            planned = {
                p["run"]: p for p in c.paired if p["metric"] == c.metric and p["group"] == "overall"
            }
            for run in c.runs[1:]:
                row = planned.get(run)
                rows.append(
                    (
                        name,
                        c.metric or "",
                        estimate_cell(values.get(c.runs[0]), scale) or "not reported",
                        run,
                        estimate_cell(values.get(run), scale) or "not reported",
                        f"{format_number(row['difference'], scale)} {interval_text(as_estimate(row), scale)}".strip()
                        if row
                        else "not paired",
                        format_p(row["p_value"]) if row else "",
                        format_p(row["p_holm"]) if row else "",
                    )
                )
        columns = (
            "config",
            "metric",
            self.suites[0],
            "suite",
            "its value",
            "difference (95% CI)",
            "p",
            "p (Holm)",
        )
        title = f"**Headline** of each config: its metric overall, {self.suites[0]} the base."
        return f"{title}\n\n{table_markdown(Table(columns, tuple(rows)))}"

    def multiplicity_text(self) -> str:
        """How the p-values are adjusted: one family over every config's rows."""
        return (
            f"Multiplicity: {len(self.configs)} configs paired; their {self.tests} paired tests (every row above, "
            "each config's headline included) are one family, their p-values adjusted together by Holm's step-down "
            "procedure in p (Holm), which keeps the chance of any false positive among them at 5% when read against "
            "0.05. The 95% intervals are per row, not adjusted."
        )

    def to_json(self) -> dict[str, Any]:
        """compare.json of suites: each config's comparison, the family, and what was left out."""
        configs = {}
        for name, c in self.configs:
            found = c.to_json()
            found.pop("multiplicity")
            configs[name] = found
        return json_ready(
            {
                "suites": list(self.suites),
                "configs": configs,
                "multiplicity": {
                    "method": HOLM,
                    "family": "every paired row of every config",
                    "tests": self.tests,
                },
                "left_out": dict(self.left_out),
            }
        )


PAIRED_COLUMNS = ("config", "run", "metric", "group", "difference", "95% CI", "p", "p (Holm)", "n")


def _paired_cells(configs: Sequence[tuple[str, Comparison]]) -> list[tuple[Any, ...]]:
    return [
        (
            name,
            p["run"],
            p["metric"],
            p["group"],
            format_number(p["difference"], c.scales.get(p["metric"])),
            interval_text(as_estimate(p), c.scales.get(p["metric"])),
            format_p(p["p_value"]),
            format_p(p["p_holm"]),
            p["n"],
        )
        for name, c in configs
        for p in c.paired
    ]


@dataclass(frozen=True)
class Suite:
    """A suite folder read for a comparison: its name, its runs by config (suite.json's order), its
    skips.
    """

    name: str
    path: Path
    runs: tuple[str, ...]
    skipped: Mapping[str, str]

    @classmethod
    def read(cls, path: Path, name: str) -> Suite:
        """The suite in `path` (its suite.json checked by `read_summary`)."""
        summary = read_summary(path)
        runs = rundir.runs_in(path, planned_of(summary))
        return cls(name, path, tuple(runs), dict(summary.get("skipped") or {}))


@checked()
def compare_suites(
    suite_dirs: Sequence[str | os.PathLike], *, paired: bool = True
) -> SuiteComparison:
    """Pair the suites config by config with the first (`compare_runs` per config), in one report
    with one Holm family over every paired row; configs that cannot be paired are left out, each
    with why.
    """
    paths = [Path(d) for d in suite_dirs]
    names = [p.name for p in paths]
    names = names if len(set(names)) == len(names) else [str(p) for p in paths]
    suites = [Suite.read(p, n) for p, n in zip(paths, names, strict=True)]
    base, others = suites[0], suites[1:]
    order = list(dict.fromkeys(c for s in suites for c in s.runs))
    compared: list[tuple[str, Comparison]] = []
    left_out: list[tuple[str, str]] = []
    for config in order:
        holders = [s for s in others if config in s.runs]
        if config not in base.runs or not holders:
            left_out.append((config, _absent(config, suites)))
            continue
        runs = [load_for_comparison(s.path / config, s.name) for s in (base, *holders)]
        try:
            compared.append((config, comparison_of(runs, paired=paired)))
        except CultureProbeError as error:  # e.g. the runs probed different items
            left_out.append((config, f"not paired: {error}"))
    if not compared:
        raise CultureProbeError(
            f"The suites {', '.join(names)} share no config that can be paired: "
            + "; ".join(f"{c}: {why}" for c, why in left_out)
            + "."
        )
    return SuiteComparison(tuple(names), one_family(compared), tuple(left_out))


def _absent(config: str, suites: Sequence[Suite]) -> str:
    """Why a config is not paired: the suites that lack it, and the reason a suite that skipped it
    gave.
    """
    held = [s.name for s in suites if config in s.runs]
    why = [f"{s.name} skipped it ({s.skipped[config]})" for s in suites if config in s.skipped]
    lacking = [s.name for s in suites if config not in s.runs and config not in s.skipped]
    parts = [f"only in {', '.join(held)}" if held else "in no suite's runs"]
    parts += [f"no run in {', '.join(lacking)}"] if lacking else []
    return "; ".join(parts + why)


def one_family(compared: Sequence[tuple[str, Comparison]]) -> tuple[tuple[str, Comparison], ...]:
    """The comparisons with every paired row in one Holm family: no row planned, each `p_holm`
    adjusted over all.
    """
    rows = [row for _, c in compared for row in c.paired]
    adjusted = iter(holm(row["p_value"] for row in rows))
    return tuple(
        (
            name,
            replace(
                c,
                paired=tuple(
                    {**row, "planned": False, "p_holm": next(adjusted)} for row in c.paired
                ),
            ),
        )
        for name, c in compared
    )


def compare_folders(
    folders: Sequence[str | os.PathLike], *, paired: bool = True
) -> Comparison | SuiteComparison:
    """`culture-probe compare DIR...`: suites config by config when every folder is a suite's, else
    runs.
    """
    kinds = [rundir.folder_kind(Path(f)) == "suite" for f in folders]
    if any(kinds) and not all(kinds):
        suites = [str(f) for f, is_suite in zip(folders, kinds, strict=True) if is_suite]
        raise CultureProbeError(
            f"compare takes run directories or suite folders, not both: {', '.join(suites)} "
            f"{'is a suite' if len(suites) == 1 else 'are suites'}. Pass the suites alone (paired config by config), "
            "or runs of them (SUITE/CONFIG)."
        )
    if all(kinds) and len(folders) >= 2:
        return compare_suites(folders, paired=paired)
    return compare_runs([Path(f) for f in folders], paired=paired)
