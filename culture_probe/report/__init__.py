"""Reports of runs, built from the run directory alone: `culture-probe report RUN_DIR` (report.md +
PNG plots) and `culture-probe compare DIR...`.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from culture_probe import rundir
from culture_probe.loading import recomputed_metrics
from culture_probe.metrics.display import SMALL_N_MARK, SMALL_N_NOTE
from culture_probe.record import Metrics, ResultsTable, RunRecord
from culture_probe.report.compare import COMPARISON, Comparison, compare_runs, write_comparison
from culture_probe.report.compare_suites import SuiteComparison, compare_folders, compare_suites
from culture_probe.report.consistency import (
    CONSISTENCY,
    consistency_of_runs,
    consistency_sections,
    write_consistency,
)
from culture_probe.report.markdown import render
from culture_probe.report.summary import (
    SuiteRun,
    listed,
    planned_of,
    read_summary,
    summarize_suite,
    summary_lines,
    write_summary,
)
from culture_probe.report.views import (
    Section,
    estimate_line,
    language_country_grid,
    planted_rows,
    results_sections,
    scales_of,
    sections_for,
)
from culture_probe.tasks import Record
from culture_probe.util import outfolder
from culture_probe.util.typecheck import checked

__all__ = [
    "Comparison",
    "compare_main",
    "compare_runs",
    "compare_suites",
    "SuiteComparison",
    "headline",
    "language_country_grid",
    "load_run",
    "main",
    "write_comparison",
    "write_report",
]


@checked()
def write_report(
    run_dir: str | os.PathLike,
    *,
    config: RunRecord,
    records: Sequence[Record],
    metrics: Metrics,
    status: str | None = None,
) -> Path:
    """Write `report.md` and `plots/` (PNG and PDF) into `run_dir`; returns the report's path.
    `config` is the run's config.json as a `RunRecord` (`RunResult.config`, or
    `RunRecord.from_json`); `status` marks an interrupted run (`INCOMPLETE k/N`).
    """
    run_dir = Path(run_dir)
    path = run_dir / rundir.REPORT_FILE
    sections = report_sections(config, records, metrics)
    rundir.write_text(
        path, render(sections, config, run_dir, status, truncation=metrics.get("truncation"))
    )
    return path


def report_sections(
    config: RunRecord, records: Sequence[Record], metrics: Metrics
) -> list[Section]:
    """The run's sections; when the benchmark's views fail, one warning naming the error and a
    report of the headline numbers alone (metrics.json is already written: the run is never lost to
    its report).
    """
    try:
        return sections_for(config, records, metrics, more=consistency_sections(metrics))
    except Exception as error:  # noqa: BLE001 - a bug in a view costs the views, not the run
        message = f"the benchmark's report views failed ({type(error).__name__}: {error})"
        warnings.warn(
            f"{config.config}: {message}; report.md has the headline numbers only.", stacklevel=2
        )
        failed = Section(
            "Views not written", text=f"*{message}; `culture-probe report RUN_DIR` retries them.*"
        )
        return [*results_sections(metrics, scales_of(config.config)), failed]


@checked()
def load_run(run_dir: str | Path) -> tuple[RunRecord, list[Record], Metrics]:
    """(config, records, metrics) of a run directory, as `run` returns them (config.json as a
    `RunRecord`: `to_json()` is the document); metrics are recomputed from the records when
    metrics.json is missing (an interrupted run reports what it has).
    """
    run = rundir.read_run(run_dir)
    return run.record, run.records, metrics_of(run)


def metrics_of(run: rundir.Run) -> Metrics:
    """A run's metrics.json, or its metrics recomputed from its records when the run did not finish
    (checked as metrics.json is).
    """
    if run.metrics is not None:
        return run.metrics
    return recomputed_metrics(run.path, run.record, run.records)


def headline(config: RunRecord, metrics: Metrics, status: str | None = None) -> str:
    """A few lines for the terminal: the run, each overall number with its 95% interval (or why
    none), n and chance level, rounded as report.md rounds them, and what was left out; `status`
    (`INCOMPLETE k/N`) marks a run that did not finish on its first line, so its numbers never read
    as a finished run's.
    """
    results = ResultsTable.of(metrics)
    scales, chance = scales_of(config.config), results.chance
    mark = f": {status}, numbers so far" if status else ""
    lines = [f"{config.config} on {config.model.spec} ({config.model.kind}){mark}"]
    lines += [
        "  "
        + estimate_line(
            name, e, scales.get(name), results.unit, chance.get(name), results.observations
        )
        for name, e in results.overall.items()
        if e["value"] is not None
    ]
    lines += [
        f"  {side}: {name} {value} {interval} (n={n})".rstrip()
        for side, name, value, interval, n in planted_rows(metrics, scales)
    ]
    lines += [f"  {name}: not reported ({reason})" for name, reason in results.omitted.items()]
    lines += [f"  {name}: warning: {warning}" for name, warning in results.warnings.items()]
    if any(SMALL_N_MARK in line for line in lines):
        lines.append(f"  {SMALL_N_NOTE}")
    return "\n".join(lines)


def main(args: Any) -> int:
    """`culture-probe report DIR`: (re)write report.md and plots from a run's files; for a suite
    folder, every run's report and the suite's summary.
    """
    folder = Path(args.run_dir)
    if is_suite(folder):
        paths = rerender_suite(folder)
        print(summary_lines(read_summary(folder)))
    else:
        path, run = rerender_run(folder)
        paths = [path]
        # a finished run's numbers are in report.md; an interrupted one's are said to be partial
        if run.status:
            print(headline(run.config, run.metrics, run.status))
    print("\n".join(f"wrote {path}" for path in paths))
    return 0


def rerender_run(run_dir: Path) -> tuple[Path, SuiteRun]:
    """report.md and plots of one run directory from its files (an interrupted run is marked
    INCOMPLETE); returns the report's path and the run's config and metrics.
    """
    run = rundir.read_run(run_dir)
    metrics, status = metrics_of(run), rundir.progress(run)
    path = write_report(
        run_dir, config=run.record, records=run.records, metrics=metrics, status=status
    )
    return path, SuiteRun(run.record, metrics, status)


def is_suite(folder: Path) -> bool:
    """Whether `folder` is a suite's (a run directory per config) rather than one run's."""
    return rundir.folder_kind(folder) == "suite"


def rerender_suite(folder: Path) -> list[Path]:
    """Every run's report in a suite folder (in suite.json's order, then any run it does not list
    yet, such as one interrupted), and the summary rebuilt from their files.
    """
    stored = read_summary(folder)
    rendered = {
        name: rerender_run(folder / name) for name in rundir.runs_in(folder, listed(stored))
    }
    model = stored.get("model") or ", ".join(
        dict.fromkeys(r.config.model.spec for _, r in rendered.values())
    )
    runs = {name: run for name, (_, run) in rendered.items()}
    summary = summarize_suite(model, runs, stored.get("skipped"), planned_of(stored))
    return [*(path for path, _ in rendered.values()), write_summary(folder, summary)]


def suite_runs(folder: Path) -> dict[str, SuiteRun]:
    """The runs a suite folder holds (suite.json's order, then the others), read from their files; a
    run directory without an answered probe holds none yet.
    """
    runs = [
        rundir.read_run(folder / name)
        for name in rundir.runs_in(folder, listed(read_summary(folder)))
    ]
    return {
        run.path.name: SuiteRun(run.record, metrics_of(run), rundir.progress(run))
        for run in runs
        if run.records or run.metrics
    }


def consistency_main(args: Any) -> int:
    """`culture-probe consistency RUN_A RUN_B`: two runs of one model in two languages, paired fact
    by fact (stdout; with --out, consistency.md with its heatmap and consistency.json in that
    folder).
    """
    if args.out is not None:
        # a folder it may not write is refused before the runs are read
        outfolder.check(args.out, CONSISTENCY)
    result = consistency_of_runs(*args.run_dirs)
    print(result.markdown(), end="")
    if args.out is not None:
        for path in write_consistency(result, args.out):
            print(f"wrote {path}")
    return 0


def compare_main(args: Any) -> int:
    """`culture-probe compare RUN_A RUN_B ...`: the runs' numbers lined up, paired differences of
    runs on the same items (stdout; with --out, compare.md, compare.json and the plot in that
    folder); `compare SUITE_A SUITE_B ...`: the suites paired config by config, in one report with
    one Holm family.
    """
    if args.out is not None:
        # a folder it may not write is refused before the runs are read
        outfolder.check(args.out, COMPARISON)
    comparison = compare_folders(args.run_dirs, paired=not args.unpaired)
    print(comparison.markdown(), end="")
    if args.out is not None:
        for path in write_comparison(comparison, args.out):
            print(f"wrote {path}")
    return 0
