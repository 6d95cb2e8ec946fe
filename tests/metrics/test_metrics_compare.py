"""compare_groups: the difference, its permutation p-value (vs exact enumeration) and the interval
that inverts the same test; proportions: the Miettinen-Nurminen score interval and test. Interval
and p never disagree.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from scipy import stats

from culture_probe.errors import MetricInputError
from culture_probe.metrics import compare_groups
from culture_probe.metrics.compare import holm

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
    result = compare_groups(
        WEST + ARAB, ["west"] * 4 + ["arab"] * 4, reference="arab", n_resamples=20_000
    )
    comparison = result["comparisons"][0]
    assert (comparison["a"], comparison["b"]) == ("west", "arab")
    assert comparison["difference"] == pytest.approx(np.mean(WEST) - np.mean(ARAB))
    assert comparison["p_value"] == pytest.approx(exact_permutation_p(WEST, ARAB), abs=0.01)
    assert result["groups"] == {
        "arab": {"mean": pytest.approx(0.5125), "n": 4},
        "west": {"mean": pytest.approx(0.7625), "n": 4},
    }


def _excludes_zero(comparison):
    return comparison["ci_low"] is not None and (
        comparison["ci_low"] > 0 or comparison["ci_high"] < 0
    )


def test_the_interval_holds_exactly_the_shifts_the_permutation_test_does_not_reject():
    rng = np.random.default_rng(1)
    a, b = rng.normal(1.0, 1.0, 60), rng.normal(0.0, 2.0, 40)
    ours = compare_groups(np.concatenate([a, b]), ["a"] * 60 + ["b"] * 40, n_resamples=5000)[
        "comparisons"
    ][0]
    welch = stats.ttest_ind(a, b, equal_var=False).confidence_interval()
    assert (ours["ci_low"], ours["ci_high"]) == pytest.approx((welch.low, welch.high), abs=0.15)

    def p_at(shift):  # the same permutation test of "mean(a) - mean(b) = shift", by scipy
        return stats.permutation_test(
            (a - shift, b),
            lambda x, y, axis=-1: x.mean(axis) - y.mean(axis),
            n_resamples=5000,
            rng=0,
        ).pvalue

    for end, inward in (("ci_low", 0.05), ("ci_high", -0.05)):
        assert p_at(ours[end] + inward) > 0.05 > p_at(ours[end] - inward)


def test_interval_and_p_value_agree_for_any_scores_and_for_proportions():
    rng = np.random.default_rng(4)
    for _ in range(60):
        n_a, n_b = (int(x) for x in rng.integers(3, 25, 2))
        shift = rng.normal(0, 0.5)
        scores = np.concatenate([rng.normal(shift, 1, n_a), rng.normal(0, 1, n_b)])
        groups = ["a"] * n_a + ["b"] * n_b
        comparison = compare_groups(scores, groups, n_resamples=500)["comparisons"][0]
        assert _excludes_zero(comparison) == (comparison["p_value"] < 0.05), comparison
        hits = (
            rng.random(n_a + n_b) < np.r_[np.full(n_a, rng.random()), np.full(n_b, rng.random())]
        ) * 100.0
        comparison = compare_groups(hits, groups, success=100.0)["comparisons"][0]
        assert _excludes_zero(comparison) == (comparison["p_value"] < 0.05), comparison


def test_proportions_get_the_miettinen_nurminen_score_test():
    hits = [100.0] * 15 + [0.0] * 5 + [100.0] * 6 + [0.0] * 14  # 15 of 20 against 6 of 20
    comparison = compare_groups(
        hits, ["arab"] * 20 + ["west"] * 20, reference="west", success=100.0
    )["comparisons"][0]
    # MN's N / (N - 1)
    chi2 = stats.chi2_contingency([[15, 5], [6, 14]], correction=False).statistic * 39 / 40
    assert comparison["difference"] == pytest.approx(45.0) and comparison["method"].startswith(
        "Miettinen-Nurminen"
    )
    assert comparison["p_value"] == pytest.approx(stats.chi2.sf(chi2, 1))
    assert 0 < comparison["ci_low"] < 45 < comparison["ci_high"] < 100
    none = compare_groups([0.0] * 40, ["arab"] * 20 + ["west"] * 20, success=100.0)["comparisons"][
        0
    ]
    assert (
        none["p_value"] == 1.0
        and none["ci_low"] == pytest.approx(-none["ci_high"])
        and none["ci_high"] > 10
    )
    with pytest.raises(MetricInputError, match="must be 0 or 100"):
        compare_groups([50.0, 0.0], ["a", "b"], success=100.0)


def test_identical_groups_have_p_one_and_no_interval_with_the_reason():
    comparison = compare_groups([1.0] * 6, ["x"] * 3 + ["y"] * 3, n_resamples=500)["comparisons"][0]
    assert comparison["p_value"] == 1.0 and comparison["difference"] == 0.0
    assert comparison["ci_low"] is None and "no spread" in comparison["no_interval"]


def test_separated_groups_reach_the_smallest_p_value():
    # 30 vs 30: a random split as extreme as the observed one has probability 2 / C(60, 30), about
    # 1e-17; the Monte-Carlo p-value counts the observed split once more: (1 + #extreme) / (1 +
    # n_resamples) = 1 / 1000.
    comparison = compare_groups(list(range(60)), ["low"] * 30 + ["high"] * 30, n_resamples=999)[
        "comparisons"
    ][0]
    assert comparison["p_value"] == pytest.approx(1 / 1000)
    assert (comparison["a"], comparison["b"]) == ("high", "low") and comparison["ci_low"] > 0


def test_too_few_items_for_any_rejection_give_no_interval():
    comparison = compare_groups([1.0, 2.0, 3.0, 4.0], ["x", "x", "y", "y"])["comparisons"][0]
    assert (
        comparison["p_value"] == pytest.approx(1 / 3)
        and "no shift can be rejected" in comparison["no_interval"]
    )


def test_seeded_and_a_pair_does_not_depend_on_other_groups():
    # C(24, 12) splits: drawn, not enumerated
    scores, groups = WEST * 3 + ARAB * 3, ["west"] * 12 + ["arab"] * 12
    first = compare_groups(scores, groups, n_resamples=300)
    assert first == compare_groups(scores, groups, n_resamples=300)
    assert first != compare_groups(scores, groups, n_resamples=300, seed=1)
    three = compare_groups([*scores, 0.1, 0.2], [*groups, "asia", "asia"], n_resamples=300)
    pair = next(c for c in three["comparisons"] if (c["a"], c["b"]) == ("arab", "west"))
    # the pair's own test does not move; only its Holm-adjusted p, which is the family's by
    # definition
    assert {k: v for k, v in pair.items() if k != "p_holm"} == {
        k: v for k, v in first["comparisons"][0].items() if k != "p_holm"
    }
    assert [(c["a"], c["b"]) for c in three["comparisons"]] == [
        ("arab", "asia"),
        ("arab", "west"),
        ("asia", "west"),
    ]


def test_several_pairs_carry_holm_adjusted_p_values():
    """Three groups make three tests: each pair says so and carries its p-value adjusted over them
    (one pair: the adjusted p is the raw one).
    """
    scores, groups = WEST * 3 + ARAB * 3, ["west"] * 12 + ["arab"] * 12
    one = compare_groups(scores, groups, n_resamples=300)
    assert (
        one["n_tests"] == 1 and one["comparisons"][0]["p_holm"] == one["comparisons"][0]["p_value"]
    )
    three = compare_groups(
        [*scores, 0.1, 0.2, 0.3], [*groups, "asia", "asia", "asia"], n_resamples=300
    )
    raw = [c["p_value"] for c in three["comparisons"]]
    assert three["n_tests"] == 3 and [c["p_holm"] for c in three["comparisons"]] == holm(raw)
    assert all(c["p_holm"] >= c["p_value"] for c in three["comparisons"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scores": [1.0, 2.0], "groups": ["x", "x"]}, "only the group 'x'"),
        ({"scores": [1.0, float("nan")], "groups": ["x", "y"]}, "`scores` has nan at index 1"),
        (
            {"scores": [1.0, 2.0], "groups": ["x", "y"], "reference": "z"},
            "Unknown label 'z' in `reference`",
        ),
        ({"scores": [1.0, 2.0], "groups": ["x"]}, "`groups` has 1 items but `scores` has 2"),
        ({"scores": [], "groups": []}, "`scores` is empty"),
    ],
)
def test_bad_input(kwargs, message):
    with pytest.raises(MetricInputError, match=message):
        compare_groups(**kwargs)
