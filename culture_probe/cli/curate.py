"""`culture-probe curate`: the parser only; the curation (culture_probe.curation.cli, with its
SPARQL clients) loads on use.
"""

from __future__ import annotations

import argparse

from culture_probe.benchmarks import with_part
from culture_probe.cli.shared import Subparsers
from culture_probe.util.arguments import decimal, whole_number

HANDLERS = {"curate": "culture_probe.curation.cli:main"}


def add_parsers(subparsers: Subparsers) -> None:
    """`curate BENCHMARK --region R --languages L --out DIR`, for each benchmark with a curation
    part.
    """
    curate = subparsers.add_parser(
        "curate", help="build a DLAMA/FmLAMA-style fact set from a SPARQL endpoint"
    )
    _add_what_to_collect(curate)
    _add_how_to_fetch(curate)


def _add_what_to_collect(curate: argparse.ArgumentParser) -> None:
    """The framework, its regions, languages and predicates, where the facts come from and go."""
    curate.add_argument("framework", choices=sorted(with_part("curation")))
    curate.add_argument(
        "--region", required=True, help="region name or comma-separated country QIDs"
    )
    curate.add_argument("--contrast", help="dlama: the contrasting region (default west)")
    curate.add_argument("--languages", required=True, help="label languages, e.g. ar,en")
    curate.add_argument(
        "--predicates", help="dlama: comma-separated predicate ids (default: all 20)"
    )
    curate.add_argument("--endpoint", help="SPARQL URL, or a .nt/.ttl dump for the embedded store")
    curate.add_argument(
        "--top",
        type=whole_number,
        help="dlama: subjects kept per predicate and region (default 1000)",
    )
    curate.add_argument("--out", required=True)
    curate.add_argument(
        "--sites", help="Wikipedia sites of a NAME=QID,... region's countries (default en)"
    )
    curate.add_argument(
        "--sizes",
        choices=["auto", "store", "mediawiki"],
        help="dlama: article sizes from the SPARQL store (offline) or the MediaWiki API (default auto)",
    )
    curate.add_argument(
        "--chunk-size", type=whole_number, default=50, help="entities per VALUES list"
    )
    curate.add_argument(
        "--object-filters",
        action="store_true",
        help="dlama: drop non-sovereign/historical countries, lost cities, 'voice' and sign languages "
        "from the objects (culture_probe's option; upstream and the release have no such filter)",
    )


def _add_how_to_fetch(curate: argparse.ArgumentParser) -> None:
    """Resuming, and the politeness of its HTTP requests: pace, timeouts, retries, the
    User-Agent.
    """
    curate.add_argument(
        "--checkpoints", help="checkpoint folder (default OUT/.checkpoints); rerun to resume"
    )
    curate.add_argument(
        "--min-interval", type=decimal, help="seconds between HTTP requests (default 1)"
    )
    curate.add_argument(
        "--timeout", type=decimal, help="seconds before an HTTP request times out (default 60)"
    )
    curate.add_argument(
        "--retries", type=whole_number, help="retries on 429/5xx/timeouts (default 5)"
    )
    curate.add_argument(
        "--max-retry-after",
        type=decimal,
        help="longest Retry-After to wait, in seconds (default 120): "
        "a server asking for longer ends the step with an error; rerun later to resume",
    )
    curate.add_argument(
        "--allow-empty",
        action="store_true",
        help="accept a predicate (dlama) or language (fmlama) with no facts instead of an error",
    )
    curate.add_argument(
        "--user-agent", help="HTTP User-Agent (default names culture_probe and its purpose)"
    )
