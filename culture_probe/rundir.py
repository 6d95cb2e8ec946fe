"""The run directory: its layout, atomic writes, the resume check, and reading a run back.

A run directory holds `config.json` (everything needed to repeat the run), `items.jsonl` (one record
per probe, appended as probes finish), `processes.json` (each process that made it:
`culture_probe.provenance`), `metrics.json`, `rows.jsonl` (a run on custom rows), `report.md` and
`plots/`. The engine's score cache is not here: it is one file per model, shared by every run
(`engine.loading.default_cache_dir`). The runner writes it and `report`/`compare` read it, both
through here.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from operator import attrgetter
from pathlib import Path
from typing import Any, Literal

from culture_probe.errors import CultureProbeError, SourceFormatError
from culture_probe.record import Metrics, RunRecord, read_metrics
from culture_probe.sharing import redacted
from culture_probe.tasks.options import json_ready
from culture_probe.tasks.probes import Record
from culture_probe.util import jsonl, outfolder

CONFIG_FILE, ITEMS_FILE, METRICS_FILE = "config.json", "items.jsonl", "metrics.json"
RUN_CONFIG_KEYS = ("config",)  # what every config.json names: the benchmark config the run probed
ROWS_FILE = "rows.jsonl"  # the rows of a run on custom rows, so that `--rows` can repeat it
REPORT_FILE, PLOTS_DIR = "report.md", "plots"
# names a folder as a run of this library: only such folders (or empty ones) are written
MARKER = ".culture_probe_run"
# names a suite's folder (a run directory per config): no run writes there
SUITE_MARKER = ".culture_probe_suite"
# the markers' text; suites made before SUITE_MARKER wrote SUITE_NOTE into MARKER (`folder_kind`
# reads it so)
RUN_NOTE, SUITE_NOTE = (
    "A culture_probe run directory (culture-probe run --out).\n",
    "A culture_probe suite folder (one run directory per config).\n",
)
Kind = Literal["run", "suite"]
MARKERS: dict[Kind, str] = {"run": MARKER, "suite": SUITE_MARKER}
# held by the process writing the run: a second writer fails at once
LOCK_FILE = outfolder.LOCK_FILE
# config.json keys that must match for --resume to continue a run (anything else may differ, e.g.
# batch size), each with the `RunRecord` field that reads it (older runs read with the defaults: no
# model_args, the default protocol); run.seed only for protocols that draw at random (config.json's
# seed_used, from Task.seeded). The options are compared stage by stage (`changed_stages`).
RESUME_KEYS = {
    "config": "config",
    "model": "model.identity",
    "model_args": "model_args",
    "run.protocol": "run.protocol",
    "benchmark.rows_sha256": "benchmark.rows_sha256",
    "run.language": "run.language",
    "run.limit": "run.limit",
    "run.seed": "run.seed",
    "run.corrected": "run.corrected",
    "run.shard": "run.shard",  # a shard resumes on its own, never in another shard's folder
}
# config.json keys that follow the options: a resume that changed some (a later stage's, or
# metrics-only ones) rewrites them
OPTION_KEYS = ("options", "stage_options", "stage_models", "protocol", "deviations")


class ResumeNotice(UserWarning):
    """A resumed run whose options changed where that is allowed: which, and the records dropped to
    be redone.
    """


@dataclass(frozen=True)
class Run:
    """A run read back: its config.json (typed), its records, and its metrics.json (None when the
    run did not finish).
    """

    path: Path
    record: RunRecord
    records: list[Record] = field(repr=False)
    metrics: Metrics | None

    @property
    def config(self) -> dict[str, Any]:
        """config.json as written (upgraded to this version's shape)."""
        return self.record.to_json()


def read_run(run_dir: str | os.PathLike) -> Run:
    """The run in `run_dir`; a folder without config.json is not a run (the error says what to
    pass).
    """
    path = Path(run_dir)
    if folder_kind(path) == "suite":
        runs = ", ".join(str(path / name) for name in runs_in(path)) or "none yet"
        raise CultureProbeError(
            f"{path} is a suite folder, not a run directory: pass one of its runs ({runs}); `culture-probe report "
            f"{path}` reports the whole suite."
        )
    if not (path / CONFIG_FILE).is_file():
        raise CultureProbeError(
            f"{path} is not a run directory: {_what_is(path)}. Pass the --out folder of a `culture-probe run`."
        )
    config = read_json(path / CONFIG_FILE)
    if not isinstance(config, dict) or not all(key in config for key in RUN_CONFIG_KEYS):
        raise SourceFormatError(
            f"not a run's configuration (a JSON object with {', '.join(repr(k) for k in RUN_CONFIG_KEYS)}); the file "
            "is damaged: run the config again into a new --out, or restore the file.",
            path=str(path / CONFIG_FILE),
        )
    found = path / METRICS_FILE  # both files checked against what their readers read (record.py)
    metrics = read_metrics(read_json(found), str(found)) if found.is_file() else None
    return Run(
        path,
        RunRecord.from_json(config, str(path / CONFIG_FILE)),
        read_records(path / ITEMS_FILE),
        metrics,
    )


def prepare(run_dir: Path, meta: RunRecord, *, resume: bool, main: bool) -> list[Record]:
    """Create or reopen a run directory; returns the records already written (resume).

    A directory whose run failed before its first probe was answered (config.json, no record) starts
    afresh without --resume. Every process takes the same decision from the same files (only `main`
    writes).
    """
    # Only the writer checks whose folder it is: another rank could see it mid-write (a `.part` file
    # beside the lock). Every rank takes the decisions on the records, so that all fail together or
    # none does.
    done = check_start(run_dir, resume=resume, folder=main)
    existing = run_dir / CONFIG_FILE
    if done:
        old = RunRecord.from_json(read_json(existing), str(existing))
        redo = check_resumable(old, meta, run_dir, ran={r.stage for r in done})
        kept = [r for r in done if r.stage not in redo]
        if main:
            _say_changes(
                old, meta, run_dir, {stage: sum(r.stage == stage for r in done) for stage in redo}
            )
        return kept
    run_dir.mkdir(parents=True, exist_ok=True)
    if main:
        write_text(run_dir / MARKER, RUN_NOTE)
        write_json(existing, meta.to_json())
    return []


def check_start(run_dir: Path, *, resume: bool, folder: bool = True) -> list[Record]:
    """The records already in `run_dir`, after refusing what must not start: a folder that is not
    ours (`folder`), records without their config.json, a run that exists without --resume. Cheap,
    so the runner asks it before any data or model loads.
    """
    if folder:
        check_writable(run_dir)
    done = read_records(run_dir / ITEMS_FILE)
    if done and not (run_dir / CONFIG_FILE).is_file():
        raise CultureProbeError(
            f"{run_dir} holds {len(done)} record(s) in {ITEMS_FILE} but no {CONFIG_FILE}, so they can be neither "
            "resumed nor checked. Nothing was changed: move them away, or choose a new --out."
        )
    if done and not resume:
        raise CultureProbeError(
            f"{run_dir} already holds a run. Pass --resume (resume=True) to continue it ({len(done)} probe(s) "
            "answered so far), or choose a new --out."
        )
    return done


def record_finish(run_dir: Path, processes: Mapping[str, Any]) -> RunRecord:
    """config.json with the record of the processes that made the run (`duration_s` summed over
    them, how many, the versions seen: `provenance.ProcessLog.provenance`) and when the last
    finished; returns the updated config.
    """
    path = run_dir / CONFIG_FILE
    config = RunRecord.from_json(read_json(path), str(path)).updated(
        {**processes, "finished": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    )
    write_json(path, config.to_json())
    return config


def check_writable(run_dir: Path, kind: Kind = "run") -> None:
    """A run (a suite: `kind`) writes only into a new or empty folder, or a folder of its own kind
    made by this library (`folder_kind`): never over a model's or anyone's files, never a run into a
    suite's folder or back.
    """
    if run_dir.exists() and not run_dir.is_dir():
        raise CultureProbeError(
            f"--out {run_dir} is a file; pass a folder (new or empty) for the {kind}."
        )
    blocking = next((p for p in run_dir.parents if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        raise CultureProbeError(
            f"--out {run_dir} lies under {blocking}, which is a file; pass a folder path."
        )
    if not run_dir.is_dir() or all(p.name == LOCK_FILE for p in run_dir.iterdir()):
        return
    found = folder_kind(run_dir)
    if found == "suite" and kind == "run":
        raise CultureProbeError(
            f"--out {run_dir} is a suite folder (runs of {', '.join(runs_in(run_dir)) or 'no config yet'}), and a "
            "run of one config does not write into it; nothing was written. Pass a new --out, or add the config to "
            "the suite: name it with the suite's configs, and --resume."
        )
    if found == "run" and kind == "suite":
        raise CultureProbeError(
            f"--out {run_dir} is the run directory of one config, and a suite (several configs) does not write "
            "into it; nothing was written. Pass a new --out for the suite."
        )
    if found is None:
        raise CultureProbeError(
            f"--out {run_dir} is not empty and is not a culture_probe {kind} (no {MARKERS[kind]}); nothing was "
            "written. Pass a new or empty folder."
        )


def folder_kind(folder: Path) -> Kind | None:
    """What `folder` is, by its marker: a suite's (`SUITE_MARKER`, or a suite made before it:
    `MARKER` holding `SUITE_NOTE`), a run's (`MARKER`, or a run made before the marker: its
    config.json), or neither (None).
    """
    if (folder / SUITE_MARKER).is_file() or _read_marker(folder / MARKER) == SUITE_NOTE:
        return "suite"
    if (folder / MARKER).is_file():
        return "run"
    try:
        return (
            "run"
            if "culture_probe" in read_json(folder / CONFIG_FILE).get("versions", {})
            else None
        )
    except (OSError, CultureProbeError, AttributeError):
        return None


def runs_in(folder: Path, first: Sequence[str] = ()) -> list[str]:
    """The run directories (with config.json) in a suite folder: those of `first` (suite.json's
    order) that are there, then the others by name.
    """
    found = (
        sorted(p.name for p in folder.iterdir() if (p / CONFIG_FILE).is_file())
        if folder.is_dir()
        else []
    )
    return [
        *(name for name in first if name in found),
        *(name for name in found if name not in first),
    ]


def _read_marker(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _what_is(path: Path) -> str:
    """What a folder that is no run directory is, for the error that says so."""
    if not path.exists():
        return "it does not exist"
    if not path.is_dir():
        return "it is a file"
    return f"it has no {CONFIG_FILE}" + ("" if any(path.iterdir()) else " (it is empty)")


@contextmanager
def lock(run_dir: Path | None, kind: Kind = "run") -> Iterator[None]:
    """Hold the run directory's (a suite folder's: `kind`) lock while writing it; a second writer
    fails at once (None: nothing to hold). A folder made here that holds nothing but the lock when
    it is released (the work was refused before writing) is removed again.
    """
    if run_dir is None:
        yield
        return
    check_writable(run_dir, kind)
    with outfolder.lock(run_dir, f"the {kind}"):
        yield


def check_resumable(
    old: RunRecord, new: RunRecord, run_dir: Path, ran: Collection[str] = ()
) -> tuple[str, ...]:
    """Refuse to continue a run with different settings (its records would mix two configurations);
    returns the stages to redo: those of the stages that `ran` (have records) whose options changed,
    other than the first.
    """
    for key, path in RESUME_KEYS.items():
        if key == "run.seed" and not new.seed_used:
            continue  # the protocol draws nothing at random: the seed cannot change a number
        # credentials in a URL are recorded blanked (runs made before held them as given): compared
        # and shown so
        before, after = redacted(attrgetter(path)(old)), redacted(attrgetter(path)(new))
        if before != after:
            raise _refusal(run_dir, f"{key} was {before!r} and is now {after!r}")
    if old.subset and new.subset and _drawn(old.subset) != _drawn(new.subset):
        # the same limit counts other units (a run made before DLAMA drew each fact in every
        # language)
        raise _refusal(
            run_dir,
            f"its --limit subset was drawn as {_drawn(old.subset)!r} and is now drawn as {_drawn(new.subset)!r} "
            "(unit, strata, the fields that name one unit in every language)",
        )
    return changed_stages(old, new, run_dir, ran)


def _drawn(subset: Mapping[str, Any]) -> tuple[Any, ...]:
    """How a --limit subset was drawn: its unit, strata and parallel fields (what the limit
    counts).
    """
    return subset.get("unit"), subset.get("strata"), (subset.get("parallel") or {}).get("fields")


def changed_stages(
    old: RunRecord, new: RunRecord, run_dir: Path, ran: Collection[str]
) -> tuple[str, ...]:
    """The stages of the old run to redo because options of theirs changed (config.json's
    `stage_options`), and every stage after the first of them (they were built on its records). A
    change to the first stage's options is refused, as is any change of options in a run that did
    not record its stages' options (made before them).
    """
    before, after = old.options, new.options
    if old.stage_options is None:
        if before != after:
            raise _refusal(run_dir, f"options was {before!r} and is now {after!r}")
        return ()
    now = new.stage_options or {}
    redo: list[str] = []
    for position, (stage, names) in enumerate(old.stage_options.items()):
        changed = [
            n for n in dict.fromkeys([*names, *now.get(stage, [])]) if before.get(n) != after.get(n)
        ]
        if stage not in ran or not (changed or redo or stage not in now):
            continue
        if position == 0:
            what = (
                f"option {changed[0]} of its {stage} stage, which already ran, was {before.get(changed[0])!r} and "
                f"is now {after.get(changed[0])!r}"
                if changed
                else f"its {stage} stage, which already ran, is no longer asked"
            )
            raise _refusal(run_dir, what)
        redo.append(stage)
    return tuple(redo)


def _refusal(run_dir: Path, what: str) -> CultureProbeError:
    return CultureProbeError(
        f"Cannot resume {run_dir}: {what}. Resume with the original settings, or start a new run with another --out."
    )


def _say_changes(old: RunRecord, new: RunRecord, run_dir: Path, dropped: Mapping[str, int]) -> None:
    """Tell the terminal which options a resumed run changed, and which stages' records it drops and
    redoes.
    """
    before, after = old.options, new.options
    keys = [k for k in dict.fromkeys([*before, *after]) if before.get(k) != after.get(k)]
    if not keys:
        return
    changes = ", ".join(f"{k}={after.get(k)!r} (was {before.get(k)!r})" for k in keys)
    redone = "".join(
        f"; the {n} record(s) of its {stage} stage are dropped"
        + (" and asked again" if stage in (new.stage_options or {}) else "")
        for stage, n in dropped.items()
    )
    warnings.warn(f"Resuming {run_dir} with {changes}{redone}.", ResumeNotice, stacklevel=4)


def follow_options(run_dir: Path, meta: RunRecord, kept: Sequence[Record]) -> None:
    """After a resume that changed options (`prepare` allowed it): items.jsonl without the records
    it dropped, then config.json's option keys (`OPTION_KEYS`) as `meta` has them. Items first: a
    crash in between leaves records that the old options describe.
    """
    config, new = read_json(run_dir / CONFIG_FILE), meta.to_json()
    if config.get("options") == new.get("options"):
        return
    if len(read_records(run_dir / ITEMS_FILE)) != len(kept):
        write_text(run_dir / ITEMS_FILE, "".join(_line(record) for record in kept))
    write_json(
        run_dir / CONFIG_FILE, {**config, **{key: new[key] for key in OPTION_KEYS if key in new}}
    )


def progress(run: Run) -> str | None:
    """`INCOMPLETE k/N` for a run that did not finish (no metrics.json): k of the N probes its first
    stage planned were answered (later stages, such as a judge, come after); None for a finished
    run.
    """
    if run.metrics is not None:
        return None
    planned = run.record.planned
    done = sum(1 for r in run.records if r.stage == planned.get("stage"))
    if "probes" not in planned:  # a run made before the plan was recorded
        return f"INCOMPLETE ({len(run.records)} probes)"
    return f"INCOMPLETE {done}/{planned['probes']}"


def read_records(path: Path) -> list[Record]:
    """Records of items.jsonl; a line cut short by a crash (the last one) is dropped, it will be
    redone.
    """
    if not path.is_file():
        return []
    records = []
    lines = jsonl.split(path.read_bytes())
    for number, line in enumerate(lines, 1):
        try:
            records.append(Record.from_json(json.loads(line)))
        except (json.JSONDecodeError, UnicodeDecodeError):  # a crash can cut a character too
            if number != len(lines):
                raise CultureProbeError(
                    f"{path}:{number} is not valid JSON; the run directory is damaged."
                ) from None
    return records


class RecordWriter:
    """Appends records to items.jsonl as they come, flushed, so a killed run loses at most one
    line.
    """

    def __init__(self, path: Path | None, resuming: bool):
        self.handle = None
        if path is None:
            return
        if resuming:
            # Cut a line a crash left half-written, keep the rest in place (never rewrite the file:
            # other processes may be reading it).
            with path.open("rb+") as raw:
                data = raw.read()
                raw.truncate(data.rfind(b"\n") + 1)
        self.handle = path.open("a" if resuming else "w", encoding="utf-8")

    def append(self, record: Record) -> None:
        """Write one record."""
        if self.handle is not None:
            self.handle.write(_line(record))
            self.handle.flush()

    def close(self) -> None:
        """Close the file."""
        if self.handle is not None:
            self.handle.close()


def _line(record: Record) -> str:
    """One record as its line of items.jsonl."""
    return jsonl.line(record.to_json())


def read_json(path: Path) -> Any:
    """A JSON file of the run directory; a damaged one is an error naming it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise CultureProbeError(
            f"{path} is not valid JSON ({error.msg}, line {error.lineno}); the run directory is "
            "damaged: re-run into a new --out."
        ) from None
    except RecursionError:  # json's reader recurses: a file nested thousands deep is no run's
        raise CultureProbeError(
            f"{path} is nested too deep to read (no run writes more than a few levels); the run directory is "
            "damaged: re-run into a new --out."
        ) from None


def write_text(path: Path, text: str) -> None:
    """Write a file of the run directory atomically (a crash leaves the old file or the new one,
    never half of it).
    """
    partial = path.with_name(path.name + ".part")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


def write_json(path: Path, value: Any) -> None:
    """Write JSON atomically."""
    write_text(path, json.dumps(value, ensure_ascii=False, indent=2) + "\n")


def write_jsonl(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """Write one JSON object per line, atomically."""
    write_text(path, "".join(jsonl.line(json_ready(row), default=str) for row in rows))


def read_rows(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Rows from a JSONL file (`--rows`): one benchmark row per line, as `rows.jsonl` of a run holds
    them.
    """
    from culture_probe.data.sources import read_jsonl

    if not Path(path).is_file():
        raise CultureProbeError(
            f"--rows {str(path)!r}: no such file (give a JSONL file, e.g. a run's rows.jsonl)."
        )
    rows = [row for _, row in read_jsonl(path)]
    if not rows:
        raise CultureProbeError(
            f"{path} holds no rows: --rows takes a JSONL file with one benchmark row per line."
        )
    return rows
