"""A stage's progress bar moves as the engine finishes each batch, not only at each chunk of probes,
and the next engine call's requests are handed to the scorer to prepare ahead
(runner.execution._answers).
"""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from culture_probe.engine.types import CandidateScores, ScoreOptions, ScoreRequest
from culture_probe.runner import execution
from culture_probe.tasks.probes import ScoreProbe, Skipped


class Bar:
    """Records what a tqdm bar is moved by."""

    made: list[Bar] = []

    def __init__(self, *args, **kwargs):
        self.updates: list[int] = []
        Bar.made.append(self)

    def update(self, n):
        self.updates.append(n)

    def close(self):
        pass


@pytest.fixture
def bar(monkeypatch):
    import tqdm.auto

    Bar.made = []
    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    return Bar


class Reporting:
    """A scorer that reports each batch of `batch` requests, and notes what it is asked to prepare
    ahead.
    """

    def __init__(self, batch: int):
        self.batch, self.report, self.events = batch, None, []

    @contextmanager
    def reporting(self, callback):
        self.report = callback
        yield
        self.report = None

    def prefetch(self, requests, options):
        self.events.append(("prefetch", requests[0].left))

    def score(self, requests, options):
        self.events.append(("score", requests[0].left))
        for start in range(0, len(requests), self.batch):
            self.report(len(requests[start : start + self.batch]))
        return [CandidateScores(r.candidates, [0.0], [1]) for r in requests]


def probes(n: int):
    options = ScoreOptions()
    out = [
        ScoreProbe(f"item{i}", ScoreRequest(f"left {i}", ("a",)), options, meta={})
        for i in range(n)
    ]
    out[3] = Skipped("item3", "no data", meta={})
    return out


def test_the_bar_moves_with_each_batch_and_the_next_call_is_prepared_ahead(bar):
    scorer = Reporting(batch=16)
    chunks = list(execution._answers(probes(100), scorer, True, "x main"))
    assert [len(c) for c in chunks] == [64, 36]
    # 63 probes asked in the first chunk (one skipped): four batches, then the skipped one at the
    # chunk's end
    assert bar.made[0].updates == [16, 16, 16, 15, 1, 16, 16, 4]
    assert scorer.events == [("prefetch", "left 64"), ("score", "left 0"), ("score", "left 64")]


def test_a_scorer_that_reports_nothing_moves_the_bar_a_chunk_at_a_time(bar):
    class Quiet:
        def score(self, requests, options):
            return [CandidateScores(r.candidates, [0.0], [1]) for r in requests]

    list(execution._answers(probes(100), Quiet(), True, "x main"))
    assert bar.made[0].updates == [64, 36]
