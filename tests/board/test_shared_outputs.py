"""What is written for others names nothing of this machine: the board, a `push-board` dry run, an
export and a `push` dry run made from a run of a local model folder in the home folder, on data in
the mirror, hold neither the home folder's path, the run folder's nor the mirror's. The model is
shown by its folder's name and digest, the run by its name, the mirror's data as
`$CULTURE_PROBE_MIRROR/...`. `list` and the skip note of dlama_asia_west describe the data a user
has, not the mirror.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from dlama_fixture import write_dlama

from culture_probe.board.command import push_board
from culture_probe.board.site import build_board
from culture_probe.data.export import export
from culture_probe.data.registry import list_benchmarks
from culture_probe.hub.publish import push
from culture_probe.sharing import redacted, shown_model


@dataclass(frozen=True)
class Machine:
    """A user's machine: the home folder, the mirror, the run made there, and the mirror's DLAMA
    folder.
    """

    home: Path
    mirror: Path
    run: Path
    data: Path


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Machine:
    """A tiny model saved in the home folder, run on a DLAMA folder in the mirror given with
    --data-dir (as the docs show it), the run folder in the home folder too.
    """
    from culture_probe.models import save_tiny, train_tokenizer
    from culture_probe.runner import run

    home, mirror = tmp_path / "home" / "ann", tmp_path / "mirror"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CULTURE_PROBE_MIRROR", str(mirror))
    data = write_dlama(mirror / "manual" / "dlama" / "dlama-v1")
    texts = [
        "Egypt Morocco Oman France Canada is located in Africa Asia Europe North America ."
    ] * 3
    model = save_tiny(
        home / "models" / "my-model",
        "bert",
        train_tokenizer(texts, "wordpiece", model_kind="masked"),
    )
    out = home / "runs" / "mine"
    run("dlama_arab_west", str(model), data_dir=str(data), language="en", out=out, progress=False)
    return Machine(home, mirror, out, data)


def leaks(folder: Path, machine: Machine) -> list[str]:
    """Each file under `folder` holding a path of the machine (the home folder's, the mirror's, the
    run's).
    """
    paths = {str(p).encode("utf-8") for p in (machine.home, machine.mirror, machine.run)}
    return [
        f"{file.relative_to(folder)}: {path.decode()}"
        for file in sorted(folder.rglob("*"))
        if file.is_file()
        for path in paths
        if path in file.read_bytes()
    ]


def test_nothing_written_for_others_names_the_machine(machine: Machine, tmp_path: Path) -> None:
    report = (machine.run / "report.md").read_text(encoding="utf-8")
    assert str(machine.home / "models" / "my-model") in report  # the local report keeps the path

    build_board([machine.run], tmp_path / "board")
    push_board("org/results", [machine.run], dry_run_dir=tmp_path / "space")
    export(tmp_path / "export", configs=["dlama_arab_west"], data_dirs={"dlama": str(machine.data)})
    push(
        "org/data",
        configs=["dlama_arab_west"],
        data_dirs={"dlama": str(machine.data)},
        dry_run_dir=tmp_path / "hub",
    )
    for folder in ("board", "space", "export", "hub"):
        assert leaks(tmp_path / folder, machine) == [], folder

    page = next((tmp_path / "space" / "data").glob("run-*.js")).read_text(encoding="utf-8")
    assert '"model":"my-model (sha256:' in page  # the local model by its folder's name and digest
    assert '"run":"mine"' in page  # the run by its name
    assert (
        "--model my-model " in page
        and "--data-dir $CULTURE_PROBE_MIRROR/manual/dlama/dlama-v1" in page
    )
    assert (
        "my-model (sha256:" in page and "is a local model folder: pass its path to --model." in page
    )
    board = (tmp_path / "space" / "data" / "board.js").read_text(encoding="utf-8")
    assert '"model":"my-model (sha256:' in board


def test_a_local_model_is_its_folder_name_and_digest_and_a_hub_id_is_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    identity = {
        "name_or_path": "/home/ann/models/my-model",
        "dtype": "torch.float32",
        "tokenizer_sha256": "ab",
    }
    moved = {**identity, "name_or_path": "/srv/elsewhere/my-model"}
    shown = shown_model("/home/ann/models/my-model", identity)
    assert shown.startswith("my-model (sha256:") and shown == shown_model(
        "../elsewhere/my-model", moved
    )
    assert shown != shown_model(
        "/home/ann/models/my-model", {**identity, "dtype": "torch.bfloat16"}
    )
    assert shown_model("org/bert-base", {"name_or_path": "org/bert-base"}) == "org/bert-base"
    assert shown_model("planted:maps_en", None) == "planted:maps_en"
    monkeypatch.setenv("HOME", str(tmp_path / "ann"))
    # the mirror in the home folder
    monkeypatch.setenv("CULTURE_PROBE_MIRROR", str(tmp_path / "ann" / "mirror"))
    text = f"--data-dir {tmp_path}/ann/mirror/manual/maps --rows {tmp_path}/ann/rows.jsonl {tmp_path}/anna/x"
    assert redacted(text, shared=True) == (
        f"--data-dir $CULTURE_PROBE_MIRROR/manual/maps --rows ~/rows.jsonl {tmp_path}/anna/x"
    )
    assert redacted(text) == text  # a local report keeps its paths


def test_list_and_the_skip_note_describe_the_data_a_user_has(mirror: Path) -> None:
    from culture_probe.data.registry import load_benchmark
    from culture_probe.errors import MissingDataError

    description = next(e.description for e in list_benchmarks() if e.name == "dlama_asia_west")
    assert "mirror" not in description and "release tarball holds both languages" in description
    with pytest.raises(MissingDataError) as refused:
        load_benchmark("dlama_asia_west")  # the mirror's copy lacks the Korean labels
    assert "mirror" not in str(refused.value) and str(mirror) not in str(refused.value)
    assert "the copy read (dlama-v1) lacks the Korean labels of asia-west" in str(refused.value)
