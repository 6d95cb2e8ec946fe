"""FmLAMA: mAP, P@k and mWS against specs/fmlama.md 5.1 worked by hand; vectors from a local text file."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from culture_probe.errors import MetricInputError
from culture_probe.metrics import load_text_vectors, mean_average_precision, mws
from culture_probe.metrics.fmlama import average_precision, template_mean_std

RANKINGS = [
    ["tofu", "beef", "rice", "cheese", "tomato", "flour"],
    ["beef", "cheese", "rice", "tofu", "tomato", "flour"],
]
GOLD = [["tofu", "rice"], ["cheese", "flour", "tomato"]]
TOY = {
    "tofu": (1, 0),
    "beef": (0.8, 0.6),
    "rice": (0.6, 0.8),
    "cheese": (0, 1),
    "flour": (0.6, -0.8),
    "tomato": (-0.6, 0.8),
}


def test_map_worked_example():
    ap1, ap2 = 0.5 * (1 / 1 + 2 / 3), (1 / 3) * (1 / 2 + 2 / 5 + 3 / 6)
    assert average_precision(RANKINGS[0], set(GOLD[0])) == pytest.approx(ap1)
    assert average_precision(RANKINGS[1], set(GOLD[1])) == pytest.approx(ap2)
    result = mean_average_precision(RANKINGS, GOLD, groups=["China", "Italy"])
    assert result["map"] == pytest.approx(100 * (ap1 + ap2) / 2) and round(result["map"], 2) == 65.00
    assert result["p_at_1"] == pytest.approx(100 * (1 + 0) / 2)
    assert result["p_at_5"] == pytest.approx(100 * (2 / 5 + 2 / 5) / 2)
    assert result["groups"]["China"]["map"] == pytest.approx(100 * ap1)


def test_gold_missing_from_ranking_counts_zero_and_duplicates_count_once():
    assert average_precision(["tofu", "beef"], {"tofu", "saffron"}) == pytest.approx(0.5)
    result = mean_average_precision([RANKINGS[0], RANKINGS[0]], [["tofu", "tofu", "rice"], []])
    assert result["map"] == pytest.approx(100 * 0.5 * (1 + 2 / 3))
    assert (result["n"], result["n_skipped"]) == (1, 1)


def test_ranking_with_a_repeated_candidate_is_rejected():
    with pytest.raises(MetricInputError, match="`predictions` at index 0 repeats 'tofu'"):
        mean_average_precision([["tofu", "tofu"]], [["tofu"]])


def slow_ap(ranking, gold):
    """Reference: mean over gold items of the precision at the gold item's rank (0 when it is not ranked)."""
    ranks = sorted(ranking.index(g) + 1 for g in gold if g in ranking)
    return sum((i + 1) / r for i, r in enumerate(ranks)) / len(gold)


@settings(max_examples=150, deadline=None)
@given(st.permutations(list(TOY)), st.sets(st.sampled_from([*TOY, "saffron"]), min_size=1))
def test_ap_matches_reference_and_is_one_exactly_when_gold_leads(ranking, gold):
    ap = average_precision(ranking, gold)
    assert ap == pytest.approx(slow_ap(ranking, gold))
    assert 0 <= ap <= 1 + 1e-12
    assert (ap == pytest.approx(1.0)) == (set(ranking[: len(gold)]) == gold)


def test_mws_worked_example():
    ws1 = (1.00 + max(0.60, 0.96)) / 2  # S(tofu), S(rice) against top-2 {tofu, beef}
    ws2 = (1.00 + max(0.00, -0.80, -0.28) + max(0.00, 0.80, 0.28)) / 3  # against top-3 {beef, cheese, rice}
    result = mws(RANKINGS, GOLD, embed=TOY)
    assert (ws1, ws2) == (pytest.approx(0.98), pytest.approx(0.60))
    assert result["mws"] == pytest.approx((ws1 + ws2) / 2) and round(result["mws"], 4) == 0.79
    assert result["n_nan"] == 0


def test_mws_unknown_string_makes_the_dish_nan_and_is_counted():
    result = mws([RANKINGS[0], ["kimchi", "tofu"]], [GOLD[0], ["kimchi"]], embed=TOY, groups=["a", "b"])
    assert result["mws"] == pytest.approx(0.98) and (result["n"], result["n_nan"]) == (1, 1)
    assert result["groups"]["b"] == {"mws": None, "n": 0, "n_nan": 1, "n_skipped": 0}
    zero = {**TOY, "tofu": (0.0, 0.0)}
    assert mws([RANKINGS[0]], [GOLD[0]], embed=lambda s: zero[s])["n_nan"] == 1


def test_mws_reads_fasttext_text_vectors(tmp_path):
    path = tmp_path / "toy.vec"
    lines = [f"{len(TOY) + 1} 2"] + [f"{w} {x} {y}" for w, (x, y) in TOY.items()] + ["soy sauce 0.1 0.2"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert mws(RANKINGS, GOLD, vectors=str(path))["mws"] == pytest.approx(mws(RANKINGS, GOLD, embed=TOY)["mws"])
    loaded = load_text_vectors(path, keep={"soy sauce", "tofu"})
    assert set(loaded) == {"soy sauce", "tofu"}
    np.testing.assert_allclose(loaded["soy sauce"], [0.1, 0.2])
    headerless = tmp_path / "glove.txt"
    headerless.write_text("soy sauce 0.1 0.2\ntofu 1 0\n", encoding="utf-8")
    assert set(load_text_vectors(headerless)) == {"soy sauce", "tofu"}


def test_mws_needs_vectors():
    with pytest.raises(MetricInputError, match="pass `vectors="):
        mws(RANKINGS, GOLD)
    with pytest.raises(MetricInputError, match="either `embed` or `vectors`"):
        mws(RANKINGS, GOLD, embed=TOY, vectors="x.vec")


def test_template_mean_and_sample_std():
    summary = template_mean_std([65.00, 60.00, 70.00, 55.00, 62.50])
    assert summary["mean"] == pytest.approx(62.50)
    assert summary["std"] == pytest.approx(math.sqrt(125 / 4)) and round(summary["std"], 2) == 5.59
    with pytest.raises(MetricInputError, match="at least two templates"):
        template_mean_std([65.0])
