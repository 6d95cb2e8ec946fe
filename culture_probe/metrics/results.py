"""One results schema for every benchmark: each headline number as `{value, stderr, ci_low, ci_high,
n}`, overall and per stratum (`by_language`, `by_culture`, ...), with each number's interval method
named.

A headline number is a mean over what a benchmark's rows hold (a DLAMA fact in one language, an
FmLAMA dish, a CAMeL prompt, an X-FaKT question, a MAPS proverb): a `UnitTable` holds each row's
value per replicate (FmLAMA's templates, CAMeL's entity samples, MAPS' demonstration sets) and the
statistic is the paper's: the mean over replicates of the mean over rows, macro-averaged over the
groups of one stratum where the paper does so (CAMeL's entity types).

The table also carries the benchmark's sampling design, which its intervals and paired tests follow:
the unit drawn at random (`clusters`: DLAMA's rows are facts asked in several languages, repeated
measures on one fact; by default each row is a unit), replicates that are repeated measures on a
unit (templates, demonstration sets) or a random factor crossed with the units (`crossed`: CAMeL's
entity samples fill every prompt of a type), and macro groups as strata. Intervals are chosen for
their coverage under that design at any n (docs/results.md); where no interval can be honest (one
unit, no spread to estimate) the estimate says why (`no_interval`). Paired differences of two runs
on the same units come from one procedure that gives both interval and p-value.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

import numpy as np

from culture_probe.errors import MetricInputError
from culture_probe.metrics._checks import check_lengths
from culture_probe.metrics._intervals import (
    BOUNDED_MEAN,
    CROSSED,
    MIN_OFF_EDGE,
    MIN_T_UNITS,
    PAIRED_CROSSED,
    SIGN_FLIP,
    TANGO_CC,
    WILSON,
    WILSON_EFFECTIVE,
    Interval,
    VarianceTerms,
    bounded,
    critical,
    kish_size,
    no_interval,
    score_interval,
    score_p_value,
    t_interval,
    t_p_value,
    tango_score,
    wilson,
)
from culture_probe.metrics._resample import sign_flip_test
from culture_probe.record import Estimate, Results, Strata, with_strata

SCHEMA_VERSION = 1
CONFIDENCE = 0.95
#: sign patterns drawn for a paired sign-flip test of more than 13 units (p-values resolve to 1 /
#: 10,000)
SIGN_FLIPS = 9_999


@dataclass(frozen=True)
class UnitTable:
    """One headline metric's values per row: `values[i, r]` is row `ids[i]`'s value in replicate r
    (NaN where it has none), `strata` gives each row's label per stratum, and `macro` names the
    stratum whose groups are averaged with equal weight (None: rows are pooled).

    The sampling design: `clusters[i]` is the unit row i belongs to, the thing drawn at random
    (DLAMA's fact, by its release id, asked in several languages: its rows are repeated measures on
    one unit); None: each row is its own unit. Replicates are repeated measures on a unit, unless
    `crossed` names them as a random factor crossed with the units within each macro group (CAMeL's
    "entity samples": every prompt of a type is filled from the same draw), whose spread then joins
    the interval. A unit lies in one macro group.

    `scale` is the metric's range [0, scale] (100 for a percentage; None: unbounded), which
    intervals never leave; `binary` declares every value an outcome, 0 or `scale`, so the metric is
    a proportion (see `with_scale`). `higher_is_better` is the metric's direction, declared where
    the benchmark names it: True (P@1, accuracy), False (an error rate), None for a metric with no
    better direction (a bias score whose midpoint means no bias, a gap whose 0 is neutral); the
    results block gives it per metric.
    """

    metric: str
    ids: tuple[str, ...]
    values: np.ndarray = field(repr=False)
    strata: Mapping[str, Sequence[str]] = field(default_factory=dict)
    macro: str | None = None
    scale: float | None = None
    binary: bool = False
    higher_is_better: bool | None = None
    clusters: tuple[str, ...] | None = None
    crossed: str | None = None

    def __post_init__(self) -> None:
        values = np.asarray(self.values, dtype=float)
        values = values.reshape(len(values), -1) if values.ndim < 2 else values
        object.__setattr__(self, "values", values)
        clusters = {} if self.clusters is None else {"clusters": self.clusters}
        check_lengths(
            ids=self.ids,
            values=values,
            **clusters,
            **{f"strata[{k!r}]": v for k, v in self.strata.items()},
        )
        if len(set(self.ids)) != len(self.ids):
            raise MetricInputError(
                f"UnitTable {self.metric!r} lists a row twice: ids must be unique."
            )
        if self.macro is not None and self.macro not in self.strata:
            raise MetricInputError(
                f"UnitTable {self.metric!r} averages over {self.macro!r}, which is not a stratum."
            )
        if self.crossed and self.clusters is not None:
            raise MetricInputError(
                f"UnitTable {self.metric!r}: crossed replicates of clustered rows are not supported."
            )
        self._check_clusters()
        self._check_scale(values[np.isfinite(values)])

    def _check_clusters(self) -> None:
        if self.clusters is None or self.macro is None:
            return
        seen: dict[str, str] = {}
        for cluster, label in zip(self.clusters, self.strata[self.macro], strict=True):
            if seen.setdefault(cluster, str(label)) != str(label):
                raise MetricInputError(
                    f"UnitTable {self.metric!r}: unit {cluster!r} lies in two {self.macro} groups; a unit must lie in "
                    "one macro group, whose units are drawn independently of the others'."
                )

    def _check_scale(self, finite: np.ndarray) -> None:
        if self.scale is None:
            if self.binary:
                raise MetricInputError(
                    f"UnitTable {self.metric!r} is binary: give the value of a success as `scale`."
                )
            return
        if self.binary and not np.isin(finite, (0.0, self.scale)).all():
            raise MetricInputError(
                f"UnitTable {self.metric!r} is declared binary, but has values other than 0 and {self.scale:g}."
            )
        if finite.size and not (finite.min() >= 0 and finite.max() <= self.scale):
            raise MetricInputError(
                f"UnitTable {self.metric!r} has values outside its range [0, {self.scale:g}] "
                f"({finite.min():g} to {finite.max():g})."
            )

    def with_scale(self, scale: float, *, binary: bool = False) -> UnitTable:
        """The same table on the range [0, `scale`]; `binary`: every value is 0 or `scale` (a hit, a
        right answer), so the metric is a proportion and gets a score interval, which has width even
        at 0 of n and n of n.
        """
        return replace(self, scale=float(scale), binary=binary)

    def select(self, mask: np.ndarray) -> UnitTable:
        """The rows where `mask` is true."""
        return replace(
            self,
            ids=tuple(np.asarray(self.ids)[mask]),
            values=self.values[mask],
            strata={k: list(np.asarray(v)[mask]) for k, v in self.strata.items()},
            clusters=None if self.clusters is None else tuple(np.asarray(self.clusters)[mask]),
        )

    def groups(self) -> list[np.ndarray]:
        """Row indices of each macro group (one group of all rows when not macro-averaged)."""
        if self.macro is None:
            return [np.arange(len(self.ids))]
        labels = np.asarray([str(x) for x in self.strata[self.macro]])
        return [np.flatnonzero(labels == label) for label in sorted(set(labels.tolist()))]

    def group_labels(self) -> list[str]:
        """The macro groups' labels, in the order of `groups()`."""
        return (
            sorted({str(x) for x in self.strata[self.macro]}) if self.macro is not None else ["all"]
        )

    def units_of(self, rows: np.ndarray) -> np.ndarray:
        """Each of `rows`' unit, as an index into the distinct units of those rows (first-seen
        order).
        """
        if self.clusters is None:
            return np.arange(rows.size)
        _, first, inverse = np.unique(
            np.asarray(self.clusters)[rows], return_index=True, return_inverse=True
        )
        order = np.argsort(np.argsort(first))  # renumber units by first appearance
        return order[inverse]

    @property
    def method(self) -> str:
        """The name of this table's interval method (as `results.ci.methods` gives it)."""
        if self.binary:
            return WILSON if self.simple else WILSON_EFFECTIVE
        return CROSSED if self.crossed else BOUNDED_MEAN

    @property
    def paired_method(self) -> str:
        """The name of the procedure that gives a paired difference of two runs' tables its interval
        and p-value.
        """
        if self.binary and self.macro is None:
            return TANGO_CC
        return PAIRED_CROSSED if self.crossed else SIGN_FLIP

    @property
    def simple(self) -> bool:
        """One value per unit, pooled: a binary table is then a plain binomial sample."""
        unique = self.clusters is None or len(set(self.clusters)) == len(self.clusters)
        return self.values.shape[1] == 1 and self.macro is None and unique


