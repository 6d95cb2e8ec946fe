"""FmLAMA metrics: mean average precision over ranked ingredients, and mean word similarity (mWS).

Formulas: specs/fmlama.md section 5 (Zhou et al., 2024, "Does Mapo Tofu Contain Coffee?", section 4.3).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from culture_probe.errors import MetricInputError
from culture_probe.metrics._checks import by_group, check_lengths, none_if_nan

Embed = Callable[[str], Any]


def _ranking(index: int, prediction: Sequence[str]) -> list[str]:
    ranking = [prediction] if isinstance(prediction, str) else list(prediction)
    if len(set(ranking)) != len(ranking):
        repeated = next(c for c in ranking if ranking.count(c) > 1)
        raise MetricInputError(
            f"`predictions` at index {index} repeats {repeated!r}: a ranking lists each candidate once."
        )
    return ranking


def _gold(reference: Sequence[str]) -> set[str]:
    return {reference} if isinstance(reference, str) else set(reference)


def average_precision(ranking: Sequence[str], gold: set[str]) -> float:
    """AP = (1/|G|) Σ_k P@k · rel(k); a gold item absent from the ranking contributes 0 (the paper's rule)."""
    hits, total = 0, 0.0
    for rank, candidate in enumerate(ranking, start=1):
        if candidate in gold:
            hits += 1
            total += hits / rank
    return total / len(gold)


def _precision_at(ranking: Sequence[str], gold: set[str], k: int) -> float:
    return len(gold.intersection(ranking[:k])) / k


def _summary(ap: np.ndarray, p1: np.ndarray, p5: np.ndarray, skipped: np.ndarray) -> dict[str, Any]:
    kept = ~skipped
    n = int(kept.sum())

    def mean(values: np.ndarray) -> float | None:
        return 100.0 * float(values[kept].mean()) if n else None

    return {"map": mean(ap), "p_at_1": mean(p1), "p_at_5": mean(p5), "n": n, "n_skipped": int(skipped.sum())}


def mean_average_precision(
    predictions: Sequence[Sequence[str]],
    references: Sequence[Sequence[str]],
    groups: Sequence[Hashable] | Mapping[str, Sequence[Hashable]] | None = None,
) -> dict[str, Any]:
    """mAP, P@1 and P@5 in percent over dishes, overall and per group (e.g. country of origin).

    `predictions`: per dish the whole ranked pool, best first; `references`: per dish its gold ingredients
    (a set: duplicates count once). Dishes with an empty gold list are skipped and counted.
    """
    n = check_lengths(predictions=predictions, references=references)
    ap, p1, p5, skipped = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n, dtype=bool)
    for index, (prediction, reference) in enumerate(zip(predictions, references, strict=True)):
        ranking, gold = _ranking(index, prediction), _gold(reference)
        if not gold:
            skipped[index] = True
            continue
        ap[index] = average_precision(ranking, gold)
        p1[index], p5[index] = _precision_at(ranking, gold, 1), _precision_at(ranking, gold, 5)
    result = _summary(ap, p1, p5, skipped)
    if groups is not None:
        result["groups"] = by_group(groups, n, lambda mask: _summary(ap[mask], p1[mask], p5[mask], skipped[mask]))
    return result


