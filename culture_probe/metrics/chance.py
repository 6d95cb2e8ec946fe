"""Chance levels: what a metric's value would be if the model answered at random, so that a reader
can tell knowledge from luck (a random model scores 15-20% P@1 on DLAMA's small candidate sets).

Each level is an exact expectation over a uniformly random ranking (or choice) of an item's own
candidates, not a simulation, and is aggregated over the run's units by the metric's own statistic
(`chance_value`): a run's chance level is what a random model would score on the very items the run
probed.
"""

from __future__ import annotations

import math
from functools import cache

from culture_probe.errors import MetricInputError
from culture_probe.metrics.results import UnitTable, point_value

P_AT_1 = (
    "exact expectation under a uniformly random ranking of each item's own candidates: g/N for g gold among N "
    "candidates, averaged over the units as the metric is"
)
AVERAGE_PRECISION = (
    "exact expectation of AP under a uniformly random ranking of each item's own candidates (g gold among N): "
    "(H_N + (g - 1)(N - H_N)/(N - 1))/N, H_N the N-th harmonic number, averaged as the metric is"
)
CHOICE = "a uniformly random choice among each item's {options}, averaged over the units as the metric is"


def _check(n_gold: int, n_candidates: int) -> None:
    if n_candidates < 1 or not 0 <= n_gold <= n_candidates:
        raise MetricInputError(
            f"A random ranking needs 0 <= gold <= candidates and at least one candidate, got {n_gold} gold among "
            f"{n_candidates}."
        )


def random_precision_at_1(n_gold: int, n_candidates: int) -> float:
    """Expected P@1 (0-1) of a uniformly random ranking of `n_candidates` of which `n_gold` are
    right: g/N.
    """
    _check(n_gold, n_candidates)
    return n_gold / n_candidates


@cache
def harmonic(n: int) -> float:
    """H_n = 1 + 1/2 + ... + 1/n."""
    return math.fsum(1 / k for k in range(1, n + 1))


def random_average_precision(
    n_gold: int, n_candidates: int, denominator: int | None = None
) -> float:
    """Expected AP (0-1) of a uniformly random ranking of `n_candidates` of which `n_gold` are
    relevant.

    AP = (1/D) Σ_k rel(k) · P@k. Position k holds a relevant candidate with probability g/N, and
    positions j != k both do with probability g(g-1)/(N(N-1)); so with D = g, E[AP] = (1/N) Σ_k
    (1/k)(1 + (k-1)(g-1)/(N-1)) = (H_N + (g-1)(N - H_N)/(N-1)) / N. `denominator` D > g counts gold
    items absent from the ranking (they add nothing, as in `average_precision`), scaling the
    expectation by g/D.
    """
    _check(n_gold, n_candidates)
    denominator = n_gold if denominator is None else denominator
    if denominator < n_gold or denominator < 1:
        raise MetricInputError(
            f"AP divides by at least its {n_gold} ranked gold and by one, got {denominator}."
        )
    if n_gold == 0:
        return 0.0
    h, n = harmonic(n_candidates), n_candidates
    expected = 1.0 if n == 1 else (h + (n_gold - 1) * (n - h) / (n - 1)) / n
    return expected * n_gold / denominator


def chance_value(table: UnitTable) -> float | None:
    """The metric's statistic of a table whose values are each unit's chance expectation: a random
    model's score on these units, averaged exactly as the metric averages (replicates, then units,
    then macro groups). None without a unit.
    """
    return point_value(table)
