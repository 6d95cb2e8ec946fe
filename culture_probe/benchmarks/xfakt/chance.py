"""Reference points for X-FaKT's transfer scores: what FRS, KTS and X-FaKT a model answering at
random scores on a run's own language x country cells, and whether a run's error rates are so near a
model that knows nothing that KTS says nothing about transfer.

KTS rewards equal errors, and a model at chance is equally wrong everywhere, so its KTS is high by
construction: 1 in the population, and below 1 at finite cells only because sampling noise opens a
gap between mu_assoc and mu_non (at one question per cell, random models score anywhere from 0.70 to
1). FRS and KTS are nonlinear in the cell errors, so the reference is not a plug-in number but each
score's distribution under random answers at this run's cells: its mean (what a random model scores
on average) and its central 95% (the range random models fall in).

That distribution is exact where it is small: a cell of n questions has n + 1 possible error rates,
rounded to 2 decimals as the scorer rounds them (or exact fractions k/n), so the sum of a group's
cell errors lives on a lattice of step 1/100 (or 1/L, L the cells' sizes' least common multiple,
when at most 100) and its distribution is the convolution of the cells'; mu_assoc and mu_non, from
disjoint cells, are independent, and their joint distribution is the product. Lattice points below
1e-15 are dropped, which moves no number by more than about 1e-9. Where the lattice is too fine or
too large (exact cells of many sizes; at most 10^6 points) 20,000 random models simulated with a
fixed seed give the same numbers to Monte Carlo precision, in about 0.2 s for a full 13 x 13 run.

The same distribution tests random answering (`RandomAnswers.p_value`), and `transfer_warning` says
when a run cannot be told from it, or from a model that answers every question wrong.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from culture_probe.benchmarks.xfakt.metrics import ASSOCIATIONS, _transfer_scores
from culture_probe.errors import MetricInputError
from culture_probe.metrics.display import format_number, interval_text, p_clause
from culture_probe.record import Chance

SCORES = ("frs", "kts", "xfakt")
SEED = 0
N_RANDOM_MODELS = 20_000
# exact cells: on the lattice 1/L, L their sizes' least common multiple, when at most this
_MAX_DENOMINATOR = 100
_MAX_GRID = 1_000_000  # (mu_assoc, mu_non) lattice points: above, simulate
_TINY = 1e-15  # probability below which a lattice point is dropped

Cell = tuple[str, str]


def chance_method(round_cells: bool, *, exact: bool, level: float = 0.95) -> str:
    """How `random_answers` computed its distribution, as `results.chance` records it."""
    how = (
        "exact distribution"
        if exact
        else f"distribution over {N_RANDOM_MODELS} random models simulated with seed {SEED}"
    )
    cells = (
        "each cell's error rounded to 2 decimals as the score's are"
        if round_cells
        else "exact cell errors"
    )
    return (
        f"{how} of the score when every question is answered at random (wrong with probability 1 - 1/k for its k "
        f"ranked answers) on this run's own language x country cells and question counts ({cells}): its mean "
        f"(value) and the central {100 * level:g}% of random models (low, high)"
    )


@dataclass(frozen=True)
class RandomAnswers:
    """The distribution of (mu_assoc, mu_non) when every question of a run's cells is answered at
    random: the points it reaches and their probabilities (the exact lattice), or `N_RANDOM_MODELS`
    simulated random models (equal weights). `random_answers` makes it.
    """

    mu_assoc: np.ndarray
    mu_non: np.ndarray
    weights: np.ndarray
    exact: bool
    round_cells: bool

    def reference(self, level: float = 0.95) -> dict[str, Chance]:
        """FRS, KTS and X-FaKT of random answers: `{score: {value, low, high, method}}`, `value` the
        expected score and `[low, high]` the central `level` of random models' scores.
        """
        scores = _transfer_scores(self.mu_assoc, self.mu_non)
        method = chance_method(self.round_cells, exact=self.exact, level=level)
        out: dict[str, Chance] = {}
        for name, values in zip(SCORES, scores, strict=True):
            low, high = _central(values, self.weights, level)
            out[name] = {
                "value": float(np.dot(values, self.weights)),
                "low": low,
                "high": high,
                "method": method,
            }
        return out

    def p_value(self, mu_assoc: float, mu_non: float) -> float:
        """The test of random answering: the probability that random answers land at least as far
        from their mean (mu_assoc, mu_non) as this run, in squared standard deviations of each mean
        summed (independent cells). Exact on the lattice; from the simulated models, (1 + as far) /
        (1 + models).
        """
        far = (
            self._distance(self.mu_assoc, self.mu_non)
            >= self._distance(mu_assoc, mu_non) * (1 - 1e-9) - 1e-12
        )
        if self.exact:
            return float(min(self.weights[far].sum(), 1.0))
        return float((1 + far.sum()) / (1 + far.size))

    def _distance(self, mu_assoc: Any, mu_non: Any) -> np.ndarray:
        """Squared standardised distances of (mu_assoc, mu_non) from random answers' mean,
        summed.
        """
        total = np.zeros(np.shape(mu_assoc))
        for values, mu in ((self.mu_assoc, mu_assoc), (self.mu_non, mu_non)):
            mean = float(np.dot(values, self.weights))
            variance = float(np.dot((values - mean) ** 2, self.weights))
            gap = np.asarray(mu, dtype=float) - mean
            total = total + (
                gap**2 / variance if variance > 0 else np.where(np.abs(gap) > 1e-12, np.inf, 0.0)
            )
        return total


def random_answers(
    cells: Mapping[Cell, Sequence[float]],
    *,
    round_cells: bool = True,
    associations: Mapping[str, str] | None = None,
) -> RandomAnswers:
    """The distribution of (mu_assoc, mu_non) under random answers on these cells (`RandomAnswers`).

    `cells` maps each (question language, entity country) cell to its questions' chance errors (1 -
    1/k for a question whose answer is one of k ranked at random). The cells are those the score
    averages: associated when `associations` (default: the benchmark's) pairs the language with the
    country, the others non-associated; `round_cells` rounds each cell's error to 2 decimals first,
    as the scorer does.
    """
    pairs = ASSOCIATIONS if associations is None else associations
    groups: dict[bool, list[Sequence[float]]] = {True: [], False: []}
    for (language, country), errors in sorted(cells.items()):
        if not errors or any(not 0 <= q <= 1 for q in errors):
            raise MetricInputError(
                f"Cell {language}/{country} needs at least one question, each with a chance error in [0, 1]; got "
                f"{list(errors)}."
            )
        groups[pairs.get(language) == country].append(errors)
    if not groups[True] or not groups[False]:
        raise MetricInputError(
            "A chance level of FRS and KTS needs associated and non-associated cells; got "
            f"{len(groups[True])} and {len(groups[False])}."
        )
    denominator = 100 if round_cells else math.lcm(*(len(e) for e in groups[True] + groups[False]))
    lattice = (
        _lattice(groups, denominator, round_cells) if denominator <= _MAX_DENOMINATOR else None
    )
    if lattice is not None:
        return RandomAnswers(*lattice, exact=True, round_cells=round_cells)
    means = _simulate(groups, round_cells)
    weights = np.full(N_RANDOM_MODELS, 1 / N_RANDOM_MODELS)
    return RandomAnswers(means[True], means[False], weights, exact=False, round_cells=round_cells)


def _wrong_counts(errors: Sequence[float]) -> np.ndarray:
    """P(k of the cell's questions wrong), k = 0..n: a binomial per distinct chance error,
    convolved.
    """
    pmf = np.ones(1)
    for q, m in sorted(Counter(errors).items()):
        pmf = np.convolve(pmf, stats.binom.pmf(np.arange(m + 1), m, q))
    return pmf


def _cell_values(n: int, round_cells: bool) -> list[float]:
    """The error rate of a cell of n questions with k wrong, k = 0..n, as the scorer computes it."""
    return [round(k / n, 2) if round_cells else k / n for k in range(n + 1)]


def _lattice(
    groups: Mapping[bool, list[Sequence[float]]], denominator: int, round_cells: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Every point (mu_assoc, mu_non) of the lattice that random answers reach, flattened, and its
    probability; None when there are too many.
    """
    sums = {
        diagonal: _sum_distribution(cells, denominator, round_cells)
        for diagonal, cells in groups.items()
    }
    # only the points chance reaches: one question per cell, rounded, reaches every 100th point of
    # 1/100
    (offset_a, pmf_a), (offset_n, pmf_n) = sums[True], sums[False]
    reached_a, reached_n = np.flatnonzero(pmf_a), np.flatnonzero(pmf_n)
    if reached_a.size * reached_n.size > _MAX_GRID:
        return None
    mu_a = (offset_a + reached_a) / (denominator * len(groups[True]))
    mu_n = (offset_n + reached_n) / (denominator * len(groups[False]))
    grid_a, grid_n = np.meshgrid(mu_a, mu_n, indexing="ij")
    weights = np.outer(pmf_a[reached_a], pmf_n[reached_n]).ravel()
    return grid_a.ravel(), grid_n.ravel(), weights / weights.sum()


def _sum_distribution(
    cells: Sequence[Sequence[float]], denominator: int, round_cells: bool
) -> tuple[int, np.ndarray]:
    """The distribution of the sum of the cells' error rates in units of 1/denominator: (first
    value, pmf).
    """
    offset, pmf = 0, np.ones(1)
    made: dict[tuple[int, tuple[float, ...]], np.ndarray] = {}
    for errors in cells:
        key = (len(errors), tuple(sorted(errors)))
        if key not in made:
            steps = [round(v * denominator) for v in _cell_values(len(errors), round_cells)]
            made[key] = np.bincount(steps, weights=_wrong_counts(errors), minlength=denominator + 1)
        pmf = np.convolve(pmf, made[key])
        kept = np.flatnonzero(pmf > _TINY)
        offset, pmf = offset + int(kept[0]), pmf[kept[0] : kept[-1] + 1]
    return offset, pmf


def _simulate(
    groups: Mapping[bool, list[Sequence[float]]], round_cells: bool
) -> dict[bool, np.ndarray]:
    """{associated?: the mean of those cells' errors} of `N_RANDOM_MODELS` models answering at
    random (seeded).
    """
    rng = np.random.default_rng(SEED)
    means = {}
    for diagonal, cells in groups.items():
        total = np.zeros(N_RANDOM_MODELS)
        for errors in cells:
            cdf = np.cumsum(_wrong_counts(errors))
            wrong = np.minimum(
                np.searchsorted(cdf, rng.random(N_RANDOM_MODELS), side="right"), len(errors)
            )
            total += np.asarray(_cell_values(len(errors), round_cells))[wrong]
        means[diagonal] = total / len(cells)
    return means


def _central(values: np.ndarray, weights: np.ndarray, level: float) -> tuple[float, float]:
    """The central `level` of a discrete distribution: its (1 - level)/2 and (1 + level)/2
    quantiles, each the smallest value whose cumulative probability reaches it.
    """
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    cumulative /= cumulative[-1]
    ends = np.searchsorted(cumulative, [(1 - level) / 2, (1 + level) / 2], side="left")
    low, high = values[order][np.minimum(ends, values.size - 1)]
    return float(low), float(high)


# ---------------------------------------------------------------- the warning


def transfer_warning(
    overall: Mapping[str, Mapping[str, Any]],
    chance: Mapping[str, Mapping[str, Any]] | None = None,
    p_random: float | None = None,
    *,
    confidence: float = 0.95,
) -> str | None:
    """One sentence when this run's error rates cannot be told from a model that knows nothing, so
    that KTS says nothing about transfer; None otherwise.

    Two models know nothing, and both are equally wrong in every language. One answers at random
    (ranked answers): `p_random` is this run's test of random answering (`RandomAnswers.p_value`)
    and `chance` what random answers score; the run cannot be told from it when p >= 1 -
    `confidence`. The other answers every question wrong (mu_assoc = mu_non = 1: FRS 0, KTS 1), a
    point with no sampling spread: the run cannot be told from it when FRS's interval reaches 0 and
    KTS's reaches 1 (without intervals: FRS is 0).
    """
    frs, kts = overall.get("frs") or {}, overall.get("kts") or {}
    if frs.get("value") is None or kts.get("value") is None:
        return None
    if p_random is not None and p_random >= 1 - confidence and chance and "kts" in chance:
        random = chance["kts"]
        return (
            "KTS says nothing about transfer here: the error rates cannot be told from random answers (test of "
            f"random answering on these cells, {p_clause(p_random)}), and random answers, equally wrong in every "
            f"language, score KTS {_number(random['value'])} on these cells ({100 * confidence:g}% of random models "
            f"between {_number(random['low'])} and {_number(random['high'])})."
        )
    tolerance = 1e-9
    if _has_interval(frs, kts):
        if frs["ci_low"] <= tolerance and kts["ci_high"] >= 1 - tolerance:
            return (
                "KTS says nothing about transfer here: the error rates cannot be told from a model that answers "
                f"every question wrong (FRS's {100 * confidence:g}% interval {_span(frs)} reaches 0 and KTS's "
                f"{_span(kts)} reaches 1), whose KTS is 1 by being equally wrong in every language."
            )
    elif frs["value"] <= tolerance:
        return (
            "KTS says nothing about transfer here: FRS is 0, every answer is wrong, and so KTS is 1 by being equally "
            "wrong in every language."
        )
    return None


def _has_interval(*estimates: Mapping[str, Any]) -> bool:
    return all(e.get("ci_low") is not None and e.get("ci_high") is not None for e in estimates)


def _number(value: float) -> str:
    return format_number(value, "0-1")  # the one rounding rule of 0-1 scores


def _span(estimate: Mapping[str, Any]) -> str:
    return interval_text(estimate, "0-1")  # its ends never rounded onto 0 or 1 when they are not
