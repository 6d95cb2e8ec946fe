"""The array trie and its packing (culture_probe.engine.trie) against a dictionary trie built
candidate by candidate and the greedy depth-first packing written out node by node: the same nodes,
numbered alike, and the same rows, so the model's inputs do not depend on which builds them.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from culture_probe.engine.tokens import TokenRows
from culture_probe.engine.trie import Trie

sequences = st.lists(
    st.lists(st.integers(1, 6), min_size=1, max_size=7).map(tuple), min_size=1, max_size=30
)


def dictionary_trie(seqs):
    """(tokens, parents, children, paths): nodes numbered as first met, candidate by candidate."""
    index, tokens, parents, children, paths = {}, [], [], [], []
    for seq in seqs:
        parent, path = -1, []
        for token in seq:
            node = index.get((parent, token))
            if node is None:
                node = index[(parent, token)] = len(tokens)
                tokens.append(token)
                parents.append(parent)
                children.append([])
                if parent >= 0:
                    children[parent].append(node)
            path.append(node)
            parent = node
        paths.append(tuple(path))
    return tokens, parents, children, paths


def greedy_rows(parents, children, room):
    """Inner nodes depth-first, a new row when the next would pass `room`, each new row after the
    first opening with its first node's ancestors (not owned).
    """
    rows, nodes, owned, present = [], [], [], set()
    stack = [n for n in reversed(range(len(parents))) if parents[n] < 0]
    while stack:
        node = stack.pop()
        if not children[node]:
            continue
        chain = [node]
        while parents[chain[-1]] >= 0 and parents[chain[-1]] not in present:
            chain.append(parents[chain[-1]])
        if nodes and len(nodes) + len(chain) > room:
            rows.append((nodes, owned))
            nodes, owned, present = [], [], set()
            chain = [node]
            while parents[chain[-1]] >= 0:
                chain.append(parents[chain[-1]])
        for n in reversed(chain):
            nodes.append(n)
            owned.append(n == node)
            present.add(n)
        stack.extend(reversed(children[node]))
    if nodes or not rows:
        rows.append((nodes, owned))
    return rows


@settings(max_examples=200, deadline=None, derandomize=True)
@given(seqs=sequences, room=st.sampled_from([1, 2, 3, 4, 7, 100]))
def test_array_trie_and_rows_equal_the_dictionary_trie_and_the_greedy_rows(seqs, room):
    tokens, parents, children, paths = dictionary_trie(seqs)
    trie = Trie.build(TokenRows.of(seqs))
    assert trie.tokens.tolist() == tokens
    assert trie.parents.tolist() == parents
    assert [list(c) for c in trie.children.tuples()] == children
    assert list(trie.paths.tuples()) == paths
    assert trie.inner == sum(1 for c in children if c)
    rows = trie.packed(room)
    assert [(r.nodes.tolist(), r.owned.tolist()) for r in rows] == greedy_rows(
        parents, children, room
    )
    for r in rows:
        nodes = r.nodes.tolist()
        for k, n in enumerate(nodes):
            ancestors = {n}
            while parents[n] >= 0:
                n = parents[n]
                ancestors.add(n)
            assert r.sees[k].tolist() == [m in ancestors for m in nodes]  # itself and its ancestors
        assert r.depth.tolist() == [len(paths_to(parents, n)) - 1 for n in nodes]


def paths_to(parents, node):
    out = [node]
    while parents[out[-1]] >= 0:
        out.append(parents[out[-1]])
    return out


def test_every_inner_node_is_owned_once_and_read_with_its_children():
    trie = Trie.build(TokenRows.of([(1, 2, 3), (1, 2, 4, 5), (1, 6), (7,), (7, 8, 9), (1, 2, 3)]))
    inner = set(np.flatnonzero(trie.has_children).tolist())
    for room in (1, 2, 3, 100):
        rows = trie.packed(room)
        owned = [
            n
            for r in rows
            for n, own in zip(r.nodes.tolist(), r.owned.tolist(), strict=True)
            if own
        ]
        assert sorted(owned) == sorted(inner)
        read = [kid for r in rows for kid in r.reads.ids.tolist()]
        # every node but the tops is read once where its parent is owned; the tops from the context
        # (row 0)
        assert sorted(read) == list(range(len(trie)))
        assert rows[0].read_at[-1] == -1 and rows[0].reads[len(rows[0].read_at) - 1] == (0, 6)
