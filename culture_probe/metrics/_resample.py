"""Seeded resampling through `scipy.stats`, shared by every metric that reports uncertainty (the results schema,
compare_groups, fairness_gap).

Statistics are written over unit indices: a statistic gets one (batch, size) index array per group of units and
returns (batch,) values, or (k, batch) for k values at once. Resampling indices, not values, lets one draw serve
several arrays (two runs of a paired comparison, a unit's replicates) and keeps memory bounded (`batch`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from culture_probe.errors import MetricInputError

CI_METHOD = "percentile bootstrap (scipy.stats.bootstrap)"
_BATCH_CELLS = 2_000_000  # drawn unit indices held at once, whatever n_resamples is

IndexStatistic = Callable[[list[np.ndarray]], np.ndarray]


def check_resampling(n_resamples: int, confidence: float) -> None:
    """Validate the two options every resampling metric takes."""
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise MetricInputError(f"`n_resamples` must be a positive integer, got {n_resamples!r}.")
    if not 0 < confidence < 1:
        raise MetricInputError(f"`confidence` must be between 0 and 1 (e.g. 0.95), got {confidence!r}.")


@dataclass(frozen=True)
class Resampling:
    """How intervals are drawn: a percentile bootstrap at `confidence` with `n_resamples` draws, seeded."""

    confidence: float = 0.95
    n_resamples: int = 2000
    seed: int = 0

    def __post_init__(self) -> None:
        check_resampling(self.n_resamples, self.confidence)


DEFAULT_RESAMPLING = Resampling()


def _nan_to_none(values: np.ndarray) -> list[float | None]:
    return [None if not np.isfinite(v) else float(v) for v in np.atleast_1d(values)]


def bootstrap_interval(
    statistic: IndexStatistic, groups: Sequence[np.ndarray], resampling: Resampling
) -> tuple[list[float | None], list[float | None], list[float | None]]:
    """(stderr, ci_low, ci_high), one entry per value of `statistic`, from a percentile bootstrap that resamples
    each group of unit indices separately, keeping its size (`scipy.stats.bootstrap` with one sample per group).

    A group of one unit cannot vary under resampling; scipy asks for two observations per sample, so it is given
    twice, which leaves every statistic of group means unchanged. A value undefined in some draw has no interval.
    """
    data = tuple(np.repeat(g, 2) if g.size == 1 else np.asarray(g) for g in groups)
    if not data or any(g.size == 0 for g in data):
        raise MetricInputError("bootstrap_interval needs at least one unit in every group.")

    def indexed(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
        return statistic([np.asarray(s, dtype=int).reshape(-1, s.shape[-1]) for s in samples])

    with warnings.catch_warnings():  # a constant statistic is "degenerate": its interval is the value itself
        warnings.simplefilter("ignore")
        result = stats.bootstrap(
            data,
            indexed,
            n_resamples=resampling.n_resamples,
            vectorized=True,
            batch=max(1, _BATCH_CELLS // sum(g.size for g in data)),
            method="percentile",
            confidence_level=resampling.confidence,
            rng=np.random.default_rng(resampling.seed),
        )
    interval = result.confidence_interval
    return _nan_to_none(result.standard_error), _nan_to_none(interval.low), _nan_to_none(interval.high)


def permutation_p_value(
    statistic: Callable[..., np.ndarray], samples: Sequence[np.ndarray], *, paired: bool, n_resamples: int, seed: int
) -> float | None:
    """Two-sided p-value of `statistic(*samples)` from `scipy.stats.permutation_test`: samples relabelled at
    random (independent), or each unit's values swapped between the samples (`paired`). None when a sample has
    fewer than two units (scipy's minimum; no test of one unit means anything).
    """
    if min(len(s) for s in samples) < 2:
        return None
    size = sum(len(s) for s in samples)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = stats.permutation_test(
            tuple(samples),
            statistic,
            vectorized=True,
            n_resamples=n_resamples,
            permutation_type="samples" if paired else "independent",
            alternative="two-sided",
            batch=max(1, _BATCH_CELLS // size),
            rng=np.random.default_rng(seed),
        )
    return float(result.pvalue)
