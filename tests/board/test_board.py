"""`culture-probe board`: what the site holds, read from the run folders alone: one leaderboard row
per model with each config's headline number, interval and n as metrics.json has them, smoke runs
marked, each record's exact input rebuilt from its protocol, right and wrong as the benchmark scores
the item, paired comparisons as `compare` gives them, records paged, and a folder that is not a
board left alone.
"""

from __future__ import annotations

import json
import math
from argparse import Namespace
from pathlib import Path

import pytest
from board_runs import Runs

from culture_probe import rundir
from culture_probe.board import build_board
from culture_probe.board.build import RIGHT, WRONG, leaderboard, load_runs, outcomes
from culture_probe.board.command import board_main
from culture_probe.board.site import PAGE_SIZE
from culture_probe.errors import CultureProbeError
from culture_probe.metrics.display import format_p
from culture_probe.report import compare_runs
from culture_probe.report.compare import PLANNED, holm_cell, left_out_text


def read_data(path: Path) -> object:
    """The value a data file hands to the board (`CP_DATA(kind, key, value);`)."""
    text = path.read_text(encoding="utf-8")
    assert text.startswith("CP_DATA(") and text.endswith(");\n")
    return json.loads("[" + text[len("CP_DATA(") : -3] + "]")[2]


def test_the_leaderboard_has_one_row_per_model_with_the_headline_as_metrics_json_has_it(
    runs: Runs,
) -> None:
    board = leaderboard(load_runs([runs.knows, runs.guesses, runs.smoke, runs.suite]))
    assert sorted(row["model"] for row in board["rows"]) == ["Forgetting", "Guessing", "Knowing"]
    knowing = next(row for row in board["rows"] if row["model"] == "Knowing")
    cell = knowing["cells"]["dlama_arab_west"]
    # the full run is shown, not the smoke run of the same model and config, which is linked beside
    # it
    assert (
        not cell["smoke"] and cell["run"].endswith("knows") and cell["others"][0].endswith("smoke")
    )
    expected = rundir.read_run(runs.knows).metrics["results"]["overall"]["p1"]
    shown = cell["overall"]
    # 24 facts, each asked in both languages: the fact is the unit, its 48 answers the observations
    assert shown["text"] == f"{expected['value']:.2f}" and shown["n"] == expected["n"] == 24
    assert expected["n_observations"] == 48
    assert shown["interval"] == f"[{expected['ci_low']:.2f}, {expected['ci_high']:.2f}]"
    by_language = rundir.read_run(runs.knows).metrics["results"]["by_language"]
    assert set(cell["by_language"]) == {"ar", "en"}
    assert cell["by_language"]["en"]["n"] == by_language["en"]["p1"]["n"] == 24


def test_a_smoke_run_alone_is_marked_as_smoke(runs: Runs) -> None:
    board = leaderboard(load_runs([runs.smoke]))
    assert board["rows"][0]["cells"]["dlama_arab_west"]["smoke"] is True


def test_a_suite_folder_shows_each_of_its_runs(runs: Runs) -> None:
    shown = load_runs([runs.suite])
    assert [r.name for r in shown] == ["dlama_arab_west"] and shown[0].model == "Forgetting"


def test_each_record_shows_the_exact_input_its_protocol_gave_the_model(runs: Runs) -> None:
    (run,) = load_runs([runs.knows])
    arabic = [r for r in run.run.records if r["language"] == "ar"]
    assert arabic and run.prompts.missing is None
    for record in run.run.records:
        prompt = run.prompts.by_key[(record.stage, record.key)]
        # the protocol's own record of its template, with the slot where each candidate is scored
        # after `sep`
        assert (
            f"{prompt['left']}{prompt['sep']}[Y]{prompt['right']}" == record["prompt"]
            and prompt["kind"] == "score"
        )
        candidates = run.prompts.candidate_sets[prompt["candidates"]]
        assert (
            set(record["top"]) == set(candidates)
            and prompt["n_candidates"] == record["n_candidates"] == 4
        )
    arabic_sets = [
        run.prompts.candidate_sets[run.prompts.by_key[("main", r.key)]["candidates"]]
        for r in arabic
    ]
    assert all("أوروبا" in candidates for candidates in arabic_sets)  # Europe in Arabic


def test_right_and_wrong_follow_the_benchmark_scoring_of_each_item(runs: Runs) -> None:
    for folder in (runs.knows, runs.guesses):
        (run,) = load_runs([folder])
        judged = outcomes(run)
        # DLAMA's P@1: the top-ranked candidate is one of the gold objects
        for record in run.run.records:
            assert judged.outcome(record) == (
                RIGHT if record["prediction"] in record["gold"] else WRONG
            )
    (guesses,) = load_runs([runs.guesses])
    english = [r for r in guesses.run.records if r["language"] == "en"]
    assert sum(outcomes(guesses).outcome(r) == RIGHT for r in english) == 6  # the six Europe facts


