"""The run's front door: `run` and `run_with`, in the pipeline's order (plan, load, ask, metrics,
write), and what a run returns (`RunResult`).
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from culture_probe import rundir
from culture_probe.data.registry import Benchmark, check_data_options, resolve
from culture_probe.engine.loading import ModelInput
from culture_probe.engine.scorer import ScorerProtocol
from culture_probe.errors import (
    CultureProbeError,
    InvalidValueError,
    naming_folder,
)
from culture_probe.provenance import ProcessLog
from culture_probe.record import Metrics, RunRecord, read_metrics
from culture_probe.runner import planning, stage_models
from culture_probe.runner.config_json import describe_plan
from culture_probe.runner.execution import barrier, counts_cuts, execute, is_main_process
from culture_probe.runner.planning import Plan, first_asked
from culture_probe.runner.stage_models import StageModelNotice
from culture_probe.settings import RunSettings
from culture_probe.tasks import Task, task_from_config
from culture_probe.tasks.options import json_ready
from culture_probe.tasks.probes import (
    Record,
)
from culture_probe.tasks.routing import joined, options_per_config
from culture_probe.throughput import start_meter


@dataclass(frozen=True)
class RunResult:
    """What a run produced: its config.json as a typed record (`config.to_json()`: the document),
    one typed record per probe, and the metrics.
    """

    config: RunRecord
    records: list[Record] = field(repr=False)
    metrics: Metrics
    run_dir: Path | None = None

    def task(self) -> Task:
        """The protocol object of this run (without resources: enough to read its records)."""
        return task_from_config(self.config.to_json())

    def write_report(self, run_dir: str | os.PathLike) -> Path:
        """Write report.md and plots of this result into `run_dir` (e.g. for a run made without
        `out`).
        """
        from culture_probe.report import write_report

        Path(run_dir).mkdir(parents=True, exist_ok=True)
        return write_report(run_dir, config=self.config, records=self.records, metrics=self.metrics)


def run(
    config: str,
    model: ModelInput,
    settings: RunSettings | None = None,
    *,
    out: str | os.PathLike | None = None,
    resume: bool = False,
    rows: Sequence[Mapping[str, Any]] | None = None,
    progress: bool = True,
    options: Mapping[str, Any] | None = None,
    **keywords: Any,
) -> RunResult:
    """Probe `model` (an id, a local dir, `planted:<config>`, `openai:<name>`, or a loaded `Scorer`)
    on benchmark `config`.

    `settings` (`RunSettings`) are the runner's switches; any of its fields may be given as a
    keyword instead (`limit="smoke"`, `seed=1`, `model_args="dtype=bfloat16"`, and the shorthands
    `dtype=`, `revision=`), over `settings` when both are given. The other keywords, and `options`,
    are the protocol's switches (the task's `Options` fields, e.g. `judge="string"`; a key of
    `options` may name the config or its benchmark before a dot, as in a suite: `{"xfakt.judge":
    "string"}`); `protocol="upstream"` sets every option that reproduces the benchmark's released
    code (options given here still win). `rows` replaces the loaded `test` split (tests, custom
    data). With `out`, the run directory is written; `resume` continues the run in it. See
    `RunSettings` for what each setting does (`limit`: N items, a share of each stratum, or "smoke";
    `cache_dir`/`no_cache`: the per-model score cache; `base_url`, `concurrency`, `request_timeout`,
    `max_retries`: an `openai:<name>` model's server).
    """
    check_arguments(config, settings, out=out, options=options)
    settings, protocol = RunSettings.split(keywords, settings)
    # the name looked up once, and handed down
    benchmark = resolve(config, corrected=settings.corrected)
    # before anything loads
    check_data_options([benchmark], settings.data_options)
    protocol = options_per_config([benchmark], joined(options, protocol))[benchmark.name]
    return run_with(
        benchmark, model, settings, protocol, out=out, resume=resume, rows=rows, progress=progress
    )


def check_arguments(config: Any, settings: Any, *, out: Any, options: Any) -> None:
    """`run`'s arguments of a kind the command line always gets right (one config name, settings, a
    folder, a mapping of options), refused in one line naming the argument before anything is read.
    """
    if not isinstance(config, str):
        several = (
            " (several configs: culture_probe.run_suite)"
            if isinstance(config, (list, tuple))
            else ""
        )
        raise InvalidValueError(
            f"run(config) takes one benchmark config name, e.g. 'maps_en'; got {config!r:.80}{several}."
        )
    if settings is not None and not isinstance(settings, RunSettings):
        raise InvalidValueError(
            f"run(config, model, settings) takes a RunSettings as settings, got {settings!r:.80} (settings as "
            "keywords: run(config, model, limit=10))."
        )
    if out is not None and not isinstance(out, (str, os.PathLike)):
        raise InvalidValueError(
            f"run(out=) takes the run directory's path (a string or a Path), got {out!r:.80}."
        )
    if options is not None and not isinstance(options, Mapping):
        raise InvalidValueError(
            f"run(options=) takes a mapping of option names to values, got {options!r:.80} (or give the options as "
            "keywords: run(config, model, judge='string'))."
        )


def run_with(
    config: str | Benchmark,
    model: ModelInput,
    settings: RunSettings,
    options: Mapping[str, Any],
    *,
    out: str | os.PathLike | None = None,
    resume: bool = False,
    rows: Sequence[Mapping[str, Any]] | None = None,
    progress: bool = True,
    scorer: ScorerProtocol | None = None,
    prepared: Plan | None = None,
) -> RunResult:
    """`run` with its settings and protocol options apart. `scorer` is `model` already loaded (a
    suite loads its model once; the run records `model` as named), and `prepared` is this run's
    plan, made already with the same settings (a suite plans every config before its model loads).
    """
    # the model read once, with how the settings load it, and handed down
    spec = stage_models.model_spec(model, settings, scorer)
    started = time.monotonic()
    run_dir = Path(out) if out is not None else None
    main = is_main_process()
    if run_dir is not None:  # first: never load data or a model to find --out refused
        rundir.check_start(run_dir, resume=resume, folder=main)  # only the writer checks the folder
    # a second writer of the same folder fails at once, before anything loads (a folder made here
    # and left empty by a refusal while planning is removed again)
    with rundir.lock(run_dir if main else None):
        ahead = (
            prepared
            if prepared is not None
            else planning.plan(config, spec, settings, options, rows=rows)
        )
        task, data, every = ahead.task, ahead.data, ahead.probes
        for stage, other in ahead.models.items() if main else ():
            warnings.warn(other.describe(stage), StageModelNotice, stacklevel=3)
        number, part = first_asked(task, every, settings, spec)
        first = part.probes
        loading = time.monotonic()
        scorer = spec.load() if scorer is None else scorer  # a suite loads its model once
        # a planted model's training is its loading: not part of the fixed part a rate keeps
        loading = time.monotonic() - loading
        custom, folder = rows is not None, run_dir is not None
        meta = describe_plan(
            spec, scorer, ahead, settings, number, first, rows=custom, folder=folder
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
                meta.versions,
                done,
                clock=started,
                counting=counts_cuts(scorer),
                write=main,
            )
            items = run_dir / rundir.ITEMS_FILE if run_dir is not None and main else None
            writer = rundir.RecordWriter(items, bool(done))
            # says what the run will cost; keeps the rate it measured once it is written
            meter = start_meter(
                task.config,
                scorer,
                task.stage_names[0],
                first,
                done,
                began=started,
                loading=loading,
                show=progress,
                work=ahead.work,
            )
            try:
                records = execute(task, data, first, scorer, settings, done, writer, progress, log)
                meter.staged()
            finally:
                writer.close()
            metrics = run_metrics(task, records, spec.known_items(), log)
            meta = finish(run_dir if main else None, meta, records, metrics, log)
            if main:
                meter.keep(spec.label, task.config)
    return RunResult(config=meta, records=records, metrics=metrics, run_dir=run_dir)


def run_metrics(
    task: Task, records: Sequence[Record], known: Set[str] | None, log: ProcessLog
) -> Metrics:
    """metrics.json of a run, as one process or a merge of shards writes it: the protocol's metrics
    of the records, a planted model's split (`known`: its planted items), and what the engine cut to
    fit the model, summed over every process of the run; checked as its readers check it, so a
    protocol that writes a part of another type fails here, naming the field, and not in a reader.
    """
    metrics = json_ready(task.compute_metrics(records))
    if known:
        metrics["planted"] = planted_split(task, records, known)
    truncation = log.truncation()
    if truncation is not None:
        metrics["truncation"] = truncation
    return read_metrics(metrics, f"the metrics {task.config} computed")


def planted_split(task: Task, records: Sequence[Record], known: Set[str]) -> dict[str, Any]:
    """The headline numbers on the items a planted model was trained on and on the others, each with
    its n, as `make demo`'s self-test shows them: {"planted": {"overall": ...}, "not planted":
    {...}}; a side with no records, or whose numbers the protocol cannot compute alone, gives its
    reason instead.
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
    """Bytes the rest of a run's `planned` first-stage records need, at the mean size of the records
    written so far (None before the first is written).
    """
    items = run_dir / rundir.ITEMS_FILE if run_dir is not None else None
    if items is None or not items.is_file():
        return None
    with items.open("rb") as lines:
        written = sum(1 for _ in lines)
    return round(items.stat().st_size / written * max(planned - written, 1)) if written else None


