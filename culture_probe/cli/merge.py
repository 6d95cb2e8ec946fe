"""`culture-probe merge`: the parser only; the merge (culture_probe.runner.merge) loads on use."""

from __future__ import annotations

from culture_probe.cli.shared import Subparsers

HANDLERS = {"merge": "culture_probe.runner.merge:main"}


def add_parsers(subparsers: Subparsers) -> None:
    """`merge`: the N shards of a run or suite (`run ... --shard K/N`) joined into the one-process
    run.
    """
    merge = subparsers.add_parser(
        "merge",
        help="join the folders of a run's (or suite's) N shards, made with run --shard K/N, into one run (or suite) "
        "equal to the one-process run",
    )
    merge.add_argument(
        "shards", nargs="+", metavar="SHARD_DIR", help="the N shard folders, each once"
    )
    merge.add_argument(
        "--out",
        required=True,
        help="the merged run's (or suite's) folder: new or empty, outside the shards; built beside it and "
        "renamed into place when whole, so a failed merge leaves it as it was",
    )
