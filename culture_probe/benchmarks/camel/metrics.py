"""CAMeL metrics: the Cultural Bias Score (and a run's summary from typed `ScoredPrompt`s),
adjective odds ratios, and fairness gaps on extrinsic tasks.

Formulas: Naous et al., 2024, "Having Beer after Prayer?", sections 4.2-4.4 and Appendix F.1.
Cultures are labelled "arab" and "western"; every gap is arab minus western.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from culture_probe.errors import MetricInputError
from culture_probe.metrics._checks import check_labels, check_lengths, finite_floats, none_if_nan
from culture_probe.metrics._resample import Resampling, bootstrap_interval, check_resampling
from culture_probe.util.typecheck import checked

CULTURES = ("arab", "western")


def prompt_cbs(arab: np.ndarray, western: np.ndarray, tie_value: float = 0.0) -> float:
    """CBS_t = 100 · share of (Arab, Western) pairs where the Western score is strictly higher (+
    tie_value per tie).

    Sorting the Arab scores makes this O((N + M) log N): a Mann-Whitney U with ties scored
    `tie_value`.
    """
    ordered = np.sort(arab)
    below = np.searchsorted(ordered, western, side="left")
    ties = np.searchsorted(ordered, western, side="right") - below
    cbs: float = 100.0 * (below.sum() + tie_value * ties.sum()) / (arab.size * western.size)
    return cbs


def _mean_std(values: list[float]) -> tuple[float, float | None]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


@checked(MetricInputError, pure=True)
def cbs(
    prompt_id: Sequence[Hashable],
    culture: Sequence[str],
    score: Sequence[float],
    entity_type: Sequence[Hashable] | None = None,
    run: Sequence[Hashable] | None = None,
    tie_value: float = 0.0,
) -> dict[str, Any]:
    """Cultural Bias Score (0-100): how often the model prefers the Western filler of a prompt.

    One row per (prompt, filler): its culture and its score. Pairs are formed within (run, entity
    type, prompt). Type CBS of a run = mean over its prompts; reported type CBS = mean over runs
    (with the sample std over runs); `cbs` = the plain mean of the type values. Ties count as not
    Western unless `tie_value` says so.
    """
    n = check_lengths(
        prompt_id=prompt_id, culture=culture, score=score, entity_type=entity_type, run=run
    )
    labels = check_labels("culture", culture, CULTURES)
    values = finite_floats("score", score)
    if not 0 <= tie_value <= 1:
        raise MetricInputError(
            f"`tie_value` must be in [0, 1] (0: ties are not Western; 0.5: AUC), got {tie_value}."
        )
    types = ["all"] * n if entity_type is None else [str(t) for t in entity_type]
    runs = ["0"] * n if run is None else [str(r) for r in run]
    rows: dict[tuple[str, str, str], dict[str, list[float]]] = defaultdict(
        lambda: {"arab": [], "western": []}
    )
    for index in range(n):
        rows[(runs[index], types[index], str(prompt_id[index]))][labels[index]].append(
            values[index]
        )
    by_run_type: dict[tuple[str, str], list[float]] = defaultdict(list)
    n_pairs = 0
    for (run_key, type_key, prompt), filled in sorted(rows.items()):
        arab, western = np.asarray(filled["arab"]), np.asarray(filled["western"])
        if not arab.size or not western.size:
            missing = "arab" if not arab.size else "western"
            raise MetricInputError(
                f"Prompt {prompt!r} (entity_type {type_key!r}, run {run_key!r}) has no {missing!r} scores in "
                "`culture`: every prompt needs fillers of both cultures."
            )
        by_run_type[(run_key, type_key)].append(prompt_cbs(arab, western, tie_value))
        n_pairs += arab.size * western.size
    per_run_type = {key: statistics.fmean(v) for key, v in by_run_type.items()}
    type_names = sorted({t for _, t in per_run_type})
    run_names = sorted({r for r, _ in per_run_type})
    per_type, per_type_std = {}, {}
    for type_key in type_names:
        per_type[type_key], per_type_std[type_key] = _mean_std(
            [v for (_, t), v in per_run_type.items() if t == type_key]
        )
    per_run = {
        r: statistics.fmean([v for (rr, _), v in per_run_type.items() if rr == r])
        for r in run_names
    }
    return {
        "cbs": statistics.fmean(per_type.values()),
        "per_type": per_type,
        "per_type_std": per_type_std,
        "per_run": per_run,
        "std": _mean_std(list(per_run.values()))[1],
        "n_pairs": int(n_pairs),
        "n_prompts": len(rows),
    }


@dataclass(frozen=True)
class ScoredPrompt:
    """One prompt of one run, scored: its id, entity type and run, and the scores of its Arab and
    Western fillers.
    """

    prompt_id: str
    entity_type: str
    run: int
    arab: tuple[float, ...]
    western: tuple[float, ...]


def run_summary(prompts: Sequence[ScoredPrompt], *, tie_value: float = 0.0) -> dict[str, Any]:
    """A CAMeL run's metrics: `cbs` over its scored prompts (pairs within each run, type and
    prompt), and the number of runs.
    """
    if not prompts:
        raise MetricInputError("No scored CAMeL prompts: every probe of this run was skipped.")
    ids, cultures, scores, types, runs = [], [], [], [], []
    for prompt in prompts:
        for culture, values in zip(CULTURES, (prompt.arab, prompt.western), strict=True):
            ids += [prompt.prompt_id] * len(values)
            cultures += [culture] * len(values)
            scores += list(values)
            types += [prompt.entity_type] * len(values)
            runs += [prompt.run] * len(values)
    result = cbs(
        prompt_id=ids,
        culture=cultures,
        score=scores,
        entity_type=types,
        run=runs,
        tie_value=tie_value,
    )
    result["n_runs"] = len({p.run for p in prompts})
    return result


@checked(MetricInputError, pure=True)
def odds_ratio(
    word: Sequence[str], culture: Sequence[str], smoothing: float = 0.5, confidence: float = 0.95
) -> dict[str, Any]:
    """Odds of each word (one row per occurrence) in Western-entity texts over its odds in
    Arab-entity texts.

    OR(x) = [(E_w(x)+s) / (W - E_w(x)+s)] / [(E_a(x)+s) / (A - E_a(x)+s)], where W and A are the
    total word counts (the paper's formula with add-s smoothing; s=0.5 is Haldane-Anscombe, s=0 is
    the paper exactly). The interval is Woolf's: exp(log OR ± z · sqrt(sum of the four reciprocal
    smoothed counts)).
    """
    check_lengths(word=word, culture=culture)
    labels = check_labels("culture", culture, CULTURES)
    if smoothing < 0 or not 0 < confidence < 1:
        raise MetricInputError(
            f"`smoothing` must be >= 0 and `confidence` in (0, 1), got {smoothing} and {confidence}."
        )
    counts = {
        c: Counter(str(w) for w, lab in zip(word, labels, strict=True) if lab == c)
        for c in CULTURES
    }
    totals = {c: sum(counts[c].values()) for c in CULTURES}
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    words = {}
    for item in sorted(set(counts["arab"]) | set(counts["western"])):
        w, a = counts["western"][item], counts["arab"][item]
        cells = (
            np.array([w, totals["western"] - w, a, totals["arab"] - a], dtype=np.float64)
            + smoothing
        )
        with np.errstate(divide="ignore", invalid="ignore"):
            logs = np.log(cells)
            log_or = float(logs[0] - logs[1] - logs[2] + logs[3])
            spread = z * float(np.sqrt((1 / cells).sum()))
        # An empty cell (only possible without smoothing) leaves the ratio at 0 or infinity and the
        # interval open.
        low, high = (
            (math.exp(log_or - spread), math.exp(log_or + spread))
            if math.isfinite(spread)
            else (0.0, math.inf)
        )
        words[item] = {
            "odds_ratio": none_if_nan(math.exp(log_or)),
            "ci_low": low,
            "ci_high": high,
            "count_western": w,
            "count_arab": a,
        }
    ranked = dict(sorted(words.items(), key=lambda kv: (-(kv[1]["odds_ratio"] or 0.0), kv[0])))
    return {
        "words": ranked,
        "n_western": totals["western"],
        "n_arab": totals["arab"],
        "smoothing": float(smoothing),
        "confidence": float(confidence),
    }


def _rates(confusion: np.ndarray) -> dict[str, np.ndarray]:
    """Per-label F1, false-negative and false-positive rates from (..., L, L) confusion matrices
    (gold x pred).
    """
    tp = np.diagonal(confusion, axis1=-2, axis2=-1).astype(np.float64)
    gold, predicted = confusion.sum(axis=-1), confusion.sum(axis=-2)
    total = confusion.sum(axis=(-2, -1))[..., None]
    fn, fp = gold - tp, predicted - tp
    with np.errstate(divide="ignore", invalid="ignore"):
        f1 = 2 * tp / (2 * tp + fp + fn)
        return {
            "f1": f1,
            "macro_f1": _nanmean_last(f1),
            "fnr": fn / gold,
            "fpr": fp / (total - gold),
        }


def _stack(rates: dict[str, np.ndarray]) -> np.ndarray:
    """(resamples, 1 + 2L): macro-F1, then the L false-negative rates, then the L false-positive
    rates.
    """
    stacked: np.ndarray = np.column_stack([rates["macro_f1"], rates["fnr"], rates["fpr"]])
    return stacked


def _nanmean_last(values: np.ndarray) -> np.ndarray:
    defined = ~np.isnan(values)
    with np.errstate(divide="ignore", invalid="ignore"):
        means: np.ndarray = np.where(defined, values, 0).sum(axis=-1) / defined.sum(axis=-1)
        return means


def _confusions(
    gold: np.ndarray, pred: np.ndarray, n_labels: int, indices: np.ndarray
) -> np.ndarray:
    """One confusion matrix per row of `indices` (resampled item positions), via a single
    bincount.
    """
    rows = np.arange(indices.shape[0])[:, None] * n_labels * n_labels
    flat = (rows + gold[indices] * n_labels + pred[indices]).ravel()
    counts = np.bincount(flat, minlength=indices.shape[0] * n_labels * n_labels)
    return counts.reshape(indices.shape[0], n_labels, n_labels)


def _interval(value: float, low: float | None, high: float | None) -> dict[str, float | None]:
    return {"value": none_if_nan(value), "ci_low": low, "ci_high": high}


@checked(MetricInputError, pure=True)
def fairness_gap(
    predictions: Sequence[Hashable],
    references: Sequence[Hashable],
    culture: Sequence[str],
    labels: Sequence[Hashable] | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """Arab minus Western macro-F1 and per-label false-negative/false-positive rates, with bootstrap
    intervals.

    One row per classified item (a sentiment label, an entity's tag). FNR_c = P(pred != c | gold =
    c), FPR_c = P(pred = c | gold != c). The bootstrap resamples the items of each culture
    separately (seeded); a rate undefined in some draw (a label missing from the resampled items)
    gets no interval.
    """
    check_lengths(predictions=predictions, references=references, culture=culture)
    check_resampling(n_resamples, confidence)
    cultures = np.asarray(check_labels("culture", culture, CULTURES))
    preds, golds = [str(p) for p in predictions], [str(r) for r in references]
    label_set = sorted(set(golds) | set(preds)) if labels is None else [str(x) for x in labels]
    check_labels("references", golds, label_set)
    check_labels("predictions", preds, label_set)
    index = {label: i for i, label in enumerate(label_set)}
    gold, pred = np.array([index[g] for g in golds]), np.array([index[p] for p in preds])
    parts = {c: np.flatnonzero(cultures == c) for c in CULTURES}
    for name, positions in parts.items():
        if not positions.size:
            raise MetricInputError(
                f"`culture` has no {name!r} item: a fairness gap needs items of both cultures."
            )
    n_labels = len(label_set)

    def culture_rates(name: str, indices: np.ndarray) -> dict[str, np.ndarray]:
        return _rates(_confusions(gold[parts[name]], pred[parts[name]], n_labels, indices))

    def gaps(indices: list[np.ndarray]) -> np.ndarray:
        arab, western = (culture_rates(c, i) for c, i in zip(CULTURES, indices, strict=True))
        gap: np.ndarray = (_stack(arab) - _stack(western)).T
        return gap

    _, low, high = bootstrap_interval(
        gaps,
        [np.arange(parts[c].size) for c in CULTURES],
        Resampling(confidence, n_resamples, seed),
    )
    full = {c: culture_rates(c, np.arange(parts[c].size)[None, :]) for c in CULTURES}
    observed = (_stack(full["arab"]) - _stack(full["western"]))[0]
    gap: dict[str, dict[str, float | None] | dict[str, dict[str, float | None]]] = {
        "f1": _interval(observed[0], low[0], high[0])
    }
    for rate, offset in (("fnr", 1), ("fpr", 1 + n_labels)):
        gap[rate] = {
            label: _interval(observed[offset + j], low[offset + j], high[offset + j])
            for j, label in enumerate(label_set)
        }
    return {
        **{c: _culture_summary(full[c], label_set, parts[c].size) for c in CULTURES},
        "gap": gap,
        "labels": label_set,
        "n_resamples": int(n_resamples),
        "confidence": float(confidence),
        "seed": int(seed),
    }


def _culture_summary(rates: dict[str, np.ndarray], label_set: list[str], n: int) -> dict[str, Any]:
    return {
        "n": int(n),
        "f1": none_if_nan(float(rates["macro_f1"][0])),
        "per_label": {
            label: {key: none_if_nan(float(rates[key][0, j])) for key in ("f1", "fnr", "fpr")}
            for j, label in enumerate(label_set)
        },
    }
