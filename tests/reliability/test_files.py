"""Nothing a user made is lost: a full disk or a read-only folder under `--cache-dir` or `--out` is
one clear line (exit 2) and leaves the files as they were; an export is built beside its folder and
swapped in only when complete, keeping the files it did not write (docs/publishing.md).
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from culture_probe.cli import main
from culture_probe.engine.cache import ScoreCache
from culture_probe.engine.types import CandidateScores

ROOT = os.geteuid() == 0  # chmod does not stop root: read-only places are then simulated


def _scores(n: int) -> dict[str, CandidateScores]:
    return {
        f"request {i}": CandidateScores(("a", "b"), sum_logprob=[-1.0 - i, -2.0], n_tokens=[1, 2])
        for i in range(n)
    }


def _read_only(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `folder` and its files read-only: with chmod, or (as root, whom chmod does not stop) by
    opening every SQLite file under it read-only, which is what SQLite does with a file it may not
    write.
    """
    if not ROOT:
        for path in [folder, *folder.iterdir()]:
            path.chmod(0o555 if path.is_dir() else 0o444)
        return
    connect = sqlite3.connect

    def read_only(path: object, **options: object) -> sqlite3.Connection:
        return connect(f"file:{path}?mode=ro", uri=True, **options)  # type: ignore[call-overload]

    monkeypatch.setattr("culture_probe.engine.cache.sqlite3.connect", read_only)


def test_a_full_disk_under_the_cache_dir_is_an_error_naming_the_folder_not_damage(tmp_path):
    path = tmp_path / "cache" / "model.sqlite"
    cache = ScoreCache(path, model="m", options="o")
    cache.put(_scores(3))
    pages = cache._db.execute("PRAGMA page_count").fetchone()[0]
    cache._db.execute(f"PRAGMA max_page_count={pages}")  # SQLite's own "disk is full" from here on
    with pytest.raises(OSError, match="disk is full") as caught:
        cache.put(_scores(2000))
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(path.parent)
    cache.close()
    # never moved aside
    assert sorted(p.name for p in path.parent.iterdir() if ".corrupt-" in p.name) == []
    reopened = ScoreCache(path, model="m", options="o")
    # what it held is kept
    assert set(reopened.get({k: ("a", "b") for k in _scores(3)})) == set(_scores(3))
    reopened.close()


def test_a_read_only_cache_is_an_error_naming_it_and_left_as_it_was(tmp_path, monkeypatch):
    path = tmp_path / "cache" / "model.sqlite"
    cache = ScoreCache(path, model="m", options="o")
    cache.put(_scores(3))
    cache.close()
    before = path.read_bytes()
    _read_only(path.parent, monkeypatch)
    try:
        with pytest.raises(OSError, match="SQLite: .*readonly") as caught:
            ScoreCache(path, model="m", options="o").put(_scores(1))
        assert caught.value.errno == errno.EACCES and caught.value.filename == str(path.parent)
        assert [p.name for p in path.parent.iterdir() if ".corrupt-" in p.name] == []
        assert path.read_bytes() == before
    finally:
        path.parent.chmod(0o755)


def test_a_read_only_cache_dir_ends_a_run_in_one_line(
    tmp_path, monkeypatch, capsys, mirror, tiny_gpt2
):
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    _read_only(cache_dir, monkeypatch)
    try:
        code = main(
            [*_run(tiny_gpt2), "--out", str(tmp_path / "run"), "--cache-dir", str(cache_dir)]
        )
    finally:
        cache_dir.chmod(0o755)
    assert code == 2
    line = _error_line(capsys.readouterr().err)
    assert f"{cache_dir} is read-only" in line and "--cache-dir" in line
    assert list(cache_dir.iterdir()) == []


