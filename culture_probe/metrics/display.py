"""How the papers print numbers: DLAMA rounds half up to 1 decimal, MAPS truncates to 2 decimals."""

from __future__ import annotations

import math
from decimal import ROUND_DOWN, ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, localcontext

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
