"""X-FaKT metrics: Factual Recall Score, Knowledge Transferability Score and their harmonic mean.

Formulas: Aggarwal et al., 2025, "Language Models' Factuality Depends on the Language of Inquiry",
section 4.2, reconciled with the upstream scorer, which rounds each cell error to 2 decimals.
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from culture_probe.errors import MetricInputError
from culture_probe.metrics._checks import check_bools, check_choice, check_labels, check_lengths
from culture_probe.metrics._intervals import MIN_OFF_EDGE, Interval, bounded, critical, wilson
from culture_probe.util.typecheck import checked

# The benchmark's language-country bijection (ISO 639-1 code -> English country name), in its index
# order.
ASSOCIATIONS: dict[str, str] = {
    "en": "United States",
    "hi": "India",
    "zh": "China",
    "ru": "Russia",
    "ar": "Saudi Arabia",
    "fr": "France",
    "ne": "Nepal",
    "ja": "Japan",
    "uk": "Ukraine",
    "el": "Greece",
    "tr": "Turkey",
    "sw": "Kenya",
    "th": "Thailand",
}

# Resource tiers of the question languages: the paper's, and the upstream code's (Turkish medium
# instead of low).
TIERS: dict[str, dict[str, tuple[str, ...]]] = {
    "paper": {
        "high": ("en", "zh", "fr", "ja"),
        "medium": ("hi", "ru", "ar", "el"),
        "low": ("ne", "uk", "tr", "sw", "th"),
    },
    "upstream": {
        "high": ("en", "zh", "fr", "ja"),
        "medium": ("hi", "ru", "ar", "el", "tr"),
        "low": ("ne", "uk", "sw", "th"),
    },
}


@checked(MetricInputError, pure=True)
def xfakt_scores(mu_assoc: float, mu_non: float) -> dict[str, float]:
    """FRS, KTS and X-FaKT from the mean associated and non-associated error rates (fractions in [0,
    1]).

    FRS = 1.5 · (1/(1 + µa + µn) − 1/3) rewards low errors; KTS = 2 · (1/(1 + |µa − µn|) − 1/2)
    rewards equal errors; both lie in [0, 1]. X-FaKT is their harmonic mean.
    """
    for name, value in (("mu_assoc", mu_assoc), ("mu_non", mu_non)):
        if not 0 <= value <= 1:
            raise MetricInputError(f"`{name}` must be an error rate in [0, 1], got {value}.")
    frs, kts, harmonic = _transfer_scores(np.float64(mu_assoc), np.float64(mu_non))
    return {"frs": float(frs), "kts": float(kts), "xfakt": float(harmonic)}


def _transfer_scores(mu_assoc: np.ndarray, mu_non: np.ndarray) -> np.ndarray:
    """FRS, KTS and their harmonic mean, element-wise."""
    frs = 1.5 * (1 / (1 + mu_assoc + mu_non) - 1 / 3)
    kts = 2 * (1 / (1 + np.abs(mu_assoc - mu_non)) - 1 / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        harmonic = np.where(frs + kts > 0, 2 * frs * kts / (frs + kts), 0.0)
    return np.stack([frs, kts, harmonic])


def _describe(cells: list[float]) -> dict[str, float]:
    """Mean and population std (ddof = 0) of cell errors, in percent, as the paper's table reports
    them.
    """
    return {"mean": 100 * statistics.fmean(cells), "std": 100 * statistics.pstdev(cells)}


def _cell_statistics(
    table: Mapping[str, Mapping[str, float | None]],
    rows: list[str],
    associations: Mapping[str, str],
    round_cells: bool,
    round_statistics: bool = False,
) -> dict[str, Any]:
    diagonal: list[float] = []
    off_diagonal: list[float] = []
    n_empty = 0
    for language in rows:
        for country, error in table[language].items():
            if error is None:
                n_empty += 1
            else:
                (diagonal if associations[language] == country else off_diagonal).append(error)
    if not diagonal or not off_diagonal:
        which = "associated (diagonal)" if not diagonal else "non-associated (off-diagonal)"
        raise MetricInputError(
            f"No {which} cell has questions for languages {rows}: pass rows for at least one associated and one "
            "non-associated (language, country) pair."
        )

    def mean(cells: list[float]) -> float:
        return math.fsum(round(e, 2) if round_cells else e for e in cells) / len(cells)

    mu_assoc, mu_non = mean(diagonal), mean(off_diagonal)
    # upstream eval.py:64, :79-83: mean, std and the t-test all from the rounded cells (X8)
    if round_statistics:
        diagonal, off_diagonal = (
            [round(e, 2) for e in diagonal],
            [round(e, 2) for e in off_diagonal],
        )
    test = _t_test(off_diagonal, diagonal)
    return {
        **xfakt_scores(mu_assoc, mu_non),
        "mu_assoc": mu_assoc,
        "mu_non": mu_non,
        "assoc_error": _describe(diagonal),
        "non_assoc_error": _describe(off_diagonal),
        "t_statistic": test[0],
        "p_value": test[1],
        "n_empty_cells": n_empty,
    }


def _t_test(off_diagonal: list[float], diagonal: list[float]) -> tuple[float | None, float | None]:
    """The paper's two-sided Student t-test (equal variances); None when undefined (too few or
    constant cells).
    """
    if len(diagonal) < 2 or len(off_diagonal) < 2:
        return None, None
    # constant cells: scipy warns about precision and returns NaN or inf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        test = stats.ttest_ind(off_diagonal, diagonal)
    statistic, p_value = float(test.statistic), float(test.pvalue)
    return (statistic, p_value) if math.isfinite(statistic) else (None, None)


def _associations(associations: Mapping[str, str] | None) -> dict[str, str]:
    pairs = dict(ASSOCIATIONS if associations is None else associations)
    if not pairs:
        raise MetricInputError(
            "`associations` is empty: pass language code -> associated country pairs."
        )
    repeated = [c for c, k in Counter(pairs.values()).items() if k > 1]
    if repeated:
        raise MetricInputError(
            f"`associations` maps several languages to {repeated[0]!r}: it must be one-to-one."
        )
    return pairs


@checked(MetricInputError, pure=True)
def xfakt(
    correct: Sequence[bool],
    language: Sequence[str],
    country: Sequence[str | None],
    associations: Mapping[str, str] | None = None,
    round_cells: bool = True,
    tiers: str = "paper",
    round_statistics: bool = False,
) -> dict[str, Any]:
    """FRS, KTS, X-FaKT and the paper's cell statistics from per-question correctness.

    One row per (question language, entity): whether the answer was judged correct, the question's
    language code and the entity's country (None, when unknown, is rejected like any unknown label).
    Cell error e(l, c) = wrong / asked; µ_assoc and µ_non are unweighted means of the associated and
    the other cells, each cell rounded to 2 decimals first as in the official scorer
    (`round_cells=False`: exact). Mean ± std and the t-test use unrounded cells (as in the paper's
    Table 2); `round_statistics=True` computes them from the cells rounded to 2 decimals, as the
    official scorer does (upstream `src/eval.py`; deviation X8). Only the languages and countries
    present are used (`all_languages` says whether all of `associations` were).
    """
    check_lengths(correct=correct, language=language, country=country)
    pairs = _associations(associations)
    check_choice("tiers", tiers, TIERS)
    wrong = ~check_bools("correct", correct)
    languages = check_labels("language", language, pairs)
    countries = check_labels("country", country, set(pairs.values()))
    cells = list(zip(languages, countries, strict=True))
    asked, errors = (
        Counter(cells),
        Counter(cell for cell, is_wrong in zip(cells, wrong, strict=True) if is_wrong),
    )
    rows = [lang for lang in pairs if lang in set(languages)]
    columns = [c for c in pairs.values() if c in set(countries)]
    table = {
        lang: {
            c: errors[(lang, c)] / asked[(lang, c)] if asked[(lang, c)] else None for c in columns
        }
        for lang in rows
    }
    result = _cell_statistics(table, rows, pairs, round_cells, round_statistics)
    tier_results: dict[str, dict[str, Any] | None] = {}
    for tier, codes in TIERS[tiers].items():
        tier_rows = [lang for lang in rows if lang in codes]
        if tier_rows:
            try:
                tier_results[tier] = _cell_statistics(
                    table, tier_rows, pairs, round_cells, round_statistics
                )
            # e.g. a tier whose associated countries are all absent from this subset
            except MetricInputError:
                tier_results[tier] = None
    language_error = {
        lang: sum(errors[(lang, c)] for c in columns) / sum(asked[(lang, c)] for c in columns)
        for lang in rows
    }
    return {
        **result,
        "error_table": table,
        "language_error": language_error,
        "languages": rows,
        "countries": columns,
        "all_languages": len(rows) == len(pairs),
        "round_cells": bool(round_cells),
        "tiers": tier_results,
        "tier_set": tiers,
    }


# ---------------------------------------------------------------- a run's summary (typed inputs
# from the protocol)


@dataclass(frozen=True)
class GradedAnswer:
    """One graded answer: its question language, whether it was judged correct and the verdict, and
    (factual recall) the entity's country and the entity itself (`entity`: the same id in every
    language it is asked in; None when unknown, and the answer is then a unit of its own).
    """

    language: str
    correct: bool
    verdict: str
    country: str | None = None
    entity: str | None = None


def answers_summary(
    answers: Sequence[GradedAnswer],
    *,
    transfer: bool,
    round_cells: bool = True,
    tiers: str = "paper",
    round_statistics: bool = False,
) -> dict[str, Any]:
    """A run's metrics: the error rate (%) overall and per question language, the verdict counts,
    and (with `transfer`, factual recall) FRS, KTS and X-FaKT, or null with the reason when the
    answers lack associated or non-associated cells (e.g. a subset whose questions are all English
    about the United States), or when the languages and countries asked do not pair up: KTS compares
    each language's own country with the others, so it needs at least two languages, each with its
    associated country asked and each country's language asked (the cell statistics are still
    given). `all_languages` says whether all 13 were asked.
    """
    if not answers:
        raise MetricInputError(
            "No graded X-FaKT answers: the run has no records with a verdict yet."
        )
    out: dict[str, Any] = {"n_items": len(answers), "error_rate": error_pct(answers)}
    out["error_by_language"] = {lang: error_pct(group) for lang, group in _by(answers, "language")}
    out["verdicts"] = {verdict: len(group) for verdict, group in _by(answers, "verdict")}
    if transfer:
        try:
            out.update(
                xfakt(
                    correct=[a.correct for a in answers],
                    language=[a.language for a in answers],
                    country=[a.country for a in answers],
                    round_cells=round_cells,
                    tiers=tiers,
                    round_statistics=round_statistics,
                )
            )
        except MetricInputError as error:
            out.update({"frs": None, "kts": None, "xfakt": None, "xfakt_unavailable": str(error)})
        else:
            reason = unpaired_cells(out["languages"], out["countries"])
            if reason:
                out.update({"frs": None, "kts": None, "xfakt": None, "xfakt_unavailable": reason})
    return out


def unpaired_cells(languages: Sequence[str], countries: Sequence[str]) -> str | None:
    """Why the asked languages and countries cannot give a transfer score, or None when they can."""
    if len(languages) < 2:
        return f"it needs questions in at least two languages, and this run has only {', '.join(languages)}"
    owners = {country: language for language, country in ASSOCIATIONS.items()}
    missing = [ASSOCIATIONS[lang] for lang in languages if ASSOCIATIONS[lang] not in countries]
    missing += [owners[country] for country in countries if owners[country] not in languages]
    if missing:
        return (
            "the languages and countries asked do not pair up: nothing was asked about (or in) "
            f"{', '.join(missing)}, so the comparison would be one-sided"
        )
    return None


TRANSFER_METHODS = {
    "frs": "MOVER-Wilson interval of mu_assoc + mu_non (each a Wilson interval at its effective size over entities "
    "asked in every language; their correlation from the entities), mapped through FRS",
    "kts": "MOVER-Wilson interval of mu_assoc - mu_non (each a Wilson interval at its effective size over entities "
    "asked in every language; their correlation from the entities), mapped through KTS",
    "xfakt": "harmonic mean of the FRS and KTS interval ends (covers when both do)",
}


def transfer_estimates(
    answers: Sequence[GradedAnswer], summary: Mapping[str, Any], *, confidence: float = 0.95
) -> dict[str, dict[str, Any]]:
    """FRS, KTS and X-FaKT of a run's `summary` in the results schema, each naming its interval
    `method` (and higher is better for all three); `n` counts entities (with the questions as
    `n_observations`).

    The design: the language x country cells are fixed, and each country's entities are drawn at
    random and asked in every language, so one entity's answers in the 13 languages are repeated
    measures, shared by the associated mean mu_assoc and the other mean mu_non. Each mean gets
    Wilson's interval at its effective size (Korn & Graubard: its binomial variance over its
    variance from the entities' linearised contributions, countries as strata, shrunk for the
    variance's degrees of freedom); where that variance cannot be estimated (one entity per country,
    fewer than 3 entities holding the rarer outcome) the effective size is the entities' (Kish's,
    over countries), as if an entity's answers always agreed. Newcombe's MOVER (Zou & Donner 2008),
    with the two means' correlation from the same contributions (1 for the sum and 0 for the
    difference where it cannot be estimated: the widest), gives intervals of mu_assoc + mu_non and
    mu_assoc - mu_non; FRS falls with the sum and KTS with |mu_assoc - mu_non|, so their intervals
    are those intervals' images (KTS reaches 1 when the difference's interval holds 0), and X-FaKT,
    rising in both, spans the harmonic means of their ends.
    """
    if summary.get("kts") is None:
        return {}
    spread = transfer_spread(answers)
    means = {True: summary["mu_assoc"], False: summary["mu_non"]}
    bounds = {side: spread.interval(side, means[side], confidence) for side in means}
    values = {name: summary[name] for name in TRANSFER_METHODS}
    intervals = _transfer_intervals(means, bounds, spread.correlation(), values, confidence)
    counts = {"n": spread.units} | (
        {"n_observations": len(answers)} if spread.units != len(answers) else {}
    )
    return {
        name: {
            "value": values[name],
            **intervals[name].fields(),
            **counts,
            "method": method,
            # FRS: fewer errors; KTS: errors that depend less on the language asked in
            "higher_is_better": True,
        }
        for name, method in TRANSFER_METHODS.items()
    }


@dataclass(frozen=True)
class TransferSpread:
    """What the entities tell about the two means of cell error rates (`True`: associated, `False`:
    the others): their variances and covariance from the entities' linearised contributions (None
    where a country has one entity), their degrees of freedom, and per mean its answers, its
    entities' Kish size and how many entities hold its rarer outcome.
    """

    variance: Mapping[bool, float] | None
    covariance: float | None
    df: float
    answers: Mapping[bool, int]
    kish: Mapping[bool, float]
    rarer: Mapping[bool, int]
    units: int

    def estimated(self, side: bool) -> bool:
        """Whether the mean's variance is estimated from the entities (else: the conservative
        effective size).
        """
        return (
            self.variance is not None
            and self.rarer[side] >= MIN_OFF_EDGE
            and self.variance[side] > 0
        )

    def interval(self, side: bool, mean: float, confidence: float) -> tuple[float, float]:
        """Wilson's interval of one mean at its effective size."""
        if self.variance is not None and self.estimated(side):
            shrink = (critical(confidence) / critical(confidence, self.df)) ** 2
            effective = min(self.answers[side], mean * (1 - mean) / self.variance[side]) * shrink
        else:
            effective = self.kish[side]
        return wilson(mean * effective, effective, confidence)

    def correlation(self) -> tuple[float, float]:
        """The two means' correlation for MOVER's sum and difference: estimated, or the widest (1
        and 0).
        """
        if (
            self.variance is None
            or self.covariance is None
            or not (self.estimated(True) and self.estimated(False))
        ):
            return 1.0, 0.0
        r = self.covariance / math.sqrt(self.variance[True] * self.variance[False])
        r = min(max(r, -1.0), 1.0)
        return r, r