def _error_line(err: str) -> str:
    """The one error line of a command's stderr (progress bars aside), after checking it is the only
    one.
    """
    assert "Traceback" not in err, err[-2000:]
    errors = [
        line.split("culture-probe: error: ")[-1]
        for line in err.splitlines()
        if "culture-probe: error: " in line
    ]
    assert len(errors) == 1, err[-2000:]
    return errors[0]


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny random GPT-2 folder (byte-level: every CAMeL prompt and entity has tokens): what a run
    needs to reach its files, trained on nothing, so no test here waits for a planted model."""
    from culture_probe.models import save_tiny, train_tokenizer

    tokenizer = train_tokenizer(["Egypt is in Africa ."] * 4, "bpe", model_kind="causal")
    folder = tmp_path_factory.mktemp("tiny") / "gpt2"
    return str(save_tiny(folder, "gpt2", tokenizer, layers=1, hidden=16, heads=2))


def _run(model: str) -> list[str]:
    """A CAMeL smoke run of `model`, as the command line gives it."""
    return ["run", "camel_co_prompts", "--model", model, "--limit", "smoke"]


def test_a_full_disk_under_out_is_one_line_and_exit_2(
    tmp_path, monkeypatch, capsys, mirror, tiny_gpt2
):
    out = tmp_path / "run"
    write_text = Path.write_text

    def full(self: Path, *args: object, **kwargs: object) -> int:
        if out in self.parents:
            # as a write to a full disk: no file named
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return write_text(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", full)
    assert main([*_run(tiny_gpt2), "--out", str(out), "--no-cache"]) == 2
    line = _error_line(capsys.readouterr().err)
    assert line.startswith(f"no space left on the device holding {out}")


def test_a_disk_that_fills_mid_run_says_how_much_more_the_records_need(
    tmp_path, monkeypatch, capsys, mirror, tiny_gpt2
):
    from culture_probe import rundir

    out, append, written = tmp_path / "run", rundir.RecordWriter.append, []

    def fills(self: rundir.RecordWriter, record: object) -> None:
        if len(written) == 3:
            # as a write to a full disk: no file named
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written.append(record)
        append(self, record)  # type: ignore[arg-type]

    monkeypatch.setattr(rundir.RecordWriter, "append", fills)
    assert main([*_run(tiny_gpt2), "--out", str(out), "--no-cache"]) == 2
    line = _error_line(capsys.readouterr().err)
    planned = json.loads((out / "config.json").read_text(encoding="utf-8"))["planned"]["probes"]
    per_record = (out / "items.jsonl").stat().st_size / 3
    needed = float(line.split("need about ")[1].split(" MB")[0])
    assert line.startswith(f"no space left on the device holding {out} (") and "MB free" in line
    assert needed == pytest.approx(per_record * (planned - 3) / 1e6, abs=0.06)


def test_a_read_only_out_is_one_line_naming_it(tmp_path, monkeypatch, capsys, mirror, tiny_gpt2):
    out = tmp_path / "run"
    out.mkdir()
    if ROOT:
        mkdir = Path.mkdir

        def refused(self: Path, *args: object, **kwargs: object) -> None:
            if self == out or out in self.parents:
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
            mkdir(self, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(Path, "mkdir", refused)
    else:
        out.chmod(0o555)
    try:
        assert main([*_run(tiny_gpt2), "--out", str(out), "--no-cache"]) == 2
    finally:
        out.chmod(0o755)
    line = _error_line(capsys.readouterr().err)
    assert line.startswith(str(out)) and "is read-only" in line and "another folder" in line
    assert list(out.iterdir()) == []


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _parquet_to_a_full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parquet writes that fail as on a full disk, after writing part of the file (as pyarrow does:
    no file named).
    """
    import datasets

    def full(self: object, path: object, *args: object, **kwargs: object) -> int:
        Path(str(path)).write_bytes(b"PAR1 cut short")
        raise OSError(
            errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device"
        )

    monkeypatch.setattr(datasets.Dataset, "to_parquet", full)


