"""`culture_probe.run(config, model, **options)` and `culture-probe run`: one benchmark config on one model.

A run directory holds `config.json` (everything needed to repeat the run), `items.jsonl` (one record per probe,
appended as probes finish), `cache.sqlite` (the engine's result cache), `metrics.json`, `report.md` and plots.
`resume=True` continues an interrupted run: probes already in items.jsonl are skipped, and the engine cache
makes a half-finished batch cheap. Under `accelerate launch --num_processes N -m culture_probe run ...` every
process runs this same code; the engine shards each batch of requests and gathers the results in request order,
and only rank 0 writes files.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from culture_probe.errors import CultureProbeError
from culture_probe.tasks import task_for
from culture_probe.tasks.base import (
    FillMaskProbe,
    GenerateProbe,
    Probe,
    Record,
    ScoreProbe,
    Skipped,
    Task,
    json_ready,
    options_dict,
)
from culture_probe.tasks.base import parse_options as _parse_options

CHUNK = 64  # probes per engine call: the unit of progress, of incremental writing and of resumption
CONFIG_FILE, ITEMS_FILE, METRICS_FILE, CACHE_FILE = "config.json", "items.jsonl", "metrics.json", "cache.sqlite"
ROWS_FILE = "rows.jsonl"  # the rows of a run on custom rows, so that `--rows` can repeat it
# config.json keys that must match for --resume to continue a run (anything else may differ, e.g. batch size);
# run.seed only for protocols that draw at random (config.json's seed_used, from Task.seeded)
RESUME_KEYS = ("config", "model", "options", "benchmark.rows_sha256", "run.language", "run.limit", "run.seed",
               "run.corrected")


@dataclass(frozen=True)
class RunSettings:
    """The runner's own switches; those that change a number are recorded in config.json."""

    language: str | None = None
    limit: int | None = None
    batch_tokens: int | None = None
    seed: int = 0
    kind: str = "auto"
    device: str | None = None
    dtype: str | None = None
    data_dir: str | None = None
    corrected: bool = False
    revision: str | None = None  # the model's hub revision (branch, tag or commit) when it is named by id


@dataclass(frozen=True)
class RunResult:
    """What a run produced: the full configuration, one record per probe, and the metrics."""

    config: dict[str, Any]
    records: list[Record] = field(repr=False)
    metrics: dict[str, Any]
    run_dir: Path | None = None

    def task(self) -> Task:
        """The protocol object of this run (for its report views)."""
        return task_from_config(self.config)

    def write_report(self, run_dir: str | os.PathLike) -> Path:
        """Write report.md and plots of this result into `run_dir` (e.g. for a run made without `out`)."""
        from culture_probe.report import write_report

        Path(run_dir).mkdir(parents=True, exist_ok=True)
        return write_report(run_dir, task=self.task(), records=self.records, metrics=self.metrics,
                            config=self.config)


def run(
    config: str, model: Any, *, out: str | os.PathLike | None = None, resume: bool = False,
    language: str | None = None, limit: int | None = None, batch_tokens: int | None = None, seed: int = 0,
    kind: str = "auto", device: str | None = None, dtype: str | None = None, data_dir: str | None = None,
    corrected: bool = False, rows: Sequence[Mapping[str, Any]] | None = None, progress: bool = True,
    revision: str | None = None, **options: Any,
) -> RunResult:
    """Probe `model` (an id, a local dir, `planted:<config>`, or a loaded `Scorer`) on benchmark `config`.

    Keyword `options` are the protocol's switches (the task's `Options` fields, e.g. `with_country=True`);
    `rows` replaces the loaded `test` split (tests, custom data). With `out`, the run directory is written.
    `revision` pins a Hub model (branch, tag or commit); config.json records it with the resolved commit.
    """
    settings = RunSettings(language=language, limit=limit, batch_tokens=batch_tokens, seed=seed, kind=kind,
                           device=device, dtype=dtype, data_dir=data_dir, corrected=corrected, revision=revision)
    task_cls = task_for(config)
    task_options = _parse_options(task_cls.Options, options)
    run_dir = Path(out) if out is not None else None
    scorer = load_scorer(model, settings, run_dir)
    task = task_cls(config, task_options, kind=scorer.kind, seed=seed)
    data = load_rows(config, settings) if rows is None else list(rows)
    if language is not None:
        data = task.select_language(data, language)
    meta = describe_run(config, model, scorer, task, settings, data, custom_rows=rows is not None,
                        rows_file=ROWS_FILE if rows is not None and run_dir is not None else None)
    done = prepare_run_dir(run_dir, meta, resume) if run_dir is not None else []
    if rows is not None and run_dir is not None and not done and is_main_process():
        write_jsonl(run_dir / ROWS_FILE, data)
    _barrier()  # all ranks have read items.jsonl before any writes to it: they share one pending set
    records = execute(task, scorer, data, settings, done, run_dir, progress)
    metrics = json_ready(task.compute_metrics(records))
    if run_dir is not None and is_main_process():
        write_json(run_dir / METRICS_FILE, metrics)
        from culture_probe.report import write_report

        write_report(run_dir, task=task, records=records, metrics=metrics, config=meta)
    return RunResult(config=meta, records=records, metrics=metrics, run_dir=run_dir)


