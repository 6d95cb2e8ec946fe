"""`culture-probe push-board`: a static Space (private unless --public) through the real Hub client
against the local fake Hub, `--dry-run --out` writing the folder with its Space front matter and
sending nothing, `push`'s offline and token errors, and data released only on request (MAPS) left
out without the permission flag.
"""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

import huggingface_hub
import pytest
import yaml
from board_runs import Runs
from fake_hub import FakeHub, serve

from culture_probe.board import command
from culture_probe.board.command import on_request_benchmarks, push_board, push_board_main
from culture_probe.errors import PublishError


def args(runs: Runs, out: Path | None, **given: object) -> Namespace:
    return Namespace(
        **{
            "repo_id": "org/results",
            "paths": [str(runs.knows), str(runs.guesses)],
            "title": "culture_probe results",
            "public": False,
            "i_have_permission": False,
            "dry_run": out is not None,
            "out": None if out is None else str(out),
            **given,
        }
    )


def test_a_dry_run_writes_a_private_static_space_and_sends_nothing(
    runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)  # no token and offline: a dry run needs neither
    assert push_board_main(args(runs, tmp_path / "space")) == 0
    out = capsys.readouterr().out
    assert out.startswith("would upload space org/results (private),") and "index.html" in out
    readme = (tmp_path / "space" / "README.md").read_text(encoding="utf-8")
    front = yaml.safe_load(readme.split("---\n")[1])
    assert front["sdk"] == "static" and front["app_file"] == "index.html"
    assert (tmp_path / "space" / "index.html").is_file() and list(
        (tmp_path / "space" / "data").glob("items-*")
    )
    assert push_board_main(args(runs, tmp_path / "public", public=True)) == 0
    assert capsys.readouterr().out.startswith("would upload space org/results (public),")


def test_push_board_refuses_as_push_does(
    runs: Runs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(PublishError, match="HF_HUB_OFFLINE is set"):  # the test session is offline
        push_board_main(args(runs, None))
    with pytest.raises(PublishError, match="pass --out DIR as well"):
        push_board_main(args(runs, None, dry_run=True))
    with pytest.raises(PublishError, match="not a Hub repository id"):
        push_board_main(args(runs, tmp_path / "x", repo_id="no-owner"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))  # no stored token either
    with pytest.raises(PublishError, match="No Hugging Face token"):
        push_board_main(args(runs, None))
    assert not (tmp_path / "x").exists()  # refused before anything was built


def test_on_request_records_stay_out_unless_permitted(
    runs: Runs, tmp_path: Path, monkeypatch
) -> None:
    assert set(on_request_benchmarks()) == {"maps"}  # the benchmarks released only on request
    # DLAMA stands in for an on-request benchmark here, as a MAPS run needs the authors' data
    monkeypatch.setattr(
        command, "on_request_benchmarks", lambda: {"dlama": "DLAMA withheld (test)."}
    )
    upload = push_board("org/results", [runs.knows], dry_run_dir=tmp_path / "withheld")
    assert not any(path.startswith("data/items-") for path, _ in upload.files)
    assert "DLAMA withheld (test)." in (tmp_path / "withheld" / "README.md").read_text(
        encoding="utf-8"
    )
    upload = push_board(
        "org/results", [runs.knows], i_have_permission=True, dry_run_dir=tmp_path / "permitted"
    )
    assert any(path.startswith("data/items-") for path, _ in upload.files)


def test_the_board_lands_in_a_private_static_space(runs: Runs, tmp_path: Path, monkeypatch) -> None:
    fake = FakeHub(tmp_path / "hub_server")
    server = serve(fake)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", fake.url)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_TOKEN", fake.token)
    try:
        upload = push_board("org/results", [runs.knows, runs.guesses])
    finally:
        server.shutdown()
    assert (
        fake.repos["org/results"]["request"]["sdk"] == "static"
        and fake.repos["org/results"]["private"]
    )
    assert upload.private and upload.url and len(fake.commits) == 1
    landed = fake.folder("space", "org/results")
    assert (landed / "index.html").is_file() and (landed / "assets" / "board.js").is_file()
    assert not (landed / ".culture_probe_board").exists()
