"""How numbers are shown: the one rounding rule of the terminal line, report.md and suite.md, the
smallest n a rate is read at without a warning, and intervals (or why there is none). metrics.json
keeps full precision.

The rule (`format_number`): round half up on the decimal the value stands for (float noise below
1e-9 removed first, so 28.749999999999996 shows as 28.75; never "-0.00"); percentages (0-100) to 2
decimals, 0-1 scores to 3, any other number (a count, bits, a correlation) to 2 decimals at or above
1 and up to 4 below 1. `format_score` is the primitive underneath, with the MAPS paper's truncation
kept for reproducing its tables.

Two kinds of number are read against thresholds, so their rounding must not move them across one:
- a p-value (`format_p`) is never rounded across 0.05 or 0.01: 3 significant digits below 0.1 (more
  where 3 would land on or across a threshold: 0.04997 shows as "0.04997", not "0.0500"), 2 decimals
  at or above 0.1, and "< 0.0001" below that;
- an interval end (`bound_text`) that is not 0 but rounds to it shows as "< 0.01" ("> -0.01" below
  0; "< 0.001" on 0-1 scores, "< 0.0001" for numbers of no scale), and one that rounds to the top of
  its scale without reaching it as "> 99.99" ("> 0.999"). "0.00" (or "100.00") therefore means
  exactly 0 (or exactly the top), float noise below 1e-9 removed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import ROUND_DOWN, ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, localcontext
from typing import Any, Literal

from culture_probe.errors import MetricInputError
from culture_probe.metrics._checks import check_choice
from culture_probe.util.typecheck import checked

_MODES = {"truncate": ROUND_DOWN, "round": ROUND_HALF_UP}
# The levels a p-value is read against: its printed value stays on the same side of each (or on it,
# when it is on it).
P_THRESHOLDS = (Decimal("0.05"), Decimal("0.01"))
# below this a p-value prints as "< 0.0001": no test here is accurate to more digits than that
P_FLOOR = 0.0001
P_DIGITS = 3  # significant digits of a p-value below 0.1

Scale = Literal["%", "0-1"]
DECIMALS: dict[str, int] = {"%": 2, "0-1": 3}
VALID_RANGE: dict[str, tuple[float, float]] = {"%": (0.0, 100.0), "0-1": (0.0, 1.0)}
# A rate from fewer units than this is marked in tables (SMALL_N_MARK) and hatched in figures: with
# n < 10, one unit moves a percentage by more than 10 points.
MIN_N = 10
SMALL_N_MARK = "†"
SMALL_N_NOTE = (
    f"{SMALL_N_MARK} fewer than {MIN_N} units (n shown): one unit moves the rate by more than {100 // MIN_N} points; "
    "read it with its interval, not alone."
)


@checked(MetricInputError, pure=True)
def format_score(value: float | None, decimals: int = 2, display: str = "round") -> str:
    """Format a metric value for a table; metrics themselves always keep full precision.

    `display="truncate"` cuts digits as the MAPS paper does (60.526 -> "60.52"); `"round"` rounds
    half up (66.65 -> "66.7" at 1 decimal). Float noise below 1e-9 (0.29 * 100 = 28.999999999999996)
    is removed first, so truncation does not lose a digit to binary representation. None prints as
    "-".
    """
    check_choice("display", display, _MODES)
    if value is None:
        return "-"
    number = float(value)
    if not math.isfinite(number):  # Decimal cannot quantize these; print them as Python does
        return str(number)
    with localcontext() as context:
        # enough digits for any finite float at 1e-9, so quantize never overflows
        context.prec = 400
        clean = Decimal(repr(number)).quantize(Decimal("1e-9"), rounding=ROUND_HALF_EVEN)
        shown = clean.quantize(Decimal(1).scaleb(-decimals), rounding=_MODES[display])
    return str(shown.copy_abs() if shown.is_zero() else shown)  # -0.001 -> "0.00", never "-0.00"


def _clean(number: float) -> Decimal:
    """The decimal a finite float stands for: its shortest repr, float noise below 1e-9 removed
    (half even).
    """
    with localcontext() as context:
        context.prec = 400
        return Decimal(repr(number)).quantize(Decimal("1e-9"), rounding=ROUND_HALF_EVEN)


def format_p(p_value: float | None) -> str:
    """A p-value as every report, the terminal, compare.md and the board print it (module
    docstring): never rounded across 0.05 or 0.01, "< 0.0001" for the tiniest; None prints as an
    empty cell (no test was possible).

    >>> format_p(0.04997), format_p(0.05001), format_p(0.0754), format_p(0.53), format_p(0.00002)
    ('0.04997', '0.05001', '0.0754', '0.53', '< 0.0001')
    """
    if p_value is None:
        return ""
    number = float(p_value)
    if not math.isfinite(number):
        return str(number)
    if number < P_FLOOR:
        return f"< {P_FLOOR:g}" if number >= 0 else str(number)
    if number >= 0.1:
        return format_score(number, 2)
    exact = _clean(number)
    digits = P_DIGITS
    # ends: at 9 decimals the shown value is the cleaned one, on the same side of everything
    while True:
        shown = exact.quantize(
            Decimal(1).scaleb(exact.adjusted() - digits + 1), rounding=ROUND_HALF_UP
        )
        if shown >= Decimal("0.1"):  # 0.09996: as any p-value of 0.1 or more
            return format_score(number, 2)
        if all((shown > t) - (shown < t) == (exact > t) - (exact < t) for t in P_THRESHOLDS):
            return format(shown, "f")
        digits += 1


def p_clause(p_value: float | None, name: str = "p") -> str:
    """`p = 0.0123`, or `p < 0.0001` for the tiniest (never "p = < 0.0001"); empty when there is no
    p-value.
    """
    text = format_p(p_value)
    if not text:
        return ""
    return f"{name} {text}" if text.startswith("<") else f"{name} = {text}"


def bound_text(value: float, scale: Scale | None = None) -> str:
    """One end of an interval by the one rule, except that it is never rounded onto 0 or onto the
    top of its scale when it does not reach it (module docstring): a lower end of 0.003 % shows as
    "< 0.01", not "0.00".
    """
    text = format_number(value, scale)
    number = float(value)
    if not math.isfinite(number):
        return text
    exact, shown = _clean(number), Decimal(text)
    step = Decimal(1).scaleb(-(DECIMALS[scale] if scale else 4))  # the last digit shown below 1
    if shown.is_zero() and not exact.is_zero():
        return f"< {step}" if exact > 0 else f"> -{step}"
    if scale is not None:
        top = Decimal(repr(VALID_RANGE[scale][1]))
        if shown == top and exact < top:
            return f"> {top - step}"
    return text


def format_number(value: float | None, scale: Scale | None = None) -> str:
    """A number by the one rule (module docstring): 2 decimals for percentages, 3 for 0-1 scores,
    `format_value`'s rule for numbers of no scale; None prints as "-".
    """
    if value is None:
        return "-"
    if scale is None:
        return format_value(value)
    return format_score(value, DECIMALS[scale])


def format_value(value: Any) -> str:
    """Numbers the tasks left unformatted: 2 decimals, or up to 4 below 1 (cosines, correlations;
    trailing zeros dropped), rounded half up by `format_score`; None as an empty cell. Values of a
    known scale go through `format_number` first, p-values through `format_p`, which never rounds
    them across 0.05 or 0.01.
    """
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return (
            format_score(value, 4).rstrip("0").rstrip(".")
            if abs(value) < 1
            else format_score(value, 2)
        )
    return str(value).replace("|", "\\|").replace("\n", " ")


def interval_text(estimate: Mapping[str, Any], scale: Scale | None = None) -> str:
    """An estimate's interval as every report shows it: `[low, high]` (each end by `bound_text`), or
    `no interval: <reason>` when the results block gives none (a single unit, a statistic that
    cannot vary); empty for an estimate without a value.
    """
    if estimate.get("value") is None:
        return ""
    if estimate.get("ci_low") is None or estimate.get("ci_high") is None:
        reason = estimate.get("no_interval")
        return f"no interval: {reason}" if reason else "no interval"
    return f"[{bound_text(float(estimate['ci_low']), scale)}, {bound_text(float(estimate['ci_high']), scale)}]"


def is_small(n: int | None) -> bool:
    """Whether a rate rests on fewer than `MIN_N` units (None: no count known, not marked)."""
    return n is not None and n < MIN_N


def marked(text: str, n: int | None) -> str:
    """`text` with the small-n mark when its n is below `MIN_N` (the table's footnote says what it
    means).
    """
    return f"{text} {SMALL_N_MARK}" if is_small(n) else text


def with_n(value: float | None, n: int | None, scale: Scale | None = None) -> str:
    """A rate with its n in one table cell, marked when n is small: `66.67 (n=3) †`; empty without a
    value.
    """
    if value is None:
        return ""
    return marked(f"{format_number(value, scale)} (n={n})", n)


def count_text(estimate: Mapping[str, Any] | None, observations: str | None = None) -> str:
    """An estimate's n as a table cell: its units, and where a unit holds several answers (a DLAMA
    fact asked in two languages) how many answers they are, named by the design (`observations`):
    `24 (48 fact-language answers)`.
    """
    if not estimate or estimate.get("n") is None:
        return ""
    if estimate.get("n_observations") is None:
        return str(estimate["n"])
    return f"{estimate['n']} ({estimate['n_observations']} {observations or 'answers'})"


def estimate_cells(
    estimate: Mapping[str, Any] | None, scale: Scale | None = None
) -> tuple[str, str, Any]:
    """(value, interval, n) of a results-block estimate as table cells, the value marked when n is
    small.
    """
    if not estimate or estimate.get("value") is None:
        return "", "", (estimate or {}).get("n", "")
    n = estimate.get("n")
    return marked(format_number(estimate["value"], scale), n), interval_text(estimate, scale), n
