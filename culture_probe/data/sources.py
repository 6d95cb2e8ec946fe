"""Where source files come from (pinned URLs, the offline mirror) and how they are read safely.

Every builder fetches through `fetch`, so the mirror rule holds everywhere: with
`CULTURE_PROBE_MIRROR` set, a URL `https://HOST/PATH` is read from `$CULTURE_PROBE_MIRROR/HOST/PATH`
and never from the network.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import urllib.request
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from culture_probe.errors import MissingDataError, SourceFormatError
from culture_probe.util.jsonl import read_lines

MIRROR_ENV = "CULTURE_PROBE_MIRROR"
CACHE_ENV = "CULTURE_PROBE_CACHE"  # where downloads and planted models are kept


def mirror_root() -> str | None:
    """The offline mirror's folder (`CULTURE_PROBE_MIRROR`), or None."""
    return os.environ.get(MIRROR_ENV) or None


def mirror_path(url: str, mirror: str | os.PathLike | None = None) -> Path | None:
    """The local path of `url` under the mirror, or None when no mirror is configured."""
    root = mirror if mirror is not None else mirror_root()
    if not root:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"Only http(s) URLs can be mirrored, got {url!r}.")
    return Path(root) / parts.netloc / parts.path.lstrip("/")


def fetch(
    url: str, *, sha256: str | None = None, cache_dir: str | os.PathLike | None = None
) -> Path:
    """A local file holding `url`: from the mirror when one is set (no network fallback), else
    downloaded.

    `sha256` is a hex prefix the file's digest must start with; a mismatch is an error, never a
    warning.
    """
    local = mirror_path(url)
    if local is not None:
        if not local.is_file():
            raise MissingDataError(
                f"{MIRROR_ENV} is set but the mirror has no copy of {url}: expected the file {local}. "
                f"Put the file there, or unset {MIRROR_ENV} to download it."
            )
    else:
        local = _download(url, cache_dir)
    if sha256:
        verify_sha256(local, sha256)
    return local


def cache_root() -> Path:
    """The library's cache folder: `$CULTURE_PROBE_CACHE`, or ~/.cache/culture_probe (downloads,
    planted models).
    """
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "culture_probe")


def _download(url: str, cache_dir: str | os.PathLike | None) -> Path:
    default = cache_root() / "downloads"
    root = Path(cache_dir or default)
    target = root / urlsplit(url).netloc / urlsplit(url).path.lstrip("/")
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    try:
        with urllib.request.urlopen(url, timeout=60) as response, open(partial, "wb") as out:  # noqa: S310
            out.write(response.read())
    except OSError as error:
        raise MissingDataError(
            f"Could not download {url} ({error}). Offline? Set {MIRROR_ENV} to a local mirror of the sources."
        ) from error
    partial.replace(target)
    return target


REFETCH = "The file is not the pinned upstream release; re-download it or fix the mirror."


def _file_digest(path: str | os.PathLike, digest: Any) -> str:
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_of(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file."""
    return _file_digest(path, hashlib.sha256())


def verify_sha256(path: str | os.PathLike, prefix: str, *, fix: str = REFETCH) -> None:
    """Raise when the file's SHA-256 does not start with `prefix` (the pinned digest of the
    release); `fix` says what the user can do about it.
    """
    actual = sha256_of(path)
    if not actual.startswith(prefix.lower()):
        raise SourceFormatError(
            f"checksum mismatch: sha256 {actual[:16]}... does not start with the pinned {prefix[:12]}. {fix}",
            path=str(path),
        )


def git_blob_id(path: str | os.PathLike) -> str:
    """Git's blob id of a file: SHA-1 of "blob <size>", a NUL byte and the content (pins GitHub
    blobs).
    """
    header = f"blob {os.path.getsize(path)}\0".encode()
    return _file_digest(path, hashlib.sha1(header))  # git's blob id, not a security hash


def verify_git_blob(path: str | os.PathLike, blob_id: str) -> None:
    """Raise when the file is not the pinned git blob (the upstream file at the pinned commit)."""
    actual = git_blob_id(path)
    if actual != blob_id.lower():
        raise SourceFormatError(
            f"checksum mismatch: git blob id {actual} is not the pinned {blob_id}. {REFETCH}",
            path=str(path),
        )


def parse_literal(
    text: str, *, path: str | os.PathLike, line: int | None, expected: type | tuple[type, ...]
) -> Any:
    """A Python literal from a source file, read with `ast.literal_eval` (never executed).

    Anything that is not a literal of the `expected` type is an error naming the file and line.
    """
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as error:
        raise SourceFormatError(
            f"not a Python literal ({type(error).__name__}): {text[:80]!r}",
            path=str(path),
            line=line,
        ) from error
    if not isinstance(value, expected):
        names = " or ".join(
            t.__name__ for t in (expected if isinstance(expected, tuple) else (expected,))
        )
        raise SourceFormatError(
            f"expected a Python {names} literal, got {type(value).__name__}: {text[:80]!r}",
            path=str(path),
            line=line,
        )
    return value


def read_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line, split as `culture_probe.util.jsonl` splits
    them; a bad line (or bytes that are not UTF-8) is an error naming file and line.
    """
    yield from parse_jsonl(read_lines(path), path=str(path))


def parse_jsonl(lines: Iterable[str], *, path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """`read_jsonl` over lines already in memory (e.g. an archive member); `path` names them in
    errors.
    """
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise SourceFormatError(
                f"invalid JSON ({error.msg})", path=path, line=number
            ) from error
        if not isinstance(record, dict):
            raise SourceFormatError("expected a JSON object per line", path=path, line=number)
        yield number, record


def read_xlsx(
    path: str | os.PathLike, *, sheet: str | None = None, required: tuple[str, ...] = ()
) -> list[tuple[int, dict[str, Any]]]:
    """(spreadsheet row number, {header: value}) per data row, trailing empty rows dropped.

    Headers come from the first row. Missing `required` columns and empty sheets are errors naming
    the file.
    """
    import openpyxl

    try:
        book = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as error:  # openpyxl raises several unrelated types for a damaged file
        raise SourceFormatError(
            f"not a readable .xlsx workbook ({error})", path=str(path)
        ) from error
    try:
        worksheet = book[sheet] if sheet else book.worksheets[0]
        rows = [list(row) for row in worksheet.iter_rows(values_only=True)]
    finally:
        book.close()
    while rows and all(cell is None or str(cell).strip() == "" for cell in rows[-1]):
        rows.pop()
    if not rows:
        raise SourceFormatError("the sheet is empty (no header row)", path=str(path))
    header = [str(cell).strip() if cell is not None else "" for cell in rows[0]]
    missing = [name for name in required if name not in header]
    if missing:
        raise SourceFormatError(
            f"missing column(s) {missing}; the header row has {[h for h in header if h]}",
            path=str(path),
            line=1,
        )
    return [
        (number, dict(zip(header, row, strict=False)))
        for number, row in enumerate(rows[1:], start=2)
    ]
