"""The rates measured on this machine, kept in `rates.json` in the library's cache folder: per model shape and
config, the rates a run measured (scoring and generation apart) and its fixed part; per config, the fixed part any
model's run measured (reading, planning, metrics: the model's speed does not enter it); per device, the speed a
short measurement found once (`flops.measure_speed`). Written under a file lock, whole or not at all, so that
concurrent runs add to it rather than overwrite each other.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from culture_probe.data.sources import cache_root

RATES_FILE = "rates.json"
FORMAT = 2  # a file of another format (an older library's) is read as empty and replaced
# a run's calls of one kind shorter than this, or in fewer batches, measured mostly their start: no rate is kept
MIN_SECONDS = 2.0
MIN_BATCHES = 3
LOCK_SECONDS = 10.0


@dataclass(frozen=True)
class KindRate:
    """What a run's calls of one kind (scoring, generation) ran: `tokens` in `seconds` of wall time."""

    tokens: int
    seconds: float

    @property
    def per_second(self) -> float:
        """Tokens per second."""
        return self.tokens / self.seconds


@dataclass(frozen=True)
class Rate:
    """The rates a run of `model` (as the user named it) on `config` measured here, on `device`: scoring and
    generation apart (None: that kind ran too little to measure), and `fixed`, the run's wall time besides its
    calls and its model's loading (reading, planning, metrics, the folder).
    """

    model: str
    config: str
    device: str
    date: str
    score: KindRate | None = None
    generate: KindRate | None = None
    fixed: float = 0.0

    @classmethod
    def read(cls, data: dict[str, Any]) -> Rate:
        """A rate as `asdict` wrote it."""
        kinds = {k: KindRate(**data[k]) if data.get(k) else None for k in ("score", "generate")}
        return cls(**{**data, **kinds})


@dataclass(frozen=True)
class DeviceSpeed:
    """How fast a device runs a transformer here, measured once (`flops.measure_speed`): the body's floating-point
    operations per second, the time per token that does not shrink with the model (memory, launches) and the
    engine's host time per candidate scored; the LM
    head's FLOP rate and its time per vocabulary entry at each read position (the log-softmax); the time per
    generation step (one forward pass of a batch for each new token).
    """

    device: str
    flops_per_second: float
    seconds_per_token: float
    seconds_per_candidate: float
    head_flops_per_second: float
    seconds_per_vocab_read: float
    seconds_per_step: float
    date: str


def machine() -> str:
    """The machine rates are kept for: its host name and CPU count."""
    return f"{platform.node()} ({os.cpu_count()} CPUs)"


def rates_path() -> Path:
    """The rates file: `rates.json` in the library's cache folder (`$CULTURE_PROBE_CACHE`)."""
    return cache_root() / RATES_FILE


def _read() -> dict[str, Any]:
    try:
        data = json.loads(rates_path().read_text(encoding="utf-8"))
    # no rate measured yet, or a damaged file: the runs measure them again
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and data.get("format") == FORMAT else {}


def _here() -> dict[str, Any]:
    here: dict[str, Any] = _read().get("machines", {}).get(machine(), {})
    return here


def _update(change: Callable[[dict[str, Any]], None]) -> bool:
    """Apply `change` to this machine's part of the file, under its lock (False: the cache folder is read-only or
    the lock was held too long; the run's results do not depend on its rate).
    """
    path = rates_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(f"{path}.lock", timeout=LOCK_SECONDS):
            data = _read() or {"format": FORMAT, "machines": {}}
            change(data["machines"].setdefault(machine(), {}))
            staging = path.with_name(f".{path.name}.{os.getpid()}")
            staging.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
            staging.replace(path)  # whole or not at all: a reader never sees half a file
    except (OSError, Timeout):
        return False
    return True


def rate_of(shape: str, config: str) -> Rate | None:
    """The rate a run of a model of `shape` measured on `config` here, else the shape's latest on any config."""
    rates = _here().get("rates", {})
    for key in (f"{shape} {config}", shape):
        try:
            if rates.get(key):
                return Rate.read(rates[key])
        except TypeError:  # damaged
            continue
    return None


def keep_rate(shape: str, rate: Rate) -> bool:
    """Keep `rate` as the shape's on its config and as its latest; a kind it did not measure keeps the one an
    earlier run of the same shape and config measured.
    """

    def change(here: dict[str, Any]) -> None:
        rates = here.setdefault("rates", {})
        key = f"{shape} {rate.config}"
        earlier = Rate.read(rates[key]) if rates.get(key) else None
        kept = Rate(
            rate.model,
            rate.config,
            rate.device,
            rate.date,
            rate.score or (earlier.score if earlier else None),
            rate.generate or (earlier.generate if earlier else None),
            rate.fixed,
        )
        rates[key] = rates[shape] = asdict(kept)

    return _update(change)


def keep_fixed(config: str, seconds: float) -> bool:
    """Keep the fixed part a run of `config` measured (a run too small for a rate measures it all the same: it reads
    every row and computes its metrics).
    """
    return _update(lambda here: here.setdefault("fixed", {}).update({config: seconds}))


def fixed_of(config: str) -> float | None:
    """The fixed part the latest run of `config` here measured, whatever its model (None: none ran here)."""
    value = _here().get("fixed", {}).get(config)
    return float(value) if isinstance(value, (int, float)) else None


def speed_of(device: str) -> DeviceSpeed | None:
    """The speed measured for `device` here, if any."""
    data = _here().get("devices", {}).get(device)
    try:
        return DeviceSpeed(**data) if data else None
    except TypeError:
        return None


def keep_speed(speed: DeviceSpeed) -> bool:
    """Keep the speed measured for its device."""
    return _update(
        lambda here: here.setdefault("devices", {}).update({speed.device: asdict(speed)})
    )
