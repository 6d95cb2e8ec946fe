"""RankC pinned to the released code's loop (an excerpt, below) on random rankings of different
sizes, to values worked out by hand, and to its properties; per-fact agreement pinned to its counts
and to McNemar's test.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special, stats

import culture_probe
from culture_probe.errors import MetricInputError
from culture_probe.metrics import agreement, list_metrics, rankc
from culture_probe.metrics._intervals import TANGO_CC

WEIGHTS = ("softmax", "norm1", "norm2")
E = math.e


# Excerpt of github.com/Betswish/Cross-Lingual-Consistency, 1_easyrun/RankC.py at commit
# 1830b419ce2f0cfc4635734e066f42c2adb91502: its `softmax` and the loop from `num_consistent = 0` to
# the printed result, unchanged except that the script's JSON inputs are arguments and the result is
# returned. Each language has its own candidate list (surface forms), aligned by position across
# languages; rankings hold surface forms.
def softmax(x):
    """Compute softmax values for each sets of scores in x."""
    return np.exp(x) / np.sum(np.exp(x), axis=0)


def released_rankc(lang1_rankings, lang2_rankings, cand_list1, cand_list2, weight_metric):
    num_consistent = 0

    for i in range(len(lang1_rankings)):
        ranking1 = lang1_rankings[i]
        ranking2 = lang2_rankings[i]

        candidate1 = cand_list1[i]
        candidate2 = cand_list2[i]

        order = [len(ranking1) - i for i in range(len(ranking1))]
        order = np.array(order)

        if weight_metric == "softmax":
            weight = softmax(order)
        elif weight_metric == "norm1":
            weight = order / np.sum(order)
        else:
            weight = np.power(order, 2) / np.sum(np.power(order, 2))

        for j in range(len(ranking1)):
            set1 = {candidate1.index(i) for i in ranking1[: j + 1]}
            set2 = {candidate2.index(i) for i in ranking2[: j + 1]}

            cover = set1.intersection(set2)
            num_consistent += weight[j] * (len(cover) / len(set1))

    return num_consistent / len(lang1_rankings)


# End of the excerpt.


def released_on_ids(rankings_a, rankings_b, weight):
    """The released loop on id rankings: each language gets its own surface form of every id, as in
    BMLAMA.
    """
    cand_a = [[f"{c}@a" for c in sorted(query)] for query in rankings_a]
    cand_b = [[f"{c}@b" for c in sorted(query)] for query in rankings_b]
    lang_a = [[f"{c}@a" for c in query] for query in rankings_a]
    lang_b = [[f"{c}@b" for c in query] for query in rankings_b]
    return released_rankc(lang_a, lang_b, cand_a, cand_b, weight)


@st.composite
def ranking_pairs(draw, max_candidates=40):
    """Queries of different sizes, each ranked independently in A and B, sometimes with a shared
    prefix.
    """
    sizes = draw(st.lists(st.integers(1, max_candidates), min_size=1, max_size=6))
    a, b = [], []
    for query, size in enumerate(sizes):
        ids = [f"Q{query}_{k}" for k in range(size)]
        ranked_a = draw(st.permutations(ids))
        ranked_b = draw(st.one_of(st.permutations(ids), st.just(ranked_a)))
        a.append(list(ranked_a))
        b.append(list(ranked_b))
    return a, b


@settings(max_examples=150, deadline=None)
@given(ranking_pairs(), st.sampled_from(WEIGHTS))
def test_rankc_is_the_released_codes_value_per_query_and_overall(pair, weight):
    a, b = pair
    result = rankc(a, b, weight=weight)
    expected = [released_on_ids([qa], [qb], weight) for qa, qb in zip(a, b, strict=True)]
    assert result["per_query"] == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert result["value"] == pytest.approx(released_on_ids(a, b, weight), rel=1e-12, abs=1e-12)
    assert (result["n_queries"], result["weight"]) == (len(a), weight)


def test_from_710_candidates_the_released_softmax_is_nan_and_ours_its_stable_form(monkeypatch):
    rng = np.random.default_rng(0)
    ids = [f"Q{k}" for k in range(800)]
    a, b = [list(rng.permutation(ids)) for _ in range(2)]
    with np.errstate(over="ignore", invalid="ignore"):
        assert math.isnan(released_on_ids([ids[:710]], [ids[:710]], "softmax"))
        assert released_on_ids([ids[:709]], [ids[:709]], "softmax") == pytest.approx(1.0)
    # the released loop, softmax made stable
    monkeypatch.setattr(sys.modules[__name__], "softmax", special.softmax)
    assert rankc([a], [b])["value"] == pytest.approx(
        released_on_ids([a], [b], "softmax"), rel=1e-12
    )
    assert rankc([ids[:710]], [ids[:710]])["value"] == pytest.approx(1.0)


@settings(max_examples=60, deadline=None)
@given(ranking_pairs(), st.sampled_from(WEIGHTS))
def test_identical_rankings_score_one_and_the_languages_can_swap(pair, weight):
    a, b = pair
    identical = rankc(a, a, weight=weight)
    assert identical["value"] == pytest.approx(1.0) and identical["per_query"] == pytest.approx(
        [1.0] * len(a)
    )
    assert rankc(a, b, weight=weight) == rankc(b, a, weight=weight)


# Reversed rankings, by hand: with n = 2 the top-1 sets differ and the top-2 sets agree (P@1 = 0,
# P@2 = 1); with n = 3, P@1 = 0, P@2 = 1/2, P@3 = 1. Weights from the scores (2, 1) and (3, 2, 1).
REVERSED = {
    (2, "softmax"): 1 / (E + 1),
    (2, "norm1"): 1 / 3,
    (2, "norm2"): 1 / 5,
    (3, "softmax"): (E / 2 + 1) / (E**2 + E + 1),
    (3, "norm1"): (2 / 2 + 1) / 6,
    (3, "norm2"): (4 / 2 + 1) / 14,
}


@pytest.mark.parametrize(("n", "weight"), sorted(REVERSED))
def test_reversed_rankings_match_the_hand_computed_value(n, weight):
    ranking = [f"c{k}" for k in range(n)]
    assert rankc([ranking], [ranking[::-1]], weight=weight)["value"] == pytest.approx(
        REVERSED[n, weight]
    )


def test_worked_example_of_the_docs():
    # docs/consistency.md: query 1 swaps the top two (P@1 = 0, P@2 = P@3 = 1), query 2 agrees
    a = [["egypt", "morocco", "france"], ["paris", "lyon"]]
    b = [["morocco", "egypt", "france"], ["paris", "lyon"]]
    first = (E + 1) / (E**2 + E + 1)
    assert rankc(a, b) == {
        "value": pytest.approx((first + 1) / 2),
        "per_query": pytest.approx([first, 1.0]),
        "n_queries": 2,
        "weight": "softmax",
    }
    assert round(first, 4) == 0.3348 and round((first + 1) / 2, 4) == 0.6674
    assert rankc(a, b, weight="norm1")["per_query"] == pytest.approx([(2 + 1) / 6, 1.0])


def test_the_evaluate_module_is_registered_and_passes_the_weight():
    assert "rankc" in list_metrics()
    a, b = [["x", "y", "z"], ["u", "v"]], [["z", "y", "x"], ["v", "u"]]
    result = culture_probe.load_metric("rankc").compute(rankings_a=a, rankings_b=b, weight="norm2")
    assert result == rankc(a, b, weight="norm2") and result["weight"] == "norm2"


@pytest.mark.parametrize(
    ("a", "b", "weight", "message"),
    [
        (
            [["x", "y"]],
            [["x", "z"]],
            "softmax",
            r"Query 0 ranks different candidates .*only in `rankings_a`, e.g\. \['y'\]",
        ),
        (
            [["x", "x", "y"]],
            [["x", "y"]],
            "softmax",
            r"`rankings_a\[0\]` ranks \['x'\] more than once",
        ),
        ([["x"], ["y"]], [["x"]], "softmax", r"`rankings_b` has 1 items but `rankings_a` has 2"),
        ([["x"]], [[]], "softmax", r"`rankings_b\[0\]` is empty"),
        (["xy"], [["x", "y"]], "softmax", r"`rankings_a\[0\]` must be a list of candidate ids"),
        (
            [["x"]],
            [["x"]],
            "softmax2",
            r"`weight` must be one of \['norm1', 'norm2', 'softmax'\], got 'softmax2'",
        ),
    ],
)
def test_bad_rankings_are_refused_naming_the_problem(a, b, weight, message):
    with pytest.raises(MetricInputError, match=message):
        rankc(a, b, weight=weight)


def mcnemar_p(gained: int, lost: int) -> float:
    """McNemar's test with Edwards' continuity correction: the corrected Tango score test at a
    difference of 0.
    """
    return float(stats.chi2.sf(max(abs(gained - lost) - 1, 0) ** 2 / (gained + lost), df=1))


def test_agreement_counts_the_table_and_pairs_the_difference():
    a = {f"f{k}": k < 12 for k in range(20)}  # f0-f11 right in A
    b = {f"f{k}": 3 <= k < 8 or k >= 17 for k in range(20)}  # f3-f7 and f17-f19 right in B
    result = agreement(a, b)
    assert {
        k: result[k] for k in ("n", "both_right", "right_only_a", "right_only_b", "both_wrong")
    } == {
        "n": 20,
        "both_right": 5,
        "right_only_a": 7,
        "right_only_b": 3,
        "both_wrong": 5,
    }
    assert (result["accuracy_a"], result["accuracy_b"]) == (60.0, 40.0)
    difference = result["difference"]
    assert difference["difference"] == pytest.approx(20.0) and difference["n"] == 20
    assert difference["method"] == TANGO_CC
    assert difference["p_value"] == pytest.approx(mcnemar_p(7, 3))
    assert difference["ci_low"] < 0 < difference["ci_high"]  # p = 0.34: the interval holds 0
    assert result["unpaired_a"] == result["unpaired_b"] == []


def test_agreement_returns_the_facts_probed_in_one_language_only():
    a = {"Q1": True, "Q2": False, "Q3": True, 4: True}
    b = {"Q1": True, "Q2": True, "Q5": False}
    result = agreement(a, b)
    assert result["n"] == 2 and (result["both_right"], result["right_only_b"]) == (1, 1)
    assert (result["unpaired_a"], result["unpaired_b"]) == (["4", "Q3"], ["Q5"])


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        (
            {"f1": True},
            {"f2": True},
            r"share no fact id \(1 only in A, e\.g\. \['f1'\]; 1 only in B",
        ),
        ([True, False], {"f1": True}, r"`correct_a` must map each fact id to True/False"),
        ({"f1": True}, {}, r"`correct_b` is empty"),
        ({"f1": True}, {"f1": "yes"}, r"`correct_b` must hold True/False .* index 0 is 'yes'"),
        ({1: True, "1": False}, {"1": True}, r"`correct_a` has fact ids that are equal as strings"),
    ],
)
def test_agreement_refuses_bad_input_naming_it(a, b, message):
    with pytest.raises(MetricInputError, match=message):
        agreement(a, b)