@dataclass(frozen=True)
class UnitValue:
    """One row's value of a metric in one replicate, with the row's strata labels and (when rows are
    repeated measures on a unit drawn at random, such as one fact asked in several languages) its
    unit's id.
    """

    unit: str
    value: float
    strata: Mapping[str, Any] = field(default_factory=dict)
    replicate: str = ""
    cluster: str | None = None


def unit_table(
    metric: str,
    rows: Sequence[UnitValue],
    *,
    macro: str | None = None,
    higher_is_better: bool | None = None,
    crossed: str | None = None,
) -> UnitTable:
    """A `UnitTable` from one value per (row, replicate): rows and replicates in first-seen order,
    NaN where a row has no value in a replicate. A row's strata and unit (`cluster`) are those of
    its first value; a repeated (row, replicate) is an error. `higher_is_better`: the metric's
    direction; `crossed`: what the replicates are when they are a random factor crossed with the
    rows (`UnitTable`).
    """
    units: dict[str, UnitValue] = {}
    replicates: dict[str, int] = {}
    for row in rows:
        units.setdefault(row.unit, row)
        replicates.setdefault(row.replicate, len(replicates))
    index = {unit: i for i, unit in enumerate(units)}
    values = np.full((len(units), max(len(replicates), 1)), np.nan)
    for row in rows:
        cell = index[row.unit], replicates[row.replicate]
        if not np.isnan(values[cell]):
            raise MetricInputError(
                f"{metric}: unit {row.unit!r} has two values in replicate {row.replicate!r}."
            )
        values[cell] = row.value
    names = list(next(iter(units.values())).strata) if units else []
    strata = {name: [str(u.strata.get(name)) for u in units.values()] for name in names}
    clustered = any(u.cluster is not None for u in units.values())
    clusters = tuple(u.cluster or key for key, u in units.items()) if clustered else None
    return UnitTable(
        metric,
        tuple(units),
        values,
        strata,
        macro,
        None,
        False,
        higher_is_better,
        clusters,
        crossed,
    )


