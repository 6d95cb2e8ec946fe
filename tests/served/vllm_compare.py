"""Comparing what the served model gave with what the in-process engine gave: numbers within
TOLERANCE, everything else (texts, labels, predictions, counts) equal, and every list or map of
scores in the same order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

TOLERANCE = 1e-4
# Every figure a test measured against the in-process engine (max |diff| of scores, texts compared,
# tokens), printed at the end of the session (conftest.py).
FIGURES: dict[str, str] = {}


@dataclass
class Comparison:
    """What was compared, the largest difference of a number, and each place where the two
    disagree.
    """

    max_diff: float = 0.0
    numbers: int = 0
    texts: int = 0
    rankings: int = 0
    problems: list[str] = field(default_factory=list)
    # generated texts that end inside a character, which the two engines write differently (see
    # cut_character)
    cut_characters: list[str] = field(default_factory=list)

    def check(self, local: Any, served: Any, where: str = "") -> Comparison:
        """Compares `local` with `served` (JSON-like values) and returns self."""
        if isinstance(local, bool) or isinstance(served, bool) or local is None or served is None:
            if type(local) is not type(served) or local != served:
                self.problems.append(f"{where}: {local!r} in process, {served!r} served")
        elif _number(local) and _number(served):
            if isinstance(local, int) and isinstance(served, int):
                if local != served:
                    self.problems.append(f"{where}: {local} in process, {served} served")
                return self
            self.numbers += 1
            if math.isnan(local) and math.isnan(served):
                return self
            diff = abs(local - served)
            self.max_diff = max(self.max_diff, diff)
            if not diff <= TOLERANCE:
                self.problems.append(f"{where}: {local!r} in process, {served!r} served")
        elif isinstance(local, str) and isinstance(served, str):
            if local == served:
                self.texts += 1
            elif cut_character(local, served):
                self.cut_characters.append(f"{where}: {local!r} in process, {served!r} served")
            elif local != served:
                self.problems.append(f"{where}: {local!r} in process, {served!r} served")
        elif isinstance(local, Mapping) and isinstance(served, Mapping):
            if list(local) != list(served):
                self.problems.append(
                    f"{where}: keys {list(local)} in process, {list(served)} served"
                )
                return self
            for key in local:
                self.check(local[key], served[key], f"{where}.{key}")
            self._order(list(local.values()), list(served.values()), where)
        elif _sequence(local) and _sequence(served):
            if len(local) != len(served):
                self.problems.append(
                    f"{where}: {len(local)} values in process, {len(served)} served"
                )
                return self
            for i, (a, b) in enumerate(zip(local, served, strict=True)):
                self.check(a, b, f"{where}[{i}]")
            self._order(list(local), list(served), where)
        else:
            self.problems.append(f"{where}: {local!r} in process, {served!r} served")
        return self

    def _order(self, local: list[Any], served: list[Any], where: str) -> None:
        """Scores of candidates rank them alike: of any two whose in-process scores are more than
        twice the tolerance apart, the higher is higher served too (closer ones may swap within the
        tolerance).
        """
        if len(local) < 2 or not all(_number(v) and isinstance(v, float) for v in local + served):
            return
        self.rankings += 1
        a, b = np.array(local), np.array(served)
        clearly_above = a[:, None] - a[None, :] > 2 * TOLERANCE
        swapped = np.argwhere(clearly_above & ~(b[:, None] > b[None, :]))
        for i, j in swapped[:3]:
            self.problems.append(
                f"{where}: the in-process ranking puts [{i}] above [{j}] ({a[i]} > {a[j]}); served it is "
                f"{b[i]} against {b[j]}"
            )

    def assert_equal(self) -> None:
        assert not self.problems, f"{len(self.problems)} differences, first: " + "; ".join(
            self.problems[:5]
        )

    def summary(self) -> str:
        parts = [f"max |diff| {self.max_diff:.2e} over {self.numbers} numbers"]
        if self.texts:
            parts.append(f"{self.texts} texts identical")
        if self.rankings:
            parts.append(f"{self.rankings} rankings alike")
        if self.cut_characters:
            parts.append(
                f"{len(self.cut_characters)} texts ending inside a character (e.g. {self.cut_characters[0]})"
            )
        return ", ".join(parts)


def cut_character(local: str, served: str) -> bool:
    """Whether two generated texts differ only where max_new_tokens cut the last character: the
    in-process engine decodes the last token's incomplete UTF-8 bytes as U+FFFD, vLLM's detokenizer
    holds that token back (with the space a byte-level token may carry before them) and leaves it
    out. Every other character is compared.
    """
    return (
        local != served
        and local.endswith("\ufffd")
        and local.startswith(served)
        and set(local[len(served) :]) <= {" ", "\ufffd"}
    )


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _sequence(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))
