"""Filling a template's slots: the library's plain replacement, and the regex artefact of the
released DLAMA and FmLAMA T5/mT5 code (deviations D1 and F3), implemented once for both benchmarks.

The released T5/mT5 paths wrote `re.sub("[X]", subject, template)` (and FmLAMA then `re.sub("[C]",
country, ...)` on the filled text). A pattern in brackets is a character class: every capital X of
the text becomes the subject, every capital C (those of the dish name included, as it is filled
first) the country, and the brackets stay (`[X] is located in [Y] .` becomes `[Egypt] is located in
[Y] .`). The value is a replacement template, so a backslash in it is read as an escape.

`slot_request` turns a filled template's two sides into the engine's request, with the candidate ids
either rule asks for.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal, get_args

from culture_probe.engine.types import ScoreRequest
from culture_probe.errors import TemplateError, UnknownNameError

Fill = Literal["replace", "upstream_regex"]
FILLS: tuple[str, ...] = get_args(Fill)


def fill_slots(template: str, fillers: Sequence[tuple[str, str]], how: Fill = "replace") -> str:
    """`template` with each (slot, value) of `fillers` filled in turn, each on the text the previous
    one left.

    `how="replace"`: every occurrence of the slot string becomes the value (the library's fill).
    `how="upstream_regex"`: `re.sub(slot, value, text)`, as the released T5/mT5 paths did (see the
    module's docstring for what that does to brackets and capitals).
    """
    if how not in FILLS:
        raise UnknownNameError("fill", how, FILLS)
    text = template
    for slot, value in fillers:
        if how == "replace":
            text = text.replace(slot, value)
            continue
        try:
            text = re.sub(slot, value, text)
        except re.error as error:  # upstream's re.sub fails on the same value
            raise TemplateError(
                f"fill='upstream_regex' cannot put {value!r} in {slot!r}: as a regex replacement "
                f"it is invalid ({error}), as it was for the released code. Use fill='replace'."
            ) from None
    return text


def slot_request(
    left: str,
    right: str,
    candidates: Sequence[str],
    candidate_ids: Literal["in_context", "alone"] = "in_context",
) -> ScoreRequest:
    """A request that keeps the template's own spacing: a space before the slot moves onto the
    candidate (in-context ids, like ' tofu' for BPE), no space stays none (zh, or a slot glued to
    punctuation); `candidate_ids="alone"` scores candidates by their ids as tokenized on their own
    instead, as the released DLAMA and FmLAMA masked paths did (D2, F9).
    """
    stripped = left.rstrip()
    sep = " " if stripped != left else ""
    return ScoreRequest(
        left=stripped,
        candidates=tuple(candidates),
        right=right,
        sep=sep,
        candidate_ids=candidate_ids,
    )