def table_statistic(values: np.ndarray, groups: Sequence[np.ndarray]) -> np.ndarray:
    """The paper's statistic for row indices (one (batch, size) array per group): per group the mean
    over replicates of the mean over rows, then the mean over groups. Returns (batch,).
    """
    means = []
    for index in groups:
        cells = values[index]  # (batch, size, replicates)
        # a replicate no row of a group has: NaN, left out of the mean
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            means.append(np.nanmean(np.nanmean(cells, axis=-2), axis=-1))
    statistic: np.ndarray = np.mean(means, axis=0)
    return statistic


def contributions(values: np.ndarray) -> np.ndarray:
    """Each row's linearised contribution to one group's statistic (the mean over replicates of the
    mean over the rows that have a value): summed over rows it is 0, and the statistic's variance
    over samples of rows is estimated by sum(u^2) / (n (n - 1)), the usual estimate for a mean of
    ratios (each replicate's mean divides by the rows it has). With one value per row, u is the
    row's deviation from the mean.
    """
    finite = np.isfinite(values)
    counts = finite.sum(axis=0)
    used = counts > 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        means = np.nanmean(values[:, used], axis=0)
    deviations = np.where(finite[:, used], values[:, used] - means, 0.0) * (
        len(values) / counts[used]
    )
    contribution: np.ndarray = deviations.mean(axis=1)
    return contribution


