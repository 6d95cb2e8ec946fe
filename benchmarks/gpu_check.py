"""The checks a GPU machine is for, in one script under 10 minutes, ending in one table (issue 38):

1. the engine benchmark (benchmarks/bench_engine.py) with every model on the GPU: the engine against lm-eval's
   `HFLM` (needs `lm-eval` installed), against per-candidate masked scoring and per-prompt `model.generate`,
   and its FLOP bound at the GPU's measured float32 rate;
2. the multi-process equality tests (tests/engine/test_parallel.py, slow ones: two processes give one process's
   scores and texts) with one GPU per process when the machine has two or more GPUs; on one GPU (nccl takes one
   GPU per process) with two CPU processes on gloo, and the table says which;
3. served scoring through vLLM: not measured yet (issue 38's served benchmark); the table says whether vllm is
   installed.

    CULTURE_PROBE_MIRROR=... python benchmarks/gpu_check.py [--quick]

`--quick` runs the benchmark on 4 dishes x 200 candidates (about a minute), for checking the script itself.
The benchmark's PASS/FAIL targets were set for the project's 2-core CPU machine; on a GPU its figures are printed
for the record and the table gives each side's time and the ratio.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SPEEDUP = re.compile(r"^\s+engine\s+([\d.]+) s\s+(.+?)\s+([\d.]+) s\s+speed-up\s+([\d.]+)x(.*)$")


def gpus() -> tuple[int, str]:
    import torch

    count = torch.cuda.device_count()
    return count, torch.cuda.get_device_name(0) if count else "no GPU"


def run(
    command: list[str], timeout: float, env: dict[str, str] | None = None
) -> tuple[int, str, float]:
    """(exit status, stdout and stderr, seconds) of `command`, echoed as it goes to the log."""
    start = time.perf_counter()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, cwd=REPO, env=env
        )
        status, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as expired:
        status, output = (
            124,
            f"{expired.stdout or ''}{expired.stderr or ''}\ntimed out after {timeout:.0f} s",
        )
    print(output, flush=True)
    return status, output, time.perf_counter() - start


def engine_rows(quick: bool) -> list[tuple[str, str]]:
    """The engine benchmark on the GPU: one row per comparison, with both times and the ratio."""
    size = (
        ["--dishes", "4", "--candidates", "200"] if quick else ["--dishes", "20", "--repeat", "2"]
    )
    status, output, seconds = run(
        [sys.executable, str(HERE / "bench_engine.py"), "--device", "cuda", *size], 480
    )
    rows, case = [], ""
    for line in output.splitlines():
        if line and not line[0].isspace() and "(" in line:
            case = line.split(":")[0]
        found = SPEEDUP.match(line)
        if found:
            engine, baseline, other, ratio, rest = found.groups()
            rows.append((case, f"engine {engine} s, {baseline} {other} s: {ratio}x{rest}"))
        elif "FLOP bound" in line:
            rows.append((case, line.strip()))
    rows.append(
        ("engine benchmark", f"exit {status} in {seconds:.0f} s (targets are the CPU machine's)")
    )
    return rows


def parallel_rows(count: int) -> list[tuple[str, str]]:
    """The slow multi-process equality tests: one GPU per process where there are two or more GPUs; on one GPU (nccl
    takes one GPU per process) the same tests with two CPU processes on gloo, said so in the row.
    """
    import os

    test = "tests/engine/test_parallel.py"
    env = dict(os.environ)
    where = f"{count} GPUs, one per process"
    if count < 2:
        env["CUDA_VISIBLE_DEVICES"] = ""
        where = "2 CPU processes on gloo (one GPU here: nccl needs one per process)"
    status, output, seconds = run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test], 300, env
    )
    summary = (output.strip().splitlines() or ["no output"])[-1]
    return [("multi-process equality", f"{where}: exit {status} in {seconds:.0f} s: {summary}")]


def served_rows() -> list[tuple[str, str]]:
    """Served scoring through vLLM is not measured by this script yet (issue 38, item 2): say whether it could be."""
    try:
        import vllm  # noqa: F401

        here = "vllm is installed here"
    except ImportError:
        here = "vllm is not installed here"
    return [("vLLM served scoring", f"not measured by this script yet ({here})")]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="a small benchmark, to check the script"
    )
    args = parser.parse_args()
    count, name = gpus()
    if not count:
        raise SystemExit("no GPU here: run this on a machine with one (see docs/performance.md)")
    rows = [*engine_rows(args.quick), *parallel_rows(count), *served_rows()]
    print(f"\n| check ({count} x {name}) | result |\n|---|---|")
    for check, result in rows:
        print(f"| {check} | {result} |")


if __name__ == "__main__":
    main()
