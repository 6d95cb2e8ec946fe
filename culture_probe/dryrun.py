"""`culture-probe run ... --dry-run`: what a run would ask its model, seen before paying for it (docs/dry-run.md).

A dry run plans each config as a run does (`runner.plan`: options, language, rows, declared resources, the first
stage's probes, the `--limit` subset) and reads the model's tokenizer and config, never its weights (a planted
model's tokenizer is built from its spec, untrained). It says how many probes each stage asks and shows the first
ones as the engine encodes them (`culture_probe.engine.preview`), and writes nothing: no run folder, no score cache,
no planted model. Stages built from an earlier stage's records (X-FaKT's judge, MAPS memorisation) cannot be shown
before that stage has run: they are named, with their own model if they have one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from culture_probe.data.registry import expand
from culture_probe.engine.preview import EncodingPreview, ServedPreview, View
from culture_probe.engine.types import SERVED
from culture_probe.errors import CultureProbeError, InvalidValueError
from culture_probe.runner import StageModel, first_probes, model_kind, model_parts, plan
from culture_probe.settings import RunSettings
from culture_probe.suite import plan_each, suite_settings
from culture_probe.tasks import Task
from culture_probe.tasks.probes import FillMaskProbe, GenerateProbe, Probe, ScoreProbe, Skipped
from culture_probe.typecheck import names_given

SHOWN = 3  # probes shown per config unless told otherwise (`--show N`)

Previewer = EncodingPreview | ServedPreview


@dataclass(frozen=True)
class StagePlan:
    """One stage of a run: its probe count (None: built from an earlier stage's records, so known once that stage
    has run), how many of them are skipped (never asked), and the stage's own model (an LLM judge) if any, with what
    its weights will take (`about`, from its config alone).
    """

    name: str
    probes: int | None
    skipped: int = 0
    model: str | None = None
    about: str | None = None


@dataclass(frozen=True)
class ShownProbe:
    """A probe of the first stage and what the model will be given for it."""

    probe: Probe
    view: View


@dataclass(frozen=True)
class ConfigPlan:
    """One config's dry run: the model kind, the rows and items probed, each stage, and the first probes shown."""

    config: str
    kind: str
    rows: int
    items: int
    sampled: int
    stages: tuple[StagePlan, ...]
    shown: tuple[ShownProbe, ...]

    def lines(self) -> list[str]:
        """The plan as text: counts, stages, then each shown probe."""
        items = (
            f"{self.sampled} of {self.items} items (--limit)" if self.sampled != self.items else f"{self.items} items"
        )
        out = [f"{self.config}: a {self.kind} model, {self.rows} rows, {items}"]
        for i, stage in enumerate(self.stages):
            model = f"; {stage.about}" if stage.about else f", answered by {stage.model}" if stage.model else ""
            if stage.probes is None:
                earlier = self.stages[i - 1].name
                known = f"built from the records of stage {earlier}; its probe count is known once that stage has run"
                out.append(f"  stage {stage.name}: {known}{model}")
            else:
                skipped = f" ({stage.skipped} skipped: never asked)" if stage.skipped else ""
                out.append(f"  stage {stage.name}: {stage.probes} probes{skipped}{model}")
        if self.shown:
            one = len(self.shown) == 1
            first = "the first probe" if one else f"the first {len(self.shown)} probes"
            out.append(f"  {first} of stage {self.stages[0].name}, as the model will get {'it' if one else 'them'}:")
        for n, shown in enumerate(self.shown, 1):
            tag = f" #{shown.probe.tag}" if shown.probe.tag else ""
            out.append(f"  [{n}] item {shown.probe.item_id}{tag}")
            out += [f"      {line}" for line in shown.view.lines()]
        return out


@dataclass(frozen=True)
class DryRun:
    """What a run of `configs` on `model` would ask: each config's plan, and the configs skipped for want of data
    ({config: why}, as a suite skips them).
    """

    model: str
    configs: tuple[ConfigPlan, ...]
    skipped: dict[str, str] = field(default_factory=dict)
    out: str | None = None

    def text(self) -> str:
        """The dry run as the terminal shows it."""
        where = f" (--out {self.out} was not created)" if self.out is not None else ""
        out = [f"dry run of {self.model}: its tokenizer and config were read, no weights; nothing was written{where}."]
        for config in self.configs:
            out += ["", *config.lines()]
        out += [f"\n{config}: skipped, {why}" for config, why in self.skipped.items()]
        return "\n".join(out)


