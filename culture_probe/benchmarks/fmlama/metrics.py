"""FmLAMA metrics: mean average precision over ranked ingredients, mean word similarity (mWS), and a
run's summary from typed per-dish inputs (`RankedDish`, `ChatReply`).

Formulas: Zhou et al., 2024, "Does Mapo Tofu Contain Coffee?", section 4.3.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from culture_probe.errors import MetricInputError
from culture_probe.metrics._checks import by_group, check_lengths, finite_floats, none_if_nan
from culture_probe.util.typecheck import checked

Embed = Callable[[str], Any]


def _strings(name: str, index: int, value: Any) -> list[str]:
    """One dish's strings: a string, or a list of strings (a `None` or a number is named, not a
    TypeError).
    """
    if isinstance(value, str):
        return [value]
    values: list[Any] = (
        list(value) if isinstance(value, Iterable) and not isinstance(value, Mapping) else [None]
    )
    if not all(isinstance(v, str) for v in values):
        raise MetricInputError(
            f"`{name}` at index {index} must be a list of strings, got {value!r}."
        )
    return values


def _ranking(index: int, prediction: Sequence[str]) -> list[str]:
    ranking = _strings("predictions", index, prediction)
    if len(set(ranking)) != len(ranking):
        repeated = next(c for c in ranking if ranking.count(c) > 1)
        raise MetricInputError(
            f"`predictions` at index {index} repeats {repeated!r}: a ranking lists each candidate once."
        )
    return ranking


def _gold(index: int, reference: Sequence[str]) -> set[str]:
    return set(_strings("references", index, reference))


def average_precision(ranking: Sequence[str], gold: set[str]) -> float:
    """AP = (1/|G|) Σ_k P@k · rel(k); a gold item absent from the ranking contributes 0 (the paper's
    rule).
    """
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

    return {
        "map": mean(ap),
        "p_at_1": mean(p1),
        "p_at_5": mean(p5),
        "n": n,
        "n_skipped": int(skipped.sum()),
    }


@checked(MetricInputError, pure=True)
def mean_average_precision(
    predictions: Sequence[Sequence[str]],
    references: Sequence[Sequence[str]],
    groups: Sequence[Hashable] | Mapping[str, Sequence[Hashable]] | None = None,
) -> dict[str, Any]:
    """mAP, P@1 and P@5 in percent over dishes, overall and per group (e.g. country of origin).

    `predictions`: per dish the whole ranked pool, best first; `references`: per dish its gold
    ingredients (a set: duplicates count once). Dishes with an empty gold list are skipped and
    counted.
    """
    n = check_lengths(predictions=predictions, references=references)
    ap, p1, p5, skipped = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n, dtype=bool)
    for index, (prediction, reference) in enumerate(zip(predictions, references, strict=True)):
        ranking, gold = _ranking(index, prediction), _gold(index, reference)
        if not gold:
            skipped[index] = True
            continue
        ap[index] = average_precision(ranking, gold)
        p1[index], p5[index] = _precision_at(ranking, gold, 1), _precision_at(ranking, gold, 5)
    result = _summary(ap, p1, p5, skipped)
    if groups is not None:
        result["groups"] = by_group(
            groups, n, lambda mask: _summary(ap[mask], p1[mask], p5[mask], skipped[mask])
        )
    return result


def _cosine(u: np.ndarray, v: np.ndarray) -> float:
    norm = float(np.linalg.norm(u) * np.linalg.norm(v))
    # a zero vector (unknown string) leaves cos undefined
    return float(np.dot(u, v)) / norm if norm else math.nan


def word_similarity(
    ranking: Sequence[str], gold: set[str], vector: Callable[[str], np.ndarray]
) -> float:
    """WS = mean over gold g of max over the top-|G| predictions p of cos(v_g, v_p); NaN if a vector
    is zero.
    """
    top = list(ranking[: len(gold)])
    best = [max((_cosine(vector(g), vector(p)) for p in top), key=_nan_first) for g in sorted(gold)]
    return math.fsum(best) / len(best)


def _nan_first(value: float) -> float:
    """Makes `max` return NaN whenever a NaN is present, as the paper's numpy max does."""
    return math.inf if math.isnan(value) else value


