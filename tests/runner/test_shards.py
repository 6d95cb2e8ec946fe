"""`run --shard K/N` and `merge`: disjoint slices of whole units, balanced by cost, that merge into
the one-process run (items.jsonl line for line, metrics.json equal); a missing, repeated, mismatched
or unfinished shard is refused naming it; a shard resumes on its own; the Slurm array recipe, run as
Slurm would run it, and the Ray recipe, on a local Ray instance, give the one-process run.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import pytest
from dlama_fixture import FACTS, TableScorer, spec_table, write_dlama

from culture_probe import runner, shards
from culture_probe.cli import main
from culture_probe.errors import CultureProbeError, InvalidValueError
from culture_probe.runner.merge import merge_runs, merge_suites
from culture_probe.runner.suite import run_suite
from culture_probe.settings import RunSettings

REPO = Path(__file__).resolve().parents[2]
CONFIG = "dlama_arab_west"
# 15 facts in two languages: 5 of the spec's example, 10 more with five candidates each (they cost
# more)
MORE = {
    (region, f"Land{region[0]}{i}"): ([f"Q9{i}"], ["Asia"], [0.0] * 4)
    for region in FACTS
    for i in range(5)
}
# config.json's provenance, the merge's own
ONE_PROCESS = ("date", "finished", "duration_s", "processes")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    facts = {**FACTS, **{(r[0], s): v for (r, s), v in MORE.items()}}
    return str(write_dlama(tmp_path_factory.mktemp("dlama"), facts))


def run(data, out=None, **keywords):
    return runner.run(
        CONFIG, TableScorer(spec_table()), data_dir=data, out=out, progress=False, **keywords
    )


def shard_runs(data, root, count, **keywords):
    return [run(data, root / str(k), shard=f"{k}/{count}", **keywords) for k in range(1, count + 1)]


def planned(data: Path) -> runner.planning.Plan:
    """The DLAMA run's plan on the table scorer, as the run makes it before its model loads."""
    settings = RunSettings(data_dir=data)
    spec = runner.stage_models.model_spec(TableScorer(spec_table()), settings)
    return runner.planning.plan(CONFIG, spec, settings, {})


def test_shards_are_disjoint_whole_units_that_cover_the_run_and_balance_its_cost(data):
    ahead = planned(data)
    task, probes = ahead.task, ahead.probes
    units = {task.limit_key(p) for p in probes}
    for count in (1, 2, 3, 4):
        parts = [shards.part_of(task, probes, f"{k}/{count}") for k in range(1, count + 1)]
        held = [{task.limit_key(p) for p in part.probes} for part in parts]
        assert set().union(*held) == units and sum(map(len, held)) == len(units)  # every unit, once
        assert sorted(p.key for part in parts for p in part.probes) == sorted(p.key for p in probes)
        # a unit's probes all in one shard (a fact in both languages), in the run's order
        for part in parts:
            assert [p.key for p in part.probes] == [
                p.key for p in probes if p.key in part.record.positions
            ]
        loads = [sum(shards.cost(p) for p in part.probes) for part in parts]
        largest = max(sum(shards.cost(p) for p in probes if task.limit_key(p) == u) for u in units)
        assert max(loads) - min(loads) <= largest  # balanced within one unit's cost
        # determined
        assert parts == [shards.part_of(task, probes, f"{k}/{count}") for k in range(1, count + 1)]
    with pytest.raises(
        InvalidValueError, match="asks 15 facts here, fewer than 16 shards; give N <= 15"
    ):
        shards.part_of(task, probes, "1/16")


def test_a_huge_shard_count_is_refused_before_any_work_that_grows_with_it(data):
    """`--shard 1/300000000` once built the whole slicing (2.4 GB, minutes) before refusing: now N
    is checked against the run's units first, so the refusal takes no memory that grows with N.
    """
    ahead = planned(data)
    tracemalloc.start()
    try:
        with pytest.raises(InvalidValueError, match="fewer than 300,000 shards; give N <= 15"):
            shards.part_of(ahead.task, ahead.probes, "1/300000")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 500_000  # a list of N loads alone took 2.4 MB


