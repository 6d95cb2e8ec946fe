"""A protocol's switches: `Options` dataclasses filled from keyword values or `--option KEY=VALUE`
strings.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Mapping
from typing import Any

from culture_probe.errors import InvalidValueError, UnknownNameError
from culture_probe.util.fromtext import from_text


@dataclasses.dataclass(frozen=True)
class NoOptions:
    """A task without protocol switches."""


def parse_options(options_type: type, values: Mapping[str, Any]) -> Any:
    """An `Options` instance from keyword values; strings (`--option k=v`) are converted by field
    type. An unknown name or a value that does not fit fails here, before any data or model is
    loaded.
    """
    fields = {f.name: f for f in dataclasses.fields(options_type)}
    hints = typing.get_type_hints(options_type)
    converted = {}
    for name, value in values.items():
        if name not in fields:
            raise UnknownNameError(
                "option", name, fields, fix=f"These are the options of {options_type.__qualname__}."
            )
        converted[name] = (
            from_text(value, hints[name], name=name) if isinstance(value, str) else value
        )
    try:
        return options_type(**converted)
    except TypeError as error:
        raise InvalidValueError(f"{options_type.__qualname__}: {error}") from None


def options_dict(options: Any) -> dict[str, Any]:
    """A JSON-able dict of an Options instance (tuples become lists)."""
    return json_ready(dataclasses.asdict(options))


def options_from_dict(options_type: type, values: Mapping[str, Any]) -> Any:
    """The inverse of `options_dict` (lists back to tuples), for runs read back from config.json."""
    return options_type(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})


def at_least(name: str, value: int | None, low: int, *, none_ok: bool = False) -> None:
    """Raise `InvalidValueError` unless `value` is an int >= `low` (or None when `none_ok`)."""
    if value is None and none_ok:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        extra = " (or None)" if none_ok else ""
        raise InvalidValueError(f"{name} must be a whole number >= {low}{extra}, got {value!r}.")


def in_range(
    name: str, value: float, low: float, high: float = math.inf, *, above: bool = False
) -> None:
    """Raise `InvalidValueError` unless `low <= value <= high` (`low < value` when `above`); after
    `check_types`.
    """
    if not (low < value if above else low <= value) or value > high:
        bound = f"> {low}" if above else f">= {low}"
        bound += f" and <= {high}" if high < math.inf else ""
        raise InvalidValueError(f"{name} must be {bound}, got {value!r}.")


def json_ready(value: Any) -> Any:
    """Tuples -> lists, numpy scalars -> Python numbers, recursively."""
    if isinstance(value, Mapping):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    return value
