"""Rebuilds never lose the old output or the user's files: `board`, `push-board --dry-run`,
`consistency --out` and `compare --out` build beside their folder and swap it in when complete (as
`export` does), keep the files they did not write or refuse naming the one they would overwrite,
refuse a run's or a suite's folder and `--out ""`, take the folder's lock (`board`, `consistency`,
`compare`), and a full disk is one line that leaves the old output as it was (docs/reliability.md,
"Output folders").
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from filelock import FileLock

from culture_probe import rundir
from culture_probe.cli import main


def _commands(runs: dict[str, Path]) -> dict[str, list[str]]:
    """Each command that writes a folder, without its --out."""
    return {
        "board": ["board", str(runs["en"])],
        "consistency": ["consistency", str(runs["ar"]), str(runs["en"])],
        "compare": ["compare", str(runs["en"]), str(runs["ar"]), "--unpaired"],
    }


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _error_line(err: str) -> str:
    """The one error line of a command's stderr, after checking it is the only one and no
    traceback.
    """
    assert "Traceback" not in err, err[-2000:]
    errors = [
        line.split("culture-probe: error: ")[-1]
        for line in err.splitlines()
        if "culture-probe: error: " in line
    ]
    assert len(errors) == 1, err[-2000:]
    return errors[0]


def _fails(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    """Run a command that must fail with exit 2; its one error line."""
    capsys.readouterr()
    assert main(argv) == 2
    return _error_line(capsys.readouterr().err)


def _full_disk_while_building(out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every text write inside the folder built beside `out` fails as on a full disk (the OS names
    no file).
    """
    write_text = Path.write_text

    def full(self: Path, *args: object, **kwargs: object) -> int:
        if any(p.name.startswith(f".{out.name}.building-") for p in self.parents):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return write_text(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", full)


@pytest.mark.parametrize("command", ["board", "consistency", "compare"])
def test_a_rebuild_on_a_full_disk_is_one_line_and_leaves_the_old_output(
    command, runs, tmp_path, monkeypatch, capsys
):
    out = tmp_path / "out"
    argv = [*_commands(runs)[command], "--out", str(out)]
    assert main(argv) == 0
    before = _snapshot(out)
    _full_disk_while_building(out, monkeypatch)
    line = _fails(argv, capsys)
    assert line.startswith(f"no space left on the device holding {out} (") and "MB free" in line
    assert "--resume" not in line and f"{out} is as it was" in line
    # every file of the earlier output, byte for byte, and nothing else
    assert _snapshot(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # and no half-built folder beside it


def test_a_board_rebuilt_in_place_keeps_the_users_files(runs, tmp_path, capsys):
    out = tmp_path / "site"
    assert main(["board", str(runs["en"]), str(runs["ar"]), "--out", str(out)]) == 0
    mine = {"data/notes.js": "mine", "figures/logo.png": "mine too", "NOTES.md": "and mine"}
    for name, text in mine.items():
        (out / name).write_text(text)
    capsys.readouterr()
    assert main(["board", str(runs["en"]), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert all(f"kept    {name}: no board wrote it" in printed for name in mine)
    assert {name: (out / name).read_text() for name in mine} == mine
    # the earlier board's other run went with it
    assert len(list((out / "data").glob("run-*.js"))) == 1


def test_a_dry_run_push_board_never_overwrites_the_users_readme(
    runs, tmp_path, capsys, monkeypatch
):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    board = tmp_path / "board"
    assert main(["board", str(runs["en"]), "--out", str(board)]) == 0
    (board / "README.md").write_text("my own notes")
    before = _snapshot(board)
    push = ["push-board", "org/results", str(runs["en"]), "--dry-run", "--out"]
    line = _fails([*push, str(board)], capsys)
    assert (
        f"Cannot write the board into {board}: README.md would replace what no board wrote" in line
    )
    assert _snapshot(board) == before
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "README.md").write_text("my own notes")
    assert "not empty and holds no earlier board" in _fails([*push, str(mine)], capsys)
    assert _snapshot(mine) == {"README.md": b"my own notes"}
    # an earlier dry run: its own README.md is replaced, a user's file is kept
    space = tmp_path / "space"
    assert main([*push, str(space)]) == 0
    (space / "mine.txt").write_text("mine")
    capsys.readouterr()
    assert main([*push, str(space)]) == 0
    printed = capsys.readouterr().out
    assert "README.md" in printed and "mine.txt" not in printed  # not listed as uploaded
    assert (space / "mine.txt").read_text() == "mine"


def test_consistency_refuses_to_overwrite_the_users_file_and_keeps_the_others(
    runs, tmp_path, capsys
):
    out = tmp_path / "reports"
    out.mkdir()
    (out / "consistency.md").write_text("my own analysis")
    argv = [*_commands(runs)["consistency"], "--out", str(out)]
    line = _fails(argv, capsys)
    assert line.startswith(
        f"Cannot write the consistency report into {out}: consistency.md would replace"
    )
    # the lock stays, as in a run
    assert _snapshot(out) == {"consistency.md": b"my own analysis", ".lock": b""}
    (out / "consistency.md").rename(out / "notes.md")
    assert main(argv) == 0 and main(argv) == 0  # and again: it replaces its own files
    assert (out / "notes.md").read_text() == "my own analysis"
    assert (out / "consistency.json").is_file() and list((out / "plots").glob("*.png"))


@pytest.mark.parametrize("command", ["board", "consistency", "compare"])
@pytest.mark.parametrize("kind", ["run", "suite"])
def test_a_run_or_suite_folder_as_out_is_refused(command, kind, runs, tmp_path, capsys):
    folder = runs["en"]
    if kind == "suite":
        folder = tmp_path / "suite"
        folder.mkdir()
        rundir.write_text(folder / rundir.SUITE_MARKER, rundir.SUITE_NOTE)
    before = _snapshot(folder)
    line = _fails([*_commands(runs)[command], "--out", str(folder)], capsys)
    assert (
        line.startswith("Cannot write the ")
        and f"into {folder}: it is a culture_probe {kind} folder" in line
    )
    assert _snapshot(folder) == before


@pytest.mark.parametrize("command", ["board", "consistency", "compare"])
def test_a_folder_inside_a_run_as_out_is_refused(command, runs, capsys):
    folder = runs["en"] / "plots"  # the board would show compare's figure as the run's own
    before = _snapshot(runs["en"])
    line = _fails([*_commands(runs)[command], "--out", str(folder)], capsys)
    assert f"into {folder}: it lies in {runs['en']}, which is a culture_probe run folder" in line
    assert _snapshot(runs["en"]) == before


def test_a_marker_is_written_whole_or_not_at_all(runs, tmp_path, capsys, monkeypatch):
    out = tmp_path / "board"
    assert main([*_commands(runs)["board"], "--out", str(out)]) == 0
    (out / "data" / "mine.csv").write_text("the user's own", encoding="utf-8")
    marker = next(out.glob(".culture_probe_*"))
    listed = marker.read_bytes()
    write_text = Path.write_text

    # the disk fills while a marker is written
    def full(self: Path, *args: object, **kwargs: object) -> int:
        if self.name.startswith(marker.name):
            self.open("w").close()  # opened for writing, so emptied, before the first byte fails
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return write_text(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", full)
    assert main([*_commands(runs)["board"], "--out", str(out)]) == 2
    # not cut short: the next rebuild still knows which files are its own
    assert marker.read_bytes() == listed
    monkeypatch.undo()
    assert main([*_commands(runs)["board"], "--out", str(out)]) == 0
    assert (out / "data" / "mine.csv").read_text(encoding="utf-8") == "the user's own"


def test_a_hidden_figure_of_a_run_is_not_copied(runs, tmp_path):
    hidden = runs["en"] / "plots" / ".preview.png"
    hidden.write_bytes(b"\x89PNG")
    try:
        out = tmp_path / "board"
        assert main([*_commands(runs)["board"], "--out", str(out)]) == 0
        # its marker stays readable
        assert main([*_commands(runs)["board"], "--out", str(out)]) == 0
        assert not list(out.rglob(".preview.png"))
    finally:
        hidden.unlink()


@pytest.mark.parametrize("command", ["board", "consistency", "compare"])
def test_a_second_writer_of_the_folder_is_refused_in_one_line(command, runs, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    with FileLock(out / rundir.LOCK_FILE, timeout=0):  # another process writing this folder
        line = _fails([*_commands(runs)[command], "--out", str(out)], capsys)
    assert (
        line.startswith("Another process is writing the ")
        and f"in {out} (it holds {out / '.lock'})" in line
    )
    assert [p.name for p in out.iterdir()] == [".lock"] and [
        p.name for p in tmp_path.iterdir()
    ] == ["out"]


@pytest.mark.parametrize("command", ["board", "consistency", "compare"])
def test_an_empty_out_is_refused_not_the_current_folder(
    command, runs, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    line = _fails([*_commands(runs)[command], "--out", ""], capsys)
    assert '(--out "")' in line and "pass a folder path" in line
    assert list(tmp_path.iterdir()) == []


def _own_file_system(out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`out` is a mount point: a file moved into it from outside fails as across file systems
    (EXDEV).
    """
    from culture_probe.util import outfolder

    replace = os.replace
    inside = out.resolve()

    def across(source: os.PathLike, target: os.PathLike) -> None:
        if (
            inside in Path(target).resolve().parents
            and inside not in Path(source).resolve().parents
        ):
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))
        replace(source, target)

    monkeypatch.setattr(os, "replace", across)
    monkeypatch.setattr(outfolder.os.path, "ismount", lambda path: Path(path).resolve() == inside)


@pytest.mark.parametrize("command", ["board", "consistency", "compare"])
def test_a_mount_point_as_out_is_rebuilt_inside_it(command, runs, tmp_path, monkeypatch, capsys):
    """`--out /mnt/disk` (its own file system): the rebuild is written inside it under a hidden
    name, swapped in file by file, and a failure leaves the old output and nothing beside it or
    inside it.
    """
    plain, out = tmp_path / "plain", tmp_path / "mounted" / "out"
    assert main([*_commands(runs)[command], "--out", str(plain)]) == 0
    out.mkdir(parents=True)  # mounted: it exists, and its parent is another file system
    _own_file_system(out, monkeypatch)
    for _ in range(2):  # a first build, then a rebuild over it
        assert main([*_commands(runs)[command], "--out", str(out)]) == 0
    capsys.readouterr()
    assert _snapshot(out).keys() == _snapshot(plain).keys()
    assert sorted(p.name for p in out.parent.iterdir()) == [
        "out"
    ]  # nothing written beside the mount point
    before = _snapshot(out)
    write_text = Path.write_text

    def full(self: Path, *args: object, **kwargs: object) -> int:
        if any(p.name.startswith(".culture_probe_building-") for p in self.parents):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return write_text(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", full)
    assert f"{out} is as it was" in _fails([*_commands(runs)[command], "--out", str(out)], capsys)
    assert _snapshot(out) == before and not any(
        p.name.startswith(".culture_probe_building") for p in out.iterdir()
    )
