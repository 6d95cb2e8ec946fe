"""One results schema for every benchmark: each headline number as `{value, stderr, ci_low, ci_high, n}`, overall
and per stratum (`by_language`, `by_culture`, ...), with each number's interval method named.

A headline number is a mean over the benchmark's unit (a DLAMA fact, an FmLAMA dish, a CAMeL prompt, an X-FaKT
question, a MAPS proverb): a `UnitTable` holds each unit's value per replicate (FmLAMA's templates, CAMeL's runs,
MAPS' demonstration sets) and the statistic is the paper's: the mean over replicates of the mean over units,
macro-averaged over the groups of one stratum where the paper does so (CAMeL's entity types).

Intervals are chosen for their coverage at any n (docs/results.md): a proportion (a table declared binary) gets
Wilson's score interval, at the design's effective sample size when units have replicates or are macro-averaged;
any other mean a t interval from its design-based standard error (units are the sampled items, macro groups are
strata). Where no interval can be honest (one unit, no spread to estimate) the estimate says why (`no_interval`).
Paired differences of two runs on the same units come from one procedure that gives both interval and p-value.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from culture_probe.errors import MetricInputError
from culture_probe.metrics._checks import check_lengths
from culture_probe.metrics._intervals import (
    KORN_GRAUBARD,
    PAIRED_T,
    T_DESIGN,
    TANGO,
    WILSON,
    Design,
    Interval,
    bounded,
    clopper_pearson,
    critical,
    no_interval,
    score_interval,
    score_p_value,
    t_interval,
    t_p_value,
    tango_score,
    wilson,
)

SCHEMA_VERSION = 1
CONFIDENCE = 0.95


@dataclass(frozen=True)
class UnitTable:
    """One headline metric's values per unit: `values[i, r]` is unit `ids[i]`'s value in replicate r (NaN where
    it has none), `strata` gives each unit's label per stratum, and `macro` names the stratum whose groups are
    averaged with equal weight (None: units are pooled).

    `scale` is the metric's range [0, scale] (100 for a percentage; None: unbounded), which intervals never leave;
    `binary` declares every value an outcome, 0 or `scale`, so the metric is a proportion (see `with_scale`).
    `higher_is_better` is the metric's direction, declared where the benchmark names it: True (P@1, accuracy),
    False (an error rate), None for a metric with no better direction (a bias score whose midpoint means no bias,
    a gap whose 0 is neutral); the results block gives it per metric.
    """

    metric: str
    ids: tuple[str, ...]
    values: np.ndarray = field(repr=False)
    strata: Mapping[str, Sequence[str]] = field(default_factory=dict)
    macro: str | None = None
    scale: float | None = None
    binary: bool = False
    higher_is_better: bool | None = None

    def __post_init__(self) -> None:
        values = np.asarray(self.values, dtype=float)
        values = values.reshape(len(values), -1) if values.ndim < 2 else values
        object.__setattr__(self, "values", values)
        check_lengths(ids=self.ids, values=values, **{f"strata[{k!r}]": v for k, v in self.strata.items()})
        if len(set(self.ids)) != len(self.ids):
            raise MetricInputError(f"UnitTable {self.metric!r} lists a unit twice: ids must be unique.")
        if self.macro is not None and self.macro not in self.strata:
            raise MetricInputError(f"UnitTable {self.metric!r} averages over {self.macro!r}, which is not a stratum.")
        self._check_scale(values[np.isfinite(values)])

    def _check_scale(self, finite: np.ndarray) -> None:
        if self.scale is None:
            if self.binary:
                raise MetricInputError(f"UnitTable {self.metric!r} is binary: give the value of a success as `scale`.")
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
        """The same table on the range [0, `scale`]; `binary`: every value is 0 or `scale` (a hit, a right answer), so
        the metric is a proportion and gets a score interval, which has width even at 0 of n and n of n.
        """
        return replace(self, scale=float(scale), binary=binary)

    def select(self, mask: np.ndarray) -> UnitTable:
        """The units where `mask` is true."""
        return replace(
            self,
            ids=tuple(np.asarray(self.ids)[mask]),
            values=self.values[mask],
            strata={k: list(np.asarray(v)[mask]) for k, v in self.strata.items()},
        )

    def groups(self) -> list[np.ndarray]:
        """Unit indices of each macro group (one group of all units when not macro-averaged)."""
        if self.macro is None:
            return [np.arange(len(self.ids))]
        labels = np.asarray([str(x) for x in self.strata[self.macro]])
        return [np.flatnonzero(labels == label) for label in sorted(set(labels.tolist()))]

    def group_labels(self) -> list[str]:
        """The macro groups' labels, in the order of `groups()`."""
        return sorted({str(x) for x in self.strata[self.macro]}) if self.macro is not None else ["all"]

    @property
    def method(self) -> str:
        """The name of this table's interval method (as `results.ci.methods` gives it)."""
        if not self.binary:
            return T_DESIGN
        return WILSON if self.simple else KORN_GRAUBARD

    @property
    def simple(self) -> bool:
        """One value per unit, pooled: a binary table is then a plain binomial sample."""
        return self.values.shape[1] == 1 and self.macro is None


