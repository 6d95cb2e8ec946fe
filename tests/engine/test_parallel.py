"""Two processes give the scores of one process, in request order, on every rank.

Launched with torchrun (gloo on CPU): the environment contract accelerate's multi-process launcher uses too;
`accelerate launch --cpu` itself needs MPI for several CPU processes.
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

from culture_probe.engine import Scorer, ScoreRequest
from culture_probe.models import save_tiny

REPO = Path(__file__).resolve().parents[2]
SETUPS = [("gpt2", "bpe"), ("bert", "wordpiece")]
REQUESTS = [ScoreRequest(f"The ingredients of {dish} include", ["cheese", "olive oil", "김치", "東京", dish])
            for dish in ["pizza", "sushi", "kimchi", "rice", "mole", "paella", "pho"]]

SCRIPT = """
import json, sys
import torch.distributed as dist
from culture_probe.engine import Scorer, ScoreRequest
from culture_probe.engine import parallel

out, requests = sys.argv[1], [ScoreRequest(**r) for r in json.loads(sys.argv[2])]
local_sizes = []
gather = parallel.gather
parallel.gather = lambda local, size: local_sizes.append(len(local)) or gather(local, size)
result = {}
for model_dir in sys.argv[3:]:
    scores = Scorer.from_pretrained(model_dir, batch_tokens=16).score(requests)
    result[model_dir] = [s.sum_logprob.tolist() for s in scores]
with open(f"{out}.{dist.get_rank()}", "w") as f:
    json.dump({"world": dist.get_world_size(), "local": local_sizes, "sums": result}, f)
"""


@pytest.mark.slow
def test_two_processes_equal_one(tmp_path):
    dirs = [save_tiny(tmp_path / arch, arch, tiny(arch, kind)[1], layers=1, hidden=32, heads=4)
            for arch, kind in SETUPS]
    script = tmp_path / "score.py"
    script.write_text(SCRIPT)
    payload = json.dumps([{"left": r.left, "candidates": list(r.candidates)} for r in REQUESTS])
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                    "29533", str(script), str(tmp_path / "out"), payload, *map(str, dirs)],
                   check=True, env=env, cwd=tmp_path, timeout=600)
    for rank in (0, 1):
        got = json.loads((tmp_path / f"out.{rank}").read_text())
        assert got["world"] == 2
        assert got["local"] == [(len(REQUESTS) + 1 - rank) // 2] * 2  # each rank scored its own shard only
        for model_dir in dirs:
            single = Scorer.from_pretrained(model_dir).score(REQUESTS)
            for sums, want in zip(got["sums"][str(model_dir)], single, strict=True):
                np.testing.assert_allclose(sums, want.sum_logprob, atol=1e-5, rtol=0)
