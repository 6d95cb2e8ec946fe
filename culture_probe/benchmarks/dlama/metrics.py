"""DLAMA metrics: precision at k over ranked candidates, the object entropy of a predicate within a
culture, and a run's summary from typed per-fact inputs (`RankedFact`, `AnsweredFact`).

Formulas: Keleg & Magdy, 2023, "DLAMA", section 5.1 and Tables 1-2.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from culture_probe.errors import MetricInputError
from culture_probe.metrics._checks import by_group, check_lengths, finite_floats
from culture_probe.metrics.compare import compare_groups, holm
from culture_probe.util.typecheck import checked

_QID = re.compile(r"^([A-Za-z]*)(\d+)$")


@checked(MetricInputError, pure=True)
def rank_candidates(
    candidates: Sequence[str], scores: Sequence[float], n_tokens: Sequence[int] | None = None
) -> list[str]:
    """Candidates best first: higher score, then fewer tokens, then code-point order (DLAMA's tie
    rule).

    The rule reproduces the insertion order of the original scorer, so a ranking never depends on
    the order in which equal-scored candidates were given.
    """
    check_lengths(candidates=candidates, scores=scores, n_tokens=n_tokens)
    values = finite_floats("scores", scores).tolist()
    tokens = n_tokens if n_tokens is not None else [0] * len(candidates)
    order = sorted(zip(candidates, values, tokens, strict=True), key=lambda c: (-c[1], c[2], c[0]))
    return [candidate for candidate, _, _ in order]


def _ranked_lists(
    predictions: Sequence[Any],
    scores: Sequence[Sequence[float]] | None,
    n_tokens: Sequence[Sequence[int]] | None,
) -> list[list[str]]:
    ranked = []
    for index, prediction in enumerate(predictions):
        candidates = [prediction] if isinstance(prediction, str) else list(prediction)
        if not candidates:
            raise MetricInputError(
                f"`predictions` at index {index} is an empty list: every item needs at least one ranked candidate."
            )
        if scores is not None:
            item_scores = finite_floats(f"scores[{index}]", scores[index])
            item_tokens = None if n_tokens is None else n_tokens[index]
            lengths = {
                len(candidates),
                len(item_scores),
                len(candidates if item_tokens is None else item_tokens),
            }
            if len(lengths) != 1:
                raise MetricInputError(
                    f"`scores`/`n_tokens` at index {index} do not have one value per candidate in `predictions` "
                    f"({len(candidates)} candidates)."
                )
            candidates = rank_candidates(candidates, item_scores.tolist(), item_tokens)
        ranked.append(candidates)
    return ranked


@checked(MetricInputError, pure=True)
def hits_at_k(
    predictions: Sequence[str | Sequence[str]],
    references: Sequence[Sequence[str]],
    k: int = 1,
    scores: Sequence[Sequence[float]] | None = None,
    n_tokens: Sequence[Sequence[int]] | None = None,
) -> np.ndarray:
    """Per-item hit (1.0/0.0) when any valid answer is within the top k; NaN for an item without
    valid answers.

    With `scores`, each item's `predictions` are its candidates in any order and are ranked by
    `rank_candidates`.
    """
    check_lengths(predictions=predictions, references=references, scores=scores, n_tokens=n_tokens)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise MetricInputError(f"`k` must be a positive integer, got {k!r}.")
    ranked = _ranked_lists(predictions, scores, n_tokens)
    hits = np.full(len(ranked), np.nan)
    for index, (candidates, valid) in enumerate(zip(ranked, references, strict=True)):
        gold = {valid} if isinstance(valid, str) else set(valid)
        if gold:
            hits[index] = float(any(candidate in gold for candidate in candidates[:k]))
    return hits


def _precision(hits: np.ndarray) -> dict[str, Any]:
    scored = hits[~np.isnan(hits)]
    value = 100.0 * float(scored.mean()) if scored.size else None
    return {"precision": value, "n": int(scored.size), "n_skipped": int(hits.size - scored.size)}


@checked(MetricInputError, pure=True)
def precision_at_k(
    predictions: Sequence[str | Sequence[str]],
    references: Sequence[Sequence[str]],
    k: int = 1,
    groups: Sequence[Hashable] | Mapping[str, Sequence[Hashable]] | None = None,
    scores: Sequence[Sequence[float]] | None = None,
    n_tokens: Sequence[Sequence[int]] | None = None,
) -> dict[str, Any]:
    """P@k in percent, micro-averaged over items, overall and per group.

    `groups`: one key per item (e.g. the culture, or "P30|arab"), or {"culture": keys, "predicate":
    keys} for one table per grouping.

    `predictions`: per item its ranked candidates (best first) or just its top-1 label;
    `references`: per item its valid answers. Items with no valid answer are skipped and counted; a
    group with none scored gives None.
    """
    hits = hits_at_k(predictions, references, k, scores, n_tokens)
    result = {"k": int(k), **_precision(hits)}
    if groups is not None:
        result["groups"] = by_group(groups, hits.size, lambda mask: _precision(hits[mask]))
    return result


def _natural_key(uri: str) -> tuple:
    """`Q4` before `Q10`: QIDs compare by their number; other strings after them, in code-point
    order.
    """
    match = _QID.match(uri)
    return (0, match.group(1), int(match.group(2)), uri) if match else (1, uri, 0, uri)


def _entropy_bits(kept: list[str]) -> float:
    counts = np.asarray(list(Counter(kept).values()), dtype=np.float64)
    p = counts / counts.sum()
    return float(abs(-(p * np.log2(p)).sum()))


@checked(MetricInputError, pure=True)
def object_entropy(
    objects: Sequence[Sequence[str]], predicate: Sequence[Hashable], culture: Sequence[Hashable]
) -> dict[str, Any]:
    """Entropy (bits) of each fact's most frequent valid object, per (culture, predicate), and per
    culture.

    Counts are over all facts of the (predicate, culture) set; a fact keeps its most frequent
    object, ties to the lowest QID in numeric order. A culture's value is the unweighted mean over
    its predicates. Facts without objects are skipped and counted.
    """
    check_lengths(objects=objects, predicate=predicate, culture=culture)
    cells: dict[tuple[str, str], list[set[str]]] = defaultdict(list)
    n_skipped = 0
    for fact_objects, pred, cult in zip(objects, predicate, culture, strict=True):
        uris = {fact_objects} if isinstance(fact_objects, str) else set(fact_objects)
        if uris:
            cells[(str(cult), str(pred))].append(uris)
        else:
            n_skipped += 1
    if not cells:
        raise MetricInputError(
            "`objects` has no fact with at least one object: nothing to compute."
        )
    per_predicate: dict[str, dict[str, float]] = defaultdict(dict)
    for (cult, pred), facts in sorted(cells.items()):
        counts = Counter(uri for uris in facts for uri in uris)
        kept = [min(uris, key=lambda u: (-counts[u], _natural_key(u))) for uris in facts]
        per_predicate[cult][pred] = _entropy_bits(kept)
    entropy = {
        cult: math.fsum(values.values()) / len(values) for cult, values in per_predicate.items()
    }
    return {"entropy": entropy, "per_predicate": dict(per_predicate), "n_skipped": n_skipped}


# ---------------------------------------------------------------- a run's summary (typed inputs
# from the protocol)


@dataclass(frozen=True)
class RankedFact:
    """One fact ranked by a model: its group keys, the top-ranked candidate, its gold labels and
    object QIDs.
    """

    language: str
    predicate: str
    culture: str
    prediction: str
    gold: tuple[str, ...]
    objects: tuple[str, ...]


@dataclass(frozen=True)
class AnsweredFact:
    """One fact answered by generation: its group keys, and whether the reply holds (overlap) or is
    (exact) a gold label.
    """

    language: str
    predicate: str
    culture: str
    overlap: bool
    exact: bool


GENERATION_MEASURES = ("overlap", "exact")


def ranking_summary(facts: Sequence[RankedFact], *, reference: str = "west") -> dict[str, Any]:
    """A ranking run's metrics: per prompt language P@1 for the pair, each culture and each
    (predicate, culture), the non-reference minus reference difference (score interval and test of
    two proportions; its `p_holm` is Holm-adjusted over the run's `n_tests` culture gaps, one per
    prompt language), and the object entropy of the first language's facts (the objects are the same
    in every language).
    """
    out: dict[str, Any] = {"n_facts": len(facts)}
    for language, rows in _by(facts, "language"):
        out[language] = language_summary(rows, reference=reference)
        out[f"p1_{language}"] = out[language]["p1"]
        out.update({f"p1_{language}_{c}": v for c, v in out[language]["cultures"].items()})
    gaps = [
        out[language]["comparison"]
        for language, _ in _by(facts, "language")
        if "comparison" in out[language]
    ]
    for gap, adjusted in zip(gaps, holm(g["p_value"] for g in gaps), strict=True):
        gap.update(p_holm=adjusted, n_tests=sum(g["p_value"] is not None for g in gaps))
    if facts:
        first = [f for f in facts if f.language == facts[0].language]
        out["object_entropy"] = object_entropy(
            [list(f.objects) for f in first],
            [f.predicate for f in first],
            [f.culture for f in first],
        )
    return out


def language_summary(facts: Sequence[RankedFact], *, reference: str = "west") -> dict[str, Any]:
    """P@1 of one prompt language: the pair (micro), each culture, each (predicate, culture), and
    the non-reference minus reference difference when the language has exactly two cultures, one of
    them `reference`.
    """
    predictions, golds = [f.prediction for f in facts], [list(f.gold) for f in facts]
    by_culture = precision_at_k(predictions, golds, groups=[f.culture for f in facts])
    by_cell = precision_at_k(
        predictions, golds, groups=[f"{f.predicate}|{f.culture}" for f in facts]
    )
    predicates: dict[str, dict[str, float | None]] = defaultdict(dict)
    for key, value in by_cell["groups"].items():
        predicate, culture = key.split("|")
        predicates[predicate][culture] = value["precision"]
    result = {
        "p1": by_culture["precision"],
        "cultures": {c: v["precision"] for c, v in by_culture["groups"].items()},
        "n": {c: v["n"] for c, v in by_culture["groups"].items()},
        "predicates": dict(predicates),
    }
    cultures = set(result["cultures"])
    if len(cultures) == 2 and reference in cultures:
        hits = hits_at_k(predictions, golds) * 100
        compared = compare_groups(
            hits, [f.culture for f in facts], reference=reference, success=100.0
        )
        result["comparison"] = compared["comparisons"][0]
    return result


def generation_summary(facts: Sequence[AnsweredFact]) -> dict[str, Any]:
    """A generation run's metrics: per question language, overlap and exact accuracy (%) per culture
    and for the pair, overlap per (predicate, culture), and flat `<measure>_<language>_<culture>`
    keys.
    """
    out: dict[str, Any] = {"n_facts": len(facts)}
    for language, rows in _by(facts, "language"):
        out[language] = _generation_language(rows)
        out.update(
            {
                f"{m}_{language}_{c}": v
                for m in GENERATION_MEASURES
                for c, v in out[language][m].items()
            }
        )
    return out


def _generation_language(facts: Sequence[AnsweredFact]) -> dict[str, Any]:
    def pct(group: Sequence[AnsweredFact], measure: str) -> float:
        return 100.0 * float(np.mean([getattr(f, measure) for f in group]))

    cultures = _by(facts, "culture")
    out: dict[str, Any] = {
        m: {c: pct(g, m) for c, g in cultures} | {"pair": pct(facts, m)}
        for m in GENERATION_MEASURES
    }
    out["n"] = {c: len(g) for c, g in cultures}
    out["predicates"] = {
        p: {c: pct(g, "overlap") for c, g in _by(group, "culture")}
        for p, group in _by(facts, "predicate")
    }
    return out


def _by(facts: Sequence[Any], key: str) -> list[tuple[str, list[Any]]]:
    """(value, facts) per value of attribute `key`, values in sorted order."""
    groups: dict[str, list[Any]] = {}
    for fact in facts:
        groups.setdefault(getattr(fact, key), []).append(fact)
    return sorted(groups.items(), key=lambda kv: str(kv[0]))
