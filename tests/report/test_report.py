"""Reports: bootstrap intervals, figures, markdown tables, `report` on a run directory, `compare` of runs."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from culture_probe.errors import CultureProbeError
from culture_probe.report import load_run, main
from culture_probe.report.markdown import reproduce, table_markdown
from culture_probe.report.plots import draw_bars, draw_heatmap, label
from culture_probe.report.views import Bars, Heatmap, Reference, Table, language_country_grid, result_bars

PNG = b"\x89PNG\r\n\x1a\n"


def _estimate(value, low, high, n):
    return {"value": value, "stderr": 1.0, "ci_low": low, "ci_high": high, "n": n}


def test_figures_are_written_as_png_and_pdf_with_reference_lines(tmp_path):
    bars = Bars(
        {"arab": _estimate(66.7, 30.0, 100.0, 3), "west": _estimate(50.0, 0.0, 100.0, 4)},
        "P@1 (%)",
        (Reference("paper, pair", 30.3), Reference("chance", 5.0)),
    )
    heat = Heatmap(("P17", "P19"), ("arab", "west"), ((10.0, None), (30.0, 40.0)), label="P@1", highlight=((1, 1),))
    for png, pdf in (draw_bars(bars, tmp_path / "b", "bars"), draw_heatmap(heat, tmp_path / "h", "heat")):
        assert png.read_bytes()[:8] == PNG and pdf.read_bytes()[:5] == b"%PDF-"
    figure_text = (tmp_path / "b.pdf").read_bytes()
    assert b"paper, pair" in figure_text or b"FontFile2" in figure_text  # TrueType text (pdf.fonttype 42)


def test_arabic_labels_are_shaped_and_right_to_left():
    drawn = label("السعودية")
    assert drawn != "السعودية" and drawn[0] == "\ufe94"  # final-form teh marbuta drawn first: joined, visual order
    assert label("P17") == "P17"


def test_a_script_no_installed_font_draws_is_reported_once():
    import culture_probe.report.plots as plots

    plots._warn_missing_font.cache_clear()
    if all(plots._drawable(c) for c in "한국"):
        pytest.skip("a Hangul font is installed here")
    with pytest.warns(UserWarning, match="No installed font draws HANGUL letters.*fonts-noto-cjk"):
        label("한국")


def test_result_bars_take_the_estimates_of_the_results_block():
    metrics = {
        "results": {
            "by_entity_type": {
                "food": {"cbs": _estimate(40.0, 30.0, 50.0, 5)},
                "names": {"cbs": _estimate(60.0, 55.0, 70.0, 5)},
            }
        }
    }
    bars = result_bars(
        metrics, "entity_type", "cbs", "CBS", labels=["names", "food"], references=(Reference("parity", 50.0),)
    )
    assert list(bars.estimates) == ["names", "food"] and bars.estimates["food"]["ci_high"] == 50.0
    assert bars.references == (Reference("parity", 50.0),)


def test_language_country_grid_outlines_each_languages_own_country():
    cells = {("en", "United States"): 0.1, ("en", "Japan"): 0.5, ("ja", "Japan"): 0.2}
    grid = language_country_grid(
        cells,
        languages=["en", "ja"],
        countries=["United States", "Japan"],
        associations={"en": "United States", "ja": "Japan", "fr": "France"},
    )
    assert grid.values == ((0.1, 0.5), (None, 0.2))
    assert grid.highlight == ((0, 0), (1, 1))


def test_markdown_tables_escape_cells():
    table = Table(("metric", "value"), (("a|b", 0.25), ("n", 3), ("none", None)))
    assert table_markdown(table) == "| metric | value |\n|---|---|\n| a\\|b | 0.25 |\n| n | 3 |\n| none |  |"


def test_markdown_tables_round_floats_half_up_with_format_score():
    # 1.005 and 2.675 are 1.00499... and 2.67499... in binary: "%.2f" would print 1.00 and 2.67
    rows = ((1.005,), (2.675,), (0.00005,), (0.5,), (float("nan"),))
    cells = table_markdown(Table(("value",), rows)).splitlines()[2:]
    assert cells == ["| 1.01 |", "| 2.68 |", "| 0.0001 |", "| 0.5 |", "| nan |"]


def test_reproduce_shows_the_command_that_repeats_the_run():
    config = {
        "config": "fmlama_en",
        "model": {"spec": "bert-base-cased"},
        "run": {"language": None, "limit": 5, "seed": 0, "data_dir": None, "corrected": True},
        "options": {"families": ["hasParts"], "with_x": False},
    }
    assert (
        "culture-probe run fmlama_en --model bert-base-cased --limit 5 --corrected "
        "--option families=hasParts --option with_x=false"
    ) in reproduce(config)


def _command(report_text):
    """The argv of the Reproduce section's command, as a shell would split it."""
    import shlex

    block = report_text.split("## Reproduce", 1)[1].split("```")[1]
    return shlex.split(block.strip())


