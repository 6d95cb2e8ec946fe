"""Incomplete means incomplete, everywhere; compare and consistency read well (issue 36, items 3 and
6).

A suite stopped during a config and resumed with others listed that config's number with no mark,
and a config it planned but never started was left out of suite.md without a word; two X-FaKT runs
gave compare 92 lines, about 30 of them rows of one unit with no interval; the board's compare title
named the runs in the opposite order to its columns; and the consistency section of a generation run
was a 78-row table with an empty RankC column whose text said RankC was computed from ranked
candidates.

The suites are DLAMA Arab-West runs of an engine stand-in (five facts in English,
tests/dlama_fixture.py), killed after two probes; the X-FaKT runs are the golden runs' records and
metrics (tests/golden/xfakt.json).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dlama_fixture import TableScorer, spec_table, write_dlama
from test_compare import FACTS, guessing, knowing
from test_figures_context import _golden_run

import culture_probe
from culture_probe.board import build_board
from culture_probe.cli import main
from culture_probe.record import RunRecord
from culture_probe.report import compare_runs, headline, load_run
from culture_probe.report.compare import LoadedRun, comparison_of
from culture_probe.report.consistency import consistency_sections
from culture_probe.report.summary import summary_lines
from culture_probe.runner.suite import SuiteResumeNotice

pytestmark = pytest.mark.filterwarnings("ignore::culture_probe.runner.SmallLimitWarning")
CONFIGS = ["dlama_arab_west", "dlama_arab_west_corrected"]
BOARD_JS = Path(culture_probe.__file__).parent / "board" / "assets" / "board.js"


class Dying(TableScorer):
    """The spec's scores, until `after` engine calls were answered: then the process is killed."""

    def __init__(self, after: int):
        super().__init__(spec_table())
        self.after = after

    def score(self, requests, options=None):
        if self.calls == self.after:
            raise KeyboardInterrupt
        return super().score(requests, options)


@pytest.fixture
def pair(tmp_path):
    """A finished run of a model that knows 24 facts, and one of a model that guesses, interrupted
    (no metrics.json: its numbers come from its records).
    """
    data = write_dlama(tmp_path / "dlama", facts=FACTS)
    for name, scorer in (("knows", knowing()), ("guesses", guessing())):
        culture_probe.run(
            "dlama_arab_west",
            scorer,
            data_dir=str(data),
            out=tmp_path / name,
            progress=False,
            language="en",
        )
    (tmp_path / "guesses" / "metrics.json").unlink()
    return tmp_path / "knows", tmp_path / "guesses"


@pytest.fixture
def stopped(tmp_path, monkeypatch):
    """A suite of two configs stopped (Ctrl-C) after two probes of the first: the second never
    started.
    """
    data = write_dlama(tmp_path / "dlama")
    monkeypatch.setattr("culture_probe.runner.execution.CHUNK", 1)
    monkeypatch.setattr("culture_probe.engine.loading.ModelSpec.kind", lambda spec: "masked")
    scorers = iter([Dying(2), TableScorer(spec_table()), TableScorer(spec_table())])
    monkeypatch.setattr("culture_probe.engine.loading.ModelSpec.load", lambda spec: next(scorers))
    suite = tmp_path / "suite"

    def again(configs, **kwargs):
        return culture_probe.run_suite(
            configs,
            "some/model",
            data_dir=str(data),
            out=suite,
            progress=False,
            language="en",
            **kwargs,
        )

    with pytest.raises(KeyboardInterrupt):
        again(CONFIGS)
    return suite, again


