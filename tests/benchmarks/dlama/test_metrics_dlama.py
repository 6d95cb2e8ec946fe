"""DLAMA: P@k (micro, tie rule, skipped facts) and object entropy, against specs/dlama.md 5.3 worked
by hand.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from culture_probe.benchmarks.dlama.metrics import hits_at_k, object_entropy, precision_at_k
from culture_probe.errors import MetricInputError
from culture_probe.metrics import format_score

CANDIDATES = ["Africa", "Asia", "Europe", "North America"]
N_TOKENS = [1, 1, 1, 2]
REFERENCES = [["Africa", "Asia"], ["Africa"], ["Asia"], ["Europe"], ["North America"]]
SCORES = [
    [-1.10, -1.60, -2.40, -2.50],  # Egypt
    [-1.90, -2.70, -1.70, -3.20],  # Morocco
    [-2.30, -0.90, -2.60, -3.40],  # Oman
    [-2.80, -2.90, -0.70, -2.20],  # France
    [-2.60, -3.00, -1.20, -1.50],  # Canada
]
CULTURES = ["arab", "arab", "arab", "west", "west"]


def test_worked_example_is_micro_averaged_per_culture_and_pair():
    result = precision_at_k(
        [CANDIDATES] * 5, REFERENCES, scores=SCORES, n_tokens=[N_TOKENS] * 5, groups=CULTURES
    )
    assert result["precision"] == pytest.approx(100 * 3 / 5)  # not the macro mean 58.3
    assert result["groups"]["arab"]["precision"] == pytest.approx(100 * 2 / 3)
    assert result["groups"]["west"]["precision"] == pytest.approx(100 * 1 / 2)
    assert format_score(result["groups"]["arab"]["precision"], 1) == "66.7"
    assert (result["n"], result["n_skipped"], result["k"]) == (5, 0, 1)


def test_top1_labels_and_ranked_lists_give_the_same_result():
    top1 = ["Africa", "Europe", "Asia", "Europe", "Europe"]
    assert precision_at_k(top1, REFERENCES)["precision"] == pytest.approx(60.0)
    ranked = [[label, *(c for c in CANDIDATES if c != label)] for label in top1]
    assert precision_at_k(ranked, REFERENCES)["precision"] == pytest.approx(60.0)
    # Morocco's Africa (-1.90) and Canada's North America (-1.50) are ranked second: both found at
    # k=2.
    assert precision_at_k([CANDIDATES] * 5, REFERENCES, k=2, scores=SCORES)[
        "precision"
    ] == pytest.approx(100.0)


def test_tie_goes_to_fewer_tokens_then_code_point_order():
    morocco_tied = [-1.70, -2.70, -1.70, -3.20]
    assert hits_at_k([CANDIDATES], [["Africa"]], scores=[morocco_tied]).tolist() == [1.0]
    # Same score, but "Africa" now has more tokens: "Europe" wins despite coming later in code-point
    # order.
    assert hits_at_k(
        [CANDIDATES], [["Africa"]], scores=[morocco_tied], n_tokens=[[3, 1, 1, 2]]
    ).tolist() == [0.0]


def test_several_groupings_give_one_table_each():
    predicates = ["P30", "P30", "P36", "P30", "P36"]
    result = precision_at_k(
        [CANDIDATES] * 5,
        REFERENCES,
        scores=SCORES,
        groups={"culture": CULTURES, "predicate": predicates},
    )
    assert result["groups"]["culture"]["west"]["precision"] == pytest.approx(50.0)
    # P30: Egypt hit, Morocco miss, France hit; P36: Oman hit, Canada miss.
    assert result["groups"]["predicate"]["P30"] == {
        "precision": pytest.approx(200 / 3),
        "n": 3,
        "n_skipped": 0,
    }
    with pytest.raises(
        MetricInputError, match="`groups\\['predicate'\\]` has 1 items but there are 5"
    ):
        precision_at_k(
            ["Africa"] * 5, REFERENCES, groups={"culture": CULTURES, "predicate": ["P30"]}
        )


def test_facts_without_labels_are_skipped_and_an_empty_group_is_none():
    result = precision_at_k(["Africa", "Asia"], [["Africa"], []], groups=["arab", "west"])
    assert (result["precision"], result["n"], result["n_skipped"]) == (100.0, 1, 1)
    assert result["groups"]["west"] == {"precision": None, "n": 0, "n_skipped": 1}


def test_display_rounds_half_up():
    assert format_score(58.25, 1) == "58.3"  # Python's round() would give 58.2
    assert format_score(None) == "-"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"predictions": ["a", "b"], "references": [["a"]]},
            "`references` has 1 items but `predictions` has 2",
        ),
        ({"predictions": [], "references": []}, "`predictions` is empty"),
        ({"predictions": ["a"], "references": [["a"]], "k": 0}, "`k` must be a positive integer"),
        ({"predictions": [[]], "references": [["a"]]}, "`predictions` at index 0 is an empty list"),
        (
            {"predictions": [["a", "b"]], "references": [["a"]], "scores": [[0.0, math.nan]]},
            "`scores\\[0\\]` has nan",
        ),
        (
            {"predictions": [["a", "b"]], "references": [["a"]], "scores": [[0.0]]},
            "one value per candidate",
        ),
        (
            {"predictions": ["a"], "references": [["a"]], "groups": ["x", "y"]},
            "`groups` has 2 items",
        ),
    ],
)
def test_bad_input_names_the_argument(kwargs, message):
    with pytest.raises(MetricInputError, match=message):
        precision_at_k(**kwargs)


def slow_hit(candidates, scores, tokens, gold, k):
    """Reference: a valid answer hits when fewer than k candidates beat it under the documented
    order.
    """
    keys = {c: (-s, t, c) for c, s, t in zip(candidates, scores, tokens, strict=True)}
    return any(sum(keys[o] < keys[g] for o in candidates) < k for g in gold if g in keys)


items = st.integers(2, 6).flatmap(
    lambda n: st.tuples(
        # few values: many ties
        st.lists(st.sampled_from([-1.0, -2.0, -3.0]), min_size=n, max_size=n),
        st.lists(st.integers(1, 2), min_size=n, max_size=n),
        st.sets(st.integers(0, n - 1), min_size=1),
        st.permutations(range(n)),
        st.integers(1, n),
    )
)


@settings(max_examples=150, deadline=None)
@given(items)
def test_pk_depends_only_on_the_tie_rule_not_on_candidate_order(item):
    scores, tokens, gold_idx, order, k = item
    names = [f"c{i}" for i in range(len(scores))]
    gold = [names[i] for i in gold_idx]
    shuffled = [names[i] for i in order]
    result = hits_at_k(
        [shuffled],
        [gold],
        k=k,
        scores=[[scores[i] for i in order]],
        n_tokens=[[tokens[i] for i in order]],
    )
    assert result.tolist() == [float(slow_hit(names, scores, tokens, gold, k))]
    assert (
        hits_at_k([names], [gold], k=k, scores=[scores], n_tokens=[tokens]).tolist()
        == result.tolist()
    )


def test_object_entropy_worked_example():
    # Counts Q2 = 2, others 1; kept Q2, Q2, Q3, Q4 (Q4 beats Q5 on the tie rule) -> p = (.5, .25,
    # .25).
    result = object_entropy([["Q1", "Q2"], ["Q2"], ["Q3"], ["Q5", "Q4"]], ["P30"] * 4, ["arab"] * 4)
    expected = -(0.5 * math.log2(0.5) + 2 * 0.25 * math.log2(0.25))
    assert result["entropy"] == {"arab": pytest.approx(expected)} and expected == 1.5
    assert result["per_predicate"] == {"arab": {"P30": pytest.approx(1.5)}}


def test_object_entropy_ties_use_numeric_qid_order_and_cultures_are_unweighted_means():
    # Q10 and Q4 both appear once; Q4 < Q10 numerically (not as strings), so every fact keeps a
    # different object unless the tie rule is numeric: facts {Q10, Q4} and {Q4} keep Q4 both ->
    # entropy 0.
    result = object_entropy(
        [["Q10", "Q4"], ["Q4"], ["Q7"], ["Q7"], ["Q7"], []],
        ["P1", "P1", "P2", "P2", "P2", "P2"],
        ["west"] * 6,
    )
    assert result["per_predicate"]["west"] == {"P1": 0.0, "P2": 0.0}
    assert result["n_skipped"] == 1
    mixed = object_entropy(
        [["Q1"], ["Q2"], ["Q3"], ["Q3"], ["Q3"], ["Q3"]],
        ["P1", "P1", "P2", "P2", "P2", "P2"],
        ["west"] * 6,
    )
    # not weighted by the 2 vs 4 facts
    assert mixed["entropy"]["west"] == pytest.approx((1.0 + 0.0) / 2)


def test_object_entropy_rejects_input_without_objects():
    with pytest.raises(MetricInputError, match="`objects` has no fact"):
        object_entropy([[]], ["P1"], ["arab"])
    with pytest.raises(MetricInputError, match="`culture` has 1 items but `objects` has 2"):
        object_entropy([["Q1"], ["Q2"]], ["P1", "P1"], ["arab"])
