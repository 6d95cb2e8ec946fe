"""The run folders the board's tests share (made by `conftest.py`), in a module of its own:
`conftest` is a name every test folder has, so importing it from a test picks whichever was loaded
first.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Runs:
    """The session's run folders."""

    data: Path
    knows: Path
    guesses: Path
    smoke: Path
    suite: Path
    camel: Path | None  # a smoke run of CAMeL (needs the mirror)
