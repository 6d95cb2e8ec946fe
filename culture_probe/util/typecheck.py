"""Dataclass fields checked against their annotations, for values that come from Python code or JSON
rather than from a parser that already typed them (protocol options, how a model loads), and JSON
documents a run wrote read back against the shapes their readers use (`read_dataclass`,
`check_document`), so that a damaged file is one line naming the file and the field rather than a
traceback further on.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import numbers
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, TypeVar, Union

from culture_probe.errors import (
    CultureProbeError,
    InvalidValueError,
    SourceFormatError,
    UnknownNameError,
)

T = TypeVar("T")
_LISTS = (tuple, list, Sequence)  # the annotations a JSON list reads as


def check_types(options: Any, flag: str | typing.Callable[[str], str] = "--option") -> None:
    """Every field of the dataclass `options` holds a value of its annotated type (bool, int, finite
    float, str, Literal, Optional, tuple of, dict of): what Python code passing `Options(...)` or
    `ModelArgs(...)` directly (not parsed from text) could get wrong, and what a parsed JSON value
    could, named as the command line `flag` would (`--option name=VALUE`; a function of the field's
    name where each field has a flag of its own).
    """
    for name, hint in typing.get_type_hints(type(options)).items():
        value = getattr(options, name)
        if typing.get_origin(hint) is Literal and value not in typing.get_args(hint):
            raise UnknownNameError(
                f"value of option {name}", str(value), [str(a) for a in typing.get_args(hint)]
            )
        if not _fits(value, hint):
            raise InvalidValueError(
                f"{type(options).__qualname__}.{name} must be {_describe(hint)}, got {value!r} "
                f"(on the command line {flag(name) if callable(flag) else f'{flag} {name}=VALUE'})."
            )


def _fits(value: Any, hint: Any) -> bool:
    """Whether `value` is of type `hint` (the annotations Options fields use); floats must be
    finite.
    """
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
        return isinstance(value, Mapping) and all(
            _fits(k, args[0]) and _fits(v, args[1]) for k, v in value.items()
        )
    if _container(hint) == (Mapping,):  # a TypedDict
        return _mismatch(value, hint, "") is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return (
            isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        )
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
    words = {
        bool: "True or False",
        int: "a whole number",
        float: "a finite number",
        str: "a string",
    }
    return words.get(hint, "None" if hint is type(None) else str(hint))


def _shape(hint: Any) -> str:
    """A nested dict annotation as JSON reads: dict[str, dict[str, str]] -> {str: {str: str}}."""
    args = typing.get_args(hint)
    return (
        f"{{{_shape(args[0])}: {_shape(args[1])}}}"
        if args
        else getattr(hint, "__name__", str(hint))
    )


def read_dataclass(
    cls: type[T], data: Any, source: str, block: str, fix: str, /, **given: Any
) -> T:
    """The dataclass `cls` from the JSON object `data`, the `block` of the file `source`
    (config.json's `model`): each field whose key is there checked against the field's annotation (a
    list read as the tuple it annotates), a missing or null key its default, the fields in `given`
    as given. A value of another type is the damaged file's one-line error (`fix`: what to do),
    naming the file and the field.
    """
    check_document(data, Mapping[str, Any], source, fix, block)
    hints = _hints(cls)  # type: ignore[arg-type]  # a class is hashable
    read = {}
    for name in (f.name for f in dataclasses.fields(cls)):  # type: ignore[arg-type]  # cls is a dataclass
        if name in given or data.get(name) is None:
            continue
        check_document(data[name], hints[name], source, fix, f"{block}.{name}" if block else name)
        read[name] = tuple(data[name]) if typing.get_origin(hints[name]) is tuple else data[name]
    return cls(**read, **given)


def check_document(
    value: Any, hint: Any, source: str, fix: str, where: str = "", line: int | None = None
) -> None:
    """Refuse a value read from the file `source` (`where`: its place there, `results.overall`;
    `line`: its line in a JSON Lines file) that is not of type `hint` (a TypedDict for a JSON object
    of known keys: those it requires present, every key it names of its type; other keys are let
    be), in one line naming the file and the first field that is not (`fix`: what to do).
    """
    wrong = _mismatch(value, hint, where)
    if wrong is not None:
        raise SourceFormatError(f"{wrong}; {fix}", path=source, line=line)


def _mismatch(value: Any, hint: Any, where: str) -> str | None:
    """Why `value` at `where` is not of type `hint`, said of the deepest field that is not; None
    when it is.
    """
    origin, args = _parts(hint)
    if origin in (Union, types.UnionType):
        if any(_mismatch(value, a, where) is None for a in args):
            return None
        # a nested mismatch is named inside the one member of the union of the value's kind (a JSON
        # object, a list)
        kinds = [a for a in args if isinstance(value, _container(a))]
        return _mismatch(value, kinds[0], where) if len(kinds) == 1 else _wrong(value, hint, where)
    if _container(hint) and not isinstance(value, _container(hint)):
        return _wrong(value, hint, where)
    if origin is None and _container(hint):  # a TypedDict
        fields = _hints(hint)
        missing = [key for key in fields if key in hint.__required_keys__ and key not in value]
        if missing:
            return f"`{where}` lacks `{missing[0]}` ({_describe(fields[missing[0]])})"
        return _first(
            _mismatch(value[key], fields[key], _at(where, key)) for key in fields if key in value
        )
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
    """The Python types of the JSON kind a type annotation reads: an object, a list; none for a
    scalar.
    """
    origin = typing.get_origin(hint)
    if typing.is_typeddict(hint) or origin in (dict, Mapping):
        return (Mapping,)
    return (tuple, list) if origin in _LISTS else ()


def _wrong(value: Any, hint: Any, where: str) -> str:
    return f"`{where}` should be {_describe(hint)}, got {value!r:.80}"


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


# ---------------------------------------------------------------- the Python API's arguments

F = TypeVar("F", bound=typing.Callable[..., Any])


def checked(
    error: type[CultureProbeError] = InvalidValueError, *, pure: bool = False
) -> typing.Callable[[F], F]:
    """A public function whose arguments are checked against its annotations when it is called: a
    value of the wrong kind (None or a number where a list is needed, a string where a number is),
    or a list holding one where its items must be lists or mappings, is `error` naming the function
    and the argument (and the item), where Python would raise a TypeError from deep inside. Only
    kinds are checked (a list, a mapping, a number, a string, a class); what the values mean
    (finite, known labels, equal lengths, not empty) stays the function's own check. A `pure`
    function (a metric: no side effects) is still called with a faulty argument, so that its own
    error, which says more (`must be a finite accuracy`), wins where it has one.
    """

    def wrap(function: F) -> F:
        signature = inspect.signature(function)
        hints = _parameter_hints(function, signature)

        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as wrong_call:
                raise error(f"{function.__name__}: {wrong_call}.") from None
            faults = (
                _api_fault(value, hints[name], name)
                for name, value in bound.arguments.items()
                if name in hints and value is not signature.parameters[name].default
            )
            fault = _first(faults)
            if fault is None:
                return function(*args, **kwargs)
            if pure:
                try:
                    function(*args, **kwargs)
                except CultureProbeError:
                    raise
                except Exception:  # what the check above is there to name
                    pass
            raise error(f"{function.__name__}: {fault}.")

        return typing.cast(F, call)

    return wrap


def names_given(value: Any, argument: str) -> list[str]:
    """A name or a list of names -> the names: a string is one name (never read letter by letter);
    anything else, an empty list or an item that is no string is refused naming `argument`
    (`run_suite(names)`).
    """
    if isinstance(value, str):
        return [value]
    if isinstance(value, bytes) or not _is_sequence(value):
        raise InvalidValueError(f"{argument} takes a name or a list of names, got {value!r:.80}.")
    if not value:
        raise InvalidValueError(f"{argument} is an empty list: give at least one name.")
    for index, name in enumerate(value):
        if not isinstance(name, str):
            raise InvalidValueError(
                f"{argument} takes names (strings); item {index} is {name!r:.80}."
            )
    return list(value)


def _parameter_hints(function: Any, signature: inspect.Signature) -> dict[str, Any]:
    """Each named parameter's annotation, evaluated; one that names what only type checkers import
    is left out.
    """
    hints = {}
    for name, parameter in signature.parameters.items():
        annotation = parameter.annotation
        if annotation is inspect.Parameter.empty or parameter.kind in (
            parameter.VAR_POSITIONAL,
            parameter.VAR_KEYWORD,
        ):
            continue
        try:
            hints[name] = (
                eval(annotation, function.__globals__)
                if isinstance(annotation, str)
                else annotation
            )
        except (NameError, AttributeError, TypeError):
            continue
    return hints


def _api_fault(value: Any, hint: Any, where: str, item: bool = False) -> str | None:
    """Why the argument `value` (at `where`, `references[3]`) is not of the kind `hint` names; None
    when it is. `item`: the value is an item of a list, where a string may stand for a list of
    strings.
    """
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        if any(_api_fault(value, a, where, item) is None for a in args):
            return None
        # a list (or mapping) holding a wrong item is named at the item
        kinds = [a for a in args if _api_fault(value, _outer(a), where, item) is None]
        return (
            _api_fault(value, kinds[0], where, item)
            if len(kinds) == 1
            else _api_wrong(value, hint, where)
        )
    if origin in _LISTS or hint in (list, tuple):
        if isinstance(value, str) and item:
            return None
        if isinstance(value, (str, bytes)) or not _is_sequence(value):
            return _api_wrong(value, hint, where)
        inner = args[0] if args else Any
        if not _holds_containers(inner):
            return None  # items that are numbers, strings or labels: the function's own check
        return _first(_api_fault(v, inner, f"{where}[{i}]", True) for i, v in enumerate(value))
    if origin in (dict, Mapping) or hint in (dict, Mapping):
        if not isinstance(value, Mapping):
            return _api_wrong(value, hint, where)
        inner = args[1] if args else Any
        if not _holds_containers(inner):
            return None
        return _first(_api_fault(v, inner, f"{where}[{k!r}]", True) for k, v in value.items())
    return None if _api_fits(value, hint) else _api_wrong(value, hint, where)


def _api_fits(value: Any, hint: Any) -> bool:
    """Whether a value is of a scalar or class annotation; numpy's numbers count as numbers."""
    if typing.get_origin(hint) is Literal:
        return value in typing.get_args(hint)
    if hint is bool:
        return not hasattr(value, "__len__") and value in (True, False)
    if hint is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if hint is type(None):
        return value is None
    if not isinstance(hint, type):
        return True  # a protocol, a type variable: nothing to check here
    try:
        return isinstance(value, hint)
    except TypeError:  # a protocol that cannot be checked at run time
        return True


def _outer(hint: Any) -> Any:
    """The kind of container an annotation names (list for Sequence[str]), or the annotation
    itself.
    """
    origin = typing.get_origin(hint)
    if origin in _LISTS:
        return list
    return dict if origin in (dict, Mapping) else hint


def _holds_containers(hint: Any) -> bool:
    """Whether an annotation (or a member of it) names a list or a mapping, whose items are checked
    in turn.
    """
    members = (
        typing.get_args(hint) if typing.get_origin(hint) in (Union, types.UnionType) else (hint,)
    )
    return any(_outer(member) is not member for member in members)


def _is_sequence(value: Any) -> bool:
    """A list, tuple, array or series: sized, iterable, and no mapping."""
    return (
        hasattr(value, "__len__") and hasattr(value, "__iter__") and not isinstance(value, Mapping)
    )


def _api_wrong(value: Any, hint: Any, where: str) -> str:
    return f"`{where}` must be {_kind(hint)}, got {value!r:.80}"


def _kind(hint: Any) -> str:
    """The kind an annotation names, in words: `a list`, `a whole number`, `a RunSettings`."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        return " or ".join(dict.fromkeys(_kind(a) for a in typing.get_args(hint)))
    outer = _outer(hint)
    if outer is list:
        return "a list"
    if outer is dict:
        return "a mapping"
    words = {
        bool: "True or False",
        int: "a whole number",
        float: "a number",
        str: "a string",
        type(None): "None",
    }
    return words.get(outer, f"a {getattr(outer, '__name__', str(outer))}")
