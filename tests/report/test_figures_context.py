"""Figures carry their context (issue 36): every figure of a metric with a chance level draws it as
a labelled line (DLAMA's and X-FaKT's figures drew none though their tables gave 3.14% and 92.3%), a
smoke or incomplete run's figures say so inside the image (copied into slides, the report's header
is gone), and `compare` draws the paired differences with their intervals, the headline first.
Checked on the drawn matplotlib figures' artists, not on pixels, so that no check depends on a
library version's rendering.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from dlama_fixture import TableScorer, spec_table, write_dlama
from golden.cases import CASES, golden_path
from test_compare import FACTS, guessing, knowing

from culture_probe import rundir
from culture_probe.record import RunRecord
from culture_probe.report import compare_runs, main, plots
from culture_probe.report.plots import comparison_figure, context_note, figure_of, forest_rows
from culture_probe.report.summary import summary_figures
from culture_probe.report.views import Bars, sections_for
from culture_probe.runner import run
from culture_probe.tasks import Record

KINDS = {"bert": "masked", "gpt2": "causal", "t5": "seq2seq"}


def _golden_run(bench: str, name: str) -> tuple[RunRecord, list[Record], dict]:
    """A golden run's records and metrics (finished runs of tiny models), with the config.json its
    views read.
    """
    case = next(c for c in CASES[bench] if c.name == name)
    stored = json.loads(golden_path(bench).read_text(encoding="utf-8"))["runs"][name]
    part = case.config.removeprefix("xfakt_") if bench == "xfakt" else None
    config = {
        "config": case.config,
        "model": {"spec": "tiny", "kind": KINDS[case.arch]},
        "options": case.options,
        "protocol": {"part": part} if part else {},
    }
    return (
        RunRecord.from_json(config),
        [Record.from_json(r) for r in stored["records"]],
        stored["metrics"],
    )


def _figures(config: RunRecord, records, metrics, note: str = "") -> list:
    return [
        figure_of(view, view.title or section.title, note)
        for section in sections_for(config, records, metrics)
        for view in section.figures
    ]


def _chance_lines(figure) -> list:
    return [
        line
        for axes in figure.axes
        for line in axes.lines
        if str(line.get_label()).startswith("chance")
    ]


@pytest.mark.parametrize(
    ("bench", "name", "metric", "shown"),
    [
        ("dlama", "masked", "p1", "chance (54.77%)"),
        ("xfakt", "rank", "error_rate", "chance (92.31%)"),
        ("fmlama", "masked_en", "map_hasParts", "chance (29.23%)"),
        ("maps", "causal_en", "accuracy", "chance (50.00%)"),
    ],
)
def test_each_benchmarks_bars_draw_the_chance_level_the_tables_give(bench, name, metric, shown):
    config, records, metrics = _golden_run(bench, name)
    level = metrics["results"]["chance"][metric]["value"]
    bars = [f for f in _figures(config, records, metrics) if not f.axes[0].get_images()]
    assert bars and all(len(_chance_lines(figure)) == 1 for figure in bars)
    assert all(_chance_lines(figure)[0].get_ydata()[0] == pytest.approx(level) for figure in bars)
    assert all(
        shown in [t.get_text() for t in figure.axes[0].get_legend().get_texts()] for figure in bars
    )


def test_xfakts_language_country_grid_marks_the_chance_error_on_its_colour_bar():
    config, records, metrics = _golden_run("xfakt", "rank")
    [grid] = [f for f in _figures(config, records, metrics) if f.axes[0].get_images()]
    colour_bar = grid.axes[1]
    [line] = colour_bar.lines
    assert line.get_label() == "chance (92.31%)" and line.get_ydata()[0] == pytest.approx(
        92.3076923
    )
    assert "(red on the colour bar: chance (92.31%))" in grid.axes[0].get_title()


@pytest.mark.parametrize(
    ("bench", "name"), [("camel", "masked"), ("dlama", "generate"), ("xfakt", "generate")]
)
def test_a_metric_without_a_chance_level_gets_no_invented_line(bench, name):
    # CAMeL's CBS is read against parity (50), generation has open answers: their results give no
    # chance level
    config, records, metrics = _golden_run(bench, name)
    assert "chance" not in metrics["results"]
    assert not [
        line for figure in _figures(config, records, metrics) for line in _chance_lines(figure)
    ]


def test_the_context_note_says_smoke_and_incomplete():
    subset = {"sampled": 40, "items": 1000, "unit": "facts"}
    assert context_note(subset, None) == "smoke run: 40 of 1,000 facts"
    assert context_note(None, "INCOMPLETE 64/300") == "INCOMPLETE 64/300"
    assert (
        context_note(subset, "INCOMPLETE 3/80") == "INCOMPLETE 3/80; smoke run: 40 of 1,000 facts"
    )
    assert context_note({"sampled": 5}, None) == "smoke run: 5 items"
    assert context_note(None, None) == ""


@pytest.fixture
def drawn(monkeypatch):
    """The figures a report or summary draws, kept instead of saved."""
    figures = []

    def keep(figure, stem):
        figures.append(figure)
        return [stem.with_suffix(".png"), stem.with_suffix(".pdf")]

    monkeypatch.setattr(plots, "save", keep)
    return figures


def test_a_smoke_runs_figures_say_so_inside_the_image(tmp_path, drawn):
    data = write_dlama(tmp_path / "dlama", facts=FACTS)
    result = run(
        "dlama_arab_west",
        TableScorer(knowing().table),
        data_dir=str(data),
        out=tmp_path / "r",
        limit=8,
        progress=False,
    )
    subset = result.config.subset
    expected = f"smoke run: {subset['sampled']} of {subset['items']} facts"
    assert drawn and all(figure.get_suptitle() == expected for figure in drawn)


def test_an_incomplete_runs_figures_say_so_inside_the_image(tmp_path, drawn):
    out = tmp_path / "run"
    run(
        "dlama_arab_west",
        TableScorer(spec_table()),
        data_dir=str(write_dlama(tmp_path / "d")),
        out=out,
        progress=False,
    )
    (out / "metrics.json").unlink()
    lines = (out / "items.jsonl").read_text().splitlines()
    (out / "items.jsonl").write_text("\n".join(lines[:-2]) + "\n")
    drawn.clear()
    assert main(SimpleNamespace(run_dir=str(out))) == 0
    assert drawn and all(
        figure.get_suptitle() == f"INCOMPLETE {len(lines) - 2}/{len(lines)}" for figure in drawn
    )
    assert rundir.progress(rundir.read_run(out)) == f"INCOMPLETE {len(lines) - 2}/{len(lines)}"


def test_a_full_finished_runs_figures_carry_no_note(tmp_path, drawn):
    run(
        "dlama_arab_west",
        TableScorer(spec_table()),
        data_dir=str(write_dlama(tmp_path / "d")),
        out=tmp_path / "r",
        progress=False,
    )
    assert drawn and all(figure.get_suptitle() == "" for figure in drawn)


def test_a_consistency_figure_names_the_run_that_did_not_finish(tmp_path, drawn):
    from culture_probe.report.consistency import consistency_of_runs

    data = write_dlama(tmp_path / "d")
    for language in ("ar", "en"):
        run(
            "dlama_arab_west",
            TableScorer(spec_table()),
            data_dir=str(data),
            out=tmp_path / language,
            language=language,
            progress=False,
        )
    # killed before writing its metrics: a run that did not finish
    (tmp_path / "en" / "metrics.json").unlink()
    result = consistency_of_runs(tmp_path / "ar", tmp_path / "en")
    drawn.clear()
    result.markdown(tmp_path / "out")
    assert drawn and all(
        figure.get_suptitle() == f"en: {result.incomplete['en']}" for figure in drawn
    )


def test_a_suites_figure_marks_each_configs_own_chance_and_its_smoke_or_incomplete_run(
    tmp_path, drawn
):
    # one line would be wrong: each config of a suite has its own candidates, and so its own chance
    # level
    estimate = {
        "value": 30.0,
        "ci_low": 20.0,
        "ci_high": 40.0,
        "n": 40,
        "metric": "p1",
        "scale": "%",
    }
    rows = [
        {
            "config": "dlama_arab_west",
            "benchmark": "dlama",
            **estimate,
            "chance": {"value": 18.3},
            "smoke": True,
        },
        {
            "config": "dlama_asia_west",
            "benchmark": "dlama",
            **estimate,
            "chance": {"value": 3.14},
            "smoke": False,
        }
        | {"status": "INCOMPLETE 64/300"},
    ]
    summary_figures(tmp_path, rows)
    [figure] = drawn
    axes = figure.axes[0]
    [marks] = [c for c in axes.collections if str(c.get_label()).startswith("chance")]
    assert [segment[0][1] for segment in marks.get_segments()] == [18.3, 3.14]
    ticks = [t.get_text() for t in axes.get_xticklabels()]
    assert ticks == [
        "dlama_arab_west\n(n=40)\nsmoke run",
        "dlama_asia_west\n(n=40)\nINCOMPLETE 64/300",
    ]
    assert "chance (each bar's own)" in [t.get_text() for t in axes.get_legend().get_texts()]


@pytest.fixture
def compared(tmp_path):
    data = write_dlama(tmp_path / "dlama", facts=FACTS)
    for name, scorer, limit in (
        ("knows", knowing(), None),
        ("guesses", guessing(), None),
        ("smoke", knowing(), 8),
    ):
        run(
            "dlama_arab_west",
            scorer,
            data_dir=str(data),
            out=tmp_path / name,
            language="en",
            limit=limit,
            progress=False,
        )
    return tmp_path


def test_compares_figure_is_a_forest_of_paired_differences_headline_first(compared):
    comparison = compare_runs([compared / "knows", compared / "guesses"])
    figure = comparison_figure(comparison)
    top = figure.axes[0]
    ticks = [t.get_text() for t in top.get_yticklabels()]
    assert ticks[0].startswith("overall (planned)\n(n=24, p ") and len(ticks) == len(
        forest_rows(comparison)[0][1]
    )
    assert top.get_ylim()[0] > top.get_ylim()[1]  # the first row on top
    assert top.get_yticklabels()[0].get_fontweight() == "bold"  # the planned comparison
    assert "difference in p1 (%)" == top.get_xlabel()
    [zero] = [line for line in top.lines if line.get_label() == "no difference"]
    assert list(zero.get_xdata()) == [0.0, 0.0]
    [points] = [line for line in top.lines if line.get_marker() == "s"]
    assert points.get_xdata()[0] == pytest.approx(-75.0)  # 25% against 100%, as the table says
    assert figure.get_suptitle() == ""


def test_the_headline_metric_leads_the_forest_whatever_order_the_rows_came_in():
    def row(metric, group, planned=False):
        return {
            "run": "b",
            "metric": metric,
            "group": group,
            "difference": 1.0,
            "ci_low": 0.0,
            "ci_high": 2.0,
        } | {
            "n": 12,
            "p_value": 0.04,
            "planned": planned,
        }

    comparison = SimpleNamespace(
        runs=("a", "b"),
        metric="error_rate",
        paired=(
            row("kts", "overall"),
            row("error_rate", "language=en"),
            row("error_rate", "overall", True),
        ),
        scales={"error_rate": "%", "kts": "0-1"},
        headlines=(),
        context=("b: smoke run: 40 of 169 questions",),
    )
    assert [(m, [r["group"] for r in rows]) for m, rows in forest_rows(comparison)] == [
        ("error_rate", ["overall", "language=en"]),
        ("kts", ["overall"]),
    ]
    figure = comparison_figure(comparison)
    assert [a.get_xlabel() for a in figure.axes] == [
        "difference in error_rate (%)",
        "difference in kts (0-1)",
    ]
    assert figure.get_suptitle() == "b: smoke run: 40 of 169 questions"


def test_an_unpaired_compare_draws_the_headlines_side_by_side_and_names_its_smoke_run(compared):
    comparison = compare_runs([compared / "knows", compared / "smoke"], paired=False)
    figure = comparison_figure(comparison)
    [axes] = figure.axes
    assert [t.get_text() for t in axes.get_xticklabels()] == ["knows", "smoke"]
    assert "not paired" in axes.get_title()
    assert figure.get_suptitle().startswith("smoke: smoke run: ")


def test_no_golden_file_stores_an_image():
    # figures may change with matplotlib; the golden runs hold records and metrics only
    assert not [
        p for p in golden_path("dlama").parent.iterdir() if p.suffix in {".png", ".pdf", ".svg"}
    ]


def test_bars_without_a_results_block_draw_as_before():
    figure = figure_of(
        Bars({"a": {"value": 1.0, "ci_low": 0.5, "ci_high": 1.5, "n": 20}}, "x"), "t"
    )
    assert figure.get_suptitle() == "" and not _chance_lines(figure)
