"""A SQLite result cache: one file per model, shared by every run and config, compact, safe to
share.

One row per (model, request, scoring options), stored as binary arrays: the candidates' token counts
(uint8, or uint16 when a candidate has 256 tokens or more), their summed log-probs (float64, so a
cached score equals a fresh one bit for bit) and, only for requests that kept them, the per-token
log-probs (float32: the model computed them in float32, so nothing is lost). The candidates
themselves are not stored: the request key covers them. Each row carries a CRC32 of its key and
arrays, so a damaged row is detected, reported and computed again, never read; a file SQLite cannot
read is moved aside (`<file>.corrupt-<time>`), reported, and started anew. A full or read-only
device is no damage: it is an error naming the cache's folder, and the file is left as it is. Rows
are committed batch by batch in WAL mode, so a run killed with SIGKILL loses at most the batch in
flight, and several processes can read and write one file at once.
"""

from __future__ import annotations

import errno
import hashlib
import json
import sqlite3
import time
import warnings
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from culture_probe.engine.types import CandidateScores, GenerateOptions
from culture_probe.errors import CultureProbeError

TABLE = "scores_v2"  # v1 (JSON text values, per run) is ignored: its rows are simply not found
_SCHEMA = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    model BLOB NOT NULL, options BLOB NOT NULL, request BLOB NOT NULL,
    n_tokens BLOB NOT NULL, sums BLOB NOT NULL, tokens BLOB, crc INTEGER NOT NULL,
    PRIMARY KEY (model, options, request)) WITHOUT ROWID"""


_TEXTS = """CREATE TABLE IF NOT EXISTS texts (
    model BLOB NOT NULL, options BLOB NOT NULL, prompt BLOB NOT NULL, text TEXT NOT NULL, crc INTEGER NOT NULL,
    PRIMARY KEY (model, options, prompt)) WITHOUT ROWID"""


class CacheCorruptionWarning(UserWarning):
    """A cache file or row was damaged; it was set aside and the scores are computed again."""


def cache_path(
    cache: str | Path | None, cache_dir: str | Path | None, identity: Mapping[str, Any]
) -> Path | None:
    """Where a model's scores are cached: the file `cache`, else the model's own file in the folder
    `cache_dir` (its readable name, then its identity digest, which decides), else nowhere.
    """
    if cache is not None:
        return Path(cache)
    if cache_dir is None:
        return None
    slug = "".join(
        c if c.isalnum() or c in "-_." else "_"
        for c in Path(identity["name_or_path"]).name or "model"
    )
    return Path(cache_dir) / f"{slug[:60]}-{identity_digest(identity)[:16]}.sqlite"


def identity_digest(identity: Mapping[str, Any]) -> str:
    """The digest of a model's identity: its cache key, and the name of its file in a cache
    folder.
    """
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()


def digest(text: str) -> bytes:
    """16 bytes that stand for a long key (a model identity, a request, an options digest)."""
    return hashlib.sha256(text.encode("utf-8")).digest()[:16]


class ScoreCache:
    """Scores stored per request key; `model` and `options` are digests of what else changes the
    numbers.
    """

    def __init__(self, path: str | Path, *, model: str, options: str):
        self.path = Path(path)
        if self.path.is_dir():
            raise CultureProbeError(
                f"The score cache {self.path} is a folder; pass a file path (or cache_dir=)."
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.model, self.options = digest(model), digest(options)
        try:
            self._db = _connect(self.path)
        except sqlite3.DatabaseError as error:
            self._db = self._start_anew(self._damage(error))

    def get(
        self, requests: Mapping[str, tuple[str, ...]], *, with_tokens: bool = False
    ) -> dict[str, CandidateScores]:
        """The cached scores among `requests` (request key -> its candidates); with `with_tokens`,
        only rows that kept the per-token log-probs.
        """
        found = {}
        for key, candidates in requests.items():
            row = self._fetch(digest(key))
            if row is None or (with_tokens and row[2] is None):
                continue
            scores = self._decode(key, candidates, row)
            if scores is not None:
                found[key] = scores
        return found

    def put(self, items: dict[str, CandidateScores], *, with_tokens: bool = False) -> None:
        """Store `items` (request key -> scores) in one transaction."""
        rows = [
            (self.model, self.options, digest(key), *_encode(digest(key), value, with_tokens))
            for key, value in items.items()
        ]
        self._write(f"INSERT OR REPLACE INTO {TABLE} VALUES (?, ?, ?, ?, ?, ?, ?)", rows)

    def get_texts(self, prompts: list[str]) -> dict[str, str]:
        """Generated texts stored for `prompts` (a served model's answers: an interrupted run asks
        them once); a damaged row is reported, dropped and asked again, as a damaged score row is.
        """
        found = {}
        for prompt in dict.fromkeys(prompts):
            key = digest(prompt)
            row = self._query(
                "SELECT text, crc FROM texts WHERE model=? AND options=? AND prompt=?",
                (self.model, self.options, key),
            )
            if row is None:
                continue
            if (
                isinstance(row[0], str)
                and zlib.crc32(row[0].encode("utf-8"), zlib.crc32(key)) == row[1]
            ):
                found[prompt] = row[0]
                continue
            warnings.warn(
                f"Score cache {self.path}: a damaged text row was dropped and will be asked again.",
                CacheCorruptionWarning,
                stacklevel=2,
            )
            self._write(
                "DELETE FROM texts WHERE model=? AND options=? AND prompt=?",
                [(self.model, self.options, key)],
            )
        return found

    def put_texts(self, texts: dict[str, str]) -> None:
        """Store generated texts (prompt -> text) in one transaction."""
        rows = [
            (
                self.model,
                self.options,
                digest(p),
                t,
                zlib.crc32(t.encode("utf-8"), zlib.crc32(digest(p))),
            )
            for p, t in texts.items()
        ]
        self._write("INSERT OR REPLACE INTO texts VALUES (?, ?, ?, ?, ?)", rows)

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    # ------------------------------------------------------------ damage

    def _fetch(self, request: bytes) -> tuple[bytes, bytes, bytes | None, int] | None:
        return self._query(
            f"SELECT n_tokens, sums, tokens, crc FROM {TABLE} WHERE model=? AND options=? AND request=?",
            (self.model, self.options, request),
        )

    def _query(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """One row, or None; a file SQLite cannot read is moved aside and started anew (then nothing
        is found).
        """
        try:
            row: tuple[Any, ...] | None = self._db.execute(sql, params).fetchone()
            return row
        except sqlite3.DatabaseError as error:
            self._db = self._start_anew(self._damage(error))
            return None

    def _write(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        """Rows in one transaction; a file SQLite cannot write is moved aside and the rows go to a
        new one.
        """
        try:
            with self._db:
                self._db.executemany(sql, rows)
        except sqlite3.DatabaseError as error:
            self._db = self._start_anew(self._damage(error))
            with self._db:
                self._db.executemany(sql, rows)

    def _decode(
        self, key: str, candidates: tuple[str, ...], row: tuple[bytes, bytes, bytes | None, int]
    ) -> CandidateScores | None:
        """The row's scores, or None (reported, and the row dropped) when its checksum or shape does
        not match.
        """
        n_tokens, sums, tokens, crc = row
        request = digest(key)
        if _crc(request, n_tokens, sums, tokens) != crc or not _fits(
            candidates, n_tokens, sums, tokens
        ):
            warnings.warn(
                f"Score cache {self.path}: a damaged row was dropped and will be computed again.",
                CacheCorruptionWarning,
                stacklevel=3,
            )
            self._write(
                f"DELETE FROM {TABLE} WHERE model=? AND options=? AND request=?",
                [(self.model, self.options, request)],
            )
            return None
        return _decode(candidates, n_tokens, sums, tokens)

    def _damage(self, error: sqlite3.DatabaseError) -> sqlite3.DatabaseError:
        """`error` when it means a damaged file; a lock held too long is raised as it is, and a full
        or read-only device as the OSError it stands for, naming the cache's folder: the file is
        healthy, so never moved aside.
        """
        if _is_busy(error):
            raise error
        text = str(error).lower()
        place = next((code for words, code in _PLACE_ERRORS if any(w in text for w in words)), None)
        if place is not None:
            raise OSError(place, f"SQLite: {error}", str(self.path.parent)) from error
        return error

    def _start_anew(self, error: Exception) -> sqlite3.Connection:
        """Move a file SQLite cannot read aside (kept for inspection), report it, and open a new
        one.
        """
        aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
        for suffix in ("", "-wal", "-shm"):
            try:
                Path(f"{self.path}{suffix}").rename(f"{aside}{suffix}")
            except FileNotFoundError:
                pass  # another process moved it first, or there was none
        warnings.warn(
            f"Score cache {self.path} could not be read ({error}); it was moved to {aside} and a new "
            "one started: the scores it held are computed again.",
            CacheCorruptionWarning,
            stacklevel=3,
        )
        return _connect(self.path)


def cached_texts(
    path: Path | None,
    *,
    model: str,
    options: GenerateOptions,
    prompts: Sequence[str],
    produce: Callable[[list[str]], Iterable[Mapping[str, str]]],
) -> dict[str, str]:
    """The generated text of each of `prompts` (prompt -> text) by the model whose identity digest
    is `model`, for the in-process engine and served models alike: texts stored in the cache file
    `path` under these `options` (every field is in the key, a sampled text's seed too) are read, a
    damaged row is reported and asked again; the rest come from `produce(missing prompts)`, which
    yields them in groups, each stored as it arrives, so an interrupted run asks only what is
    missing. With `path` None nothing is cached.
    """
    cache = ScoreCache(path, model=model, options=repr(options)) if path is not None else None
    try:
        done = cache.get_texts(list(prompts)) if cache is not None else {}
        for answered in produce([p for p in dict.fromkeys(prompts) if p not in done]):
            done.update(answered)
            if cache is not None:
                cache.put_texts(dict(answered))
    finally:
        if cache is not None:
            cache.close()
    return done


def _connect(path: Path) -> sqlite3.Connection:
    # Several processes may write at once: wait for the lock rather than fail.
    db = sqlite3.connect(path, timeout=120)
    try:
        _use_wal(db)
        db.execute(_SCHEMA)
        db.execute(_TEXTS)
        db.commit()
    except sqlite3.DatabaseError:
        db.close()
        raise
    return db


# SQLite's words for a device that is full or read-only (not damage), and the OS error each stands
# for.
_PLACE_ERRORS = (
    (("disk is full",), errno.ENOSPC),
    (("readonly", "read-only", "unable to open"), errno.EACCES),
    (("disk i/o error",), errno.EIO),
)


def _is_busy(error: sqlite3.DatabaseError) -> bool:
    """A lock held too long by another process: not damage (never move a healthy file aside for
    it).
    """
    return "locked" in str(error) or "busy" in str(error)


def _use_wal(db: sqlite3.Connection, attempts: int = 100) -> None:
    """Switch the file to WAL, retrying a while.

    Processes opening a new cache together can deadlock on that switch, and SQLite then answers
    "database is locked" at once instead of waiting for the connection's timeout.
    """
    for attempt in range(attempts):
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if not _is_busy(error) or attempt == attempts - 1:
                raise
            time.sleep(0.05)


def _crc(request: bytes, n_tokens: bytes, sums: bytes, tokens: bytes | None) -> int:
    return zlib.crc32(tokens or b"", zlib.crc32(sums, zlib.crc32(n_tokens, zlib.crc32(request))))


def _encode(
    request: bytes, scores: CandidateScores, with_tokens: bool
) -> tuple[bytes, bytes, bytes | None, int]:
    """(n_tokens as uint8 or uint16, sums as float64, per-token log-probs as float32 or None,
    CRC32).
    """
    counts = np.asarray(scores.n_tokens)
    longest = int(counts.max()) if counts.size else 0
    if longest > np.iinfo(np.uint16).max:
        raise CultureProbeError(
            f"A candidate of {longest} tokens cannot be cached (at most 65,535)."
        )
    n_tokens = counts.astype("<u1" if longest <= np.iinfo(np.uint8).max else "<u2").tobytes()
    sums = np.asarray(scores.sum_logprob, dtype="<f8").tobytes()
    tokens = None
    if with_tokens and scores.token_logprobs is not None:
        tokens = np.concatenate(
            [np.asarray(t, dtype="<f4") for t in scores.token_logprobs] or [np.zeros(0, "<f4")]
        ).tobytes()
    return n_tokens, sums, tokens, _crc(request, n_tokens, sums, tokens)


def _fits(candidates: tuple[str, ...], n_tokens: bytes, sums: bytes, tokens: bytes | None) -> bool:
    """Whether the arrays have the sizes the request's candidates call for."""
    n = len(candidates)
    if len(n_tokens) not in (n, 2 * n) or len(sums) != 8 * n:
        return False
    return tokens is None or len(tokens) == 4 * int(_counts(n_tokens, n).sum())


def _counts(n_tokens: bytes, n: int) -> np.ndarray:
    """Token counts stored one byte each, or two when any is 256 or more (the blob's length tells
    which).
    """
    width = "<u1" if len(n_tokens) == n else "<u2"
    return np.frombuffer(n_tokens, dtype=width).astype(np.int64)


def _decode(
    candidates: tuple[str, ...], n_tokens: bytes, sums: bytes, tokens: bytes | None
) -> CandidateScores:
    counts = _counts(n_tokens, len(candidates))
    per_token = None
    if tokens is not None:
        flat = np.frombuffer(tokens, dtype="<f4").astype(np.float64)
        per_token = tuple(np.split(flat, np.cumsum(counts)[:-1])) if counts.size else ()
    return CandidateScores(
        candidates=candidates,
        sum_logprob=np.frombuffer(sums, dtype="<f8").copy(),
        n_tokens=counts,
        token_logprobs=per_token,
    )
