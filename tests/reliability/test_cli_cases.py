"""Every `CLI_CASES` command (bad input a careless user types) ends in one line on stderr naming the
problem and the fix, with exit code 2 (or the stated code), and leaves the user's files as they
were.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from cases import CLI_CASES, CliCase
from dlama_fixture import TableScorer, spec_table, write_dlama

from culture_probe.cli import main


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """What the cases share: a tiny GPT-2 folder, a DLAMA folder, a finished run and a plain
    file.
    """
    from culture_probe.models import save_tiny, train_tokenizer
    from culture_probe.runner import run

    root = tmp_path_factory.mktemp("world")
    tokenizer = train_tokenizer(
        ["Egypt is located in Africa ."] * 4, "bpe", vocab_size=120, model_kind="causal"
    )
    model = save_tiny(root / "gpt2", "gpt2", tokenizer)
    data = write_dlama(root / "dlama")
    run(
        "dlama_arab_west",
        TableScorer(spec_table()),
        data_dir=str(data),
        out=root / "run",
        progress=False,
    )
    run(
        "dlama_arab_west",
        TableScorer(spec_table()),
        data_dir=str(data),
        out=root / "subset",
        progress=False,
        limit=2,
    )
    (root / "rows.jsonl").write_text(json.dumps({"id": "x"}) + "\n")
    return {
        "model": model,
        "data": data,
        "run": root / "run",
        "subset": root / "subset",
        "file": root / "rows.jsonl",
    }


def _copy_run(world: dict[str, Path], tmp: Path) -> Path:
    shutil.copytree(world["run"], tmp / "run")
    return tmp / "run"


def _lock(world: dict[str, Path], tmp: Path) -> None:
    from filelock import FileLock

    lock = FileLock(_copy_run(world, tmp) / ".lock")
    lock.acquire()
    _HELD.append(lock)  # released after the case


def _cut(name: str) -> Callable[[dict[str, Path], Path], None]:
    def cut(world: dict[str, Path], tmp: Path) -> None:
        path = _copy_run(world, tmp) / name
        path.write_text(path.read_text()[:40])

    return cut


_HELD: list = []
SETUPS: dict[str, Callable[[dict[str, Path], Path], None]] = {
    "empty_rows": lambda w, t: (t / "empty.jsonl").write_text("\n"),
    "latin1_rows": lambda w, t: (t / "latin1.jsonl").write_bytes(
        '{"id": "café"}\n'.encode("latin-1")
    ),
    "broken_rows": lambda w, t: (t / "broken.jsonl").write_text('{"id": "a"}\n{"id": \n'),
    "wrong_rows": lambda w, t: (t / "wrong.jsonl").write_text(
        json.dumps({"id": "q1", "question": "?"}) + "\n"
    ),
    "a_file": lambda w, t: (t / "notes.txt").write_text("my notes\n"),
    "model_folder": lambda w, t: shutil.copytree(w["model"], t / "model"),
    "finished_run": lambda w, t: _copy_run(w, t),
    "run_without_config": lambda w, t: (_copy_run(w, t) / "config.json").unlink(),
    "locked_run": _lock,
    "truncated_metrics": _cut("metrics.json"),
    "truncated_config": _cut("config.json"),
    "damaged_items": lambda w, t: (_copy_run(w, t) / "items.jsonl").write_text("{oops\n{}\n"),
    "two_runs": lambda w, t: (_copy_run(w, t), shutil.copytree(w["subset"], t / "subset")),
    "turtle": lambda w, t: (t / "d.ttl").write_text(
        '<http://www.wikidata.org/entity/Q1> <http://www.w3.org/2000/01/rdf-schema#label> "x"@en .\n'
    ),
    "broken_turtle": lambda w, t: (t / "broken.ttl").write_text("<http://a> <http://b> .\n"),
}


@pytest.mark.parametrize("case", CLI_CASES, ids=[c.id for c in CLI_CASES])
def test_bad_input_gets_one_clear_line(case: CliCase, world, tmp_path, capsys):
    if case.setup:
        SETUPS[case.setup](world, tmp_path)
    before = {name: (tmp_path / name).read_bytes() for name in case.unchanged}
    values = {k: str(v) for k, v in world.items()} | {"tmp": str(tmp_path), "folder": str(tmp_path)}
    argv = [part.format(**values) for part in case.argv]
    try:
        try:
            code = main(argv)
        except SystemExit as stop:  # argparse's own errors and --version
            code = stop.code
    finally:
        while _HELD:
            _HELD.pop().release()
    captured = capsys.readouterr()
    assert code == case.code, captured.err[-2000:]
    if case.code == 2:
        # progress
        lines = [line for line in captured.err.splitlines() if line.strip() and "it/s]" not in line]
        assert "Traceback" not in captured.err, captured.err[-2000:]
        # argparse: usage first
        assert len(lines) == 1 or "usage: culture-probe" in lines[0], captured.err[-2000:]
        assert re.search(case.says, lines[-1]), lines[-1]
    for name, content in before.items():
        assert (tmp_path / name).read_bytes() == content, f"{name} was changed"