@checked(MetricInputError, pure=True)
def mws(
    predictions: Sequence[Sequence[str]],
    references: Sequence[Sequence[str]],
    embed: Embed | Mapping[str, Any] | None = None,
    groups: Sequence[Hashable] | Mapping[str, Sequence[Hashable]] | None = None,
) -> dict[str, Any]:
    """Mean word similarity (0-1) between each dish's top-|G| predictions and its gold ingredients.

    `embed` maps a whole string to its vector (a function or a dict; None or a zero vector for an
    unknown string: its WS is NaN, left out of the mean and counted in `n_nan`). The paper's vectors
    are fastText's (`culture_probe.data.vectors` reads them, and `words_needed` says which strings
    to read).
    """
    n = check_lengths(predictions=predictions, references=references)
    if embed is None:
        raise MetricInputError(
            "mWS needs word vectors: pass embed= a function or dict from a string to its vector "
            "(culture_probe.data.vectors.read_vectors reads fastText or .vec files)."
        )
    items = [
        (_ranking(i, p), _gold(i, r))
        for i, (p, r) in enumerate(zip(predictions, references, strict=True))
    ]
    lookup = embed.get if isinstance(embed, Mapping) else embed
    cache: dict[str, np.ndarray] = {}
    first: list[str] = []  # the first string with a vector: every other vector must have its length

    def vector(text: str) -> np.ndarray:
        if text not in cache:
            found = lookup(text)
            cache[text] = (
                np.zeros(1) if found is None else _checked_vector(text, found, first, cache)
            )
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


def words_needed(
    predictions: Sequence[Sequence[str]], references: Sequence[Sequence[str]]
) -> set[str]:
    """The strings whose vectors `mws` reads: every gold item and each dish's top-|G|
    predictions.
    """
    items = [
        (_ranking(i, p), _gold(i, r))
        for i, (p, r) in enumerate(zip(predictions, references, strict=True))
    ]
    return {s for ranking, gold in items for s in (*gold, *ranking[: len(gold)])}


def _checked_vector(
    text: str, found: Any, first: list[str], cache: Mapping[str, np.ndarray]
) -> np.ndarray:
    """`found` as a 1-d float array of the same length as the first vector seen (one embedding
    model).
    """
    array = np.asarray(found, dtype=np.float64)
    if array.ndim != 1:
        raise MetricInputError(
            f"`embed` returned an array of shape {array.shape} for {text!r}; it must return one 1-d vector per string."
        )
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


@checked(MetricInputError, pure=True)
def template_mean_std(values: Sequence[float]) -> dict[str, float]:
    """Mean and sample standard deviation over templates, as the paper reports mAP/mWS (mean ±
    std).
    """
    if len(values) < 2:
        raise MetricInputError(
            f"`values` needs at least two templates for a sample std, got {len(values)}."
        )
    numbers = finite_floats("values", values).tolist()
    return {"mean": statistics.fmean(numbers), "std": statistics.stdev(numbers)}