def unit_contributions(table: UnitTable, values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Each unit's linearised contribution to one group's statistic (`values` over the group's
    `rows`): its rows' contributions summed and scaled by units / rows, so that the unit sum of
    squares estimates the variance over samples of units as `contributions` does over rows (one
    value per unit: the same numbers).
    """
    parts = contributions(values[rows])
    units = table.units_of(rows)
    count = int(units.max()) + 1
    return np.bincount(units, weights=parts, minlength=count) * (count / rows.size)


def design(parts: Sequence[np.ndarray]) -> VarianceTerms:
    """The design of a mean over groups with equal weight: each group's contributions
    (`contributions`, or the difference of two runs' contributions) give one variance term with n -
    1 degrees of freedom, and add to the third cumulant (the sample's third moment over n^2 for each
    group mean).
    """
    weight = 1 / len(parts)
    terms = [weight**2 * float(np.sum(u**2)) / (u.size * (u.size - 1)) for u in parts]
    third = sum(weight**3 * float(np.sum(u**3)) / u.size**3 for u in parts)
    return VarianceTerms(
        np.asarray(terms), np.asarray([u.size - 1 for u in parts], dtype=float), third
    )


def crossed_design(
    table: UnitTable, values: np.ndarray, groups: Sequence[np.ndarray]
) -> VarianceTerms:
    """The design of a mean over groups with equal weight whose units are crossed with random
    replicates (`crossed`): per group, the two-way ANOVA of its units x replicates block gives the
    variance components of units (a), of replicates (b) and of their interaction (e), each truncated
    at 0, and the group mean's variance a / units + b / replicates + e / (units x replicates), with
    the smaller factor's degrees of freedom (the components come from mean squares of units - 1 and
    replicates - 1 degrees of freedom; Satterthwaite's across groups then errs on the safe side,
    which the coverage simulations require when a group has 2 units or 2 replicates). The block is
    the group's complete rows and replicates (an interrupted run's partial replicate is left out).
    """
    weight = 1 / len(groups)
    terms, dfs = [], []
    for rows in groups:
        block = _complete_block(values[rows])
        units, replicates = block.shape
        grand, unit_means, replicate_means = block.mean(), block.mean(axis=1), block.mean(axis=0)
        unit_square = replicates * float(np.sum((unit_means - grand) ** 2)) / (units - 1)
        replicate_square = units * float(np.sum((replicate_means - grand) ** 2)) / (replicates - 1)
        residual = block - unit_means[:, None] - replicate_means[None, :] + grand
        error = float(np.sum(residual**2)) / ((units - 1) * (replicates - 1))
        between_units = max(unit_square - error, 0.0) / replicates
        between_replicates = max(replicate_square - error, 0.0) / units
        variance = (
            between_units / units + between_replicates / replicates + error / (units * replicates)
        )
        terms.append(weight**2 * variance)
        dfs.append(float(min(units, replicates) - 1))
    return VarianceTerms(np.asarray(terms), np.asarray(dfs))


def _complete_block(values: np.ndarray) -> np.ndarray:
    """The replicates every row has (or, when fewer than two, the rows that have every
    replicate).
    """
    finite = np.isfinite(values)
    columns = finite.all(axis=0)
    block: np.ndarray
    if columns.sum() >= 2:
        block = values[:, columns]
        return block
    block = values[finite.all(axis=1)]
    return block


def _no_spread(stderr: float, value: float, scale: float | None) -> bool:
    """A standard error that is zero up to float noise on the metric's scale."""
    return stderr <= 1e-12 * max(abs(value), scale or 0.0, 1.0)


def _groups_with_units(table: UnitTable) -> tuple[list[np.ndarray], list[str]]:
    """Each macro group's rows that have a value, and the group labels (groups without any value
    left out).
    """
    out = zip(table.groups(), table.group_labels(), strict=True)
    kept = [(g[np.isfinite(table.values[g]).any(axis=1)], label) for g, label in out]
    kept = [(g, label) for g, label in kept if g.size]
    return [g for g, _ in kept], [label for _, label in kept]


def _unit_counts(table: UnitTable, groups: Sequence[np.ndarray]) -> list[int]:
    """The number of units in each group."""
    return [int(table.units_of(g).max()) + 1 for g in groups]


def _too_few(table: UnitTable, groups: Sequence[np.ndarray], labels: Sequence[str]) -> str | None:
    """Why the units leave no spread to estimate: one unit, a macro group of one unit, or one
    crossed replicate.
    """
    counts = _unit_counts(table, groups)
    if sum(counts) < 2:
        rows = sum(g.size for g in groups)
        return (
            "one unit"
            if rows < 2
            else f"one unit: its {rows} answers are repeated measures on it, not a sample"
        )
    lone = [label for count, label in zip(counts, labels, strict=True) if count < 2]
    if len(lone) == len(labels):
        return f"the statistic cannot vary under resampling (one unit per {table.macro})"
    if lone:
        more = " ..." if len(lone) > 3 else ""
        return f"one unit in {table.macro} {', '.join(lone[:3])}{more}: its spread is unknown"
    if table.crossed and min(_complete_block(table.values[g]).shape[1] for g in groups) < 2:
        return f"one {table.crossed.rstrip('s')} per group: the spread between {table.crossed} is unknown"
    if table.crossed and min(_complete_block(table.values[g]).shape[0] for g in groups) < 2:
        return (
            f"fewer than 2 units of a group have a value under every one of its {table.crossed} (an interrupted "
            "run): the crossed spread cannot be estimated"
        )
    return None


