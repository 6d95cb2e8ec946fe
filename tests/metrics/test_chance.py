"""Chance levels: the closed forms equal the expectation over every ranking (brute force, through
the library's own P@1 and AP), and a run's chance level is aggregated exactly as its metric is.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from culture_probe.benchmarks.dlama.metrics import hits_at_k
from culture_probe.benchmarks.fmlama.metrics import average_precision
from culture_probe.errors import MetricInputError
from culture_probe.metrics.chance import (
    chance_value,
    random_average_precision,
    random_precision_at_1,
)
from culture_probe.metrics.results import UnitTable, estimate

SIZES = [(n, g) for n in range(1, 7) for g in range(n + 1)]


def every_ranking(n: int) -> list[tuple[str, ...]]:
    return list(itertools.permutations([f"c{i}" for i in range(n)]))


@pytest.mark.parametrize(("n", "g"), SIZES)
def test_random_p_at_1_is_the_mean_over_every_ranking(n, g):
    rankings = every_ranking(n)
    gold = [f"c{i}" for i in range(g)]
    hits = hits_at_k([list(r) for r in rankings], [gold] * len(rankings))
    # an item without gold: the metric skips it, chance 0
    expected = float(np.nan_to_num(hits, nan=0.0).mean())
    assert random_precision_at_1(g, n) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(("n", "g"), [(n, g) for n, g in SIZES if g])
def test_random_average_precision_is_the_mean_ap_over_every_ranking(n, g):
    gold = {f"c{i}" for i in range(g)}
    mean_ap = math.fsum(average_precision(r, gold) for r in every_ranking(n)) / math.factorial(n)
    assert random_average_precision(g, n) == pytest.approx(mean_ap, abs=1e-12)


def test_gold_missing_from_the_ranking_scales_ap_as_the_metric_does():
    """A gold item the ranking lacks (FmLAMA's F2 length cap) counts in AP's denominator and adds
    nothing.
    """
    ranked, absent = {"c0", "c1"}, {"gone"}
    mean_ap = math.fsum(
        average_precision(r, ranked | absent) for r in every_ranking(5)
    ) / math.factorial(5)
    assert random_average_precision(2, 5, denominator=3) == pytest.approx(mean_ap, abs=1e-12)
    assert random_average_precision(0, 5, denominator=2) == 0.0


def test_closed_forms_at_the_edges():
    assert random_average_precision(1, 1) == 1.0 and random_average_precision(
        4, 4
    ) == pytest.approx(1.0)
    # E[1/rank]
    assert random_average_precision(1, 4) == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)
    for bad in ((3, 2), (-1, 2), (0, 0)):
        with pytest.raises(MetricInputError):
            random_precision_at_1(*bad)
    with pytest.raises(MetricInputError, match="divides"):
        random_average_precision(2, 5, denominator=1)


def test_a_run_chance_level_is_aggregated_as_the_metric():
    """Replicates, then units, then macro groups with equal weight: the same statistic as the
    metric's value.
    """
    values = np.array([[50.0, 25.0], [100.0, np.nan], [10.0, 30.0]])
    table = UnitTable("m", ("a", "b", "c"), values, {"type": ["x", "x", "y"]}, macro="type")
    group_x = (np.mean([50.0, 100.0]) + 25.0) / 2  # replicate means over the units that have them
    assert chance_value(table) == pytest.approx((group_x + 20.0) / 2)
    assert chance_value(table) == pytest.approx(estimate(table)["value"])
    # no unit with a value
    assert chance_value(UnitTable("m", ("a",), np.array([[np.nan]]))) is None
