"""How numbers are shown: format_score (half up, or the MAPS paper's truncation), the one rounding rule of every report
(format_number), intervals or why there is none, and the mark of rates from fewer than MIN_N units."""

from __future__ import annotations

import numpy as np
import pytest

from culture_probe.errors import MetricInputError
from culture_probe.metrics import format_score


def test_half_up_rounding_versus_truncation():
    # 0.285 is 0.28499999999999998 in binary: half up still gives .29 (the decimal the value stands for)
    assert format_score(0.285, 2, "round") == "0.29"
    assert format_score(0.285, 2, "truncate") == "0.28"
    assert format_score(58.25, 1) == "58.3"  # Python's round() gives 58.2 (half to even)


def test_float_noise_does_not_move_the_last_digit():
    # P@1 of 23 hits in 80 facts computed as a mean: 28.749999999999996, which stands for 28.75
    p_at_1 = float(np.mean([1] * 23 + [0] * 57) * 100)
    assert p_at_1 != 28.75 and format_score(p_at_1, 1) == "28.8"
    noisy = 0.285 * 100  # 28.499999999999996
    assert (format_score(noisy, 0), format_score(noisy, 0, "truncate"), format_score(noisy, 1)) == ("29", "28", "28.5")
    assert format_score(0.29 * 100, 2, "truncate") == "29.00"  # 28.999999999999996
    assert format_score(28.499999999, 1) == "28.5" and format_score(28.499999999, 0) == "28"  # real digits stay


def test_values_without_digits_to_round():
    assert format_score(None) == "-"
    assert (format_score(float("nan")), format_score(float("inf")), format_score(-np.inf)) == ("nan", "inf", "-inf")
    assert format_score(1e300, 2).endswith("0.00")  # no decimal-context overflow for huge values
    assert format_score(-0.001, 2, "truncate") == "0.00" and format_score(-1e-12, 1) == "0.0"  # never "-0.00"
    assert format_score(-2.25, 1) == "-2.3"  # half away from zero, symmetric


def test_unknown_display_names_the_choices():
    with pytest.raises(MetricInputError, match=r"display.*'round'.*'truncate'|display.*'truncate'.*'round'"):
        format_score(1.0, 2, "ceil")


def test_one_rounding_rule_for_every_report():
    from culture_probe.metrics.display import format_number

    # MAPS printed 43.58 for metrics.json's 43.5897 (truncation); every report now rounds as the terminal does
    assert format_number(43.5897, "%") == "43.59"
    assert format_number(28.749999999999996, "%") == "28.75"  # 23/80 as a mean: the decimal it stands for
    assert format_number(0.17834, "0-1") == "0.178" and format_number(1.0, "0-1") == "1.000"
    assert (format_number(3), format_number(0.00021), format_number(12.345)) == ("3", "0.0002", "12.35")
    assert format_number(None, "%") == "-"


def test_an_estimate_without_an_interval_says_why():
    from culture_probe.metrics.display import interval_text

    lone = {"value": 0.1783, "stderr": None, "ci_low": None, "ci_high": None, "n": 1, "no_interval": "one unit"}
    assert interval_text(lone, "0-1") == "no interval: one unit"  # never "[0.1783, 0.1783]" or a blank
    assert interval_text({"value": 0.1783, "ci_low": 0.1021, "ci_high": 0.2544, "n": 169}, "0-1") == "[0.102, 0.254]"
    assert interval_text({"value": None, "ci_low": None, "ci_high": None, "n": 0}) == ""


def test_rates_from_few_units_carry_their_n_and_a_mark():
    from culture_probe.metrics.display import MIN_N, SMALL_N_MARK, estimate_cells, with_n

    assert MIN_N == 10
    assert with_n(100.0, 1, "%") == f"100.00 (n=1) {SMALL_N_MARK}"  # one fact is not "100.0"
    assert with_n(50.0, MIN_N, "%") == "50.00 (n=10)" and with_n(None, 0) == ""
    estimate = {"value": 47.52, "ci_low": 30.1, "ci_high": 60.0, "n": 5}
    assert estimate_cells(estimate, "%") == (f"47.52 {SMALL_N_MARK}", "[30.10, 60.00]", 5)
