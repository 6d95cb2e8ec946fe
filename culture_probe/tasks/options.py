"""A protocol's switches: `Options` dataclasses filled from keyword values or `--option KEY=VALUE` strings."""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union

from culture_probe.errors import CultureProbeError, InvalidValueError, UnknownNameError


@dataclasses.dataclass(frozen=True)
class NoOptions:
    """A task without protocol switches."""


def parse_options(options_type: type, values: Mapping[str, Any]) -> Any:
    """An `Options` instance from keyword values; strings (`--option k=v`) are converted by field type. An unknown
    name or a value that does not fit fails here, before any data or model is loaded.
    """
    fields = {f.name: f for f in dataclasses.fields(options_type)}
    hints = typing.get_type_hints(options_type)
    converted = {}
    for name, value in values.items():
        if name not in fields:
            raise UnknownNameError(
                "option", name, fields, fix=f"These are the options of {options_type.__qualname__}."
            )
        converted[name] = _convert(name, value, hints[name]) if isinstance(value, str) else value
    try:
        return options_type(**converted)
    except TypeError as error:
        raise InvalidValueError(f"{options_type.__qualname__}: {error}") from None


def _convert(name: str, text: str, hint: Any) -> Any:
    """Convert a command-line string to the field's type (bool, int, float, str, Literal, Optional, tuple)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    origin = typing.get_origin(hint)
    if origin is Literal:
        if text not in [str(a) for a in args]:
            raise UnknownNameError(f"value of option {name}", text, [str(a) for a in args])
        return next(a for a in args if str(a) == text)
    if origin in (Union, types.UnionType):
        if text.lower() in ("none", "null"):
            return None
        return _convert(name, text, args[0])
    if origin in (dict, Mapping) or hint is dict:
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            raise CultureProbeError(f"Option {name} takes a JSON object, got {text!r}.") from None
    if origin is tuple:
        return tuple(_convert(name, part, args[0]) for part in text.split(",") if part)
    if hint is bool:
        if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise CultureProbeError(f"Option {name} takes true or false, got {text!r}.")
        return text.lower() in ("true", "1", "yes")
    if hint in (int, float):
        try:
            return hint(text)
        except ValueError:
            raise CultureProbeError(
                f"Option {name} takes a {hint.__name__}, got {text!r}."
            ) from None
    return text


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
    """Raise `InvalidValueError` unless `low <= value <= high` (`low < value` when `above`); after `check_types`."""
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
