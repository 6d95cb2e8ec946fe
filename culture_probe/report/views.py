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

from culture_probe.metrics.display import interval_text
from culture_probe.tasks import Record, benchmark_of


@dataclass(frozen=True)
class Table:
    """A markdown table: `rows` are sequences aligned with `columns`."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]


@dataclass(frozen=True)
class Reference:
    """A horizontal line across a bar chart: chance level, parity, or the paper's reported value."""

    label: str
    value: float


@dataclass(frozen=True)
class Bars:
    """Per-group bars of estimates from metrics.json's results block (value, 95% interval over the benchmark's
    unit, n), with reference lines (e.g. P@1 per culture against the paper's numbers).
    """

    estimates: Mapping[str, Mapping[str, Any]]
    ylabel: str
    references: tuple[Reference, ...] = ()
    title: str = ""  # default: the section's title


def repeats_the_paper(config: Mapping[str, Any]) -> bool:
    """Whether a run can be set against the paper's numbers: the released data (not custom rows, not the corrected
    variant) and all of it (no --limit subset). Reference lines of the paper's values are drawn only then.
    """
    bench, run = config.get("benchmark") or {}, config.get("run") or {}
    return not (config.get("subset") or bench.get("custom_rows") or run.get("corrected"))


def result_bars(
    metrics: Mapping[str, Any],
    stratum: str,
    metric: str,
    ylabel: str,
    *,
    labels: Sequence[str] | None = None,
    names: Mapping[str, str] | None = None,
    references: Sequence[Reference] = (),
    title: str = "",
) -> Bars:
    """Bars of one metric per label of one stratum of the results block (`labels`: which and in what order;
    `names`: how a label is shown), or of the overall value when `stratum` is "overall".
    """
    results = metrics.get("results") or {}
    groups = {"all": results.get("overall", {})} if stratum == "overall" else results.get(f"by_{stratum}", {})
    order = list(labels) if labels is not None else sorted(groups)
    estimates = {
        (names or {}).get(label, label): groups[label][metric]
        for label in order
        if metric in groups.get(label, {}) and groups[label][metric]["value"] is not None
    }
    return Bars(estimates, ylabel, tuple(references), title)


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


def sections_for(config: Mapping[str, Any], records: Sequence[Record], metrics: Mapping[str, Any]) -> list[Section]:
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
    return [*results_sections(metrics), *views, *skipped_sections(metrics)]


def results_sections(metrics: Mapping[str, Any]) -> list[Section]:
    """The headline numbers of the results schema, each with its 95% interval and n, and what the run left out."""
    results = metrics.get("results") or {}
    rows = tuple((name, e["value"], interval_text(e), e["n"]) for name, e in (results.get("overall") or {}).items())
    if not rows:
        return []
    ci = results.get("ci") or {}
    text = (
        f"Each number with a {100 * ci.get('confidence', 0.95):g}% interval from a {ci.get('method', '')} over "
        f"{results.get('unit')} ({ci.get('n_resamples')} resamples, seed {ci.get('seed')}); by stratum in "
        "metrics.json (`results`)."
    )
    omitted = results.get("omitted") or {}
    text += "".join(f"\n\n- **{name}** is not reported: {reason}." for name, reason in omitted.items())
    return [
        Section(
            "Headline numbers",
            text=text,
            tables=(Table(("metric", "value", "95% interval", f"n ({results.get('unit')})"), rows),),
        )
    ]


def default_sections(metrics: Mapping[str, Any]) -> list[Section]:
    """The scalar metrics as one table."""
    rows = tuple(
        (k, v)
        for k, v in flatten(metrics).items()
        if isinstance(v, (int, float)) and not k.startswith(("n_skipped", "skipped."))
    )
    return [Section("Metrics", tables=(Table(("metric", "value"), rows),))]


def skipped_sections(metrics: Mapping[str, Any]) -> list[Section]:
    """The probes the protocol could not ask, per reason (none when nothing was skipped)."""
    skipped = metrics.get("skipped") or {}
    if not skipped:
        return []
    return [
        Section(
            "Skipped probes (not counted in the metrics)", tables=(Table(("reason", "probes"), tuple(skipped.items())),)
        )
    ]


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


def language_country_grid(
    cells: Mapping[tuple[str, str], float],
    *,
    languages: Sequence[str],
    countries: Sequence[str],
    associations: Mapping[str, str] | None = None,
    label: str = "error rate",
) -> Heatmap:
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
