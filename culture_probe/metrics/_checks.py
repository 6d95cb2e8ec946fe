"""Input checks shared by every metric: each failure names the argument, the offending value and the
fix.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from culture_probe.errors import MetricInputError


def check_lengths(**columns: Sequence[Any] | np.ndarray | None) -> int:
    """Check that the per-item arguments are non-empty and equally long; returns their length.

    `None` marks an optional argument that was not given. The first argument given is the reference
    length.
    """
    given = {name: column for name, column in columns.items() if column is not None}
    first, n = None, 0
    for name, column in given.items():
        if isinstance(column, (str, bytes)) or not hasattr(column, "__len__"):
            raise MetricInputError(
                f"`{name}` must be a sequence with one value per item, got {type(column).__name__} {column!r:.80}."
            )
        if len(column) == 0:
            raise MetricInputError(f"`{name}` is empty: pass at least one item.")
        if first is None:
            first, n = name, len(column)
        elif len(column) != n:
            raise MetricInputError(
                f"`{name}` has {len(column)} items but `{first}` has {n}: pass one value per item in each argument."
            )
    return n


def finite_floats(name: str, values: Sequence[Any] | np.ndarray) -> np.ndarray:
    """Per-item numbers as float64; NaN, infinity and non-numbers raise, naming the first bad
    index.
    """
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise MetricInputError(f"`{name}` must hold numbers, one per item ({error}).") from None
    if array.ndim != 1:
        raise MetricInputError(
            f"`{name}` must be one-dimensional (one number per item), got shape {array.shape}."
        )
    bad = np.flatnonzero(~np.isfinite(array))
    if bad.size:
        raise MetricInputError(
            f"`{name}` has {array[bad[0]]} at index {bad[0]} ({bad.size} non-finite values in all): "
            "scores must be finite; drop or fix those items first."
        )
    return array


def check_labels(name: str, values: Sequence[Any], valid: Collection[str]) -> list[str]:
    """Per-item labels that must all be in `valid`; an unknown one raises with the valid options."""
    labels = [v if isinstance(v, str) else str(v) for v in values]
    for index, label in enumerate(labels):
        if label not in valid:
            options = sorted(valid)
            same_letters = [o for o in options if o.casefold() == label.casefold()]
            close = same_letters or difflib.get_close_matches(label, options, n=1, cutoff=0.5)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise MetricInputError(
                f"Unknown label {label!r} in `{name}` (index {index}).{hint} Valid labels: {', '.join(options)}."
            )
    return labels


def check_bools(name: str, values: Sequence[Any]) -> np.ndarray:
    """Per-item flags: True/False or 1/0; anything else (NaN, 2, 'yes') raises."""
    flags = []
    for index, value in enumerate(values):
        if not (
            isinstance(value, (bool, np.bool_))
            or (isinstance(value, (int, np.integer)) and value in (0, 1))
        ):
            raise MetricInputError(
                f"`{name}` must hold True/False (or 1/0) per item; index {index} is {value!r}."
            )
        flags.append(bool(value))
    return np.asarray(flags, dtype=bool)


def check_choice(name: str, value: Any, valid: Collection[Any]) -> None:
    """A keyword option that must be one of a few values."""
    if value not in valid:
        raise MetricInputError(f"`{name}` must be one of {sorted(valid, key=str)}, got {value!r}.")


def none_if_nan(value: float) -> float | None:
    """Undefined results (an empty group, a rate with no denominator) are reported as None, never
    NaN.
    """
    return None if value is None or math.isnan(value) else float(value)


def by_group(
    groups: Sequence[Hashable] | Mapping[str, Sequence[Hashable]],
    n: int,
    summary: Callable[[np.ndarray], dict[str, Any]],
    name: str = "groups",
) -> dict[str, Any]:
    """`summary(mask)` for each group, keys sorted.

    `groups` is one key per item (e.g. the culture), or a mapping from a grouping's name to such
    keys (e.g. {"culture": [...], "predicate": [...]}), which gives one table per grouping.
    """
    if isinstance(groups, Mapping):
        return {
            str(key): by_group(keys, n, summary, f"{name}[{key!r}]") for key, keys in groups.items()
        }
    if isinstance(groups, (str, bytes)) or len(groups) != n:
        count = "a string" if isinstance(groups, (str, bytes)) else f"{len(groups)} items"
        raise MetricInputError(
            f"`{name}` has {count} but there are {n} items: pass one group key per item."
        )
    keys = np.asarray([str(g) for g in groups])
    return {key: summary(keys == key) for key in sorted(set(keys.tolist()))}
