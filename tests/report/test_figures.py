"""Figures that never overstate: axes of non-negative metrics from 0, error bars inside the valid
range (float noise cannot crash a plot), the n of every bar and cell, and bars or cells of few units
hatched.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from culture_probe.report.plots import (
    bars_figure,
    draw_bars,
    draw_comparison,
    error_bars,
    heatmap_figure,
)
from culture_probe.report.views import Bars, Heatmap


def _estimate(value, low, high, n, **extra):
    return {"value": value, "stderr": 1.0, "ci_low": low, "ci_high": high, "n": n, **extra}


def _ticks(axes):
    return [t.get_text() for t in axes.get_xticklabels()]


def test_a_value_a_hair_above_its_upper_bound_draws(tmp_path):
    # the suite crash: CAMeL at --limit 10, a value 7e-15 above its upper bound -> "'yerr' must not
    # contain negative values" in matplotlib, and suite.md was never written
    noisy = _estimate(47.52 + 7e-15, 40.0, 47.52, 12)
    below = _estimate(3.0 - 7e-15, 3.0, 9.0, 12)
    png, pdf = draw_bars(
        Bars({"a": noisy, "b": below}, "CBS (%)", scale="%"), tmp_path / "b", "bars"
    )
    assert png.is_file() and pdf.is_file()
    comparison = SimpleNamespace(
        headlines=(("first", noisy), ("second", below)),
        paired=(
            {
                "group": "overall",
                "metric": "cbs",
                "run": "second",
                **_estimate(1.0 + 7e-15, -2.0, 1.0, 12),
                "difference": 1.0 + 7e-15,
                "p_value": 0.5,
            },
        ),
        metric="cbs",
        runs=("first", "second"),
        scales={"cbs": "%"},
        context=(),
    )
    assert all(p.is_file() for p in draw_comparison(comparison, tmp_path / "c"))


def test_error_bars_stay_inside_the_scale_and_never_go_negative():
    values = np.array([100.0 + 1e-12, 0.0, 50.0, 20.0])
    low = np.array([90.0, -3.0, np.nan, 20.0 + 1e-14])
    high = np.array([100.0, 10.0, np.nan, 30.0])
    yerr = error_bars(values, low, high, (0.0, 100.0))
    assert np.nanmin(yerr) >= 0.0
    assert yerr[0, 1] == 0.0  # a bootstrap bound below 0 is clipped to the scale
    assert np.isnan(yerr[:, 2]).all()  # no interval: no bar, not a zero-width one


def test_axes_of_non_negative_metrics_start_at_zero_even_on_all_zero_data():
    # "P@1 (%)" axes went from -0.04 to 0.04 and colour bars from -0.1 to 0.1 on all-zero data
    zero = _estimate(0.0, 0.0, 0.0, 20)
    axes = bars_figure(Bars({"arab": zero, "west": zero}, "P@1 (%)", scale="%"), "P@1").axes[0]
    low, high = axes.get_ylim()
    assert low == 0.0 and high >= 100.0
    unscaled = bars_figure(Bars({"a": _estimate(0.2, 0.1, 0.3, 20)}, "score"), "s").axes[0]
    assert unscaled.get_ylim()[0] == 0.0
    figure = heatmap_figure(
        Heatmap(("P17", "P19"), ("arab", "west"), ((0.0, 0.0), (0.0, 0.0)), "P@1 (%)", scale="%"),
        "h",
    )
    image = figure.axes[0].get_images()[0]
    assert image.get_clim() == (0.0, 100.0)
    raw = heatmap_figure(Heatmap(("r",), ("c",), ((0.0,),), "bits"), "h").axes[0].get_images()[0]
    assert raw.get_clim()[0] == 0.0 and raw.get_clim()[1] > 0.0


def test_bars_show_their_n_and_few_units_are_hatched():
    # FmLAMA per-group bars at n=2 read like any other bar
    bars = Bars(
        {"Iran": _estimate(44.3, 19.7, 69.0, 2), "ALL": _estimate(33.1, 24.5, 43.9, 40)},
        "mAP (%)",
        scale="%",
    )
    axes = bars_figure(bars, "mAP").axes[0]
    assert _ticks(axes) == ["Iran\n(n=2)", "ALL\n(n=40)"]
    hatches = [p.get_hatch() for p in axes.patches]
    assert hatches[0] and not hatches[1]
    assert "n < 10" in [t.get_text() for t in axes.get_legend().get_texts()]


def test_a_bar_without_an_interval_says_so_and_has_no_error_bar():
    lone = _estimate(65.6, None, None, 1, no_interval="one unit")
    axes = bars_figure(Bars({"names_female": lone}, "CBS (%)", scale="%"), "CBS").axes[0]
    assert _ticks(axes) == ["names_female\n(n=1)\nno interval"]
    segments = [np.asarray(s) for c in axes.collections for s in c.get_segments()]
    # no bar drawn as if the interval were zero-wide
    assert all(s.size == 0 or np.isnan(s).any() for s in segments)
    # nor its caps
    assert all(np.isnan(np.asarray(line.get_ydata(), dtype=float)).all() for line in axes.lines)


def test_heatmap_cells_print_their_n_and_few_units_are_hatched():
    # a per-predicate heatmap cell of 100.0 from one fact
    view = Heatmap(
        ("P17", "P19"),
        ("arab", "west"),
        ((100.0, 0.0), (50.0, None)),
        "P@1 (%)",
        scale="%",
        counts=((1, 12), (20, None)),
    )
    axes = heatmap_figure(view, "P@1 per predicate").axes[0]
    texts = [t.get_text() for t in axes.texts]
    assert texts == ["100.00\nn=1", "0.00\nn=12", "50.00\nn=20"]
    hatched = [p for p in axes.patches if p.get_hatch()]
    assert [(p.get_x(), p.get_y()) for p in hatched] == [(-0.5, -0.5)]  # the one-fact cell only
    assert "hatched: n < 10" in axes.get_title()


@pytest.mark.parametrize("scale", ["%", "0-1"])
def test_heatmap_values_follow_the_one_rounding_rule(scale):
    axes = heatmap_figure(Heatmap(("r",), ("c",), ((0.12345,),), "x", scale=scale), "h").axes[0]
    assert axes.texts[0].get_text() == {"%": "0.12", "0-1": "0.123"}[scale]
