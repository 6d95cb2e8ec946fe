"""`merge` and `--shard` misused, as a careless user would: everything is checked before anything is
written, the merged folder is built beside `--out` and renamed into place (a kill or a full disk
mid-merge leaves no half-written `--out`, and merging again works), every refusal names the shard's
folder and the record's line, shards of two suites, stray or repeated records, wrong-typed
shard.json or suite.json and an `--out` inside a shard are refused in one line; a shard's own
report.md and board entry say it is a shard of the run, never the run's result.
"""

from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path

import pytest
from dlama_fixture import TableScorer, spec_table, write_dlama

from culture_probe import rundir, runner
from culture_probe.board.build import leaderboard, load_runs, run_page
from culture_probe.board.site import run_summary
from culture_probe.cli import main
from culture_probe.errors import CultureProbeError, InvalidValueError
from culture_probe.runner import merge
from culture_probe.runner.merge import merge_runs, merge_suites
from culture_probe.runner.suite import run_suite

CONFIG = "dlama_arab_west"


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Made once: the 2 shards of a run of the spec's 5 DLAMA facts (`s1`, `s2`), shard 1/2 of a
    `--limit 2` run (`lim1`), the 2 suite shards of a suite of the config (`suite1`, `suite2`), and
    their data (`dlama`).
    """
    root = tmp_path_factory.mktemp("shards")
    data = str(write_dlama(root / "dlama"))
    for k in (1, 2):
        run(data, root / f"s{k}", shard=f"{k}/2")
        run_suite(
            [CONFIG],
            TableScorer(spec_table()),
            out=root / f"suite{k}",
            shard=f"{k}/2",
            data_dir=f"dlama={data}",
            progress=False,
        )
    run(data, root / "lim1", shard="1/2", limit=2)
    return root


def run(data: str, out: Path, **keywords: object) -> runner.RunResult:
    return runner.run(
        CONFIG, TableScorer(spec_table()), data_dir=data, out=out, progress=False, **keywords
    )


def copies(made: Path, tmp_path: Path, *names: str) -> list[Path]:
    """Copies of the made folders, each test's own to damage."""
    return [Path(shutil.copytree(made / name, tmp_path / name)) for name in names]


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line a command that must be refused prints (exit 2, no traceback)."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_a_record_repeated_in_a_shard_is_refused_naming_the_shard_and_its_lines(
    made, tmp_path, capsys
):
    s1, s2 = copies(made, tmp_path, "s1", "s2")
    items = s1 / rundir.ITEMS_FILE
    lines = lines_of(items)
    items.write_text("".join([*lines, lines[0]]), encoding="utf-8")  # a line appended twice
    key = json.loads(lines[0])["id"]
    err = refused(["merge", str(s1), str(s2), "--out", str(tmp_path / "out")], capsys)
    assert f"shard 1/2 ({s1}) holds the main record '{key}" in err
    assert f"twice (items.jsonl lines 1 and {len(lines) + 1})" in err
    assert not (tmp_path / "out").exists()  # refused before anything is written


def test_a_stray_record_is_refused_naming_the_shard_and_the_record_not_as_incomplete(
    made, tmp_path, capsys
):
    s1, s2 = copies(made, tmp_path, "s1", "s2")
    stray = lines_of(s2 / rundir.ITEMS_FILE)[0]  # another shard's line, copied in
    with (s1 / rundir.ITEMS_FILE).open("a", encoding="utf-8") as items:
        items.write(stray)
    number = len(lines_of(s1 / rundir.ITEMS_FILE))
    err = refused(["merge", str(s1), str(s2), "--out", str(tmp_path / "out")], capsys)
    assert f"shard 1/2 ({s1}) holds a record that is not its own" in err
    assert f"(items.jsonl line {number}) answers no probe its shard.json places" in err
    assert "INCOMPLETE" not in err and "--resume" not in err
    assert not (tmp_path / "out").exists()


