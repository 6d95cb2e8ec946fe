"""Interval methods with known coverage, shared by the results schema, `compare` and
`compare_groups` (docs/results.md gives each method's measured coverage, the sampling designs it was
measured under, and its reference).

A proportion gets Wilson's score interval, at the design's effective sample size when units are
clusters of answers (Korn & Graubard). A mean of bounded scores gets a skewness-corrected t interval
(Hall) once it has enough units, and Wilson's interval at its bound (a mean on [0, 1] has variance
at most p(1 - p)) before; a mean over units crossed with random replicates (CAMeL's prompts and
entity samples) a t interval from variance components. A paired difference of proportions gets
Tango's score interval with a continuity correction (on design-adjusted counts for clustered
answers), a paired difference over crossed units a t interval from the variance components of the
differences, any other paired difference a sign-flip permutation test inverted under a shift: each
the inversion of the test whose p-value at a difference of 0 is the one reported, so an interval
excludes 0 exactly when the test rejects.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from culture_probe.record import IntervalFields

#: the per-metric method names that metrics.json (`results.ci.methods`) and the reports print
WILSON = "Wilson score interval"
WILSON_EFFECTIVE = (
    "Wilson score interval at the design's effective sample size (Korn & Graubard 1998; the number of units when "
    "fewer than 3 of them hold the rarer outcome)"
)
#: below these, a t interval of a skewed bounded mean covers too little (docs/results.md);
#: BOUNDED_MEAN says so
MIN_T_UNITS = 30
MIN_OFF_EDGE = 3
BOUNDED_MEAN = (
    f"skewness-corrected t interval from the design-based standard error (Hall 1992; Satterthwaite df) from "
    f"{MIN_T_UNITS} units on, {MIN_OFF_EDGE} or more of them off each end of the range; otherwise Wilson's interval "
    "at the mean's bound (a mean on [0, 1] has variance at most p(1 - p))"
)
CROSSED = (
    "t interval from variance components of units crossed with random replicates (two-way ANOVA within each "
    "stratum, components truncated at 0; df: the smaller factor's, Satterthwaite across strata)"
)
TANGO_CC = (
    "Tango score interval with continuity correction, on counts divided by the design effect of clustered answers "
    "(Rao & Scott 1992); p: its score test at 0 (McNemar's test with continuity correction)"
)
MIETTINEN_NURMINEN = "Miettinen-Nurminen score interval; p: its score test at 0"
SIGN_FLIP = (
    "sign-flip permutation test of the units' paired differences (every sign pattern up to 13 units, else 9,999 "
    "drawn with seed 0) and, as interval, the shifts it does not reject"
)
PAIRED_CROSSED = (
    "paired t interval and t test from variance components of units crossed with random replicates"
)

# successes (or failures) up to which Wilson's limit is replaced by the exact Poisson one
_POISSON_EDGE = 3


@dataclass(frozen=True)
class Interval:
    """`[low, high]` and the standard error behind it, or no interval (`low`/`high` None) and why
    not.
    """

    stderr: float | None
    low: float | None = None
    high: float | None = None
    reason: str | None = None

    def fields(self) -> IntervalFields:
        """The results schema's keys: `stderr`, `ci_low`, `ci_high`, and `no_interval` when there is
        none.
        """
        out: IntervalFields = {"stderr": self.stderr, "ci_low": self.low, "ci_high": self.high}
        if self.reason:
            out["no_interval"] = self.reason
        return out


def no_interval(reason: str) -> Interval:
    """No interval (and no standard error), with the reason a report prints."""
    return Interval(None, reason=reason)


def bounded(
    value: float,
    stderr: float | None,
    low: float,
    high: float,
    scale: float | None,
    confidence: float = 0.95,
) -> Interval:
    """An interval clipped to the metric's range [0, scale] (when it has one) that holds `value`
    exactly, so float noise can never leave a value outside its own interval. A standard error that
    its plug-in formula makes 0 beside an interval of some width (0 of n, two equal means) is the
    interval's width over 2z instead, so that no reader sees "± 0" beside a range.
    """
    if scale is not None:
        low, high = max(low, 0.0), min(high, scale)
    low, high = min(low, value), max(high, value)
    if stderr is not None and stderr <= 1e-12 * max(abs(value), high - low, 1.0) and high > low:
        stderr = (high - low) / (2 * critical(confidence))
    return Interval(stderr, low, high)


@functools.lru_cache(maxsize=4096)
def critical(confidence: float, df: float | None = None) -> float:
    """The two-sided critical value: normal, or Student's t with `df` degrees of freedom (cached:
    scipy's quantile functions cost more than the rest of an estimate).
    """
    quantile = 0.5 + confidence / 2
    return float(stats.norm.ppf(quantile) if df is None else stats.t.ppf(quantile, df))


def wilson(successes: float, n: float, confidence: float) -> tuple[float, float]:
    """Wilson's (1927) score interval for a proportion; `n` may be an effective (non-integer) sample
    size.

    With 1 to 3 successes, if they are rare (at most half of n), the lower limit is the exact
    Poisson one instead (rare failures: the upper), which removes the coverage dips of Wilson's
    interval next to 0 and 1 (Brown, Cai & DasGupta 2001, section 4.1.1). 0 of n gives [0, z^2 / (n
    + z^2)], never a point.
    """
    z = critical(confidence)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(max(p * (1 - p), 0.0) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    low, high = (0.0 if p <= 0 else centre - half), (1.0 if p >= 1 else centre + half)
    edge = (1 - confidence) / 2
    if 0 < successes <= min(_POISSON_EDGE, n / 2):
        low = min(low, float(stats.chi2.ppf(edge, 2 * successes)) / (2 * n))
    if 0 < n - successes <= min(_POISSON_EDGE, n / 2):
        high = max(high, 1 - float(stats.chi2.ppf(edge, 2 * (n - successes))) / (2 * n))
    return max(low, 0.0), min(high, 1.0)


@dataclass(frozen=True)
class VarianceTerms:
    """The variance of a linear statistic as a sum over independent strata: each stratum's variance
    term and its degrees of freedom (units in the stratum minus one), and the statistic's third
    cumulant (its skewness times the cubed standard error; 0: symmetric).
    """

    terms: np.ndarray
    dfs: np.ndarray
    third: float = 0.0

    @property
    def stderr(self) -> float:
        return math.sqrt(float(self.terms.sum()))

    @property
    def skewness(self) -> float:
        return self.third / self.stderr**3

    @property
    def df(self) -> float:
        """Satterthwaite's (1946) degrees of freedom of the summed variance."""
        useful = self.terms > 0
        return float(self.terms.sum() ** 2 / np.sum(self.terms[useful] ** 2 / self.dfs[useful]))


