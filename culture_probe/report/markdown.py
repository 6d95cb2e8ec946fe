"""report.md of a run: header, the task's views (tables and figures), deviations, the command to
repeat it.
"""

from __future__ import annotations

import errno
import json
import re
import shlex
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from culture_probe.engine.types import CUT_KINDS, Truncation
from culture_probe.metrics.display import SMALL_N_MARK, SMALL_N_NOTE, format_value
from culture_probe.record import RunRecord, TruncationJson
from culture_probe.report.plots import context_note, draw
from culture_probe.report.views import Bars, Heatmap, Section, Table, applied_options, report_module
from culture_probe.rundir import PLOTS_DIR
from culture_probe.settings import RunSettings
from culture_probe.shards import ShardRecord, label, read_part, shard_note
from culture_probe.sharing import redacted
from culture_probe.tasks.base import asked_in
from culture_probe.util.extras import available


def table_markdown(table: Table) -> str:
    """A GitHub-flavoured markdown table."""
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(format_value(v) for v in row) + " |" for row in table.rows]
    return "\n".join(lines)


def slug(text: str) -> str:
    """A file-name-safe version of a title."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "figure"


def render(
    sections: Sequence[Section],
    config: RunRecord,
    run_dir: Path,
    status: str | None = None,
    truncation: TruncationJson | None = None,
) -> str:
    """The whole report; figures are written to `run_dir/plots/` and linked relatively. `status`
    marks a run that did not finish (`INCOMPLETE k/N`); `truncation` is metrics.json's record of
    inputs cut to fit the model.
    """
    part = read_part(run_dir) if config.run.shard else None
    parts = [header(config, status, truncation, part)]
    # said inside every figure: it survives being copied into slides
    note = "; ".join(
        filter(None, [shard_note(config.run.shard), context_note(config.subset, status)])
    )
    drawing = available("matplotlib")
    if drawing:
        (run_dir / PLOTS_DIR).mkdir(parents=True, exist_ok=True)
    else:
        parts.append(
            "Figures are left out: matplotlib is not installed (pip install 'culture_probe[plots]', then "
            "`culture-probe report RUN_DIR`)."
        )
    for number, section in enumerate(sections, 1):
        parts.append(f"## {section.title}")
        if section.text:
            parts.append(section.text)
        parts += [table_markdown(t) for t in section.tables]
        cells = [
            section.text,
            *(cell for table in section.tables for row in table.rows for cell in row),
        ]
        if any(SMALL_N_MARK in str(cell) for cell in cells):
            parts.append(SMALL_N_NOTE)
        for index, figure in enumerate(section.figures if drawing else (), 1):
            title = figure.title or section.title
            parts.append(
                figure_link(
                    figure, run_dir / PLOTS_DIR / f"{number:02d}_{slug(title)}_{index}", title, note
                )
            )
    parts.append(deviations(config))
    parts.append(reproduce(config))
    # also a run recorded before its URLs' credentials were blanked
    return redacted("\n\n".join(parts) + "\n")


def figure_link(figure: Bars | Heatmap, stem: Path, title: str, note: str = "") -> str:
    """Draw one figure (with `note`, a smoke or incomplete run's, inside it) and return its markdown
    link; a figure that fails to draw is one warning naming it and a line in the report, so the
    numbers and the other figures are still written.
    """
    try:
        png, pdf = draw(figure, stem, title, note)
    # a full disk or a read-only folder is the run's error, not the figure's
    except OSError as error:
        if error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES):
            raise
        return _not_drawn(title, error)
    except Exception as error:  # noqa: BLE001 - any drawing failure costs that figure only
        return _not_drawn(title, error)
    return f"![{title}]({PLOTS_DIR}/{png.name}) ([PDF]({PLOTS_DIR}/{pdf.name}))"


def _not_drawn(title: str, error: Exception) -> str:
    """One warning naming the figure, and the line the report has in its place."""
    message = f"Figure '{title}' could not be drawn ({type(error).__name__}: {error})"
    warnings.warn(f"{message}; the rest of the report is written.", stacklevel=3)
    return f"*{message}; its numbers are in the tables above and in metrics.json.*"


def header(
    config: RunRecord,
    status: str | None = None,
    truncation: TruncationJson | None = None,
    part: ShardRecord | None = None,
) -> str:
    """Title and the facts a reader needs to trust the numbers; a shard's (`part`: its shard.json)
    says first that it is one, never the run's result.
    """
    bench, model, run, versions = config.benchmark, config.model, config.run, config.versions
    lines = [
        # its numbers are partial
        f"# {config.config} on {model.spec}"
        + "".join(f" ({mark})" for mark in (shard_note(run.shard), status) if mark),
        "",
        *([f"- **{label(config.config, run.shard, part)}**"] if run.shard else []),
        *(
            [
                f"- **{status}**: the run did not finish (no metrics.json); these numbers cover only the probes "
                "answered so far. `--resume` completes it."
            ]
            if status
            else []
        ),
        f"- benchmark: {bench.title} (version {bench.version}), {bench.rows} rows"
        + (" (corrected variant)" if run.corrected else ""),
        f"- model: `{model.spec}` ({model.kind}); identity `{json.dumps(model.identity, sort_keys=True)}`",
        *([f"- **planted model**: {model.planted}"] if model.planted else []),
        f"- culture_probe {versions.get('culture_probe')}, torch {versions.get('torch')}, "
        f"transformers {versions.get('transformers')}",
        *truncation_lines(truncation),
    ]
    if bench.custom_rows:
        saved = f" (saved in `{bench.rows_file}`)" if bench.rows_file else ""
        lines.append(
            f"- **custom rows**: the {bench.rows} rows given to `culture_probe.run(rows=...)` or `--rows`"
            f"{saved}, not the benchmark's own data"
        )
    lines += subset_lines(config.subset, part.units if part else None, shard=bool(run.shard))
    if run.language:
        of = [lang for lang in bench.languages if lang != run.language]
        lines.append(
            f"- language: {run.language} only"
            + (f" (the config also has {', '.join(of)})" if of else "")
        )
    # the benchmark's own notes
    own_lines = getattr(report_module(config.config), "header_lines", None)
    lines += own_lines(config) if own_lines else []
    options = applied_options(config)
    if options:
        inert = len(config.options) - len(options)
        note = (
            f" ({inert} of other modes or model kinds left out: they did not act on it)"
            if inert
            else ""
        )
        lines.append(
            "- options that applied to this run: "
            + ", ".join(f"`{k}={v}`" for k, v in options.items())
            + note
        )
    return "\n".join(lines)


def subset_text(subset: Mapping[str, Any], drawn: int | None = None, *, shard: bool = False) -> str:
    """What a --limit run drew: "2 of 24,535 facts, each asked in ar and en, drawn with seed 0 in
    turn from each culture x predicate"; a `shard`'s share of that draw ("1 of the 2 facts the run
    drew, of 24,535, ...", `drawn`: the run's units, as its shard.json has them).
    """
    across = " x ".join(subset["strata"]) or "the items"
    each = asked_in((subset.get("parallel") or {}).get("values") or ())
    unit, items = subset["unit"], f"{subset['items']:,}"
    share = (
        f"{subset['sampled']:,} of the {f'{drawn:,} ' if drawn is not None else ''}{unit} the run drew, of {items}"
        if shard
        else f"{subset['sampled']:,} of {items} {unit}"
    )
    return f"{share}{each}, drawn with seed {subset['seed']} in turn from each {across}"


def subset_lines(
    subset: Mapping[str, Any] | None, drawn: int | None = None, *, shard: bool = False
) -> list[str]:
    """The header's lines on a --limit run: what it drew (a shard: its share of the draw,
    `subset_text`), and whether the run fell below the smoke limit.
    """
    if not subset:
        return []
    what = "a shard of a smoke run" if shard else "smoke run"
    lines = [f"- **{what}, not the benchmark's number**: {subset_text(subset, drawn, shard=shard)}"]
    count = drawn if shard else subset["sampled"]
    if count is not None and count < subset.get("smoke_limit", 0):
        lines.append(
            f"- **below the smoke limit** ({subset['smoke_limit']:,}): some headline numbers are missing"
        )
    return lines


def truncation_lines(value: TruncationJson | None) -> list[str]:
    """The header's line on inputs cut on the left to fit the model's input limit (metrics.json's
    `truncation`); none when nothing was cut or the run has no record (a served model, an older
    run).
    """
    record = Truncation.from_json(value) if value else Truncation()
    cuts = [(kind, getattr(record, kind)) for kind in CUT_KINDS]
    parts = [
        f"{c.cut:,} of {c.encoded:,} {kind} cut on the left, up to {c.max_cut:,} tokens ({c.tokens_cut:,} in all)"
        for kind, c in cuts
        if c.cut
    ]
    if not parts:
        return []
    scope = truncation_scope(value or {})
    return [
        f"- **inputs cut to fit the model**: {'; '.join(parts)}{scope}; candidates and new tokens were kept whole "
        "(`truncation` in metrics.json)"
    ]


def truncation_scope(value: Mapping[str, Any]) -> str:
    """Which probes a truncation record counts: those of every process that made the run, some of
    them (a run made before counts were kept per process, then resumed), or those since the last
    resume (a record made before `processes`).
    """
    processes, uncounted = value.get("processes"), value.get("uncounted")
    if processes is None:
        return (
            " (counted over the probes asked since the run was resumed)"
            if value.get("resumed")
            else ""
        )
    if uncounted:
        counted = processes - uncounted
        return f" (counted in {counted} of the {processes} processes that made the run; the others' were not kept)"
    return f" (summed over the {processes} processes that made the run)" if processes > 1 else ""


def deviations(config: RunRecord) -> str:
    """The differences from the upstream code that concern this run, each with the side that applied
    (the library's default or upstream's) and how to get upstream's.
    """
    rows = tuple(
        (
            d["id"],
            d["description"],
            d.get("when", ""),
            d.get("side", "default"),
            d.get("upstream", ""),
        )
        for d in config.deviations
    )
    profile = config.run.protocol
    head = f"## Deviations from the original code\n\nProtocol profile: **{profile}** (`--protocol {profile}`).\n\n"
    if not rows:
        return head + "None concerns this run."
    return head + table_markdown(
        Table(("id", "description", "applies to", "side", "upstream's side"), rows)
    )


def reproduce(config: RunRecord) -> str:
    """The command that repeats this run, after a warning naming any run input the command cannot
    express.
    """
    words = ["culture-probe run", config.config, "--model", shlex.quote(config.model.spec)]
    # every setting config.json's `run` holds, as its flag spells it
    for spec in fields(RunSettings):
        value, flag = config.run.values.get(spec.name), f"--{spec.name.replace('_', '-')}"
        if spec.name == "model_args" or value is None or value is False or value == spec.default:
            continue
        if spec.name == "data_options":  # one flag per option, as it was given
            words += [
                f"--data-option {shlex.quote(f'{k}={_cli_value(v)}')}" for k, v in value.items()
            ]
            continue
        words += [flag] if value is True else [flag, shlex.quote(str(value))]
    if config.model_args:
        given = ",".join(f"{k}={_cli_value(v)}" for k, v in config.model_args.items())
        words += ["--model-args", shlex.quote(given)]
    rows_file = config.benchmark.saved_rows
    if rows_file:
        words += ["--rows", f"RUN_DIR/{rows_file}"]
    # there an unset option must say so: the profile sets it
    upstream = config.run.protocol != "default"
    words += [
        f"--option {shlex.quote(f'{k}={_cli_value(v)}')}"
        for k, v in applied_options(config).items()
        if v is not None or upstream
    ]
    gaps = not_reproducible(config)
    warning = f"**Not reproducible from the command line alone** (see config.json): {'; '.join(gaps)}.\n\n"
    where = f"RUN_DIR is this run's directory (it holds `{rows_file}`).\n\n" if rows_file else ""
    return (
        "## Reproduce\n\n" + (warning if gaps else "") + where + "```\n" + " ".join(words) + "\n```"
    )


def not_reproducible(config: RunRecord) -> list[str]:
    """What the run used that `culture-probe run` has no way to say: custom rows, a model object,
    list options whose items contain commas. Without this, the Reproduce command would silently give
    other numbers.
    """
    bench, model = config.benchmark, config.model
    gaps = []
    if bench.custom_rows and not bench.rows_file:
        gaps.append(
            f"run on {bench.rows} custom rows (sha256 {str(bench.rows_sha256)[:16]}...) "
            "passed as `rows=` to `culture_probe.run`, not the benchmark's own data"
        )
    if model.loaded_object:
        gaps.append(
            f"the model was a loaded `{model.spec}` object, not a name or path `--model` can take"
        )
    for key, value in config.options.items():
        if isinstance(value, list) and any("," in str(item) for item in value):
            gaps.append(
                f"option `{key}` has an item containing a comma, which `--option {key}=...` splits"
            )
    return gaps


def _cli_value(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(map(str, value))
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)
