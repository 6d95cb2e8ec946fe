"""`culture-probe list`: the parser only; the listing itself (culture_probe.data.listing) loads on
use.
"""

from __future__ import annotations

from culture_probe.cli.shared import Subparsers

HANDLERS = {"list": "culture_probe.data.listing:main"}


def add_parsers(subparsers: Subparsers) -> None:
    """`list`, which takes no arguments."""
    subparsers.add_parser("list", help="list every benchmark config")
