"""The summary of a suite folder (`culture-probe run CONFIG... --out DIR`): `suite.json`, `suite.md`
and a figure per benchmark, one row per config with its headline number. Built from each run's
config and metrics alone, so `culture-probe report DIR` rebuilds it from the run directories.

The numbers are written before any figure is drawn, and a figure that fails is one warning and one
line in `suite.md`: a suite whose runs all finished is never lost to a plot.

A run that did not finish never stands as a finished one: its value says `(incomplete)` beside it
and its row `INCOMPLETE k/N` (suite.md, suite.json's `status`, the terminal, the figure's label). A
config the suite planned and never started is listed as not run (suite.json's `not_run`), from the
configs it planned (`planned`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from culture_probe import rundir
from culture_probe.data.registry import resolve
from culture_probe.engine.loading import ModelInput
from culture_probe.errors import SourceFormatError
from culture_probe.metrics.display import (
    SMALL_N_MARK,
    SMALL_N_NOTE,
    count_text,
    format_number,
    format_value,
    interval_text,
    marked,
)
from culture_probe.record import Metrics, ResultsTable, RunRecord
from culture_probe.report.compare import incomplete_note
from culture_probe.report.markdown import figure_link, table_markdown
from culture_probe.report.views import (
    Bars,
    Table,
    estimate_line,
    scales_of,
    unit_label,
    views_module,
)
from culture_probe.tasks import benchmark_of
from culture_probe.tasks.routing import options_set
from culture_probe.util.extras import available

SUMMARY_JSON, SUMMARY_MD = "suite.json", "suite.md"
NOT_RUN = "not run"  # a planned config that never started
INCOMPLETE_MARK = "(incomplete)"  # beside the number of a run that did not finish


@dataclass(frozen=True)
class SuiteRun:
    """What a summary reads of one run: its config.json and metrics.json (recomputed from its
    records when it did not finish), and `status`: `INCOMPLETE k/N` for a run that did not finish
    (`rundir.progress`).
    """

    config: RunRecord
    metrics: Metrics
    status: str | None = None


def summarize_suite(
    model: ModelInput,
    runs: Mapping[str, SuiteRun],
    skipped: Mapping[str, str] | None = None,
    planned: Sequence[str] = (),
) -> dict[str, Any]:
    """One row per config: its headline number with interval, n, unit, scale and chance level, what
    it left out, and `status` (`INCOMPLETE k/N`: a run that did not finish, whose numbers cover the
    probes answered so far); the cross-config studies the suite's finished configs allow (MAPS'
    culture gap); the configs `skipped` for want of data, with why (those that have a run since are
    not); and the configs `planned` that have neither a run nor a skip (`not_run`).
    """
    rows = []
    for config, result in runs.items():
        results = ResultsTable.of(result.metrics)
        metric = results.headline
        rows.append(
            {
                "config": config,
                "benchmark": resolve(config).info.name,
                "metric": metric,
                **(results.estimate(metric) or {}),
                "unit": results.unit,
                "observations": results.observations,
                "scale": scales_of(config).get(metric) if metric else None,
                "chance": results.chance.get(metric) if metric else None,
                "smoke": bool(result.config.subset),
                "omitted": results.omitted,
                "status": result.status,
                # what this config got, defaults aside
                "options": options_set(config, result.config.options),
            }
        )
    protocols = sorted({r.config.run.protocol for r in runs.values()})
    skipped = {config: why for config, why in (skipped or {}).items() if config not in runs}
    planned = list(dict.fromkeys([*planned, *runs]))
    return {
        "model": str(model),
        "protocol": ", ".join(protocols) or "default",
        "configs": rows,
        "studies": studies(runs),
        "skipped": skipped,
        "planned": planned,
        "not_run": [config for config in planned if config not in runs and config not in skipped],
    }


def read_summary(folder: Path) -> dict[str, Any]:
    """A suite folder's suite.json, the fields its readers use checked for their type
    (`SUMMARY_FIELDS`: a `planned` that is text is refused naming the file, never read letter by
    letter); {} before its first config finished.
    """
    path = folder / SUMMARY_JSON
    if not path.is_file():
        return {}
    summary = rundir.read_json(path)
    fix = f"the suite's summary is damaged: delete it, and `culture-probe report {folder}` writes it from the runs"
    if not isinstance(summary, dict):
        raise SourceFormatError(
            f"not a JSON object but {type(summary).__name__}; {fix}.", path=str(path)
        )
    for name, (fits, kind) in SUMMARY_FIELDS.items():
        if name in summary and not fits(summary[name]):
            raise SourceFormatError(
                f"`{name}` must be {kind}, got {summary[name]!r:.60}; {fix}.", path=str(path)
            )
    return summary


def _names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(name, str) for name in value)


# the fields of suite.json that its readers use (merge, report, board, a suite's --resume): each
# one's check and kind
SUMMARY_FIELDS = {
    "model": (lambda value: isinstance(value, str), "text"),
    "configs": (
        lambda value: (
            isinstance(value, list)
            and all(isinstance(row, dict) and isinstance(row.get("config"), str) for row in value)
        ),
        "a list of objects, each naming its `config`",
    ),
    "planned": (_names, "a list of config names"),
    "skipped": (
        lambda value: isinstance(value, dict) and _names(list(value.values())),
        "an object of config names to reasons",
    ),
}


def listed(summary: Mapping[str, Any]) -> list[str]:
    """The configs a summary lists, in its order."""
    return [row["config"] for row in summary.get("configs", [])]


def planned_of(summary: Mapping[str, Any]) -> list[str]:
    """The configs a stored summary's suite planned (its listed ones, for a summary written before
    `planned`).
    """
    return list(summary.get("planned") or listed(summary))


def studies(runs: Mapping[str, SuiteRun]) -> dict[str, Any]:
    """The studies across configs that each benchmark's report module declares (`suite_studies`:
    MAPS' culture and language gaps), from the suite's full, finished runs (a smoke or interrupted
    run gives no study).
    """
    by_benchmark: dict[str, dict[str, Mapping[str, Any]]] = {}
    for config, result in runs.items():
        if not result.config.subset and result.status is None:
            by_benchmark.setdefault(benchmark_of(config), {})[config] = result.metrics
    return {
        name: value
        for bench, metrics in by_benchmark.items()
        if (study := getattr(views_module(bench), "suite_studies", None)) is not None
        for name, value in study(metrics).items()
    }


def write_summary(folder: Path, summary: Mapping[str, Any]) -> Path:
    """suite.json and suite.md first, then one figure per benchmark (headline per config, with
    intervals) linked from suite.md; returns suite.md's path.
    """
    rundir.write_json(folder / SUMMARY_JSON, dict(summary))
    text = summary_markdown(summary)
    path = folder / SUMMARY_MD
    rundir.write_text(path, text + "\n")
    links = summary_figures(folder, summary["configs"]) if available("matplotlib") else []
    if links:
        rundir.write_text(path, "\n\n".join([text, *links]) + "\n")
    return path


def summary_markdown(summary: Mapping[str, Any]) -> str:
    """suite.md without its figures: the table of headline numbers, the footnote on small n, the
    studies.
    """
    chance = any(r.get("chance") for r in summary["configs"])
    rows = tuple(summary_row(r, chance) for r in summary["configs"])
    columns = (
        "config",
        "metric (unit)",
        "value",
        "95% interval",
        "n",
        "unit",
        *(("chance level",) if chance else ()),
    )
    parts = [
        f"# Suite: {summary['model']}",
        f"Protocol profile: **{summary.get('protocol', 'default')}**.",
        table_markdown(Table((*columns, "note"), rows)),
    ]
    if any(SMALL_N_MARK in str(cell) for row in rows for cell in row):
        parts.append(SMALL_N_NOTE)
    parts += [
        f"**note**: {incomplete_note(r['config'], r['status'])}."
        for r in summary["configs"]
        if r.get("status")
    ]
    parts += [
        f"**{name}**: " + ", ".join(f"{k} {format_value(v)}" for k, v in study.items())
        for name, study in summary["studies"].items()
    ]
    if summary.get("skipped"):  # a suite summarized before skipping existed has none
        parts.append(
            "**Skipped** (their data could not be had; not run):\n\n"
            + "\n".join(f"- {config}: {why}" for config, why in summary["skipped"].items())
        )
    if summary.get("not_run"):
        parts.append(
            "**Not run** (planned, not started; `--resume` runs them):\n\n"
            + "\n".join(f"- {config}: {NOT_RUN}" for config in summary["not_run"])
        )
    return "\n\n".join(parts)


def summary_lines(summary: Mapping[str, Any]) -> str:
    """The terminal's lines of a suite: each config's headline number as suite.md shows it, an
    interrupted run's marked.
    """
    lines = [
        f"{r['config']}: "
        + (f"{r['status']}, so far: " if r.get("status") else "")
        + (
            estimate_line(
                r["metric"], r, r.get("scale"), r["unit"], r.get("chance"), r.get("observations")
            )
            if r.get("value") is not None
            else f"{r['metric']} not reported"
        )
        for r in summary["configs"]
    ]
    lines += [f"{config}: skipped ({why})" for config, why in summary.get("skipped", {}).items()]
    lines += [f"{config}: {NOT_RUN}" for config in summary.get("not_run", [])]
    return "\n".join(
        lines + ([SMALL_N_NOTE] if any(SMALL_N_MARK in line for line in lines) else [])
    )


def summary_row(row: Mapping[str, Any], chance: bool) -> tuple[Any, ...]:
    """One config's cells in suite.md, by the one rounding rule of its scale; the value marked when
    n is small.
    """
    scale = row.get("scale")
    value = (
        marked(format_number(row["value"], scale), row.get("n"))
        if row.get("value") is not None
        else ""
    )
    value = f"{value} {INCOMPLETE_MARK}" if value and row.get("status") else value
    note = (
        "smoke run (--limit)"
        if row["smoke"]
        else "; ".join(f"{k} left out: {v}" for k, v in row["omitted"].items())
    )
    note = f"**{row['status']}**" + (f"; {note}" if note else "") if row.get("status") else note
    level = (format_number((row.get("chance") or {}).get("value"), scale),) if chance else ()
    return (
        row["config"],
        unit_label(row["metric"], scale),
        value,
        interval_text(row, scale),
        count_text(row, row.get("observations")),
        row["unit"],
        *level,
        note,
    )


def summary_figures(folder: Path, rows: list[Mapping[str, Any]]) -> list[str]:
    """One bar figure per benchmark (its configs' headline numbers), each as a markdown link or a
    failure line.
    """
    plots = folder / rundir.PLOTS_DIR
    links = []
    for benchmark in dict.fromkeys(r["benchmark"] for r in rows):
        shown = {
            r["config"]: r
            for r in rows
            if r["benchmark"] == benchmark and r.get("value") is not None
        }
        if shown:
            plots.mkdir(exist_ok=True)
            first = next(iter(shown.values()))
            bars = Bars(
                shown,
                ylabel=unit_label(first["metric"], first.get("scale")),
                scale=first.get("scale"),
            )
            links.append(
                figure_link(bars, plots / f"suite_{benchmark}", f"{benchmark}: headline per config")
            )
    return links
