"""A run's measurement, and what it will cost said as it starts: the workload of its probes (counted
by the engine's own encoding: `culture_probe.engine.preview.Workload`) and the time that takes
(`estimate`).

A run measures, per kind of engine call (scoring, generation: `Backend.spending`), the tokens its
model ran and the calls' wall time, and as its fixed part the rest of its wall time less its model's
loading (a planted model's training is loading); it keeps them for its model's shape and config
(`store.keep_rate`) when the calls ran long enough to measure a rate (`store.MIN_SECONDS`,
`store.MIN_BATCHES`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from culture_probe.engine.preview import EncodingPreview, Workload
from culture_probe.engine.scorer import ScorerProtocol
from culture_probe.engine.spending import Spent
from culture_probe.tasks.probes import (
    FillMaskProbe,
    GenerateProbe,
    Probe,
    Record,
    ScoreProbe,
    Skipped,
)
from culture_probe.throughput import store
from culture_probe.throughput.estimate import Estimate, cost_line, estimate
from culture_probe.throughput.flops import ModelShape, device_name, shape_of, speed_for


def model_shape(scorer: Any) -> ModelShape | None:
    """The shape of an in-process backend's model, loaded or weightless (None: a served model, a
    stand-in, or a config transformers cannot build).
    """
    config = getattr(getattr(scorer, "model", None), "config", None)
    kind = getattr(scorer, "kind", None)
    if config is None or not hasattr(config, "to_json_string") or kind is None:
        return None
    try:
        return shape_of(config, kind)
    except Exception:  # noqa: BLE001 - an estimate is never worth failing a run for
        return None


def estimate_for(work: Workload, scorer: Any, config: str, *, keep: bool = True) -> Estimate | None:
    """The time `work` takes on `scorer` in a run of `config`: at the rates a run of the same model
    shape measured here, else from FLOPs at this machine's speed on the scorer's device (measured
    once, about a second, and kept unless not `keep`); None where the tokens or the model's shape
    are unknown.
    """
    shape = model_shape(scorer)
    if shape is None or work.tokens is None:
        return None
    return estimate(
        work,
        shape,
        speed_for(scorer.device, keep=keep),
        store.rate_of(shape.key, config),
        store.fixed_of(config),
        config,
    )


@dataclass
class Meter:
    """A run's measurement from the start of its stages (`staged` ends them): `began`, the run's
    clock at its start, and `loading`, the seconds its model took to load (left out of the fixed
    part).
    """

    scorer: ScorerProtocol
    began: float
    loading: float = 0.0

    def __post_init__(self) -> None:
        spending = getattr(self.scorer, "spending", None)
        # None: a served model or a stand-in counts nothing
        self.before: dict[str, Spent] | None = spending.snapshot() if spending else None
        self.stages_began = time.monotonic()
        self.stage_seconds: float | None = None

    def staged(self) -> None:
        """The stages are done: their wall time is measured."""
        self.stage_seconds = time.monotonic() - self.stages_began

    def keep(self, model: str, config: str) -> store.Rate | None:
        """Keep the run's fixed part for `config`, and its rates for its model's shape on `config`
        (None: nothing counted, too little of either kind, or the shape unknown).
        """
        shape = model_shape(self.scorer)
        if self.before is None or self.stage_seconds is None or shape is None:
            return None
        now = self.scorer.spending.snapshot()  # type: ignore[attr-defined]
        spent = {kind: now[kind] - self.before[kind] for kind in now}
        calls = sum(s.seconds for s in spent.values())
        fixed = round(max(time.monotonic() - self.began - self.loading - calls, 0.0), 3)
        store.keep_fixed(config, fixed)
        kinds = {kind: _measured(s) for kind, s in spent.items()}
        if not any(kinds.values()):
            return None
        today = datetime.now(timezone.utc).date().isoformat()
        device = device_name(getattr(self.scorer, "device", "cpu"))
        rate = store.Rate(model, config, device, today, kinds["score"], kinds["generate"], fixed)
        return rate if store.keep_rate(shape.key, rate) else None


def _measured(spent: Spent) -> store.KindRate | None:
    """The rate of one kind's calls, if they ran long enough to measure one."""
    if spent.seconds < store.MIN_SECONDS or spent.batches < store.MIN_BATCHES or spent.tokens <= 0:
        return None
    return store.KindRate(spent.tokens, round(spent.seconds, 3))


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
    """What `probes` put through the model of `previewer` (an `EncodingPreview` or `ServedPreview`),
    grouped by kind and options as the run asks them; a skipped probe asks nothing.
    """
    groups: dict[tuple[type, Any], list[Probe]] = {}
    for probe in probes:
        if not isinstance(probe, Skipped):
            groups.setdefault((type(probe), probe.options), []).append(probe)
    return sum(
        (WORK[kind](previewer, group, options) for (kind, options), group in groups.items()),
        Workload(),
    )


# the library's information lines are INFO on its logger: the command line prints them as plain
# lines; in Python, `logging.basicConfig(level=logging.INFO)` shows them, and the logger's level
# quiets them
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunCostNotice:
    """What a run (or a suite, in total) will ask and the time it will take here, said as it starts
    (`cost_line`): information, so logged at INFO on the `culture_probe` logger (the record carries
    this notice as `notice`), not warned: a warning would show the line of the library that said it.
    """

    line: str

    def say(self) -> None:
        """Log the line."""
        log.info("%s", self.line, extra={"notice": self})


def start_meter(
    config: str,
    scorer: ScorerProtocol,
    stage: str,
    first: Sequence[Probe],
    done: Sequence[Record],
    *,
    began: float,
    loading: float,
    show: bool,
    work: Workload | None = None,
) -> Meter:
    """As a run's stages start: say what the probes of its first `stage` not yet `done` will cost
    (`show`; `work`: counted already, by the suite), and start measuring (`Meter`; `began`: the
    run's clock at its start, `loading`: the seconds its model took to load).
    """
    if show:
        if work is None:
            answered = {r.key for r in done if r.stage == stage}
            work = loaded_workload(scorer, [p for p in first if p.key not in answered])
        name = f"{config} starts, stage {stage}"
        RunCostNotice(cost_line(name, work, estimate_for(work, scorer, config))).say()
    return Meter(scorer, began, loading)


def loaded_workload(scorer: ScorerProtocol, probes: Sequence[Probe]) -> Workload:
    """`probe_workload` of a loaded scorer: counted by its own encoding where it runs in this
    process.
    """
    from culture_probe.engine.backend import Backend

    if isinstance(scorer, Backend):
        return probe_workload(EncodingPreview(scorer), probes)
    asked = [p for p in probes if not isinstance(p, Skipped)]
    return Workload(
        len(asked), sum(len(p.request.candidates) for p in asked if isinstance(p, ScoreProbe)), None
    )
