"""The SPARQL text of every query the curation runs (golden-tested; see docs/curation.md).

Every query declares its prefixes, so it runs unchanged on Wikidata's endpoint, a local Oxigraph
server and the embedded store. Entities are bound with `VALUES` blocks whose size the caller chooses
(chunking), and labels are read from `rdfs:label`, which Wikidata's RDF and our dumps share (the
`wikibase:label` service exists only on Wikidata). Article sizes offline come from
`schema:contentSize` on a sitelink (see `ARTICLE_SIZE`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from culture_probe.curation.predicates import Predicate, object_type_patterns
from culture_probe.curation.regions import QID, Region
from culture_probe.errors import CultureProbeError

WD = "http://www.wikidata.org/entity/"
PREFIXES = (
    "PREFIX wd: <http://www.wikidata.org/entity/>\n"
    "PREFIX wdt: <http://www.wikidata.org/prop/direct/>\n"
    "PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>\n"
    "PREFIX schema: <http://schema.org/>\n"
)
# The documented Wikidata-shaped property holding an article's byte size in offline stores:
#   <https://en.wikipedia.org/wiki/Cairo> schema:about wd:Q85 ;
#       schema:isPartOf <https://en.wikipedia.org/> ; schema:contentSize 152311 .
ARTICLE_SIZE = "http://schema.org/contentSize"
# Classes the located-in chain stops below (upstream find_macro_territories): sovereign states,
# historical countries and the countries of the United Kingdom.
NOT_MACRO_PLACES = ("Q3624078", "Q3024240", "Q3336843")
DISH = "Q746549"
LANGUAGE_CODE = re.compile(r"^[a-z]{2,3}(-[a-z0-9]+)*$")


def _select(variables: Iterable[str], body: Iterable[str], *, distinct: bool = True) -> str:
    head = "SELECT DISTINCT" if distinct else "SELECT"
    lines = [f"{head} {' '.join('?' + v for v in variables)}", "WHERE {"]
    lines += [f"  {line}" for line in body]
    lines.append("}")
    return PREFIXES + "\n".join(lines) + "\n"


def values(var: str, ids: Sequence[str]) -> str:
    """`VALUES ?var { wd:Q1 wd:Q2 }` for QIDs, or `<iri>` terms for IRIs."""
    if not ids:
        raise CultureProbeError(
            f"An empty VALUES list for ?{var}: nothing to query (a caller bug)."
        )
    terms = []
    for item in ids:
        if QID.match(item):
            terms.append(f"wd:{item}")
        elif item.startswith(("http://", "https://")) and not re.search(r"[\s<>\"{}|^`\\]", item):
            terms.append(f"<{item}>")
        else:
            raise CultureProbeError(
                f"{item!r} is neither a Wikidata QID (Q123) nor an absolute IRI."
            )
    return f"VALUES ?{var} {{ {' '.join(terms)} }}"


def region_patterns(region: Region) -> list[tuple[str, str]]:
    """(chunk key, pattern on ?country) pairs: the condition once, or one `VALUES` per listed
    country.
    """
    if region.condition:
        return [("condition", region.condition)]
    return [(qid, values("country", [qid])) for qid in region.countries]


def facts_query(predicate: Predicate, region_pattern: str) -> str:
    """Step 1: every (subject, object, country) of a predicate for one region pattern."""
    variables = [predicate.subject, predicate.object]
    if "country" not in variables:
        variables.append("country")
    body = [
        region_pattern,
        f"?{predicate.subject} wdt:{predicate.pid} ?{predicate.object} .",
        *predicate.patterns,
    ]
    return _select(variables, body)


def sitelinks_query(items: Sequence[str], sites: Sequence[str]) -> str:
    """Step 2: the Wikipedia articles of `items` on the given language sites."""
    body = [
        values("item", items),
        values("site", [f"https://{s}.wikipedia.org/" for s in sites]),
        "?article schema:about ?item ;",
        "         schema:isPartOf ?site .",
    ]
    return _select(["item", "site", "article"], body)


def article_sizes_query(articles: Sequence[str]) -> str:
    """Step 2 offline: byte sizes stored on article IRIs under `schema:contentSize`."""
    return _select(
        ["article", "size"], [values("article", articles), "?article schema:contentSize ?size ."]
    )


def objects_query(
    predicate: Predicate, subjects: Sequence[str], *, object_filters: bool = False
) -> str:
    """Step 3: all objects of the kept subjects, with no region filter (so non-region objects count
    too) and, as upstream, no other pattern; `object_filters` adds culture_probe's optional type
    filters.
    """
    body = [
        values(predicate.subject, subjects),
        f"?{predicate.subject} wdt:{predicate.pid} ?{predicate.object} .",
        *(object_type_patterns(predicate) if object_filters else ()),
    ]
    return _select([predicate.subject, predicate.object], body)


def labels_query(items: Sequence[str], languages: Sequence[str]) -> str:
    """Step 4: `rdfs:label` of `items` in `languages` (the language comes back as its own
    column).
    """
    bad = [lang for lang in languages if not LANGUAGE_CODE.match(lang)]
    if bad:
        raise CultureProbeError(
            f"Label languages must be Wikimedia language codes such as 'ar' or 'en', got {bad}."
        )
    wanted = ", ".join(f'"{lang}"' for lang in languages)
    body = [
        values("item", items),
        "?item rdfs:label ?label .",
        "BIND(LANG(?label) AS ?lang)",
        f"FILTER(?lang IN ({wanted}))",
    ]
    return _select(["item", "lang", "label"], body)


def subclass_query(subclasses: Sequence[str], superclasses: Sequence[str]) -> str:
    """Step 5: subclass-of (P279+) edges between two chunks of a predicate's objects."""
    body = [values("sub", subclasses), values("super", superclasses), "?sub wdt:P279+ ?super ."]
    return _select(["sub", "super"], body)


def located_in_query(places: Sequence[str]) -> str:
    """Step 5 for P19/P20: every place (P131*) containing each place, below the country level."""
    body = [values("place", places), "?place wdt:P131* ?macro ."]
    body += [f"MINUS {{ ?macro wdt:P31 wd:{q} . }}" for q in NOT_MACRO_PLACES]
    return _select(["place", "macro"], body)


def dishes_query(country: str) -> str:
    """FmLAMA: dishes (instance or subclass chain of dish, Q746549) from one origin country, with
    ingredients.

    The origin is the dish's country of origin (P495) or that of its cuisine or parent (P2012/P361);
    dishes with another P495 country are excluded, as in upstream `template_klg.get_dish`.
    """
    body = [
        f"?dish (wdt:P31|wdt:P279)+ wd:{DISH} .",
        f"{{ ?dish wdt:P495 wd:{country} . }}",
        f"UNION {{ ?dish (wdt:P2012|wdt:P361) ?cuisine . ?cuisine (wdt:P17|wdt:P495) wd:{country} . }}",
        f"FILTER NOT EXISTS {{ ?dish wdt:P495 ?other . FILTER(?other != wd:{country}) }}",
        "?dish wdt:P527 ?ingredient .",
    ]
    return _select(["dish", "ingredient"], body)
