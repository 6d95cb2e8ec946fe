"""A value typed on the command line (`--option KEY=VALUE`, `--data-option KEY=VALUE`) read by its
field's annotation: one reading for a protocol's options and a benchmark's data options alike.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Union

from culture_probe.errors import InvalidValueError, UnknownNameError

TRUE, FALSE = ("true", "1", "yes"), ("false", "0", "no")


def from_text(text: str, hint: Any, *, name: str, flag: str = "Option") -> Any:
    """`text` as a value of type `hint` (bool, int, float, str, Literal, Optional, tuple, a JSON
    object), or an error naming `flag name` (`Option judge`, `--data-option verify_counts`) and what
    it takes.
    """
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    origin = typing.get_origin(hint)
    if origin is Literal:
        if text not in [str(a) for a in args]:
            kind = "data option" if flag.startswith("--data") else "option"
            raise UnknownNameError(f"value of {kind} {name}", text, [str(a) for a in args])
        return next(a for a in args if str(a) == text)
    if origin in (Union, types.UnionType):
        if text.lower() in ("none", "null"):
            return None
        return from_text(text, args[0], name=name, flag=flag)
    if origin in (dict, Mapping) or hint is dict:
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            raise InvalidValueError(f"{flag} {name} takes a JSON object, got {text!r}.") from None
    if origin in (tuple, list, Sequence):
        parts = (part.strip() for part in text.split(","))
        return tuple(from_text(part, args[0], name=name, flag=flag) for part in parts if part)
    if hint is bool:
        if text.lower() not in (*TRUE, *FALSE):
            raise InvalidValueError(f"{flag} {name} takes true or false, got {text!r}.")
        return text.lower() in TRUE
    if hint in (int, float):
        try:
            return hint(text)
        except ValueError:
            raise InvalidValueError(
                f"{flag} {name} takes a {hint.__name__}, got {text!r}."
            ) from None
    return text
