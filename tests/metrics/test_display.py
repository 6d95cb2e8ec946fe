"""format_score: the one display formatter (DLAMA rounds half up to 1 decimal, MAPS truncates to 2)."""

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
