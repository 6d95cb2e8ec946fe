"""culture_probe: measure what language models know about cultures, and how it depends on the
language you ask in.

`import culture_probe` stays light: torch-heavy names are loaded on first use through a module
`__getattr__`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from culture_probe.version import __version__

# a type checker sees each public name typed; at run time each loads on first use (`_LAZY`)
if TYPE_CHECKING:
    from culture_probe.data.registry import list_benchmarks, load_benchmark
    from culture_probe.engine import Scorer
    from culture_probe.engine.types import CandidateScores, ScoreRequest
    from culture_probe.hub.publish import push_to_hub
    from culture_probe.metrics import load_metric
    from culture_probe.record import RunRecord
    from culture_probe.runner import RunResult, run
    from culture_probe.runner.dryrun import dry_run
    from culture_probe.runner.suite import run_suite
    from culture_probe.settings import RunSettings


__all__ = [
    "CandidateScores",
    "RunRecord",
    "RunResult",
    "RunSettings",
    "ScoreRequest",
    "Scorer",
    "__version__",
    "dry_run",
    "list_benchmarks",
    "load_benchmark",
    "load_metric",
    "push_to_hub",
    "run",
    "run_suite",
]

_LAZY = {
    "load_benchmark": "culture_probe.data.registry",
    "list_benchmarks": "culture_probe.data.registry",
    "push_to_hub": "culture_probe.hub.publish",
    "load_metric": "culture_probe.metrics",
    "run": "culture_probe.runner",
    "RunResult": "culture_probe.runner",
    "RunRecord": "culture_probe.record",
    "RunSettings": "culture_probe.settings",
    "run_suite": "culture_probe.runner.suite",
    "dry_run": "culture_probe.runner.dryrun",
    "Scorer": "culture_probe.engine",
    "ScoreRequest": "culture_probe.engine.types",
    "CandidateScores": "culture_probe.engine.types",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'culture_probe' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
