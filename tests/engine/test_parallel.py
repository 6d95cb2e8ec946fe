"""Two processes give the scores of one process, in request order, on every rank, each having scored
its own shard only.

Launched with torchrun (gloo on CPU): the environment contract `accelerate launch --multi_gpu` uses
too (its end-to-end run is tests/tasks/test_base.py). `accelerate launch --cpu` needs MPI for
several CPU processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from engine_reference import tiny

from culture_probe.engine import Scorer, ScoreRequest, parallel
from culture_probe.models import save_tiny

REPO = Path(__file__).resolve().parents[2]
# The checkout first, then whatever the caller's path held (a GPU machine's carried packages, say)
PYTHONPATH = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
SETUPS = [("gpt2", "bpe"), ("bert", "wordpiece")]
# Different candidate counts per request, so that results coming back out of order cannot line up.
CANDIDATES = ["cheese", "olive oil", "김치", "東京"]
REQUESTS = [
    ScoreRequest(f"The ingredients of {dish} include", [*CANDIDATES[: 1 + i % 4], dish])
    for i, dish in enumerate(["pizza", "sushi", "kimchi", "rice", "mole", "paella", "pho"])
]

SCRIPT = """
import json, sys
from culture_probe.engine import Scorer, ScoreRequest, parallel
from culture_probe.errors import EmptyCandidateError

out, requests = sys.argv[1], [ScoreRequest(**r) for r in json.loads(sys.argv[2])]
result, prepared, cuts, refused = {}, {}, {}, {}
for d in sys.argv[3:]:
    scorer = Scorer.from_pretrained(d, batch_tokens=16)
    scorer.encoder.max_length = 12  # some contexts are cut: the record must count every process's
    asked = []
    prepare = scorer._prepare_all
    scorer._prepare_all = lambda rs, options: asked.extend(r.left for r in rs) or prepare(rs, options)
    result[d] = [s.sum_logprob.tolist() for s in scorer.score(requests)]
    prepared[d], cuts[d] = list(asked), scorer.truncation.to_json()
    # a request only rank 1 prepares is bad: both ranks raise it, neither waits for the other
    try:
        scorer.score([requests[0], ScoreRequest("Korea is in", ["Asia", " "])])
    except EmptyCandidateError as error:
        refused[d] = str(error)
rank, size = parallel.world()
with open(f"{out}.{rank}", "w") as f:
    json.dump({"world": size, "sums": result, "prepared": prepared, "cuts": cuts, "refused": refused}, f)
"""


def read_trace(folder: Path, rank: int) -> list[dict]:
    return [json.loads(line) for line in (folder / f"rank{rank}.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_two_processes_equal_one(tmp_path):
    dirs = [
        save_tiny(tmp_path / arch, arch, tiny(arch, kind)[1], layers=1, hidden=32, heads=4)
        for arch, kind in SETUPS
    ]
    script = tmp_path / "score.py"
    script.write_text(SCRIPT)
    trace = tmp_path / "trace"
    trace.mkdir()
    payload = json.dumps([{"left": r.left, "candidates": list(r.candidates)} for r in REQUESTS])
    env = {
        **os.environ,
        "PYTHONPATH": PYTHONPATH,
        "OMP_NUM_THREADS": "1",
        parallel.TRACE_VARIABLE: str(trace),
    }
    subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_port",
            "29533",
            str(script),
            str(tmp_path / "out"),
            payload,
            *map(str, dirs),
        ],
        check=True,
        env=env,
        cwd=tmp_path,
        timeout=1200,
    )
    shards = [read_trace(trace, rank) for rank in (0, 1)]
    assert [len(s) for s in shards] == [len(dirs)] * 2  # one gather per model on each rank
    for mine, theirs in zip(*shards, strict=True):
        assert mine["size"] == theirs["size"] == 2
        assert mine["indices"] and theirs["indices"], "a process scored nothing"
        assert not set(mine["indices"]) & set(theirs["indices"]), "a request was scored twice"
        assert sorted(mine["indices"] + theirs["indices"]) == list(range(len(REQUESTS)))
    outs = [json.loads((tmp_path / f"out.{rank}").read_text()) for rank in (0, 1)]
    for model_dir in map(str, dirs):
        one = Scorer.from_pretrained(model_dir)
        one.encoder.max_length = 12
        single = one.score(REQUESTS)
        for got in outs:
            assert got["world"] == 2
            for sums, want in zip(got["sums"][model_dir], single, strict=True):
                np.testing.assert_allclose(sums, want.sum_logprob, atol=1e-5, rtol=0)
            # every process counts what all of them cut, as one process does
            assert got["cuts"][model_dir] == one.truncation.to_json()
            assert got["refused"][model_dir].startswith("Candidate ' ' tokenizes to nothing")
        # each process prepared its own share of the requests, none twice
        mine, theirs = (got["prepared"][model_dir] for got in outs)
        assert mine and theirs and sorted(mine + theirs) == sorted(r.left for r in REQUESTS)


GENERATE = """
import json, sys
from culture_probe.engine import Scorer, parallel

