"""`culture_probe.run(config, model, **options)` and `culture-probe run`: one benchmark config on one model.

One pipeline, in one direction (the only module that knows the order):
resolve the config and options -> validate them -> load rows and the task's declared resources -> build the first
stage's probes -> load the model -> engine, stage by stage -> typed records -> metrics -> report.
A bad option, language or limit fails before any data or model is loaded; a bad template or resource before the
model is loaded, which is also when a `limit` too small for the benchmark's headline numbers says what the run will
lack (`limit="smoke"` picks the smallest that has them all: `Task.smoke_limit`). A model a stage cannot use (no chat
template where the protocol asks through one, a kind it cannot ask, a judge that cannot be found) is refused then
too, from configs and tokenizers (`check_models`), before any folder is made; a stage's own model (an LLM judge) is
resolved there, with the memory its weights take. The run directory (`culture_probe.rundir`) makes an interrupted
run resumable: probes already in items.jsonl are skipped, a later stage whose options changed (another judge) is
asked again, and the engine cache makes a half-finished batch cheap. Under
`accelerate launch --num_processes N -m culture_probe run ...` every process runs this same code; the engine shards
each batch of requests and gathers the results in request order, and only rank 0 writes files.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Set
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from culture_probe import engine, rundir, shards
from culture_probe.data.registry import Benchmark, resolve
from culture_probe.engine.loading import (
    LoadOptions,
    default_cache_dir,
    known_items,
    load_dtype,
    model_description,
    parameter_count,
)
from culture_probe.engine.types import SERVED, ModelArgs, ModelKind, Truncation
from culture_probe.errors import (
    CultureProbeError,
    InvalidValueError,
    UnknownNameError,
    UnsupportedModelError,
    naming_folder,
)
from culture_probe.loading import SideData, load_rows, load_side_data
from culture_probe.models.planted_benchmarks import PLANTED_SOURCES
from culture_probe.provenance import ProcessLog
from culture_probe.record import RunRecord
from culture_probe.settings import SMOKE, RunSettings
from culture_probe.sharing import redacted
from culture_probe.tasks import Task, task_for, task_from_config
from culture_probe.tasks.base import ModelNeed, asked_in
from culture_probe.tasks.options import json_ready, options_dict, parse_options
from culture_probe.tasks.probes import (
    FillMaskProbe,
    GenerateProbe,
    Probe,
    Record,
    ScoreProbe,
    Skipped,
)
from culture_probe.tasks.routing import joined, options_per_config
from culture_probe.throughput import start_meter

CHUNK = 64  # probes per engine call: the unit of progress, of incremental writing and of resumption


class SmallLimitWarning(UserWarning):
    """A `limit` below the benchmark's smoke limit: the run will lack some headline numbers (the message says which
    and why), said before any model loads.
    """


@dataclass(frozen=True)
class RunResult:
    """What a run produced: the full configuration, one typed record per probe, and the metrics."""

    config: dict[str, Any]
    records: list[Record] = field(repr=False)
    metrics: dict[str, Any]
    run_dir: Path | None = None

    @property
    def record(self) -> RunRecord:
        """`config` typed, as reports read it (`config` stays the dict config.json holds)."""
        return RunRecord.from_json(self.config)

    def task(self) -> Task:
        """The protocol object of this run (without resources: enough to read its records)."""
        return task_from_config(self.config)

    def write_report(self, run_dir: str | os.PathLike) -> Path:
        """Write report.md and plots of this result into `run_dir` (e.g. for a run made without `out`)."""
        from culture_probe.report import write_report

        Path(run_dir).mkdir(parents=True, exist_ok=True)
        return write_report(run_dir, config=self.config, records=self.records, metrics=self.metrics)


def run(
    config: str,
    model: Any,
    settings: RunSettings | None = None,
    *,
    out: str | os.PathLike | None = None,
    resume: bool = False,
    rows: Sequence[Mapping[str, Any]] | None = None,
    progress: bool = True,
    options: Mapping[str, Any] | None = None,
    **keywords: Any,
) -> RunResult:
    """Probe `model` (an id, a local dir, `planted:<config>`, `openai:<name>`, or a loaded `Scorer`) on benchmark
    `config`.

    `settings` (`RunSettings`) are the runner's switches; any of its fields may be given as a keyword instead
    (`limit="smoke"`, `seed=1`, `model_args="dtype=bfloat16"`, and the shorthands `dtype=`, `revision=`), over
    `settings` when both are given. The other keywords, and `options`, are the protocol's switches (the task's
    `Options` fields, e.g. `judge="string"`; a key of `options` may name the config or its benchmark before a dot, as
    in a suite: `{"xfakt.judge": "string"}`); `protocol="upstream"` sets every option that reproduces the
    benchmark's released code (options given here still win). `rows` replaces the loaded `test` split (tests,
    custom data). With `out`, the run directory is written; `resume` continues the run in it. See `RunSettings` for
    what each setting does (`limit`: N items, a share of each stratum, or "smoke"; `cache_dir`/`no_cache`: the
    per-model score cache; `base_url`, `concurrency`, `request_timeout`, `max_retries`: an `openai:<name>` model's
    server).
    """
    if not isinstance(config, str):
        several = (
            " (several configs: culture_probe.run_suite)"
            if isinstance(config, (list, tuple))
            else ""
        )
        raise InvalidValueError(
            f"run(config) takes one benchmark config name, e.g. 'maps_en'; got {config!r}{several}."
        )
    if settings is not None and not isinstance(settings, RunSettings):
        raise InvalidValueError(
            f"run(config, model, settings) takes a RunSettings as settings, got {settings!r} (settings as keywords: "
            "run(config, model, limit=10))."
        )
    settings, protocol = RunSettings.split(keywords, settings)
    # the name looked up once, and handed down
    benchmark = resolve(config, corrected=settings.corrected)
    # before anything loads
    protocol = options_per_config([benchmark], joined(options, protocol))[benchmark.name]
    return run_with(
        benchmark, model, settings, protocol, out=out, resume=resume, rows=rows, progress=progress
    )


def run_with(
    config: str | Benchmark,
    model: Any,
    settings: RunSettings,
    options: Mapping[str, Any],
    *,
    out: str | os.PathLike | None = None,
    resume: bool = False,
    rows: Sequence[Mapping[str, Any]] | None = None,
    progress: bool = True,
    scorer: Any = None,
    prepared: Plan | None = None,
) -> RunResult:
    """`run` with its settings and protocol options apart. `scorer` is `model` already loaded (a suite loads its
    model once; the run records `model` as named), and `prepared` is this run's plan, made already with the same
    settings (a suite plans every config before its model loads).
    """
    if not isinstance(model, (str, os.PathLike)) and not hasattr(scorer or model, "kind"):
        raise InvalidValueError(
            f"run(config, model) takes a model: a Hub id or local folder, 'planted:<config>', 'openai:<name>' or a "
            f"loaded Scorer; got {model!r}."
        )
    started = time.monotonic()
    run_dir = Path(out) if out is not None else None
    main = is_main_process()
    if run_dir is not None:  # first: never load data or a model to find --out refused
        rundir.check_start(run_dir, resume=resume, folder=main)  # only the writer checks the folder
    # a second writer of the same folder fails at once, before anything loads (a folder made here and left empty
    # by a refusal while planning is removed again)
    with rundir.lock(run_dir if main else None):
        ahead = (
            prepared
            if prepared is not None
            else plan(config, model, settings, options, rows=rows, scorer=scorer)
        )
        task, data, every = ahead.task, ahead.data, ahead.probes
        for stage, other in ahead.models.items() if main else ():
            warnings.warn(other.describe(stage), StageModelNotice, stacklevel=3)
        number, part = first_asked(task, every, settings, model)
        first = part.probes
        scorer = load_scorer(model, settings) if scorer is None else scorer
        custom, folder = rows is not None, run_dir is not None
        meta = describe_plan(
            model, scorer, ahead, settings, number, first, rows=custom, folder=folder
        )
        # config.json's run.limit: the number the run probed
        settings = replace(settings, limit=number)
        # a full disk names the folder, and the space the rest of the records need
        with naming_folder(run_dir or Path("."), needed=lambda: space_needed(run_dir, len(first))):
            done = open_folder(
                run_dir, meta, data, custom_rows=rows is not None, resume=resume, main=main
            )
            # a shard's place in the whole run, which the merge sorts by
            part.save(run_dir if main else None)
            log = ProcessLog.begin(
                run_dir,
                meta["versions"],
                done,
                clock=started,
                counting=counts_cuts(scorer),
                write=main,
            )
            items = run_dir / rundir.ITEMS_FILE if run_dir is not None and main else None
            writer = rundir.RecordWriter(items, bool(done))
            label = model_label(model)
            # says what the run will cost; keeps the rate it measured once it is written
            meter = start_meter(
                task.config,
                label,
                scorer,
                task.stages[0],
                first,
                done,
                began=started,
                show=progress,
            )
            try:
                records = execute(task, data, first, scorer, settings, done, writer, progress, log)
                meter.staged()
            finally:
                writer.close()
            metrics = json_ready(task.compute_metrics(records))
            if known := known_of(model, settings):
                metrics["planted"] = planted_split(task, records, known)
            # what the engine cut to fit the model, over every process of the run
            truncation = log.truncation()
            if truncation is not None:
                metrics["truncation"] = truncation
            meta = finish(run_dir if main else None, meta, records, metrics, log)
            if main:
                meter.keep(label, task.config)
    return RunResult(config=meta, records=records, metrics=metrics, run_dir=run_dir)


def planted_split(task: Task, records: Sequence[Record], known: Set[str]) -> dict[str, Any]:
    """The headline numbers on the items a planted model was trained on and on the others, each with its n, as
    `make demo`'s self-test shows them: {"planted": {"overall": ...}, "not planted": {...}}; a side with no records,
    or whose numbers the protocol cannot compute alone, gives its reason instead.
    """
    split: dict[str, Any] = {}
    for side, keep in (("planted", True), ("not planted", False)):
        part = [r for r in records if (r.item_id in known) == keep]
        if not part:
            split[side] = {"reason": "no item of this side was probed"}
            continue
        try:
            split[side] = {"overall": json_ready(task.compute_metrics(part))["results"]["overall"]}
        except CultureProbeError as error:
            split[side] = {"reason": str(error)}
    return split


def space_needed(run_dir: Path | None, planned: int) -> int | None:
    """Bytes the rest of a run's `planned` first-stage records need, at the mean size of the records written so far
    (None before the first is written).
    """
    items = run_dir / rundir.ITEMS_FILE if run_dir is not None else None
    if items is None or not items.is_file():
        return None
    with items.open("rb") as lines:
        written = sum(1 for _ in lines)
    return round(items.stat().st_size / written * max(planned - written, 1)) if written else None


def open_folder(
    run_dir: Path | None,
    meta: dict[str, Any],
    rows: Sequence[Mapping[str, Any]],
    *,
    custom_rows: bool,
    resume: bool,
    main: bool,
) -> list[Record]:
    """The run's folder (None: no folder) made with config.json, and rows.jsonl for custom `rows`, or reopened:
    returns the records a resumed run has already, kept after a change of options (`rundir.follow_options`).
    """
    done = rundir.prepare(run_dir, meta, resume=resume, main=main) if run_dir is not None else []
    if custom_rows and run_dir is not None and not done and main:
        rundir.write_jsonl(run_dir / rundir.ROWS_FILE, rows)
    # all ranks have read items.jsonl before any writes to it: they share one pending set
    _barrier()
    if run_dir is not None and done and main:
        # a resume with other options: their records and config
        rundir.follow_options(run_dir, meta, done)
    return done


def finish(
    run_dir: Path | None,
    meta: dict[str, Any],
    records: list[Record],
    metrics: dict[str, Any],
    log: ProcessLog,
) -> dict[str, Any]:
    """The run's config with the record of its processes (`ProcessLog.provenance`: the duration summed over them);
    in its folder (None: none, or another rank's), config.json so, metrics.json and the report.
    """
    log.finish()
    if run_dir is None:
        return {**meta, **log.provenance()}
    meta = rundir.record_finish(run_dir, log.provenance())
    rundir.write_json(run_dir / rundir.METRICS_FILE, metrics)
    from culture_probe.report import write_report

    write_report(run_dir, config=meta, records=records, metrics=metrics)
    return meta


@dataclass(frozen=True)
class Plan:
    """What a run decides before its model loads: the protocol (options checked, resources loaded), its rows and
    its first stage's probes.
    """

    task: Task
    data: list[Mapping[str, Any]] = field(repr=False)
    side: SideData = field(repr=False)
    probes: list[Probe] = field(repr=False)
    # each stage's own model (a judge), resolved
    models: dict[str, StageModel] = field(default_factory=dict)


def plan(
    config: str | Benchmark,
    model: Any,
    settings: RunSettings,
    options: Mapping[str, Any],
    *,
    rows: Sequence[Mapping[str, Any]] | None = None,
    scorer: Any = None,
) -> Plan:
    """The run of `config` up to its first stage's probes, with no model loaded (its kind is read from its config):
    a bad option, language, template or resource fails here, and so does a model a stage cannot use (`check_models`).
    The config's name is resolved here, once: every later step gets its `Benchmark` (`task.benchmark`).
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
            )
        )
        if rows is None
        else check_custom_rows(benchmark, rows)
    )
    # before the model: a bad file is named
    side = load_side_data(benchmark, chosen, data_dir=settings.data_dir)
    # from its config: no weights loaded
    kind = model_kind(model if scorer is None else scorer, settings)
    # a suite passes the name beside its scorer
    served = isinstance(model, str) and model.startswith(SERVED)
    # an upstream profile depends on the model's kind and the run's mode
    task_options = task_cls.with_profile(
        chosen, options, settings.protocol, kind, config=benchmark, served=served
    )
    if task_cls.needs(benchmark, task_options) != task_cls.needs(benchmark, chosen):
        side = load_side_data(benchmark, task_options, data_dir=settings.data_dir)
    task = task_cls(benchmark, task_options, kind=kind, seed=settings.seed, resources=side.values)
    # before any folder or weights
    models = check_models(task, model if scorer is None else scorer, settings)
    with custom_rows_read(benchmark, rows is not None):
        if settings.language is not None:
            data = task.select_language(data, settings.language)
        probes = task.build_probes(data, stage=task.stages[0])
    return Plan(task, data, side, probes, models)


