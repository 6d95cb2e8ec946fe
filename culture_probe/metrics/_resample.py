"""Seeded resampling: the bootstrap of `fairness_gap` (through `scipy.stats`), the permutation test
of `compare_groups` and the sign-flip test of a paired difference, whose intervals are the shifts
the test does not reject.

Statistics are written over unit indices: a statistic gets one (batch, size) index array per group
of units and returns (batch,) values, or (k, batch) for k values at once. Resampling indices, not
values, lets one draw serve several arrays and keeps memory bounded (`batch`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
from scipy import stats

from culture_probe.errors import MetricInputError

_BATCH_CELLS = 2_000_000  # drawn unit indices held at once, whatever n_resamples is

IndexStatistic = Callable[[list[np.ndarray]], np.ndarray]


def check_resampling(n_resamples: int, confidence: float) -> None:
    """Validate the two options every resampling metric takes."""
    if (
        isinstance(n_resamples, bool)
        or not isinstance(n_resamples, (int, np.integer))
        or n_resamples < 1
    ):
        raise MetricInputError(f"`n_resamples` must be a positive integer, got {n_resamples!r}.")
    if not 0 < confidence < 1:
        raise MetricInputError(
            f"`confidence` must be between 0 and 1 (e.g. 0.95), got {confidence!r}."
        )


@dataclass(frozen=True)
class Resampling:
    """How intervals are drawn: a percentile bootstrap at `confidence` with `n_resamples` draws,
    seeded.
    """

    confidence: float = 0.95
    n_resamples: int = 2000
    seed: int = 0

    def __post_init__(self) -> None:
        check_resampling(self.n_resamples, self.confidence)


def _nan_to_none(values: np.ndarray) -> list[float | None]:
    return [None if not np.isfinite(v) else float(v) for v in np.atleast_1d(values)]


def bootstrap_interval(
    statistic: IndexStatistic, groups: Sequence[np.ndarray], resampling: Resampling
) -> tuple[list[float | None], list[float | None], list[float | None]]:
    """(stderr, ci_low, ci_high), one entry per value of `statistic`, from a percentile bootstrap
    that resamples each group of unit indices separately, keeping its size (`scipy.stats.bootstrap`
    with one sample per group).

    A group of one unit cannot vary under resampling; scipy asks for two observations per sample, so
    it is given twice, which leaves every statistic of group means unchanged. A value undefined in
    some draw has no interval.
    """
    data = tuple(np.repeat(g, 2) if g.size == 1 else np.asarray(g) for g in groups)
    if not data or any(g.size == 0 for g in data):
        raise MetricInputError("bootstrap_interval needs at least one unit in every group.")

    def indexed(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
        return statistic([np.asarray(s, dtype=int).reshape(-1, s.shape[-1]) for s in samples])

    # a constant statistic is "degenerate": its interval is the value itself
    with warnings.catch_warnings():
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
    return (
        _nan_to_none(result.standard_error),
        _nan_to_none(interval.low),
        _nan_to_none(interval.high),
    )


@dataclass(frozen=True)
class ShiftTest:
    """A two-sided permutation test of "the difference is delta" for every delta at once, under a
    location shift: for rearrangement k (a relabelling of two groups' pooled items, or a sign
    pattern of paired units) the statistic is `moved[k] - delta * share[k]` against the observed
    `difference - delta`, so one set of rearrangements serves every delta, and the interval
    (`interval`) holds exactly the deltas whose p-value (`p_value`) is at least 1 - confidence.
    """

    difference: float
    moved: np.ndarray = field(repr=False)
    share: np.ndarray = field(repr=False)
    exact: bool  # every relabelling enumerated (the observed one among them), else drawn at random

    def p_value(self, delta: float = 0.0) -> float:
        """Two-sided p-value of "the difference is `delta`": the share of relabellings at least as
        extreme (with the observed one counted once more when they are drawn, so never 0).
        """
        observed = abs(self.difference - delta)
        extreme = int(
            np.sum(np.abs(self.moved - delta * self.share) >= observed - 1e-9 * (1 + observed))
        )
        return extreme / self.moved.size if self.exact else (extreme + 1) / (self.moved.size + 1)

    def interval(self, confidence: float, step: float) -> tuple[float, float] | None:
        """The deltas the test does not reject at 1 - `confidence`, searched outward from the
        estimate in steps of `step` and bisected to its edges (to a billionth of `step`); None when
        the test cannot reject any delta (too few items). 0 is inside exactly when `p_value(0)` is
        at least 1 - confidence, whatever the shape of the p-value curve.
        """
        alpha = 1 - confidence
        zero_accepted = self.p_value(0.0) >= alpha
        edges = []
        for direction in (-1.0, 1.0):
            inside, outside = self.difference, None
            if direction * -self.difference > 0:  # 0 lies on this side
                inside, outside = (0.0, None) if zero_accepted else (inside, 0.0)
            if outside is None:
                outside = self._rejected(inside, direction * step, alpha)
            if outside is None:
                return None
            edges.append(self._edge(inside, outside, alpha, 1e-9 * abs(step)))
        return edges[0], edges[1]

    def _rejected(self, start: float, step: float, alpha: float) -> float | None:
        for doubling in range(64):
            point: float = start + step * 2**doubling
            if self.p_value(point) < alpha:
                return point
        return None

    def _edge(self, inside: float, outside: float, alpha: float, tolerance: float) -> float:
        for _ in range(200):
            middle = (inside + outside) / 2
            if middle in (inside, outside) or abs(outside - inside) <= tolerance:
                break
            inside, outside = (
                (middle, outside) if self.p_value(middle) >= alpha else (inside, middle)
            )
        return inside


def shift_test(a: np.ndarray, b: np.ndarray, n_resamples: int, seed: int) -> ShiftTest:
    """The permutation distribution of mean(a) - mean(b) over relabellings of the pooled items into
    groups of the same sizes: all of them when there are at most `n_resamples`, else `n_resamples`
    drawn with `seed`.
    """
    pooled = np.concatenate([a, b])
    size, n_a = pooled.size, a.size
    exact = math.comb(size, n_a) <= n_resamples
    if exact:
        chosen = np.asarray(list(combinations(range(size), n_a)), dtype=int).reshape(-1, n_a)
    else:
        rng = np.random.default_rng(seed)
        batch = max(1, _BATCH_CELLS // size)
        chosen = np.concatenate(
            [
                np.argsort(rng.random((min(batch, n_resamples - start), size)), axis=1)[:, :n_a]
                for start in range(0, n_resamples, batch)
            ]
        )
    weight = 1 / n_a + 1 / b.size
    moved = pooled[chosen].sum(axis=1) * weight - pooled.sum() / b.size
    share = (chosen < n_a).sum(axis=1) * weight - n_a / b.size
    return ShiftTest(float(a.mean() - b.mean()), moved, share, exact)


#: sign patterns of a paired test are enumerated up to this many units (2^13 = 8,192), else drawn
EXACT_SIGN_UNITS = 13


def sign_flip_test(
    parts: np.ndarray, weights: np.ndarray, n_resamples: int, seed: int
) -> ShiftTest:
    """The sign-flip distribution of a paired difference that is the sum of its units' `parts` (each
    unit's contribution to the difference; `weights` sum to 1): under "the difference is delta" with
    the two runs exchangeable up to that shift, each unit's `part - delta * weight` is symmetric
    about 0, so flipping its sign leaves the distribution unchanged. Every sign pattern up to
    `EXACT_SIGN_UNITS` units (the observed one among them: the test is exact, and n units that all
    differ the same way give p = 2 / 2^n); else `n_resamples` patterns drawn with `seed` (p =
    (extreme + 1) / (n_resamples + 1), also exact in size). A studentized statistic would order the
    patterns the same way, since flipping signs leaves the sum of squares unchanged.
    """
    size = parts.size
    values = np.stack([parts, weights], axis=1)
    if size <= EXACT_SIGN_UNITS:
        patterns = 1.0 - 2.0 * ((np.arange(2**size)[:, None] >> np.arange(size)) & 1)
        totals = patterns @ values
    else:
        totals = _random_sign_sums(np.random.default_rng(seed), n_resamples, values)
    return ShiftTest(float(parts.sum()), totals[:, 0], totals[:, 1], size <= EXACT_SIGN_UNITS)


def _random_sign_sums(rng: np.random.Generator, count: int, values: np.ndarray) -> np.ndarray:
    """`count` sums of `values`' rows under fair random signs, (count, columns): eight units' signs
    come from one random byte, and each byte's 256 sums of its eight rows are tabulated once, so a
    pattern costs one look-up per eight units instead of a sign and a product per unit (octets are
    taken in chunks, to bound memory).
    """
    octets = -(-len(values) // 8)
    padded = np.zeros((octets * 8, values.shape[1]))
    padded[: len(values)] = values
    signs = 1.0 - 2.0 * ((np.arange(256)[:, None] >> np.arange(8)) & 1)  # (byte, bit)
    # (column, octet, byte)
    tables = (signs[None] @ padded.reshape(octets, 8, -1)).transpose(2, 0, 1)
    draws = rng.integers(0, 256, (octets, count), dtype=np.uint8)
    totals = np.zeros((values.shape[1], count))
    chunk = max(1, _BATCH_CELLS // count)
    for start in range(0, octets, chunk):
        index = (
            draws[start : start + chunk].astype(np.intp)
            + 256 * np.arange(min(chunk, octets - start))[:, None]
        )
        for column, table in enumerate(
            tables[:, start : start + chunk].reshape(values.shape[1], -1)
        ):
            totals[column] += np.take(table, index).sum(axis=0)
    by_draw: np.ndarray = totals.T
    return by_draw
