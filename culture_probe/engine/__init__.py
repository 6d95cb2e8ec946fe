"""The probing engine: knows models, not benchmarks. `load(model, model_args, options)` is its front
door for a model given by name (a Hub id, a local folder, `planted:<config>`, `openai:<name>`),
`ModelSpec` that name read once (its kind, tokenizer and config without weights); `Scorer` wraps a
model already loaded.
"""

from __future__ import annotations

from typing import Any

from culture_probe.engine.loading import LoadOptions, ModelInput, ModelSpec, load
from culture_probe.engine.types import (
    MODEL_KINDS,
    CandidateScores,
    Cuts,
    FillMaskOptions,
    GenerateOptions,
    ModelArgs,
    ModelKind,
    ScoreOptions,
    ScoreRequest,
    Truncation,
)

__all__ = [
    "MODEL_KINDS",
    "CandidateScores",
    "Cuts",
    "FillMaskOptions",
    "GenerateOptions",
    "LoadOptions",
    "ModelArgs",
    "ModelInput",
    "ModelKind",
    "ModelSpec",
    "ScoreOptions",
    "ScoreRequest",
    "Scorer",
    "ScorerProtocol",
    "Truncation",
    "load",
]


def __getattr__(name: str) -> Any:
    # The scorer imports torch; keep `from culture_probe.engine import ScoreRequest` light.
    if name in ("Scorer", "ScorerProtocol"):
        from culture_probe.engine import scorer

        return getattr(scorer, name)
    raise AttributeError(name)
