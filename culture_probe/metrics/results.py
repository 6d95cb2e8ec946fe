"""One results schema for every benchmark: each headline number as `{value, stderr, ci_low, ci_high, n}`, overall
and per stratum (`by_language`, `by_culture`, ...), with the bootstrap that gave the interval named.

A headline number is a mean over the benchmark's unit (a DLAMA fact, an FmLAMA dish, a CAMeL prompt, an X-FaKT
question, a MAPS proverb): a `UnitTable` holds each unit's value per replicate (FmLAMA's templates, CAMeL's runs,
MAPS' demonstration sets) and the statistic is the paper's: the mean over replicates of the mean over units,
macro-averaged over the groups of one stratum where the paper does so (CAMeL's entity types). Intervals come from
`scipy.stats.bootstrap`, resampling units (within the macro groups, so each keeps its size); paired differences
between two runs on the same units from a paired bootstrap and a sign-flip `scipy.stats.permutation_test`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from culture_probe.errors import MetricInputError
from culture_probe.metrics._checks import check_lengths
from culture_probe.metrics._resample import (
    CI_METHOD,
    DEFAULT_RESAMPLING,
    IndexStatistic,
    Resampling,
    bootstrap_interval,
    permutation_p_value,
)

SCHEMA_VERSION = 1
PAIRED_TEST = "paired permutation test (scipy.stats.permutation_test, each unit's two values swapped at random)"


@dataclass(frozen=True)
class UnitTable:
    """One headline metric's values per unit: `values[i, r]` is unit `ids[i]`'s value in replicate r (NaN where
    it has none), `strata` gives each unit's label per stratum, and `macro` names the stratum whose groups are
    averaged with equal weight (None: units are pooled).
    """

    metric: str
    ids: tuple[str, ...]
    values: np.ndarray = field(repr=False)
    strata: Mapping[str, Sequence[str]] = field(default_factory=dict)
    macro: str | None = None

    def __post_init__(self) -> None:
        values = np.asarray(self.values, dtype=float)
        values = values.reshape(len(values), -1) if values.ndim < 2 else values
        object.__setattr__(self, "values", values)
        check_lengths(ids=self.ids, values=values, **{f"strata[{k!r}]": v for k, v in self.strata.items()})
        if len(set(self.ids)) != len(self.ids):
            raise MetricInputError(f"UnitTable {self.metric!r} lists a unit twice: ids must be unique.")
        if self.macro is not None and self.macro not in self.strata:
            raise MetricInputError(f"UnitTable {self.metric!r} averages over {self.macro!r}, which is not a stratum.")

    def select(self, mask: np.ndarray) -> UnitTable:
        """The units where `mask` is true."""
        return UnitTable(
            self.metric,
            tuple(np.asarray(self.ids)[mask]),
            self.values[mask],
            {k: list(np.asarray(v)[mask]) for k, v in self.strata.items()},
            self.macro,
        )

    def groups(self) -> list[np.ndarray]:
        """Unit indices of each macro group (one group of all units when not macro-averaged)."""
        if self.macro is None:
            return [np.arange(len(self.ids))]
        labels = np.asarray([str(x) for x in self.strata[self.macro]])
        return [np.flatnonzero(labels == label) for label in sorted(set(labels.tolist()))]


@dataclass(frozen=True)
class UnitValue:
    """One unit's value of a metric in one replicate, with the unit's strata labels."""

    unit: str
    value: float
    strata: Mapping[str, Any] = field(default_factory=dict)
    replicate: str = ""


def unit_table(metric: str, rows: Sequence[UnitValue], *, macro: str | None = None) -> UnitTable:
    """A `UnitTable` from one value per (unit, replicate): units and replicates in first-seen order, NaN where a
    unit has no value in a replicate. A unit's strata are those of its first row; a repeated (unit, replicate)
    is an error.
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
    return UnitTable(metric, tuple(units), values, strata, macro)


def table_statistic(values: np.ndarray, groups: Sequence[np.ndarray]) -> np.ndarray:
    """The paper's statistic for resampled unit indices (one (batch, size) array per group): per group the mean
    over replicates of the mean over units, then the mean over groups. Returns (batch,).
    """
    means = []
    for index in groups:
        cells = values[index]  # (batch, size, replicates)
        with warnings.catch_warnings():  # a replicate no unit of a draw has: NaN, left out of the mean
            warnings.simplefilter("ignore", RuntimeWarning)
            means.append(np.nanmean(np.nanmean(cells, axis=-2), axis=-1))
    return np.mean(means, axis=0)


def estimate(table: UnitTable, resampling: Resampling = DEFAULT_RESAMPLING) -> dict[str, Any]:
    """`{value, stderr, ci_low, ci_high, n}` of one table: its statistic, and a bootstrap over its units."""
    groups = [g for g in table.groups() if np.isfinite(table.values[g]).any()]
    n = int(sum(np.isfinite(table.values[g]).any(axis=1).sum() for g in groups))
    if not n:
        return {"value": None, "stderr": None, "ci_low": None, "ci_high": None, "n": 0}
    value = float(table_statistic(table.values, [g[None, :] for g in groups])[0])
    return {"value": value, **interval(lambda idx: table_statistic(table.values, idx), groups, resampling), "n": n}