def point_value(table: UnitTable) -> float | None:
    """The paper's statistic of `table` over the rows that have a value (None without any)."""
    groups, _ = _groups_with_units(table)
    return float(table_statistic(table.values, [g[None, :] for g in groups])[0]) if groups else None


def estimate(table: UnitTable, confidence: float = CONFIDENCE) -> Estimate:
    """`{value, stderr, ci_low, ci_high, n}` of one table (and `no_interval`, the reason, when it
    has none); `n` counts units, and a table whose units hold several rows adds `n_observations`,
    the answers they hold (DLAMA: n facts, m fact-language answers).
    """
    groups, labels = _groups_with_units(table)
    n = sum(_unit_counts(table, groups)) if groups else 0
    value = point_value(table)
    answers = int(np.isfinite(table.values).sum())
    if value is None:
        out: Estimate = {"value": None, "stderr": None, "ci_low": None, "ci_high": None, "n": 0}
    else:
        reason = _too_few(table, groups, labels)
        if reason:
            interval = no_interval(reason)
        elif table.binary:
            interval = _proportion_interval(table, groups, value, confidence)
        elif table.crossed:
            interval = _crossed_interval(table, groups, value, confidence)
        else:
            interval = _mean_interval(table, groups, value, confidence)
        out = {"value": value, **interval.fields(), "n": n}
    if table.clusters is not None and answers != n:
        out["n_observations"] = answers
    return out


def _mean_interval(
    table: UnitTable, groups: Sequence[np.ndarray], value: float, confidence: float
) -> Interval:
    """Hall's skewness-corrected t interval from `MIN_T_UNITS` units on in every group, with
    `MIN_OFF_EDGE` or more of them off each end of the range; else, for a bounded metric, Wilson's
    interval at the bound (`_bounded_interval`), which the coverage simulations show honest where t
    is not: a skewed or bimodal mean of few units, or a rare mode (most dishes' AP 0) that a sample
    can miss entirely.
    """
    spread = design([unit_contributions(table, table.values, g) for g in groups])
    n = sum(_unit_counts(table, groups))
    if _t_holds(table, groups) and not _no_spread(spread.stderr, value, table.scale):
        return t_interval(value, spread, confidence, table.scale)
    if table.scale is None:
        if _no_spread(spread.stderr, value, None):
            return no_interval(
                "the statistic cannot vary under resampling (every unit has the same value)"
            )
        return no_interval(
            f"{n} units of an unbounded score: a t interval of a skewed mean is not honest below {MIN_T_UNITS} units "
            "(in every group)"
        )
    return _bounded_interval(table, groups, value, confidence)


def _t_holds(table: UnitTable, groups: Sequence[np.ndarray]) -> bool:
    """Whether every group has the units a t interval of a skewed mean needs: `MIN_T_UNITS`, with
    `MIN_OFF_EDGE` of them off each end of the range (a macro group of few units, or all at an edge,
    would contribute no spread).
    """
    for rows in groups:
        units = _unit_means(table, [rows])
        edges = (
            min(int(np.sum(units > 0)), int(np.sum(units < table.scale)))
            if table.scale is not None
            else units.size
        )
        if units.size < MIN_T_UNITS or edges < MIN_OFF_EDGE:
            return False
    return True


def _rarer(table: UnitTable, groups: Sequence[np.ndarray], scale: float) -> int:
    """The fewest units, over the groups, that hold a group's rarer outcome (any success, or any
    failure).
    """
    counts = []
    for rows in groups:
        units = _unit_means(table, [rows])
        counts.append(min(int(np.sum(units > 0)), int(np.sum(units < scale))))
    return min(counts)


def _unit_means(table: UnitTable, groups: Sequence[np.ndarray]) -> np.ndarray:
    """Each unit's mean value over its rows and replicates."""
    means = []
    for rows in groups:
        units = np.repeat(table.units_of(rows), table.values.shape[1])
        cells = table.values[rows].ravel()
        finite = np.isfinite(cells)
        sums = np.bincount(units[finite], weights=cells[finite], minlength=int(units.max()) + 1)
        means.append(sums / np.bincount(units[finite], minlength=int(units.max()) + 1))
    return np.concatenate(means)