# ---------------------------------------------------------------- model and data


def load_scorer(model: Any, settings: RunSettings, run_dir: Path | None):
    """A `Scorer` for `model`; an already loaded scorer is used as is."""
    if not isinstance(model, (str, os.PathLike)):
        return model
    from culture_probe.engine import Scorer

    kwargs: dict[str, Any] = {"kind": settings.kind}
    if settings.batch_tokens is not None:
        kwargs["batch_tokens"] = settings.batch_tokens
    if run_dir is not None:
        kwargs["cache"] = run_dir / CACHE_FILE
    if settings.device is not None:
        kwargs["device"] = settings.device
    if settings.dtype is not None:
        kwargs["torch_dtype"] = settings.dtype
    if settings.revision is not None:
        kwargs["revision"] = settings.revision
    return Scorer.from_pretrained(resolve_model(str(model), settings), **kwargs)


def resolve_model(model: str, settings: RunSettings) -> str:
    """`planted:<config>` -> the local directory of the built-in planted model (trained once, then cached)."""
    if not model.startswith("planted:"):
        return model
    from culture_probe.models.planted_benchmarks import planted_model_dir

    return str(planted_model_dir(model.split(":", 1)[1], data_dir=settings.data_dir))


def load_rows(config: str, settings: RunSettings) -> list[dict[str, Any]]:
    """The `test` split of `config` as a list of dicts."""
    from culture_probe.data.registry import load_benchmark

    dataset = load_benchmark(config, data_dir=settings.data_dir, corrected=settings.corrected)["test"]
    return list(dataset)


def describe_run(config: str, model: Any, scorer: Any, task: Task, settings: RunSettings,
                 rows: Sequence[Mapping[str, Any]], *, custom_rows: bool = False,
                 rows_file: str | None = None) -> dict[str, Any]:
    """config.json: versions, the benchmark's card, model identity, seeds, options, deviations.

    `custom_rows` (rows given to `run`) and a model given as an object are recorded; custom rows saved in the run
    directory (`rows_file`) can be repeated with `--rows`, a model object cannot, and the report says so.
    """
    from culture_probe.data.registry import resolve

    module, _ = resolve(config)
    info = module.INFO
    named = isinstance(model, (str, os.PathLike))
    return json_ready({
        "config": config,
        "benchmark": {"name": info.name, "version": info.version, "title": info.title,
                      "corrections": [c.__dict__ for c in info.corrections], "rows": len(rows),
                      "rows_sha256": rows_digest(rows), "custom_rows": custom_rows, "rows_file": rows_file},
        "model": {"spec": str(model) if named else type(model).__name__, "loaded_object": not named,
                  "kind": scorer.kind, "identity": _identity(scorer)},
        "task": type(task).__name__,
        "options": options_dict(task.options),
        "run": settings.__dict__,
        "seed_used": task.seeded,
        "protocol": task.describe(rows),
        # the protocol's own log refines the data card's (same id: the task's entry says what this run did)
        "deviations": list({d["id"]: d for d in [*map(vars, info.deviations), *task.describe_deviations()]}.values()),
        "versions": versions(),
    })


