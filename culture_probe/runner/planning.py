"""What a run decides before its model loads: the config resolved, its options, rows and resources
checked, the first stage's probes, and what a `--limit` (or `--shard`) of them asks.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence, Set
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from culture_probe import shards
from culture_probe.data.registry import Benchmark, data_options_for, resolve
from culture_probe.engine.loading import ModelSpec
from culture_probe.engine.preview import Workload
from culture_probe.errors import (
    InvalidValueError,
    UnknownNameError,
)
from culture_probe.loading import SideData, load_rows, load_side_data
from culture_probe.runner.stage_models import StageModel, check_models
from culture_probe.settings import SMOKE, RunSettings
from culture_probe.tasks import Task, task_for
from culture_probe.tasks.base import asked_in
from culture_probe.tasks.options import parse_options
from culture_probe.tasks.probes import (
    Probe,
)


class SmallLimitWarning(UserWarning):
    """A `limit` below the benchmark's smoke limit: the run will lack some headline numbers (the
    message says which and why), said before any model loads.
    """


@dataclass(frozen=True)
class Plan:
    """What a run decides before its model loads: the protocol (options checked, resources loaded),
    its rows and its first stage's probes.
    """

    task: Task
    data: list[Mapping[str, Any]] = field(repr=False)
    side: SideData = field(repr=False)
    probes: list[Probe] = field(repr=False)
    # each stage's own model (a judge), resolved
    models: dict[str, StageModel] = field(default_factory=dict)
    # what the first stage's probes not yet answered put through the model, where a suite counted it
    # already
    work: Workload | None = None


def plan(
    config: str | Benchmark,
    model: ModelSpec,
    settings: RunSettings,
    options: Mapping[str, Any],
    *,
    rows: Sequence[Mapping[str, Any]] | None = None,
) -> Plan:
    """The run of `config` up to its first stage's probes, with no model loaded (its kind is read
    from its config): a bad option, language, template or resource fails here, and so does a model a
    stage cannot use (`check_models`). The config's name is resolved here, once: every later step
    gets its `Benchmark` (`task.benchmark`).
    """
    # the corrected twin's protocol too, not only its rows
    benchmark = resolve(config, corrected=settings.corrected)
    task_cls = task_for(benchmark)
    # the user's options, parsed once: a bad one fails before any data or model is read
    chosen = parse_options(task_cls.Options, options)
    check_language(benchmark, settings.language, custom_rows=rows is not None)
    data: list[Mapping[str, Any]] = (
        list(
            load_rows(
                benchmark,
                data_dir=settings.data_dir,
                corrected=settings.corrected,
                language=settings.language,
                options=data_options_for(benchmark, settings.data_options),
            )
        )
        if rows is None
        else check_custom_rows(benchmark, rows)
    )
    # before the model: a bad file is named
    side = load_side_data(benchmark, chosen, data_dir=settings.data_dir)
    # from its config: no weights loaded
    kind = model.kind()
    served = model.served
    # an upstream profile depends on the model's kind and the run's mode
    task_options = task_cls.with_profile(
        chosen, options, settings.protocol, kind, config=benchmark, served=served
    )
    if task_cls.needs(benchmark, task_options) != task_cls.needs(benchmark, chosen):
        side = load_side_data(benchmark, task_options, data_dir=settings.data_dir)
    task = task_cls(benchmark, task_options, kind=kind, seed=settings.seed, resources=side.values)
    # before any folder or weights
    models = check_models(task, model, settings)
    with custom_rows_read(benchmark, rows is not None):
        if settings.language is not None:
            data = task.select_language(data, settings.language)
        probes = task.build_probes(data, stage=task.stage_names[0])
    return Plan(task, data, side, probes, models)


def limit_for(
    config: str, task: Task, probes: Sequence[Probe], limit: int | float | str | None
) -> int | None:
    """The number of units a run probes (`Task.limit_unit`: items, or facts each asked in every
    language): `limit`; for "smoke" the benchmark's smoke limit; for a fraction, the units that
    share of each stratum draws (`Task.sample`). A number below the smoke limit that leaves headline
    numbers out warns (`SmallLimitWarning`), naming them and why.
    """
    if limit is None:
        return None
    smoke = task.smoke_limit(probes)
    if limit == SMOKE:
        return max(smoke, 1)  # a run without items still takes a limit of at least one
    unit = task.limit_unit
    if isinstance(limit, float):  # a share of each stratum: the number is what it draws
        sampled = task.sample(probes, limit)
        number = task.limit_units(sampled)
        asked = f"{limit} ({number} {unit})"
    else:
        number = int(limit)
        asked = str(number)
    if number >= smoke:  # every headline number has its items: nothing to say, nothing to draw
        return number
    if not isinstance(limit, float):
        sampled = task.sample(probes, number)
    shortfall = task.smoke_shortfall(probes, sampled)
    if shortfall:
        each = asked_in(task.parallel_values(probes))
        warnings.warn(
            f"--limit {asked} is below the smoke limit of {config} ({smoke} {unit}{each}): {shortfall}. "
            f"--limit {SMOKE} probes {smoke} {unit}.",
            SmallLimitWarning,
            stacklevel=3,
        )
    return number


def first_probes(
    config: str,
    task: Task,
    probes: Sequence[Probe],
    limit: int | float | str | None,
    known: Set[str] = frozenset(),
) -> tuple[int | None, list[Probe]]:
    """The first stage's probes a run asks under `limit` (`limit_for`, then `Task.sample`, which
    draws the model's `known` items and others by turns) and their item count (None: no limit, every
    probe).
    """
    number = limit_for(config, task, probes, limit)
    if number is None:
        return None, list(probes)
    sampled = task.sample(probes, limit if isinstance(limit, float) else number, known)
    # a smoke run asks its `Smoke.tags`
    return number, task.smoke.asked(sampled) if limit == SMOKE else sampled


def first_asked(
    task: Task, probes: Sequence[Probe], settings: RunSettings, model: ModelSpec
) -> tuple[int | None, shards.Part]:
    """The first stage's probes a run of `model` asks: under --limit (`first_probes`), then its
    --shard's units of them (all of them without a shard), with the limit's item count.
    """
    number, first = first_probes(task.config, task, probes, settings.limit, model.known_items())
    return number, shards.part_of(task, first, settings.shard)


@contextmanager
def custom_rows_read(benchmark: Benchmark, custom: bool) -> Iterator[None]:
    """Custom rows that lack a column the protocol reads: an error naming the column and the
    config's columns (its dataset features), before anything is probed, instead of a KeyError from
    inside the protocol.
    """
    try:
        yield
    except (KeyError, TypeError) as error:
        if not custom:
            raise
        columns = ", ".join(benchmark.features)
        what = (
            f"the column {error.args[0]!r}"
            if isinstance(error, KeyError)
            else "rows as JSON objects"
        )
        raise InvalidValueError(
            f"The custom rows lack {what}, which the {benchmark.name} protocol reads. Give rows with "
            f"its columns ({columns}), e.g. a run's rows.jsonl or load_benchmark({benchmark.name!r})."
        ) from None


def check_custom_rows(benchmark: Benchmark, rows: Any) -> list[Mapping[str, Any]]:
    """Custom rows as the config's dataset features take them: JSON objects whose columns hold a
    label of the label set or a value of the column's type (null only in a string column the
    protocol does not read as text). The first misfit is one error naming the row and the column,
    when the rows are read, not after the scoring that reads it.
    """
    if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Iterable):
        raise InvalidValueError(
            f"rows= takes a list of rows (dicts), got {type(rows).__name__}; rundir.read_rows reads a JSONL file."
        )
    config, features = benchmark.name, benchmark.features
    text_columns, rows = task_for(benchmark).text_columns, list(rows)
    for index, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise InvalidValueError(
                f"Custom row {index + 1} is {row!r}, not a JSON object of the {config} columns."
            )
        for column, value in row.items():
            feature = features.get(column)
            text = getattr(feature, "dtype", None) == "string"
            fits = feature is None or (value is None and text and column not in text_columns)
            problem = None if fits else _misfit(value, feature)
            if problem:
                raise InvalidValueError(
                    f"Custom row {index + 1} (id {row.get('id')!r}): {column} {problem}, which the {config} "
                    "protocol cannot read (a run's rows.jsonl or load_benchmark shows the columns)."
                )
    return rows


def _misfit(value: Any, feature: Any) -> str | None:
    """Why `value` does not fit a `datasets` feature (Value, ClassLabel, List): None when it
    does.
    """
    import datasets

    if value is None:
        return "is null"
    if isinstance(feature, datasets.ClassLabel):
        if value in feature.names or (type(value) is int and 0 <= value < feature.num_classes):
            return None
        return f"is {value!r}, not one of the labels {', '.join(map(repr, feature.names))}"
    if isinstance(feature, datasets.List):
        if not isinstance(value, (list, tuple)):
            return f"is {value!r}, not a list"
        return next(
            (f"holds an item that {p}" for p in (_misfit(v, feature.feature) for v in value) if p),
            None,
        )
    dtype = getattr(feature, "dtype", "")
    if dtype == "bool":  # 0/1 cells too, as the release's spreadsheets hold them
        return (
            None
            if isinstance(value, (bool, int, float)) and value in (True, False)
            else f"is {value!r}, not a bool"
        )
    kind = str if dtype == "string" else int  # int32, int64
    if isinstance(value, kind) and not isinstance(value, bool):
        return None
    return f"is {value!r}, not a {feature.dtype}"


def check_language(benchmark: Benchmark, language: str | None, *, custom_rows: bool) -> None:
    """A language the config does not have fails before anything loads (custom rows are checked on
    the rows).
    """
    if language is None or custom_rows:
        return
    languages = benchmark.languages
    if languages and language not in languages:
        raise UnknownNameError(
            "language", language, languages, fix=f"Config {benchmark.name!r} has these."
        )
