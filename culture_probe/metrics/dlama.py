"""DLAMA metrics: precision at k over ranked candidates, and the object entropy of a predicate within a culture.

Formulas: specs/dlama.md section 5 (Keleg & Magdy, 2023, "DLAMA", section 5.1 and Tables 1-2).
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from culture_probe.errors import MetricInputError
from culture_probe.metrics._checks import by_group, check_lengths, finite_floats

_QID = re.compile(r"^([A-Za-z]*)(\d+)$")


def rank_candidates(
    candidates: Sequence[str], scores: Sequence[float], n_tokens: Sequence[int] | None = None
) -> list[str]:
    """Candidates best first: higher score, then fewer tokens, then code-point order (DLAMA's tie rule).

    The rule reproduces the insertion order of the original scorer, so a ranking never depends on the order in
    which equal-scored candidates were given.
    """
    tokens = n_tokens if n_tokens is not None else [0] * len(candidates)
    order = sorted(zip(candidates, scores, tokens, strict=True), key=lambda c: (-c[1], c[2], c[0]))
    return [candidate for candidate, _, _ in order]


def _ranked_lists(
    predictions: Sequence[Any], scores: Sequence[Sequence[float]] | None, n_tokens: Sequence[Sequence[int]] | None
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
            lengths = {len(candidates), len(item_scores), len(candidates if item_tokens is None else item_tokens)}
            if len(lengths) != 1:
                raise MetricInputError(
                    f"`scores`/`n_tokens` at index {index} do not have one value per candidate in `predictions` "
                    f"({len(candidates)} candidates)."
                )
            candidates = rank_candidates(candidates, item_scores.tolist(), item_tokens)
        ranked.append(candidates)
    return ranked


def hits_at_k(
    predictions: Sequence[Any],
    references: Sequence[Sequence[str]],
    k: int = 1,
    scores: Sequence[Sequence[float]] | None = None,
    n_tokens: Sequence[Sequence[int]] | None = None,
) -> np.ndarray:
    """Per-item hit (1.0/0.0) when any valid answer is within the top k; NaN for an item without valid answers.

    With `scores`, each item's `predictions` are its candidates in any order and are ranked by `rank_candidates`.
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


def precision_at_k(
    predictions: Sequence[Any],
    references: Sequence[Sequence[str]],
    k: int = 1,
    groups: Sequence[Hashable] | Mapping[str, Sequence[Hashable]] | None = None,
    scores: Sequence[Sequence[float]] | None = None,
    n_tokens: Sequence[Sequence[int]] | None = None,
) -> dict[str, Any]:
    """P@k in percent, micro-averaged over items, overall and per group.

    `groups`: one key per item (e.g. the culture, or "P30|arab"), or {"culture": keys, "predicate": keys} for one
    table per grouping.

    `predictions`: per item its ranked candidates (best first) or just its top-1 label; `references`: per item
    its valid answers. Items with no valid answer are skipped and counted; a group with none scored gives None.
    """
    hits = hits_at_k(predictions, references, k, scores, n_tokens)
    result = {"k": int(k), **_precision(hits)}
    if groups is not None:
        result["groups"] = by_group(groups, hits.size, lambda mask: _precision(hits[mask]))
    return result


def _natural_key(uri: str) -> tuple:
    """`Q4` before `Q10`: QIDs compare by their number; other strings after them, in code-point order."""
    match = _QID.match(uri)
    return (0, match.group(1), int(match.group(2)), uri) if match else (1, uri, 0, uri)


def _entropy_bits(kept: list[str]) -> float:
    counts = np.asarray(list(Counter(kept).values()), dtype=np.float64)
    p = counts / counts.sum()
    return float(abs(-(p * np.log2(p)).sum()))


def object_entropy(
    objects: Sequence[Sequence[str]], predicate: Sequence[Hashable], culture: Sequence[Hashable]
) -> dict[str, Any]:
    """Entropy (bits) of each fact's most frequent valid object, per (culture, predicate), and per culture.

    Counts are over all facts of the (predicate, culture) set; a fact keeps its most frequent object, ties to the
    lowest QID in numeric order. A culture's value is the unweighted mean over its predicates. Facts without
    objects are skipped and counted.
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
        raise MetricInputError("`objects` has no fact with at least one object: nothing to compute.")
    per_predicate: dict[str, dict[str, float]] = defaultdict(dict)
    for (cult, pred), facts in sorted(cells.items()):
        counts = Counter(uri for uris in facts for uri in uris)
        kept = [min(uris, key=lambda u: (-counts[u], _natural_key(u))) for uris in facts]
        per_predicate[cult][pred] = _entropy_bits(kept)
    entropy = {cult: math.fsum(values.values()) / len(values) for cult, values in per_predicate.items()}
    return {"entropy": entropy, "per_predicate": dict(per_predicate), "n_skipped": n_skipped}