out, prompts, model, cache = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
scorer = Scorer.from_pretrained(model, batch_tokens=24, cache_dir=cache)
calls = []
generate = scorer.model.generate
scorer.model.generate = lambda *args, **kwargs: calls.append(1) or generate(*args, **kwargs)

def both():
    return {"greedy": scorer.generate(prompts, max_new_tokens=4),
            "sampled": scorer.generate(prompts, max_new_tokens=4, temperature=1.0, seed=7)}

texts = both()
asked = len(calls)
again = both()  # every text is in the cache that both processes wrote
with open(f"{out}.{parallel.world()[0]}", "w") as f:
    json.dump({"texts": texts, "again": again, "asked": asked, "asked_again": len(calls) - asked}, f)
"""


@pytest.mark.slow
def test_two_processes_generate_what_one_does_and_share_the_text_cache(tmp_path):
    model_dir = save_tiny(
        tmp_path / "gpt2", "gpt2", tiny("gpt2", "bpe")[1], layers=1, hidden=32, heads=4
    )
    prompts = [r.left for r in REQUESTS]
    script = tmp_path / "generate.py"
    script.write_text(GENERATE)
    trace = tmp_path / "trace"
    trace.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": PYTHONPATH,
        "OMP_NUM_THREADS": "1",
        parallel.TRACE_VARIABLE: str(trace),
    }
    subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_port",
            "29534",
            str(script),
            str(tmp_path / "out"),
            json.dumps(prompts),
            str(model_dir),
            str(tmp_path / "cache"),
        ],
        check=True,
        env=env,
        cwd=tmp_path,
        timeout=1200,
    )
    shards = [read_trace(trace, rank) for rank in (0, 1)]
    for mine, theirs in zip(shards[0][:2], shards[1][:2], strict=True):  # greedy, then sampled
        assert mine["indices"] and theirs["indices"], "a process generated nothing"
        assert sorted(mine["indices"] + theirs["indices"]) == list(range(len(prompts)))
    # then all from the cache
    assert [line["indices"] for shard in shards for line in shard[2:]] == [[]] * 4
    single = Scorer.from_pretrained(model_dir, batch_tokens=24)
    expected = {
        "greedy": single.generate(prompts, max_new_tokens=4),
        "sampled": single.generate(prompts, max_new_tokens=4, temperature=1.0, seed=7),
    }
    assert expected["greedy"] != expected["sampled"]
    for rank in (0, 1):
        got = json.loads((tmp_path / f"out.{rank}").read_text())
        assert got["texts"] == got["again"] == expected
        assert got["asked"] > 0 and got["asked_again"] == 0


TEARDOWN = """
import atexit, sys
import torch.distributed as dist
from culture_probe.engine import parallel

rank, size = parallel.world()
parallel.gather({rank: rank}, size)
atexit._run_exitfuncs()  # what interpreter exit runs first, while the interpreter is still whole
with open(f"{sys.argv[1]}.{rank}", "w") as f:
    f.write(f"{size} {dist.is_initialized()}")
"""


@pytest.mark.slow
def test_the_process_group_is_torn_down_before_interpreter_exit(tmp_path):
    # Left to interpreter shutdown, gloo's threads abort about one finished process in three
    # (SIGABRT, "terminate called without an active exception"), so the launcher reports a good run
    # as failed: the engine destroys the group it created in an atexit handler.
    script = tmp_path / "teardown.py"
    script.write_text(TEARDOWN)
    env = {**os.environ, "PYTHONPATH": PYTHONPATH, "OMP_NUM_THREADS": "1"}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_port",
            "29535",
            str(script),
            str(tmp_path / "out"),
        ],
        check=True,
        env=env,
        cwd=tmp_path,
        timeout=1200,
    )
    assert [(tmp_path / f"out.{rank}").read_text() for rank in (0, 1)] == ["2 False", "2 False"]


def test_single_process_without_launcher(monkeypatch, recwarn):
    for name in [*parallel.SIZE_VARIABLES, "ACCELERATE_USE_CPU", "MASTER_ADDR"]:
        monkeypatch.delenv(name, raising=False)
    assert parallel.world() == (0, 1)
    assert not recwarn.list


def test_cpu_launch_that_started_one_process_warns(monkeypatch):
    """What `accelerate launch --cpu --num_processes 2` (no MPI) leaves in the environment of its
    one process.
    """
    for name in parallel.SIZE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACCELERATE_USE_CPU", "True")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    with pytest.warns(UserWarning, match=r"single process .*--multi_gpu --num_processes N"):
        assert parallel.world() == (0, 1)


def test_each_process_gets_its_own_gpu(monkeypatch):
    from culture_probe.engine.parallel import local_device

    monkeypatch.setenv("LOCAL_RANK", "3")
    assert str(local_device("cuda")) == "cuda:3"
    assert str(local_device("cuda:1")) == "cuda:1"  # an explicit index is kept
    assert str(local_device("cpu")) == "cpu"
