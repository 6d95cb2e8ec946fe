"""What a report shows, as plain data (tables, bars, heatmaps in sections), and where each
benchmark's views are.

A benchmark's views live in its folder's report module (`culture_probe/benchmarks/<name>/report.py`)
as `sections(config, records, metrics) -> list[Section]` (`config`: the run's `RunRecord`), built
from a run's files alone (config.json, the records, metrics.json), so `culture-probe report RUN_DIR`
re-renders any run. A benchmark without such a module gets the default view: its scalar metrics as
one table. Every report ends with the skipped probes per reason.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from culture_probe.benchmarks import declaration
from culture_probe.metrics.display import (
    Scale,
    bound_text,
    count_text,
    estimate_cells,
    format_number,
)
from culture_probe.record import Chance, Metrics, ResultsTable, RunRecord
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


CHANCE = "chance"  # the label of a chance level's line, which figures draw in their own style


def chance_reference(metrics: Mapping[str, Any], metric: str) -> tuple[Reference, ...]:
    """The run's chance level of `metric` (the results block's `chance`, as the headline table gives
    it) as a line, where it has one: a figure of that metric is read against what random answers
    score on the run's items.
    """
    level = ResultsTable.of(metrics).chance.get(metric)
    return (Reference(CHANCE, level["value"]),) if level else ()


@dataclass(frozen=True)
class Bars:
    """Per-group bars of estimates from metrics.json's results block (value, 95% interval over the
    benchmark's unit, n), with reference lines (e.g. P@1 per culture against the paper's numbers).
    """

    estimates: Mapping[str, Mapping[str, Any]]
    ylabel: str
    references: tuple[Reference, ...] = ()
    title: str = ""  # default: the section's title
    scale: Scale | None = None  # the axis starts at 0 and error bars stay inside the scale's range


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
    scale: Scale | None = "%",
) -> Bars:
    """Bars of one metric per label of one stratum of the results block (`labels`: which and in what
    order; `names`: how a label is shown), or of the overall value when `stratum` is "overall"; with
    `references`, the metric's chance level where the results give one.
    """
    groups = ResultsTable.of(metrics).by(stratum)
    order = list(labels) if labels is not None else sorted(groups)
    estimates = {
        (names or {}).get(label, label): groups[label][metric]
        for label in order
        if metric in groups.get(label, {}) and groups[label][metric]["value"] is not None
    }
    return Bars(estimates, ylabel, (*references, *chance_reference(metrics, metric)), title, scale)


@dataclass(frozen=True)
class Heatmap:
    """A matrix of values (rows x columns), e.g. P@1 per predicate x culture; None cells are blank.
    `counts` (same shape) gives each cell's n, printed in it; cells of n below `MIN_N` are hatched.
    """

    row_labels: tuple[str, ...]
    col_labels: tuple[str, ...]
    values: tuple[tuple[float | None, ...], ...]
    label: str
    # cells to outline, e.g. X-FaKT's associated (language, country) pairs
    highlight: tuple[tuple[int, int], ...] = ()
    title: str = ""  # default: the section's title
    scale: Scale | None = None  # the colour bar spans the scale's range (0-100, 0-1)
    counts: tuple[tuple[int | None, ...], ...] = ()
    # levels marked on the colour bar, each true of every cell
    references: tuple[Reference, ...] = ()


@dataclass(frozen=True)
class Section:
    """One part of report.md: a heading, text, tables and figures (each figure becomes a PNG)."""

    title: str
    text: str = ""
    tables: tuple[Table, ...] = ()
    figures: tuple[Bars | Heatmap, ...] = ()


def sections_for(
    config: RunRecord,
    records: Sequence[Record],
    metrics: Metrics,
    more: Sequence[Section] = (),
) -> list[Section]:
    """The report's sections of one run: the benchmark's own views (or the default), `more` (views
    common to every benchmark), then the skipped probes.
    """
    module = report_module(config.config)
    views = module.sections(config, records, metrics) if module else default_sections(metrics)
    scales = scales_of(config.config)
    planted = planted_sections(metrics, scales)
    return [*results_sections(metrics, scales), *planted, *views, *more, *skipped_sections(metrics)]


@functools.cache
def report_module(config_name: str) -> ModuleType | None:
    """The report module of the benchmark defining `config_name` (`views_module`), looked up once
    per config: a report asks it for its views, its scales and its inert options.
    """
    return views_module(benchmark_of(config_name))


def views_module(bench: str) -> ModuleType | None:
    """The benchmark's report module, as its declaration names it, or None when it has none."""
    return declaration(bench).part("report")