def test_the_site_pages_every_record_and_names_no_network_address(
    runs: Runs, tmp_path: Path
) -> None:
    site = build_board([runs.knows, runs.guesses], tmp_path / "site")
    for run_id, folder in zip(site.runs, (runs.knows, runs.guesses), strict=True):
        pages = sorted((tmp_path / "site" / "data").glob(f"items-{run_id}-*.js"))
        records = [r for page in pages for r in read_data(page)]
        lines = (folder / rundir.ITEMS_FILE).read_text(encoding="utf-8").splitlines()
        assert len(pages) == math.ceil(len(lines) / PAGE_SIZE)
        assert [r["key"] for r in records] == [json.loads(line)["key"] for line in lines]
        index = read_data(tmp_path / "site" / "data" / f"run-{run_id}.js")["index"]
        assert index["keys"] == [r["key"] for r in records]
        assert [f["name"] for f in index["facets"]] == ["language", "culture", "predicate"]
    for path in [tmp_path / "site" / "index.html", *(tmp_path / "site" / "assets").iterdir()]:
        text = path.read_text(encoding="utf-8")
        assert "http://" not in text and "https://" not in text and "fetch(" not in text, path
    assert site.size == sum(p.stat().st_size for p in (tmp_path / "site").rglob("*") if p.is_file())


def test_runs_of_one_config_are_compared_as_compare_pairs_them(runs: Runs, tmp_path: Path) -> None:
    site = build_board([runs.knows, runs.guesses], tmp_path / "site")
    (pair,) = site.comparisons
    shown = read_data(tmp_path / "site" / "data" / f"compare-{pair}.js")
    reference = compare_runs([runs.knows, runs.guesses])
    overall = next(p for p in reference.paired if p["group"] == "overall")
    row = next(p for p in shown["paired"] if p["group"] == "overall")
    assert row["difference"] == f"{overall['difference']:.2f}" and row["n"] == overall["n"]
    assert row["interval"] == f"[{overall['ci_low']:.2f}, {overall['ci_high']:.2f}]"
    assert row["method"] == overall["method"]
    records = {r.key: r for r in rundir.read_run(runs.knows).records}
    changed = {
        r.item_id
        for r in rundir.read_run(runs.guesses).records
        if (r["prediction"] in r["gold"])
        != (records[r.key]["prediction"] in records[r.key]["gold"])
    }
    assert {c["id"] for c in shown["changed"]} == changed and shown["n_changed"] == len(changed) > 0


def test_the_compare_view_prints_p_values_as_compare_does_and_says_how_many_tests(
    runs: Runs, tmp_path: Path
) -> None:
    """The board printed compare's p-values without the Holm-adjusted ones or the count of tests
    (issue 34).
    """
    site = build_board([runs.knows, runs.guesses], tmp_path / "site")
    shown = read_data(tmp_path / "site" / "data" / f"compare-{site.comparisons[0]}.js")
    reference = compare_runs([runs.knows, runs.guesses])
    assert [(row["p"], row["p_holm"]) for row in shown["paired"]] == [
        (format_p(p["p_value"]), holm_cell(p)) for p in reference.paired
    ]
    assert shown["paired"][0]["p_holm"] == PLANNED and shown["paired"][0]["group"] == "overall"
    tests = sum(p["p_holm"] is not None for p in reference.paired)
    assert (
        f"one family of exploratory tests ({shown['other']['id']}: {tests} tests)"
        in shown["multiplicity"]
    )
    assert shown["left_out"] == left_out_text(reference.one_unit, reference.repeats)


def test_records_of_a_withheld_benchmark_are_left_out_and_its_numbers_kept(
    runs: Runs, tmp_path: Path
) -> None:
    site = build_board(
        [runs.knows, runs.guesses], tmp_path / "site", withhold={"dlama": "released on request"}
    )
    data = tmp_path / "site" / "data"
    assert (
        not list(data.glob("items-*"))
        and not list(data.glob("cands-*"))
        and site.withheld == ("dlama",)
    )
    page = read_data(data / f"run-{site.runs[0]}.js")
    assert (
        page["withheld"] == "released on request"
        and "index" not in page
        and page["page"]["numbers"]
    )
    assert read_data(data / f"compare-{site.comparisons[0]}.js")["changed"] is None


def test_the_board_command_writes_the_site_and_replaces_only_an_earlier_board(
    runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "site"
    assert board_main(Namespace(paths=[str(runs.knows)], out=str(out), title="t")) == 0
    assert "board of 1 run(s)" in capsys.readouterr().out and (out / "index.html").is_file()
    # an earlier board
    assert board_main(Namespace(paths=[str(runs.guesses)], out=str(out), title="t")) == 0
    assert len(list((out / "data").glob("run-*.js"))) == 1 and read_id(out).endswith("guesses")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(CultureProbeError, match="not empty and holds no earlier board"):
        build_board([runs.knows], tmp_path / "mine")
    with pytest.raises(CultureProbeError, match="not a run directory"):
        build_board([tmp_path / "mine"], tmp_path / "other")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"


def read_id(site: Path) -> str:
    """The one run id of a board."""
    (run,) = read_data(site / "data" / "board.js")["runs"]
    return run["id"]


def test_the_subcommands_parse_as_the_docs_write_them() -> None:
    import argparse

    from culture_probe.board.command import add_board_parsers

    parser = argparse.ArgumentParser(prog="culture-probe")
    add_board_parsers(parser.add_subparsers(dest="command", required=True))
    board = parser.parse_args(["board", "runs/mbert", "runs/suite", "--out", "board"])
    assert (board.command, board.paths, board.out) == (
        "board",
        ["runs/mbert", "runs/suite"],
        "board",
    )
    push = parser.parse_args(
        ["push-board", "org/results", "runs/suite", "--dry-run", "--out", "space"]
    )
    assert (push.repo_id, push.paths, push.dry_run, push.public, push.i_have_permission) == (
        "org/results",
        ["runs/suite"],
        True,
        False,
        False,
    )
    with pytest.raises(SystemExit):
        # --out is required: a board is written somewhere
        parser.parse_args(["board", "runs/mbert"])
