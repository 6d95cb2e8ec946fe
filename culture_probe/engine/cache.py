"""A SQLite result cache: an interrupted run resumes where it stopped, with any number of processes.

One row per (model identity, request, scoring options). Rows are committed batch by batch, so a run killed with
SIGKILL loses at most the batch in flight, and SQLite's journal keeps the file readable.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from culture_probe.engine.types import CandidateScores

_SCHEMA = """CREATE TABLE IF NOT EXISTS scores (
    model TEXT NOT NULL, request TEXT NOT NULL, options TEXT NOT NULL, value TEXT NOT NULL,
    PRIMARY KEY (model, request, options))"""


class ScoreCache:
    """Scores stored per request key; `model` and `options` are digests of what else changes the numbers."""

    def __init__(self, path: str | Path, *, model: str, options: str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.model, self.options = model, options
        # Several processes may write at once: wait for the lock rather than fail.
        self._db = sqlite3.connect(self.path, timeout=120)
        _use_wal(self._db)
        self._db.execute(_SCHEMA)
        self._db.commit()

    def get(self, keys: Iterable[str]) -> dict[str, CandidateScores]:
        """The cached scores among `keys`."""
        found = {}
        for key in dict.fromkeys(keys):
            row = self._db.execute("SELECT value FROM scores WHERE model=? AND request=? AND options=?",
                                   (self.model, key, self.options)).fetchone()
            if row is not None:
                found[key] = _loads(row[0])
        return found

    def put(self, items: dict[str, CandidateScores]) -> None:
        """Store `items` (request key -> scores) in one transaction."""
        rows = [(self.model, key, self.options, _dumps(value)) for key, value in items.items()]
        with self._db:
            self._db.executemany("INSERT OR REPLACE INTO scores VALUES (?, ?, ?, ?)", rows)

    def close(self) -> None:
        """Close the connection."""
        self._db.close()


def _use_wal(db: sqlite3.Connection, attempts: int = 100) -> None:
    """Switch the file to WAL, retrying a while.

    Processes opening a new cache together can deadlock on that switch, and SQLite then answers "database is
    locked" at once instead of waiting for the connection's timeout.
    """
    for attempt in range(attempts):
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or attempt == attempts - 1:
                raise
            time.sleep(0.05)


def _dumps(scores: CandidateScores) -> str:
    # JSON floats round-trip float64 exactly (repr), and the file stays readable without this library.
    tokens = [t.tolist() for t in scores.token_logprobs] if scores.token_logprobs is not None else None
    return json.dumps({"candidates": list(scores.candidates), "tokens": tokens,
                       "sum": scores.sum_logprob.tolist(), "n": scores.n_tokens.tolist()}, ensure_ascii=False)


def _loads(text: str) -> CandidateScores:
    data = json.loads(text)
    tokens = data["tokens"]
    return CandidateScores(
        candidates=tuple(data["candidates"]),
        sum_logprob=np.asarray(data["sum"], dtype=np.float64),
        n_tokens=np.asarray(data["n"], dtype=np.int64),
        token_logprobs=None if tokens is None else tuple(np.asarray(t, dtype=np.float64) for t in tokens),
    )
