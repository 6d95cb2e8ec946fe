"""Cross-lingual consistency: RankC, how far two languages' rankings of the same candidates agree
whatever their accuracy, and per-fact agreement, whether the facts a model gets right in one
language are those it gets right in the other.

RankC: Qi, Fernández & Bisazza (2023), "Cross-Lingual Consistency of Factual Knowledge in
Multilingual Language Models", EMNLP 2023, as its released code computes it
(github.com/Betswish/Cross-Lingual-Consistency, `1_easyrun/RankC.py`). Formula, weights and the one
deviation: docs/consistency.md.

Both functions take what is already aligned: candidates and facts are matched by id by the protocol,
never here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

import numpy as np

from culture_probe.errors import MetricInputError
from culture_probe.metrics._checks import check_bools, check_choice, check_lengths
from culture_probe.metrics.compare import holm
from culture_probe.metrics.results import UnitTable, estimate, paired_difference
from culture_probe.record import Results, with_strata
from culture_probe.util.typecheck import checked

#: RankC's paper, which no benchmark module carries: the citation of the `rankc` `evaluate` metric.
CITATION = """@inproceedings{qi-etal-2023-cross,
  title = {Cross-Lingual Consistency of Factual Knowledge in Multilingual Language Models},
  author = {Qi, Jirui and Fern{\\'a}ndez, Raquel and Bisazza, Arianna},
  booktitle = {Proceedings of EMNLP 2023},
  pages = {10650--10666},
  year = {2023}
}"""

Weight = Literal["softmax", "norm1", "norm2"]
WEIGHTS: tuple[str, ...] = ("softmax", "norm1", "norm2")


class RankCResult(TypedDict):
    """RankC in [0, 1] (`value`: the mean of `per_query`, one value per query in input order)."""

    value: float
    per_query: list[float]
    n_queries: int
    weight: str


class AgreementResult(TypedDict):
    """Per-fact P@1 agreement of two languages on the facts probed in both (`n`), in percent where a
    rate.
    """

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
    """The weight of each depth 1..n, from the scores n, n-1, ..., 1 (the released code's `order`):
    softmax, linear (`norm1`) or squared (`norm2`), each summing to 1.

    The softmax is shifted by its maximum. The released code exponentiates n itself, which overflows
    to inf / inf = NaN from n = 710 candidates on; below that both give the same weights.
    """
    order = np.arange(n, 0, -1, dtype=np.float64)
    if weight == "softmax":
        raw = np.exp(order - n)
    elif weight == "norm1":
        raw = order
    else:
        raw = order**2
    weights: np.ndarray = raw / raw.sum()
    return weights


def _positions(name: str, index: int, ranking: Sequence[Hashable]) -> dict[Hashable, int]:
    """Each candidate id's 0-based rank in one query's ranking; a candidate ranked twice is an
    error.
    """
    if isinstance(ranking, (str, bytes)) or not hasattr(ranking, "__len__"):
        raise MetricInputError(
            f"`{name}[{index}]` must be a list of candidate ids (best first), got {type(ranking).__name__} "
            f"{ranking!r:.60}."
        )
    if len(ranking) == 0:
        raise MetricInputError(
            f"`{name}[{index}]` is empty: every query needs its ranked candidates."
        )
    positions = {candidate: rank for rank, candidate in enumerate(ranking)}
    if len(positions) != len(ranking):
        repeated = sorted(str(c) for c, count in Counter(ranking).items() if count > 1)
        raise MetricInputError(
            f"`{name}[{index}]` ranks {repeated[:3]} more than once: a ranking orders each candidate id once."
        )
    return positions


def query_rankc(a: dict[Hashable, int], b: dict[Hashable, int], weight: str) -> float:
    """One query: the weighted sum over depths j of |top-j of a ∩ top-j of b| / j.

    A candidate is in both top-j sets exactly when its worse rank of the two is below j, so the
    overlap at every depth is a cumulative count of those worse ranks (O(n) instead of the released
    code's O(n²) set building).
    """
    worse = np.fromiter(
        (max(rank, b[candidate]) for candidate, rank in a.items()), dtype=np.int64, count=len(a)
    )
    overlap = np.cumsum(np.bincount(worse, minlength=len(a)))
    return _from_shortfall(
        float(rank_weights(len(a), weight) @ (1.0 - overlap / np.arange(1, len(a) + 1)))
    )


def _from_shortfall(shortfall: float) -> float:
    """RankC as 1 minus its weighted shortfall from full overlap, kept in [0, 1].

    The weights sum to 1 only up to rounding (1 + 2e-16 for 9, 10, 12, 17, 24, ... candidates), so
    summing the overlaps themselves gave identical rankings 1.0000000000000002, which leaves [0,
    100] in percent and made the results' range check refuse a consistent model's metrics. Agreeing
    rankings fall short by exactly 0, so they give exactly 1; the clamp catches what rounding is
    left at the other end.
    """
    return min(1.0, max(0.0, 1.0 - shortfall))


def _check_same_candidates(index: int, a: dict[Hashable, int], b: dict[Hashable, int]) -> None:
    if a.keys() != b.keys():
        only_a, only_b = (
            sorted(map(str, a.keys() - b.keys())),
            sorted(map(str, b.keys() - a.keys())),
        )
        raise MetricInputError(
            f"Query {index} ranks different candidates in the two languages ({len(only_a)} only in `rankings_a`, "
            f"e.g. {only_a[:3]}; {len(only_b)} only in `rankings_b`, e.g. {only_b[:3]}): RankC compares rankings "
            "of one aligned candidate set, so map each language's candidates to shared ids (e.g. Wikidata QIDs)."
        )


@checked(MetricInputError, pure=True)
def rankc(
    rankings_a: Sequence[Sequence[Hashable]],
    rankings_b: Sequence[Sequence[Hashable]],
    weight: Weight = "softmax",
) -> RankCResult:
    """RankC of two languages (Qi et al., 2023): the mean over queries of the weighted top-j
    overlap.

    `rankings_a[i]` and `rankings_b[i]` rank the same candidate ids (best first) for query i in
    languages A and B. Per query, with its own n candidates, depth j = 1..n contributes w_j ·
    |top-j(A) ∩ top-j(B)| / j, where w is `weight` over the scores n, n-1, ..., 1: "softmax" (the
    paper's), "norm1" (linear) or "norm2" (squared). Symmetric in A and B; 1 when the rankings
    agree.
    """
    n = check_lengths(rankings_a=rankings_a, rankings_b=rankings_b)
    check_choice("weight", weight, WEIGHTS)
    per_query = []
    for index in range(n):
        a = _positions("rankings_a", index, rankings_a[index])
        b = _positions("rankings_b", index, rankings_b[index])
        _check_same_candidates(index, a, b)
        per_query.append(query_rankc(a, b, weight))
    return {
        "value": float(np.mean(per_query)),
        "per_query": per_query,
        "n_queries": n,
        "weight": weight,
    }


def _outcomes(name: str, correct: Mapping[Hashable, Any]) -> dict[str, bool]:
    """A language's P@1 outcome per fact id (ids as strings, as run records hold them)."""
    if not isinstance(correct, Mapping):
        raise MetricInputError(
            f"`{name}` must map each fact id to True/False (its P@1 hit), got {type(correct).__name__}."
        )
    if not correct:
        raise MetricInputError(f"`{name}` is empty: pass one P@1 outcome per fact id.")
    outcomes = dict(
        zip(map(str, correct), check_bools(name, list(correct.values())).tolist(), strict=True)
    )
    if len(outcomes) != len(correct):
        raise MetricInputError(
            f"`{name}` has fact ids that are equal as strings (e.g. 1 and '1'): ids must differ."
        )
    return outcomes


@checked(MetricInputError, pure=True)
def agreement(
    correct_a: Mapping[Hashable, Any], correct_b: Mapping[Hashable, Any]
) -> AgreementResult:
    """Per-fact agreement of P@1 in languages A and B, on the facts probed in both (matched by fact
    id).

    Counts both right / right only in A / right only in B / both wrong, each language's accuracy
    (percent), and accuracy(A) - accuracy(B) with the results schema's paired interval and p-value
    (Tango's score interval and its test, McNemar's, for one outcome per fact; docs/results.md).
    Facts probed in one language only are not dropped silently: their ids are returned in
    `unpaired_a` / `unpaired_b`.
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
        UnitTable("p1", tuple(shared), 100.0 * hits, higher_is_better=True).with_scale(
            100.0, binary=True
        )
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


# ---------------------------------------------------------------- consistency of a run's languages

#: The candidate ids a record keeps of its ranking over the aligned set, best first. With the
#: softmax weights the depths beyond it weigh less than e^-20 ≈ 2.1e-9 together, which bounds how
#: far RankC from these prefixes can be from RankC of the whole rankings (`prefix_rankc`); norm1 and
#: norm2 need whole rankings.
RANKING_DEPTH = 20
PAIR_METRICS = ("rankc", "both_right")


@dataclass(frozen=True)
class AlignedAnswer:
    """One fact as one language answered it, in ids that every language of the benchmark shares.

    `fact` is the fact's id (the same in every language); `correct` its P@1 outcome; `ranking` the
    aligned candidates' ids, best first: all `candidates` of them, or the first `RANKING_DEPTH`
    (empty: the protocol ranked nothing, e.g. a generation, so only agreement applies).
    `candidate_set` names the aligned set (e.g. a hash of its ids): two languages' rankings are
    compared only over the same set.
    """

    language: str
    fact: str
    correct: bool
    ranking: tuple[str, ...] = ()
    candidates: int = 0
    candidate_set: str = ""

    def same_candidates(self, other: AlignedAnswer) -> bool:
        """Whether both ranked the same aligned candidate set."""
        return self.candidates == other.candidates > 0 and self.candidate_set == other.candidate_set


def prefix_rankc(a: Sequence[Hashable], b: Sequence[Hashable], n: int) -> float:
    """Softmax RankC of one query over `n` aligned candidates from the first ids of each ranking.

    The overlap is known at every depth both prefixes reach. Beyond, it lies between what it was at
    the last known depth (or 2j - n, if more) and j, and is counted at the middle of that range: the
    value is within half the weight of the unknown depths of the whole rankings' (≤ 1.1e-9 from
    depth 20 on). Whole rankings give the exact value.
    """
    k = min(len(a), len(b), n)
    if k == n:
        return query_rankc(
            {c: i for i, c in enumerate(a)}, {c: i for i, c in enumerate(b)}, "softmax"
        )
    in_b = {candidate: rank for rank, candidate in enumerate(b[:k])}
    worse = [max(rank, in_b[c]) for rank, c in enumerate(a[:k]) if c in in_b]
    overlap = np.cumsum(np.bincount(np.asarray(worse, dtype=np.int64), minlength=k))
    depth = np.arange(1, n + 1, dtype=np.float64)
    weights = rank_weights(n, "softmax")
    known_shortfall = weights[:k] @ (1.0 - overlap / depth[:k])
    low = np.maximum(overlap[-1], 2 * depth[k:] - n) / depth[k:]
    return _from_shortfall(float(known_shortfall + weights[k:] @ ((1.0 - low) / 2.0)))


def _by_language(answers: Sequence[AlignedAnswer]) -> dict[str, dict[str, AlignedAnswer]]:
    table: dict[str, dict[str, AlignedAnswer]] = {}
    for answer in answers:
        facts = table.setdefault(answer.language, {})
        if answer.fact in facts:
            raise MetricInputError(
                f"Fact {answer.fact!r} is answered twice in {answer.language!r}: align one answer per fact and "
                "language (e.g. one template per fact)."
            )
        facts[answer.fact] = answer
    return table


def _pair(
    a: dict[str, AlignedAnswer], b: dict[str, AlignedAnswer], names: tuple[str, str]
) -> dict[str, Any]:
    """Agreement and RankC of two languages' answers, with what could not be paired counted."""
    shared = [fact for fact in a if fact in b]
    both_ranked = [f for f in shared if a[f].ranking and b[f].ranking]
    ranked = [f for f in both_ranked if a[f].same_candidates(b[f])]
    agreed = agreement({f: x.correct for f, x in a.items()}, {f: x.correct for f, x in b.items()})
    unpaired = {"only_a": len(agreed["unpaired_a"]), "only_b": len(agreed["unpaired_b"])}
    detail: dict[str, Any] = {
        k: v for k, v in agreed.items() if k not in ("unpaired_a", "unpaired_b")
    }
    detail["difference"] = {
        **agreed["difference"],
        "of": f"P@1 in {names[0]} minus P@1 in {names[1]}",
    }
    both = 100.0 * np.asarray([a[f].correct and b[f].correct for f in shared], dtype=float)
    tables = [
        UnitTable("both_right", tuple(shared), both, higher_is_better=True).with_scale(
            100.0, binary=True
        )
    ]
    if ranked:
        values = [100.0 * prefix_rankc(a[f].ranking, b[f].ranking, a[f].candidates) for f in ranked]
        tables.insert(
            0,
            UnitTable(
                "rankc", tuple(ranked), np.asarray(values), scale=100.0, higher_is_better=True
            ),
        )
    return {
        "estimates": {table.metric: estimate(table) for table in tables},
        "methods": {table.metric: table.method for table in tables},
        "detail": {
            **detail,
            "unpaired": unpaired,
            "rankc_facts": len(ranked),
            "rankc_left_out": {
                "candidate sets differ": len(both_ranked) - len(ranked),
                "not ranked": len(shared) - len(both_ranked),
            },
        },
    }


def language_consistency(
    answers: Sequence[AlignedAnswer], languages: Sequence[str] | None = None
) -> dict[str, Any]:
    """Every pair of languages of one run: RankC (softmax, in percent, the bounded mean's interval
    over facts) and the share of facts right in both (Wilson), as results strata `by_language_pair`
    ("a/b"), with each pair's agreement table, its paired P@1 difference (with `p_holm`, adjusted
    over the run's pairs, and `n_tests`) and what could not be paired. `languages` orders the pairs
    (the others follow, sorted). Empty when fewer than two languages answered.
    """
    table = _by_language(answers)
    given = [lang for lang in languages or () if lang in table]
    order = [*given, *sorted(set(table) - set(given))]
    pairs = {
        f"{a}/{b}": _pair(table[a], table[b], (a, b))
        for i, a in enumerate(order)
        for b in order[i + 1 :]
        if table[a].keys() & table[b].keys()
    }
    if not pairs:
        return {}
    differences = [pair["detail"]["difference"] for pair in pairs.values()]
    tested = sum(d.get("p_value") is not None for d in differences)
    for difference, adjusted in zip(
        differences, holm(d.get("p_value") for d in differences), strict=True
    ):
        # one test per pair of languages: one Holm family
        difference.update(p_holm=adjusted, n_tests=tested)
    methods: dict[str, str] = {}
    for pair in pairs.values():
        methods.update(pair["methods"])
    return {
        "by_language_pair": {name: pair["estimates"] for name, pair in pairs.items()},
        "methods": methods,
        "pairs": {name: pair["detail"] for name, pair in pairs.items()},
        "weight": "softmax",
        "depth": RANKING_DEPTH,
    }


def with_language_pairs(results: Results, across: Mapping[str, Any]) -> Results:
    """A results block with the consistency estimates per pair of languages as stratum
    `by_language_pair`, their interval methods and directions beside the others'.
    """
    methods = {**results["ci"]["methods"], **across["methods"]}
    paired: Results = {
        **results,
        "ci": {
            **results["ci"],
            "methods": methods,
            "method": "; ".join(dict.fromkeys(methods.values())),
        },
        "higher_is_better": {
            **results.get("higher_is_better", {}),
            **dict.fromkeys(across["methods"], True),
        },
    }
    return with_strata(paired, {"language_pair": across["by_language_pair"]})


def consistency_detail(across: Mapping[str, Any]) -> dict[str, Any]:
    """What metrics.json's `consistency` keeps beside the estimates: each pair's agreement table,
    paired difference and what was not paired, and how RankC was computed.
    """
    return {key: across[key] for key in ("weight", "depth", "pairs")}