def rows_digest(rows: Sequence[Mapping[str, Any]]) -> str:
    """A digest of the probed rows: two runs with equal digests saw the same data."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps(json_ready(row), sort_keys=True, ensure_ascii=False, default=str).encode("utf-8"))
    return digest.hexdigest()


def _identity(scorer: Any) -> Any:
    identity = getattr(scorer, "identity", None)
    if identity is None or isinstance(identity, (str, int, float, dict, list)):
        return identity
    return getattr(identity, "__dict__", str(identity))


def versions() -> dict[str, str]:
    """Library versions that can change a number."""
    import importlib.metadata as md

    import culture_probe

    out = {"culture_probe": culture_probe.__version__, "python": platform.python_version()}
    for name in ("torch", "transformers", "tokenizers", "datasets", "numpy", "accelerate"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = "absent"
    return out


# ---------------------------------------------------------------- the run directory


def _barrier() -> None:
    from culture_probe.engine import parallel

    parallel.barrier(parallel.world()[1])


def is_main_process() -> bool:
    """Rank 0 (or a single process): the only writer of run files."""
    from culture_probe.engine import parallel

    return parallel.world()[0] == 0


def prepare_run_dir(run_dir: Path, meta: dict[str, Any], resume: bool) -> list[Record]:
    """Create or reopen a run directory; returns the records already written (resume).

    A directory whose run failed before its first probe was answered (config.json, no record) starts afresh
    without --resume. Every rank takes the same decision from the same files: items.jsonl is only written after
    the barrier that follows this call.
    """
    existing = run_dir / CONFIG_FILE
    done = read_records(run_dir / ITEMS_FILE) if existing.is_file() else []
    if done and not resume:
        raise CultureProbeError(
            f"{run_dir} already holds a run. Pass --resume (resume=True) to continue it ({len(done)} probe(s) "
            "answered so far), or choose a new --out."
        )
    if done:
        check_resumable(json.loads(existing.read_text(encoding="utf-8")), meta, run_dir)
        return done
    run_dir.mkdir(parents=True, exist_ok=True)  # every rank: each opens the engine cache in it
    if is_main_process():
        write_json(existing, meta)
    return []


def check_resumable(old: dict[str, Any], new: dict[str, Any], run_dir: Path) -> None:
    """Refuse to continue a run with different settings (its records would mix two configurations)."""
    for key in RESUME_KEYS:
        before, after = _get(old, key), _get(new, key)
        if key == "model":
            before, after = before.get("identity"), after.get("identity")
        if key == "run.seed" and not new.get("seed_used", True):
            continue  # the protocol draws nothing at random: the seed cannot change a number
        if before != after:
            raise CultureProbeError(
                f"Cannot resume {run_dir}: {key} was {before!r} and is now {after!r}. "
                "Resume with the original settings, or start a new run with another --out."
            )


def _get(tree: Mapping[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        tree = tree.get(part, {}) if isinstance(tree, Mapping) else {}
    return tree


def read_records(path: Path) -> list[Record]:
    """Records of items.jsonl; a line cut short by a crash (the last one) is dropped, it will be redone."""
    if not path.is_file():
        return []
    records = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if number != len(lines):
                raise CultureProbeError(f"{path}:{number} is not valid JSON; the run directory is damaged.") from None
    return records


def write_jsonl(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """Write one JSON object per line, atomically like `write_json`."""
    partial = path.with_name(path.name + ".part")
    partial.write_text("".join(json.dumps(json_ready(row), ensure_ascii=False, default=str) + "\n" for row in rows),
                       encoding="utf-8")
    partial.replace(path)


def read_rows(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Rows from a JSONL file (`--rows`): one benchmark row per line, as `rows.jsonl` of a run holds them."""
    from culture_probe.data.sources import read_jsonl

    if not Path(path).is_file():
        raise CultureProbeError(f"--rows {str(path)!r}: no such file (give a JSONL file, e.g. a run's rows.jsonl).")
    rows = [row for _, row in read_jsonl(path)]
    if not rows:
        raise CultureProbeError(f"{path} holds no rows: --rows takes a JSONL file with one benchmark row per line.")
    return rows


