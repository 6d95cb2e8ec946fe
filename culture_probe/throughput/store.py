"""The rates measured on this machine, kept in `rates.json` in the library's cache folder: per model
shape and config, the rates a run measured (scoring and generation apart) and its fixed part; per
config, the fixed part any model's run measured (reading, planning, metrics: the model's speed does
not enter it); per device, the speed a short measurement found once (`flops.measure_speed`). Written
under a file lock, whole or not at all, so that concurrent runs add to it rather than overwrite each
other.

The file is checked when read (`Kept.read`): a file or an entry of a shape no run writes (a list, a
rate of 0 tokens or 0 seconds, a string where a number goes, a NaN) is ignored with a
`RatesFileWarning` naming the file and the entry, never a failed run or dry run: an estimate does
without it, and the next run that measures it rewrites it.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import warnings
from collections.abc import Callable, Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypeVar

from filelock import FileLock, Timeout

from culture_probe.data.sources import cache_root
from culture_probe.errors import SourceFormatError
from culture_probe.util.typecheck import check_document, read_dataclass

RATES_FILE = "rates.json"
FORMAT = 2  # a file of another format (an older library's) is read as empty and replaced
# a run's calls of one kind shorter than this, or in fewer batches, measured mostly their start: no
# rate is kept
MIN_SECONDS = 2.0
MIN_BATCHES = 3
LOCK_SECONDS = 10.0
# the fields an estimate divides by: above 0 (every other number of the file: 0 or more)
DIVISORS = frozenset({"tokens", "seconds", "flops_per_second", "head_flops_per_second"})
# what a warning about a damaged part of the file says happens to it
IGNORED = "ignored: the time estimates do without it, and the next run that measures it rewrites it"
T = TypeVar("T")


class RatesFileWarning(UserWarning):
    """rates.json, or an entry of it, is of a shape no run writes: ignored (the estimate does
    without it) and replaced by the next run's.
    """


@dataclass(frozen=True)
class KindRate:
    """What a run's calls of one kind (scoring, generation) ran: `tokens` in `seconds` of wall
    time.
    """

    tokens: int
    seconds: float

    @property
    def per_second(self) -> float:
        """Tokens per second."""
        return self.tokens / self.seconds


@dataclass(frozen=True)
class Rate:
    """The rates a run of `model` (as the user named it) on `config` measured here, on `device`:
    scoring and generation apart (None: that kind ran too little to measure), and `fixed`, the run's
    wall time besides its calls and its model's loading (reading, planning, metrics, the folder).
    """

    model: str
    config: str
    device: str
    date: str
    score: KindRate | None = None
    generate: KindRate | None = None
    fixed: float = 0.0

    @classmethod
    def read(cls, data: Any, where: str) -> Rate:
        """A rate as `asdict` wrote it, the entry `where` of the file, checked (`_entry`)."""
        check_document(data, Mapping[str, Any], _source(), _ignored(where), where)
        kinds = {
            kind: _entry(KindRate, data[kind], f"{where}.{kind}", where)
            if data.get(kind) is not None
            else None
            for kind in ("score", "generate")
        }
        return _entry(cls, data, where, where, **kinds)


@dataclass(frozen=True)
class DeviceSpeed:
    """How fast a device runs a transformer here, measured once (`flops.measure_speed`): the body's
    floating-point operations per second, the time per token that does not shrink with the model
    (memory, launches) and the engine's host time per candidate scored; the LM head's FLOP rate and
    its time per vocabulary entry at each read position (the log-softmax); the time per generation
    step (one forward pass of a batch for each new token).
    """

    device: str
    flops_per_second: float
    seconds_per_token: float
    seconds_per_candidate: float
    head_flops_per_second: float
    seconds_per_vocab_read: float
    seconds_per_step: float
    date: str

    @classmethod
    def read(cls, data: Any, where: str) -> DeviceSpeed:
        """A speed as `asdict` wrote it, the entry `where` of the file, checked (`_entry`)."""
        return _entry(cls, data, where, where)


@dataclass
class Kept:
    """The part of rates.json kept for this machine, typed both ways: the rates by "SHAPE CONFIG"
    and by "SHAPE" (the shape's latest), the fixed parts by config, the speeds by device.
    """

    rates: dict[str, Rate] = field(default_factory=dict)
    fixed: dict[str, float] = field(default_factory=dict)
    devices: dict[str, DeviceSpeed] = field(default_factory=dict)

    @classmethod
    def read(cls, data: Any, where: str) -> Kept:
        """The part at `where` in the file as `to_json` wrote it; a part or an entry of another
        shape is left out, with a `RatesFileWarning` naming it.
        """
        if not _is_object(data, where):
            return cls()
        return cls(
            _entries(data, "rates", where, Rate.read),
            _entries(data, "fixed", where, _fixed_part),
            _entries(data, "devices", where, DeviceSpeed.read),
        )

    def to_json(self) -> dict[str, Any]:
        """The part as the file holds it."""
        return {
            "rates": {key: asdict(rate) for key, rate in self.rates.items()},
            "fixed": dict(self.fixed),
            "devices": {key: asdict(speed) for key, speed in self.devices.items()},
        }


def _entries(
    data: Mapping[str, Any], part: str, where: str, read: Callable[[Any, str], T]
) -> dict[str, T]:
    """The entries of `data[part]` that `read` takes; each other one (or the whole part) warned of
    and left out.
    """
    block = data.get(part, {})
    if not _is_object(block, f"{where}.{part}"):
        return {}
    entries = {}
    for key, value in block.items():
        try:
            entries[key] = read(value, f"{where}.{part}.{key}")
        except SourceFormatError as damaged:
            _warn(str(damaged))
    return entries


def _entry(cls: type[T], data: Any, where: str, entry: str, **given: Any) -> T:
    """The dataclass `cls` from `data` at `where` in the file (in its `entry`): every field it
    requires there, each of its type, its numbers finite and not below 0 (above 0 where an estimate
    divides by it: `DIVISORS`). A SourceFormatError naming the field otherwise.
    """
    fix = _ignored(entry)
    check_document(data, Mapping[str, Any], _source(), fix, where)
    required = (f.name for f in fields(cls) if f.default is MISSING and f.name not in given)  # type: ignore[arg-type]
    lacking = next((name for name in required if data.get(name) is None), None)
    if lacking is not None:
        raise SourceFormatError(f"`{where}` lacks `{lacking}`; {fix}", path=_source())
    read = read_dataclass(cls, data, _source(), where, fix, **given)
    for name in (f.name for f in fields(cls)):  # type: ignore[arg-type]
        _check_range(getattr(read, name), name, f"{where}.{name}", fix)
    return read


def _fixed_part(value: Any, where: str) -> float:
    """A config's fixed part, in seconds, checked."""
    check_document(value, float, _source(), _ignored(where), where)
    _check_range(value, "", where, _ignored(where))
    return float(value)


def _check_range(value: Any, name: str, where: str, fix: str) -> None:
    """Refuse a number below 0, or 0 where an estimate divides by it (`name` in `DIVISORS`)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if value < 0 or (value == 0 and name in DIVISORS):
        bound = "above 0" if name in DIVISORS else "0 or more"
        raise SourceFormatError(
            f"`{where}` should be {bound}, got {value!r}; {fix}", path=_source()
        )


def _is_object(data: Any, where: str) -> bool:
    """Whether the part at `where` is a JSON object; one that is not is warned of."""
    try:
        check_document(data, Mapping[str, Any], _source(), _ignored(where), where)
    except SourceFormatError as damaged:
        _warn(str(damaged))
        return False
    return True


def _ignored(where: str) -> str:
    """What a warning about the damaged part `where` of the file says happens to it."""
    return f"`{where}` is {IGNORED}"


def _warn(message: str) -> None:
    # said once per process however often the file is read (the warnings filter's default), as the
    # user's warning
    warnings.warn(message, RatesFileWarning, stacklevel=2)


def machine() -> str:
    """The machine rates are kept for: its host name and CPU count."""
    return f"{platform.node()} ({os.cpu_count()} CPUs)"


def rates_path() -> Path:
    """The rates file: `rates.json` in the library's cache folder (`$CULTURE_PROBE_CACHE`)."""
    return cache_root() / RATES_FILE


def _source() -> str:
    return str(rates_path())


def _read() -> tuple[dict[str, Any], Kept]:
    """The file's machines other than this one (as they are: none of this machine's business) and
    this machine's part, checked (`Kept.read`). No file yet, or one of another format (an older
    library's): nothing. A file that is no JSON object of this format is warned of and read as
    nothing.
    """
    path = rates_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:  # no rate measured yet
        return {}, Kept()
    except OSError as unread:
        return _ignored_whole(f"could not be read: {unread.strerror}")
    except (
        ValueError,
        RecursionError,
    ):  # json's reader recurses: a file nested too deep is no rates file either
        return _ignored_whole("not JSON, or nested too deep to read")
    if isinstance(data, dict) and isinstance(data.get("format"), int) and data["format"] != FORMAT:
        return {}, Kept()
    machines = data.get("machines") if isinstance(data, dict) else None
    if not isinstance(machines, dict) or data.get("format") != FORMAT:
        return _ignored_whole(
            f"not a JSON object with `format` {FORMAT} and `machines`, as this version writes it: {data!r:.60}"
        )
    here = machine()
    others = {name: part for name, part in machines.items() if name != here}
    return others, Kept.read(machines.get(here, {}), f"machines.{here}")


def _ignored_whole(reason: str) -> tuple[dict[str, Any], Kept]:
    """Nothing read, and a warning naming the file and why."""
    _warn(f"{rates_path()}: {reason}; the whole file is {IGNORED}")
    return {}, Kept()


def _here() -> Kept:
    return _read()[1]


def _update(change: Callable[[Kept], None]) -> bool:
    """Apply `change` to this machine's part of the file, under its lock (False: the cache folder is
    read-only or the lock was held too long; the run's results do not depend on its rate).
    """
    path = rates_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(f"{path}.lock", timeout=LOCK_SECONDS):
            others, here = _read()
            change(here)
            data = {"format": FORMAT, "machines": {**others, machine(): here.to_json()}}
            _write_whole(path, json.dumps(data, indent=1, sort_keys=True))
    # RecursionError: another machine's part nested deeper than the writer goes (left as it was)
    except (OSError, Timeout, RecursionError):
        return False
    return True


def _write_whole(path: Path, text: str) -> None:
    """Write `path` whole or not at all: a reader never sees half a file, and a failed write leaves
    the old one and no staging file.
    """
    handle, staging = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(staging, path)
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise


def rate_of(shape: str, config: str) -> Rate | None:
    """The rate a run of a model of `shape` measured on `config` here, else the shape's latest on
    any config.
    """
    rates = _here().rates
    return next((rates[key] for key in (f"{shape} {config}", shape) if key in rates), None)


def keep_rate(shape: str, rate: Rate) -> bool:
    """Keep `rate` as the shape's on its config and as its latest; a kind it did not measure keeps
    the one an earlier run of the same shape and config measured.
    """

    def change(here: Kept) -> None:
        key = f"{shape} {rate.config}"
        earlier = here.rates.get(key)
        here.rates[key] = here.rates[shape] = replace(
            rate,
            score=rate.score or (earlier.score if earlier else None),
            generate=rate.generate or (earlier.generate if earlier else None),
        )

    return _update(change)


def keep_fixed(config: str, seconds: float) -> bool:
    """Keep the fixed part a run of `config` measured (a run too small for a rate measures it all
    the same: it reads every row and computes its metrics).
    """
    return _update(lambda here: here.fixed.update({config: seconds}))


def fixed_of(config: str) -> float | None:
    """The fixed part the latest run of `config` here measured, whatever its model (None: none ran
    here).
    """
    return _here().fixed.get(config)


def speed_of(device: str) -> DeviceSpeed | None:
    """The speed measured for `device` here, if any."""
    return _here().devices.get(device)


def keep_speed(speed: DeviceSpeed) -> bool:
    """Keep the speed measured for its device."""
    return _update(lambda here: here.devices.update({speed.device: speed}))