def test_shards_of_two_different_suites_are_refused_naming_both(made, tmp_path, capsys):
    suite1, suite2 = copies(made, tmp_path, "suite1", "suite2")
    # the second shard is of a suite that also planned maps_ru (not run there yet)
    summary = json.loads((suite2 / "suite.json").read_text())
    summary |= {"planned": [CONFIG, "maps_ru"], "not_run": ["maps_ru"]}
    (suite2 / "suite.json").write_text(json.dumps(summary))
    for first, second in ((suite1, suite2), (suite2, suite1)):
        err = refused(["merge", str(first), str(second), "--out", str(tmp_path / "out")], capsys)
        assert f"{second} is a shard of a suite of " in err and f"{first} of one of " in err
        assert "maps_ru" in err and not (tmp_path / "out").exists()
    # a config run in one suite shard and not in the other: that shard is named, not merged without
    # it
    shutil.rmtree(suite2)
    shutil.copytree(made / "suite2", suite2)
    shutil.rmtree(suite2 / CONFIG)
    err = refused(["merge", str(suite1), str(suite2), "--out", str(tmp_path / "out")], capsys)
    assert f"{CONFIG} has a run in {suite1} but none in {suite2}" in err


@pytest.mark.parametrize(
    ("document", "value", "says"),
    [
        ("suite.json", {"planned": "maps"}, "`planned` must be a list of config names, got 'maps'"),
        ("suite.json", {"configs": {"config": CONFIG}}, "`configs` must be a list of objects"),
        ("suite.json", [], "not a JSON object but list"),
        ("shard.json", {"probes": "5"}, "`probes` must be a whole number >= 0, got '5'"),
        ("shard.json", {"positions": [0, 1]}, "`positions` must be an object of probe keys"),
        ("shard.json", [], "not a JSON object but list"),
    ],
)
def test_a_wrong_typed_shard_or_suite_json_is_refused_naming_it_in_merge_report_board_and_resume(
    made, tmp_path, capsys, document, value, says
):
    suite1, suite2 = copies(made, tmp_path, "suite1", "suite2")
    damaged = suite1 / document if document == "suite.json" else suite1 / CONFIG / document
    if isinstance(value, dict):
        value = json.loads(damaged.read_text()) | value
    damaged.write_text(json.dumps(value))
    commands = [
        ["merge", str(suite1), str(suite2), "--out", str(tmp_path / "out")],
        ["report", str(suite1)],
        ["board", str(suite1), "--out", str(tmp_path / "board")],
    ]
    for argv in commands:
        err = refused(argv, capsys)
        assert f"{damaged}: {says}" in err, argv
    assert not (tmp_path / "out").exists() and not (tmp_path / "board").exists()
    if document == "suite.json":  # a suite's --resume reads it before it runs anything
        with pytest.raises(CultureProbeError, match=f"{damaged}: {says}"):
            run_suite(
                [CONFIG],
                TableScorer(spec_table()),
                out=suite1,
                shard="1/2",
                resume=True,
                data_dir=f"dlama={made / 'dlama'}",
                progress=False,
            )


def test_merge_out_inside_a_shard_is_refused(made, tmp_path, capsys):
    s1, s2 = copies(made, tmp_path, "s1", "s2")
    before = sorted(p.name for p in s1.iterdir())
    err = refused(["merge", str(s1), str(s2), "--out", str(s1 / "merged")], capsys)
    assert f"--out {s1 / 'merged'} lies in {s1}, a culture_probe run folder" in err
    assert sorted(p.name for p in s1.iterdir()) == before


