"""The engine's contract: what a caller asks (`ScoreRequest`) and what it gets back (`CandidateScores`).

Benchmarks and outside users rely on these names and fields (see DESIGN.md). Both are plain data: requests are
frozen and hashable, so they double as cache keys; results are returned, never written back into requests.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Literal

import numpy as np

from culture_probe.errors import UnknownNameError

ScoreKind = Literal["sum", "mean"]


@dataclass(frozen=True)
class ScoreRequest:
    """Score every candidate as the filler of the slot between `left` and `right`.

    `sep=None` inserts one space between `left` and a candidate unless `left` ends in whitespace or its script
    does not separate words with spaces (CJK, Thai); `sep=""` or `sep=" "` force the choice.

    `chat=True` (causal models): `left` is the user turn of the tokenizer's chat template, preceded by a `system`
    turn when one is given, and each candidate is scored as the start of the assistant reply (no separator).

    `max_tokens` caps the model input below the model's own limit (a benchmark's fixed truncation, e.g. MAPS's
    1,024 seq2seq encoder tokens); as with the model's limit, the context is cut on the left.
    """

    left: str
    candidates: tuple[str, ...]
    right: str = ""
    sep: str | None = None
    chat: bool = False
    system: str | None = None
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        # Accept any sequence of candidates but store a tuple, so the request stays hashable.
        if isinstance(self.candidates, str):
            raise TypeError("ScoreRequest.candidates must be a sequence of strings, not one string")
        if self.system is not None and not self.chat:
            raise ValueError(f"ScoreRequest(system={self.system!r}) needs chat=True: a system message only exists "
                             "in a chat template.")
        object.__setattr__(self, "candidates", tuple(self.candidates))

    def key(self) -> str:
        """A stable digest of the request (the cache key's request half)."""
        fields: list = [self.left, list(self.candidates), self.right, self.sep]
        if self.chat:  # only when set, so the keys of plain requests (and caches built before chat) stay valid
            fields.append({"chat": True, "system": self.system})
        if self.max_tokens is not None:  # likewise only when set
            fields.append({"max_tokens": self.max_tokens})
        payload = json.dumps(fields, ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True, eq=False)
class CandidateScores:
    """Scores of one request's candidates, in the request's candidate order.

    Equal when the candidates, sums and counts are equal (`token_logprobs` is a detail kept on request, so it is
    not compared); unhashable, as its arrays are.
    """

    candidates: tuple[str, ...]
    sum_logprob: np.ndarray
    n_tokens: np.ndarray
    token_logprobs: tuple[np.ndarray, ...] | None = None

    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CandidateScores):
            return NotImplemented
        return (self.candidates == other.candidates and np.array_equal(self.sum_logprob, other.sum_logprob)
                and np.array_equal(self.n_tokens, other.n_tokens))

    @property
    def mean_logprob(self) -> np.ndarray:
        """Sum divided by token count: the papers' "mean-pooled" score."""
        return self.sum_logprob / np.maximum(self.n_tokens, 1)

    def scores(self, by: ScoreKind = "mean") -> np.ndarray:
        """The score array named by `by` ("mean" or "sum")."""
        if by == "mean":
            return self.mean_logprob
        if by == "sum":
            return self.sum_logprob
        raise UnknownNameError("score kind", by, ("mean", "sum"), "Example: scores.ranking(by='mean').")

    def ranking(self, by: ScoreKind = "mean") -> np.ndarray:
        """Candidate indices, best first; stable, so ties keep request order."""
        return np.argsort(-self.scores(by), kind="stable")

    def best(self, by: ScoreKind = "mean") -> str:
        """The top-ranked candidate."""
        return self.candidates[int(self.ranking(by)[0])]
