"""`culture-probe merge SHARD_DIRS... --out RUN` (`merge_runs`): the N folders of one run made with
`--shard K/N` (a Slurm job array, a Ray job, any scheduler) joined into the folder the run would
have made in one process.

Everything is checked before anything is written: each shard finished (not INCOMPLETE), its
shard.json of its type, each of its records its own and once; shards 1..N each given once, all made
with the same settings (config.json equal but for the shard, the share of the work each held, its
provenance and the settings a machine sets its own way: `MACHINE_SETTINGS`), no item in two shards,
every place of the run held once; `--out` new or empty and in no run or suite folder. A refusal
names the shard (its folder) and the record (its id and line). The records are put back in the
one-process run's order (each shard's `shard.json` holds its probes' places), and metrics.json is
computed from them with the protocol's `compute_metrics`, as the one process would have. The merged
folder is built beside `--out` and renamed into place when whole (`building`): a kill or a full disk
mid-merge leaves `--out` as it was, and the merge can be run again. A suite of shards
(`culture-probe run A B --shard K/N` into N suite folders, planning the same configs) merges config
by config into one suite folder.
"""

from __future__ import annotations

import errno
import math
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from culture_probe import rundir, shards
from culture_probe.errors import CultureProbeError, naming_folder
from culture_probe.loading import task_of_run
from culture_probe.provenance import PROCESSES_FILE, ProcessLog, read_processes
from culture_probe.record import Metrics
from culture_probe.report import headline, write_report
from culture_probe.report.summary import (
    SUMMARY_JSON,
    SUMMARY_MD,
    SuiteRun,
    planned_of,
    read_summary,
    summarize_suite,
    summary_lines,
    write_summary,
)
from culture_probe.runner.api import RunResult, run_metrics
from culture_probe.runner.stage_models import model_spec
from culture_probe.runner.suite import SuiteResult
from culture_probe.settings import RunSettings, Shard
from culture_probe.tasks import Task
from culture_probe.tasks.probes import Record
from culture_probe.util.outfolder import remove_leftovers
from culture_probe.util.typecheck import checked

# config.json keys that say how, when and where a shard ran, not what it computed: the merge keeps
# the first shard's date, versions and hardware and records the processes of all
PROVENANCE = (
    "date",
    "finished",
    "duration_s",
    "processes",
    "versions",
    "versions_seen",
    "hardware",
)
# run settings that each machine may set its own way (the batch its memory takes, its device, its
# cache, its server traffic), as --resume lets them differ
MACHINE_SETTINGS = (
    "device",
    "batch_tokens",
    "cache_dir",
    "no_cache",
    "concurrency",
    "request_timeout",
    "max_retries",
)
# the folder a merge builds beside --out (`.NAME` + this + a random part), renamed to --out when
# whole
BUILDING = ".merging-"


@dataclass(frozen=True)
class ShardRun:
    """One shard's finished run and its `shard.json` (its place in the whole run)."""

    shard: Shard
    run: rundir.Run = field(repr=False)
    part: shards.ShardRecord = field(repr=False)

    @property
    def name(self) -> str:
        """How an error names the shard: its number and folder."""
        return f"shard {self.shard} ({self.run.path})"

    def line(self, record: Record) -> int:
        """The line of items.jsonl that holds `record` (one of the shard's records), as an error
        names it.
        """
        return next(i for i, r in enumerate(self.run.records, 1) if r is record)

    def at(self, record: Record) -> str:
        """How an error names one of the shard's records: its key and line."""
        return f"{record.key!r} ({rundir.ITEMS_FILE} line {self.line(record)})"


def read_shard(path: Path) -> ShardRun:
    """A shard's folder read back; a folder that is no run, no shard, a shard.json that is not this
    run's, a record the shard does not hold (repeated, or not its own) or a shard that did not
    finish is refused, naming it.
    """
    run = rundir.read_run(path)
    part = shards.read_part(path)
    if run.record.run.shard is None or part is None:
        raise CultureProbeError(
            f"{path} is not a shard: it was run without --shard K/N. Merge the N folders of one "
            "`culture-probe run ... --shard K/N`."
        )
    shard = ShardRun(Shard.parse(run.record.run.shard), run, part)
    if part.shard != shard.shard:
        raise CultureProbeError(
            f"{shard.name}: its {shards.SHARD_FILE} is shard {part.shard}'s, its {rundir.CONFIG_FILE} shard "
            f"{shard.shard}'s; {shards.REDO}."
        )
    check_records(shard)
    status = rundir.progress(run)
    answered = {r.key for r in run.records if r.stage == part.stage}
    if status is None and answered != set(part.positions):
        status = f"INCOMPLETE {len(answered)}/{len(part.positions)}"
    if status is not None:
        raise CultureProbeError(
            f"{shard.name} is {status}: finish it first (its command again, with --resume), then merge."
        )
    return shard


