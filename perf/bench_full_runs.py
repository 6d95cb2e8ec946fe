"""Every config of the five benchmarks run in full (no --limit) on tiny models, timed, with the dry
run's estimate beside each (issue 45, item 6). Run once, by hand: it takes about an hour on the
project's 2-core machine; the test suite does not run it.

One tiny random-weight model per benchmark, of the kind its paper probes first: BERT (masked) for
DLAMA, FmLAMA and CAMeL, GPT-2 with a chat template (causal) for X-FaKT (string judge) and MAPS (the
mirror's manual data); 2 layers, hidden 64, a tokenizer of at most 8,000 tokens trained on the
benchmark's configs' text. For each config, in a process of its own (so that its peak memory is its
own), with a score cache and a rates file of its own:
1. the dry run's estimate before any run of the model on this machine (`first`: from FLOPs);
2. a `--limit smoke` run, as a user's first look would be, which measures the config's fixed part
   (and the model's rates, when it runs long enough to measure them);
3. the dry run's estimate of the full run after it (`after smoke`);
4. a run of a tenth of the items (`--limit`), long enough to measure the rates, and the estimate
   after it (`after a tenth`);
5. the full run, timed (`culture_probe.run` with the progress bar off), and the process's peak RSS.
The runs score without a score cache, so that the full run does all the work its estimate counts.
Each estimate is given as its range and the full run's time over the range's middle. It prints a
markdown table, and `--json FILE` keeps the figures; `--times FILE` takes the full runs' times (and
peak RSS) from such a file instead of running them again (the estimates are measured afresh).

    python perf/bench_full_runs.py [--groups dlama fmlama camel xfakt maps] [--configs NAME ...]
                                         [--models DIR] [--threads 2] [--json FILE] [--times FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

GROUPS = ("dlama", "fmlama", "camel", "xfakt", "maps")
MASKED = ("dlama", "fmlama", "camel")
TEXT_ROWS = 2000


def mirror() -> Path:
    root = os.environ.get("CULTURE_PROBE_MIRROR")
    if not root:
        sys.exit(
            "Set CULTURE_PROBE_MIRROR to the data mirror (DLAMA-v1 and MAPS live in its manual/ folder)."
        )
    return Path(root)


def options_of(config: str) -> dict[str, Any]:
    """The run's settings beside the model: the data folders of the manual data, X-FaKT's string
    judge, and dlama_asia_west in English (the mirror's copy of DLAMA-v1 lacks its Korean labels).
    """
    if config.startswith("dlama"):
        extra = {"language": "en"} if config == "dlama_asia_west" else {}
        return {"data_dir": str(mirror() / "manual" / "dlama" / "dlama-v1"), **extra}
    if config.startswith("xfakt"):
        return {"judge": "string"}
    if config.startswith("maps"):
        return {"data_dir": str(mirror() / "manual" / "maps")}
    return {}


def model_folder(root: Path, group: str, configs: list[str]) -> Path:
    """The benchmark's tiny model, with a tokenizer trained on its configs' text (made once per
    folder).
    """
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_smoke import strings

    from culture_probe.data.registry import resolve
    from culture_probe.loading import load_rows
    from culture_probe.models import save_tiny, train_tokenizer
    from culture_probe.models.planted_benchmarks import CHAT_TEMPLATE

    arch = "bert" if group in MASKED else "gpt2"
    folder = root / f"{group}-{arch}-2x64"
    if (folder / "config.json").is_file():
        return folder
    texts = []
    for config in configs:
        given = options_of(config)
        rows = list(
            load_rows(
                resolve(config), data_dir=given.get("data_dir"), language=given.get("language")
            )
        )
        texts += strings(rows[:TEXT_ROWS]) + strings(rows[:: max(1, len(rows) // TEXT_ROWS)])
    family, kind = ("wordpiece", "masked") if arch == "bert" else ("bpe", "causal")
    tokenizer = train_tokenizer(texts, family, vocab_size=8000, model_kind=kind)
    if arch == "gpt2":
        tokenizer.chat_template = CHAT_TEMPLATE
    return save_tiny(folder, arch, tokenizer, layers=2, hidden=64, heads=4)


def estimate(config: str, model: Path) -> dict[str, Any]:
    """The dry run's estimate of a full run of `config` (its cost line, and the range in seconds
    where it gives one).
    """
    from culture_probe.runner.dryrun import dry_run

    plan = dry_run(config, model, n=0, no_cache=True, **options_of(config)).configs[0]
    low, high = (plan.estimate.low, plan.estimate.high) if plan.estimate else (None, None)
    return {
        "line": plan.cost().strip(),
        "low": low,
        "high": high,
        "tokens": plan.work.tokens,
        "items": plan.items,
    }


def measure(config: str, model: Path, threads: int, full: bool) -> dict[str, Any]:
    """Steps 1-5 of the docstring for one config, in this process (5 only when `full`)."""
    import torch

    from culture_probe import run

    torch.set_num_threads(threads)
    out: dict[str, Any] = {"config": config, "first": estimate(config, model)}
    with tempfile.TemporaryDirectory() as folder:
        began = time.monotonic()
        run(
            config,
            str(model),
            limit="smoke",
            progress=False,
            no_cache=True,  # the full run scores everything, as its estimate counts
            out=Path(folder) / "smoke",
            **options_of(config),
        )
        out["smoke_s"] = time.monotonic() - began
        out["after smoke"] = estimate(config, model)
        tenth = max(out["first"]["items"] // 10, 1)
        run(config, str(model), limit=tenth, progress=False, no_cache=True, **options_of(config))
        out["after a tenth"] = estimate(config, model)
        if not full:
            return out
        began = time.monotonic()
        result = run(
            config,
            str(model),
            progress=False,
            no_cache=True,
            out=Path(folder) / "full",
            **options_of(config),
        )
        out["full_s"] = time.monotonic() - began
        out["probes"] = len(result.records)
        out["stages_s"] = (
            result.config.resources.get("duration_s") if result.config.resources else None
        )
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def in_subprocess(
    config: str, model: Path, threads: int, cache: Path, full: bool
) -> dict[str, Any]:
    """`measure` in a new process whose score cache and rates file are `cache`'s (no run before this
    one's).
    """
    env = {**os.environ, "CULTURE_PROBE_CACHE": str(cache)}
    payload = json.dumps({"config": config, "model": str(model), "threads": threads, "full": full})
    done = subprocess.run(
        [sys.executable, __file__, "--measure", payload], env=env, capture_output=True, text=True
    )
    if done.returncode:
        sys.stderr.write(done.stderr[-4000:])
        return {"config": config, "error": done.stderr.strip().splitlines()[-1]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def seconds(value: float | None) -> str:
    return "none" if value is None else f"{value:,.0f} s" if value >= 10 else f"{value:.1f} s"


def row(m: dict[str, Any]) -> str:
    if "error" in m:
        return f"| {m['config']} | failed: {m['error']} | | | | |"

    def span(e: dict[str, Any]) -> str:
        if e["low"] is None:
            return "none"
        inside = "" if e["low"] <= m["full_s"] <= e["high"] else ", **outside**"
        middle = (e["low"] * e["high"]) ** 0.5
        return f"{seconds(e['low'])} to {seconds(e['high'])} ({m['full_s'] / middle:.2f}x{inside})"

    return (
        f"| {m['config']} | {m['probes']:,} | {seconds(m['full_s'])} | {span(m['first'])} | {span(m['after smoke'])} "
        f"| {span(m['after a tenth'])} | {m['peak_rss_mb']:,.0f} MB |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--groups", nargs="*", default=list(GROUPS))
    parser.add_argument("--configs", nargs="*", help="these configs only (of the groups)")
    parser.add_argument(
        "--models", type=Path, help="a folder to keep the tiny models in between runs"
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, help="keep the figures in this file")
    parser.add_argument("--times", type=Path, help="the full runs' times from this --json file")
    args = parser.parse_args()
    if args.measure:
        spec = json.loads(args.measure)
        measured = measure(spec["config"], Path(spec["model"]), spec["threads"], spec["full"])
        print(json.dumps(measured, default=str))
        return 0
    earlier = (
        {m["config"]: m for m in json.loads(args.times.read_text(encoding="utf-8"))}
        if args.times
        else {}
    )

    from culture_probe.data.registry import expand

    results = []
    with tempfile.TemporaryDirectory() as scratch:
        root = args.models or Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        print(
            "| config | probes | full run | estimate before any run (full run / its middle) | after a smoke run "
            "(same) | after a tenth of the items (same) | peak RSS |\n|---|---|---|---|---|---|---|",
            flush=True,
        )
        for group in args.groups:
            configs = [c for c in expand([group]) if not args.configs or c in args.configs]
            if not configs:
                continue
            model = model_folder(root, group, list(expand([group])))
            for config in configs:
                timed = earlier.get(config, {})
                measured = in_subprocess(
                    config, model, args.threads, Path(scratch) / f"cache-{config}", not timed
                )
                for key in ("full_s", "probes", "peak_rss_mb", "stages_s"):
                    measured.setdefault(key, timed.get(key))
                results.append(measured)
                print(row(measured), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
