"""Typed benchmark cards: what a benchmark measures, where it comes from, what we corrected, and the side data
(resources) its protocol can declare.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CORRECTED_SUFFIX = "_corrected"  # a config's twin with the spec's fixes to known data errors


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
class BenchmarkInfo:
    """The card of one benchmark; rendered into the dataset card and every run's config.json."""

    name: str
    title: str
    description: str
    homepage: str
    license: str
    citation: str
    version: str
    paper: str = ""
    sources: tuple[str, ...] = ()  # pinned upstream URLs (or how to obtain manually distributed data)
    suite: tuple[str, ...] = ()  # the configs of the paper's experiments: what `culture-probe run <name>` runs
    corrections: tuple[Correction, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class SplitResource:
    """Side data that is one split of one of the benchmark's own configs (e.g. CAMeL's entity pools), loaded as
    rows like any config, from the same place; `files(data_dir)` names the source files it is read from, which
    fingerprint it.
    """

    config: str
    files: Callable[[str | None], list[Path]]
    split: str = "test"


@dataclass(frozen=True)
class FileResource:
    """Side data parsed from source files (e.g. X-FaKT's literals): `read(data_dir=, corrected=, **params)` returns
    the value and the files it read, which fingerprint it.
    """

    read: Callable[..., tuple[Any, list[Path]]]


Resource = SplitResource | FileResource
