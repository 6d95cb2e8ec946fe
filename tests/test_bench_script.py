"""`make bench` keeps working: the engine benchmark runs end to end on a small subset of the FmLAMA
pool, the engine agrees with both baselines, and a target that fails makes the script fail (the
speed figures themselves are the script's job, not a test's).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "perf" / "bench_engine.py"


@pytest.mark.usefixtures("mirror")
def test_bench_script_compares_engine_and_baselines_and_fails_a_missed_target():
    args = [
        "--dishes",
        "2",
        "--candidates",
        "40",
        "--hidden",
        "32",
        "--heads",
        "2",
        "--threads",
        "1",
    ]
    out = subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=1200
    )
    lines = out.stdout.splitlines()
    for model in ("gpt2  (n_positions 256", "gpt2  (n_positions 1024", "bert  "):
        assert any(
            line.startswith(model) and "2 dishes x 40 candidates" in line for line in lines
        ), out.stdout
    # the real harness ran
    assert sum("lm-eval HFLM" in line and "speed-up" in line for line in lines) == 2
    assert sum("FLOP bound" in line and "x the bound" in line for line in lines) == 2
    # the engine agrees with lm-eval and with the masked baseline, and generates what model.generate
    # does
    assert sum(line.strip().startswith("PASS  max |diff| <= 1e-04") for line in lines) == 3, (
        out.stdout
    )
    assert any(line.strip().startswith("PASS  identical texts (32/32)") for line in lines), (
        out.stdout
    )
    assert any(line.startswith("start-up: culture-probe --help") for line in lines), out.stdout
    # 40 candidates are fewer than the 1,000 the benchmark needs: that target fails, and so does the
    # script.
    assert (
        sum(line.strip().startswith("FAIL  pool >= 1,000 candidates (40)") for line in lines) == 3
    )
    assert out.returncode == 1, out.stderr


BENCHMARKS = SCRIPT.parent


def script(name: str):
    """A benchmark script imported as a module (they are scripts, not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_busy_time_merges_overlapping_and_nested_intervals_once():
    import numpy as np

    union_ns = script("bench_fullsize").union_ns
    rng = np.random.default_rng(0)
    for _ in range(200):
        starts = rng.integers(0, 100, size=rng.integers(0, 12))
        spans = np.stack([starts, starts + rng.integers(0, 30, size=len(starts))], axis=1)
        covered = np.zeros(200, dtype=bool)  # the reference: each nanosecond marked once
        for start, end in spans:
            covered[start:end] = True
        assert union_ns(spans) == covered.sum()
    assert union_ns([]) == 0
    assert union_ns([(0, 10), (2, 5), (5, 12), (20, 21)]) == 13  # nested, touching, apart


def test_gpu_check_reads_the_gpu_lines_of_the_full_size_benchmark():
    """The GPU's lines (only printed on a GPU) as gpu_check reads them: the busy share judged
    against the target, the N-process speed-up and score equality, and one GPU's row saying that it
    was not measured.
    """
    fullsize, check = script("bench_fullsize"), script("gpu_check")
    busy = fullsize.Measured(
        probes=1000,
        candidates=1_287_000,
        tokens=487_000,
        head_rows=9000,
        stage_s=20.0,
        model_s=17.0,
        wall_s=30.0,
        peak_rss_mb=4000.0,
        hook_s=19.0,
        busy_s=17.0,
        busy_events=12_345,
        step_span_s=18.0,
        steps=40,
        timing="profiler",
        device="cuda",
    )
    idle = fullsize.Measured(**{**vars(busy), "busy_s": 0.0, "model_s": 9.0, "step_span_s": 9.0})
    idle.timing = "events"  # the profiler saw no kernel: the CUDA events stand in
    output = "\n".join(
        [
            "",
            "fmlama_masked (fmlama_en, bert 6x2048, 16 heads on cuda, limit 100): 1,000 probes, ...",
            "  stage 20.0 s = model 17.0 s + host 3.0 s: host/model 0.18, ...",
            fullsize.busy_line(busy),
            "  2 processes (torchrun): stage 10.50 s against 20.00 s in one process: speed-up 1.90x (whole runs 20.0 s "
            "against 30.0 s); scores max |diff| 2.4e-07 over 1,287,000",
            "",
            "fmlama_causal (fmlama_en, gpt2 6x2048, 16 heads on cuda, limit 30): 300 probes, ...",
            "  stage 20.0 s = model 9.0 s + host 11.0 s: host/model 1.22, ...",
            fullsize.busy_line(idle),
            "  2 processes (torchrun): stage 10.00 s against 20.00 s in one process: speed-up 2.00x (whole runs 20.0 s "
            "against 30.0 s); scores max |diff| 0.01 over 386,100",
        ]
    )
    rows = dict(check.fullsize_parsed(output, 2, "cuda"))
    assert rows["full-size fmlama_masked busy share"].startswith(
        "85.0% of the stage's wall time (target >= 80% at the 313 M shape): PASS; CUDA kernels 17.00 s of 20.00 s "
        "(torch.profiler, 12,345 kernels"
    )
    assert rows["full-size fmlama_causal busy share"].startswith("45.0% of the stage's wall time")
    assert (
        ": FAIL; device step span, CUDA events (the profiler recorded no kernel)"
        in (rows["full-size fmlama_causal busy share"])
    )
    assert rows["multi-process speed-up fmlama_masked"].startswith("2 GPUs: stage 10.50 s")
    assert rows["multi-process speed-up fmlama_masked"].endswith("scores equal within 1e-05: PASS")
    assert rows["multi-process speed-up fmlama_causal"].endswith(
        "scores NOT equal within 1e-05: FAIL"
    )
    one = dict(check.fullsize_parsed(output, 1, "cuda"))
    assert (
        one["multi-process speed-up fmlama_masked"]
        == "one GPU: multi-process speed-up not measured"
    )
    # a workload whose run printed no busy share (it failed) is said to have failed
    broken = dict(check.fullsize_parsed(output.split("\nfmlama_causal")[0], 1, "cuda"))
    assert broken["full-size fmlama_causal"].startswith("failed: no busy share")


def test_full_size_gpu_options_refuse_a_machine_without_a_gpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_fullsize.py"), "--device", "cuda"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 2
    assert "--device cuda: torch sees no GPU here (run it with --device cpu)" in done.stderr
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "gpu_check.py"), "--only", "engine"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "no GPU here" in done.stderr and done.returncode == 1


