"""A benchmark of one's own is one folder (docs/adding-a-benchmark.md): a toy package (its
declaration, data module and task module) built and installed by pip into a temporary folder,
outside this package, and run end to end through `culture-probe list`, `culture_probe.run` and
`culture-probe run`, found through its entry point alone (the folder is only put on PYTHONPATH).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

DATA_MODULE = '''
"""Toy capitals: made-up countries and their capitals, from data_dir/capitals.jsonl ({"country", "capital"})."""
from pathlib import Path

import datasets

from culture_probe.data._builder import CultureProbeBuilder, CultureProbeConfig
from culture_probe.data.card import BenchmarkInfo, Licence
from culture_probe.data.sources import read_jsonl

INFO = BenchmarkInfo(name="toy", title="Toy capitals", description="Capitals of made-up countries.",
                     homepage="https://example.org/toy", licences=(Licence("CC0 1.0", "the toy facts", "cc0-1.0"),),
                     citation="", version="0.1.0")


class Toy(CultureProbeBuilder):
    CARD = INFO
    BUILDER_CONFIGS = [CultureProbeConfig(name="toy_capitals", version="0.1.0", languages=("en",),
                                          description="Capitals of made-up countries")]

    def _features(self):
        text = datasets.Value("string")
        return datasets.Features({"id": text, "country": text, "capital": text})

    def _rows(self, split):
        for number, record in read_jsonl(Path(self.config.data_dir) / "capitals.jsonl"):
            yield {"id": f"c{number}", "country": record["country"], "capital": record["capital"]}


BUILDER = Toy
'''

TASK_MODULE = '''
"""Toy protocol: every capital ranked as the end of "The capital of X is"; P@1."""
from culture_probe.engine.types import ScoreRequest
from culture_probe.metrics.results import UnitValue, unit_table
from culture_probe.tasks import ScoreProbe, Scores, Task


class ToyTask(Task):
    def _probes(self, rows, stage, previous):
        capitals = tuple(sorted({row["capital"] for row in rows}))
        for row in rows:
            request = ScoreRequest(f"The capital of {row['country']} is", capitals)
            yield ScoreProbe(row["id"], request, meta={"gold": [row["capital"]]})

    def _read(self, probe, output):
        return {"prediction": output.best()}

    def _metrics(self, records, skipped):
        hits = [r["prediction"] in r["gold"] for r in records]
        table = unit_table("p1", [UnitValue(r.item_id, 100 * hit) for r, hit in zip(records, hits)])
        # each fact a hit or a miss: a proportion
        return Scores({"p1": 100 * sum(hits) / len(hits)}, [table.with_scale(100, binary=True)])


TASK = ToyTask
'''

DECLARATION = '''
"""Toy capitals: the benchmark's declaration, found through the package's entry point."""
from culture_probe.benchmarks import Declaration

BENCHMARK = Declaration(__name__)
'''

PYPROJECT = """
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "toy-capitals"
version = "0.1.0"

[project.entry-points."culture_probe.benchmarks"]
toy = "toy_capitals:BENCHMARK"

