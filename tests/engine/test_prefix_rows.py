"""The plan of prefix-cache-aware served scoring (engine.prefix_rows) against a simulated vLLM: a
block prefix cache whose cached rows hold another request's values (vllm#42019), requests answered
in any order and interleaved with another run's. Every candidate's log-probs must be the model's,
whatever the order; and in the trie's order the cache saves what it can.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from culture_probe.engine.prefix_rows import EchoJob, NextJob, Probe, RowsJob

BLOCK = 4


def logprob(prefix: tuple[int, ...], token: int) -> float:
    """The simulated model: log P(token | prefix), a fixed function of both."""
    digest = hashlib.blake2b(repr((prefix, token)).encode(), digest_size=4).digest()
    return -int.from_bytes(digest, "big") / 2**32 * 10


@dataclass
class Server:
    """Full blocks of computed prompts are cached; a reply's rows at cached positions hold the
    values of the last request computed (what vLLM's buffer still held), under this request's ids.
    """

    blocks: set[tuple[int, ...]] = field(default_factory=set)
    last: list[float] = field(default_factory=list)
    computed: int = 0

    def rows(self, tokens: tuple[int, ...]) -> tuple[int, list[float]]:
        cached = 0
        while cached + BLOCK < len(tokens) and tokens[: cached + BLOCK] in self.blocks:
            cached += BLOCK
        rows = [0.0] + [logprob(tokens[:p], tokens[p]) for p in range(1, len(tokens))]
        for p in range(1, cached + 1):  # not computed: stale values
            rows[p] = self.last[p] if p < len(self.last) else -123.0
        self._compute(tokens, cached)
        self.last = rows
        return cached + 1, rows

    def next(self, tokens: tuple[int, ...], ids: tuple[int, ...]) -> dict[int, float]:
        cached = 0
        while cached + BLOCK < len(tokens) and tokens[: cached + BLOCK] in self.blocks:
            cached += BLOCK
        self._compute(tokens, cached)
        return {t: logprob(tokens, t) for t in ids}

    def _compute(self, tokens: tuple[int, ...], cached: int) -> None:
        self.computed += len(tokens) - cached
        for end in range(BLOCK, len(tokens) + 1, BLOCK):
            self.blocks.add(tokens[:end])


def run(probes: list[Probe], server: Server, rng: random.Random, in_flight: int) -> None:
    """Answers the probes' requests `in_flight` at a time, a random one of them first each turn."""
    fresh, ready, flying = iter(probes), [], []
    while True:
        while len(flying) < in_flight:
            if not ready:
                probe = next(fresh, None)
                if probe is None:
                    break
                ready.extend(probe.begin())
                continue
            flying.append(ready.pop(0))
        if not flying:
            return
        job = flying.pop(rng.randrange(len(flying)))
        probe = probes[job.probe]
        if isinstance(job, RowsJob):
            probe.take_rows(job.tokens, *server.rows(job.tokens))
        elif isinstance(job, EchoJob):
            assert len(job.sequences) <= probe.echo
            for tokens in job.sequences:
                server.computed += len(tokens)
                probe.take_rows(
                    tokens,
                    1,
                    [0.0] + [logprob(tokens[:p], tokens[p]) for p in range(1, len(tokens))],
                )
        else:
            assert isinstance(job, NextJob) and len(job.ids) <= probe.ids_per_request
            probe.take_next(job.tokens, server.next(job.tokens, job.ids))
        ready[:0] = probe.done_one()


tails = st.lists(
    st.lists(st.integers(1, 6), min_size=1, max_size=7).map(tuple), min_size=1, max_size=9
)
probe_specs = st.lists(
    st.tuples(st.lists(st.integers(1, 6), min_size=1, max_size=11).map(tuple), tails),
    min_size=1,
    max_size=4,
)


def probes_of(specs, ids_per_request: int, echo: int = 0) -> list[Probe]:
    """Probes of (context, tails) specs; with `echo`, every other one in echo requests."""
    return [
        Probe(i, ctx, list(ts), ids_per_request, echo if i % 2 else 0)
        for i, (ctx, ts) in enumerate(specs)
    ]


def expected(ctx: tuple[int, ...], tail: tuple[int, ...]) -> list[float]:
    seq = ctx + tail
    return [logprob(seq[:p], seq[p]) for p in range(len(ctx), len(seq))]


@settings(max_examples=150, deadline=None)
@given(
    probe_specs,
    probe_specs,
    st.integers(0, 2**32),
    st.integers(1, 5),
    st.integers(1, 4),
    st.sampled_from([0, 2, 5]),
)
def test_every_value_is_the_models_in_any_order_beside_another_run(
    specs, others, seed, in_flight, ids_per_request, echo
):
    server, rng = Server(), random.Random(seed)
    # another run on the same server first, filling the cache and the stale buffer
    run(probes_of(others, ids_per_request, echo), server, rng, in_flight)
    probes = probes_of(specs, ids_per_request, echo)
    run(probes, server, rng, in_flight)
    for probe in probes:
        for i, tail in enumerate(probe.tails):
            assert probe.values(i) == expected(probe.context, tail)


def test_single_token_candidates_take_one_next_token_request_per_chunk():
    probe = Probe(0, (5, 6, 7), [(t,) for t in range(1, 11)], ids_per_request=4)
    jobs = probe.begin()
    assert [type(j) for j in jobs] == [NextJob] * 3
    assert [len(j.ids) for j in jobs] == [4, 4, 2]
    assert all(j.tokens == (5, 6, 7) for j in jobs)


def test_in_the_trie_order_the_cache_spares_the_shared_context():
    """A long shared context is computed about once: the first sequence alone, then the rest read
    its blocks; in any order, all the values are still the model's (above).
    """
    ctx = tuple(range(1, 41))
    tails_ = [(50 + i, 60 + i) for i in range(8)]
    server = Server()
    probes = [Probe(0, ctx, tails_, 8)]
    run(probes, server, random.Random(0), in_flight=4)
    whole = sum(len(ctx) + len(t) for t in tails_)
    assert server.computed < whole / 4
    assert probes[0].values(3) == expected(ctx, tails_[3])
