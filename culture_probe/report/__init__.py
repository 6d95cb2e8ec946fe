"""Reports of runs, built from the run directory alone: `culture-probe report RUN_DIR` (report.md + PNG plots)
and `culture-probe compare DIR...`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from pkgutil import extend_path
from typing import Any

from culture_probe import rundir
from culture_probe.loading import task_of_run
from culture_probe.report.compare import Comparison, compare_runs, write_comparison
from culture_probe.report.markdown import render
from culture_probe.report.views import language_country_grid, sections_for
from culture_probe.tasks import Record
from culture_probe.tasks.options import json_ready

# Benchmarks of your own, outside this checkout: a folder on sys.path holding culture_probe/data/<bench>.py and
# culture_probe/tasks/<bench>.py extends these packages (docs/adding-a-benchmark.md).
__path__ = extend_path(__path__, __name__)

__all__ = [
    "Comparison",
    "compare_main",
    "compare_runs",
    "headline",
    "language_country_grid",
    "load_run",
    "main",
    "write_comparison",
    "write_report",
]


def write_report(
    run_dir: str | os.PathLike,
    *,
    config: Mapping[str, Any],
    records: Sequence[Record],
    metrics: Mapping[str, Any],
    status: str | None = None,
) -> Path:
    """Write `report.md` and `plots/` (PNG and PDF) into `run_dir`; returns the report's path. `status` marks an
    interrupted run (`INCOMPLETE k/N`).
    """
    run_dir = Path(run_dir)
    path = run_dir / rundir.REPORT_FILE
    rundir.write_text(path, render(sections_for(config, records, metrics), config, run_dir, status))
    return path


def load_run(run_dir: str | Path) -> tuple[dict[str, Any], list[Record], dict[str, Any]]:
    """(config, records, metrics) of a run directory; metrics are recomputed from the records when metrics.json
    is missing (an interrupted run reports what it has).
    """
    run = rundir.read_run(run_dir)
    metrics = run.metrics
    if metrics is None:
        metrics = json_ready(task_of_run(run.config).compute_metrics(run.records))
    return run.config, run.records, metrics


def headline(config: Mapping[str, Any], metrics: Mapping[str, Any]) -> str:
    """A few lines for the terminal: the run, each overall number with its 95% interval, and what was left out."""
    results = metrics.get("results", {})
    lines = [f"{config['config']} on {config['model']['spec']} ({config['model']['kind']})"]
    for name, estimate in results.get("overall", {}).items():
        if estimate["value"] is not None:
            low, high = estimate["ci_low"], estimate["ci_high"]
            interval = f" [{low:.4g}, {high:.4g}]" if low is not None else ""
            lines.append(f"  {name}: {estimate['value']:.4g}{interval} (n={estimate['n']} {results.get('unit')})")
    lines += [f"  {name}: not reported ({reason})" for name, reason in results.get("omitted", {}).items()]
    return "\n".join(lines)


def main(args: Any) -> int:
    """`culture-probe report RUN_DIR`: (re)write report.md and plots from the run's files."""
    config, records, metrics = load_run(args.run_dir)
    status = rundir.progress(rundir.read_run(args.run_dir))
    path = write_report(args.run_dir, config=config, records=records, metrics=metrics, status=status)
    print(f"wrote {path}")
    return 0


def compare_main(args: Any) -> int:
    """`culture-probe compare RUN_A RUN_B ...`: the runs' numbers lined up, paired differences of runs on the same
    items (stdout; with --out, compare.md, compare.json and the plot in that folder).
    """
    comparison = compare_runs(args.run_dirs, paired=not args.unpaired)
    print(comparison.markdown(), end="")
    if args.out:
        for path in write_comparison(comparison, Path(args.out)):
            print(f"wrote {path}")
    return 0
