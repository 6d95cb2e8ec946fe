"""Fault cases of the reliability table that need more than one command: damaged checkpoints, a
repeated fact in a release, a closed pipe, an unexpected error; and the docs' table, which must list
every case there is.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cases import CLI_CASES, OTHER_CASES

from culture_probe.curation.checkpoint import Checkpoints
from culture_probe.errors import CultureProbeError, SourceFormatError

REPO = Path(__file__).resolve().parents[2]


def test_an_edited_moved_or_damaged_checkpoint_is_an_error_naming_it(tmp_path):
    checkpoints = Checkpoints(tmp_path)
    assert checkpoints.cached("step1/P19", lambda: [{"s": "Q1"}]) == [{"s": "Q1"}]
    # read back
    assert checkpoints.cached("step1/P19", lambda: pytest.fail("recomputed")) == [{"s": "Q1"}]
    path = checkpoints.path("step1/P19")
    saved = json.loads(path.read_text())
    for damage, message in (
        # valid JSON, wrong content
        ({**saved, "value": [{"s": "Q2"}]}, "content changed since it was fetched"),
        # a file moved or copied from another key
        ({**saved, "key": "step1/P17"}, "made for 'step1/P17'"),
        ([{"s": "Q1"}], "not a checkpoint of this version"),  # an older, bare file
    ):
        path.write_text(json.dumps(damage))
        with pytest.raises(SourceFormatError, match=message) as error:
            checkpoints.cached("step1/P19", lambda: [])
        assert str(path) in str(error.value)
    path.write_bytes(b'{"key": "\xff"}')
    with pytest.raises(SourceFormatError, match="not UTF-8"):
        checkpoints.cached("step1/P19", lambda: [])


def test_a_repeated_fact_is_an_error_naming_both_rows(tmp_path):
    from dlama_fixture import write_dlama

    from culture_probe.data.registry import load_benchmark

    data = write_dlama(tmp_path / "dlama")
    path = data / "arab-west" / "dlama" / "en" / "P30_general_ARAB_REGION.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines, lines[0]]) + "\n")  # the first fact once more
    with pytest.raises(
        CultureProbeError, match=r"rows \d+ and \d+ share the id 'P30_general_ARAB_REGION_0\|en'"
    ):
        load_benchmark("dlama_arab_west", data_dir=str(data))


def test_a_closed_pipe_ends_quietly():
    done = subprocess.run(
        f"{sys.executable} -m culture_probe list | head -1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.stdout.startswith("group") and done.stderr == ""


def test_an_unexpected_error_keeps_its_traceback_and_asks_for_a_report(monkeypatch, capsys):
    from culture_probe import cli

    def bug(args):
        raise ZeroDivisionError("a bug")

    monkeypatch.setitem(cli.HANDLERS, "list", f"{__name__}:_bug")
    monkeypatch.setattr(sys.modules[__name__], "_bug", bug, raising=False)
    assert cli.main(["list"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "ZeroDivisionError: a bug" in err and "Please report it" in err
    # an expected error, with its traceback
    assert cli.main(["--debug", "report", "/nonexistent/run"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().endswith(
        "Pass the --out folder of a `culture-probe run`."
    )


def _docs_rows() -> list[list[str]]:
    text = (REPO / "docs" / "reliability.md").read_text(encoding="utf-8")
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("| `")
    ]
    return rows


def test_the_docs_table_lists_every_case_with_its_outcome_and_test():
    rows = {row[0].strip("`"): row for row in _docs_rows()}
    expected = {
        c.id: [f"`{c.id}`", c.action, c.outcome, "tests/reliability/test_cli_cases.py"]
        for c in CLI_CASES
    }
    expected |= {
        i: [f"`{i}`", action, outcome, test.split("::")[0]]
        for i, action, outcome, test in OTHER_CASES
    }
    assert {k: [*v[:3], v[3].split("::")[0].strip("`")] for k, v in rows.items()} == expected
    assert len(rows) >= 60
    for _, _, _, test in OTHER_CASES:  # every test the table names exists
        file, name = test.split("::")
        assert re.search(rf"^def {name}\(", (REPO / file).read_text(), re.MULTILINE), test


@pytest.mark.parametrize("size", ['"NaN"', '"-5"', '"big"', '"12.5"'])
def test_an_article_size_that_is_no_byte_count_is_an_error_naming_the_article(tmp_path, size):
    from culture_probe.curation.endpoints import EmbeddedStore
    from culture_probe.curation.sizes import StoreSizes

    article = "https://en.wikipedia.org/wiki/Cairo"
    dump = tmp_path / "sizes.ttl"
    dump.write_text(f"<{article}> <http://schema.org/contentSize> {size} .\n")
    with pytest.raises(
        SourceFormatError, match=f"the size of {article} is .*not a whole number of bytes"
    ):
        StoreSizes(EmbeddedStore([dump])).sizes([article])
    dump.write_text(f"<{article}> <http://schema.org/contentSize> 1234 .\n")
    assert StoreSizes(EmbeddedStore([dump])).sizes([article]) == {article: 1234}
