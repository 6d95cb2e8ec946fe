"""Typed benchmark cards: what a benchmark measures, where it comes from, what we corrected, and the
side data (resources) its protocol can declare.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CORRECTED_SUFFIX = "_corrected"  # a config's twin with the library's fixes to known data errors


def is_corrected(config: str) -> bool:
    """Whether `config` names a corrected variant."""
    return config.endswith(CORRECTED_SUFFIX)


def base_name(config: str) -> str:
    """The faithful config's name of `config` (itself when it is not a corrected variant)."""
    return config.removesuffix(CORRECTED_SUFFIX)


@dataclass(frozen=True)
class Correction:
    """One fix to a known data error, applied only in the `corrected` variant."""

    id: str
    description: str
    rows_affected: int | None = None


@dataclass(frozen=True)
class Licence:
    """The terms of one part of a benchmark's data, as its authors state them (or that they state
    none).
    """

    name: str  # as the authors name it, e.g. "MIT", "CC0 1.0", "none stated"
    covers: str  # which part: "the repository (code and data)", "facts and labels (from Wikidata)"
    spdx: str | None = None  # the Hub's `license:` id (mit, cc0-1.0, apache-2.0); None: `other`
    url: str = ""

    def text(self) -> str:
        """`MIT (the repository)`: how cards and config.json name it."""
        return f"{self.name} ({self.covers})"


@dataclass(frozen=True)
class BenchmarkInfo:
    """The card of one benchmark; rendered into the dataset card and every run's config.json."""

    name: str
    title: str
    description: str
    homepage: str
    licences: tuple[Licence, ...]
    citation: str
    version: str
    paper: str = ""
    # pinned upstream URLs (or how to obtain manually distributed data)
    sources: tuple[str, ...] = ()
    # the configs of the paper's experiments: what `culture-probe run <name>` runs
    suite: tuple[str, ...] = ()
    corrections: tuple[Correction, ...] = field(default_factory=tuple)
    #: where to ask for the data when its authors release it only on request ("" when it is public):
    #: such data is never redistributed by culture_probe (`culture-probe push` refuses it without
    #: the user's permission)
    on_request: str = ""

    @property
    def license(self) -> str:
        """Every part's licence in one line."""
        return "; ".join(licence.text() for licence in self.licences)


@dataclass(frozen=True)
class SplitResource:
    """Side data that is one split of one of the benchmark's own configs (e.g. CAMeL's entity
    pools), loaded as rows like any config, from the same place; `files(data_dir)` names the source
    files it is read from, which fingerprint it.
    """

    config: str
    files: Callable[[str | None], list[Path]]
    split: str = "test"


@dataclass(frozen=True)
class FileResource:
    """Side data parsed from source files (e.g. X-FaKT's literals): `read(data_dir=, corrected=,
    **params)` returns the value and the files it read, which fingerprint it.
    """

    read: Callable[..., tuple[Any, list[Path]]]


Resource = SplitResource | FileResource