def load_text_vectors(path: str | Path, keep: set[str] | None = None) -> dict[str, np.ndarray]:
    """Read word vectors from a text file in fastText's `.vec` format (optional "count dim" header line).

    A key may contain spaces (the last `dim` fields are the vector), so a file of whole-string vectors
    precomputed with fastText's `get_word_vector` works too. `keep` reads only the strings a metric needs,
    so a 2-million-word file does not have to fit in memory.
    """
    vectors: dict[str, np.ndarray] = {}
    dim = None
    with open(path, encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            fields = line.rstrip("\n").rstrip(" ").split(" ")
            if line_number == 1 and len(fields) == 2 and all(f.isdigit() for f in fields):
                dim = int(fields[1])
                continue
            if dim is None:
                dim = _trailing_numbers(fields)
            if len(fields) <= dim:
                raise MetricInputError(f"{path}:{line_number}: expected a key and {dim} numbers.")
            key = " ".join(fields[:-dim])
            if keep is None or key in keep:
                vectors[key] = np.asarray(fields[-dim:], dtype=np.float64)
    return vectors


def _trailing_numbers(fields: list[str]) -> int:
    count = 0
    for field in reversed(fields[1:]):
        try:
            float(field)
        except ValueError:
            break
        count += 1
    return count


def _cosine(u: np.ndarray, v: np.ndarray) -> float:
    norm = float(np.linalg.norm(u) * np.linalg.norm(v))
    return float(np.dot(u, v)) / norm if norm else math.nan  # a zero vector (unknown string) leaves cos undefined


def _embedder(embed: Embed | Mapping[str, Any] | None, vectors: str | Path | None, needed: set[str]) -> Embed:
    if embed is not None and vectors is not None:
        raise MetricInputError("Pass either `embed` or `vectors`, not both.")
    if vectors is not None:
        embed = load_text_vectors(vectors, keep=needed)
    if embed is None:
        raise MetricInputError(
            "mWS needs word vectors: pass `vectors='cc.en.300.vec'` (fastText text vectors, as in the paper) or "
            "`embed=` a function from a string to its vector (e.g. fasttext.load_model(...).get_word_vector)."
        )
    return embed.get if isinstance(embed, Mapping) else embed


def word_similarity(ranking: Sequence[str], gold: set[str], vector: Callable[[str], np.ndarray]) -> float:
    """WS = mean over gold g of max over the top-|G| predictions p of cos(v_g, v_p); NaN if a vector is zero."""
    top = list(ranking[: len(gold)])
    best = [max((_cosine(vector(g), vector(p)) for p in top), key=_nan_first) for g in sorted(gold)]
    return math.fsum(best) / len(best)


def _nan_first(value: float) -> float:
    """Makes `max` return NaN whenever a NaN is present, as the paper's numpy max does."""
    return math.inf if math.isnan(value) else value


def mws(
    predictions: Sequence[Sequence[str]],
    references: Sequence[Sequence[str]],
    embed: Embed | Mapping[str, Any] | None = None,
    vectors: str | None = None,
    groups: Sequence[Hashable] | Mapping[str, Sequence[Hashable]] | None = None,
) -> dict[str, Any]:
    """Mean word similarity (0-1) between each dish's top-|G| predictions and its gold ingredients.

    `embed` maps a whole string to its vector (None or a zero vector for an unknown string: its WS is NaN,
    left out of the mean and counted in `n_nan`); or `vectors` is a path to fastText text vectors.
    """
    n = check_lengths(predictions=predictions, references=references)
    items = [(_ranking(i, p), _gold(r)) for i, (p, r) in enumerate(zip(predictions, references, strict=True))]
    needed = {s for ranking, gold in items for s in (*gold, *ranking[: len(gold)])}
    lookup = _embedder(embed, vectors, needed)
    cache: dict[str, np.ndarray] = {}

    def vector(text: str) -> np.ndarray:
        if text not in cache:
            found = lookup(text)
            cache[text] = np.zeros(1) if found is None else np.asarray(found, dtype=np.float64)
        return cache[text]

    ws = np.full(n, np.nan)
    skipped = np.zeros(n, dtype=bool)
    for index, (ranking, gold) in enumerate(items):
        if gold:
            ws[index] = word_similarity(ranking, gold, vector)
        else:
            skipped[index] = True
    result = _ws_summary(ws, skipped)
    if groups is not None:
        result["groups"] = by_group(groups, n, lambda mask: _ws_summary(ws[mask], skipped[mask]))
    return result


def _ws_summary(ws: np.ndarray, skipped: np.ndarray) -> dict[str, Any]:
    scored = ws[~skipped]
    defined = scored[~np.isnan(scored)]
    return {
        "mws": none_if_nan(float(defined.mean())) if defined.size else None,
        "n": int(defined.size),
        "n_nan": int(scored.size - defined.size),
        "n_skipped": int(skipped.sum()),
    }


def template_mean_std(values: Sequence[float]) -> dict[str, float]:
    """Mean and sample standard deviation over templates, as the paper reports mAP/mWS (mean ± std)."""
    if len(values) < 2:
        raise MetricInputError(f"`values` needs at least two templates for a sample std, got {len(values)}.")
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values)}
