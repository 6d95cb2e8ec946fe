"""How numbers are shown: format_score (half up, or the MAPS paper's truncation), the one rounding
rule of every report (format_number), intervals or why there is none, and the mark of rates from
fewer than MIN_N units.
"""

from __future__ import annotations

import numpy as np
import pytest

from culture_probe.errors import MetricInputError
from culture_probe.metrics import format_score


def test_half_up_rounding_versus_truncation():
    # 0.285 is 0.28499999999999998 in binary: half up still gives .29 (the decimal the value stands
    # for)
    assert format_score(0.285, 2, "round") == "0.29"
    assert format_score(0.285, 2, "truncate") == "0.28"
    assert format_score(58.25, 1) == "58.3"  # Python's round() gives 58.2 (half to even)


def test_float_noise_does_not_move_the_last_digit():
    # P@1 of 23 hits in 80 facts computed as a mean: 28.749999999999996, which stands for 28.75
    p_at_1 = float(np.mean([1] * 23 + [0] * 57) * 100)
    assert p_at_1 != 28.75 and format_score(p_at_1, 1) == "28.8"
    noisy = 0.285 * 100  # 28.499999999999996
    assert (format_score(noisy, 0), format_score(noisy, 0, "truncate"), format_score(noisy, 1)) == (
        "29",
        "28",
        "28.5",
    )
    assert format_score(0.29 * 100, 2, "truncate") == "29.00"  # 28.999999999999996
    # real digits stay
    assert format_score(28.499999999, 1) == "28.5" and format_score(28.499999999, 0) == "28"


def test_values_without_digits_to_round():
    assert format_score(None) == "-"
    assert (format_score(float("nan")), format_score(float("inf")), format_score(-np.inf)) == (
        "nan",
        "inf",
        "-inf",
    )
    assert format_score(1e300, 2).endswith("0.00")  # no decimal-context overflow for huge values
    # never "-0.00"
    assert format_score(-0.001, 2, "truncate") == "0.00" and format_score(-1e-12, 1) == "0.0"
    assert format_score(-2.25, 1) == "-2.3"  # half away from zero, symmetric


def test_unknown_display_names_the_choices():
    with pytest.raises(
        MetricInputError, match=r"display.*'round'.*'truncate'|display.*'truncate'.*'round'"
    ):
        format_score(1.0, 2, "ceil")


def test_one_rounding_rule_for_every_report():
    from culture_probe.metrics.display import format_number

    # MAPS printed 43.58 for metrics.json's 43.5897 (truncation); every report now rounds as the
    # terminal does
    assert format_number(43.5897, "%") == "43.59"
    # 23/80 as a mean: the decimal it stands for
    assert format_number(28.749999999999996, "%") == "28.75"
    assert format_number(0.17834, "0-1") == "0.178" and format_number(1.0, "0-1") == "1.000"
    assert (format_number(3), format_number(0.00021), format_number(12.345)) == (
        "3",
        "0.0002",
        "12.35",
    )
    assert format_number(None, "%") == "-"


def test_an_estimate_without_an_interval_says_why():
    from culture_probe.metrics.display import interval_text

    lone = {
        "value": 0.1783,
        "stderr": None,
        "ci_low": None,
        "ci_high": None,
        "n": 1,
        "no_interval": "one unit",
    }
    # never "[0.1783, 0.1783]" or a blank
    assert interval_text(lone, "0-1") == "no interval: one unit"
    assert (
        interval_text({"value": 0.1783, "ci_low": 0.1021, "ci_high": 0.2544, "n": 169}, "0-1")
        == "[0.102, 0.254]"
    )
    assert interval_text({"value": None, "ci_low": None, "ci_high": None, "n": 0}) == ""


def test_rates_from_few_units_carry_their_n_and_a_mark():
    from culture_probe.metrics.display import MIN_N, SMALL_N_MARK, estimate_cells, with_n

    assert MIN_N == 10
    assert with_n(100.0, 1, "%") == f"100.00 (n=1) {SMALL_N_MARK}"  # one fact is not "100.0"
    assert with_n(50.0, MIN_N, "%") == "50.00 (n=10)" and with_n(None, 0) == ""
    estimate = {"value": 47.52, "ci_low": 30.1, "ci_high": 60.0, "n": 5}
    assert estimate_cells(estimate, "%") == (f"47.52 {SMALL_N_MARK}", "[30.10, 60.00]", 5)