def check_records(shard: ShardRun) -> None:
    """Each record of the shard once, and its own: a first-stage probe its shard.json places, or a
    later stage's record of one of its items. A repeated or stray line (a copied or hand-joined
    items.jsonl) is refused naming it.
    """
    seen: dict[tuple[str, str], Record] = {}
    first = shard.part.stage
    items = {r.item_id for r in shard.run.records if r.key in shard.part.positions}
    for record in shard.run.records:
        before = seen.setdefault((record.stage, record.key), record)
        if before is not record:
            raise CultureProbeError(
                f"{shard.name} holds the {record.stage} record {record.key!r} twice ({rundir.ITEMS_FILE} lines "
                f"{shard.line(before)} and {shard.line(record)}); {shards.REDO}."
            )
        own = (
            record.key in shard.part.positions if record.stage == first else record.item_id in items
        )
        if not own:
            raise CultureProbeError(
                f"{shard.name} holds a record that is not its own: {shard.at(record)} answers no probe its "
                f"{shards.SHARD_FILE} places (a line copied from another shard's or run's items.jsonl?); {shards.REDO}."
            )


def check_shards(found: Sequence[ShardRun]) -> None:
    """Shards 1..N of one run, each once, made with the same settings, no item in two of them, every
    probe of the run in one of them; the first that is not is named in the error.
    """
    first, by_index = found[0], dict[int, ShardRun]()
    for shard in found:
        if shard.shard.count != first.shard.count:
            raise CultureProbeError(
                f"{shard.name} is one of {shard.shard.count} shards, {first.name} one of {first.shard.count}: "
                "merge the N folders of one sharded run."
            )
        if shard.shard.index in by_index:
            raise CultureProbeError(
                f"shard {shard.shard} is given twice: {by_index[shard.shard.index].run.path} and {shard.run.path}. "
                "Pass each shard's folder once."
            )
        by_index[shard.shard.index] = shard
    missing = [
        Shard(k, first.shard.count) for k in range(1, first.shard.count + 1) if k not in by_index
    ]
    if missing:
        raise CultureProbeError(
            f"shard {missing[0]} is missing ({len(missing)} of {first.shard.count} missing): pass its folder too "
            f"(run it with --shard {missing[0]})."
        )
    for shard in found[1:]:
        differ = difference(settings_of(first), settings_of(shard))
        if differ is not None:
            key, mine, theirs = differ
            raise CultureProbeError(
                f"{shard.name} was made with other settings than {first.name}: {key} is {theirs!r} there and "
                f"{mine!r} here. Run every shard with the same command but --shard."
            )
    check_disjoint(found)


def check_disjoint(found: Sequence[ShardRun]) -> None:
    """No item in two shards, and each place of the run's first stage held by one shard exactly."""
    holder: dict[str, tuple[ShardRun, Record]] = {}
    for shard in found:
        for record in shard.run.records:
            other, before = holder.setdefault(record.item_id, (shard, record))
            if other is not shard:
                raise CultureProbeError(
                    f"item {record.item_id} is in two shards: {other.name} at {other.at(before)} and "
                    f"{shard.name} at {shard.at(record)}. Merge the N folders of one sharded run."
                )
    place: dict[int, ShardRun] = {}
    whole = found[0].part.probes
    for shard in found:
        for key, position in shard.part.positions.items():
            other = place.setdefault(position, shard)
            if other is not shard or position >= whole:
                where = (
                    f"held by {other.name} too"
                    if other is not shard
                    else f"beyond its {whole} probes"
                )
                raise CultureProbeError(
                    f"{shard.name} places probe {key!r} at place {position} of the run, {where}: the folders are "
                    "not the shards of one run."
                )
    if len(place) != whole:
        gap = next(i for i in range(whole) if i not in place)
        raise CultureProbeError(
            f"No shard holds place {gap} of the run's {whole} first-stage probes ({len(place)} held): the folders "
            "are not all the shards of one run."
        )


