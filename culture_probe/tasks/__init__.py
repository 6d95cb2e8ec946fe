"""Protocols: one per benchmark, the `task` module of its folder
(`culture_probe/benchmarks/<name>/task.py`) defining `TASK` (a `Task` subclass).

A config name is mapped to its protocol through the declaration of the benchmark whose data module
defines the config (`culture_probe.benchmarks.declaration`). See `base` for how to add a task.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from culture_probe.data.registry import Benchmark, resolve
from culture_probe.errors import CultureProbeError
from culture_probe.record import SamplingDesign
from culture_probe.tasks.base import ModelNeed, Scores, Stage, Task
from culture_probe.tasks.deviations import Deviation
from culture_probe.tasks.options import options_from_dict, parse_options
from culture_probe.tasks.probes import (
    FillMaskProbe,
    GenerateProbe,
    Probe,
    Record,
    ScoreProbe,
    Skipped,
)
from culture_probe.tasks.sampling import Parallel, Smoke

__all__ = [
    "Deviation",
    "FillMaskProbe",
    "GenerateProbe",
    "ModelNeed",
    "Parallel",
    "Probe",
    "Record",
    "SamplingDesign",
    "ScoreProbe",
    "Scores",
    "Skipped",
    "Smoke",
    "Stage",
    "Task",
    "benchmark_of",
    "parse_options",
    "task_for",
    "task_from_config",
]


def benchmark_of(config: str | Benchmark) -> str:
    """The benchmark (data module name) that defines `config`; unknown names list the valid
    configs.
    """
    return resolve(config).benchmark


def task_for(config: str | Benchmark) -> type[Task]:
    """The Task class that probes benchmark config `config` (unknown names list the valid configs):
    TASK of the protocol module its benchmark declares. Found here, by name, so that the data layer
    never reaches up into the protocols.
    """
    benchmark = resolve(config)
    declared = benchmark.declaration
    task = getattr(declared.part("task"), "TASK", None)
    if not (isinstance(task, type) and issubclass(task, Task)):
        raise CultureProbeError(
            f"Benchmark {benchmark.benchmark!r} (config {benchmark.name!r}) has no protocol: its module "
            f"{declared.module_name('task')} defines no TASK (a culture_probe.tasks.Task subclass)."
        )
    return task


def task_from_config(meta: Mapping[str, Any]) -> Task:
    """A run's Task rebuilt from its config.json, without resources: enough to read its records into
    metrics.
    """
    benchmark = resolve(meta["config"])
    task = task_for(benchmark)
    return task(
        benchmark,
        options_from_dict(task.Options, meta["options"]),
        kind=meta["model"]["kind"],
        seed=meta["run"]["seed"],
    )
