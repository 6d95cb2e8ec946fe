"""Reports: bootstrap intervals, figures, markdown tables, `report` on a run directory, `compare` of runs."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from culture_probe.errors import CultureProbeError, MetricInputError
from culture_probe.metrics import mean_interval
from culture_probe.report import compare_main, compare_runs, load_run, main
from culture_probe.report.markdown import reproduce, table_markdown
from culture_probe.report.plots import draw_bars, draw_heatmap
from culture_probe.report.views import Bars, Heatmap, Table, language_country_grid

PNG = b"\x89PNG\r\n\x1a\n"


def test_mean_interval_matches_scipy_percentile_bootstrap():
    from scipy.stats import bootstrap

    values = np.random.default_rng(1).normal(50, 10, size=300)
    low, high = mean_interval(values, n_resamples=4000)
    reference = bootstrap((values,), np.mean, n_resamples=4000, method="percentile", random_state=2)
    assert low == pytest.approx(reference.confidence_interval.low, abs=0.25)
    assert high == pytest.approx(reference.confidence_interval.high, abs=0.25)
    assert low < values.mean() < high


def test_mean_interval_edge_cases():
    assert mean_interval([1.0, 1.0, 1.0]) == (1.0, 1.0)
    assert mean_interval([0, 1] * 50) == mean_interval([0, 1] * 50)  # seeded: reports reproduce
    with pytest.raises(MetricInputError, match="at least one value"):
        mean_interval([])


def test_figures_are_written_as_png(tmp_path):
    bars = Bars({"arab": [1, 0, 1], "west": [0, 0, 1, 1]}, ylabel="P@1 (%)", scale=100)
    heat = Heatmap(("P17", "P19"), ("arab", "west"), ((10.0, None), (30.0, 40.0)), label="P@1", highlight=((1, 1),))
    for path in (draw_bars(bars, tmp_path / "b.png", "bars"), draw_heatmap(heat, tmp_path / "h.png", "heat")):
        assert path.read_bytes()[:8] == PNG


def test_language_country_grid_outlines_each_languages_own_country():
    cells = {("en", "United States"): 0.1, ("en", "Japan"): 0.5, ("ja", "Japan"): 0.2}
    grid = language_country_grid(cells, languages=["en", "ja"], countries=["United States", "Japan"],
                                 associations={"en": "United States", "ja": "Japan", "fr": "France"})
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
    config = {"config": "fmlama_en", "model": {"spec": "bert-base-cased"},
              "run": {"language": None, "limit": 5, "seed": 0, "data_dir": None, "corrected": True},
              "options": {"families": ["hasParts"], "with_x": False}}
    assert ("culture-probe run fmlama_en --model bert-base-cased --limit 5 --corrected "
            "--option families=hasParts --option with_x=false") in reproduce(config)


def _command(report_text):
    """The argv of the Reproduce section's command, as a shell would split it."""
    import shlex

    block = report_text.split("## Reproduce", 1)[1].split("```")[1]
    return shlex.split(block.strip())


def test_reproduce_round_trips_through_the_cli_parser():
    from culture_probe.cli import build_parser
    from culture_probe.runner import _split_option

    names = {"en": {"People's Republic of China": "China"}}  # a quote inside a JSON option
    config = {"config": "fmlama_en", "model": {"spec": "runs/my model"},
              "run": {"kind": "causal", "dtype": "float16", "seed": 3, "batch_tokens": None, "language": "en",
                      "data_dir": None, "corrected": False},
              "options": {"country_names": names, "families": ["hasParts", "country"], "vectors": None}}
    text = reproduce(config)
    argv = _command(text)
    assert argv[:2] == ["culture-probe", "run"]
    args = build_parser().parse_args(argv[1:])
    assert (args.config, args.model, args.kind, args.dtype, args.seed, args.language) == (
        "fmlama_en", "runs/my model", "causal", "float16", 3, "en")
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

    rows = [r for r in load_benchmark("dlama_arab_west", data_dir=str(write_dlama(tmp_path / "d")))["test"]
            if r["language"] == "en"][:4]
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
    named = {**config, "benchmark": {**config["benchmark"], "custom_rows": False},
             "model": {**config["model"], "spec": "bert-base-cased", "loaded_object": False}}
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
    return {"config": "dlama_asia_west", "model": {"spec": "mbert", "kind": "masked", "identity": None},
            "benchmark": {"title": "DLAMA-v1", "version": "1.0.0", "rows": 10, "description": entry.description,
                          "languages": list(entry.languages)},
            "versions": {"culture_probe": "0"}, "run": {"language": None}, "protocol": protocol}


def test_the_missing_korean_note_is_printed_only_when_korean_was_not_probed():
    from culture_probe.report.markdown import header

    assert "Note: the copy of the release in the shared mirror" in _asia_west_config(["en"])["benchmark"]["description"]
    english = header(_asia_west_config(["en"]))
    assert ("- **note**: the copy of the release in the shared mirror (manual/dlama/dlama-v1) has no Korean labels "
            "of asia-west") in english
    assert english.endswith("(ko not probed in this run)")
    assert "**note**" not in header(_asia_west_config(["en", "ko"]))  # a full release: both languages probed
    older = header(_asia_west_config(None))  # no record of the probed languages: the note, as before
    assert "- **note**: the copy of the release" in older and "not probed in this run" not in older


def _fake_run(path, model, metrics, config="dlama_arab_west"):
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"config": config, "model": {"spec": model, "kind": "masked"}}))
    (path / "metrics.json").write_text(json.dumps(metrics))
    return path


def test_compare_puts_runs_side_by_side(tmp_path, capsys):
    a = _fake_run(tmp_path / "a", "mbert", {"p1_en": 30.3, "en": {"cultures": {"arab": 21.2}}, "note": "x"})
    b = _fake_run(tmp_path / "b", "xlmr", {"p1_en": 25.0, "en": {"cultures": {"arab": 20.0, "west": 30.0}}})
    table = compare_runs([a, b])
    assert table.splitlines()[:4] == ["| metric | a | b |", "|---|---|---|", "| model | mbert | xlmr |",
                                      "| config | dlama_arab_west | dlama_arab_west |"]
    assert "| p1_en | 30.30 | 25.00 |" in table
    assert "| en.cultures.west |  | 30.00 |" in table  # a metric one run lacks stays blank
    assert "note" not in table and "different configs" not in table
    c = _fake_run(tmp_path / "c", "gpt2", {"map_hasParts": 7.0}, config="fmlama_en")
    assert "different configs" in compare_runs([a, c])
    assert compare_main(SimpleNamespace(run_dirs=[str(a), str(b)], out=str(tmp_path / "t.md"))) == 0
    assert (tmp_path / "t.md").read_text().startswith("| metric | a | b |")


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
    assert main(SimpleNamespace(run_dir=str(out))) == 0
    _, _, metrics = load_run(out)
    assert metrics == result.metrics  # recomputed from items.jsonl alone
    assert "| arab | 66.7 | 3 |" in (out / "report.md").read_text()


def test_headline_lists_top_level_numbers_only():
    from culture_probe.report import headline

    text = headline({"config": "dlama_arab_west", "model": {"spec": "mbert", "kind": "masked"}},
                    {"p1_en": 30.25, "n_facts": 5, "en": {"p1": 30.25}, "ok": True})
    assert text.splitlines() == ["dlama_arab_west on mbert (masked)", "  p1_en: 30.25", "  n_facts: 5"]
