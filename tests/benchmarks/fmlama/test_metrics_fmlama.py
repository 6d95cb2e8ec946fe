"""FmLAMA: mAP, P@k and mWS against specs/fmlama.md 5.1 worked by hand; vectors read from local
files by the data layer (`culture_probe.data.vectors`), so the metric itself only sees vectors.
"""

from __future__ import annotations

import math
import sys
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from culture_probe.benchmarks.fmlama.metrics import (
    average_precision,
    map_mws_correlation,
    mean_average_precision,
    mws,
    template_mean_std,
    words_needed,
)
from culture_probe.data.vectors import FASTTEXT_ENV, load_text_vectors, read_vectors
from culture_probe.errors import MetricInputError

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
    assert (
        result["map"] == pytest.approx(100 * (ap1 + ap2) / 2) and round(result["map"], 2) == 65.00
    )
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
    """Reference: mean over gold items of the precision at the gold item's rank (0 when it is not
    ranked).
    """
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
    # against top-3 {beef, cheese, rice}
    ws2 = (1.00 + max(0.00, -0.80, -0.28) + max(0.00, 0.80, 0.28)) / 3
    result = mws(RANKINGS, GOLD, embed=TOY)
    assert (ws1, ws2) == (pytest.approx(0.98), pytest.approx(0.60))
    assert result["mws"] == pytest.approx((ws1 + ws2) / 2) and round(result["mws"], 4) == 0.79
    assert result["n_nan"] == 0


def test_mws_unknown_string_makes_the_dish_nan_and_is_counted():
    result = mws(
        [RANKINGS[0], ["kimchi", "tofu"]], [GOLD[0], ["kimchi"]], embed=TOY, groups=["a", "b"]
    )
    assert result["mws"] == pytest.approx(0.98) and (result["n"], result["n_nan"]) == (1, 1)
    assert result["groups"]["b"] == {"mws": None, "n": 0, "n_nan": 1, "n_skipped": 0}
    zero = {**TOY, "tofu": (0.0, 0.0)}
    assert mws([RANKINGS[0]], [GOLD[0]], embed=lambda s: zero[s])["n_nan"] == 1


def file_mws(vectors=None, language="en"):
    """mWS of the worked example with the vectors a file gives (only the strings mWS needs are
    read).
    """
    return mws(
        RANKINGS,
        GOLD,
        embed=read_vectors(vectors, keep=words_needed(RANKINGS, GOLD), language=language),
    )


def test_mws_reads_fasttext_text_vectors(tmp_path):
    path = tmp_path / "toy.vec"
    lines = (
        [f"{len(TOY) + 1} 2"]
        + [f"{w} {x} {y}" for w, (x, y) in TOY.items()]
        + ["soy sauce 0.1 0.2"]
    )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert file_mws(str(path))["mws"] == pytest.approx(mws(RANKINGS, GOLD, embed=TOY)["mws"])
    assert words_needed(RANKINGS, GOLD) == {"tofu", "beef", "rice", "cheese", "flour", "tomato"}
    loaded = load_text_vectors(path, keep={"soy sauce", "tofu"})
    assert set(loaded) == {"soy sauce", "tofu"}
    np.testing.assert_allclose(loaded["soy sauce"], [0.1, 0.2])
    headerless = tmp_path / "glove.txt"
    headerless.write_text("soy sauce 0.1 0.2\ntofu 1 0\n", encoding="utf-8")
    assert set(load_text_vectors(headerless)) == {"soy sauce", "tofu"}


class FakeFasttext(types.ModuleType):
    """Stands in for the `fasttext` module: load_model(path) gives a model whose get_word_vector
    reads TOY.
    """

    def __init__(self):
        super().__init__("fasttext")
        self.loaded = []

    def load_model(self, path):
        self.loaded.append(path)
        return types.SimpleNamespace(
            get_word_vector=lambda text: np.asarray(TOY.get(text, (0.0, 0.0)))
        )


@pytest.fixture
def fake_fasttext(monkeypatch):
    module = FakeFasttext()
    monkeypatch.setitem(sys.modules, "fasttext", module)
    monkeypatch.delenv(FASTTEXT_ENV, raising=False)
    return module


def test_mws_defaults_to_the_fasttext_binary_model(fake_fasttext, tmp_path, monkeypatch):
    model = tmp_path / "cc.ko.300.bin"
    model.write_bytes(b"")
    expected = mws(RANKINGS, GOLD, embed=TOY)["mws"]
    assert file_mws(str(model))["mws"] == pytest.approx(expected)
    assert file_mws(str(tmp_path), language="ko")["mws"] == pytest.approx(expected)
    monkeypatch.setenv(FASTTEXT_ENV, str(tmp_path))  # no file named: the configured model
    assert file_mws(language="ko")["mws"] == pytest.approx(expected)
    assert fake_fasttext.loaded == [str(model)] * 3


