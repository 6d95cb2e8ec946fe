"""`culture-probe compare RUN_A RUN_B ...`: the same metrics of several runs lined up (value and
interval), and, for runs of one config on the same items, paired differences against the first run
over the benchmark's unit, each with an interval and a p-value from one procedure (named in the
output), so that "p > 0.05" and "the 95% interval excludes 0" are never printed together; with a
figure (`plots.comparison_figure`): the paired differences as a forest plot, the headline first, or
the headline numbers side by side when nothing was paired.

Multiplicity: the headline metric overall is the planned comparison of each paired run and is not
adjusted; every other row of that run (other metrics overall, the headline per stratum) belongs to
one family whose p-values are Holm-adjusted (`p_holm`), and the table says how many tests each
family holds. A stratum with one unit has no paired test and no row: such strata are counted in one
line under the table; a stratum with exactly the units of an earlier row (a one-language run's
`language=en` is `overall`) is that row's test again, named under the table rather than counted
twice.

Runs of one config on different items are not paired silently: that is an error unless the user asks
for the unpaired table. Incomplete runs and runs of different configs are named in the notes.

The output reads top down: the headline comparison first (the headline metric overall of every run,
each run's `INCOMPLETE k/N` or smoke draw beside its number, and the planned paired difference),
then the notes, the numbers lined up (strata where every run has one unit are counted in one line,
not given rows of n=1 without an interval), then every paired difference.
"""

from __future__ import annotations

import functools
import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from culture_probe import rundir
from culture_probe.errors import CultureProbeError
from culture_probe.loading import recomputed_metrics, task_of_run
from culture_probe.metrics.compare import HOLM, holm
from culture_probe.metrics.display import Scale, format_number, format_p, interval_text
from culture_probe.metrics.results import paired_difference
from culture_probe.record import Estimate, Metrics, ResultsTable, RunRecord
from culture_probe.report.markdown import table_markdown
from culture_probe.report.plots import context_note
from culture_probe.report.views import Table, scales_of, unit_label
from culture_probe.tasks.options import json_ready
from culture_probe.util import outfolder
from culture_probe.util.extras import available
from culture_probe.util.typecheck import checked

PLANNED = "planned: not adjusted"  # the p (Holm) cell of the headline row


@dataclass(frozen=True)
class LoadedRun:
    """One run read for a comparison: its name, files, and whether it finished."""

    name: str
    config: RunRecord
    records: list[Any] = field(repr=False)
    metrics: Metrics = field(repr=False)
    status: str | None  # `INCOMPLETE k/N` for a run that did not finish

    @functools.cached_property
    def results(self) -> ResultsTable:
        """The run's results block (the one schema of every benchmark), every part present; read
        once.
        """
        return ResultsTable.of(self.metrics)


