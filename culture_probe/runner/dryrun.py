"""`culture-probe run ... --dry-run`: what a run would ask its model, seen before paying for it
(docs/dry-run.md).

A dry run plans each config as a run does (`runner.plan`: options, language, rows, declared
resources, the first stage's probes, the `--limit` subset) and reads the model's tokenizer and
config, never its weights (a planted model's tokenizer is built from its spec, untrained). It says
how many probes each stage asks and shows the first ones as the engine encodes them
(`culture_probe.engine.preview`), and writes nothing: no run folder, no score cache, no planted
model. Stages built from an earlier stage's records (X-FaKT's judge, MAPS memorisation) cannot be
shown before that stage has run: they are named, with their own model if they have one. What the
first stage costs is counted by the same encoding (`throughput`: probes, candidates, tokens through
the model after prefix sharing) and timed at the rate a run of the model measured on this machine,
once per config and in total.

With `--out`, the dry run checks the folder as the run would (`rundir.check_start`), and with
`--resume` it shows what the resume would do: the run's settings compared with those of the run in
the folder by the run's own check (`rundir.check_resumable`, the same refusal), then the probes
left, those the folder's records do not answer.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from culture_probe import rundir
from culture_probe.data.registry import expand
from culture_probe.engine.loading import ModelSpec
from culture_probe.engine.preview import EncodingPreview, ServedPreview, View, Workload
from culture_probe.errors import CultureProbeError, InvalidValueError
from culture_probe.record import RunRecord
from culture_probe.runner import planning, stage_models
from culture_probe.runner.config_json import describe_plan
from culture_probe.runner.planning import Plan, first_asked
from culture_probe.runner.stage_models import StageModel
from culture_probe.runner.suite import held, plan_each, suite_settings
from culture_probe.settings import SMOKE, RunSettings
from culture_probe.tasks import Task
from culture_probe.tasks.probes import (
    FillMaskProbe,
    GenerateProbe,
    Probe,
    Record,
    ScoreProbe,
    Skipped,
)
from culture_probe.throughput import Estimate, cost_line, estimate_for, probe_workload, total_line
from culture_probe.util.typecheck import checked, names_given

SHOWN = 3  # probes shown per config unless told otherwise (`--show N`)

Previewer = EncodingPreview | ServedPreview


@dataclass(frozen=True)
class StagePlan:
    """One stage of a run: its probe count (None: built from an earlier stage's records, so known
    once that stage has run), how many of them are skipped (never asked), the stage's own model (an
    LLM judge) if any, with what its weights will take (`about`, from its config alone), and the
    records a resume keeps of it (`answered`).
    """

    name: str
    probes: int | None
    skipped: int = 0
    model: str | None = None
    about: str | None = None
    answered: int = 0


@dataclass(frozen=True)
class ShownProbe:
    """A probe of the first stage and what the model will be given for it."""

    probe: Probe
    view: View


@dataclass(frozen=True)
class ConfigPlan:
    """One config's dry run: the model kind, the rows and items probed, each stage, and the first
    probes shown (of a resume: the first of those left); `resumes` names the run folder a resume
    continues.
    """

    config: str
    kind: str
    rows: int
    items: int
    sampled: int
    stages: tuple[StagePlan, ...]
    shown: tuple[ShownProbe, ...]
    resumes: str | None = None
    work: Workload = Workload()
    estimate: Estimate | None = None
    omits: str = ""  # what a smoke run of the config leaves out (`Smoke.omits`)
    shard: str | None = None  # --shard K/N: `sampled` counts the shard's items

    def cost(self) -> str:
        """What the first stage's probes (those left, on a resume) put through the model, and the
        time they take.
        """
        later = " (later stages are counted once they run)" if len(self.stages) > 1 else ""
        name = f"  cost of stage {self.stages[0].name}{later}"
        return cost_line(name, self.work, self.estimate)

    def lines(self) -> list[str]:
        """The plan as text: counts, stages, then each shown probe."""
        why = f"shard {self.shard}" if self.shard else "--limit"
        items = (
            f"{self.sampled} of {self.items} items ({why})"
            if self.sampled != self.items
            else f"{self.items} items"
        )
        out = [f"{self.config}: a {self.kind} model, {self.rows} rows, {items}"]
        if self.resumes is not None:
            out.append(
                f"  resumes {self.resumes}: the probes its records answer are not asked again"
            )
        for i, stage in enumerate(self.stages):
            model = (
                f"; {stage.about}"
                if stage.about
                else f", answered by {stage.model}"
                if stage.model
                else ""
            )
            kept = (
                f"; {stage.answered} already answered in {self.resumes}" if stage.answered else ""
            )
            if stage.probes is None:
                earlier = self.stages[i - 1].name
                known = f"built from the records of stage {earlier}; its probe count is known once that stage has run"
                out.append(f"  stage {stage.name}: {known}{kept}{model}")
            else:
                skipped = f" ({stage.skipped} skipped: never asked)" if stage.skipped else ""
                count = (
                    f"{stage.probes - stage.answered} probes left of {stage.probes}"
                    if self.resumes
                    else ""
                )
                out.append(
                    f"  stage {stage.name}: {count or f'{stage.probes} probes'}{skipped}{kept}{model}"
                )
        out.append(self.cost())
        if self.omits:
            out.append(f"  a smoke run asks fewer: it leaves out {self.omits}")
        if self.shown:
            one = len(self.shown) == 1
            first = "the first probe" if one else f"the first {len(self.shown)} probes"
            first += " left" if self.resumes else ""
            out.append(
                f"  {first} of stage {self.stages[0].name}, as the model will get {'it' if one else 'them'}:"
            )
        for n, shown in enumerate(self.shown, 1):
            tag = f" #{shown.probe.tag}" if shown.probe.tag else ""
            out.append(f"  [{n}] item {shown.probe.item_id}{tag}")
            out += [f"      {line}" for line in shown.view.lines()]
        return out


@dataclass(frozen=True)
class DryRun:
    """What a run of `configs` on `model` would ask: each config's plan, and the configs skipped for
    want of data ({config: why}, as a suite skips them).
    """

    model: str
    configs: tuple[ConfigPlan, ...]
    skipped: dict[str, str] = field(default_factory=dict)
    out: str | None = None

    def text(self) -> str:
        """The dry run as the terminal shows it."""
        created = (
            "was read, not changed"
            if self.out is not None and Path(self.out).exists()
            else "was not created"
        )
        where = f" (--out {self.out} {created})" if self.out is not None else ""
        out = [
            f"dry run of {self.model}: its tokenizer and config were read, no weights; nothing was written{where}."
        ]
        for config in self.configs:
            out += ["", *config.lines()]
        out += [f"\n{config}: skipped, {why}" for config, why in self.skipped.items()]
        if len(self.configs) > 1:
            out += ["", self.total()]
        return "\n".join(out)

    def total(self) -> str:
        """The first stages of every config planned, together."""
        parts = [(c.work, c.estimate) for c in self.configs]
        return total_line(f"total of {len(self.configs)} configs' first stages", parts)


@checked()
def dry_run(
    configs: str | Sequence[str],
    model: str | os.PathLike,
    settings: RunSettings | None = None,
    *,
    n: int = SHOWN,
    rows: Sequence[Any] | None = None,
    out: str | os.PathLike | None = None,
    resume: bool = False,
    strict: bool = False,
    options: Mapping[str, Any] | None = None,
    **keywords: Any,
) -> DryRun:
    """Plan a run of `configs` (names or groups, as `run_suite` takes them) on `model` and show the
    first `n` probes of each config as the model will get them, loading the data and the model's
    tokenizer only and writing nothing.

    `settings`, `options` and `keywords` are `run_suite`'s; `rows` replaces the data of a single
    config. `out` is read, never written: refused as the run would refuse it, and with `resume` the
    run in it (a suite's: each config's) is compared with this one as the resume would compare it,
    which then shows the probes left. In a suite, a config whose data cannot be had is skipped with
    its reason, as `run_suite` skips it, unless `strict`.
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise InvalidValueError(f"A dry run shows n >= 0 probes per config, got {n!r}.")
    names = expand(names_given(configs, "dry_run(configs)"))
    if rows is not None and len(names) > 1:
        raise CultureProbeError(
            "rows belong to one config: dry-run a suite without them, or name one config."
        )
    settings, each, data_dirs = suite_settings(names, settings, keywords, options)
    folder = None if out is None else Path(out)
    if folder is not None and len(names) > 1:  # a suite's folder, checked as the suite checks it
        rundir.check_writable(folder, "suite")
        held(folder, model, names, resume)
    previewers: dict[tuple[str, str], Previewer] = {}

    def one(config: str) -> ConfigPlan:
        run_dir = folder / config if folder is not None and len(names) > 1 else folder
        config_settings = replace(settings, data_dir=data_dirs[config])
        return plan_config(
            config, model, config_settings, each[config], rows, n, previewers, run_dir, resume
        )

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
    run_dir: Path | None = None,
    resume: bool = False,
) -> ConfigPlan:
    """One config's dry run. The previewer of (model, kind) is made once and kept in `previewers`;
    its weightless scorer stands in for the model while the run is planned (its kind and tokenizer
    are all the plan reads of it). `run_dir` is checked as the run checks it, first; with `resume`,
    the records it holds are checked and kept as the resume would keep them (`resumed_records`), and
    the probes shown are those left.
    """
    done = rundir.check_start(run_dir, resume=resume) if run_dir is not None else []
    spec = stage_models.model_spec(model, settings)
    kind = spec.kind()
    if (str(model), kind) not in previewers:
        previewers[str(model), kind] = load_previewer(spec, kind)
    previewer = previewers[str(model), kind]
    # the weightless scorer stands in for the loaded model
    spec = replace(spec, scorer=previewer.scorer)
    ahead = planning.plan(config, spec, settings, options, rows=rows)
    task = ahead.task
    # --limit, then --shard K/N's part
    number, part = first_asked(task, ahead.probes, settings, spec)
    first = part.probes
    kept = resumed_records(
        run_dir, done, spec, previewer, ahead, settings, number, first, rows is not None
    )
    answered = {r.key for r in kept if r.stage == task.stage_names[0]}
    left = [p for p in first if not isinstance(p, Skipped) and p.key not in answered]
    work = probe_workload(previewer, left)
    return ConfigPlan(
        config,
        task.kind,
        len(ahead.data),
        len({p.item_id for p in ahead.probes}),
        len({p.item_id for p in first}),
        stage_plans(task, first, ahead.models, kept),
        tuple(ShownProbe(p, SHOW[type(p)](previewer, p)) for p in left[:n]),
        str(run_dir) if done else None,
        work,
        estimate_for(work, previewer.scorer, config, keep=False),  # a dry run writes nothing
        task.smoke.omits if settings.limit == SMOKE else "",
        settings.shard,
    )


