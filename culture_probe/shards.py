"""`--shard K/N`: the K-th of N disjoint, deterministic slices of a run, so that a Slurm job array
(or any scheduler) runs one config on N machines and `culture-probe merge` joins the N folders into
the one-process run.

A slice holds whole `--limit` units (`Task.limit_key`: a DLAMA fact in every language, an X-FaKT
entity), so that no unit's probes are split between shards; the units go to the N shards longest
first, each to the shard with the least work so far (cost: a probe's candidates, at least 1), which
is deterministic and balanced within one unit. Each shard's folder keeps `shard.json`: where its
first-stage probes stand in the whole run's order, which is what the merge sorts the records back
into (so that its metrics, intervals included, are the one-process run's).

`settings.Shard` reads `--shard` (the settings stay light); this module slices the probes.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from culture_probe import rundir
from culture_probe.errors import InvalidValueError, SourceFormatError
from culture_probe.settings import Shard
from culture_probe.tasks.probes import Probe, ScoreProbe

# a shard's place in the whole run: its shard, the run's probe count, its probes' positions
SHARD_FILE = "shard.json"
# what a damaged shard.json's error tells the user to do
REDO = "the shard's folder is damaged: run the shard again (its command, with --shard K/N) into a new --out"


def cost(probe: Probe) -> int:
    """The work of one probe, in the engine's terms: a scored candidate (FmLAMA has hundreds per
    probe), else one.
    """
    return max(len(probe.request.candidates), 1) if isinstance(probe, ScoreProbe) else 1


def unit_costs(probes: Sequence[Probe], unit: Callable[[Probe], str]) -> dict[str, int]:
    """Each unit's cost (its probes' `cost`), in the order the units first come."""
    costs: dict[str, int] = {}
    for probe in probes:
        costs[unit(probe)] = costs.get(unit(probe), 0) + cost(probe)
    return costs


def assign(costs: Mapping[str, int], count: int) -> dict[str, int]:
    """Each unit's shard (0-based): units longest first (ties in first-come order), each to the
    shard with the least cost so far (ties to the lowest): the same probes give the same slices on
    every machine. A heap of the shards' loads keeps this O(units log N).
    """
    loads = [(0, i) for i in range(count)]
    shard_of = {}
    # a stable sort: equal costs keep probe order
    for key in sorted(costs, key=lambda k: -costs[k]):
        load, chosen = heapq.heappop(loads)
        shard_of[key] = chosen
        heapq.heappush(loads, (load + costs[key], chosen))
    return shard_of


@dataclass(frozen=True)
class ShardRecord:
    """`shard.json`: a shard's place in the whole run: its K/N, the first stage, the run's
    first-stage probes and units, and where each of the shard's probes stands in the run's order
    (what the merge sorts the records into).
    """

    shard: Shard
    stage: str
    probes: int
    units: int
    positions: Mapping[str, int] = field(repr=False)

    def to_json(self) -> dict[str, Any]:
        """shard.json as written."""
        return {
            "shard": str(self.shard),
            "stage": self.stage,
            "probes": self.probes,
            "units": self.units,
            "positions": dict(self.positions),
        }

    @classmethod
    def from_json(cls, value: Any, path: str) -> ShardRecord:
        """shard.json read back, each field of its type (a string `probes`, a list of `positions`
        are refused naming the file and the field, never read on).
        """
        if not isinstance(value, Mapping):
            raise SourceFormatError(
                f"not a JSON object but {type(value).__name__}; {REDO}.", path=path
            )
        field_of = functools.partial(_field, value, path=path)
        return cls(
            shard_of(field_of("shard", _text, "K/N text"), path),
            field_of("stage", _text, "a stage name"),
            field_of("probes", _whole, "a whole number >= 0"),
            field_of("units", _whole, "a whole number >= 0"),
            dict(field_of("positions", _places, "an object of probe keys to whole numbers")),
        )


def label(config: str, shard: str, part: ShardRecord | None) -> str:
    """What a shard's report and board entry say of it (`part`: its shard.json, where it has one): a
    slice of the run, never the run's result, and how to get that.
    """
    share = f" ({len(part.positions):,} of its {part.probes:,} first-stage probes)" if part else ""
    return (
        f"shard {shard} of the {config} run{share}, not its result: `culture-probe merge` its "
        f"{shard.partition('/')[2]} shards' folders for the run's numbers"
    )


def shard_note(shard: str | None) -> str | None:
    """The mark on a shard's title and figures (`shard K/N of the run`); None for a whole run."""
    return f"shard {shard} of the run" if shard else None


def shard_of(text: str, path: str) -> Shard:
    """shard.json's `shard` (K/N); another value is the file's error, not --shard's."""
    try:
        return Shard.parse(text)
    except InvalidValueError:
        raise SourceFormatError(
            f"`shard` must be K/N text, got {text!r:.40}; {REDO}.", path=path
        ) from None


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _places(value: Any) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and _whole(v) for k, v in value.items()
    )


def _field(
    value: Mapping[str, Any], name: str, fits: Callable[[Any], bool], kind: str, path: str
) -> Any:
    """`value[name]` when it is of its kind; else an error naming the file, the field and the value
    found.
    """
    if name not in value or not fits(value[name]):
        found = f"got {value[name]!r:.60}" if name in value else "it is missing"
        raise SourceFormatError(f"`{name}` must be {kind}, {found}; {REDO}.", path=path)
    return value[name]


@dataclass(frozen=True)
class Part:
    """The first-stage probes a run asks (all of them without a shard) and, for a shard,
    `shard.json`'s record.
    """

    probes: list[Probe] = field(repr=False)
    record: ShardRecord | None = field(default=None, repr=False)

    def save(self, run_dir: Path | None) -> None:
        """Write `shard.json` into the shard's folder (None: no folder, or another rank's)."""
        if run_dir is not None and self.record is not None:
            rundir.write_json(run_dir / SHARD_FILE, self.record.to_json())


def part_of(task: Any, probes: Sequence[Probe], shard: str | None) -> Part:
    """The probes of `shard` (`K/N`; None: all of them) among a run's first-stage `probes` (after
    any --limit), in their order, with their positions in it. A shard that would get no unit is an
    error, before the model loads and before any work that grows with N.
    """
    if shard is None:
        return Part(list(probes))
    part = Shard.parse(shard)
    costs = unit_costs(probes, task.limit_key)
    if len(costs) < part.count:
        raise InvalidValueError(
            f"--shard {part}: {task.config} asks {len(costs)} {task.limit_unit} here, fewer than {part.count:,} "
            f"shards; give N <= {len(costs)}."
        )
    shard_of_unit = assign(costs, part.count)
    mine = [
        (i, p) for i, p in enumerate(probes) if shard_of_unit[task.limit_key(p)] == part.index - 1
    ]
    record = ShardRecord(
        part, task.stage_names[0], len(probes), len(costs), {probe.key: i for i, probe in mine}
    )
    return Part([p for _, p in mine], record)


def read_part(run_dir: Path) -> ShardRecord | None:
    """A shard folder's `shard.json`, checked (None: the folder holds none, not a shard)."""
    path = run_dir / SHARD_FILE
    return ShardRecord.from_json(rundir.read_json(path), str(path)) if path.is_file() else None