@dataclass(frozen=True)
class Comparison:
    """What `compare` found: the lined-up numbers, the paired differences, and what a reader must
    know.
    """

    runs: tuple[str, ...]
    table: Table
    paired: tuple[dict[str, Any], ...]
    notes: tuple[str, ...]
    metric: str | None = None  # the first run's headline metric (the plot's)
    # (run, its overall estimate of `metric`)
    headlines: tuple[tuple[str, Estimate | None], ...] = ()
    # the first run's metrics' scales, for the differences
    scales: Mapping[str, Scale] = field(default_factory=dict)
    one_unit: tuple[str, ...] = ()  # strata (`stratum=label`) of one unit: no paired test, no row
    # (stratum, the earlier row with the same units): the same test, no row
    repeats: tuple[tuple[str, str], ...] = ()
    # (run, its smoke or incomplete note; "" for a full, finished run)
    marks: tuple[tuple[str, str], ...] = ()
    # lined-up strata (`stratum=label`) where every run has one unit: counted, no row
    single: tuple[str, ...] = ()

    @property
    def context(self) -> tuple[str, ...]:
        """Each smoke or incomplete run's note (`run: smoke run: ...`), said in the figure."""
        return tuple(f"{run}: {note}" for run, note in self.marks if note)

    def markdown(self) -> str:
        """The comparison as markdown: the headline comparison, the notes, the table of values
        (strata of one unit counted under it), the paired differences.
        """
        parts = [self.headline_markdown()] if self.metric else []
        notes = [f"- **note**: {note}" for note in self.notes]
        parts += ["", *notes] if notes else []
        parts += ["", table_markdown(self.table)]
        parts += ["", single_text(self.single)] if self.single else []
        if self.paired:
            rows = tuple(
                (
                    p["run"],
                    p["metric"],
                    p["group"],
                    format_number(p["difference"], self.scales.get(p["metric"])),
                    interval_text(as_estimate(p), self.scales.get(p["metric"])),
                    format_p(p["p_value"]),
                    holm_cell(p),
                    p["n"],
                )
                for p in self.paired
            )
            procedures = "; ".join(
                f"{metric}: {method}" for metric, method in self.procedures.items()
            )
            parts += [
                "",
                f"Paired differences (run minus {self.runs[0]}, same items; the interval and p of each row come from "
                f"one procedure, so the interval excludes 0 exactly when p < 0.05. {procedures}):",
                "",
                table_markdown(
                    Table(
                        ("run", "metric", "group", "difference", "95% CI", "p", "p (Holm)", "n"),
                        rows,
                    )
                ),
                "",
                multiplicity_text(
                    self.metric if any(p["planned"] for p in self.paired) else None, self.tests
                ),
            ]
            parts += [
                line for text in left_out_text(self.one_unit, self.repeats) for line in ("", text)
            ]
        return "\n".join(parts).strip() + "\n"

    def headline_markdown(self) -> str:
        """The headline comparison: each run's headline metric overall (its smoke or incomplete note
        beside it) and its planned paired difference from the first run.
        """
        scale = self.scales.get(self.metric or "")
        planned = {p["run"]: p for p in self.paired if p["planned"]}
        notes = dict(self.marks)
        rows = []
        for index, (run, estimate) in enumerate(self.headlines):
            row = planned.get(run)
            difference = (
                f"{format_number(row['difference'], scale)} {interval_text(as_estimate(row), scale)}".strip()
                if row
                else ("(base)" if index == 0 else "not paired")
            )
            rows.append(
                (
                    run,
                    estimate_cell(estimate, scale) or "not reported",
                    difference,
                    format_p(row["p_value"]) if row else "",
                    notes.get(run, ""),
                )
            )
        columns = (
            "run",
            f"{unit_label(self.metric or '', scale)} overall",
            f"minus {self.runs[0]} (95% CI)",
            "p",
            "note",
        )
        title = f"**Headline**: {self.metric} overall (the planned comparison, not adjusted for multiplicity)."
        return f"{title}\n\n{table_markdown(Table(columns, tuple(rows)))}"

    @property
    def procedures(self) -> dict[str, str]:
        """{metric: the procedure that gave its paired intervals and p-values}."""
        return {p["metric"]: p["method"] for p in self.paired}

    @property
    def tests(self) -> dict[str, int]:
        """{run: how many tests its family of Holm-adjusted rows holds (the planned row not
        counted)}.
        """
        out = {p["run"]: 0 for p in self.paired}
        for p in self.paired:
            out[p["run"]] += p["p_holm"] is not None
        return out

    def to_json(self) -> dict[str, Any]:
        """The comparison as JSON (compare.json)."""
        return json_ready(
            {
                "runs": list(self.runs),
                "metric": self.metric,
                "headlines": dict(self.headlines),
                "columns": list(self.table.columns),
                "rows": [list(r) for r in self.table.rows],
                "paired": list(self.paired),
                "paired_procedures": self.procedures,
                "multiplicity": {
                    "method": HOLM,
                    "planned": f"{self.metric} overall",
                    "tests": self.tests,
                    "one_unit_strata": list(self.one_unit),
                    "repeated_strata": dict(self.repeats),
                },
                "single_unit_groups": list(self.single),
                "status": {run: note for run, note in self.marks if note},
                "notes": list(self.notes),
            }
        )