def transfer_spread(answers: Sequence[GradedAnswer]) -> TransferSpread:
    """The entities' contributions to mu_assoc and mu_non: each answer's deviation from its cell's
    error rate over (cells of its mean x answers of its cell), summed per entity (an answer without
    an entity is its own); entities are drawn within countries (an answer of its own, within its
    cell), so the variance is summed over those strata.
    """
    wrong = np.asarray([not a.correct for a in answers], dtype=float)
    diagonal = np.asarray([ASSOCIATIONS[a.language] == a.country for a in answers])
    cells = _index([(a.language, a.country) for a in answers])
    entities = _index([a.entity or f"#{i}" for i, a in enumerate(answers)])
    strata = _index([str(a.country) if a.entity else f"{a.language}|{a.country}" for a in answers])
    size = np.bincount(cells)
    deviation = wrong - (np.bincount(cells, weights=wrong) / size)[cells]
    sides = {side: diagonal == side for side in (True, False)}
    share = {side: len(set(cells[sides[side]].tolist())) for side in sides}
    parts, weights = {}, {}
    for side, on in sides.items():
        weight = np.where(on, 1.0 / (share[side] * size[cells]), 0.0)
        parts[side] = np.bincount(entities, weights=deviation * weight)
        weights[side] = np.bincount(entities, weights=weight)
    stratum = np.zeros(entities.max() + 1, dtype=int)
    stratum[entities] = strata
    members = np.bincount(stratum)
    df = float(np.sum(members - 1))
    variance = covariance = None
    if members.min() >= 2:
        factor = (members / (members - 1))[stratum]
        variance = {side: float(np.sum(factor * parts[side] ** 2)) for side in sides}
        covariance = float(np.sum(factor * parts[True] * parts[False]))
    return TransferSpread(
        variance,
        covariance,
        df,
        {side: int(on.sum()) for side, on in sides.items()},
        {side: 1.0 / float(np.sum(weights[side] ** 2)) for side in sides},
        {side: _rarer_entities(wrong, entities, on) for side, on in sides.items()},
        int(entities.max()) + 1,
    )


