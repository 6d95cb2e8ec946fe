"""Metrics: pure functions (sequences in, dict out), and `load_metric` for their thin `evaluate`
modules.

Each function is the single source of truth for its formula: the generic ones here (intervals,
comparisons, RankC), each benchmark's own in its folder
(`culture_probe/benchmarks/<bench>/metrics.py`). The modules in `culture_probe/metrics_modules/`
(also reachable as `metrics/<name>` from the repository root) only declare inputs and call them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from culture_probe.errors import InvalidValueError, UnknownNameError
from culture_probe.metrics.compare import compare_groups
from culture_probe.metrics.consistency import agreement, rankc
from culture_probe.metrics.display import format_score

MODULES_DIR = Path(__file__).resolve().parent.parent / "metrics_modules"

__all__ = [
    "MODULES_DIR",
    "agreement",
    "compare_groups",
    "format_score",
    "list_metrics",
    "load_metric",
    "rankc",
]


def list_metrics() -> list[str]:
    """Names of the `evaluate` modules shipped with the package (each is also a function of this
    module).
    """
    return sorted(p.parent.name for p in MODULES_DIR.glob("*/*.py") if p.stem == p.parent.name)


def load_metric(name: str, **load_options: Any) -> Any:
    """`evaluate.load` of the named module inside the installed package, so it works from any
    directory.

    `load_options` go to `evaluate.load` (e.g. `experiment_id`, `num_process`, `process_id` for
    distributed evaluation). Example: `load_metric("cbs").compute(prompt_id=..., culture=...,
    score=...)`.
    """
    names = list_metrics()
    if not isinstance(name, str):
        raise InvalidValueError(
            f"load_metric(name) takes a metric's name, one of {', '.join(names)}; got {name!r}."
        )
    if name not in names:
        raise UnknownNameError(
            "metric", name, names, fix="See docs/metrics.md for what each metric computes."
        )
    import evaluate  # deferred: importing evaluate loads datasets and pyarrow

    return evaluate.load(str(MODULES_DIR / name), **load_options)
