"""What a backend has spent, per kind of call: scoring (`score`, `fill_mask`: one forward pass per
batch) and generation (`generate`: a forward pass per new token), which run at rates an order of
magnitude apart, so that a run's measured rate (`culture_probe.throughput`) keeps them apart.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

KINDS = ("score", "generate")


@dataclass(frozen=True)
class Spent:
    """Tokens put through the model (the batches' costs), the batches that ran them, and the wall
    time of the calls that asked for them (their preparation, cache and assembly included: what a
    user waits for).
    """

    tokens: int = 0
    batches: int = 0
    seconds: float = 0.0

    def __sub__(self, other: Spent) -> Spent:
        return Spent(
            self.tokens - other.tokens, self.batches - other.batches, self.seconds - other.seconds
        )


class Spending:
    """A backend's running totals, one `Spent` per kind (`KINDS`)."""

    def __init__(self) -> None:
        self.kinds = {kind: Spent() for kind in KINDS}
        self._open: str | None = (
            None  # the kind of the call being timed (a call within it is not timed again)
        )

    def ran(self, kind: str, tokens: int) -> None:
        """A batch of `kind` ran `tokens`."""
        spent = self.kinds[kind]
        self.kinds[kind] = replace(spent, tokens=spent.tokens + tokens, batches=spent.batches + 1)

    @contextmanager
    def timing(self, kind: str) -> Iterator[None]:
        """Add the block's wall time to `kind` (once: a call made within a timed call counts in
        it).
        """
        if self._open is not None:
            yield
            return
        self._open, began = kind, time.perf_counter()
        try:
            yield
        finally:
            spent = self.kinds[kind]
            self.kinds[kind] = replace(spent, seconds=spent.seconds + time.perf_counter() - began)
            self._open = None

    def snapshot(self) -> dict[str, Spent]:
        """The totals now (what a run subtracts at its end)."""
        return dict(self.kinds)

    @property
    def tokens(self) -> int:
        """Tokens of every kind."""
        return sum(s.tokens for s in self.kinds.values())