def load_for_comparison(run_dir: str | Path, name: str) -> LoadedRun:
    """A run with its results block (recomputed from the records when metrics.json is missing or
    predates it).
    """
    run = rundir.read_run(run_dir)
    metrics = run.metrics
    if metrics is None or "results" not in metrics:
        if not run.records:
            raise CultureProbeError(f"{run_dir} has no answered probe yet: nothing to compare.")
        metrics = recomputed_metrics(run.path, run.record, run.records)
    return LoadedRun(name, run.record, run.records, metrics, rundir.progress(run))


def incomplete_note(name: str, status: str) -> str:
    """What a reader of runs paired, lined up or summarised must know of one that did not finish
    (`status`: `INCOMPLETE k/N`).
    """
    return (
        f"{name} is {status} (no metrics.json): its numbers cover only the probes answered so far"
    )


@checked()
def compare_runs(run_dirs: Sequence[str | Path], *, paired: bool = True) -> Comparison:
    """Line up the runs' results; with `paired`, runs of the first run's config are paired with it
    on their units (an error when they probed different items). Names: folder names, or the paths
    when two collide.
    """
    if len(run_dirs) < 2:
        raise CultureProbeError(
            "compare needs at least two run directories (compare_runs(run_dirs))."
        )
    for index, run_dir in enumerate(run_dirs):
        if not isinstance(run_dir, (str, os.PathLike)):
            raise CultureProbeError(
                f"compare_runs(run_dirs) takes folders; item {index} is {run_dir!r:.80}."
            )
    names = [Path(d).name for d in run_dirs]
    names = names if len(set(names)) == len(names) else [str(d) for d in run_dirs]
    return comparison_of(
        [load_for_comparison(d, n) for d, n in zip(run_dirs, names, strict=True)], paired=paired
    )


def comparison_of(runs: Sequence[LoadedRun], *, paired: bool = True) -> Comparison:
    """The comparison of runs read (`compare_runs` without the reading): the first is the base."""
    names = [r.name for r in runs]
    notes = [incomplete_note(r.name, r.status) for r in runs if r.status]
    if len({r.config.config for r in runs}) > 1:
        notes.append(
            "these runs probe different configs; compare with care (only runs of "
            f"{runs[0].config.config} are paired with {runs[0].name})"
        )
    protocols = {r.name: r.config.run.protocol for r in runs}
    if len(set(protocols.values())) > 1:
        notes.append(
            "the runs use different protocol profiles ("
            + ", ".join(f"{n}: {p}" for n, p in protocols.items())
            + "); each run's report lists the deviations whose side differs"
        )
    differences: list[dict[str, Any]] = []
    one_unit: dict[str, None] = {}
    repeats: dict[str, str] = {}
    if paired:
        for other in runs[1:]:
            if other.config.config == runs[0].config.config:
                found = paired_rows(runs[0], other)
                differences += found.rows
                one_unit.update(dict.fromkeys(found.one_unit))
                repeats.update(found.repeats)
    metric = runs[0].results.headline
    headlines = tuple((r.name, r.results.estimate(metric)) for r in runs)
    scales = scales_of(runs[0].config.config)
    table, single = lined_up(runs)
    return Comparison(
        tuple(names),
        table,
        tuple(differences),
        tuple(notes),
        metric,
        headlines,
        scales,
        tuple(one_unit),
        tuple(repeats.items()),
        tuple((r.name, context_note(r.config.subset, r.status)) for r in runs),
        single,
    )


def lined_up(runs: Sequence[LoadedRun]) -> tuple[Table, tuple[str, ...]]:
    """One row per (group, metric) any run reports, one column per run (named with its `INCOMPLETE
    k/N`): value [ci_low, ci_high] (n); and the strata left out, those where every run has at most
    one unit (no interval).
    """
    grouped = [dict(run.results.groups()) for run in runs]
    keys = {
        (group, metric): None
        for groups in grouped
        for group, estimates in groups.items()
        for metric in estimates
    }
    single = {
        group: None
        for group, _ in keys
        if group != "overall"
        and all(e["n"] <= 1 for g in grouped for e in g.get(group, {}).values())
    }
    rows = [
        ("model", "", *(r.config.model.spec for r in runs)),
        ("config", "", *(r.config.config for r in runs)),
    ]
    scales = [scales_of(r.config.config) for r in runs]
    for group, metric in keys:
        if group in single:
            continue
        cells = [groups.get(group, {}).get(metric) for groups in grouped]
        rows.append(
            (
                group,
                metric,
                *(
                    estimate_cell(c, scale.get(metric))
                    for c, scale in zip(cells, scales, strict=True)
                ),
            )
        )
    columns = ("group", "metric", *(f"{r.name} ({r.status})" if r.status else r.name for r in runs))
    return Table(columns, tuple(rows)), tuple(single)


