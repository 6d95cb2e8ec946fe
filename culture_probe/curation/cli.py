"""`culture-probe curate dlama|fmlama ...`: the command-line face of the curation framework.

culture-probe curate dlama --region arab --contrast west --languages ar,en --endpoint wikidata --out my_dlama
culture-probe curate dlama --region east_africa=Q114,Q1037 --languages sw,en --endpoint dump.ttl --out x
culture-probe run dlama_arab_west --data-dir my_dlama --model ...
"""

from __future__ import annotations

import argparse
import re

from culture_probe.curation.dlama import DlamaCuration, curate_dlama
from culture_probe.curation.endpoints import WIKIDATA_URL, HttpPolicy, SparqlEndpoint, open_endpoint
from culture_probe.curation.fmlama import FmlamaCuration, curate_fmlama
from culture_probe.curation.predicates import PREDICATES
from culture_probe.curation.regions import resolve_region
from culture_probe.curation.sizes import MediaWikiSizes, SizeProvider, StoreSizes
from culture_probe.errors import CultureProbeError, InvalidValueError


def split_list(text: str | None) -> tuple[str, ...]:
    """`'ar, en'` -> `('ar', 'en')`."""
    return tuple(part.strip() for part in (text or "").split(",") if part.strip())


def check_sites(text: str | None, *regions: str | None) -> tuple[str, ...]:
    """`--sites`, checked before any query: Wikipedia language codes (`en`, `ar`, `zh-yue`), for a region defined
    as NAME=QID,... (the built-in regions use the paper's sites, Table F8). Default: en.
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
    """`store` reads sizes from the SPARQL store; `mediawiki` asks Wikipedia; `auto` asks Wikipedia only for the
    public Wikidata endpoint (which stores no sizes) and reads the store otherwise (dumps, local servers).
    """
    if choice == "auto":
        choice = "mediawiki" if getattr(endpoint, "url", None) == WIKIDATA_URL else "store"
    return StoreSizes(endpoint) if choice == "store" else MediaWikiSizes(policy)


DLAMA_ONLY = ("contrast", "top", "predicates", "sizes", "object_filters")


def _refuse_dlama_only(args: argparse.Namespace) -> None:
    """FmLAMA curation has no contrast region, subject ranking or predicates: say so instead of ignoring them."""
    given = [
        f"--{name.replace('_', '-')}"
        for name in DLAMA_ONLY
        if getattr(args, name, None) not in (None, False)
    ]
    if given:
        raise CultureProbeError(
            f"`culture-probe curate fmlama` does not use {', '.join(given)}: FmLAMA collects every dish of --region "
            "with its ingredients (no contrast region, predicates, ranking or article sizes). Drop "
            f"{'it' if len(given) == 1 else 'them'}, or use `curate dlama`."
        )


def main(args: argparse.Namespace) -> int:
    """Run one curation from parsed `curate` arguments; prints where the output went."""
    if not args.endpoint:
        raise CultureProbeError(
            "--endpoint is required: `wikidata` (the public endpoint, online), a SPARQL URL, or a .nt/.ttl dump "
            "for the offline embedded store. Example: --endpoint tests/curation/fixtures/wikidata_mini.ttl"
        )
    languages = split_list(args.languages)
    sites = check_sites(getattr(args, "sites", None), args.region, getattr(args, "contrast", None))
    region = resolve_region(args.region, sites=sites)
    policy = policy_from(args)
    endpoint = open_endpoint(args.endpoint, policy)
    # 0 is refused, never coerced
    chunk = 50 if getattr(args, "chunk_size", None) is None else args.chunk_size
    if args.framework == "fmlama":
        _refuse_dlama_only(args)
        written = curate_fmlama(
            FmlamaCuration(region, languages, chunk),
            endpoint,
            args.out,
            checkpoint_dir=getattr(args, "checkpoints", None),
        )
        print(f"wrote FmLAMA-style dishes to {args.out}/data_lang: {written}")
        return refuse_empty(args, {lang: n for lang, n in written.items() if not n}, "dishes in")
    top = {"top": args.top} if getattr(args, "top", None) is not None else {}
    config = DlamaCuration(
        region,
        resolve_region(getattr(args, "contrast", None) or "west", sites=sites),
        languages,
        predicates=split_list(args.predicates) or tuple(PREDICATES),
        chunk_size=chunk,
        object_filters=bool(getattr(args, "object_filters", False)),
        **top,
    )
    result = curate_dlama(
        config,
        endpoint,
        args.out,
        sizes=size_provider(getattr(args, "sizes", "auto") or "auto", endpoint, policy),
        checkpoint_dir=getattr(args, "checkpoints", None),
    )
    facts = sum(c["facts"] for c in result.counts.values())
    print(f"wrote {facts} facts ({len(result.files)} files) to {result.pair_dir}")
    return refuse_empty(
        args, {name: 0 for name, c in result.counts.items() if not c["facts"]}, "facts for"
    )


def refuse_empty(args: argparse.Namespace, empty: dict[str, int], what: str) -> int:
    """A curation that found nothing for some predicate or language is an error (what was written stays) unless
    --allow-empty: an empty file usually means a wrong region, language or endpoint, not a fact of the world.
    """
    if empty and not getattr(args, "allow_empty", False):
        raise CultureProbeError(
            f"The curation wrote no {what} {', '.join(sorted(empty))} (files kept in {args.out}). "
            "Check the region, languages and endpoint, or pass --allow-empty if that is expected."
        )
    return 0