def _hall_inverse(u: float, skewness: float) -> float:
    """The t whose Hall (1992) transformation, t + s t^2 / 3 + s^2 t^3 / 27 + s / 6 in Zhou & Dinh's
    (2005) form, is u (the transformation is increasing, so this is unique): an estimate of skewness
    s is then nearly t-distributed.
    """
    if abs(skewness) < 1e-12:
        return u - skewness / 6
    return 3 / skewness * (float(np.cbrt(1 + skewness * (u - skewness / 6))) - 1)


def t_interval(
    value: float, design: VarianceTerms, confidence: float, scale: float | None = None
) -> Interval:
    """The truths whose transformed t stays within Student's critical value (caller guarantees a
    positive standard error); without skewness, `value` ± t · standard error.
    """
    q, skewness = critical(confidence, design.df), design.skewness
    low, high = (value - design.stderr * _hall_inverse(u, skewness) for u in (q, -q))
    return bounded(value, design.stderr, low, high, scale)


def t_p_value(difference: float, design: VarianceTerms) -> float:
    """Two-sided p-value of a zero difference, from the t that `t_interval` inverts (a design
    without skewness: the paired differences of crossed units).
    """
    return float(2 * stats.t.sf(abs(difference / design.stderr), design.df))


def kish_size(counts: Sequence[int]) -> float:
    """Kish's effective size of an equal-weight mean of group means of `counts` units each: G^2 /
    sum(1 / n_g) (the units themselves when there is one group).
    """
    return len(counts) ** 2 / sum(1 / count for count in counts)


