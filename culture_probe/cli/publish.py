"""`culture-probe push` and `push-metrics`: the parsers only; the publishing
(culture_probe.hub.publish, with the Hub's client and the export) loads on use.
"""

from __future__ import annotations

from culture_probe.cli.shared import Subparsers
from culture_probe.sharing import add_publication_flags

HANDLERS = {
    "push": "culture_probe.hub.publish:main",
    "push-metrics": "culture_probe.hub.publish:main",
}


def add_parsers(subparsers: Subparsers) -> None:
    """`push REPO_ID` (the benchmarks as one dataset repository) and `push-metrics OWNER` (the
    metric modules as Spaces), which share the flags of a publication: --public, --dry-run, --out.
    """
    push = subparsers.add_parser(
        "push",
        help="export and upload the benchmarks as one Hub dataset repository (private "
        "unless --public); load_dataset(REPO_ID, CONFIG) then reads each config",
    )
    push.add_argument("repo_id", metavar="REPO_ID", help="OWNER/NAME of the dataset repository")
    push.add_argument(
        "--configs",
        nargs="+",
        help="configs to push (default: every config that loads and may be redistributed)",
    )
    push.add_argument("--data-dir", help="local data per benchmark, e.g. dlama=my_pair,maps=DIR")
    push.add_argument(
        "--i-have-permission",
        action="store_true",
        help="the data released only on request (MAPS) "
        "may be published: you hold the authors' permission (needs --data-dir with your copy)",
    )
    metrics = subparsers.add_parser(
        "push-metrics",
        help="publish the metric modules as Hub Spaces OWNER/<metric>, which evaluate.load('OWNER/<metric>') reads",
    )
    metrics.add_argument("owner", metavar="OWNER", help="user or organisation on the Hub")
    metrics.add_argument("--metrics", nargs="+", help="metrics to publish (default: all)")
    for command in (push, metrics):
        add_publication_flags(command, "new repositories", "the folder")
