"""PNG figures of report views, drawn with matplotlib's Agg canvas (no pyplot, no global backend switch)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from culture_probe.metrics import mean_interval
from culture_probe.report.views import Bars, Heatmap


def draw_bars(view: Bars, path: Path, title: str) -> Path:
    """Per-group means with bootstrap 95% intervals, one bar per group in the view's order."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    groups = [g for g, v in view.values.items() if len(v)]
    means = np.array([np.mean(view.values[g]) * view.scale for g in groups])
    intervals = np.array([mean_interval(view.values[g]) for g in groups]).reshape(-1, 2) * view.scale
    figure = Figure(figsize=(max(3.0, 0.9 * len(groups) + 1.5), 3.2))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    errors = np.abs(intervals.T - means)
    axes.bar(range(len(groups)), means, yerr=errors, capsize=4, color="#4C72B0")
    axes.set_xticks(range(len(groups)), [f"{g}\n(n={len(view.values[g])})" for g in groups], fontsize=8)
    axes.set_ylabel(view.ylabel)
    axes.set_title(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return path


def draw_heatmap(view: Heatmap, path: Path, title: str) -> Path:
    """A labelled matrix with each value printed in its cell; `view.highlight` cells are outlined."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    matrix = np.array([[np.nan if v is None else v for v in row] for row in view.values], dtype=float)
    rows, cols = matrix.shape if matrix.size else (len(view.row_labels), len(view.col_labels))
    figure = Figure(figsize=(max(4.0, 0.7 * cols + 2.5), max(2.5, 0.35 * rows + 1.5)))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    image = axes.imshow(np.ma.masked_invalid(matrix), cmap="viridis", aspect="auto")
    figure.colorbar(image, ax=axes, label=view.label)
    axes.set_xticks(range(cols), view.col_labels, rotation=45, ha="right", fontsize=8)
    axes.set_yticks(range(rows), view.row_labels, fontsize=8)
    low, high = (np.nanmin(matrix), np.nanmax(matrix)) if np.isfinite(matrix).any() else (0.0, 0.0)
    for (i, j), value in np.ndenumerate(matrix):
        if not np.isnan(value):
            bright = high > low and (value - low) / (high - low) > 0.6  # viridis is light at the top
            axes.text(j, i, f"{value:.1f}", ha="center", va="center", fontsize=6, color="black" if bright else "white")
    for i, j in view.highlight:
        axes.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2))
    axes.set_title(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return path


def draw(view: Bars | Heatmap, path: Path, title: str) -> Path:
    """Draw any figure view to `path`."""
    if isinstance(view, Bars):
        return draw_bars(view, path, title)
    return draw_heatmap(view, path, title)
