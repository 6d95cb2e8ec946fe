"""FmLAMA metrics: mean average precision over ranked ingredients, and mean word similarity (mWS).

Formulas: specs/fmlama.md section 5 (Zhou et al., 2024, "Does Mapo Tofu Contain Coffee?", section 4.3).
"""

from __future__ import annotations

import importlib
import math
import os
import statistics
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from culture_probe.errors import MetricInputError
from culture_probe.metrics._checks import by_group, check_lengths, finite_floats, none_if_nan

Embed = Callable[[str], Any]
FASTTEXT_ENV = "CULTURE_PROBE_FASTTEXT"  # path of a cc.<lang>.300.bin, or of a folder holding them
FASTTEXT_URL = "https://fasttext.cc/docs/en/crawl-vectors.html"


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


def vectors_file(vectors: str | Path, language: str) -> Path:
    """The vectors file `vectors` names: itself, or the `cc.<language>.300.bin` inside it when it is a folder."""
    return Path(vectors) / f"cc.{language}.300.bin" if Path(vectors).is_dir() else Path(vectors)


def fasttext_vectors(path: str | Path | None = None, *, language: str = "en") -> Embed:
    """The paper's vectors: fastText's `get_word_vector` on the whole string, from a binary `cc.<lang>.300.bin`.

    `path` is the `.bin` model or a folder holding `cc.<language>.300.bin`; without it, the environment variable
    CULTURE_PROBE_FASTTEXT (read at call time) gives one of the two. Nothing is downloaded: the model is 7 GB.
    Needs the optional `fasttext` module (`pip install fasttext-wheel`, or `culture-probe[fasttext]`).
    """
    name = f"cc.{language}.300.bin"
    fix = (f"download {name} from {FASTTEXT_URL} and pass vectors='path/to/{name}' (or a folder holding it), "
           f"or set {FASTTEXT_ENV} to that path; or pass embed= a function from a string to its vector.")
    location = path if path is not None else os.environ.get(FASTTEXT_ENV)
    if not location:
        raise MetricInputError(f"mWS uses fastText vectors by default (as the paper), but no model was given: {fix}")
    model = vectors_file(location, language)
    if not model.is_file():
        raise MetricInputError(f"fastText model {str(model)!r} does not exist: {fix}")
    try:
        fasttext = importlib.import_module("fasttext")
    except ImportError:
        raise MetricInputError(
            f"Reading {str(model)!r} needs the `fasttext` module, which is not installed: run "
            "`pip install fasttext-wheel` (or `pip install culture-probe[fasttext]`), or pass embed=."
        ) from None
    return fasttext.load_model(str(model)).get_word_vector


def _embedder(
    embed: Embed | Mapping[str, Any] | None, vectors: str | Path | None, needed: set[str], language: str
) -> Embed:
    """`embed` as given, else the vectors of `read_vectors`."""
    if embed is not None and vectors is not None:
        raise MetricInputError("Pass either `embed` or `vectors`, not both.")
    if embed is None:
        embed = read_vectors(vectors, keep=needed, language=language)
    return embed.get if isinstance(embed, Mapping) else embed


def read_vectors(vectors: str | Path | None, *, keep: set[str], language: str = "en") -> dict[str, np.ndarray]:
    """The vectors of the strings in `keep`: from a fastText binary model (`.bin`, or a folder holding
    `cc.<language>.300.bin`; None: `fasttext_vectors`' default) or from text vectors (any other file).
    """
    if vectors is None or Path(vectors).is_dir() or Path(vectors).suffix == ".bin":
        vector = fasttext_vectors(vectors, language=language)
        return {text: np.asarray(vector(text)) for text in keep}
    return load_text_vectors(vectors, keep=keep)  # no vectors for strings it lacks: multi-word items become NaN


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
    language: str = "en",
) -> dict[str, Any]:
    """Mean word similarity (0-1) between each dish's top-|G| predictions and its gold ingredients.

    `embed` maps a whole string to its vector (None or a zero vector for an unknown string: its WS is NaN,
    left out of the mean and counted in `n_nan`). Or `vectors`: fastText text vectors (`.vec`), or a fastText
    binary model (`.bin`, or a folder holding `cc.<language>.300.bin`). With neither, fastText's model as in the
    paper (see `fasttext_vectors`: needs the `fasttext` module and the model's path).
    """
    n = check_lengths(predictions=predictions, references=references)
    items = [(_ranking(i, p), _gold(r)) for i, (p, r) in enumerate(zip(predictions, references, strict=True))]
    needed = {s for ranking, gold in items for s in (*gold, *ranking[: len(gold)])}
    lookup = _embedder(embed, vectors, needed, language)
    cache: dict[str, np.ndarray] = {}
    first: list[str] = []  # the first string with a vector: every other vector must have its length

    def vector(text: str) -> np.ndarray:
        if text not in cache:
            found = lookup(text)
            cache[text] = np.zeros(1) if found is None else _checked_vector(text, found, first, cache)
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


def _checked_vector(text: str, found: Any, first: list[str], cache: Mapping[str, np.ndarray]) -> np.ndarray:
    """`found` as a 1-d float array of the same length as the first vector seen (one embedding model)."""
    array = np.asarray(found, dtype=np.float64)
    if array.ndim != 1:
        raise MetricInputError(f"`embed` returned an array of shape {array.shape} for {text!r}; it must return "
                               "one 1-d vector per string.")
    if not first:
        first.append(text)
    elif array.shape != cache[first[0]].shape:
        raise MetricInputError(
            f"`embed` returned a vector of length {array.size} for {text!r} but of length {cache[first[0]].size} "
            f"for {first[0]!r}: every string needs a vector of one length (use one embedding model)."
        )
    return array


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


def map_mws_correlation(map_values: Sequence[float], mws_values: Sequence[float]) -> dict[str, Any]:
    """Pearson r between paired mAP and mWS cells of a results table (spec 5; the paper's r = 0.66 on Table 2).

    Each position is one cell (e.g. a group x model mean) measured both ways; r says whether the exact-match and
    the fuzzy-match metric rank the cells alike. r is None when either column is constant (undefined).
    """
    n = check_lengths(map_values=map_values, mws_values=mws_values)
    if n < 2:
        raise MetricInputError(f"`map_values` has {n} cell: a correlation needs at least two.")
    x = finite_floats("map_values", map_values)
    y = finite_floats("mws_values", mws_values)
    if x.min() == x.max() or y.min() == y.max():
        return {"pearson_r": None, "n_cells": n}
    dx, dy = x - x.mean(), y - y.mean()
    r = float(dx @ dy) / math.sqrt(float(dx @ dx) * float(dy @ dy))

    return {"pearson_r": max(-1.0, min(1.0, r)), "n_cells": n}