Score = Callable[[float], float]


def score_interval(score: Score, estimate: float, confidence: float) -> tuple[float, float]:
    """The differences in [-1, 1] that a two-sided score test does not reject: `score(d)` is the
    signed statistic for the hypothesis "the difference is d", decreasing in d and 0 at the
    estimate.
    """
    z = critical(confidence)
    edge = 1 - 1e-12

    def at(d: float) -> float:
        return 0.0 if d == estimate else score(d)

    low = (
        -1.0
        if estimate <= -edge or at(-edge) <= z
        else optimize.brentq(lambda d: at(d) - z, -edge, estimate)
    )
    high = (
        1.0
        if estimate >= edge or at(edge) >= -z
        else optimize.brentq(lambda d: at(d) + z, estimate, edge)
    )
    return float(low), float(high)


def score_p_value(score: Score) -> float:
    """Two-sided p-value of the score test at a difference of 0 (1 when the data hold no evidence
    either way).
    """
    z = score(0.0)
    return 1.0 if math.isnan(z) else float(2 * stats.norm.sf(abs(z)))


def _ratio(numerator: float, variance: float) -> float:
    """The numerator over sqrt(variance), signed infinity when the variance vanishes (NaN for 0 /
    0).
    """
    if variance > 0:
        return numerator / math.sqrt(variance)
    return math.nan if numerator == 0 else math.copysign(math.inf, numerator)


def tango_score(gained: float, lost: float, n: float, correction: float = 1.0) -> Score:
    """Tango's (1998) score statistic for a paired difference of proportions, p(a) - p(b) = d:
    `gained` units only run a got right, `lost` units only run b, of `n` (effective, non-integer
    counts allowed). The restricted maximum likelihood of the discordant cells has a closed form.
    The numerator moves `correction` towards 0 (Edwards' continuity correction): at d = 0 the
    statistic is McNemar's (|gained - lost| - 1) / sqrt(gained + lost), whose size stays below 5% at
    every number of discordant pairs, where the uncorrected test rejects a true null up to 8% of the
    time when most pairs are discordant (two models with opposite answer priors).
    """

    def score(d: float) -> float:
        w = -gained - lost + (2 * n - gained + lost) * d
        # P(only b right) under d
        q = (-w + math.sqrt(max(w * w + 8 * n * lost * d * (1 - d), 0.0))) / (4 * n)
        numerator = gained - lost - n * d
        return _ratio(
            math.copysign(max(abs(numerator) - correction, 0.0), numerator), n * (2 * q + d - d * d)
        )

    return score


def miettinen_nurminen_score(x1: int, n1: int, x2: int, n2: int) -> Score:
    """Miettinen and Nurminen's (1985) score statistic for p1 - p2 = d (x1 of n1 against x2 of n2),
    with their N / (N - 1) variance factor; the restricted maximum likelihood is the closed-form
    root of a cubic (Farrington & Manning 1990).
    """
    p1, p2, total = x1 / n1, x2 / n2, n1 + n2

    def score(d: float) -> float:
        theta = n2 / n1
        a, b = 1 + theta, -(1 + theta + p1 + theta * p2 + d * (theta + 2))
        c, e = d * d + d * (2 * p1 + theta + 1) + p1 + theta * p2, -p1 * d * (1 + d)
        v = b**3 / (27 * a**3) - b * c / (6 * a * a) + e / (2 * a)
        u = math.copysign(math.sqrt(max(b * b / (9 * a * a) - c / (3 * a), 0.0)), v)
        w = (math.pi + math.acos(min(max(v / u**3, -1.0), 1.0))) / 3 if u else math.pi / 2
        r1 = min(max(2 * u * math.cos(w) - b / (3 * a), 0.0), 1.0)
        r2 = min(max(r1 - d, 0.0), 1.0)
        variance = (r1 * (1 - r1) / n1 + r2 * (1 - r2) / n2) * total / max(total - 1, 1)
        return _ratio(p1 - p2 - d, variance)

    return score
