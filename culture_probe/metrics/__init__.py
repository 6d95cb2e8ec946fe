"""Metrics: pure functions (sequences in, dict out), and `load_metric` for their thin `evaluate` modules.

Each function is the single source of truth for its formula; the modules in `culture_probe/metrics_modules/`
(also reachable as `metrics/<name>` from the repository root) only declare inputs and call it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from culture_probe.errors import InvalidValueError, UnknownNameError
from culture_probe.metrics.camel import cbs, fairness_gap, odds_ratio
from culture_probe.metrics.compare import compare_groups
from culture_probe.metrics.consistency import agreement, rankc
from culture_probe.metrics.display import format_score
from culture_probe.metrics.dlama import hits_at_k, object_entropy, precision_at_k, rank_candidates
from culture_probe.metrics.fmlama import (
    map_mws_correlation,
    mean_average_precision,
    mws,
    template_mean_std,
)
from culture_probe.metrics.maps import culture_gap, delta_en, maps, memorisation_rate
from culture_probe.metrics.xfakt import ASSOCIATIONS, xfakt, xfakt_scores

MODULES_DIR = Path(__file__).resolve().parent.parent / "metrics_modules"

__all__ = [
    "ASSOCIATIONS",
    "MODULES_DIR",
    "agreement",
    "cbs",
    "compare_groups",
    "culture_gap",
    "delta_en",
    "fairness_gap",
    "format_score",
    "hits_at_k",
    "list_metrics",
    "load_metric",
    "map_mws_correlation",
    "maps",
    "mean_average_precision",
    "memorisation_rate",
    "mws",
    "object_entropy",
    "odds_ratio",
    "precision_at_k",
    "rank_candidates",
    "rankc",
    "template_mean_std",
    "xfakt",
    "xfakt_scores",
]


def list_metrics() -> list[str]:
    """Names of the `evaluate` modules shipped with the package (each is also a function of this module)."""
    return sorted(p.parent.name for p in MODULES_DIR.glob("*/*.py") if p.stem == p.parent.name)


def load_metric(name: str, **load_options: Any) -> Any:
    """`evaluate.load` of the named module inside the installed package, so it works from any directory.

    `load_options` go to `evaluate.load` (e.g. `experiment_id`, `num_process`, `process_id` for distributed
    evaluation). Example: `load_metric("cbs").compute(prompt_id=..., culture=..., score=...)`.
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