def counted_by_stratum(groups: Sequence[str]) -> str:
    """`language: 3, culture: 2` for groups named `language=ar`, ...: how many of them each stratum
    has.
    """
    counts = Counter(group.split("=", 1)[0] for group in groups)
    return ", ".join(f"{stratum}: {k}" for stratum, k in counts.items())


def single_text(groups: Sequence[str]) -> str:
    """The line under the lined-up numbers that counts the strata with one unit in every run, by
    stratum: an estimate of one unit has no interval, and rows of them bury the others (each run's
    metrics.json keeps them).
    """
    kinds = counted_by_stratum(groups)
    noun = "stratum with one unit is" if len(groups) == 1 else "strata with one unit each are"
    return (
        f"{len(groups)} {noun} not shown ({kinds}): an estimate of one unit has no interval; each run's "
        "metrics.json keeps them."
    )


@dataclass(frozen=True)
class PairedRows:
    """One run paired with the base: its rows, the planned one (the headline metric overall) first,
    each other row with its Holm-adjusted p-value (`p_holm`) over that family; and the strata that
    get no row: those of one unit (no test), and those whose units are an earlier row's (the same
    test again, which would count twice).
    """

    rows: tuple[dict[str, Any], ...]
    one_unit: tuple[str, ...]  # `stratum=label`
    repeats: tuple[tuple[str, str], ...] = ()  # (`stratum=label`, the earlier row's group)


def paired_rows(base: LoadedRun, other: LoadedRun) -> PairedRows:
    """`other` minus `base` for every metric, overall and per stratum of the headline metric (strata
    of one unit and strata with the units of an earlier row left out and named), with `planned` (the
    headline metric overall, not adjusted) and `p_holm` on each row.
    """
    if base.config.benchmark.rows_sha256 != other.config.benchmark.rows_sha256:
        raise CultureProbeError(
            f"Cannot pair {other.name} with {base.name}: they probed different rows of {base.config.config} "
            "(their rows_sha256 differ). Pair runs on the same data, or pass --unpaired to line them up only."
        )
    headline = base.results.headline
    tables = {t.metric: t for t in task_of_run(base.config).unit_tables(base.records)}
    others = {t.metric: t for t in task_of_run(other.config).unit_tables(other.records)}
    out, one_unit, repeats = [], [], []
    for metric, table in tables.items():
        if metric not in others:
            continue
        try:
            overall = paired_difference(others[metric], table, names=(other.name, base.name))
        except CultureProbeError as error:
            raise CultureProbeError(
                f"{error} (runs {base.name} and {other.name}; pass --unpaired to line them up without pairing)"
            ) from None
        out.append(
            {
                "run": other.name,
                "metric": metric,
                "group": "overall",
                **overall,
                "planned": metric == headline,
            }
        )
        if metric != headline:
            continue
        # the units of each row so far: a one-language run's language=en is `overall`
        seen: dict[bytes, str] = {}
        for stratum, labels in table.strata.items():
            seen.setdefault(np.ones(len(labels), dtype=bool).tobytes(), "overall")
            for label in sorted(set(labels)):
                group, mask = f"{stratum}={label}", np.asarray([x == label for x in labels])
                if mask.tobytes() in seen:
                    repeats.append((group, seen[mask.tobytes()]))
                    continue
                # its own rows' labels
                own = np.asarray([x == label for x in others[metric].strata[stratum]])
                result = paired_difference(others[metric].select(own), table.select(mask))
                # no test on one unit: counted under the table, not a row of blanks
                if result["n"] < 2:
                    one_unit.append(group)
                    continue
                seen[mask.tobytes()] = group
                out.append(
                    {
                        "run": other.name,
                        "metric": metric,
                        "group": group,
                        **result,
                        "planned": False,
                    }
                )
    # stable: the planned row first, the others in their order
    out.sort(key=lambda row: not row["planned"])
    family = [row for row in out if not row["planned"]]
    for row, adjusted in zip(family, holm(row["p_value"] for row in family), strict=True):
        row["p_holm"] = adjusted
    for row in out:
        row.setdefault("p_holm", None)
    return PairedRows(tuple(out), tuple(one_unit), tuple(repeats))


