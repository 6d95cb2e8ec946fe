"""Requests prepared ahead (`Backend.prefetch`) while the model runs the call before: the next call
gets the same scores and the same truncation record as without, what was cut is counted once it is
used (never for a call that did not come), and `reporting` says how far each call is, batch by
batch.
"""

from __future__ import annotations

import threading
import warnings

import numpy as np
from engine_reference import tiny

from culture_probe.engine import Scorer, ScoreRequest
from culture_probe.models import tiny_model

LONG = " ".join(["Egypt is located in"] * 12)
POOL = ("Africa", "Asia", "olive oil", "東京")


def chunks():
    """Two calls' requests, some contexts too long for a 24-position model."""
    first = [ScoreRequest(f"{LONG} {i}" if i % 2 else f"Korea {i} is in", POOL) for i in range(6)]
    second = [ScoreRequest(f"{LONG} x{i}" if i % 3 else f"Japan {i} is in", POOL) for i in range(5)]
    return first, second


def short_gpt2():
    _, tok = tiny("gpt2", "bpe")
    model = tiny_model("gpt2", tok, layers=1, hidden=32, heads=4)
    model.config.update({"n_positions": 24})
    return model, tok


def test_requests_prepared_ahead_score_and_count_as_those_prepared_in_turn():
    model, tok = short_gpt2()
    first, second = chunks()
    plain = Scorer(model, tok, batch_tokens=64)
    with warnings.catch_warnings(record=True):
        with plain.recording("x"):
            want = [plain.score(first), plain.score(second)]
            want_cut = plain.truncation
    ahead = Scorer(model, tok, batch_tokens=64, ahead=True)
    threads = []
    prepare = ahead._prepare_all
    ahead._prepare_all = lambda rs, o: (
        threads.append(threading.current_thread().name) or prepare(rs, o)
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ahead.recording("x"):
            ahead.prefetch(first)
            got = [ahead.score(first)]
            ahead.prefetch(second)
            cut_before_second = ahead.truncation
            got.append(ahead.score(second))
            got_cut = ahead.truncation
    for a, b in zip(want, got, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x.sum_logprob, y.sum_logprob)
    assert got_cut == want_cut and got_cut.contexts.cut > 0
    # the second call's cuts were not counted while it was only prepared
    assert cut_before_second.contexts.encoded == len(first)
    assert sum("cut on the left" in str(w.message) for w in caught) == 1  # warned once, as without
    # both calls used what was prepared in the background, and prepared nothing again
    assert len(threads) == 2 and all(t.startswith("culture-probe-prepare") for t in threads)


def test_what_was_prepared_for_a_call_that_did_not_come_is_never_counted():
    model, tok = short_gpt2()
    first, second = chunks()
    scorer = Scorer(model, tok, batch_tokens=64, ahead=True)
    with warnings.catch_warnings(record=True):
        scorer.prefetch(second)
        scorer.score(first)  # not what was prepared: it prepares its own
    assert scorer.truncation.contexts.encoded == len(first)


def test_nothing_is_prepared_ahead_on_a_cpu_unless_asked(monkeypatch):
    model, tok = short_gpt2()
    first, _ = chunks()
    scorer = Scorer(model, tok)
    scorer.prefetch(first)
    assert scorer._ahead is None and scorer._worker is None
    Scorer(model, tok, ahead=True).prefetch(first)  # asked: it does


def test_reporting_counts_each_batch_of_requests_the_model_ran():
    model, tok = tiny("bert", "wordpiece")
    scorer = Scorer(model, tok, batch_tokens=16)
    requests = [ScoreRequest(f"The capital of country {i} is", POOL) for i in range(7)]
    seen = []
    with scorer.reporting(seen.append):
        scorer.score(requests + requests[:2])  # repeats are scored once
    assert len(seen) > 1 and sum(seen) == len(requests)
