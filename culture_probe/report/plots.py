"""Figures of report views and comparisons, drawn with matplotlib's Agg canvas (no pyplot, no global backend
switch), each saved as PNG (linked from the markdown) and PDF (for a paper).

Labels in any script: the font list falls back, glyph by glyph, from DejaVu Sans (Latin, Greek, Cyrillic, Arabic,
Hebrew) to Noto fonts when they are installed (CJK, Hangul, Devanagari, Thai); Arabic and Hebrew labels are shaped
and put in visual order (arabic-reshaper, python-bidi), which matplotlib does not do itself. A label no installed
font can draw is reported once, with the font package to install, instead of being drawn as empty boxes.
"""

from __future__ import annotations

import unicodedata
import warnings
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from culture_probe.extras import require
from culture_probe.report.views import Bars, Heatmap

FORMATS = ("png", "pdf")
FONTS = [
    "DejaVu Sans",
    "Noto Sans",
    "Noto Sans CJK JP",
    "Noto Sans CJK KR",
    "Noto Sans CJK SC",
    "Noto Sans Devanagari",
    "Noto Sans Thai",
    "Noto Sans Arabic",
    "Noto Sans Hebrew",
]


def label(text: str) -> str:
    """A label as it must be drawn: right-to-left scripts shaped and reordered; warns once per script when no
    installed font has its letters.
    """
    text = str(text)
    if any(unicodedata.bidirectional(c) in ("R", "AL") for c in text):
        text = require("bidi").get_display(require("arabic_reshaper").reshape(text))
    for char in text:
        if ord(char) > 0x2FF and not char.isspace() and not _drawable(char):
            _warn_missing_font(unicodedata.name(char, "?").split()[0])
    return text


def _drawable(char: str) -> bool:
    return any(ord(char) in _charmap(path) for path in _font_files())


@cache
def _font_files() -> tuple[str, ...]:
    from matplotlib import font_manager

    paths = []
    for family in FONTS:
        try:
            paths.append(font_manager.findfont(family, fallback_to_default=False))
        except ValueError:
            continue
    return tuple(dict.fromkeys(paths))


@cache
def _charmap(path: str) -> frozenset[int]:
    from matplotlib.ft2font import FT2Font

    return frozenset(FT2Font(path).get_charmap())


@cache
def _warn_missing_font(script: str) -> None:
    warnings.warn(
        f"No installed font draws {script} letters: plot labels in that script show as boxes. Install "
        "Noto fonts (Debian: fonts-noto-core fonts-noto-cjk) and re-run `culture-probe report`.",
        stacklevel=3,
    )


def new_figure(width: float, height: float) -> Any:
    """An Agg-backed figure using the fallback font list."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height))
    FigureCanvasAgg(figure)
    return figure


def save(figure: Any, stem: Path) -> list[Path]:
    """Save `figure` as `stem`.png and `stem`.pdf; returns the paths."""
    from matplotlib import rc_context

    paths = [stem.with_name(f"{stem.name}.{fmt}") for fmt in FORMATS]
    with rc_context({"font.family": FONTS, "pdf.fonttype": 42}):  # 42: TrueType text, editable in the PDF
        figure.tight_layout()
        for path in paths:
            figure.savefig(path, dpi=110)
    return paths


def _references(axes: Any, references: Sequence[Any]) -> None:
    styles = ("--", ":", "-.")
    for index, reference in enumerate(references):
        axes.axhline(
            reference.value,
            color="0.35",
            linestyle=styles[index % len(styles)],
            linewidth=1,
            label=f"{reference.label} ({reference.value:g})",
        )
    if references:
        axes.legend(fontsize=7, loc="best")


def draw_bars(view: Bars, stem: Path, title: str) -> list[Path]:
    """One bar per group in the view's order, with its 95% interval and n, and the reference lines."""
    groups = list(view.estimates)
    values = np.array([view.estimates[g]["value"] for g in groups], dtype=float)
    low = np.array([_or(view.estimates[g]["ci_low"], v) for g, v in zip(groups, values, strict=True)])
    high = np.array([_or(view.estimates[g]["ci_high"], v) for g, v in zip(groups, values, strict=True)])
    figure = new_figure(max(3.0, 0.9 * len(groups) + 1.5), 3.2)
    axes = figure.add_subplot()
    axes.bar(range(len(groups)), values, yerr=np.vstack([values - low, high - values]), capsize=4, color="#4C72B0")
    axes.set_xticks(range(len(groups)), [f"{label(g)}\n(n={view.estimates[g]['n']})" for g in groups], fontsize=8)
    _references(axes, view.references)
    axes.set_ylabel(view.ylabel)
    axes.set_title(label(title), fontsize=10)
    return save(figure, stem)


