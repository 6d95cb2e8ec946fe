"""How the papers print numbers: DLAMA rounds half up to 1 decimal, MAPS truncates to 2 decimals."""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import ROUND_DOWN, ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, localcontext
from typing import Any

from culture_probe.metrics._checks import check_choice

_MODES = {"truncate": ROUND_DOWN, "round": ROUND_HALF_UP}


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


def format_value(value: Any) -> str:
    """Numbers the tasks left unformatted: 2 decimals, or up to 4 below 1 (p-values, cosines; trailing zeros
    dropped), rounded half up by `format_score`; None as an empty cell. Tasks with a paper rule (DLAMA 1 decimal,
    MAPS truncation) format their cells themselves.
    """
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return format_score(value, 4).rstrip("0").rstrip(".") if abs(value) < 1 else format_score(value, 2)
    return str(value).replace("|", "\\|").replace("\n", " ")


def interval_text(estimate: Mapping[str, Any]) -> str:
    """An estimate's interval as tables show it, `[low, high]`; empty when it has none (a single unit)."""
    if estimate.get("ci_low") is None:
        return ""
    return f"[{format_value(float(estimate['ci_low']))}, {format_value(float(estimate['ci_high']))}]"
