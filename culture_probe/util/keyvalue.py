"""`KEY=VALUE` text, the command line's way of naming several things at once (`--model-args`,
`--option`, `--data-dir`, a region's `NAME=QID,...`): one parser, so every flag refuses a malformed
pair or a key given twice with the same kind of message, naming the flag, the text and the key.
"""

from __future__ import annotations

from collections.abc import Iterable

from culture_probe.errors import InvalidValueError


def split_pair(text: str, *, what: str, example: str, shape: str = "KEY=VALUE") -> tuple[str, str]:
    """`"key=value"` -> `("key", "value")`, both stripped; text without `=`, or with an empty key or
    value, is an error naming `what` (the flag), the `shape` it takes and an `example`.
    """
    key, eq, value = text.partition("=")
    key, value = key.strip(), value.strip()
    if not eq or not key or not value:
        raise InvalidValueError(
            f"{what} takes {shape}, got {text.strip()!r} (e.g. {what} {example})."
        )
    return key, value


def parse_pairs(
    text: str | Iterable[str] | None, *, what: str, example: str, shape: str = "KEY=VALUE"
) -> dict[str, str]:
    """`"a=1,b=2"` (or the items already split, e.g. repeated `--option` flags) -> `{"a": "1", "b":
    "2"}` in the order given; a malformed item or a key given twice is an error naming the flag, the
    text and the key.
    """
    items = (text or "").split(",") if isinstance(text, str) or text is None else list(text)
    pairs: dict[str, str] = {}
    for item in (i for i in items if i.strip()):
        key, value = split_pair(item, what=what, example=example, shape=shape)
        if key in pairs:
            raise InvalidValueError(
                f"{what} gives {key} twice ({pairs[key]!r} and {value!r}): keep one."
            )
        pairs[key] = value
    return pairs
