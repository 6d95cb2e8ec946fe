"""What the command line's flags share beyond argparse: how a number is read (the digits 0-9 and a
bounded length: Python's `int` also reads "٣" as 3 and strings of thousands of digits), and a flag
given twice, which argparse settles by keeping the last value without a word (`StoreOnce`: refused
when the two differ; `MergePairs`: KEY=VALUE lists joined). Light on purpose: the parser is built
from it before anything heavy loads.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Sequence
from typing import Any

from culture_probe.errors import InvalidValueError
from culture_probe.util.keyvalue import parse_pairs, split_pair

# a count fits a 64-bit integer, as numpy and torch take it; no count of this library comes near
MAX_DIGITS = 18
WHOLE = re.compile(rf"[-+]?[0-9]{{1,{MAX_DIGITS}}}")
DECIMAL = re.compile(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]{1,3})?")
# the longest number text read at all: a fraction's digits included
MAX_CHARS = 40
# where argparse keeps, per parse, the flags given so far: {dest: (flag, value)}
GIVEN = "_flags_given"


def quoted(text: str) -> str:
    """`text` as an error message quotes it: cut short when long (a 5,000-digit number is not
    printed whole).
    """
    return repr(text) if len(text) <= MAX_CHARS else f"{text[:20]!r}... ({len(text):,} characters)"


def is_whole(text: str) -> bool:
    """Whether `text` is a whole number in the digits 0-9, at most `MAX_DIGITS` of them (a sign
    allowed).
    """
    return WHOLE.fullmatch(text) is not None


def is_decimal(text: str) -> bool:
    """Whether `text` is a decimal number in the digits 0-9 (1.5, .25, 2e-3), at most `MAX_CHARS`
    long.
    """
    return len(text) <= MAX_CHARS and DECIMAL.fullmatch(text) is not None


def whole_number(text: str) -> int:
    """A count on the command line (`--batch-tokens`, `--seed`, `--show`): a whole number in the
    digits 0-9, its sign kept so that the setting's own check names a negative value.
    """
    return int(_number(text, is_whole, "a whole number", "10"))


def decimal(text: str) -> float:
    """A number of seconds or a share on the command line: a decimal number in the digits 0-9 (1.5,
    2e-3).
    """
    return float(_number(text, is_decimal, "a number", "1.5"))


def _number(text: str, fits: Callable[[str], bool], what: str, example: str) -> str:
    """`text` if it `fits`; else argparse's refusal, saying whether it is too long or not a number
    at all.
    """
    if fits(text):
        return text
    if len(text) > MAX_CHARS or sum(c in "0123456789" for c in text) > MAX_DIGITS:
        raise argparse.ArgumentTypeError(
            f"invalid value: {quoted(text)} has more than {MAX_DIGITS} digits (give {what} of at most "
            f"{MAX_DIGITS} digits: no count here needs more)"
        )
    raise argparse.ArgumentTypeError(
        f"invalid value: {quoted(text)} (give {what} in the digits 0-9, e.g. {example})"
    )


class StoreOnce(argparse.Action):
    """argparse's `store` for a flag given once: given again with another value (`--limit 10 ...
    --limit 1000`, or `--out a --output_path b`) it is refused naming both, where argparse would
    keep the last without a word; the same value twice is let be. Positional arguments are stored as
    argparse stores them.
    """

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        """Store `values`, unless the flag gave another value before in this parse."""
        if option_string is not None:
            given = vars(namespace).setdefault(GIVEN, {})
            flag, before = given.setdefault(self.dest, (option_string, values))
            if before != values:
                raise argparse.ArgumentError(
                    self,
                    f"given twice with two values, {flag} {before} and {option_string} {values}: give it once",
                )
        setattr(namespace, self.dest, values)


class MergePairs(argparse.Action):
    """A KEY=VALUE,... flag given more than once, or in both its spellings (`--model-args
    dtype=bfloat16 --model_args revision=main`): the pairs of all, joined, where argparse would keep
    the last list alone; a key given twice with two values is refused naming both, the same value
    twice is let be.
    """

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        """Store `values`, joined to the pairs the flag gave before in this parse."""
        before = getattr(namespace, self.dest, None)
        if before is None:  # the first: read where it is used, as when given once
            setattr(namespace, self.dest, values)
            return
        flag, example = self.option_strings[0], "dtype=bfloat16"
        try:
            pairs = parse_pairs(before, what=flag, example=example)
            for key, value in _items(values, flag, example):
                if pairs.setdefault(key, value) != value:
                    raise InvalidValueError(
                        f"{key} is given twice with two values, {key}={pairs[key]} and {key}={value}: give it once"
                    )
        except InvalidValueError as error:
            raise argparse.ArgumentError(self, str(error).rstrip(".")) from None
        setattr(namespace, self.dest, ",".join(f"{key}={value}" for key, value in pairs.items()))


def _items(text: str, flag: str, example: str) -> Sequence[tuple[str, str]]:
    return [
        split_pair(item, what=flag, example=example) for item in text.split(",") if item.strip()
    ]
