"""The probing engine: knows models, not benchmarks."""

from __future__ import annotations

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
    "ModelArgs",
    "ModelKind",
    "ScoreOptions",
    "ScoreRequest",
    "Scorer",
    "Truncation",
]


def __getattr__(name: str):
    # The scorer imports torch; keep `from culture_probe.engine import ScoreRequest` light.
    if name == "Scorer":
        from culture_probe.engine.scorer import Scorer

        return Scorer
    raise AttributeError(name)
