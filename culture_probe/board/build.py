"""What the board shows, collected from run directories alone (read through `rundir`, like `report`
and `compare`): the leaderboard, one page per run with its item records, and the paired comparisons
of runs of one config.

Every number comes from a run's metrics.json results block (or its records when the run did not
finish) and is printed by the reports' one rounding rule with its interval and n; paired differences
come from `report.compare`, which takes them from the metrics' one procedure. Nothing here computes
a statistic.
"""

from __future__ import annotations

import functools
import os
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from culture_probe import rundir
from culture_probe.board.prompts import Prompts, missing_reason, prompt_of, rebuild
from culture_probe.errors import CultureProbeError
from culture_probe.loading import task_of_run
from culture_probe.metrics.display import (
    Scale,
    estimate_cells,
    format_number,
    format_p,
    interval_text,
)
from culture_probe.record import Estimate, Metrics, ResultsTable, RunRecord
from culture_probe.report import metrics_of
from culture_probe.report.compare import (
    LoadedRun,
    PairedRows,
    holm_cell,
    left_out_text,
    lined_up,
    multiplicity_text,
    paired_rows,
    single_text,
)
from culture_probe.report.markdown import reproduce, subset_text
from culture_probe.report.summary import listed, read_summary
from culture_probe.report.views import interval_methods, scales_of, unit_label
from culture_probe.shards import ShardRecord, label, read_part
from culture_probe.sharing import inside, local_model, redacted, shown_model
from culture_probe.tasks import Record

# a record's outcome on its unit's headline value: at the metric's best end, its worst end, in
# between
RIGHT, WRONG, PARTLY, SKIPPED, NONE = "right", "wrong", "partly", "skipped", "no outcome"
# record fields that the item list shows as the answer and the gold (protocols name them so; the
# card shows all)
ANSWER_FIELDS, GOLD_FIELDS = (
    ("prediction", "pred", "reply", "output"),
    ("gold_label", "gold", "label", "target"),
)


@dataclass(frozen=True)
class BoardRun:
    """One run on the board: its id (file-name-safe, unique), files, metrics, and the input of each
    probe.
    """

    id: str
    run: rundir.Run = field(repr=False)
    metrics: Metrics = field(repr=False)
    status: str | None  # INCOMPLETE k/N for a run that did not finish
    prompts: Prompts = field(repr=False)
    part: ShardRecord | None = field(default=None, repr=False)  # a shard's shard.json

    @property
    def record(self) -> RunRecord:
        """The run's config.json."""
        return self.run.record

    @functools.cached_property
    def results(self) -> ResultsTable:
        """The run's results block, every part present (read once: the board asks it per
        language).
        """
        return ResultsTable.of(self.metrics)

    @property
    def name(self) -> str:
        """The benchmark config the run probed."""
        return self.record.config

    @property
    def model(self) -> str:
        """The model as a published board names it: a Hub id as given, a local folder by its name
        and digest.
        """
        return redacted(
            shown_model(self.record.model.spec, self.record.model.identity), shared=True
        )

    @property
    def protocol(self) -> str:
        """The protocol profile (default or upstream)."""
        return self.record.run.protocol

    @property
    def smoke(self) -> bool:
        """Whether the run probed a `--limit` subset: not the benchmark's number."""
        return bool(self.record.subset) or self.record.run.limit is not None

    @property
    def shard(self) -> str | None:
        """A shard's label (`shards.label`): a slice of a run, never the run's result; None for a
        whole run.
        """
        shard = self.record.run.shard
        return label(self.name, shard, self.part) if shard else None

    @property
    def partial(self) -> bool:
        """Whether the run holds less than the benchmark's number: a smoke run, or a shard."""
        return self.smoke or self.shard is not None

    @property
    def benchmark(self) -> str:
        """The benchmark's name (dlama, fmlama, ...)."""
        return self.record.benchmark.name or self.name


def run_dirs(paths: Sequence[str | os.PathLike]) -> list[Path]:
    """The run directories named: each run directory as given, each suite folder's runs
    (suite.json's order).
    """
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if rundir.folder_kind(path) == "suite":
            # a suite's run is read inside it: an entry linking to another run on this machine is
            # refused by name
            found += [
                inside(path / name, path)
                for name in rundir.runs_in(path, listed(read_summary(path)))
            ]
        else:
            rundir.read_run(path)  # a folder that is no run is refused here, saying what to pass
            found.append(path)
    if not found:
        raise CultureProbeError(
            "No run to show: pass run directories or suite folders (culture-probe run --out)."
        )
    return list(dict.fromkeys(p.resolve() for p in found))