def settings_of(shard: ShardRun) -> dict[str, Any]:
    """What must be equal in every shard: config.json without provenance, the shard, its share of
    the work and the machine's own settings; and the whole run's size as shard.json gives it.
    """
    config = {k: v for k, v in shard.run.config.items() if k not in PROVENANCE}
    config["run"] = {
        k: v for k, v in config["run"].items() if k not in ("shard", *MACHINE_SETTINGS)
    }
    config["planned"] = {k: v for k, v in (config.get("planned") or {}).items() if k != "probes"}
    config["subset"] = {k: v for k, v in (config.get("subset") or {}).items() if k != "sampled"}
    whole = {k: v for k, v in shard.part.to_json().items() if k not in ("shard", "positions")}
    # the settings first: the likely difference
    return {"run": config.pop("run"), **config, shards.SHARD_FILE: whole}


def difference(mine: Any, theirs: Any, key: str = "") -> tuple[str, Any, Any] | None:
    """The first key (dotted) at which two JSON values differ, with both values; None when equal."""
    if isinstance(mine, Mapping) and isinstance(theirs, Mapping):
        for name in dict.fromkeys([*mine, *theirs]):
            found = difference(
                mine.get(name), theirs.get(name), f"{key}.{name}" if key else str(name)
            )
            if found is not None:
                return found
        return None
    return None if mine == theirs else (key or "config.json", mine, theirs)


def in_run_order(found: Sequence[ShardRun], stages: Sequence[str]) -> list[Record]:
    """The shards' records in the one-process run's order: stage by stage; the first stage's by
    their places in the whole run (shard.json), a later stage's by the place of its item in the
    first (each shard's order kept within).
    """
    stage = found[0].part.stage
    places = {key: place for shard in found for key, place in shard.part.positions.items()}
    item_place: dict[str, float] = {}
    for shard in found:
        for record in shard.run.records:
            if record.stage == stage:
                item_place[record.item_id] = min(
                    item_place.get(record.item_id, math.inf), places[record.key]
                )
    rank = {name: i for i, name in enumerate(stages)}

    def place(shard: int, index: int, record: Record) -> tuple[float, ...]:
        within = (
            places[record.key]
            if record.stage == stage
            else item_place.get(record.item_id, math.inf)
        )
        return rank.get(record.stage, len(rank)), within, shard, index

    tagged = [
        (place(s, i, r), r)
        for s, shard in enumerate(found)
        for i, r in enumerate(shard.run.records)
    ]
    return [record for _, record in sorted(tagged, key=lambda pair: pair[0])]


