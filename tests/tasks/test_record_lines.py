"""items.jsonl lines written before `Record` became one type (the golden runs') read back to the
same line.
"""

import json
from pathlib import Path

import pytest

from culture_probe.errors import CultureProbeError
from culture_probe.rundir import read_records
from culture_probe.tasks import Record
from culture_probe.tasks.probes import RECORD_KINDS

GOLDEN = Path(__file__).parents[1] / "golden"


def golden_lines() -> list[dict]:
    """Every record line of the stored golden runs (written by the releases before this one)."""
    return [
        line
        for path in sorted(GOLDEN.glob("*.json"))
        for run in json.loads(path.read_text(encoding="utf-8"))["runs"].values()
        for line in run["records"]
    ]


def as_written(line: dict) -> str:
    """`line` as items.jsonl has always held it: identity keys first, then the fields in their
    order.
    """
    identity = ("id", "key", "tag", "stage", "probe")
    ordered = {
        **{k: line[k] for k in identity},
        **{k: v for k, v in line.items() if k not in identity},
    }
    return json.dumps(ordered, ensure_ascii=False) + "\n"


def test_older_lines_of_every_kind_read_back_byte_for_byte(tmp_path):
    lines = golden_lines()
    assert {line["probe"] for line in lines} == set(RECORD_KINDS)  # each kind has lines to read
    text = "".join(as_written(line) for line in lines)
    (tmp_path / "items.jsonl").write_text(text, encoding="utf-8")
    records = read_records(tmp_path / "items.jsonl")
    assert [r.kind for r in records] == [line["probe"] for line in lines]
    assert [r.skipped for r in records] == [line["probe"] == "skipped" for line in lines]
    assert "".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in records) == text


def test_a_skipped_line_keeps_its_reason_and_fields():
    line = {
        "id": "q1|en",
        "key": "q1|en#t",
        "tag": "t",
        "stage": "main",
        "probe": "skipped",
        "skipped": "no template",
    }
    record = Record.from_json(line)
    assert record.skipped and record["skipped"] == "no template" and record["key"] == "q1|en#t"


@pytest.mark.parametrize("kind", [None, "rank", "Score"])
def test_a_line_of_no_known_kind_is_refused(kind):
    with pytest.raises(CultureProbeError, match="Not a culture_probe record"):
        Record.from_json({"id": "x", "tag": "", "stage": "main", "probe": kind})


def test_a_record_of_no_known_kind_cannot_be_made():
    with pytest.raises(CultureProbeError, match="none of score, generate, fill_mask, skipped"):
        Record("x", "", "main", {}, kind="rank")  # type: ignore[arg-type]