def test_mws_without_vectors_names_the_exact_fix(fake_fasttext, tmp_path, monkeypatch):
    with pytest.raises(
        MetricInputError,
        match=r"no model was given: download cc\.en\.300\.bin from https://fasttext"
        r".*vectors='path/to/cc\.en\.300\.bin'.*CULTURE_PROBE_FASTTEXT",
    ):
        file_mws()
    with pytest.raises(
        MetricInputError, match=r"cc\.he\.300\.bin' does not exist: download cc\.he\.300\.bin"
    ):
        file_mws(str(tmp_path), language="he")
    (tmp_path / "cc.en.300.bin").write_bytes(b"")
    monkeypatch.setitem(sys.modules, "fasttext", None)  # the package is not installed
    with pytest.raises(
        MetricInputError, match=r"needs the `fasttext` module.*pip install fasttext-wheel"
    ):
        file_mws(str(tmp_path))


def test_the_mws_module_takes_a_vectors_file_or_vectors_not_both(tmp_path):
    import culture_probe

    path = tmp_path / "toy.vec"
    path.write_text("".join(f"{w} {x} {y}\n" for w, (x, y) in TOY.items()), encoding="utf-8")
    metric = culture_probe.load_metric("mws")
    from_file = metric.compute(predictions=RANKINGS, references=GOLD, vectors=str(path))
    assert from_file["mws"] == pytest.approx(mws(RANKINGS, GOLD, embed=TOY)["mws"])
    with pytest.raises(MetricInputError, match="either `embed` or `vectors`"):
        metric.compute(predictions=RANKINGS, references=GOLD, embed=TOY, vectors=str(path))


def test_mws_vectors_of_different_lengths_name_embed():
    # "rice" (the first gold in code-point order) is read first
    ragged = {**TOY, "tofu": (1.0, 0.0, 0.0)}
    with pytest.raises(
        MetricInputError,
        match=r"`embed` returned a vector of length 3 for 'tofu' but of length 2 "
        r"for 'rice'",
    ):
        mws(RANKINGS, GOLD, embed=ragged)
    with pytest.raises(
        MetricInputError, match=r"`embed` returned an array of shape \(1, 2\) for 'rice'"
    ):
        mws(RANKINGS, GOLD, embed=lambda text: [[1.0, 0.0]])


def test_template_mean_and_sample_std():
    summary = template_mean_std([65.00, 60.00, 70.00, 55.00, 62.50])
    assert summary["mean"] == pytest.approx(62.50)
    assert summary["std"] == pytest.approx(math.sqrt(125 / 4)) and round(summary["std"], 2) == 5.59
    with pytest.raises(MetricInputError, match="at least two templates"):
        template_mean_std([65.0])


# ---------------------------------------------------------------- Pearson r between the mAP and mWS
# tables

