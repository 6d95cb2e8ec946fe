"""Dataclass fields checked against their annotations, for values that come from Python code or JSON rather than
from a parser that already typed them (protocol options, how a model loads).
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union

from culture_probe.errors import InvalidValueError, UnknownNameError


def check_types(options: Any, flag: str = "--option") -> None:
    """Every field of the dataclass `options` holds a value of its annotated type (bool, int, finite float, str,
    Literal, Optional, tuple of, dict of): what Python code passing `Options(...)` or `ModelArgs(...)` directly (not
    parsed from text) could get wrong, and what a parsed JSON value could, named as the command line `flag` would.
    """
    for name, hint in typing.get_type_hints(type(options)).items():
        value = getattr(options, name)
        if typing.get_origin(hint) is Literal and value not in typing.get_args(hint):
            raise UnknownNameError(f"value of option {name}", str(value), [str(a) for a in typing.get_args(hint)])
        if not _fits(value, hint):
            raise InvalidValueError(
                f"{type(options).__qualname__}.{name} must be {_describe(hint)}, got {value!r} "
                f"(on the command line {flag} {name}=VALUE)."
            )


def _fits(value: Any, hint: Any) -> bool:
    """Whether `value` is of type `hint` (the annotations Options fields use); floats must be finite."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return value in args
    if origin in (Union, types.UnionType):
        return any(_fits(value, a) for a in args)
    if origin is tuple:
        return isinstance(value, (tuple, list)) and all(_fits(v, args[0]) for v in value)
    if origin in (dict, Mapping):
        return isinstance(value, Mapping) and all(_fits(k, args[0]) and _fits(v, args[1]) for k, v in value.items())
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if hint is type(None):
        return value is None
    return isinstance(value, hint)


def _describe(hint: Any) -> str:
    """A type annotation in words, for error messages."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(a) for a in args)
    if origin is tuple:
        return f"a list of {_describe(args[0]).removeprefix('a ')}s"
    if origin in (dict, Mapping):
        return f"a JSON object {_shape(hint)}"
    words = {bool: "True or False", int: "a whole number", float: "a finite number", str: "a string"}
    return words.get(hint, "None" if hint is type(None) else str(hint))


def _shape(hint: Any) -> str:
    """A nested dict annotation as JSON reads: dict[str, dict[str, str]] -> {str: {str: str}}."""
    args = typing.get_args(hint)
    return f"{{{_shape(args[0])}: {_shape(args[1])}}}" if args else getattr(hint, "__name__", str(hint))
