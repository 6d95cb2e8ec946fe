"""The probing engine: knows models, not benchmarks. `load(model, model_args, options)` is its front door for a
model given by name (a Hub id, a local folder, `planted:<config>`, `openai:<name>`); `Scorer` wraps one already
loaded.
"""

from __future__ import annotations

from typing import Any

from culture_probe.engine.loading import LoadOptions, load, model_kind, model_parts, tokenizer_of
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
    "ModelKind",
    "ScoreOptions",
    "ScoreRequest",
    "Scorer",
    "ScorerProtocol",
    "Truncation",
    "load",
    "model_kind",
    "model_parts",
    "tokenizer_of",
]


def __getattr__(name: str) -> Any:
    # The scorer imports torch; keep `from culture_probe.engine import ScoreRequest` light.
    if name in ("Scorer", "ScorerProtocol"):
        from culture_probe.engine import scorer

        return getattr(scorer, name)
    raise AttributeError(name)
