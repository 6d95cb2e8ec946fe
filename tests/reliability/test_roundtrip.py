"""What the library writes it reads back: any Unicode text, the separators U+0085, U+2028 and U+2029
included (a Wikidata label, a `--rows` file, a model's answer can hold them), round-trips through
every JSON Lines file (`culture_probe.util.jsonl`), and runs written before the separators were
escaped, with them raw, read back whole.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from dlama_fixture import FACTS, write_dlama
from hypothesis import given, settings
from hypothesis import strategies as st

from culture_probe import rundir
from culture_probe.cli import main
from culture_probe.data.sources import read_jsonl
from culture_probe.engine.types import CandidateScores
from culture_probe.errors import CultureProbeError
from culture_probe.tasks.probes import Record
from culture_probe.util import jsonl

SPLITS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # every character str.splitlines splits on
RAW = "\x85\u2028\u2029"  # those of them json.dumps(ensure_ascii=False) leaves raw in a string
IDENTITY = ("id", "key", "tag", "stage", "probe")  # a record's keys that are not its fields


def values(text: st.SearchStrategy[str]) -> st.SearchStrategy[object]:
    """JSON values whose strings, keys included, are drawn from `text`, nested."""
    leaves = st.none() | st.booleans() | st.integers() | text
    return st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
        max_leaves=12,
    )


TEXT = st.text(st.characters(codec="utf-8") | st.sampled_from(SPLITS))  # any text UTF-8 can hold
PLAIN = st.text(st.characters(codec="utf-8", exclude_characters=RAW))


def as_older_versions_wrote(rows: list) -> str:
    """JSON Lines as culture_probe wrote them before the escapes: the separators raw."""
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def parsed(data: bytes) -> list:
    return [json.loads(line) for line in jsonl.decode(data, path="x.jsonl")]


# ---------------------------------------------------------------- the writer and the reader


@settings(max_examples=300, deadline=None)
@given(st.lists(values(TEXT), max_size=4))
def test_any_text_round_trips_through_the_jsonl_writer_and_reader(rows):
    text = "".join(jsonl.line(row) for row in rows)
    # one line per row, even for str.splitlines and editors
    assert len(text.splitlines()) == len(rows)
    assert parsed(text.encode("utf-8")) == rows
    # a user's file with Windows line ends
    assert parsed(text.replace("\n", "\r\n").encode("utf-8")) == rows
    # raw separators, written whole
    assert parsed(as_older_versions_wrote(rows).encode("utf-8")) == rows


@settings(max_examples=100, deadline=None)
@given(values(PLAIN))
def test_text_without_the_separators_is_written_byte_for_byte_as_before(value):
    assert jsonl.line(value) == json.dumps(value, ensure_ascii=False) + "\n"


FIELDS = st.dictionaries(TEXT.filter(lambda key: key not in IDENTITY), values(TEXT), max_size=3)
RECORDS = st.lists(st.builds(Record, TEXT, TEXT, TEXT, FIELDS, kind=st.just("score")), max_size=3)


@settings(max_examples=100, deadline=None)
@given(RECORDS)
def test_records_round_trip_through_items_jsonl_written_now_or_before_the_escapes(records):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "items.jsonl"
        writer = rundir.RecordWriter(path, resuming=False)
        for record in records:
            writer.append(record)
        writer.close()
        assert rundir.read_records(path) == records
        rundir.RecordWriter(path, resuming=True).close()  # a resume cuts nothing of a whole file
        assert rundir.read_records(path) == records
        path.write_text(as_older_versions_wrote([r.to_json() for r in records]), encoding="utf-8")
        assert rundir.read_records(path) == records


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.dictionaries(TEXT, values(TEXT), min_size=1, max_size=3), min_size=1, max_size=3)
)
def test_rows_files_round_trip_written_now_or_before_the_escapes(rows):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "rows.jsonl"
        rundir.write_jsonl(path, rows)
        assert rundir.read_rows(path) == rows
        path.write_text(as_older_versions_wrote(rows), encoding="utf-8")
        assert [row for _, row in read_jsonl(path)] == rows


def test_a_damaged_line_after_raw_separators_is_named_by_its_own_line_number(tmp_path):
    path = tmp_path / "items.jsonl"
    line = Record("q\u2028", "t", "main", {"text": "a\u2029b\x85c"}, kind="score").to_json()
    path.write_text(
        as_older_versions_wrote([line]) + "{oops\n" + as_older_versions_wrote([line]),
        encoding="utf-8",
    )
    with pytest.raises(
        CultureProbeError, match=r"items\.jsonl:2 is not valid JSON; the run directory is damaged"
    ):
        rundir.read_records(path)
    with pytest.raises(CultureProbeError, match=r"items\.jsonl:2: invalid JSON"):
        list(read_jsonl(path))
    path.write_bytes(as_older_versions_wrote([line]).encode("utf-8") + b'{"a": "\xff"}\n')
    with pytest.raises(CultureProbeError, match=r"items\.jsonl:2: not UTF-8 text"):
        list(read_jsonl(path))
    # a crash that cut the last line inside a character: dropped like any cut line, redone on resume
    path.write_bytes(
        as_older_versions_wrote([line]).encode("utf-8") + '{"id": "\u2028'.encode()[:-1]
    )
    assert [r.to_json() for r in rundir.read_records(path)] == [line]


# ---------------------------------------------------------------- runs: written, then read by every
# command


class Ordered:
    """A stand-in model: every candidate ranked in the order given; generations hold the three
    separators.
    """

    kind = "masked"
    identity = {"name_or_path": "ordered"}

    def score(self, requests, options=None):
        return [
            CandidateScores(
                r.candidates, -np.arange(1.0, len(r.candidates) + 1), np.ones(len(r.candidates))
            )
            for r in requests
        ]

    def generate(self, prompts, options=None):
        return [" nothing\u2028more\u2029than\x85this"] * len(prompts)


@pytest.fixture
def stand_in(monkeypatch):
    """`--model` loads `Ordered` of the kind a test sets in `stand_in.kind`."""
    model = Ordered()
    monkeypatch.setattr("culture_probe.engine.loading.ModelSpec.load", lambda spec: model)
    monkeypatch.setattr("culture_probe.engine.loading.ModelSpec.kind", lambda spec: model.kind)
    return model


def command(capsys, *argv) -> str:
    """Run a command that must succeed; its stderr."""
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 0, err[-2000:]
    return err


def reads_back(capsys, runs: list[Path], resume: Callable[[Path], tuple], tmp: Path) -> None:
    """`report` and `--resume` (which redoes nothing) on each run, then `compare` and the board of
    them all.
    """
    for run in runs:
        items = (run / rundir.ITEMS_FILE).read_bytes()
        command(capsys, "report", run)
        command(capsys, *resume(run), "--resume")
        assert (run / rundir.ITEMS_FILE).read_bytes() == items
    command(capsys, "compare", *runs, "--unpaired", "--out", tmp / "compared")
    command(capsys, "board", *runs, "--out", tmp / "board")


def labelled(facts: dict) -> dict:
    """The DLAMA fixture's facts with the separators in a subject and in object labels (raw in the
    data files).
    """
    return {
        (region, subject + ("\u2028" if subject == "Egypt" else "")): (
            uris,
            [
                label.replace(" ", "\u2029") + ("\x85" if label == "Asia" else "")
                for label in labels
            ],
            scores,
        )
        for (region, subject), (uris, labels, scores) in facts.items()
    }


def dlama_runs(capsys, tmp: Path) -> tuple[list[Path], Callable[[Path], tuple]]:
    data = write_dlama(tmp / "dlama", labelled(FACTS))
    run = ("run", "dlama_arab_west", "--model", "m", "--data-dir", data)
    runs = [tmp / "en", tmp / "ar"]
    for folder in runs:
        command(capsys, *run, "--language", folder.name, "--out", folder)
    return runs, lambda folder: (*run, "--language", folder.name, "--out", folder)


def test_a_run_whose_labels_hold_separators_reads_back_in_every_command(tmp_path, stand_in, capsys):
    runs, resume = dlama_runs(capsys, tmp_path)
    text = (runs[0] / rundir.ITEMS_FILE).read_text(encoding="utf-8")
    records = rundir.read_records(runs[0] / rundir.ITEMS_FILE)
    assert (
        len(text.splitlines()) == len(records) == len(FACTS)
        and "\\u2029" in text
        and "\\u0085" in text
    )
    assert {"North\u2029America", "Asia\x85"} <= {label for r in records for label in r["top"]}
    reads_back(capsys, runs, resume, tmp_path)
    command(capsys, "consistency", *runs, "--out", tmp_path / "consistency")


def test_rows_and_generated_text_with_separators_read_back_in_every_command(
    tmp_path, stand_in, capsys
):
    stand_in.kind = "causal"
    row = {
        "language": "en",
        "proverb": "Look\u2028before you\x85leap",
        "conversation": 'Person 1: "Should I sign now?"\u2029Person 2: "Look before you leap."',
        "answer1": "Think\u2028first.",
        "answer2": "Do not think first.",
        "is_figurative": True,
        "label": "a",
    }
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        as_older_versions_wrote([{**row, "id": f"r{i}\u2028"} for i in range(3)]), encoding="utf-8"
    )
    first, second = tmp_path / "first", tmp_path / "second"
    command(capsys, "run", "maps_en", "--model", "m", "--rows", rows, "--out", first)
    command(
        capsys,
        "run",
        "maps_en",
        "--model",
        "m",
        "--rows",
        first / rundir.ROWS_FILE,
        "--out",
        second,
    )
    records = rundir.read_records(first / rundir.ITEMS_FILE)
    assert {r.item_id for r in records} == {"r0\u2028", "r1\u2028", "r2\u2028"}
    assert any(r.get("output") == " nothing\u2028more\u2029than\x85this" for r in records)
    assert rundir.read_rows(first / rundir.ROWS_FILE) == rundir.read_rows(rows)
    resume = lambda folder: ("run", "maps_en", "--model", "m", "--rows", rows, "--out", folder)  # noqa: E731
    reads_back(capsys, [first, second], resume, tmp_path)


def test_a_run_written_before_the_escapes_reads_back_whole(tmp_path, stand_in, capsys):
    runs, resume = dlama_runs(capsys, tmp_path)
    before = {}
    for run in runs:  # items.jsonl as the releases before the escapes wrote it: the separators raw
        items = run / rundir.ITEMS_FILE
        before[run] = rundir.read_records(items)
        items.write_text(
            as_older_versions_wrote([r.to_json() for r in before[run]]), encoding="utf-8"
        )
        assert "\u2029" in items.read_text(encoding="utf-8")
    reads_back(capsys, runs, resume, tmp_path)
    command(capsys, "consistency", *runs, "--out", tmp_path / "consistency")
    assert all(rundir.read_records(run / rundir.ITEMS_FILE) == before[run] for run in runs)
