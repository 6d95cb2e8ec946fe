"""The run's model and each stage's own model (an LLM judge), each read once into a `ModelSpec` with
the run's settings (`model_spec`): their kind, tokenizer and memory, read from configs before any
weights load.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from culture_probe.engine.loading import (
    LoadOptions,
    ModelInput,
    ModelSpec,
    default_cache_dir,
    load_dtype,
    parameter_count,
)
from culture_probe.engine.scorer import ScorerProtocol
from culture_probe.engine.types import ModelArgs
from culture_probe.errors import (
    CultureProbeError,
    UnsupportedModelError,
)
from culture_probe.models.planted_benchmarks import PLANTED_SOURCES
from culture_probe.settings import RunSettings
from culture_probe.tasks import Task
from culture_probe.tasks.base import ModelNeed


def model_spec(
    model: ModelInput, settings: RunSettings, scorer: ScorerProtocol | None = None
) -> ModelSpec:
    """The run's `model` read once with how `settings` load it (the one place a run's `LoadOptions`
    are made): its score cache in `default_cache_dir()` unless --cache-dir or --no-cache say
    otherwise, the planted models' sources; `scorer` is the model already loaded (a suite's).
    """
    options = LoadOptions(
        kind=settings.kind,
        device=settings.device,
        batch_tokens=settings.batch_tokens,
        cache_dir=None if settings.no_cache else settings.cache_dir or default_cache_dir(),
        data_dir=settings.data_dir,
        base_url=settings.base_url,
        concurrency=settings.concurrency,
        served_tokenizer=settings.served_tokenizer,
        request_timeout=settings.request_timeout,
        max_retries=settings.max_retries,
        sources=PLANTED_SOURCES,
    )
    return ModelSpec.of(model, settings.model_args, options, scorer)


class StageModelNotice(UserWarning):
    """A stage answered by a model of its own (an LLM judge) and the memory its weights take, said
    before the first probe is asked.
    """


@dataclass(frozen=True)
class StageModel:
    """A stage's own model (an LLM judge) resolved from its config and tokenizer alone, before the
    first probe: its kind and the memory its weights take (`parameters` and `dtype`; None for a
    served model, held by its server).
    """

    name: str
    kind: str
    parameters: int | None = None
    dtype: str | None = None

    @property
    def weight_bytes(self) -> int | None:
        """Parameters x bytes per parameter of the dtype it loads in (the weights alone, not
        activations).
        """
        if self.parameters is None or self.dtype is None:
            return None
        import torch

        return self.parameters * getattr(torch, self.dtype).itemsize

    def describe(self, stage: str) -> str:
        """One line for the terminal: which model answers `stage`, and its memory."""
        size = self.weight_bytes
        if size is None or self.parameters is None:
            return f"the {stage} stage is asked of {self.name} ({self.kind}), served: no weights load here."
        return (
            f"the {stage} stage loads {self.name} ({self.kind}) once the stages before it are done: "
            f"{_scaled(self.parameters, 1000, ('', 'K', 'M', 'B'))} parameters, "
            f"{_scaled(size, 1024, (' bytes', ' KiB', ' MiB', ' GiB'))} of weights in {self.dtype}."
        )

    def to_json(self) -> dict[str, Any]:
        """config.json's `stage_models` entry."""
        return {**asdict(self), "weight_bytes": self.weight_bytes}


def _scaled(value: int, base: int, units: tuple[str, ...]) -> str:
    """`value` in the largest of `units` (each `base` times the last) that keeps it at least 1:
    72.7B, 135.4 GiB.
    """
    power = 0
    while power + 1 < len(units) and value >= base ** (power + 1):
        power += 1
    return f"{value / base**power:.1f}{units[power]}" if power else f"{value}{units[0]}"


def check_models(task: Task, model: ModelSpec, settings: RunSettings) -> dict[str, StageModel]:
    """Each stage's model checked against what the stage needs (`Task.model_need`), from configs and
    tokenizers only: the run's `model` where a stage asks it through its chat template, and each
    stage's own model, resolved (`resolve_stage_model`). A model that cannot serve fails here,
    before any folder is made or weights load.
    """
    models = {}
    for stage in task.stage_names:
        need, own = task.stage_need(stage), task.stage(stage).model
        if own is not None:
            models[stage] = resolve_stage_model(own, stage, need, stage_settings(settings))
        elif need.chat and (tokenizer := model.tokenizer()) is not None:
            need.check_chat(tokenizer, model.label)
    return models


def resolve_stage_model(
    name: str, stage: str, need: ModelNeed, settings: RunSettings
) -> StageModel:
    """`stage`'s own model, its kind checked and its memory counted without weights; a model that
    cannot be found, read or asked fails naming the stage's alternatives (`need.instead`).
    """
    spec = model_spec(name, settings)
    try:
        kind = spec.kind()
        # a served model's server holds the weights and applies the chat template
        tokenizer, config = (None, None) if spec.served else spec.parts()
    except CultureProbeError as error:
        reason = " ".join(str(error).split())
        raise UnsupportedModelError(
            f"The {stage} stage's model {name!r} cannot be used: {reason} Instead: {need.instead}."
        ) from None
    need.check_kind(kind, f"The {stage} stage")
    if spec.served:
        return StageModel(name, kind)
    need.check_chat(tokenizer, name)
    return StageModel(
        name, kind, parameter_count(config, kind), load_dtype(config, settings.model_args)
    )


def stage_settings(settings: RunSettings) -> RunSettings:
    """The settings of a stage's own model: its kind detected, the default batch budget and revision
    (the run's --kind/--batch-tokens/--revision describe the probed model), dtype and device shared.
    """
    return replace(
        settings,
        kind="auto",
        batch_tokens=None,
        model_args=ModelArgs(dtype=settings.model_args.dtype),
    )
