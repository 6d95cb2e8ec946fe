"""Token id sequences as arrays: `TokenRows` (one row per candidate, two flat arrays) and the
ragged-array steps the backends lay out batches with, so that nothing on the engine's hot path loops
over candidates in Python.

A candidate set is encoded once per tokenizer and boundary (`culture_probe.engine.encoding`) into
one `TokenRows` that every probe asking it shares; what a backend derives from it (a trie,
typed-mask groups) is kept on the object (`TokenRows.derive`), so it is built once too.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")
# what is kept derived from one set of rows, and the entries set when the rows are made, never
# dropped
DERIVED = 16
PINNED = frozenset({"ends"})


@dataclass(frozen=True, eq=False)
class TokenRows:
    """Rows of token ids: row `c` is `ids[starts[c]:starts[c + 1]]` (int64)."""

    ids: np.ndarray
    starts: np.ndarray
    # what backends derived from these rows (`derive`), kept as long as the rows are
    derived: dict[Hashable, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, rows: Sequence[Sequence[int]] | Sequence[np.ndarray]) -> TokenRows:
        """The rows of `rows` (any sequences of ints)."""
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        starts = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=starts[1:])
        flat = np.fromiter((t for r in rows for t in r), dtype=np.int64, count=int(starts[-1]))
        return cls(flat, starts)

    @classmethod
    def repeat(cls, row: Sequence[int], n: int) -> TokenRows:
        """`n` copies of one row."""
        ids = np.tile(np.asarray(row, dtype=np.int64), n)
        return cls(ids, np.arange(n + 1, dtype=np.int64) * len(row))

    def __len__(self) -> int:
        return len(self.starts) - 1

    def __getitem__(self, c: int) -> tuple[int, ...]:
        return tuple(self.ids[self.starts[c] : self.starts[c + 1]].tolist())

    @cached_property
    def lengths(self) -> np.ndarray:
        """Tokens per row."""
        lengths: np.ndarray = np.diff(self.starts)
        lengths.flags.writeable = False  # shared by every request that asks these rows
        return lengths

    def tuples(self) -> tuple[tuple[int, ...], ...]:
        """Every row as a tuple (for code that reads rows one by one: previews, tests)."""
        flat = self.ids.tolist()
        bounds = self.starts.tolist()
        return tuple(tuple(flat[a:b]) for a, b in zip(bounds, bounds[1:], strict=False))

    def derive(self, key: Hashable, build: Callable[[TokenRows], T]) -> T:
        """`build(self)`, computed once per `key` and kept with these rows (at most `DERIVED` of
        them, the least recently asked dropped first: a causal request's right-hand length is part
        of some keys).
        """
        value: T = self.derived.pop(key) if key in self.derived else build(self)
        self.derived[key] = value
        if len(self.derived) > DERIVED:
            del self.derived[next(k for k in self.derived if k not in PINNED)]
        return value

    def then(self, other: TokenRows) -> TokenRows:
        """Row c of `self` followed by row c of `other` (a candidate, then the text right of it)."""
        lengths = self.lengths + other.lengths
        starts = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=starts[1:])
        ids = np.empty(int(starts[-1]), dtype=np.int64)
        ids[spread(starts[:-1], self.lengths)] = self.ids
        ids[spread(starts[:-1] + self.lengths, other.lengths)] = other.ids
        return TokenRows(ids, starts)


def spread(begins: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indices `begins[i] + j` for each i and j < lengths[i], in order: where ragged rows land
    in a flat array.
    """
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    out: np.ndarray = np.repeat(np.asarray(begins, dtype=np.int64), lengths) + within
    return out


def owners(lengths: np.ndarray) -> np.ndarray:
    """The row index of each element of ragged rows of `lengths`, in order."""
    out: np.ndarray = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    return out


def padded(rows: Sequence[np.ndarray], width: int, pad: int) -> np.ndarray:
    """Rows of ids right-padded with `pad` to `width` columns (int64)."""
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    out = np.full((len(rows), width), pad, dtype=np.int64)
    if len(rows):
        flat = np.concatenate([np.asarray(r, dtype=np.int64) for r in rows])
        out[owners(lengths), spread(np.zeros(len(rows), dtype=np.int64), lengths)] = flat
    return out


def row_sums(values: np.ndarray, rows: TokenRows) -> np.ndarray:
    """The sum of each row of `values` laid out as `rows` (no row empty), equal bit for bit to
    `row.sum()`.

    numpy adds fewer than 8 numbers one after another and more in pairs (and `np.add.reduceat` in
    yet another order): the short rows are summed as one matrix padded with zeros, which adding
    changes nothing, the longer ones as one matrix per length. Which rows go where is worked out
    once per `rows`.
    """
    short, index, groups = rows.derive("row sums", _sum_plan)
    padded_values = np.append(values, 0.0)
    sums = np.empty(len(rows))
    sums[short] = padded_values[index].sum(axis=1)
    for members, at in groups:
        sums[members] = values[at].sum(axis=1)
    return sums


# numpy's sum adds this many numbers or more pairwise
PAIRWISE = 8


def _sum_plan(
    rows: TokenRows,
) -> tuple[np.ndarray, np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """(the short rows, their elements' indices padded with an index past the end, and per longer
    length its rows with their elements' indices).
    """
    lengths = rows.lengths
    short = np.flatnonzero(lengths < PAIRWISE)
    width = int(lengths[short].max()) if len(short) else 0
    index = np.full((len(short), width), len(rows.ids), dtype=np.int64)
    index[owners(lengths[short]), spread(np.zeros(len(short), np.int64), lengths[short])] = spread(
        rows.starts[short], lengths[short]
    )
    groups = []
    for length in np.unique(lengths[lengths >= PAIRWISE]):
        members = np.flatnonzero(lengths == length)
        groups.append((members, rows.starts[members][:, None] + np.arange(length)))
    return short, index, groups