def load_runs(paths: Sequence[str | os.PathLike]) -> list[BoardRun]:
    """Every run under `paths`, read with its metrics and its probes' inputs rebuilt; ids unique and
    stable.
    """
    runs, taken = [], set[str]()
    for path in run_dirs(paths):
        for name in (rundir.CONFIG_FILE, rundir.ITEMS_FILE, rundir.METRICS_FILE, rundir.ROWS_FILE):
            # what the board publishes of a run is never read through a link out of it
            inside(path / name, path)
        run = rundir.read_run(path)
        if not run.records and run.metrics is None:
            continue  # a run that answered nothing yet has nothing to show
        ident = base = slug(f"{path.parent.name}-{path.name}")
        while ident in taken:  # two folders of one name under folders of one name
            ident = f"{base}-{len(taken)}"
        taken.add(ident)
        part = read_part(path) if run.record.run.shard else None
        runs.append(BoardRun(ident, run, metrics_of(run), rundir.progress(run), rebuild(run), part))
    return runs


def slug(text: str) -> str:
    """A file-name-safe id."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_.") or "run"


# ---------------------------------------------------------------- numbers


def estimate_json(estimate: Estimate | None, scale: Any) -> dict[str, Any] | None:
    """An estimate as the board shows it: the printed value, interval (or why none) and n, and the
    raw value for sorting; None when the run has no such number.
    """
    if estimate is None or (number := estimate["value"]) is None:
        return None
    value, interval, n = estimate_cells(estimate, scale)
    return {"value": float(number), "text": value, "interval": interval, "n": n}


def headline_of(run: BoardRun, language: str | None = None) -> dict[str, Any] | None:
    """The run's headline number (overall, or in one language where the results break it down by
    language).
    """
    metric = run.results.headline
    if metric is None:
        return None
    estimate = estimate_json(
        run.results.estimate(metric, language), scales_of(run.name).get(metric)
    )
    return (
        None
        if estimate is None
        else {**estimate, "metric": unit_label(metric, scales_of(run.name).get(metric))}
    )


def languages_of(run: BoardRun) -> list[str]:
    """The languages the run's results break its headline down by (none when they do not)."""
    return sorted(run.results.by_language())


def leaderboard(runs: Sequence[BoardRun]) -> dict[str, Any]:
    """One row per (model, protocol profile), one column per config: the headline number of the
    row's run of that config, overall and per language, with its interval and n; a smoke run's cell
    says so.
    """
    configs = list(dict.fromkeys(r.name for r in runs))
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    by_id = {run.id: run for run in runs}
    for run in runs:
        row = rows.setdefault(
            (run.model, run.protocol), {"model": run.model, "protocol": run.protocol, "cells": {}}
        )
        shown = row["cells"].get(run.name)
        if shown is not None and not (by_id[shown["run"]].partial and not run.partial):
            shown.setdefault("others", []).append(run.id)
            # a full run is shown before a smoke run or a shard of the same config; the others are
            # linked
            continue
        row["cells"][run.name] = {
            "run": run.id,
            "smoke": run.smoke,
            "shard": run.shard,
            "status": run.status,
            "overall": headline_of(run),
            "by_language": {lang: headline_of(run, lang) for lang in languages_of(run)},
        }
    columns = [
        {
            "config": name,
            "benchmark": next(r.benchmark for r in runs if r.name == name),
            "unit": next(r.results.unit for r in runs if r.name == name),
            "languages": sorted({lang for r in runs if r.name == name for lang in languages_of(r)}),
        }
        for name in configs
    ]
    return {"columns": columns, "rows": list(rows.values())}


# ---------------------------------------------------------------- a run's page


def run_page(run: BoardRun, figures: Sequence[str]) -> dict[str, Any]:
    """The run's page: who ran what, its numbers per stratum, deviations with their side, figures,
    Reproduce.
    """
    config, results = run.record, run.results
    scales = scales_of(run.name)
    bench = config.benchmark
    page = {
        "id": run.id,
        "config": run.name,
        "model": run.model,
        "kind": config.model.kind,
        "protocol": run.protocol,
        "benchmark": f"{bench.title or run.benchmark} (version {bench.version or '?'})",
        "status": run.status,
        "smoke": smoke_note(config, run.part) if run.smoke else None,
        "shard": run.shard,
        # the run's name: where its folder lies is this machine's business
        "run": run.run.path.name,
        "methods": interval_methods(results, list(results.overall))
        if "results" in run.metrics
        else "",
        "numbers": [
            {"group": group, "metric": unit_label(metric, scales.get(metric)), **estimate}
            for group, estimates in results.groups()
            for metric, raw in estimates.items()
            if (estimate := estimate_json(raw, scales.get(metric))) is not None
        ],
        "omitted": results.omitted,
        "deviations": [
            {k: d.get(k, "") for k in ("id", "description", "when", "side", "upstream")}
            for d in config.deviations
        ],
        "figures": list(figures),
        "reproduce": reproduce_parts(config),
    }
    # published by push-board: no credentials, no folder of this machine
    return redacted(page, shared=True)


