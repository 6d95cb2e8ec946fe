"""CAMeL: CBS (specs/camel.md 5.2 by hand, pairwise reference, swap symmetry), odds ratios, fairness
gaps.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from culture_probe.benchmarks.camel.metrics import cbs, fairness_gap, odds_ratio
from culture_probe.errors import MetricInputError


def rows(prompts):
    """(prompt, arab scores, western scores) -> the metric's per-filler columns."""
    prompt_id, culture, score = [], [], []
    for prompt, arab, western in prompts:
        for name, values in (("arab", arab), ("western", western)):
            prompt_id += [prompt] * len(values)
            culture += [name] * len(values)
            score += list(values)
    return prompt_id, culture, score


WORKED = [("t1", (-2.0, -3.5, -1.0), (-2.5, -1.0)), ("t2", (-1.0, -1.5, -0.5), (-3.0, -2.0))]


def test_cbs_worked_example():
    result = cbs(*rows(WORKED), entity_type=["food"] * 10)
    # t1: b1 beats -3.5 (1), b2 beats -2.0 and -3.5 and ties -1.0 (2): 3/6; t2: no Western win.
    assert result["per_type"]["food"] == pytest.approx((100 * 3 / 6 + 0.0) / 2) == 25.0
    assert (
        result["cbs"] == pytest.approx(25.0)
        and result["n_pairs"] == 12
        and result["n_prompts"] == 2
    )
    with_ties = cbs(*rows(WORKED[:1]), tie_value=0.5)
    assert with_ties["cbs"] == pytest.approx(100 * 3.5 / 6) and round(with_ties["cbs"], 2) == 58.33


def test_cbs_averages_prompts_then_runs_then_types():
    prompt_id, culture, score = rows([("p", (0.0,), (1.0,)), ("q", (1.0,), (0.0,))])
    result = cbs(
        prompt_id * 2 + ["r", "r"],
        culture * 2 + ["arab", "western"],
        score + [1.0, 0.0, 1.0, 0.0] + [0.0, 1.0],
        entity_type=["food"] * 8 + ["names", "names"],
        run=["0"] * 4 + ["1"] * 4 + ["0", "0"],
    )
    # food, run 0: p 100, q 0 -> 50; run 1 (scores 1, 0, 1, 0): p 0, q 0 -> 0. names, run 0: 100.
    assert result["per_type"] == {"food": pytest.approx(25.0), "names": pytest.approx(100.0)}
    assert result["per_type_std"]["food"] == pytest.approx(
        math.sqrt(((50 - 25) ** 2 + (0 - 25) ** 2) / 1)
    )
    assert result["per_type_std"]["names"] is None  # one run: no sample std
    assert result["cbs"] == pytest.approx((25.0 + 100.0) / 2)
    assert result["per_run"] == {"0": pytest.approx((50 + 100) / 2), "1": pytest.approx(0.0)}


def slow_cbs(arab, western, tie_value=0.0):
    pairs = [(a, b) for a in arab for b in western]
    return 100 * sum(1.0 if b > a else tie_value if b == a else 0.0 for a, b in pairs) / len(pairs)


score_lists = st.lists(st.integers(-5, 5).map(float), min_size=1, max_size=8)


@settings(max_examples=150, deadline=None)
@given(score_lists, score_lists, st.sampled_from([0.0, 0.5, 1.0]))
def test_cbs_equals_the_pairwise_definition(arab, western, tie_value):
    result = cbs(*rows([("t", arab, western)]), tie_value=tie_value)
    assert result["cbs"] == pytest.approx(slow_cbs(arab, western, tie_value))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-50, 50), min_size=2, max_size=12, unique=True), st.data())
def test_swapping_cultures_gives_100_minus_cbs_without_ties(values, data):
    split = data.draw(st.integers(1, len(values) - 1))
    prompt_id, culture, score = rows([("t", values[:split], values[split:])])
    swapped = ["western" if c == "arab" else "arab" for c in culture]
    assert cbs(prompt_id, swapped, score)["cbs"] == pytest.approx(
        100 - cbs(prompt_id, culture, score)["cbs"]
    )


@pytest.mark.parametrize(
    ("columns", "options", "message"),
    [
        ((["t", "t"], ["arab", "arab"], [0.0, 1.0]), {}, "Prompt 't' .* has no 'western' scores"),
        ((["t", "t"], ["arab", "western"], [0.0, math.inf]), {}, "`score` has inf at index 1"),
        ((["t", "t"], ["arab", "West"], [0.0, 1.0]), {}, "Unknown label 'West' in `culture`"),
        ((["t", "t"], ["arab", "western"], [0.0]), {}, "`score` has 1 items but `prompt_id` has 2"),
        (
            (["t", "t"], ["arab", "western"], [0.0, 1.0]),
            {"tie_value": 2},
            "`tie_value` must be in \\[0, 1\\]",
        ),
        ((["t", "t"], ["arab", "western"], [0.0, 1.0]), {"run": [0]}, "`run` has 1 items"),
    ],
)
def test_cbs_bad_input(columns, options, message):
    with pytest.raises(MetricInputError, match=message):
        cbs(*columns, **options)