def test_merge_runs_refuses_wrong_types_as_the_cli_does(made, tmp_path):
    s1, s2 = made / "s1", made / "s2"
    with pytest.raises(InvalidValueError, match=r"merge_runs: `shard_dirs` must be a list, got '"):
        merge_runs(str(s1), tmp_path / "out")  # never read letter by letter
    with pytest.raises(
        CultureProbeError, match="merge_runs.shard_dirs. takes the shards' folders; item 1"
    ):
        merge_runs([s1, None], tmp_path / "out")
    with pytest.raises(InvalidValueError, match=r"merge_runs: `out` must be"):
        merge_runs([s1, s2], 5)
    with pytest.raises(InvalidValueError, match=r"merge_suites: `shard_dirs` must be a list"):
        merge_suites(str(made / "suite1"), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_full_disk_mid_merge_names_the_folder_writes_nothing_and_a_new_merge_works(
    made, tmp_path, capsys, monkeypatch
):
    s1, s2 = copies(made, tmp_path, "s1", "s2")
    out = tmp_path / "out"
    argv = ["merge", str(s1), str(s2), "--out", str(out)]

    def full(*args: object, **keywords: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(merge, "write_report", full)  # the last file: the rest is written
    err = refused(argv, capsys)
    assert f"no space left on the device holding {out} " in err
    assert f"the merge wrote nothing into {out}: merge again" in err and "--resume" not in err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["s1", "s2"]
    monkeypatch.undo()
    assert main(argv) == 0
    assert (out / "metrics.json").is_file() and (out / "report.md").is_file()


class Killed(BaseException):
    """A SIGKILL, as far as this process goes: nothing after it runs in the merge."""


def test_a_merge_killed_midway_leaves_no_half_written_out_and_a_new_merge_works(
    made, tmp_path, monkeypatch
):
    s1, s2 = copies(made, tmp_path, "s1", "s2")
    out = tmp_path / "out"
    seen: list[list[str]] = []
    write_jsonl = rundir.write_jsonl

    def killed(path: Path, rows: object) -> None:
        write_jsonl(path, rows)  # items.jsonl half the merge in
        seen.append(sorted(p.name for p in out.iterdir()) if out.exists() else [])
        # what a SIGKILL leaves where the merge was building: its folder, as it stands (no clean-up
        # runs), under a name as `tempfile` makes them (8 characters after the prefix)
        shutil.copytree(path.parent, path.parent.with_name(path.parent.name[:-8] + "killed00"))
        raise Killed

    monkeypatch.setattr(rundir, "write_jsonl", killed)
    with pytest.raises(Killed):
        merge_runs([s1, s2], out)
    # while the merge wrote, --out held nothing a reader could take for a run: its lock at most
    assert seen == [[".lock"]]
    assert not out.exists() or [p.name for p in out.iterdir()] == [".lock"]
    left = [p for p in tmp_path.iterdir() if p.name.startswith(".out.merging-")]
    assert len(left) == 1 and (left[0] / "config.json").is_file()
    monkeypatch.undo()
    merged = merge_runs([s1, s2], out)
    assert merged.run_dir == out and (out / "metrics.json").is_file()
    # the killed merge's folder is gone with the next merge
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "s1", "s2"]


def test_a_shards_report_says_it_is_a_shard_of_the_run_never_its_result(made):
    report = (made / "s1" / "report.md").read_text(encoding="utf-8")
    title, _, first = report.splitlines()[:3]
    positions = json.loads((made / "s1" / "shard.json").read_text())["positions"]
    assert title == f"# {CONFIG} on TableScorer (shard 1/2 of the run)"
    assert first.startswith(
        f"- **shard 1/2 of the {CONFIG} run ({len(positions)} of its 10 first-stage probes), not its result: "
        "`culture-probe merge` its 2 shards' folders"
    )
    limited = (made / "lim1" / "report.md").read_text(encoding="utf-8")
    # its share of the run's seeded draw, not a draw of its own
    assert (
        "- **a shard of a smoke run, not the benchmark's number**: 1 of the 2 facts the run drew, of 5"
        in (limited)
    )
    assert "**smoke run, not" not in limited and "below the smoke limit" not in limited


def test_a_shards_board_entry_says_it_is_a_shard_and_the_whole_run_is_shown_first(made, tmp_path):
    whole = merge_runs([made / "s1", made / "s2"], tmp_path / "whole")
    runs = load_runs([made / "s1", made / "lim1"])
    label = f"shard 1/2 of the {CONFIG} run ("
    for shown in runs:
        assert run_summary(shown)["shard"].startswith(label)
        page = run_page(shown, [])
        assert page["shard"].startswith(label)
    limited = run_page(runs[1], [])["smoke"]
    assert limited.startswith(
        "a shard of a smoke run, not the benchmark's number: 1 of the 2 facts the run drew"
    )
    cell = leaderboard(runs)["rows"][0]["cells"][CONFIG]
    assert cell["shard"].startswith(label) and cell["smoke"] is False
    # a whole run of the same model and config is shown before its shards, in either order
    for folders in ([made / "s1", whole.run_dir], [whole.run_dir, made / "s1"]):
        cell = leaderboard(load_runs(folders))["rows"][0]["cells"][CONFIG]
        assert cell["shard"] is None and cell["run"].endswith("whole")
