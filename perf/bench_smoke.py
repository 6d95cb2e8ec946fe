"""The five benchmarks' `--limit smoke` on a tiny model, timed, and the dry run's estimate against
the time measured (issue 36: a smoke that is a smoke, under 10 minutes on the project's 2-core
machine).

One tiny random causal model (GPT-2 shape, 2 layers, hidden 64, a BPE tokenizer trained on the
configs' own text, a chat template so that X-FaKT asks through it) is loaded once and runs
`limit="smoke"` of one config per benchmark (`--groups`: every config of the five groups), each as
`culture_probe.run` runs it, without the score cache, X-FaKT with the string judge, MAPS on the
mirror's manual data. Before each of the `--compare` configs, a warm-up run (`--limit 5` of that
config, as a user's first look would be) measures the rate of the model on that config on this
machine, and the dry run's estimate of the smoke is read at it. Prints the wall time per config and
in total (the warm-ups apart), the estimates against the times, and exits 1 when the smoke takes 10
minutes or more.

    python perf/bench_smoke.py [--groups] [--compare fmlama_en dlama_arab_west camel_co_prompts]
                                     [--threads 2] [--model DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CONFIGS = ("dlama_arab_west", "fmlama_en", "camel_co_prompts", "xfakt_factual_recall", "maps_en")
GROUPS = ("dlama", "fmlama", "camel", "xfakt", "maps")
COMPARED = ("fmlama_en", "dlama_arab_west", "camel_co_prompts")
TARGET_SECONDS = 600.0
TEXT_ROWS = 400  # rows per config whose strings train the tokenizer
WARM_UP = 5  # items of the run that measures a compared config's rate


def mirror() -> Path:
    """The data mirror (CULTURE_PROBE_MIRROR): MAPS' manual data lives in it."""
    root = os.environ.get("CULTURE_PROBE_MIRROR")
    if not root:
        sys.exit("Set CULTURE_PROBE_MIRROR to the data mirror (MAPS needs its manual/maps folder).")
    return Path(root)


def options_of(config: str) -> dict[str, Any]:
    """The run's settings and options of `config` beside `limit`: X-FaKT's string judge, MAPS' data
    folder.
    """
    if config.startswith("xfakt"):
        return {"judge": "string"}
    if config.startswith("maps"):
        return {"data_dir": str(mirror() / "manual" / "maps")}
    return {}


def strings(value: Any) -> list[str]:
    """Every string inside a row."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in strings(v)]
    return []


def tiny_model(folder: Path, configs: list[str]) -> Path:
    """A tiny random GPT-2 with a chat template and a tokenizer trained on the first rows of each
    config.
    """
    from culture_probe.data.registry import resolve
    from culture_probe.loading import load_rows
    from culture_probe.models import save_tiny, train_tokenizer
    from culture_probe.models.planted_benchmarks import CHAT_TEMPLATE

    texts = []
    for config in configs:
        data_dir = options_of(config).get("data_dir")
        texts += strings(list(load_rows(resolve(config), data_dir=data_dir))[:TEXT_ROWS])
    tokenizer = train_tokenizer(texts, "bpe", vocab_size=2000, model_kind="causal")
    tokenizer.chat_template = CHAT_TEMPLATE
    return save_tiny(folder, "gpt2", tokenizer, layers=2, hidden=64, heads=4)


def timed_run(config: str, scorer: Any, limit: int | str) -> float:
    """Seconds of `run(config, scorer, limit=limit)` without the score cache, its start line
    included.
    """
    from culture_probe import run

    began = time.monotonic()
    run(config, scorer, limit=limit, no_cache=True, progress=False, **options_of(config))
    return time.monotonic() - began


def has_data(config: str) -> bool:
    """Whether `config`'s data can be had here; a config without them is skipped, said, as a suite
    skips it.
    """
    from culture_probe.data.registry import resolve
    from culture_probe.errors import MissingDataError
    from culture_probe.loading import load_rows

    try:
        load_rows(resolve(config), data_dir=options_of(config).get("data_dir"))
    except MissingDataError as error:
        print(f"{config:28s} skipped: {error}", flush=True)
        return False
    return True


def estimate(config: str, model: Path) -> tuple[float | None, str]:
    """The dry run's estimate of `config`'s smoke (the middle of its range, in seconds) and its cost
    line.
    """
    from culture_probe.runner.dryrun import dry_run

    plan = dry_run(config, model, n=0, limit="smoke", no_cache=True, **options_of(config)).configs[
        0
    ]
    return (plan.estimate.middle if plan.estimate else None), plan.cost().strip()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--groups", action="store_true", help="every config of the five groups, not one of each"
    )
    parser.add_argument(
        "--compare", nargs="*", default=list(COMPARED), help="configs whose estimate is compared"
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--model", type=Path, help="a model folder to use instead of the tiny GPT-2"
    )
    args = parser.parse_args()

    import torch

    from culture_probe.data.registry import expand
    from culture_probe.engine import Scorer

    torch.set_num_threads(args.threads)
    configs = expand(list(GROUPS)) if args.groups else list(CONFIGS)
    with tempfile.TemporaryDirectory() as scratch:
        began = time.monotonic()
        model = (args.model or tiny_model(Path(scratch) / "tiny-gpt2", list(CONFIGS))).resolve()
        scorer = Scorer.from_pretrained(str(model))
        print(f"model {model.name}: built and loaded in {time.monotonic() - began:.1f} s")
        times: dict[str, float] = {}
        estimates: dict[str, tuple[float | None, str]] = {}
        for config in configs:
            if not has_data(config):
                continue
            if config in args.compare:
                warm = timed_run(config, scorer, WARM_UP)
                print(
                    f"  (warm-up: {config} --limit {WARM_UP}, {warm:.1f} s, measures its rate; not in the total)"
                )
                estimates[config] = estimate(config, model)
            times[config] = timed_run(config, scorer, "smoke")
            print(f"{config:28s} {times[config]:7.1f} s", flush=True)
    total = sum(times.values())
    print(
        f"{'total (' + str(len(times)) + ' configs)':28s} {total:7.1f} s  (target < {TARGET_SECONDS:.0f} s)"
    )
    print("\ndry run's estimate (first stage) against the measured wall time of the whole run:")
    for config, (seconds, line) in estimates.items():
        ratio = f"{seconds / times[config]:.2f}" if seconds else "n/a"
        shown = f"{seconds:.1f} s" if seconds else "none"
        print(
            f"  {config:26s} estimate {shown:>8s}  measured {times[config]:6.1f} s  ratio {ratio}\n    {line}"
        )
    return 0 if total < TARGET_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