@dataclass(frozen=True)
class UnitValue:
    """One unit's value of a metric in one replicate, with the unit's strata labels."""

    unit: str
    value: float
    strata: Mapping[str, Any] = field(default_factory=dict)
    replicate: str = ""


def unit_table(
    metric: str, rows: Sequence[UnitValue], *, macro: str | None = None, higher_is_better: bool | None = None
) -> UnitTable:
    """A `UnitTable` from one value per (unit, replicate): units and replicates in first-seen order, NaN where a
    unit has no value in a replicate. A unit's strata are those of its first row; a repeated (unit, replicate)
    is an error. `higher_is_better`: the metric's direction (`UnitTable`).
    """
    units: dict[str, Mapping[str, Any]] = {}
    replicates: dict[str, int] = {}
    for row in rows:
        units.setdefault(row.unit, row.strata)
        replicates.setdefault(row.replicate, len(replicates))
    index = {unit: i for i, unit in enumerate(units)}
    values = np.full((len(units), max(len(replicates), 1)), np.nan)
    for row in rows:
        cell = index[row.unit], replicates[row.replicate]
        if not np.isnan(values[cell]):
            raise MetricInputError(f"{metric}: unit {row.unit!r} has two values in replicate {row.replicate!r}.")
        values[cell] = row.value
    names = list(next(iter(units.values()), {}))
    strata = {name: [str(s.get(name)) for s in units.values()] for name in names}
    return UnitTable(metric, tuple(units), values, strata, macro, higher_is_better=higher_is_better)


def table_statistic(values: np.ndarray, groups: Sequence[np.ndarray]) -> np.ndarray:
    """The paper's statistic for unit indices (one (batch, size) array per group): per group the mean over
    replicates of the mean over units, then the mean over groups. Returns (batch,).
    """
    means = []
    for index in groups:
        cells = values[index]  # (batch, size, replicates)
        with warnings.catch_warnings():  # a replicate no unit of a group has: NaN, left out of the mean
            warnings.simplefilter("ignore", RuntimeWarning)
            means.append(np.nanmean(np.nanmean(cells, axis=-2), axis=-1))
    return np.mean(means, axis=0)


def contributions(values: np.ndarray) -> np.ndarray:
    """Each unit's linearised contribution to one group's statistic (the mean over replicates of the mean over the
    units that have a value): summed over units it is 0, and the statistic's variance over samples of units is
    estimated by sum(u^2) / (n (n - 1)), the usual estimate for a mean of ratios (each replicate's mean divides by
    the units it has). With one value per unit, u is the unit's deviation from the mean.
    """
    finite = np.isfinite(values)
    counts = finite.sum(axis=0)
    used = counts > 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        means = np.nanmean(values[:, used], axis=0)
    deviations = np.where(finite[:, used], values[:, used] - means, 0.0) * (len(values) / counts[used])
    return deviations.mean(axis=1)


def design(parts: Sequence[np.ndarray]) -> Design:
    """The design of a mean over groups with equal weight: each group's contributions (`contributions`, or the
    difference of two runs' contributions) give one variance term with n - 1 degrees of freedom, and add to the
    third cumulant (the sample's third moment over n^2 for each group mean).
    """
    weight = 1 / len(parts)
    terms = [weight**2 * float(np.sum(u**2)) / (u.size * (u.size - 1)) for u in parts]
    third = sum(weight**3 * float(np.sum(u**3)) / u.size**3 for u in parts)
    return Design(np.asarray(terms), np.asarray([u.size - 1 for u in parts], dtype=float), third)


def _no_spread(stderr: float, value: float, scale: float | None) -> bool:
    """A standard error that is zero up to float noise on the metric's scale."""
    return stderr <= 1e-12 * max(abs(value), scale or 0.0, 1.0)


