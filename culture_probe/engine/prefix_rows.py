"""Which prompt log-probs of a served probe a server computed, and what to ask next: the plan behind
scoring through vLLM's token-in/token-out route with its prefix cache read (engine.served).

A probe is one request's candidates as token ids: the context C (its special tokens included, the
model's start token where the slot has no left context), then per candidate its ids (and, with
`score_right`, the right text's). A candidate's score needs the rows p = len(C) .. len(S) - 1 of
its sequence S: row p is log P(S[p] | S[:p]). A reply whose first k tokens came from the prefix
cache computed only the rows p >= k + 1; vLLM leaves the rows before them as whatever its buffer
held (vllm#42019: another request's values under this request's token ids), so those rows are never
read, whatever they hold. What no reply computed is asked of one next-token request per prefix
(`max_tokens=1`, the log-probs of the tokens named), whose last position the server always
computes: exact, and the cache stays on.

The order only decides how much the cache saves, never a value: the first sequence in the trie's
order is sent alone (it computes the context), then its siblings, then the rows still missing. A
candidate set where every candidate is one token after the context is scored by next-token
requests alone. Where the cache cannot save anything (no prefix caching, or a context shorter than
one cache block: only whole blocks are cached), the sequences go as token-id prompts of one echo
request (`EchoJob`, every row computed), far fewer requests than one a candidate.

Pure: no request is sent here. Rows are keyed by the tokens after the context up to and including
the row's own token, so every candidate that shares a prefix shares its rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

Tail = tuple[int, ...]  # token ids after the context


@dataclass(frozen=True)
class RowsJob:
    """Ask the prompt log-probs of one whole sequence (context + candidate)."""

    probe: int
    tokens: tuple[int, ...]


@dataclass(frozen=True)
class NextJob:
    """Ask the log-probs of the tokens `ids` right after the prefix `tokens`."""

    probe: int
    tokens: tuple[int, ...]
    ids: tuple[int, ...]


@dataclass(frozen=True)
class EchoJob:
    """Ask the prompt log-probs of several whole sequences at once, none read from a cache."""

    probe: int
    sequences: tuple[tuple[int, ...], ...]


Job = RowsJob | NextJob | EchoJob


class Step(Enum):
    """Where a probe's requests are."""

    FIRST = "first"  # the first sequence, alone: it computes the context for the rest
    REST = "rest"  # its siblings
    MISSING = "missing"  # next-token requests for the rows no reply computed
    DONE = "done"


@dataclass
class Probe:
    """One request's sequences, the rows known so far, and the step its requests are at."""

    index: int
    context: tuple[int, ...]
    tails: list[Tail]  # per candidate: its ids (and the right text's) after the context
    ids_per_request: int  # distinct ids one next-token request may name (0: no such request)
    # sequences of one echo request (0: each its own request, with the prefix cache read)
    echo: int = 0
    known: dict[Tail, float] = field(default_factory=dict)
    step: Step = Step.FIRST
    pending: int = 0

    def __post_init__(self) -> None:
        if self.ids_per_request < 1 and self.echo < 1:
            raise ValueError("a probe needs next-token or echo requests")

    @property
    def start(self) -> int:
        """The first row a candidate needs: the context's length."""
        return len(self.context)

    def order(self) -> list[int]:
        """The candidates in the trie's order (sorted ids: shared prefixes next to each other),
        one per distinct sequence.
        """
        first: dict[Tail, int] = {}
        for i, tail in enumerate(self.tails):
            first.setdefault(tail, i)
        return [first[tail] for tail in sorted(first)]

    def begin(self) -> list[Job]:
        """The first requests: next-token ones where every candidate is one token after the
        context, else echo requests of every sequence, else the first sequence in the trie's order.
        """
        if self.ids_per_request and all(len(tail) == 1 for tail in self.tails):
            self.step = Step.MISSING
            jobs: list[Job] = list(self.missing())
        elif self.echo:
            self.step = Step.MISSING  # nothing is left missing: every row is computed
            order = [self.context + self.tails[i] for i in self.order()]
            jobs = [
                EchoJob(self.index, tuple(order[at : at + self.echo]))
                for at in range(0, len(order), self.echo)
            ]
        else:
            jobs = [self._rows(self.order()[0])]
        self.pending = len(jobs)
        return jobs

    def _rows(self, candidate: int) -> RowsJob:
        return RowsJob(self.index, self.context + self.tails[candidate])

    def take_rows(self, tokens: Sequence[int], first_computed: int, rows: Sequence[float]) -> None:
        """Keep the rows of a reply to `RowsJob(tokens)` that its server computed: p >=
        `first_computed` (the cached token count + 1; 0 where the cache was not read).
        `rows[p]` is the log-prob of tokens[p] (rows[0] is unused).
        """
        for p in range(max(self.start, first_computed, 1), len(tokens)):
            self.known[tuple(tokens[self.start : p + 1])] = rows[p]

    def take_next(self, tokens: Sequence[int], values: dict[int, float]) -> None:
        """Keep the log-probs of a reply to `NextJob(tokens, ids)`."""
        tail = tuple(tokens[self.start :])
        for token, value in values.items():
            self.known[tail + (token,)] = value

    def done_one(self) -> list[Job]:
        """The requests that follow one answered (its values taken), in order; none once the
        probe's rows are all known.
        """
        self.pending -= 1
        if self.pending:
            return []
        jobs: list[Job] = []
        if self.step is Step.FIRST:
            self.step = Step.REST
            jobs = [self._rows(i) for i in self.order()[1:]]
        if not jobs and self.step is Step.REST:
            self.step = Step.MISSING
            jobs = list(self.missing())
        if not jobs:
            if self.step is Step.MISSING and self.missing():
                raise LookupError("rows still missing after their next-token requests")
            self.step = Step.DONE
        self.pending = len(jobs)
        return jobs

    def missing(self) -> list[NextJob]:
        """Next-token requests for every row not yet known: per prefix, its tokens in chunks of
        `ids_per_request`.
        """
        wanted: dict[Tail, set[int]] = {}
        for tail in self.tails:
            for p in range(1, len(tail) + 1):
                if tail[:p] not in self.known:
                    wanted.setdefault(tail[: p - 1], set()).add(tail[p - 1])
        jobs = []
        for prefix, ids in sorted(wanted.items()):
            chosen = sorted(ids)
            for at in range(0, len(chosen), self.ids_per_request):
                chunk = tuple(chosen[at : at + self.ids_per_request])
                jobs.append(NextJob(self.index, self.context + prefix, chunk))
        return jobs

    def values(self, candidate: int) -> list[float]:
        """The log-probs of one candidate's tokens (and the right text's), in order."""
        tail = self.tails[candidate]
        return [self.known[tail[: p + 1]] for p in range(len(tail))]