[tool.setuptools]
packages = ["toy_capitals"]
"""

KNOWING_RUN = '''
import json, sys
import numpy as np
import culture_probe
from culture_probe.engine.types import CandidateScores

GOLD = {"Zafran": "Qamira", "Eldmark": "Halden", "Brisa": "Corvel"}

class Knowing:
    """A model stand-in that knows every capital."""
    kind, identity = "causal", {"name_or_path": "knowing"}

    def score(self, requests, options=None):
        return [CandidateScores(r.candidates, np.array([0.0 if c == GOLD[r.left.split()[-2]] else -5.0
                                                        for c in r.candidates]), np.ones(len(r.candidates), int))
                for r in requests]

result = culture_probe.run("toy_capitals", Knowing(), data_dir=sys.argv[1], out=sys.argv[2], progress=False)
print(json.dumps(result.metrics))
'''
FACTS = {"Zafran": "Qamira", "Eldmark": "Halden", "Brisa": "Corvel"}


@pytest.fixture
def plugin(tmp_path):
    """The toy benchmark, a package of its own installed by pip into a folder outside this package,
    and its data.
    """
    source = tmp_path / "toy_source"
    (source / "toy_capitals").mkdir(parents=True)
    modules = {"__init__": DECLARATION, "data": DATA_MODULE, "task": TASK_MODULE}
    for name, text in modules.items():
        (source / "toy_capitals" / f"{name}.py").write_text(
            textwrap.dedent(text).lstrip(), encoding="utf-8"
        )
    (source / "pyproject.toml").write_text(PYPROJECT.lstrip(), encoding="utf-8")
    lines = sum(len(t.strip().splitlines()) for t in modules.values())
    assert lines < 150, f"a benchmark should take one short folder, this takes {lines} lines"
    root = tmp_path / "plugin"
    installed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(root),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    data = tmp_path / "toy_data"
    data.mkdir()
    (data / "capitals.jsonl").write_text(
        "".join(json.dumps({"country": c, "capital": k}) + "\n" for c, k in FACTS.items()),
        encoding="utf-8",
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    return root, data, env


def _cli(env, *args):
    return subprocess.run(
        [sys.executable, "-m", "culture_probe", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
    )


@pytest.mark.slow
def test_a_toy_benchmark_installed_from_its_own_package_runs_end_to_end(plugin, tmp_path):
    from culture_probe.models import save_tiny, train_tokenizer

    root, data, env = plugin
    listed = _cli(env, "list")
    assert listed.returncode == 0 and "toy_capitals" in listed.stdout, listed.stderr[-2000:]
    # through culture_probe.run: a model that knows the capitals gets them all
    done = subprocess.run(
        [sys.executable, "-c", KNOWING_RUN, str(data), str(tmp_path / "known")],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads(done.stdout.strip().splitlines()[-1])
    low = 100 * 3 / (3 + 1.959964**2)
    # 3 of 3 right: Wilson's interval, not certainty
    assert metrics.pop("results")["overall"]["p1"] == {
        "value": 100.0,
        # the interval's, never 0 beside a width
        "stderr": pytest.approx((100 - low) / (2 * 1.959964)),
        "ci_low": pytest.approx(low),
        "ci_high": 100.0,
        "n": 3,
    }
    assert metrics == {"p1": 100.0, "n_probes": 3, "n_skipped": 0, "skipped": {}}
    config = json.loads((tmp_path / "known" / "config.json").read_text())
    assert config["benchmark"]["name"] == "toy" and config["task"] == "ToyTask"
    assert "| p1 | 100.00 |" in (tmp_path / "known" / "report.md").read_text()  # the default view
    # through the CLI, with a tiny real model
    texts = [f"The capital of {c} is {k}" for c, k in FACTS.items()]
    model = save_tiny(
        tmp_path / "gpt2",
        "gpt2",
        train_tokenizer(texts, "bpe", vocab_size=300, model_kind="causal"),
        layers=1,
        hidden=32,
    )
    ran = _cli(
        env,
        "run",
        "toy_capitals",
        "--model",
        str(model),
        "--data-dir",
        str(data),
        "--out",
        str(tmp_path / "cli"),
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    records = [
        json.loads(line) for line in (tmp_path / "cli" / "items.jsonl").read_text().splitlines()
    ]
    assert [r["id"] for r in records] == ["c1", "c2", "c3"] and all(
        r["probe"] == "score" for r in records
    )
    assert all(r["prediction"] in FACTS.values() for r in records)
    hits = [r["prediction"] == r["gold"][0] for r in records]
    assert json.loads((tmp_path / "cli" / "metrics.json").read_text())["p1"] == pytest.approx(
        100 * sum(hits) / 3
    )
    assert Path(tmp_path / "cli" / "report.md").is_file()
