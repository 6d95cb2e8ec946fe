"""Protocols: one module per benchmark, `culture_probe/tasks/<bench>.py` defining `TASK` (a `Task` subclass).

A config name is mapped to its protocol by convention: the data module that defines the config
(`culture_probe/data/dlama.py` for `dlama_arab_west`) has a twin of the same name here. See `base` for how to
add a task.
"""

from __future__ import annotations

import importlib

from culture_probe.errors import CultureProbeError
from culture_probe.tasks.base import (
    Bars,
    FillMaskProbe,
    GenerateProbe,
    Heatmap,
    Probe,
    ScoreProbe,
    Section,
    Table,
    Task,
    parse_options,
)

__all__ = [
    "Bars", "FillMaskProbe", "GenerateProbe", "Heatmap", "Probe", "ScoreProbe", "Section", "Table", "Task",
    "parse_options", "task_for",
]


def task_for(config: str) -> type[Task]:
    """The Task class that probes benchmark config `config` (unknown names list the valid configs)."""
    from culture_probe.data.registry import resolve

    data_module, _ = resolve(config)
    bench = data_module.__name__.rsplit(".", 1)[-1]
    try:
        module = importlib.import_module(f"{__name__}.{bench}")
    except ModuleNotFoundError as error:
        if error.name != f"{__name__}.{bench}":
            raise
        raise CultureProbeError(
            f"Benchmark {bench!r} (config {config!r}) has no protocol yet: expected "
            f"culture_probe/tasks/{bench}.py defining TASK."
        ) from None
    return module.TASK
