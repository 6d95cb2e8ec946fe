"""`--shard K/N`: the K-th of N disjoint, deterministic slices of a run, so that a Slurm job array (or any
scheduler) runs one config on N machines and `culture-probe merge` joins the N folders into the one-process run.

A slice holds whole `--limit` units (`Task.limit_key`: a DLAMA fact in every language, an X-FaKT entity), so that
no unit's probes are split between shards; the units go to the N shards longest first, each to the shard with the
least work so far (cost: a probe's candidates, at least 1), which is deterministic and balanced within one unit.
Each shard's folder keeps `shard.json`: where its first-stage probes stand in the whole run's order, which is what
the merge sorts the records back into (so that its metrics, intervals included, are the one-process run's).

`settings.Shard` reads `--shard` (the settings stay light); this module slices the probes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from culture_probe import rundir
from culture_probe.errors import InvalidValueError
from culture_probe.settings import Shard
from culture_probe.tasks.probes import Probe, ScoreProbe

# a shard's place in the whole run: its shard, the run's probe count, its probes' positions
SHARD_FILE = "shard.json"


def cost(probe: Probe) -> int:
    """The work of one probe, in the engine's terms: a scored candidate (FmLAMA has hundreds per probe), else one."""
    return max(len(probe.request.candidates), 1) if isinstance(probe, ScoreProbe) else 1


def assign(probes: Sequence[Probe], unit: Callable[[Probe], str], count: int) -> dict[str, int]:
    """Each unit's shard (0-based): units longest first (ties in probe order), each to the shard with the least cost
    so far (ties to the lowest): the same probes give the same slices on every machine.
    """
    costs: dict[str, int] = {}
    for probe in probes:
        costs[unit(probe)] = costs.get(unit(probe), 0) + cost(probe)
    loads, shard_of = [0] * count, {}
    # a stable sort: equal costs keep probe order
    for key in sorted(costs, key=lambda k: -costs[k]):
        chosen = min(range(count), key=lambda i: (loads[i], i))
        shard_of[key], loads[chosen] = chosen, loads[chosen] + costs[key]
    return shard_of


@dataclass(frozen=True)
class Part:
    """The first-stage probes a run asks (all of them without a shard) and, for a shard, `shard.json`'s record."""

    probes: list[Probe] = field(repr=False)
    record: dict[str, Any] | None = field(default=None, repr=False)

    def save(self, run_dir: Path | None) -> None:
        """Write `shard.json` into the shard's folder (None: no folder, or another rank's)."""
        if run_dir is not None and self.record is not None:
            rundir.write_json(run_dir / SHARD_FILE, self.record)


def part_of(task: Any, probes: Sequence[Probe], shard: str | None) -> Part:
    """The probes of `shard` (`K/N`; None: all of them) among a run's first-stage `probes` (after any --limit), in
    their order, with their positions in it. A shard that would get no unit is an error, before the model loads.
    """
    if shard is None:
        return Part(list(probes))
    part = Shard.parse(shard)
    shard_of = assign(probes, task.limit_key, part.count)
    units = len(shard_of)
    if units < part.count:
        raise InvalidValueError(
            f"--shard {part}: {task.config} asks {units} {task.limit_unit} here, fewer than {part.count} shards; "
            f"give N <= {units}."
        )
    mine = [(i, p) for i, p in enumerate(probes) if shard_of[task.limit_key(p)] == part.index - 1]
    record = {
        "shard": str(part),
        "stage": task.stages[0],
        "probes": len(probes),
        "units": units,
        "positions": {probe.key: i for i, probe in mine},
    }
    return Part([p for _, p in mine], record)


def read_part(run_dir: Path) -> dict[str, Any] | None:
    """A shard folder's `shard.json` (None: the folder holds none, not a shard)."""
    path = run_dir / SHARD_FILE
    return rundir.read_json(path) if path.is_file() else None
