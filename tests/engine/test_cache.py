"""The SQLite cache: a run killed with SIGKILL resumes, computing only what is missing, with equal scores."""

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
from culture_probe.models import save_tiny

REPO = Path(__file__).resolve().parents[2]
LEFTS = [f"The ingredients of {dish} include" for dish in
         ["pizza", "sushi", "kimchi", "rice", "cheese", "tomato", "garlic", "olive oil", "Egypt", "Japan", "Korea",
          "Asia"]]
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
    args = [sys.executable, str(script), str(model_dir), str(db), str(pause), json.dumps(LEFTS),
            json.dumps(CANDIDATES)]
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
        stored = con.execute("SELECT COUNT(*) FROM scores").fetchone()[0]
    assert 3 <= stored < len(LEFTS)

    second = _run(tmp_path, model_dir, db, pause=0)
    report = json.loads(second.communicate(timeout=300)[0].strip().splitlines()[-1])
    assert report["computed"] == len(LEFTS) - stored

    fresh = Scorer.from_pretrained(model_dir).score([ScoreRequest(left, CANDIDATES) for left in LEFTS])
    for got, want in zip(report["sums"], fresh, strict=True):
        np.testing.assert_allclose(got, want.sum_logprob, atol=1e-6)


def test_cache_is_keyed_by_model_identity_and_options(tmp_path, monkeypatch):
    from culture_probe.engine.causal import CausalScorer

    original, batches = CausalScorer._score_batch, []
    monkeypatch.setattr(CausalScorer, "_score_batch",
                        lambda self, items, *a: batches.append(len(items)) or original(self, items, *a))
    model, tok = tiny("gpt2", "bpe")
    other, _ = tiny("gpt2", "bpe", seed=1)
    db = tmp_path / "cache.sqlite"
    reqs = [ScoreRequest(LEFTS[0], CANDIDATES, right=".")]
    a = Scorer(model, tok, cache=db).score(reqs)[0]
    b = Scorer(other, tok, cache=db).score(reqs)[0]  # same file, different weights: not served from the cache
    assert len(batches) == 2 and not np.allclose(a.sum_logprob, b.sum_logprob)
    right = Scorer(model, tok, cache=db).score(reqs, score_right=True)[0]  # another rule: computed
    assert len(batches) == 3 and (right.n_tokens > a.n_tokens).all()
    again = Scorer(model, tok, cache=db).score(reqs, keep_tokens=True)[0]  # what is returned only: a hit
    assert len(batches) == 3 and again.token_logprobs is not None
    np.testing.assert_array_equal(again.sum_logprob, a.sum_logprob)


def test_rewritten_weights_of_a_local_folder_miss_the_cache(tmp_path, monkeypatch):
    """A folder retrained in place keeps its path; its weight files' fingerprint must change the identity."""
    from culture_probe.engine.causal import CausalScorer

    _, tok = tiny("gpt2", "bpe")
    model_dir = save_tiny(tmp_path / "model", "gpt2", tok, layers=1, hidden=32, heads=4, seed=0)
    db = tmp_path / "cache.sqlite"
    reqs = [ScoreRequest(LEFTS[0], CANDIDATES)]
    original, batches = CausalScorer._score_batch, []
    monkeypatch.setattr(CausalScorer, "_score_batch",
                        lambda self, items, *a: batches.append(len(items)) or original(self, items, *a))
    first = Scorer.from_pretrained(model_dir, cache=db)
    before = first.score(reqs)[0]
    assert Scorer.from_pretrained(model_dir, cache=db).score(reqs)[0] == before and len(batches) == 1  # a hit

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
    assert _identity(type(model)(config), tok, name="org/model", hash_weights=False)["commit"] == commit