def _bounded_interval(
    table: UnitTable, groups: Sequence[np.ndarray], value: float, confidence: float
) -> Interval:
    """Wilson's interval for a mean on [0, scale] at the units' effective size (Kish's G^2 / sum(1 /
    n_g) over macro groups of n_g units; the units when pooled): a unit's value on [0, 1] has
    variance at most p(1 - p), so the interval of a proportion bounds it, whatever the scores'
    shape.
    """
    scale = float(table.scale or 1.0)
    effective = kish_size(_unit_counts(table, groups))
    p = min(max(value / scale, 0.0), 1.0)
    low, high = wilson(p * effective, effective, confidence)
    # the standard error the bound assumes (a unit's variance at most p(1 - p)), consistent with the
    # interval
    return bounded(
        value,
        scale * math.sqrt(p * (1 - p) / effective),
        scale * low,
        scale * high,
        scale,
        confidence,
    )


def _crossed_interval(
    table: UnitTable, groups: Sequence[np.ndarray], value: float, confidence: float
) -> Interval:
    spread = crossed_design(table, table.values, groups)
    if _no_spread(spread.stderr, value, table.scale):
        return no_interval(
            "the statistic cannot vary under resampling (every unit has the same value)"
        )
    return t_interval(value, spread, confidence, table.scale)


def _proportion_interval(
    table: UnitTable, groups: Sequence[np.ndarray], value: float, confidence: float
) -> Interval:
    """Wilson's interval for one value per pooled unit (a plain binomial sample); otherwise Wilson's
    at the design's effective sample size n_eff = p(1 - p) / var (Korn & Graubard 1998; at most the
    number of answers), shrunk by (z / t_df)^2 for the degrees of freedom of the estimated variance
    (units minus groups). When fewer than `MIN_OFF_EDGE` units hold the rarer outcome (none: p is 0
    or 1), the correlation of a unit's answers cannot be estimated, and n_eff is the number of
    units, as if each unit's answers agreed: 0 of 15 answers from 5 proverbs is as strong as 0 of 5,
    not 0 of 15, and 1 success among 300 answers of 100 proverbs covered 89% with the estimated
    n_eff.
    """
    scale = float(table.scale or 1.0)
    p = min(max(value / scale, 0.0), 1.0)
    n = sum(_unit_counts(table, groups))
    if table.simple:
        low, high = wilson(p * n, n, confidence)
        return bounded(
            value, scale * math.sqrt(p * (1 - p) / n), scale * low, scale * high, scale, confidence
        )
    spread = design([unit_contributions(table, table.values / scale, g) for g in groups])
    answers = int(sum(np.isfinite(table.values[g]).sum() for g in groups))
    if _rarer(table, groups, scale) >= MIN_OFF_EDGE and not _no_spread(spread.stderr, p, 1.0):
        shrink = (critical(confidence) / critical(confidence, spread.df)) ** 2
        effective = min(answers, p * (1 - p) / spread.stderr**2) * shrink
    else:
        effective = kish_size(_unit_counts(table, groups))
    low, high = wilson(p * effective, effective, confidence)
    # the one the interval assumes, not the design's estimate
    stderr = scale * math.sqrt(p * (1 - p) / effective)
    return bounded(value, stderr, scale * low, scale * high, scale, confidence)


def summarize(
    tables: Sequence[UnitTable],
    *,
    unit: str,
    confidence: float = CONFIDENCE,
    omitted: Mapping[str, str] | None = None,
    extra: Mapping[str, Mapping[str, Any]] | None = None,
) -> Results:
    """A run's `results` block: every table's estimate `overall` and per label of each stratum
    (`by_<stratum>`), the first table's metric as the `headline`, each metric's interval method and
    direction (`higher_is_better`), and the metrics `omitted` with the reason.

    `extra` adds estimates computed elsewhere (e.g. X-FaKT's cell-level scores) to `overall`; each
    names its interval method under `method`, which moves to `ci.methods`, and its direction under
    `higher_is_better`, which moves beside the tables' directions. No table (every probe skipped):
    no headline.
    """
    methods = {t.metric: t.method for t in tables}
    directions = {t.metric: t.higher_is_better for t in tables}
    overall = {t.metric: estimate(t, confidence) for t in tables}
    for name, given in (extra or {}).items():
        # an estimate's keys, as `estimate` writes them (`read_metrics` checks the block the run
        # writes)
        overall[name] = cast(
            Estimate,
            {k: v for k, v in given.items() if k not in ("method", "higher_is_better")},
        )
        methods[name] = str(given.get("method", ""))
        directions[name] = given.get("higher_is_better")
    out: Results = {
        "schema_version": SCHEMA_VERSION,
        "headline": tables[0].metric if tables else None,
        "unit": unit,
        "ci": {
            "method": "; ".join(dict.fromkeys(methods.values())),
            "methods": methods,
            "confidence": confidence,
        },
        "higher_is_better": directions,
        "overall": overall,
    }
    strata: dict[str, Strata] = {}
    for table in tables:
        for stratum, labels in table.strata.items():
            column = np.asarray([str(x) for x in labels])
            by = strata.setdefault(stratum, {})
            for label in sorted(set(column.tolist())):
                part = table.select(column == label)
                if stratum == table.macro:
                    part = replace(part, macro=None)
                by.setdefault(label, {})[table.metric] = estimate(part, confidence)
    out = with_strata(out, strata)
    out["omitted"] = dict(omitted or {})
    return out


