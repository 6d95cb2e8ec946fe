"""The SQLite cache: a run killed with SIGKILL resumes, computing only what is missing, with equal
scores.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from engine_reference import tiny

from culture_probe.engine import Scorer, ScoreRequest
from culture_probe.engine.cache import TABLE, CacheCorruptionWarning
from culture_probe.models import save_tiny

REPO = Path(__file__).resolve().parents[2]
LEFTS = [
    f"The ingredients of {dish} include"
    for dish in [
        "pizza",
        "sushi",
        "kimchi",
        "rice",
        "cheese",
        "tomato",
        "garlic",
        "olive oil",
        "Egypt",
        "Japan",
        "Korea",
        "Asia",
    ]
]
CANDIDATES = ["cheese", "tomato", "olive oil", "garlic", "rice", "김치", "東京"]

SCRIPT = """
import json, sys, time
from culture_probe.engine import Scorer, ScoreRequest
from culture_probe.engine.causal import CausalScorer

model_dir, db, pause = sys.argv[1], sys.argv[2], float(sys.argv[3])
lefts, cands = json.loads(sys.argv[4]), json.loads(sys.argv[5])
original = CausalScorer._score_batch
computed = []

def traced(self, items, options, budget):
    out = original(self, items, options, budget)
    computed.extend(items)
    print("batch", flush=True)
    time.sleep(pause)
    return out