WORDS = ["poor", "rich", "rich", "rich", "poor", "poor", "poor", "rich"]
WORD_CULTURES = ["western"] * 4 + ["arab"] * 4


def test_odds_ratio_paper_formula_and_woolf_interval():
    result = odds_ratio(WORDS, WORD_CULTURES, smoothing=0.0)
    rich = result["words"]["rich"]
    # Western: rich 3 of 4 -> odds 3/1; Arab: rich 1 of 4 -> odds 1/3.
    assert rich["odds_ratio"] == pytest.approx((3 / 1) / (1 / 3))
    half_width = 1.959964 * math.sqrt(1 / 3 + 1 / 1 + 1 / 1 + 1 / 3)
    assert rich["ci_low"] == pytest.approx(math.exp(math.log(9) - half_width), rel=1e-5)
    assert rich["ci_high"] == pytest.approx(math.exp(math.log(9) + half_width), rel=1e-5)
    assert result["words"]["poor"]["odds_ratio"] == pytest.approx(1 / 9)
    assert list(result["words"]) == ["rich", "poor"]  # most Western first
    assert (rich["count_western"], rich["count_arab"], result["n_western"], result["n_arab"]) == (
        3,
        1,
        4,
        4,
    )


def test_odds_ratio_smoothing_keeps_words_seen_in_one_culture_finite():
    words, cultures = ["rich", "kind", "kind", "kind"], ["western", "western", "arab", "arab"]
    smoothed = odds_ratio(words, cultures)["words"]["rich"]
    assert smoothed["odds_ratio"] == pytest.approx(
        ((1 + 0.5) / (1 + 0.5)) / ((0 + 0.5) / (2 + 0.5))
    )
    raw = odds_ratio(words, cultures, smoothing=0.0)["words"]["rich"]
    assert raw["odds_ratio"] == math.inf and (raw["ci_low"], raw["ci_high"]) == (0.0, math.inf)
    with pytest.raises(MetricInputError, match="`smoothing` must be >= 0"):
        odds_ratio(words, cultures, smoothing=-1)


SENTIMENT = {
    "predictions": ["neg", "pos", "neg", "neg", "pos", "pos", "neg", "pos"],
    "references": ["pos", "pos", "neg", "neg", "pos", "pos", "neg", "neg"],
    "culture": ["arab"] * 4 + ["western"] * 4,
}


def test_fairness_gap_by_hand():
    result = fairness_gap(**SENTIMENT, n_resamples=300)
    # Arab: pos F1 = 2/3 (tp 1, fn 1), neg F1 = 4/5 (tp 2, fp 1); Western: pos 4/5, neg 2/3: equal
    # macro F1.
    assert result["arab"]["f1"] == pytest.approx((2 / 3 + 4 / 5) / 2) == result["western"]["f1"]
    assert result["arab"]["per_label"]["pos"] == {
        "f1": pytest.approx(2 / 3),
        "fnr": 0.5,
        "fpr": 0.0,
    }
    gap = result["gap"]
    assert gap["f1"]["value"] == pytest.approx(0.0)
    assert (gap["fnr"]["pos"]["value"], gap["fnr"]["neg"]["value"]) == (0.5, -0.5)
    assert (gap["fpr"]["neg"]["value"], gap["fpr"]["pos"]["value"]) == (0.5, -0.5)
    assert gap["f1"]["ci_low"] <= 0.0 <= gap["f1"]["ci_high"]
    # A draw of 4 items can miss a label, leaving its rate undefined: such a rate gets no interval,
    # never one computed from the draws that happened to be defined. Ten copies of each item make
    # every draw hold both.
    assert gap["fnr"]["pos"]["ci_low"] is None
    larger = fairness_gap(**{k: v * 10 for k, v in SENTIMENT.items()}, n_resamples=300)["gap"]
    for interval in (larger["f1"], larger["fnr"]["pos"], larger["fpr"]["neg"]):
        assert interval["ci_low"] < interval["value"] < interval["ci_high"]
    assert result == fairness_gap(**SENTIMENT, n_resamples=300)  # seeded
    assert result["labels"] == ["neg", "pos"] and result["n_resamples"] == 300


def test_fairness_gap_undefined_rate_is_none():
    result = fairness_gap(
        ["pos", "pos"], ["pos", "pos"], ["arab", "western"], labels=["pos", "neg"], n_resamples=50
    )
    # no gold "neg": the rate has no denominator
    assert result["arab"]["per_label"]["neg"]["fnr"] is None
    assert result["gap"]["fnr"]["neg"] == {"value": None, "ci_low": None, "ci_high": None}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"culture": ["arab"] * 8}, "`culture` has no 'western' item"),
        ({"labels": ["pos"]}, "Unknown label 'neg' in `references`"),
        ({"n_resamples": 0}, "`n_resamples` must be a positive integer"),
        ({"confidence": 95}, "`confidence` must be between 0 and 1"),
    ],
)
def test_fairness_gap_bad_input(change, message):
    with pytest.raises(MetricInputError, match=message):
        fairness_gap(**{**SENTIMENT, **change})
