"""Reports: intervals, figures, markdown tables, `report` on a run directory, `compare` of runs."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from dlama_fixture import TableScorer, spec_table, write_dlama  # noqa: E402 - a fixture module of tests/tasks

from culture_probe.errors import CultureProbeError
from culture_probe.record import RunRecord
from culture_probe.report import load_run, main
from culture_probe.report.markdown import reproduce, table_markdown
from culture_probe.report.plots import draw_bars, draw_heatmap, label
from culture_probe.report.views import (
    Bars,
    Heatmap,
    Reference,
    Table,
    language_country_grid,
    result_bars,
)

PNG = b"\x89PNG\r\n\x1a\n"


def _estimate(value, low, high, n):
    return {"value": value, "stderr": 1.0, "ci_low": low, "ci_high": high, "n": n}


def test_figures_are_written_as_png_and_pdf_with_reference_lines(tmp_path):
    bars = Bars(
        {"arab": _estimate(66.7, 30.0, 100.0, 3), "west": _estimate(50.0, 0.0, 100.0, 4)},
        "P@1 (%)",
        (Reference("paper, pair", 30.3), Reference("chance", 5.0)),
    )
    heat = Heatmap(
        ("P17", "P19"),
        ("arab", "west"),
        ((10.0, None), (30.0, 40.0)),
        label="P@1",
        highlight=((1, 1),),
    )
    for png, pdf in (
        draw_bars(bars, tmp_path / "b", "bars"),
        draw_heatmap(heat, tmp_path / "h", "heat"),
    ):
        assert png.read_bytes()[:8] == PNG and pdf.read_bytes()[:5] == b"%PDF-"
    figure_text = (tmp_path / "b.pdf").read_bytes()
    # TrueType text (pdf.fonttype 42)
    assert b"paper, pair" in figure_text or b"FontFile2" in figure_text


def test_arabic_labels_are_shaped_and_right_to_left():
    drawn = label("السعودية")
    # final-form teh marbuta drawn first: joined, visual order
    assert drawn != "السعودية" and drawn[0] == "\ufe94"
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
        metrics,
        "entity_type",
        "cbs",
        "CBS",
        labels=["names", "food"],
        references=(Reference("parity", 50.0),),
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
    assert (
        table_markdown(table)
        == "| metric | value |\n|---|---|\n| a\\|b | 0.25 |\n| n | 3 |\n| none |  |"
    )


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
    ) in reproduce(RunRecord.from_json(config))


def _command(report_text):
    """The argv of the Reproduce section's command, as a shell would split it."""
    import shlex

    block = report_text.split("## Reproduce", 1)[1].split("```")[1]
    return shlex.split(block.strip())


def test_reproduce_round_trips_through_the_cli_parser():
    from culture_probe.cli import build_parser
    from culture_probe.runner.run_command import option_values

    names = {"en": {"People's Republic of China": "China"}}  # a quote inside a JSON option
    config = {
        "config": "fmlama_en",
        "model": {"spec": "runs/my model"},
        "model_args": {"peft": "runs/my adapter", "trust_remote_code": True, "dtype": "float16"},
        "run": {
            "kind": "causal",
            "seed": 3,
            "batch_tokens": None,
            "language": "en",
            "data_dir": None,
            "corrected": False,
        },
        "options": {"country_names": names, "families": ["hasParts", "country"], "vectors": None},
    }
    text = reproduce(RunRecord.from_json(config))
    argv = _command(text)
    assert argv[:2] == ["culture-probe", "run"]
    args = build_parser().parse_args(argv[1:])
    expected = (["fmlama_en"], "runs/my model", "causal", 3, "en")
    assert (args.configs, args.model, args.kind, args.seed, args.language) == expected
    from culture_probe.engine.types import ModelArgs

    # the adapter is in the command
    assert ModelArgs.parse(args.model_args).given() == config["model_args"]
    options = option_values(args.option)
    assert (
        json.loads(options["country_names"]) == names and options["families"] == "hasParts,country"
    )
    assert "Not reproducible" not in text  # everything of this run is in the command


