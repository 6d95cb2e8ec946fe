"""Figures of report views and comparisons, drawn with matplotlib's Agg canvas (no pyplot, no global
backend switch), each saved as PNG (linked from the markdown) and PDF (for a paper).

Labels in any script: the font list falls back, glyph by glyph, from DejaVu Sans (Latin, Greek,
Cyrillic, Arabic, Hebrew) to Noto fonts when they are installed (CJK, Hangul, Devanagari, Thai);
Arabic and Hebrew labels are shaped and put in visual order (arabic-reshaper, python-bidi), which
matplotlib does not do itself. A label no installed font can draw is reported once, with the font
package to install, instead of being drawn as empty boxes.
"""

from __future__ import annotations

import unicodedata
import warnings
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from culture_probe.metrics.display import (
    MIN_N,
    VALID_RANGE,
    Scale,
    format_number,
    is_small,
    p_clause,
)
from culture_probe.report.views import CHANCE, Bars, Heatmap, Reference, unit_label
from culture_probe.util.extras import require

FORMATS = ("png", "pdf")
BAR_COLOUR = "#4C72B0"
SMALL_HATCH = "//"  # bars and heatmap cells of n below MIN_N
CHANCE_COLOUR = "#C44E52"  # chance lines and marks: red, so that a bar near one reads as luck
NOTE_COLOUR = "#B22222"  # the corner note of a smoke or incomplete run
DIFFERENCE_COLOUR = "#C44E52"
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
    """A label as it must be drawn: right-to-left scripts shaped and reordered; warns once per
    script when no installed font has its letters.
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
    # 42: TrueType text, editable in the PDF
    with rc_context({"font.family": FONTS, "pdf.fonttype": 42}):
        figure.tight_layout()
        for path in paths:
            figure.savefig(path, dpi=110)
    return paths


def level_text(value: float, scale: Scale | None) -> str:
    """A reference level as a legend prints it, by the one rounding rule and with its unit: `3.14%`,
    `0.889`.
    """
    return format_number(value, scale) + ("%" if scale == "%" else "")


def _references(
    axes: Any,
    references: Sequence[Reference],
    scale: Scale | None = None,
    extra: Sequence[Any] = (),
) -> None:
    """The reference lines with their values in the legend (`chance (3.14%)`); chance drawn red and
    dotted, so that a bar near it reads as luck, the paper's values in grey.
    """
    styles = ("--", "-.", (0, (5, 1, 1, 1)))
    others = 0
    for reference in references:
        chance = reference.label == CHANCE
        axes.axhline(
            reference.value,
            color=CHANCE_COLOUR if chance else "0.35",
            linestyle=":" if chance else styles[others % len(styles)],
            linewidth=1.5 if chance else 1,
            label=f"{reference.label} ({level_text(reference.value, scale)})",
        )
        others += not chance
    handles, labels = axes.get_legend_handles_labels()  # the lines, and chance marks drawn before
    if handles or extra:
        axes.legend(
            [*handles, *extra], [*labels, *(e.get_label() for e in extra)], fontsize=7, loc="best"
        )


def context_note(subset: Mapping[str, Any] | None, status: str | None) -> str:
    """What a figure must say inside the image, so that it survives being copied into slides: a
    --limit run's draw (`smoke run: 40 of 1,000 facts`) and a run that did not finish (`INCOMPLETE
    64/300`); "" for a full, finished run.
    """
    parts = [status] if status else []
    if subset:
        of = f" of {subset['items']:,}" if subset.get("items") is not None else ""
        parts.append(f"smoke run: {subset['sampled']:,}{of} {subset.get('unit') or 'items'}")
    return "; ".join(parts)


def stamp(figure: Any, note: str) -> Any:
    """`note` (`context_note`) as the figure's top line, in red and wrapped to its width;
    tight_layout keeps the axes below it.
    """
    if note:
        figure.suptitle(label(note), fontsize=8, color=NOTE_COLOUR, fontweight="bold", wrap=True)
    return figure


def valid_range(scale: Scale | None, values: np.ndarray) -> tuple[float, float]:
    """The values a metric can take: its scale's range; without a scale, from 0 when none is
    negative.
    """
    if scale is not None:
        return VALID_RANGE[scale]
    finite = values[np.isfinite(values)]
    return (0.0 if finite.size == 0 or finite.min() >= 0 else -np.inf), np.inf


def error_bars(
    values: np.ndarray, lows: np.ndarray, highs: np.ndarray, bounds: tuple[float, float]
) -> np.ndarray:
    """(2, n) lengths below and above each value: the interval clipped to the metric's range and to
    the value, so that float noise (a value 7e-15 above its upper bound) never makes one negative;
    NaN (no bar) where an estimate has no interval.
    """
    low, high = np.clip(lows, *bounds), np.clip(highs, *bounds)
    return np.vstack([np.maximum(values - low, 0.0), np.maximum(high - values, 0.0)])


def _start_at_zero(axes: Any, data: np.ndarray, bounds: tuple[float, float]) -> None:
    """A non-negative metric's axis from 0 (all-zero data too: up to the scale's top, not -0.04 to
    0.04).
    """
    if bounds[0] != 0.0:
        return
    finite = data[np.isfinite(data)]
    top = float(finite.max()) if finite.size else 0.0
    if top <= 0.0:
        top = bounds[1] if np.isfinite(bounds[1]) else 1.0
    axes.set_ylim(0.0, min(1.08 * top, 1.05 * bounds[1]))


def _estimate_arrays(
    estimates: Sequence[Mapping[str, Any]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Values and interval bounds of estimates (NaN bounds where an estimate has no interval)."""
    values = np.array([e["value"] for e in estimates], dtype=float)
    low = np.array(
        [np.nan if e.get("ci_low") is None else e["ci_low"] for e in estimates], dtype=float
    )
    high = np.array(
        [np.nan if e.get("ci_high") is None else e["ci_high"] for e in estimates], dtype=float
    )
    return values, low, high


def _tick(name: str, estimate: Mapping[str, Any]) -> str:
    """A bar's label: its group, n, and what a reader must know of it: no interval, a suite row's
    smoke or INCOMPLETE run.
    """
    notes = [
        *(["no interval"] if estimate.get("ci_low") is None else []),
        *(["smoke run"] if estimate.get("smoke") else []),
        *([estimate["status"]] if estimate.get("status") else []),
    ]
    return "\n".join([label(name), f"(n={estimate.get('n')})", *notes])


def _chance_marks(axes: Any, levels: Sequence[float | None]) -> None:
    """A red dotted mark across each bar at its own chance level (`levels`, None where a bar has
    none): a suite's configs each have their own candidates, so one line would be wrong for all but
    one.
    """
    shown = [(x, level) for x, level in enumerate(levels) if level is not None]
    if shown:
        xs, ys = zip(*shown, strict=True)
        axes.hlines(
            ys,
            [x - 0.45 for x in xs],
            [x + 0.45 for x in xs],
            colors=CHANCE_COLOUR,
            linestyles=":",
            linewidth=1.5,
        ).set_label(f"{CHANCE} (each bar's own)")


def bars_figure(view: Bars, title: str) -> Any:
    """One bar per group in the view's order with its 95% interval and n, bars of n below `MIN_N`
    hatched and pale, and the reference lines; a non-negative metric's axis starts at 0.
    """
    from matplotlib.patches import Patch

    groups = list(view.estimates)
    values, low, high = _estimate_arrays([view.estimates[g] for g in groups])
    bounds = valid_range(view.scale, values)
    ticks = [_tick(g, view.estimates[g]) for g in groups]
    per_bar = max([0.9, *(0.07 * len(line) for tick in ticks for line in tick.splitlines())])
    figure = new_figure(max(3.0, per_bar * len(groups) + 1.5, 0.08 * len(title)), 3.4)
    axes = figure.add_subplot()
    bars = axes.bar(
        range(len(groups)),
        values,
        yerr=error_bars(values, low, high, bounds),
        capsize=4,
        color=BAR_COLOUR,
    )
    small = [is_small(view.estimates[g].get("n")) for g in groups]
    for patch, few in zip(bars.patches, small, strict=True):
        if few:
            patch.set(hatch=SMALL_HATCH, alpha=0.5, edgecolor="0.3")
    axes.set_xticks(range(len(groups)), ticks, fontsize=8)
    marker = Patch(
        facecolor=BAR_COLOUR, alpha=0.5, hatch=SMALL_HATCH, edgecolor="0.3", label=f"n < {MIN_N}"
    )
    own = [(view.estimates[g].get("chance") or {}).get("value") for g in groups]
    _chance_marks(axes, own)
    _references(axes, view.references, view.scale, [marker] if any(small) else [])
    levels = [r.value for r in view.references] + [v for v in own if v is not None]
    _start_at_zero(axes, np.concatenate([values, high, levels]), bounds)
    axes.set_ylabel(view.ylabel)
    axes.set_title(label(title), fontsize=10)
    return figure


def draw_bars(view: Bars, stem: Path, title: str) -> list[Path]:
    """`bars_figure` saved as `stem`.png and `stem`.pdf."""
    return save(bars_figure(view, title), stem)


def colour_range(matrix: np.ndarray, scale: Scale | None) -> tuple[float, float]:
    """The colour bar's span: the scale's whole range, or from 0 (a non-negative metric) to the
    largest value.
    """
    if scale is not None:
        return VALID_RANGE[scale]
    finite = matrix[np.isfinite(matrix)]
    low = min(0.0, float(finite.min())) if finite.size else 0.0
    high = float(finite.max()) if finite.size else 1.0
    return low, high if high > low else low + 1.0


def heatmap_figure(view: Heatmap, title: str) -> Any:
    """A labelled matrix with each value (and its n, when known) printed in its cell, the colour bar
    from 0 for a non-negative metric; cells of n below `MIN_N` hatched, `view.highlight` cells
    outlined.
    """
    from matplotlib.patches import Rectangle

    matrix = np.array(
        [[np.nan if v is None else v for v in row] for row in view.values], dtype=float
    )
    rows, cols = matrix.shape if matrix.size else (len(view.row_labels), len(view.col_labels))
    figure = new_figure(max(4.0, 0.8 * cols + 2.5), max(2.5, 0.45 * rows + 1.5))
    axes = figure.add_subplot()
    low, high = colour_range(matrix, view.scale)
    image = axes.imshow(
        np.ma.masked_invalid(matrix), cmap="viridis", aspect="auto", vmin=low, vmax=high
    )
    bar = figure.colorbar(image, ax=axes, label=view.label)
    # a level every cell is read against, e.g. X-FaKT's chance error
    for reference in view.references:
        bar.ax.axhline(
            reference.value,
            color=CHANCE_COLOUR,
            linewidth=2,
            label=f"{reference.label} ({level_text(reference.value, view.scale)})",
        )
    axes.set_xticks(
        range(cols), [label(c) for c in view.col_labels], rotation=45, ha="right", fontsize=8
    )
    axes.set_yticks(range(rows), [label(r) for r in view.row_labels], fontsize=8)
    small = False
    for (i, j), value in np.ndenumerate(matrix):
        if np.isnan(value):
            continue
        n = view.counts[i][j] if view.counts else None
        bright = (value - low) / (high - low) > 0.6  # viridis is light at the top
        text = format_number(float(value), view.scale) + ("" if n is None else f"\nn={n}")
        axes.text(
            j, i, text, ha="center", va="center", fontsize=6, color="black" if bright else "white"
        )
        if is_small(n):
            small = True
            axes.add_patch(
                Rectangle(
                    (j - 0.5, i - 0.5),
                    1,
                    1,
                    fill=False,
                    hatch=SMALL_HATCH,
                    edgecolor=(1, 1, 1, 0.35),
                    lw=0,
                )
            )
    for i, j in view.highlight:
        axes.add_patch(
            Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2)
        )
    notes = ([f"(hatched: n < {MIN_N})"] if small else []) + [
        f"(red on the colour bar: {r.get_label()})" for r in bar.ax.lines
    ]
    axes.set_title("\n".join([label(title), *notes]), fontsize=10)
    return figure


def draw_heatmap(view: Heatmap, stem: Path, title: str) -> list[Path]:
    """`heatmap_figure` saved as `stem`.png and `stem`.pdf."""
    return save(heatmap_figure(view, title), stem)


def figure_of(view: Bars | Heatmap, title: str, note: str = "") -> Any:
    """Any figure view drawn, with `note` (`context_note`: a smoke or incomplete run) inside the
    image.
    """
    figure = bars_figure(view, title) if isinstance(view, Bars) else heatmap_figure(view, title)
    return stamp(figure, note)


def draw(view: Bars | Heatmap, stem: Path, title: str, note: str = "") -> list[Path]:
    """Draw any figure view to `stem`.png and `stem`.pdf, saying `note` inside the image."""
    return save(figure_of(view, title, note), stem)


def comparison_figure(comparison: Any) -> Any:
    """Paired runs: a forest plot of the paired differences from the first run, one panel per metric
    (each on its own scale), the headline metric's on top with its planned overall row first, each
    row with its 95% interval (none where a row has none) against a zero line. Unpaired runs: their
    headline numbers side by side. The runs' smoke and incomplete notes are said inside the image.
    """
    figure = forest_figure(comparison) if comparison.paired else headlines_figure(comparison)
    return stamp(figure, "; ".join(comparison.context))


def headlines_figure(comparison: Any) -> Any:
    """The runs' headline number with its interval, side by side (runs that could not be paired)."""
    runs = [
        (name, estimate)
        for name, estimate in comparison.headlines
        if estimate and estimate["value"] is not None
    ]
    scale = comparison.scales.get(comparison.metric or "")
    figure = new_figure(max(4.0, 1.0 * len(runs) + 2.0), 3.4)
    axes = figure.add_subplot()
    values, low, high = _estimate_arrays([e for _, e in runs])
    bounds = valid_range(scale, values)
    axes.errorbar(
        range(len(runs)), values, yerr=error_bars(values, low, high, bounds), fmt="o", capsize=4
    )
    _start_at_zero(axes, np.concatenate([values, high]), bounds)
    axes.set_xticks(
        range(len(runs)), [label(name) for name, _ in runs], rotation=20, ha="right", fontsize=8
    )
    axes.set_ylabel(unit_label(str(comparison.metric), scale))
    axes.set_title(f"{comparison.metric} per run (95% interval; not paired)", fontsize=10)
    return figure


def forest_rows(comparison: Any) -> list[tuple[str, list[dict[str, Any]]]]:
    """(metric, its paired rows) in the figure's order, top to bottom: the headline metric first,
    and in each metric the overall rows (the headline's planned one) before the strata, each run's
    in the table's order.
    """
    panels: dict[str, list[dict[str, Any]]] = {}
    for row in comparison.paired:
        panels.setdefault(row["metric"], []).append(row)
    # stable: the others as compare found them
    order = sorted(panels, key=lambda metric: metric != comparison.metric)
    return [
        (metric, sorted(panels[metric], key=lambda row: row["group"] != "overall"))
        for metric in order
    ]


def _forest_tick(row: Mapping[str, Any], several: bool) -> str:
    run = f"{row['run']}: " if several else ""
    test = f", {p_clause(row['p_value'])}" if row.get("p_value") is not None else ""
    planned = " (planned)" if row.get("planned") else ""
    no_interval = "; no interval" if row.get("ci_low") is None else ""
    return label(f"{run}{row['group']}{planned}\n(n={row.get('n')}{test}{no_interval})")


def forest_figure(comparison: Any) -> Any:
    """`comparison_figure` of paired runs: one row per paired difference, one panel per metric."""
    panels = forest_rows(comparison)
    several = len({row["run"] for row in comparison.paired}) > 1
    heights = [len(rows) + 1.2 for _, rows in panels]
    figure = new_figure(7.0, 0.42 * sum(heights) + 1.0)
    grid = figure.add_gridspec(len(panels), 1, height_ratios=heights)
    for index, (metric, rows) in enumerate(panels):
        axes = figure.add_subplot(grid[index])
        diffs, low, high = _estimate_arrays([{**row, "value": row["difference"]} for row in rows])
        ys = np.arange(len(rows))
        yerr = error_bars(diffs, low, high, (-np.inf, np.inf))
        axes.errorbar(diffs, ys, xerr=yerr, fmt="s", capsize=3, color=DIFFERENCE_COLOUR)
        axes.axvline(0.0, color="0.35", linestyle="--", linewidth=1, label="no difference")
        axes.set_yticks(ys, [_forest_tick(row, several) for row in rows], fontsize=7)
        for tick, row in zip(axes.get_yticklabels(), rows, strict=True):
            tick.set_fontweight("bold" if row.get("planned") else "normal")
        axes.set_ylim(len(rows) - 0.5, -0.5)  # the first row on top
        axes.set_xlabel(
            f"difference in {unit_label(metric, comparison.scales.get(metric))}", fontsize=8
        )
        if index == 0:
            axes.set_title(
                label(
                    f"Paired differences from {comparison.runs[0]} (run minus it; 95% intervals)"
                ),
                fontsize=10,
            )
    return figure


def draw_comparison(comparison: Any, stem: Path) -> list[Path]:
    """`comparison_figure` saved as `stem`.png and `stem`.pdf."""
    return save(comparison_figure(comparison), stem)
