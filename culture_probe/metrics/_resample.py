"""Seeded resampling shared by the metrics that report uncertainty (compare_groups, fairness_gap) and the
report's error bars (mean_interval).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

from culture_probe.errors import MetricInputError
from culture_probe.metrics._checks import none_if_nan

# Resamples are drawn in chunks so that memory stays bounded (chunk x items) whatever n_resamples is.
_CHUNK_CELLS = 2_000_000


def check_resampling(n_resamples: int, confidence: float) -> None:
    """Validate the two options every resampling metric takes."""
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise MetricInputError(f"`n_resamples` must be a positive integer, got {n_resamples!r}.")
    if not 0 < confidence < 1:
        raise MetricInputError(f"`confidence` must be between 0 and 1 (e.g. 0.95), got {confidence!r}.")


def chunks(n_resamples: int, n_items: int) -> Iterator[int]:
    """Sizes of the resample chunks: together n_resamples, each at most ~2M drawn indices."""
    size = max(1, _CHUNK_CELLS // max(n_items, 1))
    for start in range(0, n_resamples, size):
        yield min(size, n_resamples - start)


def bootstrap(
    statistic: Callable[[list[np.ndarray]], np.ndarray],
    sizes: list[int],
    n_resamples: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Stratified bootstrap: resample each stratum with replacement, keeping its size.

    `statistic` gets one (chunk, size) index array per stratum and returns the chunk's statistics (chunk, ...).
    """
    out = []
    for chunk in chunks(n_resamples, sum(sizes)):
        out.append(statistic([rng.integers(0, size, size=(chunk, size)) for size in sizes]))
    return np.concatenate(out, axis=0)


def percentile_interval(samples: np.ndarray, confidence: float) -> tuple[float | None, float | None]:
    """The percentile interval of bootstrap statistics; resamples where the statistic is undefined are ignored."""
    tail = 100 * (1 - confidence) / 2
    if np.all(np.isnan(samples)):
        return None, None
    low, high = np.nanpercentile(samples, [tail, 100 - tail])
    return none_if_nan(low), none_if_nan(high)


def mean_interval(values: Sequence[float], *, confidence: float = 0.95, n_resamples: int = 2000,
                  seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of `values` (seeded, so a report draws the same bars again)."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise MetricInputError("mean_interval needs at least one value.")
    check_resampling(n_resamples, confidence)
    means = bootstrap(lambda index: data[index[0]].mean(axis=1), [data.size], n_resamples,
                      np.random.default_rng(seed))
    low, high = percentile_interval(means, confidence)
    return float(low), float(high)
