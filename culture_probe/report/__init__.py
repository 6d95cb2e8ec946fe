"""Reports of runs, built from the run directory alone: `culture-probe report RUN_DIR` (report.md + PNG plots)
and `culture-probe compare DIR...`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from pkgutil import extend_path
from typing import Any

from culture_probe import rundir
from culture_probe.loading import task_of_run
from culture_probe.report.markdown import render, table_markdown
from culture_probe.report.views import Table, flatten, language_country_grid, sections_for
from culture_probe.tasks import Record
from culture_probe.tasks.options import json_ready

# Benchmarks of your own, outside this checkout: a folder on sys.path holding culture_probe/data/<bench>.py and
# culture_probe/tasks/<bench>.py extends these packages (docs/adding-a-benchmark.md).
__path__ = extend_path(__path__, __name__)

__all__ = [
    "compare_main", "compare_runs", "headline", "language_country_grid", "load_run", "main",
    "write_report",
]


def write_report(run_dir: str | Path, *, config: Mapping[str, Any], records: Sequence[Record],
                 metrics: Mapping[str, Any]) -> Path:
    """Write `report.md` and `plots/*.png` into `run_dir`; returns the report's path."""
    run_dir = Path(run_dir)
    path = run_dir / rundir.REPORT_FILE
    rundir.write_text(path, render(sections_for(config, records, metrics), config, run_dir))
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
    """A few lines for the terminal: the run and its top-level scalar metrics."""
    scalars = {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    lines = [f"{config['config']} on {config['model']['spec']} ({config['model']['kind']})"]
    lines += [f"  {k}: {v:.4g}" if isinstance(v, float) else f"  {k}: {v}" for k, v in scalars.items()]
    return "\n".join(lines)


def compare_runs(run_dirs: Sequence[str | Path]) -> str:
    """A markdown table with one column per run (named by its folder) and one row per numeric metric any of
    them has, after the model and config rows.
    """
    loaded = [load_run(d)[::2] for d in run_dirs]  # (config, metrics)
    configs = {c["config"] for c, _ in loaded}
    flat = [flatten(m) for _, m in loaded]
    keys = list(dict.fromkeys(k for f in flat for k, v in f.items() if _is_number(v)))
    names = [Path(d).name for d in run_dirs]  # short folder names, or the paths when two names collide
    columns = ("metric", *(names if len(set(names)) == len(names) else map(str, run_dirs)))
    rows = [("model", *(c["model"]["spec"] for c, _ in loaded)), ("config", *(c["config"] for c, _ in loaded))]
    rows += [(k, *(f.get(k) for f in flat)) for k in keys]
    note = "" if len(configs) == 1 else "\n\nNote: these runs probe different configs; compare with care."
    return table_markdown(Table(columns, tuple(rows))) + note


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def main(args: Any) -> int:
    """`culture-probe report RUN_DIR`: (re)write report.md and plots from the run's files."""
    config, records, metrics = load_run(args.run_dir)
    path = write_report(args.run_dir, config=config, records=records, metrics=metrics)
    print(f"wrote {path}")
    return 0


def compare_main(args: Any) -> int:
    """`culture-probe compare DIR...`: several runs side by side (stdout, or --out as markdown)."""
    table = compare_runs(args.run_dirs)
    if args.out:
        Path(args.out).write_text(table + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
    else:
        print(table)
    return 0
