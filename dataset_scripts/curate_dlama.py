r"""Rebuild a DLAMA-v1-style culture pair from the live Wikidata endpoint (network; hours for all
20 predicates).

    python dataset_scripts/curate_dlama.py --region arab --languages ar,en \
        --contact you@example.org --out rebuild
    python dataset_scripts/curate_dlama.py --region asia --languages ko,en \
        --predicates P30,P36,P37 --contact you@example.org --out small

Queries go to https://query.wikidata.org/sparql through SPARQLWrapper with a descriptive
User-Agent, one request per `--min-interval` seconds, and retries with exponential backoff on
429/5xx/timeouts (honouring Retry-After). Article sizes come from the MediaWiki API of each wiki.
Every answer is checkpointed under OUT/.checkpoints: if the run stops (rate limits, network), run
the same command again and it resumes where it stopped. Wikidata changes every day, so a rebuild
differs from the 2023 release; `curation.json` records what was run.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from culture_probe.benchmarks.dlama.curation import DlamaCuration, curate_dlama
from culture_probe.curation import (
    WIKIDATA_URL,
    HttpEndpoint,
    HttpPolicy,
    MediaWikiSizes,
    resolve_predicates,
    resolve_region,
)
from culture_probe.errors import CultureProbeError


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--region", default="arab", help="arab, asia, south_america, or NAME=QID,QID,..."
    )
    parser.add_argument("--contrast", default="west")
    parser.add_argument("--languages", required=True, help="label languages, e.g. ar,en")
    parser.add_argument("--predicates", help="comma-separated ids (default: all 20)")
    parser.add_argument(
        "--top", type=int, default=1000, help="facts kept per predicate and region (paper: 1000)"
    )
    parser.add_argument(
        "--chunk-size", type=int, default=50, help="entities per VALUES list (upstream: 50)"
    )
    parser.add_argument("--min-interval", type=float, default=1.0, help="seconds between requests")
    parser.add_argument("--timeout", type=float, default=60.0, help="WDQS stops queries after 60 s")
    parser.add_argument(
        "--contact",
        required=True,
        help="an e-mail or URL where Wikimedia operators can reach you (Wikimedia's User-Agent policy)",
    )
    parser.add_argument("--out", required=True)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # one line per finished file
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    policy = HttpPolicy(
        user_agent=f"{HttpPolicy().user_agent} contact: {args.contact}",
        min_interval=args.min_interval,
        timeout=args.timeout,
    )
    predicates = tuple(p.pid for p in resolve_predicates(args.predicates))
    config = DlamaCuration(
        resolve_region(args.region),
        resolve_region(args.contrast),
        tuple(args.languages.split(",")),
        predicates,
        top=args.top,
        chunk_size=args.chunk_size,
    )
    try:
        result = curate_dlama(
            config, HttpEndpoint(WIKIDATA_URL, policy), args.out, sizes=MediaWikiSizes(policy)
        )
    except CultureProbeError as error:
        print(f"stopped: {error}", file=sys.stderr)
        return 1
    print(json.dumps(result.counts, indent=1))
    print(f"wrote {result.pair_dir}; manifest: {Path(result.pair_dir) / 'curation.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