def test_reproduce_round_trips_through_the_cli_parser():
    from culture_probe.cli import build_parser
    from culture_probe.suite import _split_option

    names = {"en": {"People's Republic of China": "China"}}  # a quote inside a JSON option
    config = {
        "config": "fmlama_en",
        "model": {"spec": "runs/my model"},
        "model_args": {"peft": "runs/my adapter", "trust_remote_code": True},
        "run": {
            "kind": "causal",
            "dtype": "float16",
            "seed": 3,
            "batch_tokens": None,
            "language": "en",
            "data_dir": None,
            "corrected": False,
        },
        "options": {"country_names": names, "families": ["hasParts", "country"], "vectors": None},
    }
    text = reproduce(config)
    argv = _command(text)
    assert argv[:2] == ["culture-probe", "run"]
    args = build_parser().parse_args(argv[1:])
    assert (args.configs, args.model, args.kind, args.dtype, args.seed, args.language) == (
        ["fmlama_en"],
        "runs/my model",
        "causal",
        "float16",
        3,
        "en",
    )
    from culture_probe.engine.types import ModelArgs

    assert ModelArgs.parse(args.model_args).given() == config["model_args"]  # the adapter is in the command
    options = dict(map(_split_option, args.option))
    assert json.loads(options["country_names"]) == names and options["families"] == "hasParts,country"
    assert "Not reproducible" not in text  # everything of this run is in the command