def _groups_with_units(table: UnitTable) -> tuple[list[np.ndarray], list[str]]:
    """Each macro group's units that have a value, and the group labels (groups without any value left out)."""
    out = zip(table.groups(), table.group_labels(), strict=True)
    kept = [(g[np.isfinite(table.values[g]).any(axis=1)], label) for g, label in out]
    kept = [(g, label) for g, label in kept if g.size]
    return [g for g, _ in kept], [label for _, label in kept]


def _too_few(table: UnitTable, groups: Sequence[np.ndarray], labels: Sequence[str]) -> str | None:
    """Why the units leave no spread to estimate: one unit, or a macro group of one unit."""
    if sum(g.size for g in groups) < 2:
        return "one unit"
    lone = [label for g, label in zip(groups, labels, strict=True) if g.size < 2]
    if not lone:
        return None
    if len(lone) == len(labels):
        return f"the statistic cannot vary under resampling (one unit per {table.macro})"
    return f"one unit in {table.macro} {', '.join(lone[:3])}{' ...' if len(lone) > 3 else ''}: its spread is unknown"


def point_value(table: UnitTable) -> float | None:
    """The paper's statistic of `table` over the units that have a value (None without any)."""
    groups, _ = _groups_with_units(table)
    return float(table_statistic(table.values, [g[None, :] for g in groups])[0]) if groups else None


def estimate(table: UnitTable, confidence: float = CONFIDENCE) -> dict[str, Any]:
    """`{value, stderr, ci_low, ci_high, n}` of one table (and `no_interval`, the reason, when it has none)."""
    groups, labels = _groups_with_units(table)
    n = int(sum(g.size for g in groups))
    value = point_value(table)
    if value is None:
        return {"value": None, "stderr": None, "ci_low": None, "ci_high": None, "n": 0}
    reason = _too_few(table, groups, labels)
    if reason:
        interval = no_interval(reason)
    elif table.binary:
        interval = _proportion_interval(table, groups, value, confidence)
    else:
        interval = _mean_interval(table, groups, value, confidence)
    return {"value": value, **interval.fields(), "n": n}


def _mean_interval(table: UnitTable, groups: Sequence[np.ndarray], value: float, confidence: float) -> Interval:
    spread = design([contributions(table.values[g]) for g in groups])
    if _no_spread(spread.stderr, value, table.scale):
        return no_interval("the statistic cannot vary under resampling (every unit has the same value)")
    return t_interval(value, spread, confidence, table.scale)


def _proportion_interval(table: UnitTable, groups: Sequence[np.ndarray], value: float, confidence: float) -> Interval:
    """Wilson's interval for one value per pooled unit (a plain binomial sample); otherwise Clopper-Pearson's at
    the effective sample size n_eff = p(1 - p) / var (Korn & Graubard 1998; at most the number of answers, and the
    number of units when p is 0 or 1 or the variance vanishes, as no correlation between a unit's replicates can
    then be estimated), shrunk by (z / t_df)^2 for the degrees of freedom of the estimated variance (units minus
    groups). Wilson's interval at n_eff covers too little when few, clustered successes carry the estimate.
    """
    scale = float(table.scale or 1.0)
    p = min(max(value / scale, 0.0), 1.0)
    n = sum(g.size for g in groups)
    if table.simple:
        low, high = wilson(p * n, n, confidence)
        return bounded(value, scale * math.sqrt(p * (1 - p) / n), scale * low, scale * high, scale)
    spread = design([contributions(table.values[g] / scale) for g in groups])
    answers = int(sum(np.isfinite(table.values[g]).sum() for g in groups))
    if 0 < p < 1 and not _no_spread(spread.stderr, p, 1.0):
        n_eff = min(answers, p * (1 - p) / spread.stderr**2)
    else:
        n_eff = n
    n_eff *= (critical(confidence) / critical(confidence, n - len(groups))) ** 2
    low, high = clopper_pearson(p * n_eff, n_eff, confidence)
    return bounded(value, scale * spread.stderr, scale * low, scale * high, scale)