def reproduce_parts(config: RunRecord) -> dict[str, Any]:
    """report.md's Reproduce section as the page shows it: its notes (what the command cannot
    express), the command. A local model is named by its folder's name, and a note says to pass its
    path.
    """
    model = config.model
    name = local_model(model.spec, model.identity)
    shown = config if name is None else replace(config, model=replace(model, spec=name))
    notes, command, _ = reproduce(shown).removeprefix("## Reproduce").split("```")
    where = [
        f"{shown_model(model.spec, model.identity)} is a local model folder: pass its path to --model."
    ]
    return {
        "notes": [p.strip().replace("**", "") for p in notes.split("\n\n") if p.strip()]
        + (where if name else []),
        "command": command.strip(),
    }


def smoke_note(config: RunRecord, part: ShardRecord | None = None) -> str:
    """What a limited run probed (a shard: its share of the draw, `part` its shard.json), as its
    report says it.
    """
    subset, shard = config.subset, bool(config.run.shard)
    what = "a shard of a smoke run" if shard else "smoke run"
    if not subset:
        return f"{what} (--limit {config.run.limit}), not the benchmark's number"
    drawn = part.units if part else None
    return f"{what}, not the benchmark's number: {subset_text(subset, drawn, shard=shard)}"


# ---------------------------------------------------------------- items


@dataclass(frozen=True)
class Outcomes:
    """Each item's value of the run's headline metric (mean over replicates) and its outcome."""

    metric: str | None
    values: dict[str, float]
    best: float | None  # the value of a right answer (None: the metric has no better end)
    worst: float | None
    scale: Scale | None = None  # how the metric's values are printed

    def outcome(self, record: Record) -> str:
        """Right, wrong or partly by the item's headline value; skipped; or no outcome."""
        if record.skipped:
            return SKIPPED
        value = self.values.get(record.item_id)
        if value is None or self.best is None or np.isnan(value):
            return NONE
        return RIGHT if value == self.best else WRONG if value == self.worst else PARTLY


def outcomes(run: BoardRun) -> Outcomes:
    """The headline metric's per-unit values (the metrics' own unit table): a binary or bounded
    metric with a better end gives each item right/wrong; a metric without one (a bias score) gives
    none.
    """
    headline = run.results.headline
    answered = [r for r in run.run.records if not r.skipped]
    try:
        tables = (
            {t.metric: t for t in task_of_run(run.record).unit_tables(answered)} if answered else {}
        )
    except (CultureProbeError, OSError):
        tables = {}
    table = tables.get(headline) if headline else None
    scale = scales_of(run.name).get(headline) if headline else None
    if table is None:
        return Outcomes(headline, {}, None, None, scale)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        # a unit with no replicate value: NaN, no outcome
        warnings.simplefilter("ignore", RuntimeWarning)
        means = np.nanmean(table.values, axis=1) if table.values.size else np.zeros(0)
    values = dict(zip(table.ids, means.tolist(), strict=True))
    if table.scale is None or table.higher_is_better is None:
        return Outcomes(headline, values, None, None, scale)
    best, worst = (table.scale, 0.0) if table.higher_is_better else (0.0, table.scale)
    return Outcomes(headline, values, best, worst, scale)


def facets_of(run: BoardRun) -> list[str]:
    """The fields the item browser filters by: the protocol's strata (language, culture, predicate,
    type...), then the stage when the run has several.
    """
    from culture_probe.tasks import task_for

    strata = list(task_for(run.name).strata)
    stages = {r.stage for r in run.run.records}
    return strata + (["stage"] if len(stages) > 1 else [])


def first_field(record: Record, names: Iterable[str]) -> Any:
    """The first of `names` the record has (None if none)."""
    return next((record[name] for name in names if name in record), None)


def short(value: Any, width: int = 80) -> str:
    """A field as one short line of the item list."""
    text = (
        ", ".join(map(str, value))
        if isinstance(value, list)
        else ""
        if value is None
        else str(value)
    )
    return text if len(text) <= width else text[: width - 1] + "…"