def dry_run(
    configs: str | Sequence[str],
    model: str | os.PathLike,
    settings: RunSettings | None = None,
    *,
    n: int = SHOWN,
    rows: Sequence[Any] | None = None,
    out: str | os.PathLike | None = None,
    strict: bool = False,
    **keywords: Any,
) -> DryRun:
    """Plan a run of `configs` (names or groups, as `run_suite` takes them) on `model` and show the first `n` probes
    of each config as the model will get them, loading the data and the model's tokenizer only and writing nothing.

    `settings` and `keywords` are `run`'s settings and protocol options; `rows` replaces the data of a single config;
    `out` is only named (nothing is created). In a suite, a config whose data cannot be had is skipped with its
    reason, as `run_suite` skips it, unless `strict`.
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise InvalidValueError(f"A dry run shows n >= 0 probes per config, got {n!r}.")
    names = expand(names_given(configs, "dry_run(configs)"))
    if rows is not None and len(names) > 1:
        raise CultureProbeError("rows belong to one config: dry-run a suite without them, or name one config.")
    settings, options, data_dirs = suite_settings(names, settings, keywords)
    previewers: dict[tuple[str, str], Previewer] = {}

    def one(config: str) -> ConfigPlan:
        return plan_config(config, model, replace(settings, data_dir=data_dirs[config]), options, rows, n, previewers)

    plans, skipped = plan_each(names, one, strict)
    return DryRun(str(model), tuple(plans.values()), skipped, None if out is None else str(out))


def plan_config(
    config: str,
    model: str | os.PathLike,
    settings: RunSettings,
    options: dict[str, Any],
    rows: Sequence[Any] | None,
    n: int,
    previewers: dict[tuple[str, str], Previewer],
) -> ConfigPlan:
    """One config's dry run. The previewer of (model, kind) is made once and kept in `previewers`; its weightless
    scorer stands in for the model while the run is planned (its kind and tokenizer are all the plan reads of it).
    """
    kind = model_kind(model, settings)
    if (str(model), kind) not in previewers:
        previewers[str(model), kind] = load_previewer(model, kind, settings)
    previewer = previewers[str(model), kind]
    ahead = plan(config, model, settings, options, rows=rows, scorer=previewer.scorer)
    task = ahead.task
    _, first = first_probes(config, task, ahead.probes, settings.limit)
    asked = [p for p in first if not isinstance(p, Skipped)][:n]
    return ConfigPlan(
        config,
        task.kind,
        len(ahead.data),
        len({p.item_id for p in ahead.probes}),
        len({p.item_id for p in first}),
        stage_plans(task, first, ahead.models),
        tuple(ShownProbe(p, SHOW[type(p)](previewer, p)) for p in asked),
    )


def stage_plans(task: Task, first: Sequence[Probe], models: Mapping[str, StageModel]) -> tuple[StagePlan, ...]:
    """The first stage counted; later stages named (they are built from the records before them), each with its own
    model as the plan resolved it (`models`).
    """

    def stage(name: str, probes: int | None, skipped: int = 0) -> StagePlan:
        own = models.get(name)
        return StagePlan(name, probes, skipped, task.stage_model(name), own.describe(name) if own else None)

    head, *later = task.stages
    return (stage(head, len(first), sum(isinstance(p, Skipped) for p in first)), *(stage(s, None) for s in later))


#: how each probe kind is previewed: the preview of the engine call that `runner.ASK` makes for it
SHOW: dict[type, Callable[[Any, Any], View]] = {
    ScoreProbe: lambda previewer, probe: previewer.score([probe.request], probe.options)[0],
    GenerateProbe: lambda previewer, probe: previewer.generate([probe.prompt], probe.options)[0],
    FillMaskProbe: lambda previewer, probe: previewer.fill_mask([probe.left], probe.options)[0],
}


def load_previewer(model: str | os.PathLike, kind: str, settings: RunSettings) -> Previewer:
    """The preview of `model`'s inputs from its tokenizer and config (no weights), or of a served model's requests."""
    name = str(model)
    if name.startswith(SERVED):
        return ServedPreview(name[len(SERVED) :], base_url=settings.base_url or "")
    tokenizer, config = model_parts(name, settings)
    return EncodingPreview.weightless(kind, tokenizer, config, name=name)