@dataclass(frozen=True)
class Merge:
    """The checked shards of one run, in shard order, ready to be written as one run."""

    shards: list[ShardRun] = field(repr=False)

    @classmethod
    def of(cls, shard_dirs: Sequence[str | os.PathLike]) -> Merge:
        """The shards in `shard_dirs`, read and checked (`check_shards`); nothing is written."""
        if not shard_dirs:
            raise CultureProbeError("merge takes the folders of a run's N shards; none was given.")
        for index, folder in enumerate(shard_dirs):
            if not isinstance(folder, (str, os.PathLike)):
                raise CultureProbeError(
                    f"merge_runs(shard_dirs) takes the shards' folders; item {index} is {folder!r:.80}."
                )
        found = sorted((read_shard(Path(d)) for d in shard_dirs), key=lambda s: s.shard)
        check_shards(found)
        return cls(found)

    def write(self, folder: Path, out: Path) -> RunResult:
        """The one run, written into the new `folder` (renamed to `out` once the merge is whole):
        config.json, items.jsonl, processes.json, metrics.json, report.
        """
        first = self.shards[0]
        task = task_of_run(first.run.record)
        records = in_run_order(self.shards, task.stage_names)
        processes = [p for s in self.shards for p in read_processes(s.run.path, s.run.records)]
        # read, never saved: their record
        log = ProcessLog(None, processes[:-1], processes[-1], clock=0.0)
        folder.mkdir(exist_ok=True)
        rundir.write_text(folder / rundir.MARKER, rundir.RUN_NOTE)
        rows_file = first.run.record.benchmark.saved_rows
        if rows_file is not None:
            rundir.write_jsonl(folder / rows_file, rundir.read_rows(first.run.path / rows_file))
        rundir.write_json(folder / rundir.CONFIG_FILE, self.config())
        rundir.write_jsonl(folder / rundir.ITEMS_FILE, [record.to_json() for record in records])
        rundir.write_json(folder / PROCESSES_FILE, {"processes": [p.to_json() for p in processes]})
        config = rundir.record_finish(folder, log.provenance())
        metrics = self.metrics(task, records, log)
        rundir.write_json(folder / rundir.METRICS_FILE, metrics)
        write_report(folder, config=config, records=records, metrics=metrics)
        return RunResult(config=config, records=records, metrics=metrics, run_dir=out)

    def config(self) -> dict[str, Any]:
        """The first shard's config.json as the one run's: no shard, the whole run's planned probes
        and units.
        """
        config = {
            k: v
            for k, v in self.shards[0].run.config.items()
            if k not in ("finished", "versions_seen")
        }
        config["run"] = {**config["run"], "shard": None}
        config["planned"] = {**config["planned"], "probes": self.shards[0].part.probes}
        if config.get("subset"):
            config["subset"] = {
                **config["subset"],
                "sampled": sum(s.run.config["subset"]["sampled"] for s in self.shards),
            }
        return config

    def metrics(self, task: Task, records: list[Record], log: ProcessLog) -> Metrics:
        """metrics.json as the one run computes it (`run_metrics`), the engine's cuts summed over
        every shard's processes.
        """
        record = self.shards[0].run.record
        known = (
            model_spec(
                record.model.spec, RunSettings.of(data_dir=record.run.data_dir)
            ).known_items()
            if any("planted" in (s.run.metrics or {}) for s in self.shards)
            else None
        )
        return run_metrics(task, records, known, log)


def check_out(out: Path, kind: rundir.Kind) -> None:
    """A merge writes a new run or suite: into a new or empty folder only, never over another run,
    never inside a run's or suite's folder (a shard's among them), never onto a mount point or the
    current folder (the merged folder is renamed into place).
    """
    if out.is_dir() and any(p.name != rundir.LOCK_FILE for p in out.iterdir()):
        raise CultureProbeError(
            f"--out {out} is not empty: the merge writes a new {kind}; pass a new or empty folder."
        )
    inside = next((p for p in out.resolve().parents if rundir.folder_kind(p) is not None), None)
    if inside is not None:
        raise CultureProbeError(
            f"--out {out} lies in {inside}, a culture_probe {rundir.folder_kind(inside)} folder (a shard's?): the "
            f"merge writes a new {kind} of its own; pass a folder outside it, e.g. beside the shards."
        )
    fixed = "a mount point" if os.path.ismount(out) else "the current folder"
    if out.is_dir() and (os.path.ismount(out) or out.resolve() == Path.cwd().resolve()):
        raise CultureProbeError(
            f"--out {out} is {fixed}: the merge builds the {kind} beside it and renames it into place; pass a new "
            "folder inside it."
        )


@contextmanager
def building(out: Path, kind: rundir.Kind) -> Iterator[Path]:
    """A new folder beside `out` to write the merged run (suite: `kind`) into, renamed to `out` in
    one step when the block ends: a kill or a full disk mid-merge leaves `out` as it was (absent, or
    empty), never half-written, and a full disk names `out`. `out` is locked meanwhile; a folder an
    earlier, killed merge left beside it is removed.
    """
    target = out.resolve()
    prefix = f".{target.name}{BUILDING}"
    with rundir.lock(out, kind):
        check_out(out, kind)  # now that no one else writes there
        remove_leftovers(target.parent, prefix)  # their merges held no lock: they were killed
        then = f"the merge wrote nothing into {out}: merge again once there is room"
        with naming_folder(out, then=then, within=str(target.parent / prefix)):
            built = Path(tempfile.mkdtemp(prefix=prefix, dir=target.parent))
            try:
                yield built
                swap_in(built, target)
            except BaseException:
                shutil.rmtree(built, ignore_errors=True)
                raise