def _index(keys: Sequence[Any]) -> np.ndarray:
    """Each key's index among the distinct keys (first-seen order)."""
    order: dict[Any, int] = {}
    return np.asarray([order.setdefault(key, len(order)) for key in keys], dtype=int)


def _rarer_entities(wrong: np.ndarray, entities: np.ndarray, on: np.ndarray) -> int:
    """How many entities hold the rarer outcome among their answers in one mean's cells (any wrong,
    or any right).
    """
    asked = set(entities[on].tolist())
    any_wrong = set(entities[on & (wrong > 0)].tolist())
    any_right = set(entities[on & (wrong == 0)].tolist())
    return min(len(any_wrong), len(any_right)) if asked else 0


def _transfer_intervals(
    means: Mapping[bool, float],
    bounds: Mapping[bool, tuple[float, float]],
    correlation: tuple[float, float],
    values: Mapping[str, float],
    confidence: float,
) -> dict[str, Interval]:
    """FRS, KTS and X-FaKT intervals from the two means' intervals, combined by MOVER (with the
    means' correlation, for the sum and for the difference) into intervals of their sum and
    difference; standard errors from the same intervals (each mean's half-width over z) by the delta
    method.
    """
    (a, (a_low, a_high)), (b, (b_low, b_high)) = ((means[d], bounds[d]) for d in (True, False))
    r_sum, r_gap = correlation
    total, gap = a + b, a - b
    sums = (
        max(total - _mover(a - a_low, b - b_low, r_sum), 0.0),
        min(total + _mover(a_high - a, b_high - b, r_sum), 2.0),
    )
    gap_low, gap_high = (
        gap - _mover(a - a_low, b_high - b, -r_gap),
        gap + _mover(a_high - a, b - b_low, -r_gap),
    )
    gaps = sorted(abs(x) for x in (max(gap_low, -1.0), min(gap_high, 1.0)))
    if gap_low <= 0 <= gap_high:
        gaps[0] = 0.0
    # FRS depends on the means through their sum and KTS through their gap: score (sum, 0) and (gap,
    # 0)
    frs = [float(_transfer_scores(np.asarray(mu), np.asarray(0.0))[0]) for mu in sums[::-1]]
    kts = [float(_transfer_scores(np.asarray(g), np.asarray(0.0))[1]) for g in gaps[::-1]]
    harmonic = [2 * f * k / (f + k) if f + k > 0 else 0.0 for f, k in zip(frs, kts, strict=True)]
    z = critical(confidence)
    spreads = [(high - low) / (2 * z) for low, high in (bounds[True], bounds[False])]
    errors = _delta_stderrs(a, b, spreads[0] ** 2, spreads[1] ** 2, r_sum * spreads[0] * spreads[1])
    ends = {"frs": frs, "kts": kts, "xfakt": harmonic}
    return {
        name: bounded(values[name], errors[name], low, high, 1.0)
        for name, (low, high) in ends.items()
    }