@pytest.mark.parametrize("failure", ["missing-data", "full-disk"])
def test_a_failed_re_export_leaves_the_earlier_export_as_it_was(
    failure, mirror, tmp_path, monkeypatch, capsys
):
    out = tmp_path / "ex"
    assert main(["export", str(out), "--configs", "camel_co_prompts"]) == 0
    before = _snapshot(out)
    if failure == "missing-data":
        monkeypatch.setenv("CULTURE_PROBE_MIRROR", str(tmp_path / "no_mirror"))
        again = ["export", str(out), "--configs", "dlama_arab_west"]
    else:
        _parquet_to_a_full_disk(monkeypatch)
        again = ["export", str(out), "--configs", "camel_ag_prompts"]
    capsys.readouterr()
    assert main(again) == 2
    line = _error_line(capsys.readouterr().err)
    # every file of the earlier export, byte for byte, and nothing else
    assert _snapshot(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["ex"]  # and no half-built folder beside it
    if failure == "full-disk":
        assert line.startswith(f"no space left on the device holding {out} (") and "MB free" in line


def test_a_re_export_keeps_the_files_no_export_wrote_and_says_so(mirror, tmp_path, capsys):
    out = tmp_path / "ex"
    assert main(["export", str(out), "--configs", "camel_co_prompts", "camel_ag_prompts"]) == 0
    (out / "camel_co_prompts" / "notes.md").write_text("mine")
    (out / "LICENSE").write_text("mine too")
    capsys.readouterr()
    assert main(["export", str(out), "--configs", "camel_ag_prompts"]) == 0
    printed = capsys.readouterr().out
    assert (
        "kept    LICENSE: no export wrote it" in printed
        and "kept    camel_co_prompts/notes.md:" in printed
    )
    assert (out / "camel_co_prompts" / "notes.md").read_text() == "mine" and (
        out / "LICENSE"
    ).read_text() == "mine too"
    assert sorted(_snapshot(out)) == [
        ".culture_probe_export",
        "LICENSE",
        "README.md",
        "camel_ag_prompts/test-00000-of-00001.parquet",
        "camel_co_prompts/notes.md",  # the config's rows went with it; the user's notes stayed
    ]
    marker = json.loads((out / ".culture_probe_export").read_text())
    assert marker == ["README.md", "camel_ag_prompts/test-00000-of-00001.parquet"]


def test_a_re_export_that_would_overwrite_a_users_file_is_refused_naming_it(
    mirror, tmp_path, capsys
):
    out = tmp_path / "ex"
    assert main(["export", str(out), "--configs", "camel_ag_prompts"]) == 0
    (out / "camel_co_prompts").mkdir()
    (out / "camel_co_prompts" / "test-00000-of-00001.parquet").write_bytes(b"the user's own rows")
    before = _snapshot(out)
    assert main(["export", str(out), "--configs", "camel_co_prompts"]) == 2
    line = _error_line(capsys.readouterr().err)
    assert "camel_co_prompts/test-00000-of-00001.parquet would replace what no export wrote" in line
    assert _snapshot(out) == before


def test_a_dry_run_push_keeps_the_users_files_and_lists_only_what_it_would_upload(
    mirror, tmp_path, capsys
):
    out = tmp_path / "plan"
    push = [
        "push",
        "my-org/culture_probe",
        "--configs",
        "camel_co_prompts",
        "--dry-run",
        "--out",
        str(out),
    ]
    assert main(push) == 0
    (out / "camel_co_prompts" / "notes.md").write_text("mine")
    capsys.readouterr()
    assert main(push) == 0
    printed = capsys.readouterr().out
    assert (
        "2 files from" in printed
        and "camel_co_prompts/notes.md  kept: no export wrote it; not uploaded" in printed
    )
    assert (out / "camel_co_prompts" / "notes.md").read_text() == "mine"


@contextmanager
def _read_only_mount(folder: Path) -> Iterator[None]:
    """`folder` as a read-only mount (a bind mount remounted read-only, which stops root too), or
    read-only by chmod for another user; skips where neither can be had.
    """
    if not ROOT:
        modes = {p: p.stat().st_mode for p in [folder, *folder.rglob("*")]}
        for path in modes:
            path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            yield
        finally:
            for path, mode in modes.items():
                path.chmod(mode)
        return
    mount = ["mount", "--bind", str(folder), str(folder)]
    if subprocess.run(mount, capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount here, so a read-only folder cannot be made for root")
    try:
        subprocess.run(
            ["mount", "-o", "remount,bind,ro", str(folder)], check=True, capture_output=True
        )
        yield
    finally:
        subprocess.run(["umount", str(folder)], check=True, capture_output=True)


@pytest.mark.parametrize("command", ["report", "resume"])
def test_report_and_resume_on_a_read_only_run_are_one_line_and_leave_it_as_it_was(
    command, tmp_path, capsys, mirror, tiny_gpt2
):
    run = tmp_path / "run"
    assert main([*_run(tiny_gpt2), "--out", str(run), "--no-cache"]) == 0
    before = _snapshot(run)
    capsys.readouterr()
    again = (
        ["report"] if command == "report" else [*_run(tiny_gpt2), "--no-cache", "--resume", "--out"]
    )
    with _read_only_mount(run):
        assert main([*again, str(run)]) == 2
    err = capsys.readouterr().err
    line = _error_line(err)
    assert line.startswith(str(run)) and "is read-only" in line, line
    assert "could not be drawn" not in err  # the folder's error, not one warning per figure
    assert _snapshot(run) == before
