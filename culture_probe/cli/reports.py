"""`culture-probe report`, `consistency` and `compare`: the parsers only; the reports
(culture_probe.report, with numpy and the plots) load on use.
"""

from __future__ import annotations

from culture_probe.cli.shared import Subparsers

HANDLERS = {
    "report": "culture_probe.report:main",
    "consistency": "culture_probe.report:consistency_main",
    "compare": "culture_probe.report:compare_main",
}


def add_parsers(subparsers: Subparsers) -> None:
    """`report RUN_DIR`, `consistency RUN_DIR RUN_DIR` and `compare RUN_DIR...` (or `compare
    SUITE_DIR...`), read from run directories alone.
    """
    report = subparsers.add_parser(
        "report", help="(re)write report.md and plots of a run directory"
    )
    report.add_argument("run_dir")

    consistency = subparsers.add_parser(
        "consistency",
        help="two runs of one model in two languages, paired fact by fact: agreement and RankC (docs/consistency.md)",
    )
    consistency.add_argument("run_dirs", nargs=2, metavar="RUN_DIR")
    consistency.add_argument(
        "--out", help="folder for consistency.md (with its heatmap) and consistency.json"
    )
    compare = subparsers.add_parser(
        "compare",
        help="several runs side by side; runs of one config on the same items "
        "are paired with the first (an interval and a p-value from one test); suite folders are paired config by "
        "config, in one report with one Holm family (configs only one suite holds are named as left out)",
    )
    compare.add_argument("run_dirs", nargs="+", metavar="RUN_DIR|SUITE_DIR")
    compare.add_argument(
        "--out", help="folder for compare.md, compare.json and the plot (PNG and PDF)"
    )
    compare.add_argument(
        "--unpaired",
        action="store_true",
        help="line the runs up without pairing (e.g. runs of one config on different items)",
    )
