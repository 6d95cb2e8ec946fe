"""What a report shows, as plain data (tables, bars, heatmaps in sections), and where each benchmark's views are.

A benchmark's views live in `culture_probe/report/<bench>.py` (named as its data module) as
`sections(config, records, metrics) -> list[Section]`, built from a run's files alone (config.json, the records,
metrics.json), so `culture-probe report RUN_DIR` re-renders any run. A benchmark without such a module gets the
default view: its scalar metrics as one table. Every report ends with the skipped probes per reason.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from culture_probe.tasks import Record, benchmark_of


@dataclass(frozen=True)
class Table:
    """A markdown table: `rows` are sequences aligned with `columns`."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]


@dataclass(frozen=True)
class Bars:
    """Per-group bars of the mean of per-item values, with bootstrap 95% intervals (e.g. P@1 per culture)."""

    values: Mapping[str, Sequence[float]]
    ylabel: str
    scale: float = 1.0  # 100 turns 0/1 hits into percentages
    title: str = ""  # default: the section's title


@dataclass(frozen=True)
class Heatmap:
    """A matrix of values (rows x columns), e.g. P@1 per predicate x culture; None cells are blank."""

    row_labels: tuple[str, ...]
    col_labels: tuple[str, ...]
    values: tuple[tuple[float | None, ...], ...]
    label: str
    # cells to outline, e.g. X-FaKT's associated (language, country) pairs
    highlight: tuple[tuple[int, int], ...] = ()
    title: str = ""  # default: the section's title


@dataclass(frozen=True)
class Section:
    """One part of report.md: a heading, text, tables and figures (each figure becomes a PNG)."""

    title: str
    text: str = ""
    tables: tuple[Table, ...] = ()
    figures: tuple[Bars | Heatmap, ...] = ()


def sections_for(config: Mapping[str, Any], records: Sequence[Record], metrics: Mapping[str, Any]
                 ) -> list[Section]:
    """The report's sections of one run: the benchmark's own views (or the default), then the skipped probes."""
    bench = benchmark_of(config["config"])
    try:
        module = importlib.import_module(f"{__package__}.{bench}")
    except ModuleNotFoundError as error:
        if error.name != f"{__package__}.{bench}":
            raise
        views = default_sections(metrics)
    else:
        views = module.sections(config, records, metrics)
    return [*views, *skipped_sections(metrics)]


def default_sections(metrics: Mapping[str, Any]) -> list[Section]:
    """The scalar metrics as one table."""
    rows = tuple((k, v) for k, v in flatten(metrics).items()
                 if isinstance(v, (int, float)) and not k.startswith(("n_skipped", "skipped.")))
    return [Section("Metrics", tables=(Table(("metric", "value"), rows),))]


def skipped_sections(metrics: Mapping[str, Any]) -> list[Section]:
    """The probes the protocol could not ask, per reason (none when nothing was skipped)."""
    skipped = metrics.get("skipped") or {}
    if not skipped:
        return []
    return [Section("Skipped probes (not counted in the metrics)",
                    tables=(Table(("reason", "probes"), tuple(skipped.items())),))]


def options_of(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The protocol options a run recorded."""
    return config.get("options") or {}


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}: how nested metrics are shown in tables and compared across runs."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def language_country_grid(cells: Mapping[tuple[str, str], float], *, languages: Sequence[str],
                          countries: Sequence[str], associations: Mapping[str, str] | None = None,
                          label: str = "error rate") -> Heatmap:
    """The language x country view (X-FaKT): rows are question languages, columns countries; each language's
    associated country is outlined. Missing cells stay blank.
    """
    values = tuple(tuple(cells.get((lang, country)) for country in countries) for lang in languages)
    highlight = tuple(
        (i, list(countries).index(associations[lang]))
        for i, lang in enumerate(languages)
        if associations and associations.get(lang) in countries
    )
    return Heatmap(tuple(languages), tuple(countries), values, label, highlight)
