"""compare_groups: the difference, its bootstrap interval (vs scipy) and permutation p-value (vs exact)."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from scipy import stats

from culture_probe.errors import MetricInputError
from culture_probe.metrics import compare_groups

WEST = [0.9, 0.8, 0.75, 0.6]
ARAB = [0.5, 0.55, 0.3, 0.7]


def exact_permutation_p(a, b):
    """Reference: enumerate every split of the pooled scores into groups of the original sizes."""
    pooled = np.array(a + b)
    observed = abs(np.mean(a) - np.mean(b))
    extreme = total = 0
    for chosen in combinations(range(pooled.size), len(a)):
        mask = np.zeros(pooled.size, dtype=bool)
        mask[list(chosen)] = True
        total += 1
        extreme += abs(pooled[mask].mean() - pooled[~mask].mean()) >= observed - 1e-12
    return extreme / total


def test_difference_and_permutation_p_value_match_exact_enumeration():
    result = compare_groups(WEST + ARAB, ["west"] * 4 + ["arab"] * 4, reference="arab", n_resamples=20_000)
    comparison = result["comparisons"][0]
    assert (comparison["a"], comparison["b"]) == ("west", "arab")
    assert comparison["difference"] == pytest.approx(np.mean(WEST) - np.mean(ARAB))
    assert comparison["p_value"] == pytest.approx(exact_permutation_p(WEST, ARAB), abs=0.01)
    assert result["groups"] == {
        "arab": {"mean": pytest.approx(0.5125), "n": 4},
        "west": {"mean": pytest.approx(0.7625), "n": 4},
    }


def test_bootstrap_interval_matches_scipy_percentile_bootstrap():
    rng = np.random.default_rng(1)
    a, b = rng.normal(1.0, 1.0, 60), rng.normal(0.0, 2.0, 40)
    ours = compare_groups(np.concatenate([a, b]), ["a"] * 60 + ["b"] * 40, n_resamples=20_000)["comparisons"][0]
    reference = stats.bootstrap(
        (a, b),
        lambda x, y, axis: x.mean(axis) - y.mean(axis),
        n_resamples=20_000,
        method="percentile",
        random_state=2,
    ).confidence_interval
    assert ours["ci_low"] == pytest.approx(reference.low, abs=0.05)
    assert ours["ci_high"] == pytest.approx(reference.high, abs=0.05)


def test_identical_groups_have_p_one_and_a_zero_interval():
    comparison = compare_groups([1.0] * 6, ["x"] * 3 + ["y"] * 3, n_resamples=500)["comparisons"][0]
    assert comparison["p_value"] == 1.0
    assert (comparison["difference"], comparison["ci_low"], comparison["ci_high"]) == (0.0, 0.0, 0.0)


def test_separated_groups_reach_the_smallest_p_value():
    # 30 vs 30: a random split as extreme as the observed one has probability 2 / C(60, 30), about 1e-17. scipy's
    # two-sided Monte-Carlo p-value is twice the smaller one-sided (1 + #extreme) / (1 + n_resamples): 2 / 1000.
    comparison = compare_groups(list(range(60)), ["low"] * 30 + ["high"] * 30, n_resamples=999)["comparisons"][0]
    assert comparison["p_value"] == pytest.approx(2 / 1000)
    assert (comparison["a"], comparison["b"]) == ("high", "low") and comparison["ci_low"] > 0


def test_seeded_and_a_pair_does_not_depend_on_other_groups():
    scores, groups = WEST + ARAB, ["west"] * 4 + ["arab"] * 4
    first = compare_groups(scores, groups, n_resamples=300)
    assert first == compare_groups(scores, groups, n_resamples=300)
    assert first != compare_groups(scores, groups, n_resamples=300, seed=1)
    three = compare_groups([*scores, 0.1, 0.2], [*groups, "asia", "asia"], n_resamples=300)
    assert [c for c in three["comparisons"] if (c["a"], c["b"]) == ("arab", "west")] == first["comparisons"]
    assert [(c["a"], c["b"]) for c in three["comparisons"]] == [("arab", "asia"), ("arab", "west"), ("asia", "west")]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scores": [1.0, 2.0], "groups": ["x", "x"]}, "only the group 'x'"),
        ({"scores": [1.0, float("nan")], "groups": ["x", "y"]}, "`scores` has nan at index 1"),
        ({"scores": [1.0, 2.0], "groups": ["x", "y"], "reference": "z"}, "Unknown label 'z' in `reference`"),
        ({"scores": [1.0, 2.0], "groups": ["x"]}, "`groups` has 1 items but `scores` has 2"),
        ({"scores": [], "groups": []}, "`scores` is empty"),
    ],
)
def test_bad_input(kwargs, message):
    with pytest.raises(MetricInputError, match=message):
        compare_groups(**kwargs)
