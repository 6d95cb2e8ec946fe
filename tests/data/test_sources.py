"""Source access: the mirror rule, pinned digests, and safe readers that name the file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from culture_probe.data import sources
from culture_probe.errors import MissingDataError, SourceFormatError


def test_mirror_path_maps_host_and_path(tmp_path: Path) -> None:
    url = "https://raw.githubusercontent.com/org/repo/abc/data/x.jsonl"
    assert (
        sources.mirror_path(url, tmp_path)
        == tmp_path / "raw.githubusercontent.com/org/repo/abc/data/x.jsonl"
    )
    assert (
        sources.mirror_path("http://cistern.cis.lmu.de/mlama/mlama1.1.zip", tmp_path)
        == tmp_path / "cistern.cis.lmu.de/mlama/mlama1.1.zip"
    )
    with pytest.raises(ValueError, match="Only http"):
        sources.mirror_path("ftp://host/x", tmp_path)


def test_no_mirror_configured(no_mirror: None) -> None:
    assert sources.mirror_path("https://host/x") is None


def test_fetch_reads_the_mirror_and_never_falls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(sources.MIRROR_ENV, str(tmp_path))
    (tmp_path / "host/a").mkdir(parents=True)
    (tmp_path / "host/a/file.txt").write_bytes(b"hello\n")
    assert sources.fetch("https://host/a/file.txt").read_bytes() == b"hello\n"
    with pytest.raises(
        MissingDataError, match=rf"expected the file {tmp_path}/host/a/missing\.txt"
    ):
        sources.fetch("https://host/a/missing.txt")


def test_sha256_prefix_is_verified(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"hello\n")
    # sha256("hello\n") = 5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03
    sources.verify_sha256(path, "5891b5b522d5")
    with pytest.raises(
        SourceFormatError, match=r"f: checksum mismatch: sha256 5891b5b522d5df08.*pinned 000000"
    ):
        sources.verify_sha256(path, "000000")


def test_git_blob_id_matches_git(tmp_path: Path) -> None:
    # well-known ids: `git hash-object` of an empty file and of "hello\n"
    empty, hello = tmp_path / "empty", tmp_path / "hello"
    empty.write_bytes(b"")
    hello.write_bytes(b"hello\n")
    assert sources.git_blob_id(empty) == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
    assert sources.git_blob_id(hello) == "ce013625030ba8dba906f756967f9e9ca394464a"
    sources.verify_git_blob(hello, "CE013625030BA8DBA906F756967F9E9CA394464A")
    with pytest.raises(SourceFormatError, match=r"hello: checksum mismatch: git blob id ce0136"):
        sources.verify_git_blob(hello, "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391")


def test_parse_literal_never_executes(tmp_path: Path) -> None:
    assert sources.parse_literal("{'a, b'}", path="f.py", line=3, expected=set) == {"a, b"}
    assert sources.parse_literal("[1, 2]", path="f.py", line=3, expected=(list, tuple)) == [1, 2]
    target = tmp_path / "pwned"
    with pytest.raises(SourceFormatError, match=r"f\.py:3: not a Python literal \(ValueError\)"):
        sources.parse_literal(f"open({str(target)!r}, 'w')", path="f.py", line=3, expected=set)
    assert not target.exists()
    with pytest.raises(
        SourceFormatError, match=r"f\.py:7: expected a Python list or tuple literal, got dict"
    ):
        sources.parse_literal("{'a': 1}", path="f.py", line=7, expected=(list, tuple))


def test_read_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2}\n', encoding="utf-8")
    assert list(sources.read_jsonl(path)) == [(1, {"a": 1}), (3, {"a": 2})]
    path.write_text('{"a": 1}\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(SourceFormatError, match=r"x\.jsonl:2: expected a JSON object per line"):
        list(sources.read_jsonl(path))
    path.write_text('{"a": 1}\n\n{"a": \n', encoding="utf-8")
    with pytest.raises(SourceFormatError, match=r"x\.jsonl:3: invalid JSON"):
        list(sources.read_jsonl(path))


def test_read_xlsx(tmp_path: Path) -> None:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    for row in (["Entity", "Type"], ["Cairo", "city"], ["Paris", None], [None, None], ["", " "]):
        sheet.append(row)
    book.save(tmp_path / "x.xlsx")
    rows = sources.read_xlsx(tmp_path / "x.xlsx", required=("Entity",))
    assert rows == [
        (2, {"Entity": "Cairo", "Type": "city"}),
        (3, {"Entity": "Paris", "Type": None}),
    ]
    with pytest.raises(SourceFormatError, match=r"x\.xlsx:1: missing column\(s\) \['Prompt'\]"):
        sources.read_xlsx(tmp_path / "x.xlsx", required=("Prompt",))
    (tmp_path / "bad.xlsx").write_text("no zip")
    with pytest.raises(SourceFormatError, match=r"bad\.xlsx: not a readable \.xlsx workbook"):
        sources.read_xlsx(tmp_path / "bad.xlsx")
    openpyxl.Workbook().save(tmp_path / "empty.xlsx")
    with pytest.raises(SourceFormatError, match=r"empty\.xlsx: the sheet is empty"):
        sources.read_xlsx(tmp_path / "empty.xlsx")