@dataclass(frozen=True)
class Previewed:
    """The run's model as a dry run knows it, for the config.json a resume compares: its kind and
    identity.
    """

    kind: str
    identity: Any


def resumed_records(
    run_dir: Path | None,
    done: Sequence[Record],
    model: ModelSpec,
    previewer: Previewer,
    ahead: Plan,
    settings: RunSettings,
    number: int | None,
    first: Sequence[Probe],
    custom_rows: bool,
) -> list[Record]:
    """The records `done` in `run_dir` that a resume keeps: this run's config.json (`describe_plan`)
    compared with the folder's by the resume's own check (`rundir.check_resumable`: the same refusal
    where a setting differs), less the records of the stages it asks again. A served model's
    identity is its preview's; a local model's needs its weights, so a model of the name the run
    recorded is taken to be its model.
    """
    if run_dir is None or not done:
        return []
    old = RunRecord.from_json(rundir.read_json(run_dir / rundir.CONFIG_FILE))
    served = isinstance(previewer, ServedPreview)
    scorer = (
        previewer.scorer
        if served
        else Previewed(previewer.scorer.kind, identity_of(old, model.label))
    )
    new = describe_plan(
        model, scorer, ahead, settings, number, first, rows=custom_rows, folder=True
    )
    redo = rundir.check_resumable(old, new, run_dir, ran={r.stage for r in done})
    return [r for r in done if r.stage not in redo]


