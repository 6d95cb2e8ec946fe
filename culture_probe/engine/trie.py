"""The token trie of a causal request's candidates, and its inner nodes packed into rows, built with
array operations.

A candidate set is encoded once (`TokenRows`), so its trie and its packings are built once too and
shared by every probe that asks it. Nodes are numbered as a dictionary trie built candidate by
candidate would number them (in the order their prefixes are first met), children are kept in that
order, and the packing is the greedy depth-first one: so the rows, and the model's inputs made from
them, are the same whatever builds them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from culture_probe.engine.tokens import TokenRows, owners, spread

# packings kept per trie (one per row length asked: a request's context length decides it), the
# least recently asked dropped first, so that memory stays bounded however many context lengths a
# run meets
PACKINGS = 32


@dataclass(frozen=True, eq=False)
class Trie:
    """Token sequences merged on shared prefixes. Node n holds `tokens[n]` under `parents[n]` (-1 at
    the top), at `depth[n]` (0 at the top); `children` row n lists its children in the order they
    were first met; `paths` row c lists the nodes of sequence c.
    """

    tokens: np.ndarray
    parents: np.ndarray
    depth: np.ndarray
    children: TokenRows
    paths: TokenRows
    packings: dict[int, tuple[PackedRow, ...]] = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, rows: TokenRows) -> Trie:
        """The trie of `rows` (no row empty)."""
        lengths = rows.lengths
        longest = int(lengths.max()) if len(lengths) else 0
        vocab = int(rows.ids.max()) + 1 if len(rows.ids) else 1
        node_of = np.empty(
            len(rows.ids), dtype=np.int64
        )  # per token of `rows`: its node, numbered per level
        prefix = np.full(len(rows), -1, dtype=np.int64)  # each row's node at the previous depth
        first, parent, token, depth = [], [], [], []
        made = 0
        for d in range(longest):
            active = np.flatnonzero(lengths > d)
            at = rows.starts[active] + d
            key = (prefix[active] + 1) * vocab + rows.ids[at]
            _, where, inverse = np.unique(key, return_index=True, return_inverse=True)
            node_of[at] = made + inverse
            first.append(active[where])
            parent.append(prefix[active[where]])
            token.append(rows.ids[at[where]])
            depth.append(np.full(len(where), d, dtype=np.int64))
            prefix[active] = made + inverse
            made += len(where)
        cat = (lambda parts: np.concatenate(parts)) if first else (lambda _: np.zeros(0, np.int64))
        first_row, depths = cat(first), cat(depth)
        # A dictionary trie numbers a node when its prefix is first met: by its first row, then its
        # depth.
        order = np.lexsort((depths, first_row))
        rank = np.empty(made, dtype=np.int64)
        rank[order] = np.arange(made, dtype=np.int64)
        parents = cat(parent)[order]
        parents = np.where(parents >= 0, rank[np.maximum(parents, 0)], -1)
        return cls(
            tokens=cat(token)[order],
            parents=parents,
            depth=depths[order],
            children=_children(parents),
            paths=TokenRows(rank[node_of], rows.starts),
        )

    def __len__(self) -> int:
        return len(self.tokens)

    @cached_property
    def has_children(self) -> np.ndarray:
        """Whether each node has children (the inner nodes run through the model; leaves never
        do).
        """
        has: np.ndarray = self.children.lengths > 0
        return has

    @cached_property
    def inner(self) -> int:
        """Number of nodes with children."""
        return int(self.has_children.sum())

    @cached_property
    def roots(self) -> np.ndarray:
        """The top nodes, in order."""
        roots: np.ndarray = np.flatnonzero(self.parents < 0)
        return roots

    @cached_property
    def ancestors(self) -> np.ndarray:
        """[node, depth]: the node's ancestor at each depth, itself at its own, -1 below it."""
        n, levels = len(self), int(self.depth.max()) + 1 if len(self) else 1
        table = np.full((n, levels), -1, dtype=np.int64)
        up = np.append(self.parents, -1)  # up[-1] = -1: the top stays at the top
        current = np.arange(n, dtype=np.int64)
        for _ in range(levels):
            live = np.flatnonzero(current >= 0)
            if not len(live):
                break
            table[live, self.depth[current[live]]] = current[live]
            current[live] = up[current[live]]
        return table

    @cached_property
    def preorder(self) -> np.ndarray:
        """The nodes depth-first, children in order: sorted by their chain of ancestors from the
        top.
        """
        table = self.ancestors
        order: np.ndarray = np.lexsort(table.T[::-1]) if len(self) else np.zeros(0, np.int64)
        return order

    def packed(self, room: int) -> tuple[PackedRow, ...]:
        """The inner nodes in rows of about `room` nodes (built once per room): depth-first, a row
        starting with the ancestors its first node needs (not owned: their outputs are read where
        they are owned), every inner node owned by one row; one empty row when there is no inner
        node.
        """
        rows = self.packings.pop(room, None)
        if rows is None:
            rows = tuple(_pack(self, room))
        self.packings[room] = rows  # the latest last: the least recently asked goes first
        if len(self.packings) > PACKINGS:
            del self.packings[next(iter(self.packings))]
        return rows