def test_report_says_when_the_command_cannot_reproduce_the_run(tmp_path):
    from culture_probe.data.registry import load_benchmark
    from culture_probe.runner import run

    rows = [
        r
        for r in load_benchmark("dlama_arab_west", data_dir=str(write_dlama(tmp_path / "d")))[
            "test"
        ]
        if r["language"] == "en"
    ][:4]
    result = run(
        "dlama_arab_west",
        TableScorer(spec_table()),
        rows=rows,
        out=tmp_path / "run",
        progress=False,
    )
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["benchmark"]["custom_rows"] is True and config["model"]["loaded_object"] is True
    # the languages the rows hold, not the config's (ar, en)
    assert config["protocol"]["languages"] == ["en"]
    report = (tmp_path / "run" / "report.md").read_text()
    reproduce_section = report.split("## Reproduce", 1)[1]
    assert "**Not reproducible from the command line alone** (see config.json)" in reproduce_section
    assert "the model was a loaded `TableScorer` object" in reproduce_section
    # the custom rows are saved in the run directory, and the command passes them back with --rows
    assert (
        "custom rows (sha256" not in reproduce_section
        and "--rows RUN_DIR/rows.jsonl" in reproduce_section
    )
    saved = [
        json.loads(line) for line in (tmp_path / "run" / "rows.jsonl").read_text().splitlines()
    ]
    assert saved == rows
    assert (
        "- **custom rows**: the 4 rows given to `culture_probe.run(rows=...)` or `--rows` (saved in "
        in report
    )
    assert result.config.to_json() == config
    # rows=, but no run directory
    unsaved = {**config, "benchmark": {**config["benchmark"], "rows_file": None}}
    assert (
        f"run on 4 custom rows (sha256 {config['benchmark']['rows_sha256'][:16]}...)"
        in reproduce(RunRecord.from_json(unsaved))
    )
    # the same run on the benchmark's own data from a named model has nothing to warn about
    named = {
        **config,
        "benchmark": {**config["benchmark"], "custom_rows": False},
        "model": {**config["model"], "spec": "bert-base-cased", "loaded_object": False},
    }
    assert "Not reproducible" not in reproduce(RunRecord.from_json(named))
    comma = {**named, "options": {"families": ["has,Parts"]}}
    assert "option `families` has an item containing a comma" in reproduce(
        RunRecord.from_json(comma)
    )


