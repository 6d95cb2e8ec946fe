"""`culture-probe curate BENCHMARK ...`: the command-line face of the curation framework (each
benchmark with a curation part gives its own `curate_command`).

culture-probe curate dlama --region arab --contrast west --languages ar,en --endpoint wikidata --out
my_dlama culture-probe curate dlama --region east_africa=Q114,Q1037 --languages sw,en --endpoint
dump.ttl --out x culture-probe run dlama_arab_west --data-dir my_dlama --model ...
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass

from culture_probe.benchmarks import declaration
from culture_probe.curation.endpoints import WIKIDATA_URL, HttpPolicy, SparqlEndpoint, open_endpoint
from culture_probe.curation.regions import Region, resolve_region
from culture_probe.curation.sizes import MediaWikiSizes, SizeProvider, StoreSizes
from culture_probe.errors import CultureProbeError, InvalidValueError


def split_list(text: str | None) -> tuple[str, ...]:
    """`'ar, en'` -> `('ar', 'en')`."""
    return tuple(part.strip() for part in (text or "").split(",") if part.strip())


def check_sites(text: str | None, *regions: str | None) -> tuple[str, ...]:
    """`--sites`, checked before any query: Wikipedia language codes (`en`, `ar`, `zh-yue`), for a
    region defined as NAME=QID,... (the built-in regions use the paper's sites, Table F8). Default:
    en.
    """
    sites = split_list(text)
    if not sites:
        return ("en",)
    bad = [site for site in sites if not re.fullmatch(r"[a-z]{2,3}(-[a-z0-9]+)*|simple", site)]
    if bad:
        raise InvalidValueError(
            f"--sites takes Wikipedia language codes (e.g. en,ar or zh-yue), got {', '.join(map(repr, bad))}."
        )
    if not any(region and "=" in region for region in regions):
        raise InvalidValueError(
            "--sites sets the Wikipedia sites of a region defined as NAME=QID,...; the built-in regions use the "
            "paper's sites (Table F8). Drop --sites, or define the region with its countries."
        )
    return sites


def policy_from(args: argparse.Namespace) -> HttpPolicy:
    """The HTTP politeness settings given on the command line (defaults otherwise)."""
    defaults = HttpPolicy()
    return HttpPolicy(
        user_agent=getattr(args, "user_agent", None) or defaults.user_agent,
        min_interval=_or(getattr(args, "min_interval", None), defaults.min_interval),
        timeout=_or(getattr(args, "timeout", None), defaults.timeout),
        retries=_or(getattr(args, "retries", None), defaults.retries),
        max_retry_after=_or(getattr(args, "max_retry_after", None), defaults.max_retry_after),
    )


def _or(value, default):
    return default if value is None else value


def size_provider(choice: str, endpoint: SparqlEndpoint, policy: HttpPolicy) -> SizeProvider:
    """`store` reads sizes from the SPARQL store; `mediawiki` asks Wikipedia; `auto` asks Wikipedia
    only for the public Wikidata endpoint (which stores no sizes) and reads the store otherwise
    (dumps, local servers).
    """
    if choice == "auto":
        choice = "mediawiki" if getattr(endpoint, "url", None) == WIKIDATA_URL else "store"
    return StoreSizes(endpoint) if choice == "store" else MediaWikiSizes(policy)


@dataclass(frozen=True)
class Curate:
    """What every curation takes from the command line, read and checked once: the benchmark's
    curation module's `curate_command(args, curate)` adds its own flags' meaning and writes the
    folder.
    """

    region: Region
    languages: tuple[str, ...]
    sites: tuple[str, ...]
    policy: HttpPolicy
    endpoint: SparqlEndpoint
    chunk_size: int


def main(args: argparse.Namespace) -> int:
    """Run one curation from parsed `curate` arguments; prints where the output went."""
    if not args.endpoint:
        raise CultureProbeError(
            "--endpoint is required: `wikidata` (the public endpoint, online), a SPARQL URL, or a .nt/.ttl dump "
            "for the offline embedded store. Example: --endpoint tests/curation/fixtures/wikidata_mini.ttl"
        )
    module = declaration(args.framework).part("curation")
    sites = check_sites(getattr(args, "sites", None), args.region, getattr(args, "contrast", None))
    policy = policy_from(args)
    curate = Curate(
        region=resolve_region(args.region, sites=sites),
        languages=split_list(args.languages),
        sites=sites,
        policy=policy,
        endpoint=open_endpoint(args.endpoint, policy),
        # 0 is refused, never coerced
        chunk_size=50 if getattr(args, "chunk_size", None) is None else args.chunk_size,
    )
    code: int = module.curate_command(args, curate)  # type: ignore[union-attr]
    return code


def refuse_empty(args: argparse.Namespace, empty: dict[str, int], what: str) -> int:
    """A curation that found nothing for some predicate or language is an error (what was written
    stays) unless --allow-empty: an empty file usually means a wrong region, language or endpoint,
    not a fact of the world.
    """
    if empty and not getattr(args, "allow_empty", False):
        raise CultureProbeError(
            f"The curation wrote no {what} {', '.join(sorted(empty))} (files kept in {args.out}). "
            "Check the region, languages and endpoint, or pass --allow-empty if that is expected."
        )
    return 0
