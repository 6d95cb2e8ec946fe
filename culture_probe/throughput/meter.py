"""What a run will cost here, said before it is paid for: its workload (probes, candidates, tokens after prefix
sharing, counted by the engine's own encoding: `culture_probe.engine.preview.Workload`) and the time that takes at
the rate a run of the same model measured on this machine (docs/dry-run.md, "What it will cost").

A run measures its rate as the tokens its model ran (`Backend.tokens_run`: its batches' costs, so scores the cache
held count nothing) over the wall time of its stages, and the rest of its wall time (reading and planning, metrics
and their intervals, the folder) as its fixed part, and keeps both in `rates.json` in the library's cache folder,
per machine, model and config: the rate of the same config is used where there is one (a benchmark's cost per token
depends on its candidates and prompts, its fixed part on its rows), else the model's latest, without a fixed part.
`culture-probe run --dry-run` and the start of every run read it; a model with no rate measured here gets no time,
and the line says how to measure one.
"""

from __future__ import annotations

import json
import os
import platform
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from culture_probe.data.sources import cache_root
from culture_probe.engine.preview import EncodingPreview, Workload
from culture_probe.engine.scorer import ScorerProtocol
from culture_probe.tasks.probes import (
    FillMaskProbe,
    GenerateProbe,
    Probe,
    Record,
    ScoreProbe,
    Skipped,
)

RATES_FILE = "rates.json"
# a run that ran fewer tokens measures mostly its start-up: no rate is kept from it
MIN_TOKENS = 1000


@dataclass(frozen=True)
class Rate:
    """Tokens per second that a run of `model` on `config` measured on this machine (`tokens` in `seconds`, on
    `device`).
    """

    model: str
    config: str
    tokens: int
    seconds: float
    device: str
    date: str
    # the rest of the run's wall time: reading, planning, metrics, the folder (0: not measured)
    fixed: float = 0.0

    @property
    def per_second(self) -> float:
        """Tokens per second."""
        return self.tokens / self.seconds

    def fixed_for(self, config: str) -> float:
        """The fixed part of a run of `config`: this run's, when it ran `config` (another config reads other rows)."""
        return self.fixed if config == self.config else 0.0


def machine() -> str:
    """The machine rates are kept for: its host name and CPU count."""
    return f"{platform.node()} ({os.cpu_count()} CPUs)"


def rates_path() -> Path:
    """The rates file: `rates.json` in the library's cache folder (`$CULTURE_PROBE_CACHE`)."""
    return cache_root() / RATES_FILE


def _read() -> dict[str, Any]:
    try:
        return json.loads(rates_path().read_text(encoding="utf-8"))
    # no rate measured yet, or a damaged file: the runs measure them again
    except (OSError, ValueError):
        return {}


def rate_of(model: str, config: str) -> Rate | None:
    """The rate measured for `model` on `config` on this machine, else the model's latest on any config, if any."""
    here = _read().get(machine(), {})
    for key in (f"{model} {config}", model):
        try:
            if here.get(key):
                return Rate(**here[key])
        except TypeError:  # written by another version of the library
            continue
    return None


def record_rate(
    model: str, config: str, tokens: int, seconds: float, device: str, fixed: float = 0.0
) -> Rate | None:
    """Keep the rate of a run of `model` on `config` that ran `tokens` in `seconds` of stages and `fixed` seconds
    besides, as the config's and as the model's latest (None: too few tokens to measure one).
    """
    if tokens < MIN_TOKENS or seconds <= 0:
        return None
    today = datetime.now(timezone.utc).date().isoformat()
    rate = Rate(model, config, tokens, round(seconds, 3), device, today, round(max(fixed, 0.0), 3))
    rates = _read()
    rates.setdefault(machine(), {}).update({f"{model} {config}": asdict(rate), model: asdict(rate)})
    path = rates_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = path.with_name(f".{path.name}.{os.getpid()}")
        staging.write_text(json.dumps(rates, indent=1, sort_keys=True), encoding="utf-8")
        staging.replace(path)  # whole or not at all: a reader never sees half a file
    except OSError:  # a read-only cache folder: the run's results do not depend on its rate
        return None
    return rate


def seconds_at(work: Workload, rate: Rate | None, config: str) -> float | None:
    """The time a run of `config` doing `work` takes at `rate`: its tokens at the rate, and the fixed part the rate's
    run measured on `config` (None: no rate, or a workload of unknown tokens).
    """
    if rate is None or work.tokens is None:
        return None
    return work.tokens / rate.per_second + rate.fixed_for(config)


def duration(seconds: float) -> str:
    """`seconds` as a person reads a wait: ~40 s, ~3.2 min, ~1.5 h."""
    if seconds < 90:
        return f"~{max(seconds, 1):.0f} s"
    if seconds < 5400:
        return f"~{seconds / 60:.1f} min"
    return f"~{seconds / 3600:.1f} h"


def cost_line(name: str, config: str, work: Workload, rate: Rate | None, model: str) -> str:
    """One line of what a run of `config` doing `work` is and the time it takes: probes, candidates, tokens, and the
    estimate with where its rate comes from (or why there is none).
    """
    if work.tokens is None:
        return f"{counts(name, work)}; no tokens or time estimated (a served model tokenizes)"
    return f"{counts(name, work)}; {estimate_words(work, rate, config, model)}"