def test_a_p_value_is_never_rounded_across_005_or_001():
    """p = 0.04997 (its interval excludes 0) and p = 0.05001 (it does not) both printed "0.05"
    (issue 34).
    """
    from culture_probe.metrics.display import format_p

    assert (format_p(0.04997), format_p(0.05001)) == ("0.04997", "0.05001")
    assert (format_p(0.0099996), format_p(0.0100004)) == ("0.0099996", "0.0100004")
    # 3 significant digits below 0.1, 2 decimals at or above it, a floor below which no digit means
    # anything
    assert (format_p(0.0754), format_p(0.008150971593502691), format_p(0.000123456)) == (
        "0.0754",
        "0.00815",
        "0.000123",
    )
    assert (format_p(0.53), format_p(0.09996), format_p(1.0)) == ("0.53", "0.10", "1.00")
    assert (format_p(0.00002), format_p(0.0), format_p(None)) == ("< 0.0001", "< 0.0001", "")
    # on a threshold is on it (float noise below 1e-9 removed first, as for every number)
    assert (format_p(0.05), format_p(0.01), format_p(0.049999999999999996)) == (
        "0.0500",
        "0.0100",
        "0.0500",
    )


def test_the_printed_p_value_stays_on_the_side_of_each_threshold_the_true_one_is_on():
    from culture_probe.metrics.display import P_FLOOR, format_p

    rng = np.random.default_rng(34)
    near = [t + d for t in (0.05, 0.01) for d in rng.uniform(-1e-5, 1e-5, 400)]
    values = [
        *near,
        *10 ** rng.uniform(-4, 0, 2000),
        *(t + k * 1e-8 for t in (0.05, 0.01) for k in range(-20, 21)),
    ]
    for p in values:
        text = format_p(p)
        if p < P_FLOOR:
            assert text == "< 0.0001"
            continue
        shown = float(text)
        for threshold in (0.05, 0.01):
            assert np.sign(round(shown - threshold, 12)) == np.sign(round(p - threshold, 12)), (
                p,
                text,
            )
        # no more than the digits shown need
        assert abs(shown - p) <= max(0.005, p * 0.005), (p, text)


def test_p_in_a_sentence_never_reads_p_equals_less_than():
    from culture_probe.metrics.display import p_clause

    assert (p_clause(0.0027), p_clause(1e-9), p_clause(None)) == ("p = 0.00270", "p < 0.0001", "")
    assert p_clause(0.151, "Holm-adjusted p") == "Holm-adjusted p = 0.15"


def test_an_interval_end_below_the_display_precision_is_not_printed_as_zero():
    """[0.003, 5.2] on the % scale printed "[0.00, 5.20]", an interval that seems to touch 0;
    exactly 0 (a Wilson interval of 0 hits) still prints 0.00, so 0.00 means 0.
    """
    from culture_probe.metrics.display import bound_text, interval_text

    assert interval_text({"value": 1.0, "ci_low": 0.003, "ci_high": 5.2}, "%") == "[< 0.01, 5.20]"
    assert (
        interval_text({"value": -1.0, "ci_low": -5.2, "ci_high": -0.004}, "%") == "[-5.20, > -0.01]"
    )
    assert interval_text({"value": 0.0, "ci_low": 0.0, "ci_high": 16.11}, "%") == "[0.00, 16.11]"
    assert bound_text(1e-12, "%") == "0.00"  # float noise, as for any number
    assert (bound_text(0.0004, "0-1"), bound_text(0.00003), bound_text(-0.00003)) == (
        "< 0.001",
        "< 0.0001",
        "> -0.0001",
    )
    # the top of a scale likewise: 99.997 is not certainty
    assert (bound_text(99.997, "%"), bound_text(100.0, "%"), bound_text(0.9996, "0-1")) == (
        "> 99.99",
        "100.00",
        "> 0.999",
    )
    assert (bound_text(0.005, "%"), bound_text(5.2, "%"), bound_text(-2.5, None)) == (
        "0.01",
        "5.20",
        "-2.50",
    )


def test_p_values_and_ranges_in_other_sentences_follow_the_same_rules():
    """X-FaKT's warning printed its test of random answering with 2 decimals (p = 0.0501 as "p =
    0.05"), and the chance range of random models rounded a top of 0.9996 to 1.000.
    """
    from culture_probe.benchmarks.xfakt.chance import transfer_warning
    from culture_probe.report.views import chance_cell

    chance = {"kts": {"value": 0.95, "low": 0.7, "high": 0.9996}}
    at_chance = {
        k: {"value": v, "ci_low": lo, "ci_high": hi, "n": 169}
        for k, v, lo, hi in [("frs", 0.03, 0.01, 0.07), ("kts", 0.95, 0.56, 1.0)]
    }
    sentence = transfer_warning(at_chance, chance, 0.0501)
    assert "p = 0.0501)" in sentence
    assert chance_cell(chance["kts"], "0-1") == "0.950 [0.700, > 0.999]"