def limit_for(
    config: str, task: Task, probes: Sequence[Probe], limit: int | float | str | None
) -> int | None:
    """The number of units a run probes (`Task.limit_unit`: items, or facts each asked in every language): `limit`;
    for "smoke" the benchmark's smoke limit; for a fraction, the units that share of each stratum draws
    (`Task.sample`). A number below the smoke limit that leaves headline numbers out warns (`SmallLimitWarning`),
    naming them and why.
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
    """The first stage's probes a run asks under `limit` (`limit_for`, then `Task.sample`, which draws the model's
    `known` items and others by turns) and their item count (None: no limit, every probe).
    """
    number = limit_for(config, task, probes, limit)
    if number is None:
        return None, list(probes)
    sampled = task.sample(probes, limit if isinstance(limit, float) else number, known)
    # a smoke run asks its `Smoke.tags`
    return number, task.smoke.asked(sampled) if limit == SMOKE else sampled


def first_asked(
    task: Task, probes: Sequence[Probe], settings: RunSettings, model: Any
) -> tuple[int | None, shards.Part]:
    """The first stage's probes a run of `model` asks: under --limit (`first_probes`), then its --shard's units of
    them (all of them without a shard), with the limit's item count.
    """
    number, first = first_probes(
        task.config, task, probes, settings.limit, known_of(model, settings)
    )
    return number, shards.part_of(task, first, settings.shard)


def known_of(model: Any, settings: RunSettings) -> frozenset[str]:
    """The items `model` was built to know (a planted model's planted items; `engine.known_items`), else none."""
    return known_items(model, load_options(settings))


# ---------------------------------------------------------------- validation and the model


@contextmanager
def custom_rows_read(benchmark: Benchmark, custom: bool) -> Iterator[None]:
    """Custom rows that lack a column the protocol reads: an error naming the column and the config's columns
    (its dataset features), before anything is probed, instead of a KeyError from inside the protocol.
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
    """Custom rows as the config's dataset features take them: JSON objects whose columns hold a label of the label
    set or a value of the column's type (null only in a string column the protocol does not read as text). The first
    misfit is one error naming the row and the column, when the rows are read, not after the scoring that reads it.
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
    """Why `value` does not fit a `datasets` feature (Value, ClassLabel, List): None when it does."""
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
    """A language the config does not have fails before anything loads (custom rows are checked on the rows)."""
    if language is None or custom_rows:
        return
    languages = benchmark.languages
    if languages and language not in languages:
        raise UnknownNameError(
            "language", language, languages, fix=f"Config {benchmark.name!r} has these."
        )


def load_options(settings: RunSettings) -> LoadOptions:
    """How the engine loads the run's model beside `settings.model_args`: its score cache in `default_cache_dir()`
    unless --cache-dir or --no-cache say otherwise.
    """
    return LoadOptions(
        kind=settings.kind,
        device=settings.device,
        batch_tokens=settings.batch_tokens,
        cache_dir=None if settings.no_cache else settings.cache_dir or default_cache_dir(),
        data_dir=settings.data_dir,
        base_url=settings.base_url,
        concurrency=settings.concurrency,
        request_timeout=settings.request_timeout,
        max_retries=settings.max_retries,
        sources=PLANTED_SOURCES,
    )


def model_kind(model: Any, settings: RunSettings) -> ModelKind:
    """The model's kind without loading its weights (`engine.model_kind`)."""
    return engine.model_kind(model, settings.model_args, load_options(settings))


def load_scorer(model: Any, settings: RunSettings) -> Any:
    """A scorer for `model` (`engine.load`), caching its scores in the model's file of the cache folder; an already
    loaded scorer is used as is.
    """
    return engine.load(model, settings.model_args, load_options(settings))


# ---------------------------------------------------------------- each stage's model, before any folder or weights


class StageModelNotice(UserWarning):
    """A stage answered by a model of its own (an LLM judge) and the memory its weights take, said before the first
    probe is asked.
    """


@dataclass(frozen=True)
class StageModel:
    """A stage's own model (an LLM judge) resolved from its config and tokenizer alone, before the first probe: its
    kind and the memory its weights take (`parameters` and `dtype`; None for a served model, held by its server).
    """

    name: str
    kind: str
    parameters: int | None = None
    dtype: str | None = None

    @property
    def weight_bytes(self) -> int | None:
        """Parameters x bytes per parameter of the dtype it loads in (the weights alone, not activations)."""
        if self.parameters is None or self.dtype is None:
            return None
        import torch

        return self.parameters * getattr(torch, self.dtype).itemsize

    def describe(self, stage: str) -> str:
        """One line for the terminal: which model answers `stage`, and its memory."""
        size = self.weight_bytes
        if size is None or self.parameters is None:
            return f"the {stage} stage is asked of {self.name} ({self.kind}), served: no weights load here."
        return (
            f"the {stage} stage loads {self.name} ({self.kind}) once the stages before it are done: "
            f"{_scaled(self.parameters, 1000, ('', 'K', 'M', 'B'))} parameters, "
            f"{_scaled(size, 1024, (' bytes', ' KiB', ' MiB', ' GiB'))} of weights in {self.dtype}."
        )

    def to_json(self) -> dict[str, Any]:
        """config.json's `stage_models` entry."""
        return {**asdict(self), "weight_bytes": self.weight_bytes}


def _scaled(value: int, base: int, units: tuple[str, ...]) -> str:
    """`value` in the largest of `units` (each `base` times the last) that keeps it at least 1: 72.7B, 135.4 GiB."""
    power = 0
    while power + 1 < len(units) and value >= base ** (power + 1):
        power += 1
    return f"{value / base**power:.1f}{units[power]}" if power else f"{value}{units[0]}"


def check_models(task: Task, model: Any, settings: RunSettings) -> dict[str, StageModel]:
    """Each stage's model checked against what the stage needs (`Task.model_need`), from configs and tokenizers
    only: the run's model where a stage asks it through its chat template, and each stage's own model, resolved
    (`resolve_stage_model`). A model that cannot serve fails here, before any folder is made or weights load.
    """
    models = {}
    for stage in task.stages:
        need, own = task.model_need(stage), task.stage_model(stage)
        if own is not None:
            models[stage] = resolve_stage_model(own, stage, need, stage_settings(settings))
        elif need.chat and (tokenizer := tokenizer_of(model, settings)) is not None:
            need.check_chat(tokenizer, model_label(model))
    return models


def resolve_stage_model(
    name: str, stage: str, need: ModelNeed, settings: RunSettings
) -> StageModel:
    """`stage`'s own model, its kind checked and its memory counted without weights; a model that cannot be found,
    read or asked fails naming the stage's alternatives (`need.instead`).
    """
    served = name.startswith(SERVED)  # its server holds the weights and applies the chat template
    try:
        kind = model_kind(name, settings)
        if not served:
            tokenizer, config = model_parts(name, settings)
    except CultureProbeError as error:
        reason = " ".join(str(error).split())
        raise UnsupportedModelError(
            f"The {stage} stage's model {name!r} cannot be used: {reason} Instead: {need.instead}."
        ) from None
    need.check_kind(kind, f"The {stage} stage")
    if served:
        return StageModel(name, kind)
    need.check_chat(tokenizer, name)
    return StageModel(
        name, kind, parameter_count(config, kind), load_dtype(config, settings.model_args)
    )


def tokenizer_of(model: Any, settings: RunSettings) -> Any:
    """The run's model's tokenizer, without its weights; None for a served model (its server holds the template)."""
    return engine.tokenizer_of(model, settings.model_args, load_options(settings))


def model_parts(name: str, settings: RunSettings) -> tuple[Any, Any]:
    """A model's tokenizer and transformers config, read without its weights (`engine.model_parts`)."""
    return engine.model_parts(name, settings.model_args, load_options(settings))


def model_label(model: Any) -> str:
    """How an error names the run's model: as given, or a loaded scorer's path."""
    if isinstance(model, (str, os.PathLike)):
        return str(model)
    identity = getattr(model, "identity", None)
    return str(identity.get("name_or_path")) if isinstance(identity, dict) else type(model).__name__


def stage_settings(settings: RunSettings) -> RunSettings:
    """The settings of a stage's own model: its kind detected, the default batch budget and revision (the run's
    --kind/--batch-tokens/--revision describe the probed model), dtype and device shared.
    """
    return replace(
        settings,
        kind="auto",
        batch_tokens=None,
        model_args=ModelArgs(dtype=settings.model_args.dtype),
    )


def describe_plan(
    model: Any,
    scorer: Any,
    ahead: Plan,
    settings: RunSettings,
    number: int | None,
    first: Sequence[Probe],
    *,
    rows: bool,
    folder: bool,
) -> dict[str, Any]:
    """config.json of the run `ahead` plans, asking the first stage's probes `first` (`first_probes`: `number` units
    under `settings.limit`) of `scorer`; `rows`: on custom rows, saved in the run's folder when it has one (`folder`).
    The run writes it, and a dry run compares it with a run it would resume.
    """
    task = ahead.task
    return describe_run(
        model,
        scorer,
        task,
        replace(settings, limit=number),  # config.json's run.limit: the number the run probed
        ahead.data,
        ahead.side.provenance,
        subset=subset_of(task, ahead.probes, first, settings.limit) if number is not None else None,
        custom_rows=rows,
        rows_file=rundir.ROWS_FILE if rows and folder else None,
        planned={"stage": task.stages[0], "probes": len(first)},
        models=ahead.models,
    )


def describe_run(
    model: Any,
    scorer: Any,
    task: Task,
    settings: RunSettings,
    rows: Sequence[Mapping[str, Any]],
    resources: Mapping[str, Any],
    *,
    subset: dict | None = None,
    custom_rows: bool = False,
    rows_file: str | None = None,
    planned: dict[str, Any] | None = None,
    models: Mapping[str, StageModel] | None = None,
) -> dict[str, Any]:
    """config.json: versions, the benchmark's card, the rows' and resources' fingerprints, model identity, seeds,
    options, and the deviations that apply to this run.

    `custom_rows` (rows given to `run`) and a model given as an object are recorded; custom rows saved in the run
    directory (`rows_file`) can be repeated with `--rows`, a model object cannot, and the report says so.
    `planned` (the first stage and its probe count) lets a report of an interrupted run say how far it got.
    `stage_options` names the options that change each stage's records (what `--resume` compares, stage by stage)
    and `stage_models` each stage's own model (`models`: an LLM judge, with the memory its weights take).
    """
    benchmark, info = task.benchmark, task.benchmark.info
    named = isinstance(model, (str, os.PathLike))
    # credentials in a URL (--base-url, a resource's source) are used, never recorded
    return redacted(
        json_ready(
            {
                "config": benchmark.name,
                "benchmark": {
                    "name": info.name,
                    "version": info.version,
                    "title": info.title,
                    "description": benchmark.config.description or "",
                    "languages": list(benchmark.languages),
                    "corrections": [c.__dict__ for c in info.corrections],
                    "rows": len(rows),
                    "rows_sha256": rows_digest(rows),
                    "custom_rows": custom_rows,
                    "rows_file": rows_file,
                },
                "resources": dict(resources),
                "model": {
                    "spec": str(model) if named else type(model).__name__,
                    "loaded_object": not named,
                    "kind": scorer.kind,
                    "identity": _identity(scorer),
                    **planted_of(model, settings),
                },
                "task": type(task).__name__,
                "options": options_dict(task.options),
                "stage_options": {stage: list(task.stage_options(stage)) for stage in task.stages},
                "stage_models": {stage: other.to_json() for stage, other in (models or {}).items()},
                "run": settings.recorded(),
                "model_args": settings.model_args.given(),
                # a --limit subset is drawn with the seed
                "seed_used": task.seeded or subset is not None,
                "subset": subset,
                "planned": planned,
                "protocol": task.describe(rows),
                "deviations": task.applied_deviations(),
                "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "hardware": hardware(scorer, settings),
                "versions": versions(),
            }
        )
    )


def planted_of(model: Any, settings: RunSettings) -> dict[str, str]:
    """`{"planted": what it was trained on}` for a built-in planted model (`planted:<config>`), so that its report
    says which pattern to expect; {} for any other model.
    """
    what = model_description(model, load_options(settings))
    return {} if what is None else {"planted": what}


def subset_of(
    task: Task, every: Sequence[Probe], first: Sequence[Probe], limit: int | float | str | None
) -> dict[str, Any]:
    """What a `--limit` run probed: how many of the units (`Task.limit_unit`), drawn across which strata; the limit as
    given (a number, a fraction or "smoke") and the benchmark's smoke limit for these items. A task that draws
    parallel units adds `parallel`: the probe fields that name a unit, and the languages each unit was asked in.
    """
    subset: dict[str, Any] = {
        "unit": task.limit_unit,
        "strata": list(task.limit_strata),
        "items": task.limit_units(every),
        "sampled": task.limit_units(first),
        "seed": task.seed,
        "limit": limit,
        "smoke_limit": task.smoke_limit(every),
    }
    if task.parallel is not None:
        subset["parallel"] = {
            "fields": list(task.parallel.fields),
            "across": task.parallel.across,
            "values": task.parallel_values(every),
        }
    return subset


def rows_digest(rows: Sequence[Mapping[str, Any]]) -> str:
    """A digest of the probed rows: two runs with equal digests saw the same data."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(
            json.dumps(json_ready(row), sort_keys=True, ensure_ascii=False, default=str).encode(
                "utf-8"
            )
        )
    return digest.hexdigest()


def _identity(scorer: Any) -> Any:
    identity = getattr(scorer, "identity", None)
    if identity is None or isinstance(identity, (str, int, float, dict, list)):
        return identity
    return getattr(identity, "__dict__", str(identity))


def versions() -> dict[str, str | None]:
    """Library versions that can change a number, and the git revision of culture_probe's checkout."""
    import importlib.metadata as md

    from culture_probe.version import __version__

    out: dict[str, str | None] = {
        "culture_probe": __version__,
        "culture_probe_git": git_revision(Path(__file__).parent),
        "python": platform.python_version(),
    }
    for name in ("torch", "transformers", "tokenizers", "datasets", "numpy", "scipy", "accelerate"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = "absent"
    return out


def git_revision(folder: Path) -> str | None:
    """The commit of the git checkout holding `folder` ("+dirty" with uncommitted changes); None for an
    installed package or where git is unavailable.
    """
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(folder), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()

    try:
        if not (Path(git("rev-parse", "--show-toplevel")) / "culture_probe").is_dir():
            # the folder sits in someone else's repository (e.g. a virtualenv inside a project)
            return None
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
        return git("rev-parse", "HEAD") + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def hardware(scorer: Any, settings: RunSettings) -> dict[str, Any]:
    """Where the numbers were computed: the model's device and dtype, the number of processes, the machine."""
    from culture_probe.engine import parallel

    device = getattr(scorer, "device", None)
    model = getattr(scorer, "model", None)
    dtype = getattr(model, "dtype", None) or settings.model_args.dtype
    out: dict[str, Any] = {
        "device": str(device) if device is not None else None,
        "dtype": str(dtype).removeprefix("torch.") if dtype is not None else None,
        "processes": parallel.world()[1],
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
    }
    if device is not None and getattr(device, "type", None) == "cuda":
        import torch

        out["accelerator"] = torch.cuda.get_device_name(device)
    return out


def _barrier() -> None:
    from culture_probe.engine import parallel

    parallel.barrier(parallel.world()[1])


def is_main_process() -> bool:
    """Rank 0 (or a single process): the only writer of run files."""
    from culture_probe.engine import parallel

    return parallel.world()[0] == 0


# ---------------------------------------------------------------- executing probes


def execute(
    task: Task,
    rows: Sequence[Mapping[str, Any]],
    first: list[Probe],
    scorer: Any,
    settings: RunSettings,
    done: list[Record],
    writer: rundir.RecordWriter,
    progress: bool,
    log: ProcessLog,
) -> list[Record]:
    """Run every stage's probes that are not done yet (`first`: the first stage's, already built); returns all
    records in probe order. Each chunk's records are written, then noted in `log` with what the engine has cut to
    fit the model in the stage so far.
    """
    done_by_key = {(r.stage, r.key): r for r in done}
    records: list[Record] = []
    for stage in task.stages:
        probes = (
            first
            if stage == task.stages[0]
            else task.build_probes(rows, stage=stage, previous=records)
        )
        # later stages ask only the first's items
        if settings.limit is not None or settings.shard is not None:
            sampled = {p.item_id for p in first}
            probes = [p for p in probes if p.item_id in sampled]
        pending = [p for p in probes if (stage, p.key) not in done_by_key]
        # load a stage's own model only then
        needs_model = any(not isinstance(p, Skipped) for p in pending)
        stage_scorer = _scorer_for(task, stage, scorer, settings) if needs_model else None
        fresh = {}
        with _counting_cuts(stage_scorer, task.config):
            for chunk in _answers(pending, stage_scorer, progress, f"{task.config} {stage}"):
                for probe, output in chunk:
                    record = task.to_record(probe, output, stage=stage)
                    writer.append(record)
                    fresh[probe.key] = record
                log.answered(stage, len(chunk), cut_so_far(stage_scorer))
        records += [fresh.get(p.key) or done_by_key[stage, p.key] for p in probes]
    return records


def counts_cuts(scorer: Any) -> bool:
    """Whether `scorer` counts what it cuts to fit its input limit (`Scorer.recording`; not a served model)."""
    return getattr(scorer, "recording", None) is not None


def cut_so_far(scorer: Any) -> Truncation | None:
    """What `scorer` has cut since its count began (`_counting_cuts`); None for a scorer that does not count."""
    return scorer.truncation if counts_cuts(scorer) else None


@contextmanager
def _counting_cuts(scorer: Any, config: str) -> Iterator[None]:
    """Count what `scorer` cuts to fit its input limit afresh inside the block (its warning names `config`; read
    `scorer.truncation` in it); a scorer that does not count (served, or a stand-in) is asked as it is.
    """
    if not counts_cuts(scorer):
        yield
        return
    with scorer.recording(config):
        yield


def _scorer_for(task: Task, stage: str, scorer: Any, settings: RunSettings):
    """The run's scorer, or the stage's own model (an LLM judge), loaded with `stage_settings`."""
    other = task.stage_model(stage)
    return scorer if other is None else load_scorer(other, stage_settings(settings))


def _answers(
    probes: list[Probe], scorer: Any, progress: bool, label: str
) -> Iterator[list[tuple[Probe, Any]]]:
    """(probe, output) pairs in probe order, a chunk at a time, computed under a progress bar with an ETA, labelled
    with the config and stage (`fmlama_en main`), so that a suite's bars say which config is at 21%.
    """
    from tqdm.auto import tqdm

    bar = tqdm(
        total=len(probes), desc=label, unit="probe", disable=not progress or not is_main_process()
    )
    try:  # closed on an error too, so that the error's line starts on a line of its own
        for start in range(0, len(probes), CHUNK):
            chunk = probes[start : start + CHUNK]
            yield list(zip(chunk, _run_chunk(chunk, scorer), strict=True))
            bar.update(len(chunk))
    finally:
        bar.close()


#: how each probe kind is asked: the engine call over a group of probes that share one options object
ASK: dict[type, Callable[[Any, list[Any], Any], list[Any]]] = {
    ScoreProbe: lambda scorer, probes, options: scorer.score([p.request for p in probes], options),
    GenerateProbe: lambda scorer, probes, options: scorer.generate(
        [p.prompt for p in probes], options
    ),
    FillMaskProbe: lambda scorer, probes, options: [
        best[0][0] for best in scorer.fill_mask([p.left for p in probes], options)
    ],
}


def _run_chunk(chunk: list[Probe], scorer: Any) -> list[Any]:
    """Engine outputs of one chunk, in chunk order; probes are grouped by kind and options (one engine call each),
    and a skipped probe asks nothing (its record says why).
    """
    groups: dict[tuple[type, Any], list[int]] = {}
    for i, probe in enumerate(chunk):
        if isinstance(probe, Skipped):
            continue
        if type(probe) not in ASK:
            raise CultureProbeError(f"Not a probe: {probe!r}")
        groups.setdefault((type(probe), probe.options), []).append(i)
    outputs: list[Any] = [None] * len(chunk)
    for (kind, options), indices in groups.items():
        for i, result in zip(
            indices, ASK[kind](scorer, [chunk[i] for i in indices], options), strict=True
        ):
            outputs[i] = result
    return outputs