def open_folder(
    run_dir: Path | None,
    meta: RunRecord,
    rows: Sequence[Mapping[str, Any]],
    *,
    custom_rows: bool,
    resume: bool,
    main: bool,
) -> list[Record]:
    """The run's folder (None: no folder) made with config.json, and rows.jsonl for custom `rows`,
    or reopened: returns the records a resumed run has already, kept after a change of options
    (`rundir.follow_options`).
    """
    done = rundir.prepare(run_dir, meta, resume=resume, main=main) if run_dir is not None else []
    if custom_rows and run_dir is not None and not done and main:
        rundir.write_jsonl(run_dir / rundir.ROWS_FILE, rows)
    # all ranks have read items.jsonl before any writes to it: they share one pending set
    barrier()
    if run_dir is not None and done and main:
        # a resume with other options: their records and config
        rundir.follow_options(run_dir, meta, done)
    return done


def finish(
    run_dir: Path | None,
    meta: RunRecord,
    records: list[Record],
    metrics: Metrics,
    log: ProcessLog,
) -> RunRecord:
    """The run's config with the record of its processes (`ProcessLog.provenance`: the duration
    summed over them); in its folder (None: none, or another rank's), config.json so, metrics.json
    and the report.
    """
    log.finish()
    if run_dir is None:
        return meta.updated(log.provenance())
    meta = rundir.record_finish(run_dir, log.provenance())
    rundir.write_json(run_dir / rundir.METRICS_FILE, metrics)
    from culture_probe.report import write_report

    write_report(run_dir, config=meta, records=records, metrics=metrics)
    return meta