def write_json(path: Path, value: Any) -> None:
    """Write JSON atomically (a crash leaves the old file or the new one, never half of it)."""
    partial = path.with_name(path.name + ".part")
    partial.write_text(json.dumps(value, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    partial.replace(path)


# ---------------------------------------------------------------- executing probes


def execute(task: Task, scorer: Any, rows: Sequence[Mapping[str, Any]], settings: RunSettings,
            done: list[Record], run_dir: Path | None, progress: bool) -> list[Record]:
    """Run every stage's probes that are not done yet; returns all records in probe order."""
    done_by_key = {(r["stage"], r["key"]): r for r in done}
    all_records: list[Record] = []
    writer = _Writer(run_dir / ITEMS_FILE if run_dir is not None and is_main_process() else None, done)
    for stage in task.stages:
        probes = task.build_probes(rows, stage=stage, previous=all_records, limit=settings.limit)
        pending = [p for p in probes if (stage, p.key) not in done_by_key]
        fresh = {}
        needs_model = any(not isinstance(p, Skipped) for p in pending)  # load a stage's own model only then
        stage_scorer = _scorer_for(task, stage, scorer, settings) if needs_model else None
        for probe, output in _answers(pending, stage_scorer, progress, stage):
            record = json_ready(task.to_record(probe, output, stage=stage))
            writer.append(record)
            fresh[probe.key] = record
        all_records += [fresh.get(p.key) or done_by_key[stage, p.key] for p in probes]
    writer.close()
    return all_records


def _scorer_for(task: Task, stage: str, scorer: Any, settings: RunSettings):
    """The run's scorer, or the stage's own model (an LLM judge): its kind is detected and it gets the default
    batch budget and revision (the run's --kind/--batch-tokens/--revision describe the probed model), while
    dtype and device are shared.
    """
    other = task.stage_model(stage)
    if other is None:
        return scorer
    return load_scorer(other, replace(settings, kind="auto", batch_tokens=None, revision=None), None)


def _answers(probes: list[Probe], scorer: Any, progress: bool, stage: str) -> Iterator[tuple[Probe, Any]]:
    """(probe, output) pairs in probe order, computed chunk by chunk under a progress bar with an ETA."""
    from tqdm.auto import tqdm

    bar = tqdm(total=len(probes), desc=stage, unit="probe", disable=not progress or not is_main_process())
    for start in range(0, len(probes), CHUNK):
        chunk = probes[start:start + CHUNK]
        yield from zip(chunk, _run_chunk(chunk, scorer), strict=True)
        bar.update(len(chunk))
    bar.close()


def _run_chunk(chunk: list[Probe], scorer: Any) -> list[Any]:
    """Engine outputs of one chunk, in chunk order; probes are grouped by the engine call they need."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, probe in enumerate(chunk):
        if isinstance(probe, Skipped):
            continue  # nothing to ask the engine; to_record writes the reason
        if isinstance(probe, ScoreProbe):
            key: tuple[Any, ...] = ("score", probe.masked_method, probe.score_right, probe.keep_tokens,
                                    probe.seq2seq_style)
        elif isinstance(probe, GenerateProbe):
            key = ("generate", probe.max_new_tokens, probe.chat, probe.system, probe.temperature, probe.seed,
                   probe.add_special_tokens)
        elif isinstance(probe, FillMaskProbe):
            key = ("fill_mask", probe.sep)
        else:
            raise TypeError(f"Not a probe: {probe!r}")
        groups.setdefault(key, []).append(i)
    outputs: list[Any] = [None] * len(chunk)
    for key, indices in groups.items():
        if key[0] == "score":
            style = {"seq2seq_style": key[4]} if key[4] != "sentinel" else {}  # duck-typed scorers may lack it
            results = scorer.score([chunk[i].request for i in indices], masked_method=key[1],
                                   score_right=key[2], keep_tokens=key[3], **style)
        elif key[0] == "fill_mask":
            results = [best[0][0] for best in scorer.fill_mask([chunk[i].left for i in indices], sep=key[1])]
        else:
            # optional arguments only when set: duck-typed scorers may not take them
            names = ("system", "temperature", "seed", "add_special_tokens")
            extra = {name: value for name, value in zip(names, key[3:], strict=True) if value is not None}
            results = scorer.generate([chunk[i].prompt for i in indices], max_new_tokens=key[1], chat=key[2],
                                      **extra)
        for i, result in zip(indices, results, strict=True):
            outputs[i] = result
    return outputs


class _Writer:
    """Appends records to items.jsonl as they come, flushed, so a killed run loses at most one line."""

    def __init__(self, path: Path | None, done: list[Record]):
        self.handle = None
        if path is None:
            return
        if done:
            # Resuming: cut a line a crash left half-written, keep the rest in place (never rewrite the file:
            # other ranks may be reading it).
            with path.open("rb+") as raw:
                data = raw.read()
                raw.truncate(data.rfind(b"\n") + 1)
        self.handle = path.open("a" if done else "w", encoding="utf-8")

    def append(self, record: Record) -> None:
        if self.handle is not None:
            self.handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            self.handle.flush()

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()


def task_from_config(meta: Mapping[str, Any]) -> Task:
    """Rebuild a run's Task from its config.json (for reports of finished runs)."""
    task_cls = task_for(meta["config"])
    options = task_cls.Options(**{k: tuple(v) if isinstance(v, list) else v for k, v in meta["options"].items()})
    return task_cls(meta["config"], options, kind=meta["model"]["kind"], seed=meta["run"]["seed"])


# ---------------------------------------------------------------- command line


def main(args: Any) -> int:
    """`culture-probe run CONFIG --model M ...` (argparse namespace from culture_probe.cli)."""
    options = dict(_split_option(text) for text in args.option)
    result = run(
        args.config, args.model, out=args.out, resume=args.resume, language=args.language, limit=args.limit,
        batch_tokens=args.batch_tokens, seed=args.seed, kind=args.kind, device=args.device, dtype=args.dtype,
        data_dir=args.data_dir, corrected=args.corrected, revision=args.revision,
        rows=read_rows(args.rows) if args.rows else None, **options,
    )
    if is_main_process():
        from culture_probe.report import headline

        print(headline(result.config, result.metrics))
        if result.run_dir is not None:
            print(f"wrote {result.run_dir}")
    return 0


def _split_option(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise CultureProbeError(f"--option takes KEY=VALUE, got {text!r} (e.g. --option with_country=true).")
    key, value = text.split("=", 1)
    return key.strip(), value.strip()