def summarize(
    tables: Sequence[UnitTable],
    *,
    unit: str,
    confidence: float = CONFIDENCE,
    omitted: Mapping[str, str] | None = None,
    extra: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """A run's `results` block: every table's estimate `overall` and per label of each stratum (`by_<stratum>`),
    the first table's metric as the `headline`, each metric's interval method and direction (`higher_is_better`),
    and the metrics `omitted` with the reason.

    `extra` adds estimates computed elsewhere (e.g. X-FaKT's cell-level scores) to `overall`; each names its
    interval method under `method`, which moves to `ci.methods`, and its direction under `higher_is_better`,
    which moves beside the tables' directions. No table (every probe skipped): no headline.
    """
    methods = {t.metric: t.method for t in tables}
    directions = {t.metric: t.higher_is_better for t in tables}
    overall: dict[str, Any] = {t.metric: estimate(t, confidence) for t in tables}
    for name, given in (extra or {}).items():
        overall[name] = {k: v for k, v in given.items() if k not in ("method", "higher_is_better")}
        methods[name] = str(given.get("method", ""))
        directions[name] = given.get("higher_is_better")
    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "headline": tables[0].metric if tables else None,
        "unit": unit,
        "ci": {"method": "; ".join(dict.fromkeys(methods.values())), "methods": methods, "confidence": confidence},
        "higher_is_better": directions,
        "overall": overall,
    }
    for table in tables:
        for stratum, labels in table.strata.items():
            column = np.asarray([str(x) for x in labels])
            by = out.setdefault(f"by_{stratum}", {})
            for label in sorted(set(column.tolist())):
                part = table.select(column == label)
                if stratum == table.macro:
                    part = replace(part, macro=None)
                by.setdefault(label, {})[table.metric] = estimate(part, confidence)
    out["omitted"] = dict(omitted or {})
    return out


def paired_difference(
    a: UnitTable, b: UnitTable, confidence: float = CONFIDENCE, names: tuple[str, str] = ("the first", "the second")
) -> dict[str, Any]:
    """Run `a` minus run `b` on the same units: the difference of the two statistics, with an interval and a
    two-sided p-value from one procedure, so that the interval excludes 0 exactly when p < 1 - confidence
    (`method` names it): for one binary value per pooled unit, Tango's score interval and its score test
    (McNemar's at 0); otherwise the paired t interval and t test on the units' linearised differences, within the
    macro groups. Runs on different units cannot be paired: that is an error naming the difference, with the runs
    called by `names` (`a`'s, then `b`'s).
    """
    if a.metric != b.metric:
        raise MetricInputError(f"Cannot pair {a.metric!r} with {b.metric!r}: compare one metric at a time.")
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
    groups, labels = _groups_with_units(replace(a, values=np.where(np.isnan(a.values), b_values, a.values)))
    index = [g[None, :] for g in groups]
    value = float(table_statistic(a.values, index)[0] - table_statistic(b_values, index)[0])
    reason = _too_few(a, groups, labels)
    n = int(sum(g.size for g in groups))
    if reason:
        return {"difference": value, **no_interval(reason).fields(), "p_value": None, "n": n, "method": PAIRED_T}
    if a.binary and b.binary and a.simple and np.isfinite(a.values).all() and np.isfinite(b_values).all():
        tango = _tango(a.values[:, 0], b_values[:, 0], float(a.scale or 1.0), value, confidence)
        return {"difference": value, **tango, "n": n}
    differences = [contributions(a.values[g]) - contributions(b_values[g]) for g in groups]
    spread = design(differences)
    if _no_spread(spread.stderr, value, a.scale):
        same = "the two runs agree on every unit" if value == 0 else "every unit differs by the same amount"
        fields = no_interval(f"{same}: the difference has no spread to estimate").fields()
        return {"difference": value, **fields, "p_value": 1.0 if value == 0 else 0.0, "n": n, "method": PAIRED_T}
    interval = t_interval(value, spread, confidence)
    return {"difference": value, **interval.fields(), "p_value": t_p_value(value, spread), "n": n, "method": PAIRED_T}


def _tango(a: np.ndarray, b: np.ndarray, scale: float, value: float, confidence: float) -> dict[str, Any]:
    """Tango's score interval and test of a paired difference of proportions (a, b: 0 or `scale` per unit), around
    `value`, the difference of the two statistics (the same number up to float noise).
    """
    gained, lost, n = int(np.sum((a > 0) & (b == 0))), int(np.sum((a == 0) & (b > 0))), a.size
    score = tango_score(gained, lost, n)
    d = (gained - lost) / n
    low, high = score_interval(score, d, confidence)
    stderr = scale * math.sqrt(max((gained + lost) / n - d * d, 0.0) / n)
    interval = bounded(value, stderr, scale * low, scale * high, None)
    return {**interval.fields(), "p_value": score_p_value(score), "method": TANGO}
