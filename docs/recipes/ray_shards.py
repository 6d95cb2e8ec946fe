"""One benchmark config on one model in N shards, one Ray task each, then merged into one run
(docs/sharding.md).

    python docs/recipes/ray_shards.py fmlama_en --model bigscience/bloom-560m --shards 4 --out run
    python docs/recipes/ray_shards.py fmlama_en --model M --shards 4 --address auto  # on a cluster

Each task asks Ray for --gpus-per-shard GPUs (0 on a CPU-only machine) and runs `culture-probe run
CONFIG --shard K/N --out SHARD_DIR/K --resume`: a task that Ray retries, or the script run again,
continues its shard. Arguments the script does not know go to `culture-probe run` (e.g. --data-dir
dlama-v1/ --batch-tokens 8192). Once every shard has finished, `merge_runs` writes the run one
process would have written into --out. Without --address, a local Ray instance with --num-cpus CPUs
is started for the script and shut down after it. On a cluster, SHARD_DIR (and a local model or
--data-dir) must be on storage that every node and this machine can read.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import ray

from culture_probe.cli import build_parser, main
from culture_probe.runner.merge import merge_runs


def run_shard(config: str, model: str, shard: str, out: str, extra: list[str]) -> str:
    """`culture-probe run` of one shard (on the node and GPU Ray gave the task); its folder."""
    code = main(
        ["run", config, "--model", model, "--shard", shard, "--out", out, "--resume", *extra]
    )
    if code != 0:
        raise RuntimeError(f"shard {shard} failed (exit code {code}); see its error above")
    return out


def cli() -> None:
    """The script: its arguments, one Ray task per shard, the merge."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    add = parser.add_argument
    add("config", help="a benchmark config, e.g. fmlama_en")
    add("--model", required=True, help="a Hub id or local folder")
    add("--shards", type=int, default=4, help="N: shards, one task each (default 4)")
    add("--gpus-per-shard", type=float, default=1, help="each task's GPUs (default 1; 0: CPU only)")
    add("--cpus-per-shard", type=float, default=1, help="each task's CPUs (default 1)")
    add("--shard-dir", default="shards", help="shard K writes SHARD_DIR/K (default shards)")
    add("--out", default="run", help="the merged run's folder (default run)")
    add("--address", help="a running cluster: auto, ray://head:10001 (default: a local one)")
    add("--num-cpus", type=int, help="the local Ray instance's CPUs (default: all)")
    args, extra = parser.parse_known_args()
    # an argument `culture-probe run` does not take is refused here, before Ray starts
    build_parser().parse_args(["run", args.config, "--model", args.model, *extra])

    if args.address:
        ray.init(address=args.address)
    else:
        ray.init(address="local", num_cpus=args.num_cpus, include_dashboard=False)
    try:
        task = ray.remote(run_shard).options(
            num_gpus=args.gpus_per_shard, num_cpus=args.cpus_per_shard
        )
        n, root = args.shards, Path(args.shard_dir).resolve()  # a worker may start elsewhere
        folders = ray.get(
            [
                task.remote(args.config, args.model, f"{k}/{n}", str(root / str(k)), extra)
                for k in range(1, n + 1)
            ]
        )
    finally:
        ray.shutdown()  # a local instance ends with the script
    merged = merge_runs(folders, args.out)
    print(f"merged {n} shards into {args.out}: {len(merged.records)} items")


if __name__ == "__main__":
    cli()
