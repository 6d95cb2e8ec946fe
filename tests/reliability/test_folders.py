"""Suite folders and run folders are different things: each is marked, a run refuses a suite's
folder and a suite a run's, a second writer of a suite fails at once, suite.json lists every config
the folder holds, and `report` and `compare` say what a folder is when it is not what they take.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dlama_fixture import TableScorer, spec_table, write_dlama

import culture_probe
from culture_probe import rundir
from culture_probe.cli import main
from culture_probe.errors import CultureProbeError

A, B = "dlama_arab_west", "dlama_arab_west_corrected"


@pytest.fixture
def loads(monkeypatch):
    """The models loaded (a planted table stands in for each), by a suite or a single run."""
    loaded = []

    def load(spec):
        loaded.append(spec.name)
        return TableScorer(spec_table())

    monkeypatch.setattr("culture_probe.engine.loading.ModelSpec.load", load)
    monkeypatch.setattr("culture_probe.engine.loading.ModelSpec.kind", lambda spec: "masked")
    return loaded


@pytest.fixture
def data(tmp_path):
    return write_dlama(tmp_path / "dlama")


def suite(data, folder, configs, model="some/model", **keywords):
    return culture_probe.run_suite(
        configs, model, data_dir=str(data), out=folder, progress=False, language="en", **keywords
    )


def listed(folder: Path) -> list[str]:
    return [row["config"] for row in json.loads((folder / "suite.json").read_text())["configs"]]


def cli(capsys, *argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err.strip()


def test_a_run_refuses_a_suite_folder_and_a_suite_a_run_folder_saying_which_it_is(
    tmp_path, data, loads, capsys
):
    # `run maps_en --out SUITE_DIR` wrote its run beside suite.json; a suite wrote its runs inside a
    # run's folder
    folders = tmp_path / "suite", tmp_path / "run"
    suite(data, folders[0], [A, B])
    run = ("run", A, "--model", "some/model", "--data-dir", data, "--language", "en", "--limit", 2)
    assert cli(capsys, *run, "--out", folders[1])[0] == 0
    assert (folders[0] / rundir.SUITE_MARKER).is_file() and not (
        folders[0] / rundir.MARKER
    ).exists()
    assert rundir.folder_kind(folders[0]) == "suite" and rundir.folder_kind(folders[1]) == "run"
    before = {folder: sorted(p.name for p in folder.iterdir()) for folder in folders}
    loads.clear()

    code, err = cli(capsys, *run, "--out", folders[0])
    assert (code, err.count("\n")) == (
        2,
        0,
    ) and f"{folders[0]} is a suite folder (runs of {A}, {B})" in err
    assert "add the config to the suite: name it with the suite's configs, and --resume" in err
    code, err = cli(
        capsys, "run", A, B, "--model", "some/model", "--data-dir", data, "--out", folders[1]
    )
    assert (code, err.count("\n")) == (
        2,
        0,
    ) and f"{folders[1]} is the run directory of one config" in err
    assert "Pass a new --out for the suite" in err
    assert loads == [] and before == {
        folder: sorted(p.name for p in folder.iterdir()) for folder in folders
    }


def test_folders_made_before_the_suite_marker_keep_their_kind(tmp_path, data, loads, capsys):
    folder = tmp_path / "suite"
    suite(data, folder, [A])
    # as suites of earlier versions were written: the run marker, saying so
    (folder / rundir.SUITE_MARKER).unlink()
    (folder / rundir.MARKER).write_text(rundir.SUITE_NOTE)
    (folder / A / rundir.MARKER).unlink()  # a run of earlier versions: its config.json alone
    assert rundir.folder_kind(folder) == "suite" and rundir.folder_kind(folder / A) == "run"
    code, err = cli(capsys, "run", A, "--model", "some/model", "--data-dir", data, "--out", folder)
    assert code == 2 and "is a suite folder" in err
    assert list(suite(data, folder, [A, B], resume=True).runs) == [A, B] and listed(folder) == [
        A,
        B,
    ]


def test_a_second_writer_of_a_suite_fails_at_once(tmp_path, data, loads):
    # two suites into one --out at once both ran, and suite.json listed only the last
    from filelock import FileLock

    folder = tmp_path / "suite"
    suite(data, folder, [A])
    loads.clear()
    with FileLock(folder / rundir.LOCK_FILE, timeout=0):  # another process writing this suite
        with pytest.raises(
            CultureProbeError, match=f"Another process is writing the suite in {folder} "
        ):
            suite(data, folder, [B], resume=True)
    assert loads == [] and listed(folder) == [A] and not (folder / B).exists()


def test_a_second_writer_of_a_run_fails_before_planning_or_loading(
    tmp_path, data, loads, monkeypatch
):
    # a single run took its folder's lock only once its model had loaded: a second writer read the
    # data and loaded the model first, to fail after
    from filelock import FileLock

    planned: list = []
    monkeypatch.setattr(
        "culture_probe.runner.planning.plan", lambda *args, **kwargs: planned.append(args)
    )
    folder = tmp_path / "run"
    folder.mkdir()
    with FileLock(folder / rundir.LOCK_FILE, timeout=0):  # another process writing this run
        with pytest.raises(
            CultureProbeError, match=f"Another process is writing the run in {folder} "
        ):
            culture_probe.run(A, "some/model", out=folder, data_dir=str(data), progress=False)
    assert planned == [] and loads == []


def test_a_run_refused_while_planning_leaves_no_folder_behind(tmp_path, data, loads):
    # the lock is taken before planning, in a folder made for it: a refusal must not leave that
    # folder
    with pytest.raises(CultureProbeError, match="Unknown option 'colour'"):
        culture_probe.run(
            A, "some/model", out=tmp_path / "new", data_dir=str(data), progress=False, colour="red"
        )
    assert not (tmp_path / "new").exists() and loads == []


def test_suite_json_lists_every_config_the_folder_holds_resumed_or_not(tmp_path, data, loads):
    # `--resume` with fewer configs, or a suite of other configs into the same folder, dropped the
    # others
    folder = tmp_path / "suite"
    with pytest.warns(culture_probe.runner.suite.SkippedConfigWarning):
        # asia-west: no data in the planted release
        first = suite(data, folder, [A, "dlama_asia_west"])
    loads.clear()
    with pytest.raises(
        CultureProbeError, match=rf"{folder} already holds a suite \(runs of {A}\)\. Pass --resume"
    ):
        suite(data, folder, [B])  # refused before the model loads, nothing written
    assert loads == [] and not (folder / B).exists()
    with pytest.raises(
        CultureProbeError, match="its suite ran some/model, not other/model, and a suite is one"
    ):
        suite(data, folder, [B], model="other/model", resume=True)

    suite(data, folder, [B], resume=True)  # a config added
    assert listed(folder) == [A, B]
    again = suite(data, folder, [A], resume=True)  # fewer configs
    stored = json.loads((folder / "suite.json").read_text())
    assert listed(folder) == [A, B] and list(stored["skipped"]) == ["dlama_asia_west"]
    assert (
        stored["configs"][0]["value"]
        == first.summary["configs"][0]["value"]
        == again.summary["configs"][0]["value"]
    )
    assert f"| {B} | p1 (%) |" in (folder / "suite.md").read_text()


def test_report_and_compare_say_what_a_folder_is(tmp_path, data, loads, capsys):
    # `compare SUITE_DIR X` and `report` of any folder that is no run said "pass the --out folder of
    # a run"
    folder = tmp_path / "suite"
    suite(data, folder, [A, B])
    capsys.readouterr()  # the suite's progress bars
    code, err = cli(capsys, "compare", folder, folder / A)
    assert (code, err.count("\n")) == (2, 0)
    assert (
        f"compare takes run directories or suite folders, not both: {folder} is a suite. Pass the suites alone "
        "(paired config by config), or runs of them (SUITE/CONFIG)." in err
    )
    assert main(["compare", str(folder / A), str(folder / B)]) == 0  # its runs, as the error says
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.txt").write_text("mine")
    for path, what in (
        (tmp_path / "empty", "it has no config.json (it is empty)"),
        (tmp_path / "nothing", "it does not exist"),
        (tmp_path / "notes.txt", "it is a file"),
        (tmp_path / "dlama", "it has no config.json"),
    ):
        code, err = cli(capsys, "report", path)
        assert (code, err.count("\n")) == (
            2,
            0,
        ) and f"{path} is not a run directory: {what}." in err
    assert main(["report", str(folder)]) == 0  # a suite folder is reported whole