def test_a_stopped_suite_marks_its_config_incomplete_and_lists_the_one_never_started_as_not_run(
    stopped,
):
    suite, _ = stopped
    summary = json.loads((suite / "suite.json").read_text())
    (row,) = summary["configs"]
    assert (row["config"], row["status"]) == (CONFIGS[0], "INCOMPLETE 2/5")
    assert summary["not_run"] == [CONFIGS[1]] and summary["planned"] == CONFIGS
    text = (suite / "suite.md").read_text()
    line = next(line for line in text.splitlines() if line.startswith(f"| {CONFIGS[0]} |"))
    # beside its number, and in its note
    assert "(incomplete)" in line and "**INCOMPLETE 2/5**" in line
    assert f"- {CONFIGS[1]}: not run" in text.split("**Not run**", 1)[1]
    lines = summary_lines(summary).splitlines()
    assert (
        lines[0].startswith(f"{CONFIGS[0]}: INCOMPLETE 2/5, so far: ")
        and lines[1] == f"{CONFIGS[1]}: not run"
    )


def test_a_suite_resumed_with_other_configs_keeps_the_incomplete_one_marked_and_says_so_at_its_start(
    stopped,
):
    suite, again = stopped
    with pytest.warns(SuiteResumeNotice) as said:
        result = again(CONFIGS[1:], resume=True)
    (notice,) = [str(w.message) for w in said if w.category is SuiteResumeNotice]
    assert f"not run yet, running now: {CONFIGS[1]}" in notice
    assert f"left as they are (not named now): {CONFIGS[0]} (INCOMPLETE 2/5)" in notice
    rows = {row["config"]: row for row in result.summary["configs"]}
    assert rows[CONFIGS[0]]["status"] == "INCOMPLETE 2/5" and rows[CONFIGS[1]]["status"] is None
    assert json.loads((suite / "suite.json").read_text())["not_run"] == []
    assert f"{CONFIGS[0]}: INCOMPLETE 2/5, so far: " in summary_lines(result.summary)
    with pytest.warns(SuiteResumeNotice, match=rf"continuing: {CONFIGS[0]} \(INCOMPLETE 2/5\)"):
        finished = again(CONFIGS, resume=True)
    assert [row["status"] for row in finished.summary["configs"]] == [None, None]
    assert "(incomplete)" not in (suite / "suite.md").read_text()


def test_report_of_an_incomplete_run_marks_its_title_and_its_terminal_headline(stopped, capsys):
    suite, _ = stopped
    run_dir = suite / CONFIGS[0]
    assert main(["report", str(run_dir)]) == 0
    assert capsys.readouterr().out.startswith(
        f"{CONFIGS[0]} on some/model (masked): INCOMPLETE 2/5, numbers so far"
    )
    assert (
        (run_dir / "report.md")
        .read_text()
        .startswith(f"# {CONFIGS[0]} on some/model (INCOMPLETE 2/5)")
    )
    config, _, metrics = load_run(run_dir)
    # a finished run's headline: unmarked
    assert "INCOMPLETE" not in headline(config, metrics).splitlines()[0]
    assert main(["report", str(suite)]) == 0
    out = capsys.readouterr().out
    assert f"{CONFIGS[0]}: INCOMPLETE 2/5, so far: " in out and f"{CONFIGS[1]}: not run" in out


def test_compare_leads_with_the_headline_and_says_incomplete_beside_its_number(pair):
    comparison = compare_runs(list(pair))
    text = comparison.markdown()
    assert text.startswith("**Headline**: p1 overall")
    head = text.split("\n\n", 2)[1].splitlines()
    assert head[0] == "| run | p1 (%) overall | minus knows (95% CI) | p | note |"
    assert head[2].startswith("| knows | 100.00 [86.20, 100.00] (n=24) | (base) |")
    assert head[3].startswith("| guesses | 25.00 [") and head[3].endswith("| INCOMPLETE 24/24 |")
    assert comparison.table.columns[2:] == ("knows", "guesses (INCOMPLETE 24/24)")
    assert comparison.to_json()["status"] == {"guesses": "INCOMPLETE 24/24"}


def _xfakt(name: str, label: str) -> LoadedRun:
    """A golden X-FaKT run read for a comparison, its config.json with the seed its records were
    drawn with.
    """
    config, records, metrics = _golden_run("xfakt", name)
    config = RunRecord.from_json({**config.to_json(), "run": {"seed": 0}})
    return LoadedRun(label, config, records, metrics, None)