def paired_difference(
    a: UnitTable,
    b: UnitTable,
    confidence: float = CONFIDENCE,
    names: tuple[str, str] = ("the first", "the second"),
) -> dict[str, Any]:
    """Run `a` minus run `b` on the same units: the difference of the two statistics, with an
    interval and a two-sided p-value from one procedure, so that the interval excludes 0 exactly
    when p < 1 - confidence (`method` names it, `UnitTable.paired_method`): for proportions, Tango's
    score interval with continuity correction and its test (McNemar's with continuity correction at
    0), on counts divided by the design effect when units are clusters of answers; for units crossed
    with random replicates (CAMeL), a t interval from the variance components of the differences;
    otherwise the sign-flip permutation test of the units' paired differences, inverted under a
    shift for the interval. Each holds its size under exchangeable nulls (docs/results.md). Runs on
    different units cannot be paired: that is an error naming the difference, with the runs called
    by `names` (`a`'s, then `b`'s).
    """
    if a.metric != b.metric:
        raise MetricInputError(
            f"Cannot pair {a.metric!r} with {b.metric!r}: compare one metric at a time."
        )
    if set(a.ids) != set(b.ids):
        only_a, only_b = sorted(set(a.ids) - set(b.ids)), sorted(set(b.ids) - set(a.ids))
        raise MetricInputError(
            f"Cannot pair the runs on {a.metric!r}: they probed different units ({len(only_a)} only in {names[0]}, "
            f"e.g. {only_a[:3]}; {len(only_b)} only in {names[1]}, e.g. {only_b[:3]}). Pair runs of one config on "
            "the same items (same --limit and --seed), or compare them unpaired."
        )
    order = {unit: i for i, unit in enumerate(b.ids)}
    b_values = b.values[[order[unit] for unit in a.ids]]
    if b_values.shape != a.values.shape:
        raise MetricInputError(
            f"Cannot pair the runs on {a.metric!r}: their replicates differ "
            f"({a.values.shape[1]} vs {b_values.shape[1]})."
        )
    both = np.isfinite(a.values) & np.isfinite(b_values)  # a pair is a cell both runs answered
    a_values, b_values = np.where(both, a.values, np.nan), np.where(both, b_values, np.nan)
    paired = replace(a, values=a_values)
    groups, labels = _groups_with_units(paired)
    index = [g[None, :] for g in groups]
    value = (
        float(table_statistic(a_values, index)[0] - table_statistic(b_values, index)[0])
        if groups
        else 0.0
    )
    n = sum(_unit_counts(a, groups))
    row = {"difference": value, "n": n, "method": a.paired_method}
    reason = _too_few(paired, groups, labels) if groups else "no unit answered in both runs"
    if reason:
        return {**row, **no_interval(reason).fields(), "p_value": None}
    if a.paired_method == TANGO_CC:
        return {**row, **_tango(a, a_values, b_values, groups[0], value, confidence)}
    if a.crossed:
        return {**row, **_paired_crossed(paired, a_values - b_values, groups, value, confidence)}
    return {**row, **_sign_flip(a, a_values, b_values, groups, value, confidence)}


def _paired_crossed(
    table: UnitTable,
    differences: np.ndarray,
    groups: Sequence[np.ndarray],
    value: float,
    confidence: float,
) -> dict[str, Any]:
    """The t interval and test of a paired difference over units crossed with random replicates
    (CAMeL), from the variance components of the differences; none where they do not vary within any
    group.
    """
    spread = crossed_design(table, differences, groups)
    if _no_spread(spread.stderr, value, table.scale):
        reason = (
            "the difference does not vary within any group: its crossed spread cannot be estimated"
        )
        return {**no_interval(reason).fields(), "p_value": None}
    return {**t_interval(value, spread, confidence).fields(), "p_value": t_p_value(value, spread)}