@checked(MetricInputError, pure=True)
def map_mws_correlation(map_values: Sequence[float], mws_values: Sequence[float]) -> dict[str, Any]:
    """Pearson r between paired mAP and mWS cells of a results table (the paper's section 5.2: r =
    0.66 on Table 2).

    Each position is one cell (e.g. a group x model mean) measured both ways; r says whether the
    exact-match and the fuzzy-match metric rank the cells alike. r is None when either column is
    constant (undefined).
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


# ---------------------------------------------------------------- a run's summary (typed inputs
# from the protocol)

FAMILIES = ("hasParts", "country")  # template families: without and with the dish's country named
ALL = "ALL"


@dataclass(frozen=True)
class RankedDish:
    """One dish ranked in one template: the template (relation) and its family, the dish's group, a
    ranking that is equivalent to the full one for AP, P@k and mWS, and the gold items AP divides
    by.
    """

    template: str
    family: str
    group: str
    ranking: tuple[str, ...]
    gold: tuple[str, ...]


@dataclass(frozen=True)
class ChatReply:
    """One chat-mode reply: its template and instruction wording, the dish's group, and whether it
    named a gold ingredient.
    """

    template: str
    instruction: int
    group: str
    correct: bool


def ranking_summary(
    dishes: Sequence[RankedDish],
    embed: Embed | Mapping[str, Any] | None = None,
    *,
    map_decimals: int | None = None,
) -> dict[str, Any]:
    """The mAP (and mWS, given `embed`) per template and group, then mean ± sample std over the
    templates of each family (as in the paper's Table 2), with the Pearson r between the mAP and mWS
    cells. `map_decimals` rounds each template's mAP cells before the mean over templates (the v1
    scorer's `round(100 * map, 2)`; None keeps them unrounded).
    """
    per_template: dict[str, dict[str, Any]] = {}
    for relation in sorted(
        {d.template for d in dishes}, key=lambda t: (FAMILIES.index(t.split("_")[0]), t)
    ):
        per_template[relation] = template_summary(
            [d for d in dishes if d.template == relation], embed, map_decimals=map_decimals
        )
    out: dict[str, Any] = {"templates": per_template}
    for measure in ("map", "mws"):
        table = family_table(per_template, measure)
        if table:
            out[measure] = table
            out.update(
                {
                    f"{measure}_{fam}": cells[ALL]["mean"]
                    for fam, cells in table.items()
                    if cells.get(ALL)
                }
            )
    if "mws" in out:
        out["map_mws_correlation"] = table_correlation(out["map"], out["mws"])
    return out


def template_summary(
    dishes: Sequence[RankedDish],
    embed: Embed | Mapping[str, Any] | None = None,
    *,
    map_decimals: int | None = None,
) -> dict[str, Any]:
    """The mAP (and mWS, given `embed`) of one template, overall and per group; `map_decimals`
    rounds the mAP.
    """
    rankings, golds, groups = (
        [d.ranking for d in dishes],
        [d.gold for d in dishes],
        [d.group for d in dishes],
    )
    cells = _per_group(mean_average_precision(rankings, golds, groups=groups), "map")
    if map_decimals is not None:
        cells = {g: None if v is None else round(v, map_decimals) for g, v in cells.items()}
    result: dict[str, Any] = {"map": cells}
    if embed is not None:
        result["mws"] = _per_group(mws(rankings, golds, embed=embed, groups=groups), "mws")
    return result


def _per_group(result: Mapping[str, Any], measure: str) -> dict[str, Any]:
    cells = {ALL: result[measure]}
    cells.update({g: v[measure] for g, v in result.get("groups", {}).items()})
    return cells


def family_table(
    per_template: Mapping[str, Mapping[str, Any]], measure: str
) -> dict[str, dict[str, Any]]:
    """{family: {group: {mean, std, n_templates}}} over the templates of each family (as in the
    paper's Table 2).
    """
    table: dict[str, dict[str, Any]] = {}
    for family in FAMILIES:
        cells = [
            v[measure]
            for rel, v in per_template.items()
            if rel.startswith(family + "_") and measure in v
        ]
        if not cells:
            continue
        groups = sorted({g for c in cells for g in c}, key=lambda g: (g != ALL, g))
        table[family] = {}
        for group in groups:
            values = [c[group] for c in cells if c.get(group) is not None]
            stats = (
                template_mean_std(values)
                if len(values) > 1
                else {"mean": values[0] if values else None, "std": None}
            )
            table[family][group] = {**stats, "n_templates": len(values)}
    return table


def table_correlation(
    map_table: Mapping[str, Mapping[str, Any]], mws_table: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any] | None:
    """Pearson r between the mAP and mWS means of the cells (family x group, ALL included, as in the
    paper's Table 2 correlation) that have both; None with fewer than two such cells.
    """
    pairs = [
        (cell["mean"], mws_table[family][group]["mean"])
        for family, cells in map_table.items()
        for group, cell in cells.items()
        if cell["mean"] is not None
        and (mws_table.get(family, {}).get(group) or {}).get("mean") is not None
    ]
    if len(pairs) < 2:
        return None
    return map_mws_correlation(*zip(*pairs, strict=True))


def chat_summary(replies: Sequence[ChatReply]) -> dict[str, Any]:
    """Chat mode: accuracy (%) per "<template> / <instruction>" cell, overall (ALL) and per group,
    and the best cell's overall accuracy.
    """
    cells: dict[str, dict[str, list[bool]]] = {}
    for r in replies:
        cell = cells.setdefault(f"{r.template} / {r.instruction}", {})
        for group in (ALL, r.group):
            cell.setdefault(group, []).append(r.correct)
    chat = {
        name: {
            g: 100 * sum(v) / len(v)
            for g, v in sorted(groups.items(), key=lambda kv: (kv[0] != ALL, kv[0]))
        }
        for name, groups in sorted(cells.items())
    }
    return {
        "chat": chat,
        "chat_accuracy_best": max((cell[ALL] for cell in chat.values()), default=None),
    }