@dataclass(frozen=True, eq=False)
class PackedRow:
    """One packed row of a trie's inner nodes: `nodes` (ancestors first), which of them it `owned`,
    their `depth`, which earlier node each sees (`sees[k, a]`: node a is node k or its ancestor),
    and what is read from the row: at row position `read_at[r]` (relative to the end of the context;
    -1: the context's last position, which predicts the top nodes) the log-probs of the nodes
    `reads` row r lists.
    """

    nodes: np.ndarray
    owned: np.ndarray
    depth: np.ndarray
    sees: np.ndarray
    read_at: np.ndarray
    reads: TokenRows


def _children(parents: np.ndarray) -> TokenRows:
    """Each node's children (nodes whose parent it is), in node order."""
    n = len(parents)
    kids = np.flatnonzero(parents >= 0)
    kids = kids[np.argsort(parents[kids], kind="stable")]
    counts = np.bincount(parents[parents >= 0], minlength=n) if n else np.zeros(0, np.int64)
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    return TokenRows(kids.astype(np.int64), starts)


def _pack(trie: Trie, room: int) -> list[PackedRow]:
    """The greedy packing: the inner nodes in depth-first order, a new row when the next would pass
    `room` nodes, each row after the first opening with its first node's ancestors. A node's parent
    is then always in its row: it comes before the node depth-first, and if it comes before the
    row's first node it is that node's ancestor.
    """
    inner = trie.preorder[trie.has_children[trie.preorder]]
    rows: list[PackedRow] = []
    start = 0
    while start < len(inner) or not rows:
        if start >= len(inner):  # no inner node: one row reads the top nodes from the context
            rows.append(_row(trie, np.zeros(0, np.int64), 0, first=True))
            break
        head = inner[start]
        above = int(trie.depth[head])
        count = max(1, room - above)
        segment = inner[start : start + count]
        nodes = np.concatenate([trie.ancestors[head, :above], segment])
        rows.append(_row(trie, nodes, above, first=start == 0))
        start += len(segment)
    return rows


def _row(trie: Trie, nodes: np.ndarray, borrowed: int, *, first: bool) -> PackedRow:
    """The row of `nodes`, of which the first `borrowed` are ancestors owned elsewhere."""
    m = len(nodes)
    order = np.argsort(nodes)
    above = trie.ancestors[nodes]
    k, level = np.nonzero(above >= 0)
    # every ancestor of a row's node is in the row: its place there, found among the row's sorted
    # nodes
    sees = np.zeros((m, m), dtype=bool)
    sees[k, order[np.searchsorted(nodes[order], above[k, level])]] = True
    owned = np.arange(m) >= borrowed
    read_at = np.flatnonzero(owned)
    read = nodes[read_at]
    lengths = trie.children.lengths[read]
    kids = trie.children.ids[spread(trie.children.starts[read], lengths)]
    if first:
        read_at = np.append(read_at, -1)
        lengths = np.append(lengths, len(trie.roots))
        kids = np.concatenate([kids, trie.roots])
    starts = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    return PackedRow(nodes, owned, trie.depth[nodes], sees, read_at, TokenRows(kids, starts))


def gather_rows(rows: TokenRows, which: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The elements of rows `which` of `rows`, concatenated, and the position in `which` each came
    from.
    """
    lengths = rows.lengths[which]
    return rows.ids[spread(rows.starts[which], lengths)], owners(lengths)
