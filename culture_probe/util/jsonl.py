r"""JSON Lines: the one writer and the one reader of every such file the library writes or reads (a
run's `items.jsonl` and `rows.jsonl`, curated facts, DLAMA and FmLAMA sources).

`json.dumps(..., ensure_ascii=False)` leaves U+0085, U+2028 and U+2029 raw inside strings, and
`str.splitlines` breaks lines there, so a record holding one (a label, a generated answer) read back
as two damaged lines. The writer escapes the three (`\u2028` is the same JSON string); the reader
splits only at the line ends JSON never holds raw inside a value ("\n", "\r\n", a lone "\r"), so
files written before the escapes read back whole.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from culture_probe.errors import SourceFormatError

_ESCAPES = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})
# the line ends of universal newlines; JSON escapes "\n" and "\r" in strings
_LINE_END = re.compile(rb"\r\n|\r|\n")


def line(value: Any, *, default: Callable[[Any], Any] | None = None) -> str:
    r"""`value` as one line of JSON Lines, its "\n" included: UTF-8 text as is, the separators
    escaped.
    """
    return json.dumps(value, ensure_ascii=False, default=default).translate(_ESCAPES) + "\n"


def split(data: bytes) -> list[bytes]:
    """The lines of JSON Lines bytes, without their ends (none after the last end); never split
    inside a value.
    """
    lines = _LINE_END.split(data)
    return lines[:-1] if lines[-1] == b"" else lines


def decode(data: bytes, *, path: str) -> list[str]:
    """The lines of JSON Lines bytes as text; a line that is not UTF-8 is an error naming `path` and
    the line.
    """
    lines = []
    for number, raw in enumerate(split(data), start=1):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as error:
            raise SourceFormatError(
                f"not UTF-8 text ({error.reason})", path=path, line=number
            ) from None
    return lines


def read_lines(path: str | os.PathLike) -> list[str]:
    """The lines of a JSON Lines file (`decode`)."""
    return decode(Path(path).read_bytes(), path=str(path))