@pytest.mark.parametrize(
    "bad", ["0/4", "5/4", "2", "a/b", "1/0", "-1/3", "\u00b2/4", "1/" + "9" * 5000]
)
def test_a_bad_shard_is_refused_before_anything_loads(bad, tmp_path, capsys):
    with pytest.raises(
        InvalidValueError, match=r"--shard takes K/N, the K-th of N slices with 1 <= K <= N"
    ):
        runner.run(CONFIG, "no/such-model", shard=bad, out=tmp_path / "run")
    assert (
        main(
            [
                "run",
                CONFIG,
                "--model",
                "no/such-model",
                f"--shard={bad}",
                "--out",
                str(tmp_path / "r"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err  # one short line: a 5,000-digit N is not echoed whole
    assert "--shard takes K/N" in err and len(err) < 300 and not (tmp_path / "run").exists()


def test_merged_shards_equal_the_one_process_run(data, tmp_path):
    full = run(data, tmp_path / "full")
    shard_runs(data, tmp_path / "shards", 3)
    merged = merge_runs([tmp_path / "shards" / k for k in ("3", "1", "2")], tmp_path / "merged")
    items = [
        (tmp_path / name / "items.jsonl").read_text(encoding="utf-8") for name in ("full", "merged")
    ]
    assert items[0] == items[1]  # line for line, in the one-process run's order
    assert (
        json.loads((tmp_path / "merged" / "metrics.json").read_text())
        == full.metrics
        == merged.metrics
    )
    configs = [
        json.loads((tmp_path / name / "config.json").read_text()) for name in ("full", "merged")
    ]
    assert [{k: v for k, v in c.items() if k not in ONE_PROCESS} for c in configs[:1]] == [
        {k: v for k, v in configs[1].items() if k not in ONE_PROCESS}
    ]
    assert configs[1]["processes"] == 3 and (tmp_path / "merged" / "report.md").is_file()
    assert main(["report", str(tmp_path / "merged")]) == 0


def test_merged_shards_of_a_limited_run_equal_it(data, tmp_path):
    full = run(data, tmp_path / "full", limit=6)
    shard_runs(data, tmp_path / "shards", 2, limit=6)
    merged = merge_runs([tmp_path / "shards" / k for k in ("1", "2")], tmp_path / "merged")
    assert merged.records == full.records and merged.metrics == full.metrics
    assert (
        merged.config.subset == full.config.subset and merged.config.planned == full.config.planned
    )


def test_a_missing_repeated_mismatched_or_unfinished_shard_is_refused_naming_it(data, tmp_path):
    root = tmp_path / "shards"
    shard_runs(data, root, 3)
    run(data, tmp_path / "other", shard="2/3", language="en")
    run(data, tmp_path / "four", shard="2/4")
    run(data, tmp_path / "whole")
    cases = {
        "missing": (
            [root / "1", root / "3"],
            r"shard 2/3 is missing \(1 of 3 missing\): pass its folder too",
        ),
        "repeated": (
            [root / "1", root / "2", root / "2", root / "3"],
            f"shard 2/3 is given twice: {root / '2'}",
        ),
        "other settings": (
            [root / "1", tmp_path / "other", root / "3"],
            rf"shard 2/3 \({tmp_path / 'other'}\) was made with other settings than shard 1/3 .*: run.language is "
            "'en' there and None here",
        ),
        "other count": (
            [root / "1", tmp_path / "four"],
            r"is one of 4 shards, shard 1/3 .* one of 3",
        ),
        "not a shard": (
            [root / "1", tmp_path / "whole"],
            f"{tmp_path / 'whole'} is not a shard: it was run without",
        ),
    }
    for name, (folders, says) in cases.items():
        with pytest.raises(CultureProbeError, match=says):
            merge_runs(folders, tmp_path / name)
        assert not (tmp_path / name).exists(), name  # refused before anything is written
    (root / "2" / "metrics.json").unlink()  # a shard killed before it finished
    lines = (root / "2" / "items.jsonl").read_text().splitlines(keepends=True)
    (root / "2" / "items.jsonl").write_text("".join(lines[:-1]))
    with pytest.raises(
        CultureProbeError, match=rf"shard 2/3 \({root / '2'}\) is INCOMPLETE {len(lines) - 1}/"
    ):
        merge_runs([root / k for k in ("1", "2", "3")], tmp_path / "incomplete")


def test_the_cli_merges_and_refuses_in_one_line(data, tmp_path, capsys):
    shard_runs(data, tmp_path / "s", 2)
    assert main(["merge", str(tmp_path / "s" / "1"), "--out", str(tmp_path / "m")]) == 2
    assert "shard 2/2 is missing" in capsys.readouterr().err
    both = [
        "merge",
        str(tmp_path / "s" / "1"),
        str(tmp_path / "s" / "2"),
        "--out",
        str(tmp_path / "m"),
    ]
    assert main(both) == 0
    assert f"wrote {tmp_path / 'm'}" in capsys.readouterr().out
    assert main(both) == 2
    assert "is not empty: the merge writes a new run" in capsys.readouterr().err


class Crash(Exception):
    pass


class CrashingScorer(TableScorer):
    """Dies (like a killed process) on its second engine call."""

    def score(self, requests, options=None):
        if self.calls == 1:
            raise Crash("killed")
        return super().score(requests, options)


def test_a_shard_resumes_on_its_own_and_never_in_another_shards_folder(data, tmp_path, monkeypatch):
    monkeypatch.setattr("culture_probe.runner.execution.CHUNK", 2)
    whole = run(data, tmp_path / "whole", shard="1/2")
    out = tmp_path / "killed"
    with pytest.raises(Crash):
        runner.run(
            CONFIG,
            CrashingScorer(spec_table()),
            data_dir=data,
            out=out,
            progress=False,
            shard="1/2",
        )
    assert len((out / "items.jsonl").read_text().splitlines()) == 2
    with pytest.raises(
        CultureProbeError, match=r"Cannot resume .*: run.shard was '1/2' and is now '2/2'"
    ):
        run(data, out, shard="2/2", resume=True)
    resumed = run(data, out, shard="1/2", resume=True)
    assert resumed.records == whole.records and resumed.metrics == whole.metrics
    assert (out / "items.jsonl").read_text() == (tmp_path / "whole" / "items.jsonl").read_text()


def test_a_suite_of_shards_merges_config_by_config(data, tmp_path):
    keywords = {"data_dir": f"dlama={data}", "progress": False}

    scorer = TableScorer(spec_table())  # one model, as the suite's summary names it
    full = run_suite([CONFIG], scorer, out=tmp_path / "full", **keywords)
    for k in (1, 2):
        run_suite([CONFIG], scorer, out=tmp_path / str(k), shard=f"{k}/2", **keywords)
    merged = merge_suites([tmp_path / "1", tmp_path / "2"], tmp_path / "merged")
    assert merged.runs[CONFIG].records == full.runs[CONFIG].records
    assert merged.runs[CONFIG].metrics == full.runs[CONFIG].metrics
    assert merged.summary == full.summary
    assert (
        main(["merge", str(tmp_path / "1"), str(tmp_path / "2"), "--out", str(tmp_path / "cli")])
        == 0
    )


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """What the recipes run: a tiny random masked model on the spec's 5 DLAMA facts (shards of 3 and
    2), the `culture-probe run` arguments after the model, and the one-process run of both, which
    each recipe's merge must give.
    """
    from culture_probe.models import save_tiny, train_tokenizer

    root = tmp_path_factory.mktemp("recipes")
    texts = [
        "Egypt Oman France Canada Morocco is located in Africa Asia Europe North America ."
    ] * 3
    model = save_tiny(
        root / "bert", "bert", train_tokenizer(texts, "wordpiece", model_kind="masked")
    )
    extra = ["--data-dir", str(write_dlama(root / "dlama")), "--no-cache"]
    assert main(["run", CONFIG, "--model", str(model), *extra, "--out", str(root / "one")]) == 0
    return model, extra, root / "one"


def recipe_env():
    """The environment a recipe runs in: this one, with the venv's `culture-probe` on PATH."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def assert_the_one_process_run(merged, one):
    """The merged folder's items.jsonl is the one-process run's line for line, and its metrics.json
    equal apart from the truncation counts of the processes (what the engine cut, summed over the
    shards, is equal).
    """
    items = [(path / "items.jsonl").read_text(encoding="utf-8") for path in (merged, one)]
    metrics = [json.loads((path / "metrics.json").read_text()) for path in (merged, one)]
    assert items[0] == items[1]
    assert [{k: v for k, v in m.items() if k != "truncation"} for m in metrics[:1]] == [
        {k: v for k, v in metrics[1].items() if k != "truncation"}
    ]
    truncation = [
        {k: v for k, v in m["truncation"].items() if k not in ("resumed", "processes")}
        for m in metrics
    ]
    assert truncation[0] == truncation[1]


def test_the_slurm_array_recipe_run_as_slurm_runs_it_merges_into_the_one_process_run(
    tiny, tmp_path
):
    """docs/recipes/slurm_array.sh, run by bash once per array task (SLURM_ARRAY_TASK_ID 1 and 2 of
    2) on a tiny random model, then the merge it names: the one-process run's records and metrics.
    """
    model, extra, one = tiny
    env = recipe_env()
    env |= {"CONFIG": CONFIG, "MODEL": str(model), "SHARDS": "2", "OUT": str(tmp_path / "shards")}
    script = REPO / "docs" / "recipes" / "slurm_array.sh"
    for k in (1, 2):
        done = subprocess.run(
            ["bash", str(script), *extra],
            env={**env, "SLURM_ARRAY_TASK_ID": str(k)},
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
    shard_dirs = sorted(str(p) for p in (tmp_path / "shards").iterdir())
    assert main(["merge", *shard_dirs, "--out", str(tmp_path / "run")]) == 0
    assert_the_one_process_run(tmp_path / "run", one)


def ray_processes(ray_tmp, wait_s=120):
    """The processes that a Ray instance started with RAY_TMPDIR=`ray_tmp` left running (every one
    of them inherits it, whatever its name: gcs_server, raylet, ray::IDLE, the agents), once they
    have had `wait_s` seconds to exit (a busy machine takes a while to end a dozen processes; an
    idle one returns at once).
    """
    marker = f"RAY_TMPDIR={ray_tmp}".encode()
    deadline = time.monotonic() + wait_s
    while True:
        left = {}
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                if marker in (proc / "environ").read_bytes().split(b"\0"):
                    left[int(proc.name)] = (
                        (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                    )
            except OSError:  # exited meanwhile, or another user's
                pass
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


# Ray's own words when its local start missed one of its fixed deadlines: Ray 2.x gives its agents
# 15 s to report their ports and the node 30 s to register, and no setting changes either (on 2
# cores at load 8 and more, the agents' imports alone take longer).
RAY_START_TIMED_OUT = "timed out during startup"


def run_in_own_session(command, timeout_s, **keywords):
    """`command` run to its end in a session of its own, and on a hang (past `timeout_s`) killed
    with everything it started. Where the kernel shares the CPU between sessions (Linux's
    autogroup), its own session gives Ray's start one share of a busy machine's CPU against the
    other jobs' sessions, instead of one share per process of theirs: on 2 cores at load 8-9 the
    local instance then starts in about 16 s, against 30 s or more (past its deadline).
    """
    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **keywords,
    ) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)


def run_ray_recipe(command, ray_tmp, attempts=3, **keywords):
    """The Ray recipe run until its local instance has started: when Ray's start missed its fixed
    deadline (above), the failed instance is left to end with its script (or ended), and the script
    run again, as docs/sharding.md tells a user to (the shards resume). The 20-minute limit of a run
    only guards a hang: on 2 loaded cores one takes 2-4 minutes.
    """
    done = run_in_own_session(command, 1200, **keywords)
    for _ in range(attempts - 1):
        if done.returncode == 0 or RAY_START_TIMED_OUT not in done.stderr:
            break
        # the failed instance ends with its script; what outlived its 2 minutes is ended here
        for pid in ray_processes(ray_tmp):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        done = run_in_own_session(command, 1200, **keywords)
    return done


@pytest.mark.slow
def test_the_ray_recipe_on_a_local_ray_instance_merges_into_the_one_process_run(tiny, tmp_path):
    """docs/recipes/ray_shards.py, run as a user runs it: a local Ray instance of 2 CPUs, one task
    per shard asking 0 GPUs, then its merge: the one-process run's records and metrics. Ray's
    session folder is a short one of its own (its sockets' paths have a length limit; parallel tests
    share no /tmp/ray), its token is in the environment (not written to ~/.ray), and nothing of the
    instance outlives the script. On a busy machine the script runs in a session of its own and
    again when Ray's start missed its fixed deadline (`run_ray_recipe`).
    """
    model, extra, one = tiny
    script = REPO / "docs" / "recipes" / "ray_shards.py"
    shards_dir, merged = tmp_path / "shards", tmp_path / "run"
    ray_tmp = Path(tempfile.mkdtemp(prefix="ray-"))
    env = recipe_env() | {
        "RAY_TMPDIR": str(ray_tmp),
        "RAY_AUTH_TOKEN": secrets.token_hex(32),
        "RAY_USAGE_STATS_ENABLED": "0",
        # a worker has 60 s to register with its raylet by default; on 2 loaded cores `import ray`
        # alone takes 10 s
        "RAY_worker_register_timeout_seconds": "600",
    }
    try:
        command = [sys.executable, str(script), CONFIG, "--model", str(model), *extra]
        command += ["--shard-dir", str(shards_dir), "--out", str(merged)]
        command += "--shards 2 --gpus-per-shard 0 --num-cpus 2".split()
        done = run_ray_recipe(command, ray_tmp, env=env, cwd=tmp_path)
        if done.returncode != 0 and RAY_START_TIMED_OUT in done.stderr:
            # Ray itself, not the recipe: a precondition this machine lacks now, as a missing
            # browser is for the board's tests (on 2 cores at load 10-11 from 7 other sessions, 3
            # tries in a row missed it)
            load = os.getloadavg()[0]
            pytest.skip(
                f"Ray could not start a local instance within its fixed deadlines in 3 tries (load {load:.1f})"
            )
        assert done.returncode == 0, done.stderr
        assert f"merged 2 shards into {merged}: 10 items" in done.stdout
        assert "(run_shard pid=" in done.stdout + done.stderr  # the shards ran in Ray's workers
        assert sorted(p.name for p in shards_dir.iterdir()) == ["1", "2"]
        assert_the_one_process_run(merged, one)
        assert not ray_processes(ray_tmp)  # ray.shutdown() ended the instance with the script
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_shards_of_a_planted_model_merge_with_its_planted_split(data, tmp_path):
    # the merge read a planted model's items without the planted sources and refused its `planted:`
    # name
    model = "planted:dlama_arab_west"
    whole = runner.run(CONFIG, model, data_dir=data, progress=False)
    for k in (1, 2):
        runner.run(
            CONFIG, model, data_dir=data, shard=f"{k}/2", out=tmp_path / str(k), progress=False
        )
    merged = merge_runs([tmp_path / "1", tmp_path / "2"], tmp_path / "merged")
    assert "planted" in whole.metrics
    assert merged.metrics["planted"] == whole.metrics["planted"]