def _tango(
    table: UnitTable,
    a: np.ndarray,
    b: np.ndarray,
    rows: np.ndarray,
    value: float,
    confidence: float,
) -> dict[str, Any]:
    """Tango's score interval with continuity correction and its test, for proportions (0 or `scale`
    per answer), around `value`, the difference of the two statistics. Answers clustered in units (a
    fact in two languages, a proverb under three demonstration sets) count once per design effect
    (Rao & Scott 1992): the units' variance of the difference over the variance of as many
    independent answers, between 1 and the answers per unit, and the answers per unit when it cannot
    be estimated (every pair agrees), as if a unit's answers always agreed.
    """
    scale = float(table.scale or 1.0)
    paired = np.isfinite(a[rows]) & np.isfinite(b[rows])
    ones_a, ones_b = (x[rows][paired] > 0 for x in (a, b))
    gained, lost, answers = (
        int(np.sum(ones_a & ~ones_b)),
        int(np.sum(~ones_a & ones_b)),
        int(paired.sum()),
    )
    d = (gained - lost) / answers
    plain = max((gained + lost) / answers - d * d, 0.0) / answers
    effect = 1.0
    if not table.simple:
        units = _unit_counts(table, [rows])[0]
        parts = unit_contributions(table, a / scale, rows) - unit_contributions(
            table, b / scale, rows
        )
        clustered = design([parts]).stderr ** 2
        per_unit = answers / units
        effect = (
            min(max(clustered / plain, 1.0), per_unit) if plain > 0 and clustered > 0 else per_unit
        )
    score = tango_score(gained / effect, lost / effect, answers / effect)
    low, high = score_interval(score, d, confidence)
    interval = bounded(
        value, scale * math.sqrt(plain * effect), scale * low, scale * high, None, confidence
    )
    return {**interval.fields(), "p_value": score_p_value(score)}


def _sign_flip(
    table: UnitTable,
    a: np.ndarray,
    b: np.ndarray,
    groups: Sequence[np.ndarray],
    value: float,
    confidence: float,
) -> dict[str, Any]:
    """The sign-flip test of the units' paired differences (`sign_flip_parts`) and, as interval, the
    shifts it does not reject; none when so few units cannot reject any shift (5 units: the smallest
    p is 2 / 32). When every unit differs by the same amount there is no spread to estimate an
    interval from, and the test's p is exact: 2 of the 2^n sign patterns are as extreme (1 when the
    runs agree).
    """
    part, weight = sign_flip_parts(table, a, b, groups)
    if np.allclose(
        part / weight, value, rtol=0.0, atol=1e-12 * max(abs(value), table.scale or 0.0, 1.0)
    ):
        same = (
            "the two runs agree on every unit"
            if value == 0
            else "every unit differs by the same amount"
        )
        p_value = 1.0 if value == 0 else math.ldexp(1.0, max(1 - part.size, -1074))  # never 0
        return {
            **no_interval(f"{same}: the difference has no spread to estimate").fields(),
            "p_value": p_value,
        }
    test = sign_flip_test(part, weight, SIGN_FLIPS, seed=0)
    spread = design(
        [unit_contributions(table, a, g) - unit_contributions(table, b, g) for g in groups]
    ).stderr
    found = test.interval(confidence, step=float(np.sqrt(np.sum((part - value * weight) ** 2))))
    if found is None:
        reason = f"with {part.size} units no difference can be rejected at {1 - confidence:.0%}"
        return {**no_interval(reason).fields(), "p_value": test.p_value(0.0)}
    return {
        **bounded(value, spread, *found, None, confidence).fields(),
        "p_value": test.p_value(0.0),
    }


def sign_flip_parts(
    table: UnitTable, a: np.ndarray, b: np.ndarray, groups: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Each unit's part of the paired difference of `a` and `b` (values aligned with `table`'s rows)
    and its weight: the group's weight times (the group's difference + the unit's linearised
    contribution) over the group's units, so that the parts sum to the difference and the weights to
    1 (what `sign_flip_test` flips).
    """
    parts, weights = [], []
    for rows in groups:
        contribution = unit_contributions(table, a, rows) - unit_contributions(table, b, rows)
        own = table_statistic(a, [rows[None, :]])[0] - table_statistic(b, [rows[None, :]])[0]
        parts.append((own + contribution) / (len(groups) * contribution.size))
        weights.append(np.full(contribution.size, 1 / (len(groups) * contribution.size)))
    return np.concatenate(parts), np.concatenate(weights)
