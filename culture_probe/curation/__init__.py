"""Curation: the framework (SPARQL endpoints, checkpoints, regions, predicates, the shared query
steps) that builds DLAMA/FmLAMA-style fact sets from Wikidata or any SPARQL store holding
Wikidata-shaped data. Each benchmark's own curation is in its folder
(`culture_probe/benchmarks/dlama/curation.py`, `.../fmlama/curation.py`):

    from culture_probe.benchmarks.dlama.curation import DlamaCuration, curate_dlama
    from culture_probe.curation import open_endpoint, resolve_region
    config = DlamaCuration(resolve_region("arab"), resolve_region("west"), languages=("ar", "en"))
    # then load_benchmark(..., data_dir="my_dlama")
    curate_dlama(config, open_endpoint("dump.ttl"), "my_dlama")

See docs/curation.md for the queries, the five steps, checkpoints and the HTTP politeness rules.
"""

from __future__ import annotations

from culture_probe.curation.checkpoint import Checkpoints
from culture_probe.curation.endpoints import (
    WIKIDATA_URL,
    EmbeddedStore,
    HttpEndpoint,
    HttpPolicy,
    SparqlEndpoint,
    open_endpoint,
)
from culture_probe.curation.predicates import PREDICATES, Predicate, resolve_predicates
from culture_probe.curation.regions import REGIONS, Region, resolve_region
from culture_probe.curation.server import oxigraph_server
from culture_probe.curation.sizes import MediaWikiSizes, SizeProvider, StoreSizes

__all__ = [
    "PREDICATES",
    "REGIONS",
    "WIKIDATA_URL",
    "Checkpoints",
    "EmbeddedStore",
    "HttpEndpoint",
    "HttpPolicy",
    "MediaWikiSizes",
    "Predicate",
    "Region",
    "SizeProvider",
    "SparqlEndpoint",
    "StoreSizes",
    "open_endpoint",
    "oxigraph_server",
    "resolve_predicates",
    "resolve_region",
]