def interval(statistic: IndexStatistic, groups: Sequence[np.ndarray], resampling: Resampling) -> dict[str, Any]:
    """`{stderr, ci_low, ci_high}` of a one-valued index statistic (see `_resample`); None without two units."""
    if sum(g.size for g in groups) < 2:
        return {"stderr": None, "ci_low": None, "ci_high": None}
    stderr, low, high = bootstrap_interval(statistic, groups, resampling)
    return {"stderr": stderr[0], "ci_low": low[0], "ci_high": high[0]}


def summarize(
    tables: Sequence[UnitTable],
    *,
    unit: str,
    resampling: Resampling = DEFAULT_RESAMPLING,
    omitted: Mapping[str, str] | None = None,
    extra: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """A run's `results` block: every table's estimate `overall` and per label of each stratum (`by_<stratum>`),
    the first table's metric as the `headline`, the interval method, and the metrics `omitted` with the reason.

    `extra` adds estimates computed elsewhere (e.g. X-FaKT's cell-level scores) to `overall`. No table (every
    probe skipped): no headline.
    """
    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "headline": tables[0].metric if tables else None,
        "unit": unit,
        "ci": {
            "method": CI_METHOD,
            "resampled": unit,
            "confidence": resampling.confidence,
            "n_resamples": resampling.n_resamples,
            "seed": resampling.seed,
        },
        "overall": {t.metric: estimate(t, resampling) for t in tables} | dict(extra or {}),
    }
    for table in tables:
        for stratum, labels in table.strata.items():
            column = np.asarray([str(x) for x in labels])
            by = out.setdefault(f"by_{stratum}", {})
            for label in sorted(set(column.tolist())):
                part = table.select(column == label)
                if stratum == table.macro:
                    part = UnitTable(part.metric, part.ids, part.values, part.strata)
                by.setdefault(label, {})[table.metric] = estimate(part, resampling)
    out["omitted"] = dict(omitted or {})
    return out


def paired_difference(
    a: UnitTable, b: UnitTable, resampling: Resampling = DEFAULT_RESAMPLING, n_permutations: int = 9999
) -> dict[str, Any]:
    """Run `a` minus run `b` on the same units: the difference of the two statistics, a paired bootstrap interval
    (one draw of units serves both runs) and a two-sided paired permutation p-value (each unit's two values
    swapped at random). Runs on different units cannot be paired: that is an error naming the difference.
    """
    if a.metric != b.metric:
        raise MetricInputError(f"Cannot pair {a.metric!r} with {b.metric!r}: compare one metric at a time.")
    if set(a.ids) != set(b.ids):
        only_a, only_b = sorted(set(a.ids) - set(b.ids)), sorted(set(b.ids) - set(a.ids))
        raise MetricInputError(
            f"Cannot pair the runs on {a.metric!r}: they probed different units ({len(only_a)} only in the first, "
            f"e.g. {only_a[:3]}; {len(only_b)} only in the second, e.g. {only_b[:3]}). Pair runs of one config on "
            "the same items (same --limit and --seed), or compare them unpaired."
        )
    order = {unit: i for i, unit in enumerate(b.ids)}
    b_values = b.values[[order[unit] for unit in a.ids]]
    if b_values.shape != a.values.shape:
        raise MetricInputError(
            f"Cannot pair the runs on {a.metric!r}: their replicates differ "
            f"({a.values.shape[1]} vs {b_values.shape[1]})."
        )
    groups = a.groups()
    both = np.stack([a.values, b_values])  # (2, units, replicates)

    def difference(index: list[np.ndarray]) -> np.ndarray:
        return table_statistic(both[0], index) - table_statistic(both[1], index)

    value = float(difference([g[None, :] for g in groups])[0])
    return {
        "difference": value,
        **interval(difference, groups, resampling),
        "p_value": _sign_flip_p_value(both, groups, n_permutations, resampling.seed),
        "n": len(a.ids),
    }


def _sign_flip_p_value(both: np.ndarray, groups: Sequence[np.ndarray], n_permutations: int, seed: int) -> float | None:
    """Two-sided p-value of the paired difference (None with fewer than two units): under the null each unit's two
    values are exchangeable.

    The runs' rows are stacked (run a's units, then run b's) and scipy permutes, unit by unit, which run's row
    sits in which sample; the statistic reads the rows back through those indices.
    """
    n = both.shape[1]
    rows = both.reshape(2 * n, -1)

    def difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        x, y = (np.asarray(v, dtype=int).reshape(-1, n) for v in (x, y))
        return table_statistic(rows, [x[:, g] for g in groups]) - table_statistic(rows, [y[:, g] for g in groups])

    return permutation_p_value(
        difference, (np.arange(n), np.arange(n, 2 * n)), paired=True, n_resamples=n_permutations, seed=seed
    )