def scales_of(config_name: str) -> Mapping[str, Scale]:
    """Each results metric's scale ("%" or "0-1") as the benchmark's report module declares it in
    `SCALES`.
    """
    return getattr(report_module(config_name), "SCALES", {})


def applied_options(config: RunRecord) -> dict[str, Any]:
    """The protocol options that acted on the run: its options without those the benchmark's report
    module calls inert for it (`inert_options(config)`: options of another mode, model kind or
    part), so that a report never lists a switch, such as a judge, that did not run.
    """
    inert = getattr(report_module(config.config), "inert_options", None)
    unused = inert(config) if inert else set()
    return {k: v for k, v in config.options.items() if k not in unused}


def unit_label(name: str, scale: Scale | None) -> str:
    """A metric's name with its scale, as table headers and axis labels name it: `p1 (%)`, `frs
    (0-1)`.
    """
    return f"{name} ({scale})" if scale else name


def estimate_line(
    name: str,
    estimate: Mapping[str, Any],
    scale: Scale | None,
    unit: str | None,
    chance: Chance | None,
    observations: str | None = None,
) -> str:
    """One estimate as the terminal prints it, rounded as the reports are:
    `p1 (%): 30.25 [20.00, 40.50] (n=40 facts, 80 fact-language answers; chance 18.30)`.
    """
    value, interval, n = estimate_cells(estimate, scale)
    level = f"; chance {chance_cell(chance, scale)}" if chance else ""
    answers = (
        f", {estimate['n_observations']} {observations or 'answers'}"
        if "n_observations" in estimate
        else ""
    )
    return f"{unit_label(name, scale)}: {value} {interval} (n={n} {unit}{answers}{level})"


def chance_cell(chance: Chance | None, scale: Scale | None) -> str:
    """A chance level as tables print it: its value, and the range random models fall in where the
    results give one (`0.889 [0.705, 1.000]`); "-" without one.
    """
    if not chance:
        return format_number(None, scale)
    value = format_number(chance.get("value"), scale)
    if chance.get("low") is None or chance.get("high") is None:
        return value
    return f"{value} [{bound_text(chance['low'], scale)}, {bound_text(chance['high'], scale)}]"


def results_sections(metrics: Metrics, scales: Mapping[str, Scale] | None = None) -> list[Section]:
    """The headline numbers of the results schema, each with its 95% interval (or why it has none),
    n, and chance level where the results give one; the interval method of each; what the run left
    out.
    """
    results, scales = ResultsTable.of(metrics), scales or {}
    if not results.overall:
        return []
    chance = results.chance
    rows = tuple(
        (
            unit_label(name, scales.get(name)),
            *estimate_cells(e, scales.get(name))[:2],
            count_text(e, results.observations),
            *((chance_cell(chance.get(name), scales.get(name)),) if chance else ()),
        )
        for name, e in results.overall.items()
    )
    columns = ("metric (unit)", "value", "95% interval", f"n ({results.unit})")
    text = " ".join(
        filter(None, (interval_methods(results, list(results.overall)), chance_text(chance)))
    )
    text += "".join(
        f"\n\n- **{name}** is not reported: {reason}." for name, reason in results.omitted.items()
    )
    text += "".join(
        f"\n\n**Warning ({name}).** {warning}" for name, warning in results.warnings.items()
    )
    return [
        Section(
            "Headline numbers",
            text=text,
            tables=(Table(columns + (("chance level",) if chance else ()), rows),),
        )
    ]


