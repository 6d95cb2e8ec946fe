"""Dataclass fields checked against their annotations, for values that come from Python code or JSON rather than
from a parser that already typed them (protocol options, how a model loads), and JSON documents a run wrote read back
against the shapes their readers use (`read_dataclass`, `check_document`), so that a damaged file is one line naming
the file and the field rather than a traceback further on.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, TypeVar, Union

from culture_probe.errors import InvalidValueError, SourceFormatError, UnknownNameError

T = TypeVar("T")
_LISTS = (tuple, list, Sequence)  # the annotations a JSON list reads as


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
    origin, args = _parts(hint)
    if hint is Any:
        return True
    if origin is Literal:
        return value in args
    if origin in (Union, types.UnionType):
        return any(_fits(value, a) for a in args)
    if origin in _LISTS:
        return isinstance(value, (tuple, list)) and all(_fits(v, args[0]) for v in value)
    if origin in (dict, Mapping):
        return isinstance(value, Mapping) and all(_fits(k, args[0]) and _fits(v, args[1]) for k, v in value.items())
    if _container(hint) == (Mapping,):  # a TypedDict
        return _mismatch(value, hint, "") is None
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
    if origin in _LISTS:
        return f"a list of {_describe(args[0]).removeprefix('a ')}s"
    if typing.is_typeddict(hint) or (origin in (dict, Mapping) and args[1] is Any):
        return "a JSON object"
    if origin in (dict, Mapping):
        return f"a JSON object {_shape(hint)}"
    words = {bool: "True or False", int: "a whole number", float: "a finite number", str: "a string"}
    return words.get(hint, "None" if hint is type(None) else str(hint))


def _shape(hint: Any) -> str:
    """A nested dict annotation as JSON reads: dict[str, dict[str, str]] -> {str: {str: str}}."""
    args = typing.get_args(hint)
    return f"{{{_shape(args[0])}: {_shape(args[1])}}}" if args else getattr(hint, "__name__", str(hint))


def read_dataclass(cls: type[T], data: Any, source: str, block: str, fix: str, /, **given: Any) -> T:
    """The dataclass `cls` from the JSON object `data`, the `block` of the file `source` (config.json's `model`):
    each field whose key is there checked against the field's annotation (a list read as the tuple it annotates), a
    missing or null key its default, the fields in `given` as given. A value of another type is the damaged file's
    one-line error (`fix`: what to do), naming the file and the field.
    """
    check_document(data, Mapping[str, Any], source, fix, block)
    hints = _hints(cls)
    read = {}
    for name in (f.name for f in dataclasses.fields(cls)):  # type: ignore[arg-type]  # cls is a dataclass
        if name in given or data.get(name) is None:
            continue
        check_document(data[name], hints[name], source, fix, f"{block}.{name}" if block else name)
        read[name] = tuple(data[name]) if typing.get_origin(hints[name]) is tuple else data[name]
    return cls(**read, **given)


def check_document(value: Any, hint: Any, source: str, fix: str, where: str = "", line: int | None = None) -> None:
    """Refuse a value read from the file `source` (`where`: its place there, `results.overall`; `line`: its line in
    a JSON Lines file) that is not of type `hint` (a TypedDict for a JSON object of known keys: those it requires
    present, every key it names of its type; other keys are let be), in one line naming the file and the first field
    that is not (`fix`: what to do).
    """
    wrong = _mismatch(value, hint, where)
    if wrong is not None:
        raise SourceFormatError(f"{wrong}; {fix}", path=source, line=line)


def _mismatch(value: Any, hint: Any, where: str) -> str | None:
    """Why `value` at `where` is not of type `hint`, said of the deepest field that is not; None when it is."""
    origin, args = _parts(hint)
    if origin in (Union, types.UnionType):
        if any(_mismatch(value, a, where) is None for a in args):
            return None
        # a nested mismatch is named inside the one member of the union of the value's kind (a JSON object, a list)
        kinds = [a for a in args if isinstance(value, _container(a))]
        return _mismatch(value, kinds[0], where) if len(kinds) == 1 else _wrong(value, hint, where)
    if _container(hint) and not isinstance(value, _container(hint)):
        return _wrong(value, hint, where)
    if origin is None and _container(hint):  # a TypedDict
        fields = _hints(hint)
        missing = [key for key in fields if key in hint.__required_keys__ and key not in value]
        if missing:
            return f"`{where}` lacks `{missing[0]}` ({_describe(fields[missing[0]])})"
        return _first(_mismatch(value[key], fields[key], _at(where, key)) for key in fields if key in value)
    if origin in _LISTS:
        return _first(_mismatch(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
    if origin in (dict, Mapping):
        bad_key = next((k for k in value if not _fits(k, args[0])), None)
        if bad_key is not None:
            return f"`{where}` has the key {bad_key!r}, which is not {_describe(args[0])}"
        return _first(_mismatch(v, args[1], _at(where, str(k))) for k, v in value.items())
    return None if _fits(value, hint) else _wrong(value, hint, where)


# an annotation's parts and fields, read once: a metrics.json holds hundreds of estimates
_hints = functools.cache(typing.get_type_hints)


@functools.cache
def _parts(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    return typing.get_origin(hint), typing.get_args(hint)


def _first(found: Iterable[str | None]) -> str | None:
    return next((wrong for wrong in found if wrong), None)


@functools.cache
def _container(hint: Any) -> tuple[type, ...]:
    """The Python types of the JSON kind a type annotation reads: an object, a list; none for a scalar."""
    origin = typing.get_origin(hint)
    if typing.is_typeddict(hint) or origin in (dict, Mapping):
        return (Mapping,)
    return (tuple, list) if origin in _LISTS else ()


def _wrong(value: Any, hint: Any, where: str) -> str:
    return f"`{where}` should be {_describe(hint)}, got {value!r:.80}"


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key