# The paper's Table 2 (FmLAMA-en): the eight models' cells (Bb-c .. T5) of each origin row incl.
# ALL; the "Avg." column is left out (it is not a probing result). (a) mAP (%) and (b) mWS; the
# caption reports r = 0.66.
TABLE2_MAP = [
    (3.93, 5.43, 4.39, 5.32, 5.25, 5.65, 4.49, 5.09),
    (10.26, 14.58, 11.60, 12.72, 13.79, 13.10, 12.37, 13.16),
    (7.80, 10.53, 6.72, 8.02, 11.55, 9.12, 6.29, 7.84),
    (7.99, 7.53, 8.68, 6.64, 7.18, 7.59, 5.57, 5.64),
    (5.01, 6.57, 6.15, 5.55, 5.64, 6.02, 3.63, 4.05),
    (8.40, 8.84, 11.17, 9.29, 10.48, 8.52, 6.29, 7.71),
    (6.41, 6.93, 7.72, 7.16, 8.08, 7.92, 3.61, 4.18),
    (12.63, 14.18, 13.37, 12.10, 9.78, 10.56, 8.64, 5.41),
    (4.94, 5.42, 5.64, 5.78, 7.40, 7.81, 4.20, 5.79),
    (10.43, 12.35, 12.36, 11.27, 12.54, 11.79, 7.93, 9.36),
    (7.00, 5.96, 6.32, 6.33, 8.31, 9.42, 10.37, 5.67),
    (3.15, 3.99, 2.78, 2.73, 3.72, 3.12, 2.12, 0.73),
    (3.54, 5.92, 4.26, 5.37, 4.61, 5.42, 3.26, 3.01),
    (5.55, 7.68, 5.34, 5.48, 5.31, 5.57, 1.45, 1.85),
    (5.92, 6.30, 6.41, 6.37, 6.06, 5.62, 3.82, 3.61),
    (6.87, 8.09, 7.59, 7.51, 7.70, 7.43, 5.51, 5.58),
]
TABLE2_MWS = [
    (0.3107, 0.3391, 0.3206, 0.3246, 0.2992, 0.3279, 0.3287, 0.3097),
    (0.3593, 0.3957, 0.3793, 0.3813, 0.3730, 0.3760, 0.3796, 0.3844),
    (0.3431, 0.3592, 0.3542, 0.3521, 0.3478, 0.3480, 0.3501, 0.3243),
    (0.3247, 0.3321, 0.3312, 0.3072, 0.2902, 0.2965, 0.3072, 0.2815),
    (0.3280, 0.3420, 0.3348, 0.3372, 0.3261, 0.3278, 0.3342, 0.3268),
    (0.3132, 0.3343, 0.3401, 0.3362, 0.3177, 0.3255, 0.3126, 0.3079),
    (0.3123, 0.3418, 0.3473, 0.3254, 0.3087, 0.3152, 0.3276, 0.3130),
    (0.3638, 0.3741, 0.3796, 0.3531, 0.3215, 0.3367, 0.3352, 0.2920),
    (0.3127, 0.3268, 0.3362, 0.3191, 0.3118, 0.3473, 0.3189, 0.3263),
    (0.3210, 0.3493, 0.3476, 0.3354, 0.3398, 0.3309, 0.3569, 0.3156),
    (0.3195, 0.3145, 0.3399, 0.3145, 0.3252, 0.3476, 0.3555, 0.3233),
    (0.3113, 0.3399, 0.3359, 0.3178, 0.2822, 0.3180, 0.3530, 0.3048),
    (0.3008, 0.3280, 0.3189, 0.3117, 0.2856, 0.3068, 0.3168, 0.2828),
    (0.3368, 0.3680, 0.3355, 0.3397, 0.3113, 0.3158, 0.3313, 0.2721),
    (0.3235, 0.3378, 0.3376, 0.3263, 0.3088, 0.3150, 0.3266, 0.2821),
    (0.3278, 0.3468, 0.3428, 0.3339, 0.3177, 0.3264, 0.3338, 0.3050),
]


def test_map_mws_correlation_by_hand():
    # mean (20, 0.31); deviations (-10, 0, 10) and (-0.01, 0.01, 0): r = 0.1 / sqrt(200 * 0.0002) =
    # 0.5
    assert map_mws_correlation([10.0, 20.0, 30.0], [0.30, 0.32, 0.31]) == {
        "pearson_r": pytest.approx(0.5),
        "n_cells": 3,
    }
    assert map_mws_correlation([1.0, 2.0, 4.0], [0.2, 0.4, 0.8])["pearson_r"] == pytest.approx(1.0)
    # deviations (-4/3, -1/3, 5/3) and (0.4, 0, -0.4): r = -1.2 / sqrt(42/9 * 0.32) = -3.6 /
    # sqrt(13.44)
    assert map_mws_correlation([1.0, 2.0, 4.0], [0.8, 0.4, 0.0])["pearson_r"] == pytest.approx(
        -3.6 / 13.44**0.5
    )
    # undefined, not 0
    assert map_mws_correlation([5.0, 5.0, 5.0], [0.1, 0.2, 0.3])["pearson_r"] is None


def test_map_mws_correlation_reproduces_the_papers_table_2():
    cells_map = [v for row in TABLE2_MAP for v in row]
    cells_mws = [v for row in TABLE2_MWS for v in row]
    result = map_mws_correlation(cells_map, cells_mws)
    assert result["n_cells"] == 128 and round(result["pearson_r"], 2) == 0.66
    # % or 0-1: same r
    rescaled = map_mws_correlation([v / 100 for v in cells_map], [v * 100 for v in cells_mws])
    assert rescaled["pearson_r"] == pytest.approx(result["pearson_r"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (([1.0], [0.1]), "`map_values` has 1 cell: a correlation needs at least two"),
        (([1.0, 2.0], [0.1]), "`mws_values` has 1 items but `map_values` has 2"),
        (([1.0, float("nan")], [0.1, 0.2]), "`map_values` has nan at index 1"),
        (([], []), "`map_values` is empty"),
    ],
)
def test_map_mws_correlation_bad_input(args, message):
    with pytest.raises(MetricInputError, match=message):
        map_mws_correlation(*args)