def test_report_says_when_the_command_cannot_reproduce_the_run(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tasks"))
    from dlama_fixture import TableScorer, spec_table, write_dlama

    from culture_probe.data.registry import load_benchmark
    from culture_probe.runner import run

    rows = [
        r
        for r in load_benchmark("dlama_arab_west", data_dir=str(write_dlama(tmp_path / "d")))["test"]
        if r["language"] == "en"
    ][:4]
    result = run("dlama_arab_west", TableScorer(spec_table()), rows=rows, out=tmp_path / "run", progress=False)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["benchmark"]["custom_rows"] is True and config["model"]["loaded_object"] is True
    assert config["protocol"]["languages"] == ["en"]  # the languages the rows hold, not the config's (ar, en)
    report = (tmp_path / "run" / "report.md").read_text()
    reproduce_section = report.split("## Reproduce", 1)[1]
    assert "**Not reproducible from the command line alone** (see config.json)" in reproduce_section
    assert "the model was a loaded `TableScorer` object" in reproduce_section
    # the custom rows are saved in the run directory, and the command passes them back with --rows
    assert "custom rows (sha256" not in reproduce_section and "--rows RUN_DIR/rows.jsonl" in reproduce_section
    saved = [json.loads(line) for line in (tmp_path / "run" / "rows.jsonl").read_text().splitlines()]
    assert saved == rows
    assert "- **custom rows**: the 4 rows given to `culture_probe.run(rows=...)` or `--rows` (saved in " in report
    assert result.config == config
    unsaved = {**config, "benchmark": {**config["benchmark"], "rows_file": None}}  # rows=, but no run directory
    assert f"run on 4 custom rows (sha256 {config['benchmark']['rows_sha256'][:16]}...)" in reproduce(unsaved)
    # the same run on the benchmark's own data from a named model has nothing to warn about
    named = {
        **config,
        "benchmark": {**config["benchmark"], "custom_rows": False},
        "model": {**config["model"], "spec": "bert-base-cased", "loaded_object": False},
    }
    assert "Not reproducible" not in reproduce(named)
    comma = {**named, "options": {"families": ["has,Parts"]}}
    assert "option `families` has an item containing a comma" in reproduce(comma)


def _asia_west_config(probed):
    """A config.json of a dlama_asia_west run whose rows held the languages `probed` (None: an older run that did
    not record them).
    """
    from culture_probe.data.registry import list_benchmarks

    entry = next(e for e in list_benchmarks() if e.name == "dlama_asia_west")
    protocol = {"candidate_sets": {}} if probed is None else {"languages": probed}
    return {
        "config": "dlama_asia_west",
        "model": {"spec": "mbert", "kind": "masked", "identity": None},
        "benchmark": {
            "title": "DLAMA-v1",
            "version": "1.0.0",
            "rows": 10,
            "description": entry.description,
            "languages": list(entry.languages),
        },
        "versions": {"culture_probe": "0"},
        "run": {"language": None},
        "protocol": protocol,
    }


def test_the_missing_korean_note_is_printed_only_when_korean_was_not_probed():
    from culture_probe.report.markdown import header

    assert "Note: the copy of the release in the shared mirror" in _asia_west_config(["en"])["benchmark"]["description"]
    english = header(_asia_west_config(["en"]))
    assert (
        "- **note**: the copy of the release in the shared mirror (manual/dlama/dlama-v1) has no Korean labels "
        "of asia-west"
    ) in english
    assert english.endswith("(ko not probed in this run)")
    assert "**note**" not in header(_asia_west_config(["en", "ko"]))  # a full release: both languages probed
    older = header(_asia_west_config(None))  # no record of the probed languages: the note, as before
    assert "- **note**: the copy of the release" in older and "not probed in this run" not in older


def test_report_of_a_folder_that_is_not_a_run(tmp_path):
    with pytest.raises(CultureProbeError, match="is not a run directory: it has no config.json"):
        load_run(tmp_path)


def test_report_rebuilds_an_interrupted_run_from_its_items(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tasks"))
    from dlama_fixture import TableScorer, spec_table, write_dlama

    from culture_probe.runner import run

    out = tmp_path / "run"
    data = write_dlama(tmp_path / "dlama")
    result = run("dlama_arab_west", TableScorer(spec_table()), data_dir=str(data), out=out, progress=False)
    (out / "metrics.json").unlink()
    (out / "report.md").unlink()
    lines = (out / "items.jsonl").read_text().splitlines()
    (out / "items.jsonl").write_text("\n".join(lines[:-2]) + "\n")  # killed before its last two facts
    assert main(SimpleNamespace(run_dir=str(out))) == 0
    _, records, metrics = load_run(out)
    assert len(records) == len(lines) - 2 and metrics["n_probes"] == len(lines) - 2  # from items.jsonl alone
    report = (out / "report.md").read_text()
    assert f"- **INCOMPLETE {len(lines) - 2}/{len(lines)}**: the run did not finish" in report
    assert result.config["planned"] == {"stage": "main", "probes": len(lines)}


def test_headline_lists_the_results_with_intervals_and_what_was_left_out():
    from culture_probe.report import headline

    results = {
        "unit": "facts",
        "overall": {"p1": _estimate(30.25, 20.0, 40.5, 80)},
        "omitted": {"culture_gap": "needs facts of both cultures"},
    }
    text = headline(
        {"config": "dlama_arab_west", "model": {"spec": "mbert", "kind": "masked"}},
        {"p1_en": 30.25, "results": results},
    )
    assert text.splitlines() == [
        "dlama_arab_west on mbert (masked)",
        "  p1: 30.25 [20, 40.5] (n=80 facts)",
        "  culture_gap: not reported (needs facts of both cultures)",
    ]


def test_dlama_bars_carry_the_papers_table_1_values_only_for_a_faithful_repeat():
    from culture_probe.report.dlama import paper_references

    config = {"config": "dlama_arab_west", "model": {"spec": "bert-base-multilingual-cased"}, "benchmark": {}}
    assert [(r.label, r.value) for r in paper_references(config, "en")] == [
        ("paper, non-West", 21.2),
        ("paper, West", 37.7),
        ("paper, pair", 30.3),
    ]
    assert paper_references({**config, "subset": {"sampled": 5}}, "en") == ()  # a smoke run is not Table 1
    assert paper_references({**config, "model": {"spec": "my/model"}}, "en") == ()


def test_camel_maps_and_xfakt_figures_carry_the_papers_values_for_a_faithful_repeat():
    from culture_probe.report import camel, maps, xfakt

    def config(name, model, **extra):
        return {"config": name, "model": {"spec": model}, "benchmark": {}, "run": {}, **extra}

    assert [(r.label, r.value) for r in camel.references(config("camel_co_prompts", "UBC-NLP/ARBERT"))] == [
        ("parity", 50.0),
        ("paper, Avg", 46.40),
    ]
    assert [r.label for r in camel.references(config("camel_ag_prompts", "my/model"))] == ["parity"]
    assert [(r.label, r.value) for r in maps.references(config("maps_de", "bigscience/mt0-xxl"))] == [
        ("chance", 50.0),
        ("paper, literal", 88.74),
        ("paper, figurative", 83.61),
    ]
    negative = config("maps_de", "bigscience/mt0-xxl", options={"question": "neg"})
    assert [r.label for r in maps.references(negative)] == ["chance"]  # Table 4 asks the positive question
    corrected = config("maps_de", "bigscience/mt0-xxl", run={"corrected": True})
    assert [r.label for r in maps.references(corrected)] == ["chance"]  # the paper ran the released data
    assert [
        (r.label, r.value)
        for r in xfakt.references(config("xfakt_factual_recall", "microsoft/phi-4"), "factual_recall")
    ] == [("paper, associated", 12.87), ("paper, non-associated", 30.15)]
