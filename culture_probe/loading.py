"""What a run loads before any model: the benchmark's rows, and its protocol with the resources it
declares.

The runner and the planted models both build their task here, so a protocol always gets its side
data from the same place as its rows (`data_dir`, the mirror, or the pinned URL), with the
provenance config.json records.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from culture_probe.data.registry import Benchmark, load_benchmark, quiet_progress, resolve
from culture_probe.data.resources import load_resources
from culture_probe.engine.types import ModelKind
from culture_probe.errors import InvalidValueError
from culture_probe.record import Metrics, RunRecord, read_metrics
from culture_probe.tasks import Record, Task, task_for, task_from_config
from culture_probe.tasks.options import json_ready


def load_rows(
    config: str | Benchmark,
    *,
    data_dir: str | os.PathLike | None = None,
    corrected: bool = False,
    language: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The `test` split of `config` as a list of dicts; with `language`, a builder that can build
    one language (DLAMA, X-FaKT) builds only that one (so a pair whose other language is missing
    still runs). `options` are the builder's (`load_benchmark`'s keywords, a run's
    `--data-option`s).
    """
    benchmark = resolve(config)
    only = dict(options or {})
    if language is not None and benchmark.module.BUILDER.LANGUAGE_FILTER:
        if "languages" in only and language not in only["languages"]:
            raise InvalidValueError(
                f"--language {language} is not among --data-option languages={','.join(only['languages'])}: "
                "give one of them."
            )
        only["languages"] = (language,)
    with quiet_progress():  # the run prints its own progress
        return load_benchmark(benchmark, data_dir=data_dir, corrected=corrected, **only)[
            "test"
        ].to_list()


@dataclass(frozen=True)
class SideData:
    """A protocol's declared resources, loaded: the values the task reads, and their provenance for
    config.json.
    """

    values: dict[str, Any]
    provenance: dict[str, Any]


def load_side_data(
    config: str | Benchmark, options: Any, *, data_dir: str | os.PathLike | None = None
) -> SideData:
    """The resources `config`'s protocol declares for `options`, loaded from `data_dir` (or the
    mirror, or the pinned URL). Needs no model: a bad resource option (a missing template file)
    fails before the model is touched.
    """
    benchmark = resolve(config)
    needs = task_for(benchmark).needs(benchmark, options)
    loaded = load_resources(needs, data_dir=data_dir)
    return SideData(
        {key: item.value for key, item in loaded.items()},
        {key: loaded[key].provenance(need) for key, need in needs.items()},
    )


def load_task(
    config: str | Benchmark,
    options: Any = None,
    *,
    kind: ModelKind,
    seed: int = 0,
    data_dir: str | os.PathLike | None = None,
) -> tuple[Task, dict[str, Any]]:
    """The protocol of `config` with its declared resources loaded, and their provenance for
    config.json.
    """
    benchmark = resolve(config)
    task_cls = task_for(benchmark)
    options = options if options is not None else task_cls.Options()
    side = load_side_data(benchmark, options, data_dir=data_dir)
    return task_cls(
        benchmark, options, kind=kind, seed=seed, resources=side.values
    ), side.provenance


def task_of_run(record: RunRecord) -> Task:
    """A run's Task rebuilt from its config.json, with its resources loaded again from the run's
    `data_dir` (or the mirror, or the pinned URL): what metrics need besides the records (FmLAMA's
    word vectors for mWS).
    """
    plain = task_from_config(record.to_json())
    return load_task(
        plain.benchmark,
        plain.options,
        kind=plain.kind,
        seed=plain.seed,
        data_dir=record.run.data_dir,
    )[0]


def recomputed_metrics(
    run_dir: os.PathLike | str, record: RunRecord, records: Sequence[Record]
) -> Metrics:
    """The metrics of a run's `records` (a run that did not finish, or whose metrics.json predates
    the results block), as its protocol computes them, checked as a metrics.json read back is.
    """
    metrics = json_ready(task_of_run(record).compute_metrics(records))
    return read_metrics(metrics, f"the metrics of {run_dir}'s records")
