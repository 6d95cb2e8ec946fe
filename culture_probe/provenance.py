"""The processes that made a run (`processes.json` in its run directory), so that a run killed and
resumed keeps the provenance of every probe it holds, not only that of its last process.

Each process notes when it started, how long it ran, its library versions, the records it wrote and
what the engine cut to fit the model for them, stage by stage; it saves the note after every chunk
of probes, so that a process killed in the middle keeps its counts up to its last written chunk. At
the end, metrics.json's `truncation` sums the counts of every process, and config.json's
`duration_s` their times, with `processes` (how many) and `versions_seen` (each library whose
version changed between them, every version in order).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from culture_probe import rundir
from culture_probe.engine.types import Truncation
from culture_probe.errors import SourceFormatError
from culture_probe.record import RunRecord
from culture_probe.tasks.probes import Record

PROCESSES_FILE = "processes.json"


@dataclass(frozen=True)
class Process:
    """One process of a run: when it started (None: unknown, a process made before this record was
    kept), its time, versions and records written, and what its engine cut per stage for them (None:
    not counted, a served model or a process made before this record).
    """

    started: str | None
    duration_s: float = 0.0
    records: int = 0
    versions: Mapping[str, Any] = field(default_factory=dict)
    truncation: Mapping[str, Truncation] | None = None
    finished: bool = False

    def keeping(self, stages: Collection[str]) -> Process:
        """The process with the counts of `stages` only: a stage whose records a resume dropped (to
        ask them again with other options) takes its counts with it.
        """
        if self.truncation is None:
            return self
        return replace(
            self, truncation={s: cut for s, cut in self.truncation.items() if s in stages}
        )

    def to_json(self) -> dict[str, Any]:
        """processes.json's entry."""
        cuts = (
            None
            if self.truncation is None
            else {s: cut.to_json() for s, cut in self.truncation.items()}
        )
        return {
            "started": self.started,
            "duration_s": round(self.duration_s, 3),
            "records": self.records,
            "versions": dict(self.versions),
            "truncation": cuts,
            "finished": self.finished,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Process:
        """The entry `to_json` wrote."""
        cuts = data["truncation"]
        return cls(
            started=data["started"],
            duration_s=float(data["duration_s"]),
            records=int(data["records"]),
            versions=dict(data["versions"]),
            truncation=None
            if cuts is None
            else {s: Truncation.from_json(c) for s, c in cuts.items()},
            finished=bool(data["finished"]),
        )


@dataclass
class ProcessLog:
    """The processes of one run: those before this one (read back) and this one, whose entry is
    saved to `path` (None: no run folder, or another rank's) as its records are written.
    """

    path: Path | None
    earlier: list[Process]
    current: Process
    clock: float  # `time.monotonic()` when this process started

    @classmethod
    def begin(
        cls,
        run_dir: Path | None,
        versions: Mapping[str, Any],
        kept: Sequence[Record],
        *,
        clock: float,
        counting: bool,
        write: bool,
    ) -> ProcessLog:
        """The log of a process beginning, after the processes before it (none for a run that starts
        afresh: no record `kept`); `counting`: its scorer counts what it cuts.
        """
        earlier = read_processes(run_dir, kept) if run_dir is not None and kept else []
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        current = Process(started, versions=versions, truncation={} if counting else None)
        log = cls(
            run_dir / PROCESSES_FILE if run_dir is not None and write else None,
            earlier,
            current,
            clock,
        )
        log.save()
        return log

    @property
    def processes(self) -> list[Process]:
        """Every process of the run, this one last."""
        return [*self.earlier, self.current]

    def answered(self, stage: str, records: int, cut: Truncation | None) -> None:
        """Note `records` more records of `stage` written, the engine having cut `cut` for the stage
        so far in this process (None: the stage's scorer does not count); saved at once.
        """
        current = self.current
        cuts = current.truncation if cut is None else {**(current.truncation or {}), stage: cut}
        self.current = replace(current, records=current.records + records, truncation=cuts)
        self.save()

    def finish(self) -> None:
        """Note this process finished (every record written), saved."""
        self.current = replace(self.current, finished=True)
        self.save()

    def save(self) -> None:
        """processes.json with this process's time so far."""
        self.current = replace(self.current, duration_s=time.monotonic() - self.clock)
        if self.path is not None:
            rundir.write_json(self.path, {"processes": [p.to_json() for p in self.processes]})

    def truncation(self) -> dict[str, Any] | None:
        """metrics.json's `truncation`: what the engine cut for the probes the run holds, summed
        over the `processes` that made it (`uncounted`: those whose counts were not kept); None when
        none counted (a served model).
        """
        counted = [p.truncation for p in self.processes if p.truncation is not None]
        if not counted:
            return None
        total = functools.reduce(
            Truncation.plus, (cut for cuts in counted for cut in cuts.values()), Truncation()
        )
        every = len(self.processes)
        uncounted = {"uncounted": every - len(counted)} if len(counted) < every else {}
        return {**total.to_json(), "resumed": every > 1, "processes": every, **uncounted}

    def provenance(self) -> dict[str, Any]:
        """config.json's record of the processes: `duration_s` summed over them, how many
        (`processes`), and `versions_seen`: each library whose version changed between them, with
        every version seen, in order.
        """
        seen: dict[str, list[Any]] = {}
        for process in self.processes:
            for name, version in process.versions.items():
                versions = seen.setdefault(name, [])
                versions += [] if version in versions else [version]
        changed = {name: versions for name, versions in seen.items() if len(versions) > 1}
        return {
            "duration_s": round(sum(p.duration_s for p in self.processes), 3),
            "processes": len(self.processes),
            **({"versions_seen": changed} if changed else {}),
        }


def read_processes(run_dir: Path, kept: Sequence[Record]) -> list[Process]:
    """The processes that made the records `kept` in `run_dir`, each with the counts of the stages
    kept; a run made before processes.json was written is one process of unknown counts, with
    config.json's time and versions.
    """
    path = run_dir / PROCESSES_FILE
    if not path.is_file():
        config = RunRecord.from_json(rundir.read_json(run_dir / rundir.CONFIG_FILE))
        finished = (run_dir / rundir.METRICS_FILE).is_file()
        return [Process(None, config.duration_s, len(kept), config.versions, None, finished)]
    try:
        processes = [Process.from_json(entry) for entry in rundir.read_json(path)["processes"]]
    except (KeyError, TypeError, ValueError, AttributeError):
        raise SourceFormatError(
            "not a record of a run's processes; the file is damaged: move it away to resume without the earlier "
            "processes' times and counts.",
            path=str(path),
        ) from None
    stages = {record.stage for record in kept}
    return [process.keeping(stages) for process in processes]