CausalScorer._score_batch = traced
scorer = Scorer.from_pretrained(model_dir, cache=db, batch_tokens=8)
out = scorer.score([ScoreRequest(left, cands) for left in lefts])
print(json.dumps({"computed": len(computed), "sums": [o.sum_logprob.tolist() for o in out]}), flush=True)
"""


def _run(tmp_path, model_dir, db, pause):
    script = tmp_path / "score.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    args = [
        sys.executable,
        str(script),
        str(model_dir),
        str(db),
        str(pause),
        json.dumps(LEFTS),
        json.dumps(CANDIDATES),
    ]
    return subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path)


@pytest.mark.slow
def test_killed_run_resumes_with_only_missing_requests(tmp_path):
    _, tok = tiny("gpt2", "bpe")
    model_dir = save_tiny(tmp_path / "model", "gpt2", tok, layers=1, hidden=32, heads=4)
    db = tmp_path / "cache.sqlite"
    first = _run(tmp_path, model_dir, db, pause=0.5)
    for _ in range(4):  # let four batches finish, then kill without any chance to clean up
        assert first.stdout.readline().strip() == "batch"
    first.send_signal(signal.SIGKILL)
    first.wait()

    with sqlite3.connect(db) as con:  # the file stays readable after SIGKILL
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        stored = con.execute(f"SELECT COUNT(*) FROM {TABLE}").fetchone()[0]
    assert 3 <= stored < len(LEFTS)

    second = _run(tmp_path, model_dir, db, pause=0)
    report = json.loads(second.communicate(timeout=1200)[0].strip().splitlines()[-1])
    assert report["computed"] == len(LEFTS) - stored

    fresh = Scorer.from_pretrained(model_dir).score(
        [ScoreRequest(left, CANDIDATES) for left in LEFTS]
    )
    for got, want in zip(report["sums"], fresh, strict=True):
        np.testing.assert_allclose(got, want.sum_logprob, atol=1e-6)


def test_cache_is_keyed_by_model_identity_and_options(tmp_path, monkeypatch):
    from culture_probe.engine.causal import CausalScorer

    original, batches = CausalScorer._score_batch, []
    monkeypatch.setattr(
        CausalScorer,
        "_score_batch",
        lambda self, items, *a: batches.append(len(items)) or original(self, items, *a),
    )
    model, tok = tiny("gpt2", "bpe")
    other, _ = tiny("gpt2", "bpe", seed=1)
    db = tmp_path / "cache.sqlite"
    reqs = [ScoreRequest(LEFTS[0], CANDIDATES, right=".")]
    a = Scorer(model, tok, cache=db).score(reqs)[0]
    # same file, different weights: not served from the cache
    b = Scorer(other, tok, cache=db).score(reqs)[0]
    assert len(batches) == 2 and not np.allclose(a.sum_logprob, b.sum_logprob)
    right = Scorer(model, tok, cache=db).score(reqs, score_right=True)[0]  # another rule: computed
    assert len(batches) == 3 and (right.n_tokens > a.n_tokens).all()
    # per-token values were not kept: computed
    again = Scorer(model, tok, cache=db).score(reqs, keep_tokens=True)[0]
    assert len(batches) == 4 and again.token_logprobs is not None
    np.testing.assert_array_equal(again.sum_logprob, a.sum_logprob)
    # now they are: a hit, bit for bit
    kept = Scorer(model, tok, cache=db).score(reqs, keep_tokens=True)[0]
    assert len(batches) == 4
    for cached, fresh in zip(kept.token_logprobs, again.token_logprobs, strict=True):
        np.testing.assert_array_equal(cached, fresh)
    # and serve plain requests too
    assert Scorer(model, tok, cache=db).score(reqs)[0] == a and len(batches) == 4


def test_rewritten_weights_of_a_local_folder_miss_the_cache(tmp_path, monkeypatch):
    """A folder retrained in place keeps its path; its weight files' fingerprint must change the
    identity.
    """
    from culture_probe.engine.causal import CausalScorer

    _, tok = tiny("gpt2", "bpe")
    model_dir = save_tiny(tmp_path / "model", "gpt2", tok, layers=1, hidden=32, heads=4, seed=0)
    db = tmp_path / "cache.sqlite"
    reqs = [ScoreRequest(LEFTS[0], CANDIDATES)]
    original, batches = CausalScorer._score_batch, []
    monkeypatch.setattr(
        CausalScorer,
        "_score_batch",
        lambda self, items, *a: batches.append(len(items)) or original(self, items, *a),
    )
    first = Scorer.from_pretrained(model_dir, cache=db)
    before = first.score(reqs)[0]
    assert (
        Scorer.from_pretrained(model_dir, cache=db).score(reqs)[0] == before and len(batches) == 1
    )  # a hit

    save_tiny(model_dir, "gpt2", tok, layers=1, hidden=32, heads=4, seed=1)  # "retrained" in place
    second = Scorer.from_pretrained(model_dir, cache=db)
    assert second.identity["name_or_path"] == first.identity["name_or_path"]
    assert second.identity["weight_files"] != first.identity["weight_files"]
    after = second.score(reqs)[0]
    assert len(batches) == 2 and not np.allclose(after.sum_logprob, before.sum_logprob)


def test_identity_records_the_hub_commit_when_known():
    from culture_probe.engine.backend import _identity

    model, tok = tiny("gpt2", "bpe")
    assert "commit" not in _identity(model, tok, name="", hash_weights=False)
    commit = "0123456789abcdef0123456789abcdef01234567"
    config = type(model.config)(**model.config.to_dict())
    config._commit_hash = commit  # what transformers sets on a model loaded from the Hub
    assert (
        _identity(type(model)(config), tok, name="org/model", hash_weights=False)["commit"]
        == commit
    )


def counted(monkeypatch) -> list[int]:
    """Batches the causal backend computes (a cache hit computes none)."""
    from culture_probe.engine.causal import CausalScorer

    original, batches = CausalScorer._score_batch, []
    monkeypatch.setattr(
        CausalScorer,
        "_score_batch",
        lambda self, items, *a: batches.append(len(items)) or original(self, items, *a),
    )
    return batches


def test_cached_scores_are_compact_and_equal_fresh_ones_bit_for_bit(tmp_path, monkeypatch):
    batches = counted(monkeypatch)
    model, tok = tiny("gpt2", "bpe")
    # 196 candidates, 1-4 tokens each
    candidates = [f"{a} {b}" for a in CANDIDATES for b in CANDIDATES] * 4
    reqs = [ScoreRequest(left, candidates) for left in LEFTS]
    fresh = Scorer(model, tok).score(reqs)
    cached = Scorer(model, tok, cache=tmp_path / "c.sqlite").score(reqs)
    assert Scorer(model, tok, cache=tmp_path / "c.sqlite").score(reqs) == fresh == cached
    # the third call computed nothing
    assert len(batches) == 2 * (len(batches) // 2) and len(batches) > 0
    with sqlite3.connect(tmp_path / "c.sqlite") as con:
        stored = con.execute(
            f"SELECT SUM(LENGTH(n_tokens) + LENGTH(sums)), COUNT(*) FROM {TABLE}"
        ).fetchone()
    # uint8 counts + float64 sums, no text
    assert stored == (9 * len(candidates) * len(LEFTS), len(LEFTS))
    # the JSON text the first cache stored for the same work (candidates, sums, counts and every
    # per-token value) was more than ten times larger
    text = sum(
        len(
            json.dumps(
                {
                    "candidates": list(o.candidates),
                    "tokens": [t.tolist() for t in o.token_logprobs],
                    "sum": o.sum_logprob.tolist(),
                    "n": o.n_tokens.tolist(),
                }
            )
        )
        for o in Scorer(model, tok).score(reqs, keep_tokens=True)
    )
    assert stored[0] * 10 < text, text / stored[0]


def test_a_damaged_row_is_reported_dropped_and_computed_again(tmp_path, monkeypatch):
    batches = counted(monkeypatch)
    model, tok = tiny("gpt2", "bpe")
    reqs = [ScoreRequest(left, CANDIDATES) for left in LEFTS[:3]]
    db = tmp_path / "c.sqlite"
    want = Scorer(model, tok, cache=db).score(reqs)
    computed = len(batches)
    with sqlite3.connect(db) as con:  # one bit flipped in one stored sum
        request, sums = con.execute(f"SELECT request, sums FROM {TABLE} LIMIT 1").fetchone()
        flipped = bytes([sums[0] ^ 1]) + sums[1:]
        con.execute(f"UPDATE {TABLE} SET sums=? WHERE request=?", (flipped, request))
    with pytest.warns(CacheCorruptionWarning, match="damaged row was dropped"):
        got = Scorer(model, tok, cache=db).score(reqs)
    assert got == want and len(batches) > computed  # recomputed, not read
    again = len(batches)
    # and stored anew
    assert Scorer(model, tok, cache=db).score(reqs) == want and len(batches) == again


def test_an_unreadable_cache_file_is_moved_aside_and_started_anew(tmp_path, monkeypatch):
    batches = counted(monkeypatch)
    model, tok = tiny("gpt2", "bpe")
    reqs = [ScoreRequest(LEFTS[0], CANDIDATES)]
    db = tmp_path / "c.sqlite"
    want = Scorer(model, tok).score(reqs)
    db.write_bytes(b"this is not a SQLite file" * 100)
    with pytest.warns(CacheCorruptionWarning, match="could not be read .* moved to"):
        assert Scorer(model, tok, cache=db).score(reqs) == want
    assert [p.name for p in tmp_path.glob("c.sqlite.corrupt-*")]  # kept for inspection
    computed = len(batches)
    # the new file works
    assert Scorer(model, tok, cache=db).score(reqs) == want and len(batches) == computed


@pytest.mark.slow
def test_two_processes_writing_one_cache_at_once(tmp_path):
    _, tok = tiny("gpt2", "bpe")
    model_dir = save_tiny(tmp_path / "model", "gpt2", tok, layers=1, hidden=32, heads=4)
    db = tmp_path / "cache.sqlite"
    both = [_run(tmp_path, model_dir, db, pause=0.05) for _ in range(2)]
    reports = [json.loads(p.communicate(timeout=1200)[0].strip().splitlines()[-1]) for p in both]
    assert all(p.returncode == 0 for p in both) and reports[0]["sums"] == reports[1]["sums"]
    third = json.loads(
        _run(tmp_path, model_dir, db, pause=0).communicate(timeout=1200)[0].strip().splitlines()[-1]
    )
    # every row readable, none torn
    assert third["computed"] == 0 and third["sums"] == reports[0]["sums"]
