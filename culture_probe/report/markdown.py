"""report.md of a run: header, the task's views (tables and figures), deviations, the command to repeat it."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from culture_probe.report.plots import draw
from culture_probe.tasks.base import Section, Table

PLOTS_DIR = "plots"


def format_value(value: Any) -> str:
    """Numbers with at most 4 decimals (trailing zeros kept to 1 decimal), None as an empty cell."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4f}".rstrip("0").rstrip(".") if abs(value) < 1 else f"{value:.2f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def table_markdown(table: Table) -> str:
    """A GitHub-flavoured markdown table."""
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(format_value(v) for v in row) + " |" for row in table.rows]
    return "\n".join(lines)


def slug(text: str) -> str:
    """A file-name-safe version of a title."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "figure"


def render(sections: Sequence[Section], config: Mapping[str, Any], run_dir: Path) -> str:
    """The whole report; figures are written to `run_dir/plots/` and linked relatively."""
    parts = [header(config)]
    (run_dir / PLOTS_DIR).mkdir(parents=True, exist_ok=True)
    for number, section in enumerate(sections, 1):
        parts.append(f"## {section.title}")
        if section.text:
            parts.append(section.text)
        parts += [table_markdown(t) for t in section.tables]
        for index, figure in enumerate(section.figures, 1):
            title = figure.title or section.title
            name = f"{number:02d}_{slug(title)}_{index}.png"
            draw(figure, run_dir / PLOTS_DIR / name, title)
            parts.append(f"![{title}]({PLOTS_DIR}/{name})")
    parts.append(deviations(config))
    parts.append(reproduce(config))
    return "\n\n".join(parts) + "\n"


def header(config: Mapping[str, Any]) -> str:
    """Title and the facts a reader needs to trust the numbers."""
    bench, model, run = config["benchmark"], config["model"], config["run"]
    lines = [
        f"# {config['config']} on {model['spec']}",
        "",
        f"- benchmark: {bench['title']} (version {bench['version']}), {bench['rows']} rows"
        + (" (corrected variant)" if run.get("corrected") else ""),
        f"- model: `{model['spec']}` ({model['kind']}); identity `{json.dumps(model['identity'], sort_keys=True)}`",
        f"- culture_probe {config['versions']['culture_probe']}, torch {config['versions'].get('torch')}, "
        f"transformers {config['versions'].get('transformers')}",
    ]
    if run.get("limit"):
        lines.append(f"- **smoke run**: only the first {run['limit']} items were probed")
    if run.get("language"):
        lines.append(f"- language: {run['language']}")
    options = config.get("options") or {}
    if options:
        lines.append("- options: " + ", ".join(f"`{k}={v}`" for k, v in options.items()))
    return "\n".join(lines)


def deviations(config: Mapping[str, Any]) -> str:
    """The deviation log recorded with the run."""
    rows = tuple((d["id"], d["description"]) for d in config.get("deviations", ()))
    if not rows:
        return "## Deviations from the original code\n\nNone recorded."
    return "## Deviations from the original code\n\n" + table_markdown(Table(("id", "description"), rows))


def reproduce(config: Mapping[str, Any]) -> str:
    """The command that repeats this run."""
    run = config["run"]
    words = ["culture-probe run", config["config"], "--model", str(config["model"]["spec"])]
    for flag in ("language", "limit", "seed", "data_dir"):
        if run.get(flag) not in (None, 0) or (flag == "seed" and run.get("seed")):
            words += [f"--{flag.replace('_', '-')}", str(run[flag])]
    if run.get("corrected"):
        words.append("--corrected")
    words += [f"--option {k}={_cli_value(v)}" for k, v in (config.get("options") or {}).items() if v is not None]
    return "## Reproduce\n\n```\n" + " ".join(words) + "\n```"


def _cli_value(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(map(str, value))
    if isinstance(value, dict):
        return "'" + json.dumps(value, ensure_ascii=False) + "'"
    return str(value)