@pytest.mark.slow
@pytest.mark.usefixtures("mirror")
def test_full_size_benchmark_measures_the_busy_share_and_two_processes_on_the_cpu():
    """The GPU options' path on the CPU: a given shape, the profiler's busy share, and two processes
    (torchrun on gloo) that give one process's scores.
    """
    args = [
        "--device",
        "cpu",
        "--workloads",
        "fmlama_masked",
        "--dishes",
        "1",
        "--baseline",
        "none",
    ]
    args += ["--layers", "1", "--hidden", "32", "--heads", "2", "--threads", "1"]
    out = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "bench_fullsize.py"),
            *args,
            "--profile",
            "--processes",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = out.stdout.splitlines()
    assert any(
        line.startswith("fmlama_masked (fmlama_en, bert 1x32, 2 heads, limit 1)") for line in lines
    ), out.stdout + out.stderr
    busy = [line for line in lines if line.startswith("  busy ")]
    assert len(busy) == 1 and "% of the stage: CPU time inside torch ops" in busy[0], out.stdout
    share = float(busy[0].split()[1].rstrip("%"))
    assert 0 < share <= 100
    two = [line for line in lines if line.startswith("  2 processes (torchrun): stage ")]
    assert len(two) == 1 and "speed-up" in two[0], out.stdout
    assert float(two[0].split("max |diff| ")[1].split()[0]) <= 1e-5
