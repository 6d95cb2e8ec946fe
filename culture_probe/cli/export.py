"""`culture-probe export`: the parser only; the export (culture_probe.data.export, with datasets)
loads on use.
"""

from __future__ import annotations

from culture_probe.cli.shared import Subparsers

HANDLERS = {"export": "culture_probe.data.export:main"}


def add_parsers(subparsers: Subparsers) -> None:
    """`export OUT_DIR`: the configs as Parquet with a README whose `configs:` the Hub reads."""
    export = subparsers.add_parser("export", help="write Parquet + README `configs:` (Hub layout)")
    export.add_argument("out_dir")
    export.add_argument("--configs", nargs="+", help="configs to export (default: all that load)")
    export.add_argument(
        "--data-dir", help="local data per benchmark, e.g. maps=DIR,dlama=dlama-v1.tar.gz"
    )
