"""X-FaKT: the spec's anchors and worked example (5.2) by hand, bounds and extremes, subsets, tiers, bad input."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from culture_probe.errors import MetricInputError
from culture_probe.metrics import ASSOCIATIONS, xfakt, xfakt_scores

WRONG = {  # specs/xfakt.md 5.2: errors out of 7 facts per country
    ("en", "United States"): 0,
    ("en", "Japan"): 1,
    ("en", "Kenya"): 3,
    ("ja", "United States"): 2,
    ("ja", "Japan"): 0,
    ("ja", "Kenya"): 4,
    ("sw", "United States"): 1,
    ("sw", "Japan"): 3,
    ("sw", "Kenya"): 1,
}


def columns(wrong, asked=7):
    rows = [(i >= k, lang, country) for (lang, country), k in wrong.items() for i in range(asked)]
    return {key: [row[i] for row in rows] for i, key in enumerate(("correct", "language", "country"))}


@pytest.mark.parametrize(
    ("mu", "expected"),
    [
        ((0, 0), (1, 1, 1)),
        ((1, 1), (0, 1, 0)),
        ((0, 1), (0.25, 0, 0)),
        ((0.5, 0.5), (0.25, 1, 0.4)),
        ((0.1, 0.3), (0.571429, 0.666667, 0.615385)),
    ],
)
def test_anchors(mu, expected):
    scores = xfakt_scores(*mu)
    assert [scores[k] for k in ("frs", "kts", "xfakt")] == pytest.approx(list(expected), abs=1e-6)


def test_worked_example_with_rounded_cells():
    result = xfakt(**columns(WRONG))
    assert result["mu_assoc"] == pytest.approx((0.00 + 0.00 + 0.14) / 3)
    assert result["mu_non"] == pytest.approx((0.14 + 0.43 + 0.29 + 0.57 + 0.14 + 0.43) / 6)
    frs = 1.5 * (1 / (1 + 0.14 / 3 + 2.00 / 6) - 1 / 3)
    kts = 2 * (1 / (1 + abs(0.14 / 3 - 2.00 / 6)) - 0.5)
    assert (result["frs"], result["kts"]) == (pytest.approx(frs), pytest.approx(kts))
    assert [round(result[k], 6) for k in ("frs", "kts", "xfakt")] == [0.586957, 0.554404, 0.570216]
    assert result["error_table"]["ja"]["Kenya"] == pytest.approx(4 / 7)
    assert result["languages"] == ["en", "ja", "sw"] and result["countries"] == ["United States", "Japan", "Kenya"]
    assert result["all_languages"] is False and result["n_empty_cells"] == 0


def test_worked_example_exact_cells_and_paper_statistics():
    result = xfakt(**columns(WRONG), round_cells=False)
    assert result["mu_assoc"] == pytest.approx(1 / 21)
    assert [round(result[k], 6) for k in ("frs", "kts", "xfakt")] == [0.586207, 0.555556, 0.570470]
    diagonal = [0, 0, 1 / 7]
    off_diagonal = [1 / 7, 3 / 7, 2 / 7, 4 / 7, 1 / 7, 3 / 7]
    rounded = xfakt(**columns(WRONG))  # the statistics use unrounded cells either way
    for res in (result, rounded):
        assert res["assoc_error"] == {
            "mean": pytest.approx(100 * statistics.fmean(diagonal)),
            "std": pytest.approx(100 * statistics.pstdev(diagonal)),
        }
        assert res["non_assoc_error"]["std"] == pytest.approx(100 * statistics.pstdev(off_diagonal))
        test = stats.ttest_ind(off_diagonal, diagonal)
        assert (res["t_statistic"], res["p_value"]) == (pytest.approx(test.statistic), pytest.approx(test.pvalue))


rates = st.lists(st.integers(0, 4), min_size=9, max_size=9)


@settings(max_examples=100, deadline=None)
@given(rates)
def test_scores_follow_the_formulas_by_hand_and_stay_in_unit_interval(counts):
    wrong = dict(zip(WRONG, counts, strict=True))
    result = xfakt(**columns(wrong, asked=4))
    home = {"en": "United States", "ja": "Japan", "sw": "Kenya"}
    mu_a = statistics.fmean(k / 4 for (lang, country), k in wrong.items() if home[lang] == country)
    mu_n = statistics.fmean(k / 4 for (lang, country), k in wrong.items() if home[lang] != country)
    frs = 1.5 * (1 / (1 + mu_a + mu_n) - 1 / 3)
    kts = 2 * (1 / (1 + abs(mu_a - mu_n)) - 0.5)
    harmonic = 2 * frs * kts / (frs + kts) if frs + kts else 0.0
    assert [result[k] for k in ("frs", "kts", "xfakt")] == pytest.approx([frs, kts, harmonic], abs=1e-12)
    for key in ("frs", "kts", "xfakt"):
        assert -1e-12 <= result[key] <= 1 + 1e-12


@settings(max_examples=100, deadline=None)
@given(st.floats(0, 1), st.floats(0, 1))
def test_frs_kts_bounds_and_monotonicity(mu_assoc, mu_non):
    scores = xfakt_scores(mu_assoc, mu_non)
    assert 0 <= scores["frs"] <= 1 + 1e-12 and 0 <= scores["kts"] <= 1 + 1e-12
    if mu_assoc == mu_non:
        assert scores["kts"] == pytest.approx(1.0)
    elif abs(mu_assoc - mu_non) > 1e-6:  # a visible gap always costs transferability
        assert scores["kts"] < 1.0 - 1e-9
    assert scores["frs"] >= xfakt_scores(max(mu_assoc, 0.0), 1.0)["frs"] - 1e-12  # more error never helps


def test_extremes():
    everyone_right = xfakt(**columns(dict.fromkeys(WRONG, 0)))
    assert (everyone_right["frs"], everyone_right["kts"], everyone_right["xfakt"]) == (1, 1, 1)
    everyone_wrong = xfakt(**columns(dict.fromkeys(WRONG, 7)))
    assert (everyone_wrong["frs"], everyone_wrong["kts"], everyone_wrong["xfakt"]) == (pytest.approx(0), 1, 0)
    no_transfer = xfakt(**columns({cell: 0 if ASSOCIATIONS[cell[0]] == cell[1] else 7 for cell in WRONG}))
    assert (no_transfer["frs"], no_transfer["kts"], no_transfer["xfakt"]) == (pytest.approx(0.25), 0, 0)


def test_empty_cells_are_excluded_and_counted():
    partial = {cell: k for cell, k in WRONG.items() if cell != ("sw", "Japan")}
    result = xfakt(**columns(partial))
    assert result["n_empty_cells"] == 1 and result["error_table"]["sw"]["Japan"] is None
    assert result["mu_non"] == pytest.approx((0.14 + 0.43 + 0.29 + 0.57 + 0.14) / 5)


def test_tiers_paper_and_upstream_place_turkish_differently():
    wrong = {(lang, country): 2 * (lang == "tr") for lang in ASSOCIATIONS for country in ASSOCIATIONS.values()}
    paper = xfakt(**columns(wrong, asked=2))
    upstream = xfakt(**columns(wrong, asked=2), tiers="upstream")
    assert paper["all_languages"] and paper["tiers"]["medium"]["mu_non"] == 0.0
    assert paper["tiers"]["low"]["mu_non"] > 0 and upstream["tiers"]["medium"]["mu_non"] > 0
    assert paper["language_error"]["tr"] == 1.0 and paper["language_error"]["en"] == 0.0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"language": ["english"] * 63}, "Unknown label 'english' in `language`"),
        ({"country": ["Türkiye"] * 63}, "Unknown label 'Türkiye' in `country`"),
        ({"correct": ["yes"] * 63}, "`correct` must hold True/False"),
        ({"tiers": "mine"}, "`tiers` must be one of"),
        ({"associations": {"en": "United States", "ja": "United States"}}, "must be one-to-one"),
        ({"correct": []}, "`correct` is empty"),
    ],
)
def test_bad_input(change, message):
    with pytest.raises(MetricInputError, match=message):
        xfakt(**{**columns(WRONG), **change})


def test_no_associated_cell_is_an_error():
    with pytest.raises(MetricInputError, match="No associated \\(diagonal\\) cell"):
        xfakt(**columns({("en", "Japan"): 1, ("ja", "United States"): 0}))