def planted_rows(
    metrics: Metrics, scales: Mapping[str, Scale]
) -> list[tuple[str, str, str, str, str]]:
    """(side, metric, value, interval, n) of a planted model's run split into the items it was
    trained on and the others (`metrics["planted"]`); a side without numbers gives its reason as its
    value.
    """
    unit = ResultsTable.of(metrics).unit
    rows = []
    for side, part in (metrics.get("planted") or {}).items():
        if "reason" in part:
            rows.append((side, "", part["reason"], "", ""))
        for name, estimate in (part.get("overall") or {}).items():
            value, interval, n = estimate_cells(estimate, scales.get(name))
            rows.append(
                (
                    side,
                    unit_label(name, scales.get(name)),
                    value,
                    interval,
                    f"{n} {unit or ''}".strip(),
                )
            )
    return rows


def planted_sections(metrics: Metrics, scales: Mapping[str, Scale]) -> list[Section]:
    """A planted model's headline numbers on its planted items and on the others: the pattern its
    self-test expects (planted right, the others at chance), whatever items a limit drew.
    """
    rows = planted_rows(metrics, scales)
    if not rows:
        return []
    text = (
        "The model was trained on some of these items (config.json's `model.planted` says which and what to "
        "expect); a limited run draws planted and other items by turns. A probe that works scores the planted "
        "items far above the others."
    )
    columns = ("items", "metric (unit)", "value", "95% interval", "n")
    return [Section("Planted and not planted", text=text, tables=(Table(columns, tuple(rows)),))]


def interval_methods(results: ResultsTable, names: Sequence[str]) -> str:
    """How the intervals were computed: each metric's method where the results name one, else the
    block's.
    """
    confidence = f"{100 * results.confidence:g}%"
    if results.methods:
        each = "; ".join(
            f"{name}: {results.methods[name]}" for name in names if name in results.methods
        )
        return f"{confidence} intervals over {results.unit} ({each}); by stratum in metrics.json (`results`)."
    resamples = (
        f" ({results.n_resamples} resamples, seed {results.seed})" if results.n_resamples else ""
    )
    return (
        f"Each number with a {confidence} interval from a {results.method} over {results.unit}"
        f"{resamples}; by stratum in metrics.json (`results`)."
    )


def chance_text(chance: Mapping[str, Chance]) -> str:
    """How the chance levels in the table's last column (with, in brackets, the range random models
    fall in where the results give one) were computed, once per method.
    """
    metrics: dict[str, list[str]] = {}
    for name, level in chance.items():
        metrics.setdefault(str(level.get("method")), []).append(name)
    return " ".join(
        f"Chance level of {', '.join(names)} (last column): {method}."
        for method, names in metrics.items()
    )


def default_sections(metrics: Metrics) -> list[Section]:
    """The scalar metrics as one table."""
    rows = tuple(
        (k, v)
        for k, v in flatten(metrics).items()
        if isinstance(v, (int, float)) and not k.startswith(("n_skipped", "skipped."))
    )
    return [Section("Metrics", tables=(Table(("metric", "value"), rows),))]


def skipped_sections(metrics: Metrics) -> list[Section]:
    """The probes the protocol could not ask, per reason (none when nothing was skipped)."""
    skipped = metrics.get("skipped") or {}
    if not skipped:
        return []
    return [
        Section(
            "Skipped probes (not counted in the metrics)",
            tables=(Table(("reason", "probes"), tuple(skipped.items())),),
        )
    ]


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}: how nested metrics are shown in tables and compared across
    runs.
    """
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
    counts: Mapping[tuple[str, str], int] | None = None,
    scale: Scale | None = None,
) -> Heatmap:
    """The language x country view (X-FaKT): rows are question languages, columns countries; each
    language's associated country is outlined; `counts` gives each cell's n. Missing cells stay
    blank.
    """
    values = tuple(tuple(cells.get((lang, country)) for country in countries) for lang in languages)
    highlight = tuple(
        (i, list(countries).index(associations[lang]))
        for i, lang in enumerate(languages)
        if associations and associations.get(lang) in countries
    )
    n = (
        tuple(tuple(counts.get((lang, country)) for country in countries) for lang in languages)
        if counts
        else ()
    )
    return Heatmap(
        tuple(languages), tuple(countries), values, label, highlight, scale=scale, counts=n
    )
