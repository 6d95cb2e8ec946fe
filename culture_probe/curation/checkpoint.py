"""Checkpoints: every fetched chunk and every finished step is a JSON file, written atomically.

A file is written to `<name>.tmp` and renamed into place, so a run killed at any moment leaves
either the whole file or none of it. Chunk keys carry a hash of the chunk's inputs, so a rerun
reuses exactly the chunks whose inputs (query text, languages, top, ...) are unchanged, and a rerun
after a crash refetches only what was not saved. Each file carries its key and a digest of its
content, checked before use, so an edited, moved or damaged checkpoint is an error naming it, never
silently used. Keys do not depend on the endpoint's address, so a restarted server on another port
resumes the same run; the folder's manifest records which endpoint it was fetched from (its URL, or
its dumps' names, sizes and sha256), and resuming against another endpoint is refused: the output
would mix two sources.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from culture_probe.errors import CultureProbeError, SourceFormatError
from culture_probe.util import jsonl

T = TypeVar("T")
MANIFEST = "manifest"


def digest(*parts: Any) -> str:
    """A short hash of JSON-serialisable inputs: checkpoint keys carry it, so changed inputs never
    hit old files.
    """
    text = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def chunk_key(index: int, *inputs: Any) -> str:
    """A file-name-safe key for chunk `index` produced from `inputs` (e.g. the query text)."""
    return f"{index:05d}_{digest(*inputs)}"


def write_json_atomic(path: Path, value: Any) -> None:
    """Write `value` as JSON so that `path` is never seen half-written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        json.dump(value, handle, ensure_ascii=False)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    """Write records as UTF-8 JSON lines, atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        for item in records:
            handle.write(jsonl.line(item))
    os.replace(tmp, path)


def _content_digest(value: Any) -> str:
    return hashlib.sha256(
        json.dumps(value, sort_keys=True, ensure_ascii=False).encode("utf-8")
    ).hexdigest()


class Checkpoints:
    """A folder of JSON checkpoints addressed by relative keys such as
    `step1_facts/P19_ARAB_REGION/Q79`.
    """

    def __init__(self, root: str | Path, endpoint: dict[str, Any] | None = None):
        self.root = Path(root)
        self.hits = 0
        self.misses = 0
        if endpoint is not None:
            self._check_endpoint(endpoint)

    def _check_endpoint(self, endpoint: dict[str, Any]) -> None:
        """Record `endpoint` in the manifest, or refuse when the folder was fetched from another
        endpoint.
        """
        path = self.path(MANIFEST)
        recorded = (
            json.loads(path.read_text(encoding="utf-8")).get("endpoint") if path.is_file() else None
        )
        if recorded is None:
            write_json_atomic(path, {"endpoint": endpoint})
        elif recorded != endpoint:
            raise CultureProbeError(
                f"The checkpoints in {self.root} were fetched from {json.dumps(recorded)}, not from "
                f"{json.dumps(endpoint)}: resuming would mix two sources. Rerun with the original endpoint, or "
                "start afresh with another --out (or --checkpoints) folder."
            )

    def path(self, key: str) -> Path:
        """The file of `key`."""
        return self.root / f"{key}.json"

    def cached(self, key: str, compute: Callable[[], T]) -> T:
        """The saved value of `key`, or `compute()` saved under `key` first."""
        path = self.path(key)
        if path.is_file():
            value = self._read(path, key)
            self.hits += 1
            return value
        value = compute()
        write_json_atomic(path, {"key": key, "sha256": _content_digest(value), "value": value})
        self.misses += 1
        return value

    @staticmethod
    def _read(path: Path, key: str) -> Any:
        """A checkpoint's value, after checking that it was made for `key` and not changed since: a
        damaged, edited, moved or older-format file is an error naming it (delete it to refetch that
        chunk).
        """
        fix = "delete the file to refetch that chunk"
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise SourceFormatError(
                f"corrupt checkpoint ({error.msg}); {fix}", path=str(path), line=error.lineno
            ) from error
        except UnicodeDecodeError:
            raise SourceFormatError(
                f"corrupt checkpoint (not UTF-8); {fix}", path=str(path)
            ) from None
        if not isinstance(saved, dict) or set(saved) != {"key", "sha256", "value"}:
            raise SourceFormatError(
                f"not a checkpoint of this version (no key and digest); {fix}", path=str(path)
            )
        if saved["key"] != key:
            raise SourceFormatError(
                f"checkpoint made for {saved['key']!r}, read as {key!r} (a moved or copied file); {fix}",
                path=str(path),
            )
        if saved["sha256"] != _content_digest(saved["value"]):
            raise SourceFormatError(
                f"checkpoint content changed since it was fetched; {fix}", path=str(path)
            )
        return saved["value"]

    def keys(self, prefix: str = "") -> list[str]:
        """Every saved key under `prefix`, sorted."""
        base = self.root / prefix if prefix else self.root
        if not base.exists():
            return []
        keys = (str(p.relative_to(self.root))[: -len(".json")] for p in base.rglob("*.json"))
        return sorted(key for key in keys if key != MANIFEST)