def total_line(name: str, parts: Sequence[tuple[Workload, float | None]]) -> str:
    """One line of several workloads together, each with its estimate (None: none), as `cost_line` says one."""
    work = sum((w for w, _ in parts), Workload())
    if work.tokens is None:
        return f"{counts(name, work)}; no tokens or time estimated (a served model tokenizes)"
    if any(seconds is None for _, seconds in parts):
        return (
            f"{counts(name, work)}; no time estimate: a config has no rate measured on this machine"
        )
    return f"{counts(name, work)}; {duration(sum(s or 0.0 for _, s in parts))}, each config at its own rate"


def counts(name: str, work: Workload) -> str:
    """`name`: the probes, candidates and tokens of `work`."""
    candidates = f", {work.candidates:,} candidates" if work.candidates else ""
    about = "" if work.exact else "about "
    counted = "" if work.exact else " (counted on a sample of its requests)"
    tokens = (
        f", {about}{work.tokens:,} tokens through the model{counted}"
        if work.tokens is not None
        else ""
    )
    return f"{name}: {work.probes:,} probes{candidates}{tokens}"


def estimate_words(work: Workload, rate: Rate | None, config: str, model: str) -> str:
    """The estimate of a run of `config` doing `work` and its source in words."""
    seconds = seconds_at(work, rate, config)
    if rate is None or seconds is None:
        return f"no time estimate: no rate measured for {model} on this machine yet (a run measures it, e.g. --limit 5)"
    fixed = rate.fixed_for(config)
    besides = f" and {fixed:,.0f} s of reading, planning and metrics" if fixed >= 0.5 else ""
    return (
        f"{duration(seconds)} at {rate.per_second:,.0f} tokens/s{besides}, measured on this machine ({rate.device}) "
        f"by a run of {rate.model} on {rate.config} ({rate.date})"
    )


class Meter:
    """A run's measurement: the tokens its model ran in its stages (from `start` to `staged`), the stages' wall
    time, and the rest of the run's wall time since `began` (its clock at the start), kept by `keep`.
    """

    def __init__(self, scorer: ScorerProtocol, began: float):
        self.scorer = scorer
        # None: a served model or a stand-in counts nothing
        self.tokens = getattr(scorer, "tokens_run", None)
        self.began = began
        self.stages_began = time.monotonic()
        self.stage_seconds: float | None = None

    def staged(self) -> None:
        """The stages are done: their wall time is measured."""
        self.stage_seconds = time.monotonic() - self.stages_began

    def keep(self, model: str, config: str) -> Rate | None:
        """Keep the run's rate for `model` on `config`, with the rest of its wall time as the fixed part (None:
        nothing counted, or too little).
        """
        if self.tokens is None or self.stage_seconds is None:
            return None
        ran = getattr(self.scorer, "tokens_run", self.tokens) - self.tokens
        device = str(getattr(self.scorer, "device", "cpu"))
        fixed = time.monotonic() - self.began - self.stage_seconds
        return record_rate(model, config, ran, self.stage_seconds, device, fixed)


#: what each probe kind puts through the model: the workload of the engine call that
#: `runner.execution.ASK` makes for a group
WORK: dict[type, Callable[[Any, list[Any], Any], Workload]] = {
    ScoreProbe: lambda previewer, probes, options: previewer.score_workload(
        [p.request for p in probes], options
    ),
    GenerateProbe: lambda previewer, probes, options: previewer.generate_workload(
        [p.prompt for p in probes], options
    ),
    FillMaskProbe: lambda previewer, probes, options: previewer.fill_mask_workload(
        [p.left for p in probes], options
    ),
}


def probe_workload(previewer: Any, probes: Sequence[Probe]) -> Workload:
    """What `probes` put through the model of `previewer` (an `EncodingPreview` or `ServedPreview`), grouped by kind
    and options as the run asks them; a skipped probe asks nothing.
    """
    groups: dict[tuple[type, Any], list[Probe]] = {}
    for probe in probes:
        if not isinstance(probe, Skipped):
            groups.setdefault((type(probe), probe.options), []).append(probe)
    return sum(
        (WORK[kind](previewer, group, options) for (kind, options), group in groups.items()),
        Workload(),
    )


class RunCostNotice(UserWarning):
    """What a run will ask and the time it will take here, said as it starts (`cost_line`)."""


def start_meter(
    config: str,
    model: str,
    scorer: ScorerProtocol,
    stage: str,
    first: Sequence[Probe],
    done: Sequence[Record],
    *,
    began: float,
    show: bool,
    work: Workload | None = None,
) -> Meter:
    """As a run's stages start: say what the probes of its first `stage` not yet `done` will cost (`show`; `work`:
    counted already, by the suite), and start measuring its rate (`Meter`; `began`: the run's clock at its start).
    """
    if show:
        if work is None:
            answered = {r.key for r in done if r.stage == stage}
            work = loaded_workload(scorer, [p for p in first if p.key not in answered])
        name = f"{config} starts, stage {stage}"
        warnings.warn(
            cost_line(name, config, work, rate_of(model, config), model),
            RunCostNotice,
            stacklevel=3,
        )
    return Meter(scorer, began)


def loaded_workload(scorer: ScorerProtocol, probes: Sequence[Probe]) -> Workload:
    """`probe_workload` of a loaded scorer: counted by its own encoding where it runs in this process."""
    from culture_probe.engine.backend import Backend

    if isinstance(scorer, Backend):
        return probe_workload(EncodingPreview(scorer), probes)
    asked = [p for p in probes if not isinstance(p, Skipped)]
    return Workload(
        len(asked), sum(len(p.request.candidates) for p in asked if isinstance(p, ScoreProbe)), None
    )