def item_index(run: BoardRun, judged: Outcomes) -> dict[str, Any]:
    """What the item list filters and shows without loading the records: per record its key, facet
    codes, outcome and a short answer and gold (the full records are in pages, loaded when an item
    is opened).
    """
    records = run.run.records
    facets = []
    for name in facets_of(run):
        labels = [str(r.get(name, "—")) for r in records]
        names = sorted(set(labels))
        codes = {label: i for i, label in enumerate(names)}
        facets.append({"name": name, "labels": names, "codes": [codes[label] for label in labels]})
    kinds = [RIGHT, WRONG, PARTLY, SKIPPED, NONE]
    return {
        "keys": [r.key for r in records],
        "facets": facets,
        "outcomes": kinds,
        "outcome": [kinds.index(judged.outcome(r)) for r in records],
        "answer": [short(first_field(r, ANSWER_FIELDS)) for r in records],
        "gold": [short(first_field(r, GOLD_FIELDS)) for r in records],
        "metric": judged.metric,
        "prompts_missing": missing_reason(run.prompts, records),
    }


def item_records(run: BoardRun, judged: Outcomes) -> list[dict[str, Any]]:
    """Every record in full for the item cards: identity, outcome and unit value, the probe's input,
    every field.
    """
    out = []
    for record in run.run.records:
        value = judged.values.get(record.item_id)
        out.append(
            {
                "key": record.key,
                "id": record.item_id,
                "stage": record.stage,
                "probe": record.kind,
                "outcome": judged.outcome(record),
                "value": None
                if value is None or np.isnan(value)
                else format_number(value, judged.scale),
                "prompt": prompt_of(run.prompts, record),
                "fields": dict(record.fields),
            }
        )
    return out


# ---------------------------------------------------------------- comparisons


@dataclass(frozen=True)
class Pair:
    """Two runs of one config on the same rows: the board's compare view of them."""

    id: str
    base: BoardRun
    other: BoardRun


def pairs(runs: Sequence[BoardRun]) -> list[Pair]:
    """Every two runs of one config on the same items (equal rows_sha256 and subset: two full runs,
    or smoke runs drawn alike), the earlier as base.
    """

    def rows(run: BoardRun) -> Any:
        return run.record.benchmark.rows_sha256, run.record.subset

    return [
        Pair(f"{a.id}--{b.id}", a, b)
        for a, b in combinations(runs, 2)
        if a.name == b.name and rows(a) == rows(b) and a.run.records and b.run.records
    ]


def comparison(pair: Pair, shown: Mapping[str, Outcomes], with_items: bool) -> dict[str, Any]:
    """The compare view: both runs' numbers lined up, the paired differences (other minus base) with
    their interval, p-value (raw and Holm-adjusted, with the sentence on how many tests) and
    procedure, the strata left out said, and the items whose headline value changed (left out when
    `with_items` is false). The page names the runs base first, as its columns do, and marks one
    that did not finish (`status`).
    """
    loaded = [
        LoadedRun(r.id, r.record, r.run.records, r.metrics, r.status)
        for r in (pair.base, pair.other)
    ]
    scales = scales_of(pair.base.name)
    try:
        found, problem = paired_rows(*loaded), None
    # units that do not pair (different subsets): said on the page
    except CultureProbeError as error:
        found, problem = PairedRows((), ()), str(error)
    paired = found.rows
    tests = sum(p["p_holm"] is not None for p in paired)
    planned = next((p["metric"] for p in paired if p["planned"]), None)
    table, single = lined_up(loaded)
    base, other = shown[pair.base.id], shown[pair.other.id]
    changed = [
        (item, value, other.values[item])
        for item, value in base.values.items()
        if item in other.values
        and value != other.values[item]
        and not np.isnan([value, other.values[item]]).all()
    ]
    return {
        "id": pair.id,
        "config": pair.base.name,
        "base": {
            "id": pair.base.id,
            "model": pair.base.model,
            "smoke": pair.base.smoke,
            "status": pair.base.status,
        },
        "other": {
            "id": pair.other.id,
            "model": pair.other.model,
            "smoke": pair.other.smoke,
            "status": pair.other.status,
        },
        "problem": problem,
        "columns": list(table.columns),
        "rows": [[str(c) for c in row] for row in table.rows],
        "paired": [
            {
                "metric": unit_label(p["metric"], scales.get(p["metric"])),
                "group": p["group"],
                "difference": format_number(p["difference"], scales.get(p["metric"])),
                "interval": interval_text({**p, "value": p["difference"]}, scales.get(p["metric"])),
                "p": format_p(p["p_value"]),
                "p_holm": holm_cell(p),
                "n": p["n"],
                "method": p["method"],
            }
            for p in paired
        ],
        "multiplicity": multiplicity_text(planned, {pair.other.id: tests}) if paired else None,
        "single": single_text(single) if single else None,
        "left_out": left_out_text(found.one_unit, found.repeats),
        "changed": (
            [
                {
                    "id": i,
                    "base": format_number(a, base.scale),
                    "other": format_number(b, base.scale),
                }
                for i, a, b in changed
            ]
            if with_items
            else None
        ),
        "n_changed": len(changed),
    }
