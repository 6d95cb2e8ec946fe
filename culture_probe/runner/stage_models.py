"""The run's model and each stage's own model (an LLM judge): their kind, tokenizer and memory, read from configs
before any weights load, and the loaded scorer.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace
from typing import Any

from culture_probe import engine
from culture_probe.engine.loading import (
    LoadOptions,
    default_cache_dir,
    is_served,
    load_dtype,
    parameter_count,
)
from culture_probe.engine.scorer import ScorerProtocol
from culture_probe.engine.types import ModelArgs, ModelKind
from culture_probe.errors import (
    CultureProbeError,
    UnsupportedModelError,
)
from culture_probe.models.planted_benchmarks import PLANTED_SOURCES
from culture_probe.settings import RunSettings
from culture_probe.tasks import Task
from culture_probe.tasks.base import ModelNeed


def load_options(settings: RunSettings) -> LoadOptions:
    """How the engine loads the run's model beside `settings.model_args`: its score cache in `default_cache_dir()`
    unless --cache-dir or --no-cache say otherwise.
    """
    return LoadOptions(
        kind=settings.kind,
        device=settings.device,
        batch_tokens=settings.batch_tokens,
        cache_dir=None if settings.no_cache else settings.cache_dir or default_cache_dir(),
        data_dir=settings.data_dir,
        base_url=settings.base_url,
        concurrency=settings.concurrency,
        request_timeout=settings.request_timeout,
        max_retries=settings.max_retries,
        sources=PLANTED_SOURCES,
    )


def model_kind(model: Any, settings: RunSettings) -> ModelKind:
    """The model's kind without loading its weights (`engine.model_kind`)."""
    return engine.model_kind(model, settings.model_args, load_options(settings))


def load_scorer(model: Any, settings: RunSettings) -> ScorerProtocol:
    """A scorer for `model` (`engine.load`), caching its scores in the model's file of the cache folder; an already
    loaded scorer is used as is.
    """
    return engine.load(model, settings.model_args, load_options(settings))


class StageModelNotice(UserWarning):
    """A stage answered by a model of its own (an LLM judge) and the memory its weights take, said before the first
    probe is asked.
    """


@dataclass(frozen=True)
class StageModel:
    """A stage's own model (an LLM judge) resolved from its config and tokenizer alone, before the first probe: its
    kind and the memory its weights take (`parameters` and `dtype`; None for a served model, held by its server).
    """

    name: str
    kind: str
    parameters: int | None = None
    dtype: str | None = None

    @property
    def weight_bytes(self) -> int | None:
        """Parameters x bytes per parameter of the dtype it loads in (the weights alone, not activations)."""
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
    """`value` in the largest of `units` (each `base` times the last) that keeps it at least 1: 72.7B, 135.4 GiB."""
    power = 0
    while power + 1 < len(units) and value >= base ** (power + 1):
        power += 1
    return f"{value / base**power:.1f}{units[power]}" if power else f"{value}{units[0]}"


def check_models(task: Task, model: Any, settings: RunSettings) -> dict[str, StageModel]:
    """Each stage's model checked against what the stage needs (`Task.model_need`), from configs and tokenizers
    only: the run's model where a stage asks it through its chat template, and each stage's own model, resolved
    (`resolve_stage_model`). A model that cannot serve fails here, before any folder is made or weights load.
    """
    models = {}
    for stage in task.stages:
        need, own = task.model_need(stage), task.stage_model(stage)
        if own is not None:
            models[stage] = resolve_stage_model(own, stage, need, stage_settings(settings))
        elif need.chat and (tokenizer := tokenizer_of(model, settings)) is not None:
            need.check_chat(tokenizer, model_label(model))
    return models


def resolve_stage_model(
    name: str, stage: str, need: ModelNeed, settings: RunSettings
) -> StageModel:
    """`stage`'s own model, its kind checked and its memory counted without weights; a model that cannot be found,
    read or asked fails naming the stage's alternatives (`need.instead`).
    """
    served = is_served(name)  # its server holds the weights and applies the chat template
    try:
        kind = model_kind(name, settings)
        if not served:
            tokenizer, config = model_parts(name, settings)
    except CultureProbeError as error:
        reason = " ".join(str(error).split())
        raise UnsupportedModelError(
            f"The {stage} stage's model {name!r} cannot be used: {reason} Instead: {need.instead}."
        ) from None
    need.check_kind(kind, f"The {stage} stage")
    if served:
        return StageModel(name, kind)
    need.check_chat(tokenizer, name)
    return StageModel(
        name, kind, parameter_count(config, kind), load_dtype(config, settings.model_args)
    )


def tokenizer_of(model: Any, settings: RunSettings) -> Any:
    """The run's model's tokenizer, without its weights; None for a served model (its server holds the template)."""
    return engine.tokenizer_of(model, settings.model_args, load_options(settings))


def model_parts(name: str, settings: RunSettings) -> tuple[Any, Any]:
    """A model's tokenizer and transformers config, read without its weights (`engine.model_parts`)."""
    return engine.model_parts(name, settings.model_args, load_options(settings))


def model_label(model: Any) -> str:
    """How an error names the run's model: as given, or a loaded scorer's path."""
    if isinstance(model, (str, os.PathLike)):
        return str(model)
    identity = getattr(model, "identity", None)
    return str(identity.get("name_or_path")) if isinstance(identity, dict) else type(model).__name__


def stage_settings(settings: RunSettings) -> RunSettings:
    """The settings of a stage's own model: its kind detected, the default batch budget and revision (the run's
    --kind/--batch-tokens/--revision describe the probed model), dtype and device shared.
    """
    return replace(
        settings,
        kind="auto",
        batch_tokens=None,
        model_args=ModelArgs(dtype=settings.model_args.dtype),
    )