def _mover(one: float, other: float, correlation: float) -> float:
    """MOVER's half-width of a sum from two estimates' distances to their limits and their
    correlation.
    """
    return math.sqrt(max(one * one + other * other + 2 * correlation * one * other, 0.0))


def _delta_stderrs(
    mu_assoc: float, mu_non: float, var_assoc: float, var_non: float, covariance: float = 0.0
) -> dict[str, float]:
    """Delta-method standard errors of FRS, KTS and X-FaKT from the variances of mu_assoc and mu_non
    and their covariance.
    """
    frs, kts = (float(x) for x in _transfer_scores(np.asarray(mu_assoc), np.asarray(mu_non))[:2])
    d_frs = -1.5 / (1 + mu_assoc + mu_non) ** 2  # the same for either mean
    gap = mu_assoc - mu_non
    d_kts = -2 * float(np.sign(gap)) / (1 + abs(gap)) ** 2  # for mu_assoc; minus this for mu_non
    weights = (2 * kts**2, 2 * frs**2) if frs + kts > 0 else (0.0, 0.0)
    d_h = [
        (weights[0] * d_frs + weights[1] * s * d_kts) / max((frs + kts) ** 2, 1e-300)
        for s in (1, -1)
    ]
    return {
        "frs": abs(d_frs) * math.sqrt(max(var_assoc + var_non + 2 * covariance, 0.0)),
        "kts": abs(d_kts) * math.sqrt(max(var_assoc + var_non - 2 * covariance, 0.0)),
        "xfakt": math.sqrt(
            max(
                d_h[0] ** 2 * var_assoc + d_h[1] ** 2 * var_non + 2 * d_h[0] * d_h[1] * covariance,
                0.0,
            )
        ),
    }


def error_pct(answers: Sequence[GradedAnswer]) -> float:
    """The share (%) of wrong answers."""
    return 100.0 * (1.0 - sum(a.correct for a in answers) / len(answers))


def _by(answers: Sequence[GradedAnswer], key: str) -> list[tuple[str, list[GradedAnswer]]]:
    groups: dict[str, list[GradedAnswer]] = {}
    for answer in answers:
        groups.setdefault(getattr(answer, key), []).append(answer)
    return sorted(groups.items(), key=lambda kv: str(kv[0]))