def test_compare_of_two_xfakt_runs_counts_strata_of_one_unit_in_one_line():
    comparison = comparison_of([_xfakt("generate", "first"), _xfakt("generate", "second")])
    groups = [row[0] for row in comparison.table.rows]
    # 13 countries of one fact each: no n=1 rows
    assert not [g for g in groups if g.startswith("country=")]
    assert "(n=1)" not in comparison.markdown()
    assert comparison.single == tuple(
        f"country={c}" for c in _golden_run("xfakt", "generate")[2]["results"]["by_country"]
    )
    line = "13 strata with one unit each are not shown (country: 13): an estimate of one unit has no interval"
    assert line in comparison.markdown() and comparison.to_json()["single_unit_groups"] == list(
        comparison.single
    )
    assert comparison.markdown().index("**Headline**") < comparison.markdown().index(
        "| group | metric |"
    )


def test_the_boards_compare_names_the_runs_in_the_order_of_its_columns(pair, tmp_path):
    site = build_board(list(pair), tmp_path / "site")
    (pair,) = site.comparisons
    text = (tmp_path / "site" / "data" / f"compare-{pair}.js").read_text(encoding="utf-8")
    shown = json.loads("[" + text[len("CP_DATA(") : -3] + "]")[2]
    assert [shown["base"]["id"], shown["other"]["id"]] == [
        c.split(" (")[0] for c in shown["columns"][2:]
    ]
    assert (shown["base"]["status"], shown["other"]["status"]) == (None, "INCOMPLETE 24/24")
    script = BOARD_JS.read_text(encoding="utf-8")
    # the title: base first, as the columns
    assert 'name(data.base), " vs ", name(data.other)' in script
    assert 'c.base + " vs " + c.other' in script and 'c.other + " vs " + c.base' not in script


def test_consistency_of_a_generation_run_is_the_heatmap_and_one_line_without_rankc():
    _, _, metrics = _golden_run("xfakt", "generate")  # 13 languages, 78 pairs, nothing ranked
    (section,) = consistency_sections(metrics)
    assert not section.tables and len(section.figures) == 1
    (heatmap,) = section.figures
    assert len(heatmap.row_labels) == 13 and heatmap.label == "facts right in both languages (%)"
    assert "RankC is computed" not in section.text and "aligned candidates" not in section.text
    summary = next(
        line
        for line in section.text.split("\n\n")
        if line.startswith("**78 pairs of 13 languages**")
    )
    assert "13 facts in both per pair: right in both from " in summary and " of 78 pairs" in summary
    assert "- **rankc** is not reported" in section.text  # why, from the metrics


def test_consistency_of_a_ranking_run_keeps_its_table_with_rankc():
    _, _, metrics = _golden_run("xfakt", "rank")
    (section,) = consistency_sections(metrics)
    (table,) = section.tables
    assert len(table.rows) == 78 and any(row[8] for row in table.rows)  # RankC filled
    assert "RankC is computed from each record's first 20 aligned candidates" in section.text


def test_consistency_of_one_generated_pair_is_one_line_with_its_numbers():
    _, _, metrics = _golden_run("xfakt", "generate")
    pairs = {"en/fr": metrics["consistency"]["pairs"]["en/fr"]}
    one = {
        "consistency": {**metrics["consistency"], "pairs": pairs},
        "results": {"by_language_pair": {"en/fr": metrics["results"]["by_language_pair"]["en/fr"]}},
    }
    (section,) = consistency_sections(one)
    line = next(line for line in section.text.split("\n\n") if line.startswith("**en/fr**"))
    n = pairs["en/fr"]["n"]
    assert (
        f"{n} facts in both; right in both {pairs['en/fr']['both_right']} (" in line
        and "P@1 en - fr" in line
    )