def swap_in(built: Path, out: Path) -> None:
    """`built` renamed to `out` (absent, or empty but for the lock this process holds: a lock is
    held on the open file, not on its name), in one step.
    """
    (out / rundir.LOCK_FILE).unlink(missing_ok=True)
    try:
        os.rename(built, out)
    except OSError as error:
        if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
        raise CultureProbeError(
            f"--out {out} was written into while the merge ran; the merge wrote nothing there. Pass a new folder."
        ) from None


@checked()
def merge_runs(shard_dirs: Sequence[str | os.PathLike], out: str | os.PathLike) -> RunResult:
    """The N shards of one run (`culture-probe run ... --shard K/N` folders), checked and written
    into `out` as the run one process would have made (`Merge`); a missing, repeated, unfinished or
    mismatched shard, or a record that is not its shard's, is refused, naming it, before anything is
    written.
    """
    folder = Path(out)
    check_out(folder, "run")
    merge = Merge.of(shard_dirs)
    with building(folder, "run") as built:
        return merge.write(built, folder)


def suite_configs(folders: Sequence[Path]) -> tuple[dict[str, Any], list[str]]:
    """The first suite shard's summary and the configs to merge: those with a run; every folder a
    suite of shards that planned the same configs, each config run in all of them or in none (the
    first that is not is named).
    """
    for path in folders:
        if rundir.folder_kind(path) != "suite":
            raise CultureProbeError(
                f"{path} is not a suite folder: merge the N folders of one sharded suite."
            )
    summaries = [read_summary(path) for path in folders]
    planned = planned_of(summaries[0])
    for path, summary in zip(folders[1:], summaries[1:], strict=True):
        if planned_of(summary) != planned:
            raise CultureProbeError(
                f"{path} is a shard of a suite of {', '.join(planned_of(summary)) or 'no config'} "
                f"({path / SUMMARY_JSON}), {folders[0]} of one of {', '.join(planned) or 'no config'}: merge "
                "the N folders of one sharded suite (`culture-probe run CONFIG... --shard K/N`)."
            )
    configs = []
    for config in planned:
        ran = [(f / config / rundir.CONFIG_FILE).is_file() for f in folders]
        if any(ran) and not all(ran):
            have, lack = folders[ran.index(True)], folders[ran.index(False)]
            raise CultureProbeError(
                f"{config} has a run in {have} but none in {lack}: finish that suite shard (its command again, "
                "with --resume), then merge."
            )
        configs += [config] if all(ran) else []
    return summaries[0], configs


@checked()
def merge_suites(shard_dirs: Sequence[str | os.PathLike], out: str | os.PathLike) -> SuiteResult:
    """The N shards of one suite (suite folders), merged config by config into one suite folder
    `out`, with its summary; every config's shards are checked before anything is written.
    """
    folder = Path(out)
    check_out(folder, "suite")
    folders = [Path(d) for d in shard_dirs]
    summary, configs = suite_configs(folders)
    merges = {config: Merge.of([f / config for f in folders]) for config in configs}
    with building(folder, "suite") as built:
        rundir.write_text(built / rundir.SUITE_MARKER, rundir.SUITE_NOTE)
        runs = {
            config: merge.write(built / config, folder / config) for config, merge in merges.items()
        }
        done = {config: SuiteRun(run.config, run.metrics) for config, run in runs.items()}
        skipped = dict(summary.get("skipped") or {})
        merged = summarize_suite(summary.get("model", ""), done, skipped, planned_of(summary))
        write_summary(built, merged)
    return SuiteResult(runs, merged, folder, skipped)


def main(args: Any) -> int:
    """`culture-probe merge SHARD_DIRS... --out RUN`: the shards of a run (or of a suite) joined,
    its headline printed.
    """
    if args.shards and rundir.folder_kind(Path(args.shards[0])) == "suite":
        suite = merge_suites(args.shards, args.out)
        print(summary_lines(suite.summary))
        print(f"wrote {Path(args.out) / SUMMARY_MD}")
        return 0
    result = merge_runs(args.shards, args.out)
    print(headline(result.config, result.metrics))
    print(f"wrote {result.run_dir}")
    return 0
