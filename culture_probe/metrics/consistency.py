"""Cross-lingual consistency: RankC, how far two languages' rankings of the same candidates agree whatever their
accuracy, and per-fact agreement, whether the facts a model gets right in one language are those it gets right in
the other.

RankC: Qi, Fernández & Bisazza (2023), "Cross-Lingual Consistency of Factual Knowledge in Multilingual Language
Models", EMNLP 2023, as its released code computes it (github.com/Betswish/Cross-Lingual-Consistency,
`1_easyrun/RankC.py`). Formula, weights and the one deviation: docs/consistency.md.

Both functions take what is already aligned: candidates and facts are matched by id by the protocol, never here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, Literal, TypedDict

import numpy as np

from culture_probe.errors import MetricInputError
from culture_probe.metrics._checks import check_bools, check_choice, check_lengths
from culture_probe.metrics.results import UnitTable, paired_difference

Weight = Literal["softmax", "norm1", "norm2"]
WEIGHTS: tuple[str, ...] = ("softmax", "norm1", "norm2")


class RankCResult(TypedDict):
    """RankC in [0, 1] (`value`: the mean of `per_query`, one value per query in input order)."""

    value: float
    per_query: list[float]
    n_queries: int
    weight: str


class AgreementResult(TypedDict):
    """Per-fact P@1 agreement of two languages on the facts probed in both (`n`), in percent where a rate."""

    n: int
    both_right: int
    right_only_a: int
    right_only_b: int
    both_wrong: int
    accuracy_a: float
    accuracy_b: float
    difference: dict[str, Any]
    unpaired_a: list[str]
    unpaired_b: list[str]


def rank_weights(n: int, weight: str) -> np.ndarray:
    """The weight of each depth 1..n, from the scores n, n-1, ..., 1 (the released code's `order`): softmax,
    linear (`norm1`) or squared (`norm2`), each summing to 1.

    The softmax is shifted by its maximum. The released code exponentiates n itself, which overflows to
    inf / inf = NaN from n = 710 candidates on; below that both give the same weights.
    """
    order = np.arange(n, 0, -1, dtype=np.float64)
    if weight == "softmax":
        raw = np.exp(order - n)
    elif weight == "norm1":
        raw = order
    else:
        raw = order**2
    return raw / raw.sum()


def _positions(name: str, index: int, ranking: Sequence[Hashable]) -> dict[Hashable, int]:
    """Each candidate id's 0-based rank in one query's ranking; a candidate ranked twice is an error."""
    if isinstance(ranking, (str, bytes)) or not hasattr(ranking, "__len__"):
        raise MetricInputError(
            f"`{name}[{index}]` must be a list of candidate ids (best first), got {type(ranking).__name__} "
            f"{ranking!r:.60}."
        )
    if len(ranking) == 0:
        raise MetricInputError(f"`{name}[{index}]` is empty: every query needs its ranked candidates.")
    positions = {candidate: rank for rank, candidate in enumerate(ranking)}
    if len(positions) != len(ranking):
        repeated = sorted(str(c) for c, count in Counter(ranking).items() if count > 1)
        raise MetricInputError(
            f"`{name}[{index}]` ranks {repeated[:3]} more than once: a ranking orders each candidate id once."
        )
    return positions


def query_rankc(a: dict[Hashable, int], b: dict[Hashable, int], weight: str) -> float:
    """One query: the weighted sum over depths j of |top-j of a ∩ top-j of b| / j.

    A candidate is in both top-j sets exactly when its worse rank of the two is below j, so the overlap at every
    depth is a cumulative count of those worse ranks (O(n) instead of the released code's O(n²) set building).
    """
    worse = np.fromiter((max(rank, b[candidate]) for candidate, rank in a.items()), dtype=np.int64, count=len(a))
    overlap = np.cumsum(np.bincount(worse, minlength=len(a)))
    return float(rank_weights(len(a), weight) @ (overlap / np.arange(1, len(a) + 1)))


def _check_same_candidates(index: int, a: dict[Hashable, int], b: dict[Hashable, int]) -> None:
    if a.keys() != b.keys():
        only_a, only_b = sorted(map(str, a.keys() - b.keys())), sorted(map(str, b.keys() - a.keys()))
        raise MetricInputError(
            f"Query {index} ranks different candidates in the two languages ({len(only_a)} only in `rankings_a`, "
            f"e.g. {only_a[:3]}; {len(only_b)} only in `rankings_b`, e.g. {only_b[:3]}): RankC compares rankings "
            "of one aligned candidate set, so map each language's candidates to shared ids (e.g. Wikidata QIDs)."
        )


def rankc(
    rankings_a: Sequence[Sequence[Hashable]],
    rankings_b: Sequence[Sequence[Hashable]],
    weight: Weight = "softmax",
) -> RankCResult:
    """RankC of two languages (Qi et al., 2023): the mean over queries of the weighted top-j overlap.

    `rankings_a[i]` and `rankings_b[i]` rank the same candidate ids (best first) for query i in languages A and B.
    Per query, with its own n candidates, depth j = 1..n contributes w_j · |top-j(A) ∩ top-j(B)| / j, where w is
    `weight` over the scores n, n-1, ..., 1: "softmax" (the paper's), "norm1" (linear) or "norm2" (squared).
    Symmetric in A and B; 1 when the rankings agree.
    """
    n = check_lengths(rankings_a=rankings_a, rankings_b=rankings_b)
    check_choice("weight", weight, WEIGHTS)
    per_query = []
    for index in range(n):
        a = _positions("rankings_a", index, rankings_a[index])
        b = _positions("rankings_b", index, rankings_b[index])
        _check_same_candidates(index, a, b)
        per_query.append(query_rankc(a, b, weight))
    return {"value": float(np.mean(per_query)), "per_query": per_query, "n_queries": n, "weight": weight}


def _outcomes(name: str, correct: Mapping[Hashable, Any]) -> dict[str, bool]:
    """A language's P@1 outcome per fact id (ids as strings, as run records hold them)."""
    if not isinstance(correct, Mapping):
        raise MetricInputError(
            f"`{name}` must map each fact id to True/False (its P@1 hit), got {type(correct).__name__}."
        )
    if not correct:
        raise MetricInputError(f"`{name}` is empty: pass one P@1 outcome per fact id.")
    outcomes = dict(zip(map(str, correct), check_bools(name, list(correct.values())).tolist(), strict=True))
    if len(outcomes) != len(correct):
        raise MetricInputError(f"`{name}` has fact ids that are equal as strings (e.g. 1 and '1'): ids must differ.")
    return outcomes


def agreement(correct_a: Mapping[Hashable, Any], correct_b: Mapping[Hashable, Any]) -> AgreementResult:
    """Per-fact agreement of P@1 in languages A and B, on the facts probed in both (matched by fact id).

    Counts both right / right only in A / right only in B / both wrong, each language's accuracy (percent), and
    accuracy(A) - accuracy(B) with the results schema's paired interval and p-value (Tango's score interval and
    its test, McNemar's, for one outcome per fact; docs/results.md). Facts probed in one language only are not
    dropped silently: their ids are returned in `unpaired_a` / `unpaired_b`.
    """
    a, b = _outcomes("correct_a", correct_a), _outcomes("correct_b", correct_b)
    shared = [fact for fact in a if fact in b]
    unpaired_a, unpaired_b = sorted(a.keys() - b.keys()), sorted(b.keys() - a.keys())
    if not shared:
        raise MetricInputError(
            f"`correct_a` and `correct_b` share no fact id ({len(unpaired_a)} only in A, e.g. {unpaired_a[:3]}; "
            f"{len(unpaired_b)} only in B, e.g. {unpaired_b[:3]}): key both by the same fact ids."
        )
    hits_a = np.asarray([a[fact] for fact in shared])
    hits_b = np.asarray([b[fact] for fact in shared])
    table_a, table_b = (
        UnitTable("p1", tuple(shared), 100.0 * hits, higher_is_better=True).with_scale(100.0, binary=True)
        for hits in (hits_a, hits_b)
    )
    return {
        "n": len(shared),
        "both_right": int(np.sum(hits_a & hits_b)),
        "right_only_a": int(np.sum(hits_a & ~hits_b)),
        "right_only_b": int(np.sum(~hits_a & hits_b)),
        "both_wrong": int(np.sum(~hits_a & ~hits_b)),
        "accuracy_a": 100.0 * float(hits_a.mean()),
        "accuracy_b": 100.0 * float(hits_b.mean()),
        "difference": paired_difference(table_a, table_b, names=("A", "B")),
        "unpaired_a": unpaired_a,
        "unpaired_b": unpaired_b,
    }