def identity_of(old: RunRecord, model: str) -> Any:
    """The identity a run of the local `model` records, as far as it is known without weights: the
    identity `old` recorded when `model` names its model (its name, or the folder it resolved), else
    the name alone.
    """
    named = str(Path(model).resolve()) if Path(model).exists() else model
    identity = old.model.identity
    same = old.model.spec == model or (
        isinstance(identity, Mapping) and identity.get("name_or_path") == named
    )
    return identity if same else {"name_or_path": named}


def stage_plans(
    task: Task,
    first: Sequence[Probe],
    models: Mapping[str, StageModel],
    kept: Sequence[Record] = (),
) -> tuple[StagePlan, ...]:
    """The first stage counted; later stages named (they are built from the records before them),
    each with its own model as the plan resolved it (`models`) and the records of it that a resume
    keeps (`kept`).
    """

    def stage(name: str, probes: int | None, skipped: int = 0) -> StagePlan:
        own = models.get(name)
        answered = sum(r.stage == name for r in kept)
        about = own.describe(name) if own else None
        return StagePlan(name, probes, skipped, task.stage(name).model, about, answered)

    head, *later = task.stage_names
    return (
        stage(head, len(first), sum(isinstance(p, Skipped) for p in first)),
        *(stage(s, None) for s in later),
    )


#: how each probe kind is previewed: the preview of the engine call that `runner.execution.ASK`
#: makes for it
SHOW: dict[type, Callable[[Any, Any], View]] = {
    ScoreProbe: lambda previewer, probe: previewer.score([probe.request], probe.options)[0],
    GenerateProbe: lambda previewer, probe: previewer.generate([probe.prompt], probe.options)[0],
    FillMaskProbe: lambda previewer, probe: previewer.fill_mask([probe.left], probe.options)[0],
}


def load_previewer(model: ModelSpec, kind: str) -> Previewer:
    """The preview of `model`'s inputs from its tokenizer and config (no weights), or of a served
    model's requests.
    """
    if model.served:
        return ServedPreview(model.served_name, base_url=model.options.base_url or "")
    tokenizer, config = model.parts()
    return EncodingPreview.weightless(kind, tokenizer, config, name=model.label)
