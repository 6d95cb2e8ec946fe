"""Full-size runs on tiny models, host work against model work measured in the same run (issue 45,
item 5).

Each workload is a real `culture_probe.run` of a benchmark config on a tiny random-weight model of a
real architecture (2 layers, hidden 64 by default, a tokenizer of at most 8,000 tokens trained on
the config's text):
- `fmlama_masked`: fmlama_en, `--dishes` dishes (default 100: 1,000 probes x 1,287 ingredients),
  BERT;
- `fmlama_causal`: the same with GPT-2 (default 30 dishes);
- `dlama`: dlama_arab_west in full (49,070 probes, 24.6 M candidates), BERT (needs the mirror's
  DLAMA-v1 release);
- `camel`: camel_co_prompts in full (1,250 probes, left-to-right masks), BERT.
Each runs in a process of its own (so its peak memory is its own), from planning to metrics, writing
its folder as a run does (the report aside). It prints, per workload: the stage's wall time, the
time inside the model (its forward passes and the log-softmax at the read positions, timed by
hooks), the rest as host work, their ratio, the host time per candidate, the tokens through the
model and the peak RSS; then what the same tokens would cost one H100 for mBERT, XLM-R large, GPT-2
small and a 7B model (2 x non-embedding parameters x tokens, plus the LM head at the positions it
runs at, at 400 TFLOP/s: a lower bound, attention aside) against the host time measured here.

`--baseline REV` runs the same workloads with the package as it was at git revision REV (default:
the commit before issue 45's engine, ae4b5f2; `none` to skip), prints its host time per candidate
beside today's and the largest difference between the two engines' scores on the same inputs (0
where the arithmetic did not change). DLAMA's baseline runs `--baseline-limit` facts (default
2,000), the old engine taking minutes per million candidates.

Targets (this project's 2-core CPU): masked FmLAMA host work at most 0.3x the model's time, causal
at most 0.15x, and at most 3 microseconds of host work per candidate; exits 1 when one fails.

`--device cuda` puts the model and its inputs on the GPU (`--layers 6 --hidden 2048 --heads 16` is
the "313 M shape" of docs/performance.md). There the model's time is the DEVICE's busy time, not the
hooks' (a hook around a batch times the host's wait for the GPU, launch gaps included):
`torch.profiler`, recording CUDA activity only (no CPU ops, so its cost to the host is CUPTI's, per
kernel), records every kernel of the stage; their intervals are merged (a kernel that overlaps
another, on another stream, counts once) and summed, and each workload prints that sum as the share
of the stage's wall time the device was busy (`busy NN.N% of the stage`). Copies (Memcpy/Memset) are
not kernels and are left out. Chosen over CUDA events around the engine's device step because an
event pair times the step's span on the stream, idle gaps between launches included (a small,
launch-bound model can spend much of a step in them); the events are recorded too (the "device step
span", an upper bound of the busy time) and stand in for the profiler when it records no kernel (a
GPU image without CUPTI), which the line then says. The hooks' time is printed beside. `--profile`
measures the same share on the CPU (the union of the profiler's torch operators, nested ones merged:
the share of the stage inside torch ops, an upper bound of the model's), for checking this path
where no GPU is lent; on the CPU the output is otherwise as without it. `--processes N` runs each
workload again under `torchrun --nproc_per_node N` (N GPUs, one per process, or N CPU processes on
gloo) and prints the speed-up of its stage over the one-process run and the largest difference
between the two runs' scores.

    python perf/bench_fullsize.py [--workloads fmlama_masked fmlama_causal dlama camel]
        [--dishes 100] [--causal-dishes 30] [--baseline ae4b5f2|none] [--baseline-limit 2000]
        [--threads 2] [--layers 2] [--hidden 64] [--heads 4] [--device cpu|cuda] [--profile]
        [--processes N] [--models DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BASELINE = "ae4b5f2"  # the engine before issue 45
H100 = 400e12  # FLOP/s taken as one H100's ceiling
TARGETS = {"fmlama_masked": 0.3, "fmlama_causal": 0.15}
MAX_US_PER_CANDIDATE = 3.0
HEADS = 4  # the tiny models' attention heads unless --heads says otherwise
TEXT_ROWS = 2000  # rows of a config whose strings train its tokenizer
#: name: (non-embedding parameters, hidden size, vocabulary) of the models the projection is for
TARGET_MODELS = {
    "mBERT": (85e6, 768, 119_547),
    "XLM-R large": (303e6, 1024, 250_002),
    "GPT-2 small": (85e6, 768, 50_257),
    "7B (Llama-2 shape)": (6.5e9, 4096, 32_000),
}


@dataclass(frozen=True)
class Workload:
    config: str
    arch: str
    limit: int | None = None


@dataclass(frozen=True)
class Runtime:
    """Where and how a workload's process runs: torch threads, device, whether the profiler records
    the stage, and the number of processes (torchrun) it is run in.
    """

    threads: int
    device: str = "cpu"
    profile: bool = False
    processes: int = 1


@dataclass
class Measured:
    """What one workload's run measured. `model_s` is the hooks' time on the CPU and the device's
    busy time on a GPU (`timing` says which); `busy_s` is the profiler's merged activity (None where
    it did not run), `busy_events` the kernels (or CPU ops) it merged, `step_span_s` the CUDA
    events' span of the device steps (None on the CPU).
    """

    probes: int
    candidates: int
    tokens: int
    head_rows: int
    stage_s: float
    model_s: float
    wall_s: float
    peak_rss_mb: float
    hook_s: float = 0.0
    busy_s: float | None = None
    busy_events: int = 0
    step_span_s: float | None = None
    steps: int = 0
    timing: str = "hooks"
    device: str = "cpu"
    processes: int = 1

    @property
    def host_s(self) -> float:
        return self.stage_s - self.model_s

    @property
    def us_per_candidate(self) -> float:
        return 1e6 * self.host_s / max(self.candidates, 1)


def workloads(args: argparse.Namespace) -> dict[str, Workload]:
    return {
        "fmlama_masked": Workload("fmlama_en", "bert", args.dishes),
        "fmlama_causal": Workload("fmlama_en", "gpt2", args.causal_dishes),
        "dlama": Workload("dlama_arab_west", "bert"),
        "camel": Workload("camel_co_prompts", "bert"),
    }


def data_dir(config: str) -> str | None:
    mirror = os.environ.get("CULTURE_PROBE_MIRROR")
    if config.startswith("dlama") and mirror:
        return str(Path(mirror) / "manual" / "dlama" / "dlama-v1")
    return None


def strings(value: Any) -> list[str]:
    """Every string inside a row (bench_smoke's reader, from this folder)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_smoke import strings as read

    found: list[str] = read(value)
    return found


def model_folder(root: Path, work: Workload, layers: int, hidden: int, heads: int = HEADS) -> Path:
    """A tiny model of `work`'s architecture with a tokenizer trained on the config's text (made
    once per folder).
    """
    from culture_probe.data.registry import resolve
    from culture_probe.loading import load_rows
    from culture_probe.models import save_tiny, train_tokenizer

    folder = (
        root / f"{work.config}-{work.arch}-{layers}x{hidden}{'' if heads == HEADS else f'h{heads}'}"
    )
    if (folder / "config.json").is_file():
        return folder
    rows = list(load_rows(resolve(work.config), data_dir=data_dir(work.config)))
    texts = strings(rows[:TEXT_ROWS]) + strings(rows[:: max(1, len(rows) // TEXT_ROWS)])
    family, kind = ("wordpiece", "masked") if work.arch == "bert" else ("bpe", "causal")
    tokenizer = train_tokenizer(texts, family, vocab_size=8000, model_kind=kind)
    return save_tiny(folder, work.arch, tokenizer, layers=layers, hidden=hidden, heads=heads)


def union_ns(spans: Any) -> int:
    """The time covered by the intervals `spans` ([n, 2] start, end), each instant counted once
    however many intervals hold it (kernels on several streams, nested operators).
    """
    import numpy as np

    spans = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    if not len(spans):
        return 0
    spans = spans[np.argsort(spans[:, 0], kind="stable")]
    reach = np.maximum.accumulate(spans[:, 1])
    first = np.flatnonzero(np.r_[True, spans[1:, 0] > reach[:-1]])
    last = np.r_[first[1:] - 1, len(spans) - 1]
    return int((reach[last] - spans[first, 0]).sum())


def stage_profiler(device: str | None) -> Any:
    """`torch.profiler` recording only `device`'s activity (CUDA kernels on a GPU, torch operators
    on the CPU), or a null context where `device` is None.
    """
    if device is None:
        return contextlib.nullcontext()
    from torch.profiler import ProfilerActivity, profile

    return profile(activities=[ProfilerActivity.CUDA if device == "cuda" else ProfilerActivity.CPU])


def busy_spans(profiled: Any, device: str) -> list[tuple[int, int]]:
    """(start, end) in ns of every kernel (device "cuda") or CPU operator the profiler recorded."""
    from torch.autograd import DeviceType

    want, kind = (DeviceType.CUDA, "kernel") if device == "cuda" else (DeviceType.CPU, "cpu_op")
    spans = []
    for event in profiled.profiler.kineto_results.events():
        if event.device_type() != want:
            continue
        if hasattr(event, "activity_type"):  # torch >= 2.7; before it, copies are told by name
            if event.activity_type().lower() != kind:  # some kineto builds say "Kernel"
                continue
        elif event.name().startswith(("Memcpy", "Memset")) or event.is_user_annotation():
            continue
        start = event.start_ns()
        spans.append((start, start + event.duration_ns()))
    return spans


def measure(
    work: Workload,
    folder: Path,
    scores_out: Path | None,
    threads: int,
    runtime: Runtime | None = None,
) -> Measured:
    """Run `work` on the model in `folder` in this process, timing the model apart (hooks; on a GPU
    the profiler's kernels, see the module's docstring), keeping the scores.
    """
    import numpy as np
    import torch

    import culture_probe.engine.causal as causal
    import culture_probe.engine.masked as masked
    from culture_probe import run
    from culture_probe.engine import Scorer
    from culture_probe.runner import api

    torch.set_num_threads(threads)
    runtime = runtime or Runtime(threads)
    scorer = Scorer.from_pretrained(str(folder), device=runtime.device)
    cuda = scorer.device.type == "cuda"
    steps: list[tuple[Any, Any]] = []  # CUDA events before and after each device step
    clock = {"model": 0.0, "depth": 0, "began": 0.0, "head_rows": 0}

    def enter(*_: Any) -> None:
        if clock["depth"] == 0:
            clock["began"] = time.perf_counter()
        clock["depth"] += 1

    def leave(*_: Any) -> None:
        clock["depth"] -= 1
        if clock["depth"] == 0:
            clock["model"] += time.perf_counter() - clock["began"]

    modules = {id(m): m for m in [scorer.model, *scorer.model.children()]}
    for module in modules.values():
        module.register_forward_pre_hook(enter)
        module.register_forward_hook(leave)
    head = scorer.model.get_output_embeddings()
    head.register_forward_hook(
        lambda m, inputs, out: clock.__setitem__(
            "head_rows", clock["head_rows"] + inputs[0].shape[0]
        )
    )
    # a batch's device step: the forward, the head and the log-softmax at the read positions (the
    # engine before issue 45 had no function of its own for it: there, its two calls)
    for module in (masked, causal):
        for name in (
            ("_scores_at",) if hasattr(module, "_scores_at") else ("_logits_at", "logprobs_at")
        ):
            setattr(
                module, name, timed(getattr(module, name), enter, leave, steps if cuda else None)
            )
    sums: list[np.ndarray] = []
    asked = {"candidates": 0, "probes": 0}
    score = scorer.score

    def keeping(requests: Any, options: Any = None, **kw: Any) -> Any:
        out = score(requests, options, **kw)
        asked["candidates"] += sum(len(r.candidates) for r in requests)
        asked["probes"] += len(requests)
        sums.extend(o.sum_logprob for o in out)
        return out

    scorer.score = keeping
    staged: dict[str, Any] = {"s": 0.0, "spans": []}
    execute = api.execute
    profiled = scorer.device.type if runtime.profile else None

    def timed_execute(*args: Any, **kw: Any) -> Any:
        with stage_profiler(profiled) as profiler:
            began = time.perf_counter()
            try:
                result = execute(*args, **kw)
            finally:
                staged["s"] = time.perf_counter() - began
        if profiled is not None:  # read once the profiler has stopped (an error is raised as it is)
            staged["spans"] = busy_spans(profiler, profiled)
        return result

    api.execute = timed_execute
    tokens = scorer.tokens_run
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        run(
            work.config,
            scorer,
            limit=work.limit,
            no_cache=True,
            progress=False,
            out=Path(out) / "run",
            data_dir=data_dir(work.config),
        )
    wall = time.perf_counter() - began
    if scores_out is not None:
        np.save(scores_out, np.concatenate(sums) if sums else np.zeros(0))
    busy = union_ns(staged["spans"]) / 1e9 if profiled is not None else None
    span = None
    if cuda:
        torch.cuda.synchronize()
        span = sum(a.elapsed_time(b) for a, b in steps) / 1e3
    model, timing = clock["model"], "hooks"
    if cuda and busy:
        model, timing = busy, "profiler"
    elif cuda:
        model, timing = span or 0.0, "events"
    return Measured(
        probes=asked["probes"],
        candidates=asked["candidates"],
        tokens=scorer.tokens_run - tokens,
        head_rows=clock["head_rows"],
        stage_s=staged["s"],
        model_s=model,
        wall_s=wall,
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        hook_s=clock["model"],
        busy_s=busy,
        busy_events=len(staged["spans"]),
        step_span_s=span,
        steps=len(steps),
        timing=timing,
        device=scorer.device.type,
        processes=int(os.environ.get("WORLD_SIZE", "1")),
    )


def timed(step: Any, enter: Any, leave: Any, events: list[Any] | None = None) -> Any:
    """`step`, its time counted as the model's (and, on CUDA, a pair of events recorded around it in
    `events`).
    """
    import torch

    def run(*args: Any) -> Any:
        enter()
        if events is not None:
            events.append(
                (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            )
            events[-1][0].record()
        try:
            return step(*args)
        finally:
            if events is not None:
                events[-1][1].record()
            leave()

    return run


def baseline_tree(revision: str, root: Path) -> Path:
    """The package as it was at `revision`, unpacked under `root` (git archive)."""
    target = root / f"tree-{revision}"
    if not (target / "culture_probe").is_dir():
        target.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", revision, "culture_probe"],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def in_subprocess(
    name: str, work: Workload, folder: Path, scores: Path, tree: Path, runtime: Runtime
) -> Measured:
    """`measure` in a new process whose package is the one in `tree` (`runtime.processes` of them,
    by torchrun).
    """
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")])),
    }
    payload = json.dumps(
        {**asdict(work), "folder": str(folder), "scores": str(scores), **asdict(runtime)}
    )
    launch = [sys.executable]
    if runtime.processes > 1:  # --standalone: a rendezvous on a free local port
        launch += ["-m", "torch.distributed.run", "--standalone"]
        launch += ["--nproc_per_node", str(runtime.processes)]
    done = subprocess.run(
        [*launch, __file__, "--measure", payload],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode:  # what failed, not only that it did
        sys.stderr.write(done.stderr[-4000:])
        done.check_returncode()
    return Measured(**json.loads(done.stdout.strip().splitlines()[-1]))


def busy_line(m: Measured) -> str:
    """The share of the stage's wall time the device was busy, with what measured it."""
    share = f"  busy {100 * (m.busy_s or m.model_s) / m.stage_s:.1f}% of the stage: "
    if m.device != "cuda":
        return share + (
            f"CPU time inside torch ops {m.busy_s or 0:.1f} s of {m.stage_s:.1f} s (torch.profiler, "
            f"{m.busy_events:,} ops, nesting merged); model (hooks) {100 * m.hook_s / m.stage_s:.1f}%"
        )
    if m.timing == "profiler":
        what = (
            f"CUDA kernels {m.busy_s:.2f} s of {m.stage_s:.2f} s "
            f"(torch.profiler, {m.busy_events:,} kernels, overlaps merged)"
        )
    else:
        what = (
            "device step span, CUDA events (the profiler "
            + ("recorded no kernel" if m.busy_s is not None else "was off")
            + "): an upper bound"
        )
    span = 100 * (m.step_span_s or 0) / m.stage_s
    return share + (
        f"{what}; device step span {span:.1f}% (CUDA events, {m.steps:,} steps); "
        f"Python hooks {m.hook_s:.2f} s"
    )


def projection(m: Measured) -> list[str]:
    """One H100's time for the tokens `m` ran, per target model, against the host time measured
    here.
    """
    lines = []
    for name, (params, hidden, vocab) in TARGET_MODELS.items():
        device = (2 * params * m.tokens + 2 * hidden * vocab * m.head_rows) / H100
        lines.append(
            f"    {name:20s} device >= {device:8.2f} s   host {m.host_s:8.2f} s   host/device {m.host_s / device:8.2f}"
        )
    return lines


def processes_line(
    args: argparse.Namespace,
    name: str,
    work: Workload,
    folder: Path,
    one: Measured,
    scratch: Path,
    runtime: Runtime,
) -> str:
    """`work` again in `args.processes` processes (torchrun): its stage's speed-up over `one` (the
    one-process run, whose scores are in scratch/NAME.npy) and the largest difference between the
    two runs' scores.
    """
    import numpy as np

    scores = scratch / f"{name}-processes.npy"
    many = in_subprocess(
        name, work, folder, scores, REPO, replace(runtime, processes=args.processes)
    )
    mine, theirs = np.load(scratch / f"{name}.npy"), np.load(scores)
    diff = float(np.abs(mine - theirs).max()) if mine.shape == theirs.shape else float("nan")
    return (
        f"  {args.processes} processes (torchrun): stage {many.stage_s:.2f} s against {one.stage_s:.2f} s in one "
        f"process: speed-up {one.stage_s / many.stage_s:.2f}x (whole runs {many.wall_s:.1f} s against "
        f"{one.wall_s:.1f} s); scores max |diff| {diff:.3g} over {len(theirs):,}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument(
        "--workloads", nargs="*", default=["fmlama_masked", "fmlama_causal", "dlama", "camel"]
    )
    parser.add_argument("--dishes", type=int, default=100)
    parser.add_argument("--causal-dishes", type=int, default=30)
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--baseline-limit", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--heads", type=int, default=HEADS)
    parser.add_argument(
        "--device",
        default="cpu",
        choices=("cpu", "cuda"),
        help="where the model and its inputs are (cuda: one GPU per process)",
    )
    parser.add_argument(
        "--profile",
        action=argparse.BooleanOptionalAction,
        help="measure the busy share with torch.profiler (default: on with --device cuda, off on the CPU)",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="also run each workload in N processes (torchrun) and print the speed-up over one",
    )
    parser.add_argument(
        "--models", type=Path, help="a folder to keep the tiny models in between runs"
    )
    args = parser.parse_args()
    if args.measure:
        spec = json.loads(args.measure)
        work = Workload(spec["config"], spec["arch"], spec["limit"])
        runtime = Runtime(
            spec["threads"],
            spec.get("device", "cpu"),
            spec.get("profile", False),
            spec.get("processes", 1),
        )
        # under torchrun, rank 0 keeps the scores and reports (every rank gets every score back)
        first = os.environ.get("RANK", "0") == "0"
        measured = measure(
            work,
            Path(spec["folder"]),
            Path(spec["scores"]) if first else None,
            spec["threads"],
            runtime,
        )
        if first:
            print(json.dumps(asdict(measured)))
        return 0
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            parser.error("--device cuda: torch sees no GPU here (run it with --device cpu)")
    profile = args.device == "cuda" if args.profile is None else args.profile
    runtime = Runtime(args.threads, args.device, profile)

    import numpy as np

    failed = []
    with tempfile.TemporaryDirectory() as scratch:
        root = args.models or Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        old = baseline_tree(args.baseline, Path(scratch)) if args.baseline != "none" else None
        for name in args.workloads:
            work = workloads(args)[name]
            folder = model_folder(root, work, args.layers, args.hidden, args.heads)
            now = in_subprocess(name, work, folder, Path(scratch) / f"{name}.npy", REPO, runtime)
            ratio = now.host_s / now.model_s
            shape = f"{args.layers}x{args.hidden}"  # as before on the CPU with 4 heads
            shape += f", {args.heads} heads" if args.heads != HEADS else ""
            shape += f" on {args.device}" if args.device != "cpu" else ""
            print(
                f"\n{name} ({work.config}, {work.arch} {shape}, "
                f"{'limit ' + str(work.limit) if work.limit else 'full'}): {now.probes:,} probes, "
                f"{now.candidates:,} candidates, {now.tokens:,} tokens through the model, "
                f"peak RSS {now.peak_rss_mb:,.0f} MB"
            )
            print(
                f"  stage {now.stage_s:.1f} s = model {now.model_s:.1f} s + host {now.host_s:.1f} s: "
                f"host/model {ratio:.2f}, "
                f"{now.us_per_candidate:.2f} us of host work per candidate (whole run {now.wall_s:.1f} s)"
            )
            if now.busy_s is not None or now.device == "cuda":
                print(busy_line(now))
            if args.processes > 1:
                print(processes_line(args, name, work, folder, now, Path(scratch), runtime))
            target = TARGETS.get(name)
            if target is not None and ratio > target:
                failed.append(f"{name}: host/model {ratio:.2f} > {target}")
            if now.us_per_candidate > MAX_US_PER_CANDIDATE:
                failed.append(
                    f"{name}: {now.us_per_candidate:.2f} us per candidate > {MAX_US_PER_CANDIDATE}"
                )
            print("  one H100 (projected):")
            print("\n".join(projection(now)))
            if old is None:
                continue
            limited = Workload(
                work.config,
                work.arch,
                work.limit or (args.baseline_limit if name == "dlama" else None),
            )
            if limited != work:
                same = in_subprocess(
                    name,
                    limited,
                    folder,
                    Path(scratch) / f"{name}-now-limited.npy",
                    REPO,
                    runtime,
                )
                now_scores = np.load(Path(scratch) / f"{name}-now-limited.npy")
            else:
                same, now_scores = now, np.load(Path(scratch) / f"{name}.npy")
            before = in_subprocess(
                name, limited, folder, Path(scratch) / f"{name}-old.npy", old, runtime
            )
            old_scores = np.load(Path(scratch) / f"{name}-old.npy")
            diff = (
                float(np.abs(old_scores - now_scores).max())
                if len(old_scores) == len(now_scores)
                else float("nan")
            )
            print(
                f"  before ({args.baseline}{', limit ' + str(limited.limit) if limited != work else ''}): host "
                f"{before.host_s:.1f} s, {before.us_per_candidate:.2f} us per candidate, host/model "
                f"{before.host_s / before.model_s:.2f}; now {same.us_per_candidate:.2f} us per candidate: "
                f"{before.us_per_candidate / same.us_per_candidate:.1f}x less host work; scores max |diff| {diff:.3g}"
            )
    print("\n" + ("\n".join(f"FAIL {f}" for f in failed) if failed else "PASS every target"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
