"""Typed benchmark cards: what a benchmark measures, where it comes from, and what we changed."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Correction:
    """One fix to a known data error, applied only in the `corrected` variant."""

    id: str
    description: str
    rows_affected: int | None = None


@dataclass(frozen=True)
class Deviation:
    """One place where our protocol differs from the original code, and why (recorded in run metadata)."""

    id: str
    description: str


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
    corrections: tuple[Correction, ...] = field(default_factory=tuple)
    deviations: tuple[Deviation, ...] = field(default_factory=tuple)