def _asia_west_config(probed):
    """A config.json of a dlama_asia_west run whose rows held the languages `probed` (None: an older
    run that did not record them).
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

    assert (
        "Note: the release tarball holds both languages; a copy that lacks the Korean labels"
        in _asia_west_config(["en"])["benchmark"]["description"]
    )
    english = header(RunRecord.from_json(_asia_west_config(["en"])))
    assert (
        "- **note**: the release tarball holds both languages; a copy that lacks the Korean labels of asia-west "
        "(asia-west/dlama/ko/) runs in English (--language en)."
    ) in english
    assert english.endswith("(ko not probed in this run)")
    # a full release: both languages probed
    assert "**note**" not in header(RunRecord.from_json(_asia_west_config(["en", "ko"])))
    # no record of the probed languages: the note, as before
    older = header(RunRecord.from_json(_asia_west_config(None)))
    assert (
        "- **note**: the release tarball holds both" in older
        and "not probed in this run" not in older
    )


def test_report_of_a_folder_that_is_not_a_run(tmp_path):
    with pytest.raises(CultureProbeError, match="is not a run directory: it has no config.json"):
        load_run(tmp_path)


def test_report_rebuilds_an_interrupted_run_from_its_items(tmp_path):
    from culture_probe.runner import run

    out = tmp_path / "run"
    data = write_dlama(tmp_path / "dlama")
    result = run(
        "dlama_arab_west", TableScorer(spec_table()), data_dir=str(data), out=out, progress=False
    )
    (out / "metrics.json").unlink()
    (out / "report.md").unlink()
    lines = (out / "items.jsonl").read_text().splitlines()
    # killed before its last two facts
    (out / "items.jsonl").write_text("\n".join(lines[:-2]) + "\n")
    assert main(SimpleNamespace(run_dir=str(out))) == 0
    _, records, metrics = load_run(out)
    # from items.jsonl alone
    assert len(records) == len(lines) - 2 and metrics["n_probes"] == len(lines) - 2
    report = (out / "report.md").read_text()
    assert f"- **INCOMPLETE {len(lines) - 2}/{len(lines)}**: the run did not finish" in report
    assert result.config.planned == {"stage": "main", "probes": len(lines)}


def test_headline_lists_the_results_with_intervals_and_what_was_left_out():
    from culture_probe.report import headline

    results = {
        "unit": "facts",
        "overall": {"p1": _estimate(30.25, 20.0, 40.5, 80)},
        "omitted": {"culture_gap": "needs facts of both cultures"},
    }
    text = headline(
        RunRecord.from_json(
            {"config": "dlama_arab_west", "model": {"spec": "mbert", "kind": "masked"}}
        ),
        {"p1_en": 30.25, "results": results},
    )
    assert text.splitlines() == [
        "dlama_arab_west on mbert (masked)",
        "  p1 (%): 30.25 [20.00, 40.50] (n=80 facts)",
        "  culture_gap: not reported (needs facts of both cultures)",
    ]


def test_dlama_bars_carry_the_papers_table_1_values_only_for_a_faithful_repeat():
    from culture_probe.benchmarks.dlama.report import paper_references

    config = {
        "config": "dlama_arab_west",
        "model": {"spec": "bert-base-multilingual-cased"},
        "benchmark": {},
    }
    assert [(r.label, r.value) for r in paper_references(RunRecord.from_json(config), "en")] == [
        ("paper, non-West", 21.2),
        ("paper, West", 37.7),
        ("paper, pair", 30.3),
    ]
    smoke = RunRecord.from_json({**config, "subset": {"sampled": 5}})
    assert paper_references(smoke, "en") == ()  # a smoke run is not Table 1
    assert (
        paper_references(RunRecord.from_json({**config, "model": {"spec": "my/model"}}), "en") == ()
    )


def test_camel_maps_and_xfakt_figures_carry_the_papers_values_for_a_faithful_repeat():
    from culture_probe.benchmarks.camel import report as camel
    from culture_probe.benchmarks.maps import report as maps
    from culture_probe.benchmarks.xfakt import report as xfakt

    def config(name, model, **extra):
        return RunRecord.from_json(
            {"config": name, "model": {"spec": model}, "benchmark": {}, "run": {}, **extra}
        )

    assert [
        (r.label, r.value) for r in camel.references(config("camel_co_prompts", "UBC-NLP/ARBERT"))
    ] == [
        ("parity", 50.0),
        ("paper, Avg", 46.40),
    ]
    assert [r.label for r in camel.references(config("camel_ag_prompts", "my/model"))] == ["parity"]
    assert [
        (r.label, r.value) for r in maps.references(config("maps_de", "bigscience/mt0-xxl"))
    ] == [
        ("chance", 50.0),
        ("paper, literal", 88.74),
        ("paper, figurative", 83.61),
    ]
    negative = config("maps_de", "bigscience/mt0-xxl", options={"question": "neg"})
    # Table 4 asks the positive question
    assert [r.label for r in maps.references(negative)] == ["chance"]
    corrected = config("maps_de", "bigscience/mt0-xxl", run={"corrected": True})
    # the paper ran the released data
    assert [r.label for r in maps.references(corrected)] == ["chance"]
    assert [
        (r.label, r.value)
        for r in xfakt.references(
            config("xfakt_factual_recall", "microsoft/phi-4"), "factual_recall"
        )
    ] == [("paper, associated", 12.87), ("paper, non-associated", 30.15)]


def _results(estimate, **extra):
    ci = {
        "method": "Wilson score interval",
        "confidence": 0.95,
        "methods": {"p1": "Wilson score interval"},
    }
    return {
        "headline": "p1",
        "unit": "facts",
        "ci": ci,
        "overall": {"p1": estimate},
        "omitted": {},
        **extra,
    }


def test_the_terminal_report_md_and_suite_md_print_a_number_alike():
    # the terminal printed 3.015 (4 significant digits) where report.md rounded to 2 decimals
    from culture_probe.report import headline
    from culture_probe.report.markdown import table_markdown
    from culture_probe.report.summary import summary_markdown
    from culture_probe.report.views import results_sections

    # 3.015 and 1.005 as floats hold them
    estimate = _estimate(3.0149999999999997, 1.0049999999999999, 5.5, 400)
    metrics = {"results": _results(estimate)}
    config = RunRecord.from_json(
        {"config": "dlama_arab_west", "model": {"spec": "m", "kind": "masked"}}
    )
    assert headline(config, metrics).splitlines()[1] == "  p1 (%): 3.02 [1.01, 5.50] (n=400 facts)"
    [section] = results_sections(metrics, {"p1": "%"})
    assert "| p1 (%) | 3.02 | [1.01, 5.50] | 400 |" in table_markdown(section.tables[0])
    row = {
        "config": "dlama_arab_west",
        "metric": "p1",
        "scale": "%",
        **estimate,
        "unit": "facts",
        "smoke": False,
    }
    suite = summary_markdown({"model": "m", "configs": [{**row, "omitted": {}}], "studies": {}})
    assert "| dlama_arab_west | p1 (%) | 3.02 | [1.01, 5.50] | 400 | facts |" in suite


def test_headline_numbers_print_the_chance_level_and_why_an_interval_is_missing():
    from culture_probe.report.markdown import table_markdown
    from culture_probe.report.views import results_sections

    lone = {
        "value": 100.0,
        "stderr": None,
        "ci_low": None,
        "ci_high": None,
        "n": 1,
        "no_interval": "one unit",
    }
    chance = {"p1": {"value": 18.333333, "method": "random ranking of each probe's candidates"}}
    [section] = results_sections({"results": _results(lone, chance=chance)}, {"p1": "%"})
    table = table_markdown(section.tables[0])
    assert (
        table.splitlines()[0]
        == "| metric (unit) | value | 95% interval | n (facts) | chance level |"
    )
    assert table.splitlines()[2] == "| p1 (%) | 100.00 † | no interval: one unit | 1 | 18.33 |"
    assert (
        "Chance level of p1 (last column): random ranking of each probe's candidates."
        in section.text
    )
    assert "p1: Wilson score interval" in section.text  # each metric's interval method


def _xfakt_config(**options):
    return {
        "config": "xfakt_factual_recall",
        "model": {"spec": "m", "kind": "causal", "identity": None},
        "benchmark": {"title": "X-FaKT", "version": "1", "rows": 169},
        "versions": {"culture_probe": "0"},
        "run": {},
        "protocol": {
            "part": "factual_recall",
            "mode": options.get("mode", "generate"),
            "judge": "Qwen/Qwen2.5-72B",
        },
        "options": {
            "mode": "generate",
            "rank_prompt": "chat",
            "judge": "llm",
            "judge_model": "Qwen/Qwen2.5-72B",
            "max_new_tokens": 128,
            "judge_max_new_tokens": 256,
            "round_cells": True,
            "double_bos": False,
            "strip_echo": False,
            **options,
        },
        "deviations": [],
    }


def _xfakt_metrics():
    error = {"value": 40.0, "stderr": 5.0, "ci_low": 30.0, "ci_high": 50.0, "n": 13}
    return {
        "error_rate": 40.0,
        "frs": 0.17834,
        "kts": 0.5,
        "xfakt": 0.25,
        "mu_assoc": 0.3,
        "mu_non": 0.45,
        "n_items": 169,
        "error_by_language": {"en": 40.0},
        "results": {
            "unit": "questions",
            "overall": {"error_rate": error},
            "by_language": {"en": {"error_rate": error}},
        },
    }


def test_a_ranking_run_never_mentions_a_judge(tmp_path):
    # X-FaKT in rank mode said "as graded by the judge" and listed a judge that never ran
    from culture_probe.report.markdown import render
    from culture_probe.report.views import sections_for

    def report(document):
        config = RunRecord.from_json(document)
        metrics = _xfakt_metrics() | {"kts": None, "xfakt_unavailable": "a smoke run"}
        return render(sections_for(config, [], metrics), config, tmp_path)

    ranked = report(_xfakt_config(mode="rank"))
    assert "judge" not in ranked.lower() and "max_new_tokens" not in ranked
    assert "Error rates of the top-ranked answers" in ranked
    assert (
        "`mode=rank`, `rank_prompt=chat`" in ranked
        and "6 of other modes or model kinds left out" in ranked
    )
    generated = report(_xfakt_config())
    assert (
        "as graded by the judge (Qwen/Qwen2.5-72B)" in generated
        and "--option judge_model=" in generated
    )
    assert "rank_prompt" not in generated  # an option of ranking only
    string = report(_xfakt_config(judge="string"))
    assert "judge_model" not in string and "`judge=string`" in string


def test_the_xfakt_headline_table_names_each_numbers_unit():
    # error rate in % beside 0-1 scores, with no unit said
    from culture_probe.benchmarks.xfakt.report import sections

    head = sections(RunRecord.from_json(_xfakt_config()), [], _xfakt_metrics())[0].tables[0]
    assert head.columns == ("metric", "value", "unit")
    rows = {name: (value, unit) for name, value, unit in head.rows}
    assert rows["frs"] == ("0.178", "0-1 score") and rows["error_rate"] == (
        "40.00",
        "% of wrong answers",
    )
    assert rows["mu_assoc"] == ("0.300", "0-1 share of wrong answers") and rows["n_items"] == (
        "169",
        "questions",
    )


def test_maps_rounds_as_metrics_json_and_shows_the_n_of_every_rate():
    # MAPS printed 43.58 for metrics.json's 43.5897, and "memorised 100.00" from one proverb
    from culture_probe.benchmarks.maps.report import sections

    accuracy = {"value": 43.58974358974359, "stderr": 1.0, "ci_low": 30.0, "ci_high": 58.0, "n": 39}
    metrics = {
        "results": {"overall": {"accuracy": accuracy}, "by_figurative": {}},
        "memorisation": {
            "union": 2.564,
            "per_template": [2.564] * 5,
            "mean_per_template": 2.564,
            "n": 39,
        },
        "subsets": {
            "memorised": {"accuracy": 100.0, "n": 1},
            "not_memorised": {"accuracy": 42.1, "n": 38},
        },
    }
    config = RunRecord.from_json({"config": "maps_en", "model": {"spec": "m"}, "options": {}})
    reasoning, memorisation = sections(config, [{"tag": "mem0", "language": "en"}], metrics)
    assert reasoning.tables[0].rows[0] == ("all", "43.59", "[30.00, 58.00]", 39)
    assert "memorised 100.00 (n=1) †, not_memorised 42.10 (n=38)" in memorisation.text
    assert memorisation.tables[0].rows[0] == ("union over templates", "2.56 (n=39)")


def test_dlama_per_predicate_cells_show_their_facts_and_mark_few(tmp_path):
    from culture_probe.report.views import Heatmap, sections_for
    from culture_probe.runner import run

    data = write_dlama(tmp_path / "d")
    result = run(
        "dlama_arab_west",
        TableScorer(spec_table()),
        data_dir=str(data),
        language="en",
        out=tmp_path / "r",
        progress=False,
    )
    report = (tmp_path / "r" / "report.md").read_text()
    per_predicate = report.split("## P@1 per predicate (en prompts)")[1].split("##")[0]
    # 2 of 3 Arab facts, 1 of 2 Western
    assert "| P30 | 66.67 (n=3) † | 50.00 (n=2) † |" in per_predicate
    assert "† fewer than 10 units" in per_predicate
    assert "| arab | 66.67 † |" in report  # the per-culture table marks it too
    assert "max_new_tokens" not in report  # a ranking run: the generation options did not act on it
    sections = sections_for(result.config, result.records, result.metrics)
    heatmaps = [f for s in sections for f in s.figures if isinstance(f, Heatmap)]
    assert heatmaps[0].counts == ((3, 2),) and heatmaps[0].scale == "%"


def test_a_figure_that_fails_costs_that_figure_only(tmp_path, monkeypatch):
    import culture_probe.report.markdown as markdown
    from culture_probe.report.views import Bars, Section

    def broken(figure, stem, title, note):
        raise ValueError("'yerr' must not contain negative values")

    monkeypatch.setattr(markdown, "draw", broken)
    config = {
        "config": "dlama_arab_west",
        "model": {"spec": "m", "kind": "masked", "identity": None},
        "benchmark": {"title": "DLAMA", "version": "1", "rows": 2},
        "versions": {"culture_probe": "0"},
        "run": {},
        "options": {},
    }
    section = Section(
        "P@1 per culture",
        tables=(Table(("culture", "P@1 (%)"), (("arab", "50.00"),)),),
        figures=(Bars({"arab": _estimate(50.0, 40.0, 60.0, 20)}, "P@1 (%)"),),
    )
    with pytest.warns(
        UserWarning,
        match="Figure 'P@1 per culture' could not be drawn .*yerr.*the rest of the report",
    ):
        text = markdown.render([section], RunRecord.from_json(config), tmp_path)
    assert "| arab | 50.00 |" in text and "## Reproduce" in text
    assert "*Figure 'P@1 per culture' could not be drawn (ValueError:" in text


def test_a_view_that_fails_leaves_the_run_and_its_headline_numbers(tmp_path, monkeypatch):
    import culture_probe.benchmarks.dlama.report as views
    from culture_probe.runner import run

    monkeypatch.setattr(views, "sections", lambda *a: 1 / 0)
    with pytest.warns(
        UserWarning, match="dlama_arab_west: the benchmark's report views failed .ZeroDivisionError"
    ):
        run(
            "dlama_arab_west",
            TableScorer(spec_table()),
            data_dir=str(write_dlama(tmp_path / "d")),
            language="en",
            out=tmp_path / "r",
            progress=False,
        )
    assert (tmp_path / "r" / "metrics.json").is_file()
    report = (tmp_path / "r" / "report.md").read_text()
    assert "## Headline numbers" in report and "## Views not written" in report


def test_an_xfakt_run_at_chance_shows_what_random_answers_score_and_warns(tmp_path):
    # KTS 0.72 and 0.98 from two random models, printed with no reference point: the report gives
    # the range random answers score on the run's own cells beside KTS, and one sentence saying KTS
    # says nothing about transfer
    import random

    from culture_probe.benchmarks.xfakt.task import ASSOCIATIONS, XfaktTask
    from culture_probe.report import headline
    from culture_probe.report.markdown import render
    from culture_probe.report.views import sections_for
    from culture_probe.tasks.probes import Record

    rng = random.Random(0)
    records = [
        Record(
            f"{language}-{country}-{i}",
            "",
            "answer",
            {
                "language": language,
                "country": country,
                "correct": (right := rng.random() < 1 / 13),
                "verdict": "same_language" if right else "incorrect",
                "scores": dict.fromkeys(ASSOCIATIONS.values(), 0.0),
            },
            kind="score",
        )
        for language in ASSOCIATIONS
        for country in ASSOCIATIONS.values()
        for i in range(2)
    ]
    task = XfaktTask("xfakt_factual_recall", XfaktTask.Options(mode="rank"), kind="causal")
    metrics = task.compute_metrics(records)
    config = RunRecord.from_json(_xfakt_config(mode="rank"))
    report = render(sections_for(config, records, metrics), config, tmp_path)
    kts = metrics["results"]["overall"]["kts"]
    [row] = [line for line in report.splitlines() if line.startswith("| kts (0-1) |")]
    # the chance level with the range random models fall in
    assert row.endswith("| 338 | 0.919 [0.783, 1.000] |")
    assert (
        "Chance level of frs, kts, xfakt (last column): exact distribution of the score" in report
    )
    assert (
        "\n\n**Warning (kts).** KTS says nothing about transfer here: the error rates cannot be told from"
        in report
    )
    assert (
        f"KTS {kts['value']:.3f} (1 = the same knowledge in every language; random answers score 0.919 [0.783, "
        in (report)
    )
    terminal = headline(config, metrics)
    assert "kts (0-1): " in terminal and "chance 0.919 [0.783, 1.000])" in terminal
    assert "  kts: warning: KTS says nothing about transfer here" in terminal
