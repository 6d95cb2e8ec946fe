"""How numbers are shown: the one rounding rule of the terminal line, report.md and suite.md, the smallest n a rate
is read at without a warning, and intervals (or why there is none). metrics.json keeps full precision.

The rule (`format_number`): round half up on the decimal the value stands for (float noise below 1e-9 removed
first, so 28.749999999999996 shows as 28.75; never "-0.00"); percentages (0-100) to 2 decimals, 0-1 scores to 3,
any other number (a count, bits, a p-value, a correlation) to 2 decimals at or above 1 and up to 4 below 1.
`format_score` is the primitive underneath, with the MAPS paper's truncation kept for reproducing its tables.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import ROUND_DOWN, ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, localcontext
from typing import Any, Literal

from culture_probe.metrics._checks import check_choice

_MODES = {"truncate": ROUND_DOWN, "round": ROUND_HALF_UP}

Scale = Literal["%", "0-1"]
DECIMALS: dict[str, int] = {"%": 2, "0-1": 3}
VALID_RANGE: dict[str, tuple[float, float]] = {"%": (0.0, 100.0), "0-1": (0.0, 1.0)}
# A rate from fewer units than this is marked in tables (SMALL_N_MARK) and hatched in figures: with n < 10, one unit
# moves a percentage by more than 10 points.
MIN_N = 10
SMALL_N_MARK = "†"
SMALL_N_NOTE = (
    f"{SMALL_N_MARK} fewer than {MIN_N} units (n shown): one unit moves the rate by more than {100 // MIN_N} points; "
    "read it with its interval, not alone."
)


def format_score(value: float | None, decimals: int = 2, display: str = "round") -> str:
    """Format a metric value for a table; metrics themselves always keep full precision.

    `display="truncate"` cuts digits as the MAPS paper does (60.526 -> "60.52"); `"round"` rounds half up
    (66.65 -> "66.7" at 1 decimal). Float noise below 1e-9 (0.29 * 100 = 28.999999999999996) is removed first,
    so truncation does not lose a digit to binary representation. None prints as "-".
    """
    check_choice("display", display, _MODES)
    if value is None:
        return "-"
    number = float(value)
    if not math.isfinite(number):  # Decimal cannot quantize these; print them as Python does
        return str(number)
    with localcontext() as context:
        context.prec = 400  # enough digits for any finite float at 1e-9, so quantize never overflows
        clean = Decimal(repr(number)).quantize(Decimal("1e-9"), rounding=ROUND_HALF_EVEN)
        shown = clean.quantize(Decimal(1).scaleb(-decimals), rounding=_MODES[display])
    return str(shown.copy_abs() if shown.is_zero() else shown)  # -0.001 -> "0.00", never "-0.00"


def format_number(value: float | None, scale: Scale | None = None) -> str:
    """A number by the one rule (module docstring): 2 decimals for percentages, 3 for 0-1 scores, `format_value`'s
    rule for numbers of no scale; None prints as "-".
    """
    if value is None:
        return "-"
    if scale is None:
        return format_value(value)
    return format_score(value, DECIMALS[scale])


def format_value(value: Any) -> str:
    """Numbers the tasks left unformatted: 2 decimals, or up to 4 below 1 (p-values, cosines; trailing zeros
    dropped), rounded half up by `format_score`; None as an empty cell. Values of a known scale go through
    `format_number` first.
    """
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return format_score(value, 4).rstrip("0").rstrip(".") if abs(value) < 1 else format_score(value, 2)
    return str(value).replace("|", "\\|").replace("\n", " ")


def interval_text(estimate: Mapping[str, Any], scale: Scale | None = None) -> str:
    """An estimate's interval as every report shows it: `[low, high]`, or `no interval: <reason>` when the results
    block gives none (a single unit, a statistic that cannot vary); empty for an estimate without a value.
    """
    if estimate.get("value") is None:
        return ""
    if estimate.get("ci_low") is None or estimate.get("ci_high") is None:
        reason = estimate.get("no_interval")
        return f"no interval: {reason}" if reason else "no interval"
    return f"[{format_number(float(estimate['ci_low']), scale)}, {format_number(float(estimate['ci_high']), scale)}]"


def is_small(n: int | None) -> bool:
    """Whether a rate rests on fewer than `MIN_N` units (None: no count known, not marked)."""
    return n is not None and n < MIN_N


def marked(text: str, n: int | None) -> str:
    """`text` with the small-n mark when its n is below `MIN_N` (the table's footnote says what it means)."""
    return f"{text} {SMALL_N_MARK}" if is_small(n) else text


def with_n(value: float | None, n: int | None, scale: Scale | None = None) -> str:
    """A rate with its n in one table cell, marked when n is small: `66.67 (n=3) †`; empty without a value."""
    if value is None:
        return ""
    return marked(f"{format_number(value, scale)} (n={n})", n)


def estimate_cells(estimate: Mapping[str, Any] | None, scale: Scale | None = None) -> tuple[str, str, Any]:
    """(value, interval, n) of a results-block estimate as table cells, the value marked when n is small."""
    if not estimate or estimate.get("value") is None:
        return "", "", (estimate or {}).get("n", "")
    n = estimate.get("n")
    return marked(format_number(estimate["value"], scale), n), interval_text(estimate, scale), n