def holm_cell(row: Mapping[str, Any]) -> str:
    """A paired row's Holm-adjusted p as the table shows it; the planned row says it is not
    adjusted.
    """
    return PLANNED if row.get("planned") else format_p(row.get("p_holm"))


def multiplicity_text(planned: str | None, tests: Mapping[str, int]) -> str:
    """The sentence under a table of paired rows: which row was planned (the headline metric; None:
    no such row), how many tests each run's family holds.
    """
    counts = ", ".join(f"{run}: {k} test{'' if k == 1 else 's'}" for run, k in tests.items())
    first = (
        f"Multiplicity: the row marked planned ({planned} overall, the headline comparison) is not adjusted; the "
        "other rows"
        if planned
        else "Multiplicity: the rows"
    )
    return (
        f"{first} of each run are one family of exploratory tests ({counts}), their p-values adjusted by Holm's "
        "step-down procedure in p (Holm), which keeps the chance of any false positive in a family at 5% when read "
        "against 0.05. The 95% intervals are per row, not adjusted."
    )


def left_out_text(one_unit: Sequence[str], repeats: Sequence[tuple[str, str]]) -> list[str]:
    """The lines under a table of paired rows on the strata that have no row: those of one unit,
    counted (a paired test needs two units), and those with the units of an earlier row, named with
    it (the same test again).
    """
    lines = []
    if one_unit:
        kinds = counted_by_stratum(one_unit)
        noun = "stratum" if len(one_unit) == 1 else "strata"
        lines.append(
            f"Not listed: {len(one_unit)} {noun} of a single unit ({kinds}): a paired test needs at least two units."
        )
    if repeats:
        same = ", ".join(f"{group} (as {earlier})" for group, earlier in repeats)
        lines.append(f"Not listed, the same units and so the same test as an earlier row: {same}.")
    return lines


def as_estimate(row: Mapping[str, Any]) -> dict[str, Any]:
    """A paired row read as an estimate (its difference is the value), for `interval_text`."""
    return {**row, "value": row["difference"]}


def estimate_cell(estimate: Estimate | None, scale: Scale | None) -> str:
    """`value [low, high] (n=N)` by the one rounding rule, or the reason there is no interval."""
    if estimate is None or (number := estimate["value"]) is None:
        return ""
    value = format_number(float(number), scale)
    return f"{value} {interval_text(estimate, scale)} (n={estimate['n']})".replace("  ", " ")


COMPARISON = outfolder.Output(
    "comparison", ".culture_probe_compare", shared=True, locked=True, taken=rundir.folder_kind
)  # `compare --out`: a folder of the user's, whose other files stay; never a run's


class ComparisonReport(Protocol):
    """What `compare --out` writes: a comparison of runs, or of suites config by config."""

    def markdown(self) -> str:
        """compare.md."""
        ...

    def to_json(self) -> dict[str, Any]:
        """compare.json."""
        ...


def write_comparison(comparison: ComparisonReport, out: str | os.PathLike) -> list[Path]:
    """compare.md, compare.json and, for runs, the comparison plot (PNG and PDF, when matplotlib is
    installed) in `out`, built beside it and swapped in when complete
    (`culture_probe.util.outfolder`); the paths written.
    """
    from culture_probe.report.plots import draw_comparison

    with outfolder.rebuilding(out, COMPARISON) as build:
        rundir.write_text(build.folder / "compare.md", comparison.markdown())
        text = json.dumps(comparison.to_json(), ensure_ascii=False, indent=2) + "\n"
        rundir.write_text(build.folder / "compare.json", text)
        if isinstance(comparison, Comparison) and available("matplotlib"):
            draw_comparison(comparison, build.folder / "compare")
    return [Path(out) / name for name in build.files]