def _or(value: float | None, default: float) -> float:
    return default if value is None else float(value)


def draw_heatmap(view: Heatmap, stem: Path, title: str) -> list[Path]:
    """A labelled matrix with each value printed in its cell; `view.highlight` cells are outlined."""
    from matplotlib.patches import Rectangle

    matrix = np.array([[np.nan if v is None else v for v in row] for row in view.values], dtype=float)
    rows, cols = matrix.shape if matrix.size else (len(view.row_labels), len(view.col_labels))
    figure = new_figure(max(4.0, 0.7 * cols + 2.5), max(2.5, 0.35 * rows + 1.5))
    axes = figure.add_subplot()
    image = axes.imshow(np.ma.masked_invalid(matrix), cmap="viridis", aspect="auto")
    figure.colorbar(image, ax=axes, label=view.label)
    axes.set_xticks(range(cols), [label(c) for c in view.col_labels], rotation=45, ha="right", fontsize=8)
    axes.set_yticks(range(rows), [label(r) for r in view.row_labels], fontsize=8)
    low, high = (np.nanmin(matrix), np.nanmax(matrix)) if np.isfinite(matrix).any() else (0.0, 0.0)
    for (i, j), value in np.ndenumerate(matrix):
        if not np.isnan(value):
            bright = high > low and (value - low) / (high - low) > 0.6  # viridis is light at the top
            axes.text(j, i, f"{value:.1f}", ha="center", va="center", fontsize=6, color="black" if bright else "white")
    for i, j in view.highlight:
        axes.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2))
    axes.set_title(label(title), fontsize=10)
    return save(figure, stem)


def draw(view: Bars | Heatmap, stem: Path, title: str) -> list[Path]:
    """Draw any figure view to `stem`.png and `stem`.pdf."""
    if isinstance(view, Bars):
        return draw_bars(view, stem, title)
    return draw_heatmap(view, stem, title)


def draw_comparison(comparison: Any, stem: Path) -> list[Path]:
    """The compared runs' headline number with its interval, side by side, and (when runs were paired) each
    paired difference from the first run with its interval and a zero line.
    """
    runs = [(name, estimate) for name, estimate in comparison.headlines if estimate and estimate["value"] is not None]
    overall = [p for p in comparison.paired if p["group"] == "overall" and p["metric"] == comparison.metric]
    figure = new_figure(max(4.0, 1.0 * len(runs) + 2.0) * (2 if overall else 1), 3.4)
    axes = figure.add_subplot(1, 2 if overall else 1, 1)
    values = np.array([e["value"] for _, e in runs], dtype=float)
    low = np.array([_or(e["ci_low"], e["value"]) for _, e in runs])
    high = np.array([_or(e["ci_high"], e["value"]) for _, e in runs])
    axes.errorbar(range(len(runs)), values, yerr=np.vstack([values - low, high - values]), fmt="o", capsize=4)
    axes.set_xticks(range(len(runs)), [label(name) for name, _ in runs], rotation=20, ha="right", fontsize=8)
    axes.set_ylabel(comparison.metric)
    axes.set_title(f"{comparison.metric} per run (95% interval)", fontsize=10)
    if overall:
        right = figure.add_subplot(1, 2, 2)
        diffs = np.array([p["difference"] for p in overall], dtype=float)
        d_low = np.array([_or(p["ci_low"], p["difference"]) for p in overall])
        d_high = np.array([_or(p["ci_high"], p["difference"]) for p in overall])
        right.errorbar(
            range(len(overall)),
            diffs,
            yerr=np.vstack([diffs - d_low, d_high - diffs]),
            fmt="s",
            capsize=4,
            color="#C44E52",
        )
        right.axhline(0.0, color="0.35", linestyle="--", linewidth=1)
        right.set_xticks(
            range(len(overall)),
            [label(f"{p['run']}\np={p['p_value']:.3g}" if p["p_value"] is not None else p["run"]) for p in overall],
            fontsize=8,
        )
        right.set_title(f"paired difference from {comparison.runs[0]}", fontsize=10)
    return save(figure, stem)
