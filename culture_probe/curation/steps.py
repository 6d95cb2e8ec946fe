"""DLAMA's five curation steps (paper section 4.1 and Appendix B), each chunked and checkpointed.

1. `facts`: every (subject, object, country) of a predicate for a region.
2. `rank`: subjects ranked by the byte size of their largest Wikipedia article on their countries'
   sites; subjects with no article are dropped (upstream drops size 0).
3. `objects`: all objects of each kept subject, with no region filter (a person's non-Arab
   citizenship counts).
4. `labels`: labels in every requested language; objects without one are dropped, and subjects
   without one (or left with no object) are dropped, so every language file holds the same facts.
   Steps 3-4 walk the ranking in chunks until `top` subjects survive, as upstream does.
5. `augment`: each object gains its ancestors: subclass-of (P279+) chains among the predicate's
   objects, or for places of birth and death the places containing them (P131*, below the country
   level).
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from culture_probe.curation import queries
from culture_probe.curation.checkpoint import Checkpoints, chunk_key, digest
from culture_probe.curation.endpoints import SparqlEndpoint
from culture_probe.curation.predicates import Predicate
from culture_probe.curation.regions import Region
from culture_probe.curation.sizes import SizeProvider

Labels = dict[str, dict[str, str]]  # QID -> {language: label}
T = TypeVar("T")


def qid_order(qid: str) -> tuple[int, str]:
    """Natural order of QIDs (Q4 < Q10); anything else sorts after, by text."""
    match = re.fullmatch(r"Q(\d+)", qid)
    return (int(match.group(1)), "") if match else (1 << 62, qid)


def chunks(items: Sequence[T], size: int) -> list[list[T]]:
    """`items` cut into consecutive chunks of at most `size`."""
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


@dataclass
class Context:
    """What every step needs: where to ask, where to save, and how big a VALUES list may be."""

    endpoint: SparqlEndpoint
    sizes: SizeProvider
    checkpoints: Checkpoints
    languages: tuple[str, ...]
    chunk_size: int = 50

    def select(self, key: str, index: int, query: str) -> list[dict]:
        """Rows of one query, checkpointed under `key/` by the hash of its text."""
        return self.checkpoints.cached(
            f"{key}/{chunk_key(index, query)}", lambda: self.endpoint.select(query)
        )

    def chunked_select(
        self, key: str, items: Sequence[str], build: Callable[[list[str]], str]
    ) -> list[dict]:
        """Rows of `build(chunk)` over every chunk of `items`, each query checkpointed under
        `key/`.
        """
        rows: list[dict] = []
        for index, chunk in enumerate(chunks(items, self.chunk_size)):
            rows += self.select(key, index, build(chunk))
        return rows


def step1_facts(ctx: Context, predicate: Predicate, region: Region) -> list[list[str]]:
    """Sorted unique [subject, object, country] rows; one query per listed country (or one for a
    condition).
    """
    name = f"step1_facts/{predicate.pid}_{region.token}"
    texts = [
        queries.facts_query(predicate, pattern) for _, pattern in queries.region_patterns(region)
    ]

    def compute() -> list[list[str]]:
        found = set()
        for index, query in enumerate(texts):
            rows = ctx.select(name, index, query)
            found |= {(r[predicate.subject], r[predicate.object], r["country"]) for r in rows}
        return [list(row) for row in sorted(found)]

    return ctx.checkpoints.cached(f"{name}_{digest(texts)}", compute)


def step2_rank(
    ctx: Context, predicate: Predicate, region: Region, facts: list[list[str]]
) -> list[dict[str, Any]]:
    """[{sub, size, country}] by size (largest first; ties by QID), only subjects with an
    article.
    """
    name = f"step2_rank/{predicate.pid}_{region.token}"

    def compute() -> list[dict[str, Any]]:
        countries: dict[str, set[str]] = defaultdict(set)
        for subject, _, country in facts:
            countries[subject].add(country)
        subjects = sorted(countries, key=qid_order)
        links = ctx.chunked_select(
            f"{name}/sitelinks", subjects, lambda c: queries.sitelinks_query(c, region.all_sites())
        )
        allowed = {
            s: {f"https://{code}.wikipedia.org/" for c in cs for code in region.sites_for(c)}
            for s, cs in countries.items()
        }
        articles = defaultdict(list)
        for row in links:
            if row["site"] in allowed[row["item"]]:
                articles[row["item"]].append(row["article"])
        all_articles = sorted({a for found in articles.values() for a in found})
        sizes: dict[str, int] = {}
        provider = type(ctx.sizes).__name__
        for index, chunk in enumerate(chunks(all_articles, ctx.chunk_size)):
            sizes.update(
                ctx.checkpoints.cached(
                    f"{name}/sizes/{chunk_key(index, provider, chunk)}",
                    functools.partial(ctx.sizes.sizes, chunk),
                )
            )
        ranked: list[dict[str, Any]] = [
            {
                "sub": s,
                "size": max((sizes.get(a, 0) for a in articles[s]), default=0),
                "country": sorted(countries[s]),
            }
            for s in subjects
        ]
        ranked = [r for r in ranked if r["size"] > 0]
        return sorted(ranked, key=lambda r: (-r["size"], qid_order(r["sub"])))

    inputs = digest(facts, region.sites, region.default_sites, type(ctx.sizes).__name__)
    return ctx.checkpoints.cached(f"{name}_{inputs}", compute)


def fetch_labels(ctx: Context, key: str, items: Sequence[str]) -> Labels:
    """{QID: {language: label}} for `items` (the smallest label when an entity has several in one
    language).
    """
    labels: Labels = defaultdict(dict)
    rows = ctx.chunked_select(
        key, sorted(set(items), key=qid_order), lambda c: queries.labels_query(c, ctx.languages)
    )
    for row in sorted(rows, key=lambda r: r["label"], reverse=True):
        labels[row["item"]][row["lang"]] = row["label"]
    return dict(labels)


def complete(labels: Labels, qid: str, languages: Sequence[str]) -> bool:
    """True when `qid` has a non-empty label in every language."""
    return all(labels.get(qid, {}).get(lang, "").strip() for lang in languages)


def steps34_objects_and_labels(
    ctx: Context,
    predicate: Predicate,
    region: Region,
    ranked: list[dict[str, Any]],
    top: int,
    *,
    object_filters: bool = False,
) -> dict[str, Any]:
    """The top `top` ranked subjects that keep a full set of labels: {facts, labels, n_examined}.

    A fact's `country` is filled as upstream's release does: the fact's own objects when they are
    countries (P17, P27, P495, P1376), the subject when it is one (P30, P36, ...), else the region's
    countries that selected it.
    """
    name = f"step4_facts/{predicate.pid}_{region.token}"
    inputs = digest(ranked, top, ctx.languages, ctx.chunk_size, object_filters)

    def compute() -> dict[str, Any]:
        facts: list[dict[str, Any]] = []
        labels: Labels = {}
        examined = 0
        for index, batch in enumerate(chunks(ranked, ctx.chunk_size)):
            if len(facts) >= top:
                break
            subjects = [r["sub"] for r in batch]
            key = chunk_key(index, subjects)
            rows = ctx.select(
                f"step3_objects/{predicate.pid}_{region.token}",
                index,
                queries.objects_query(predicate, subjects, object_filters=object_filters),
            )
            objects = defaultdict(set)
            for row in rows:
                objects[row[predicate.subject]].add(row[predicate.object])
            wanted = subjects + sorted({o for found in objects.values() for o in found})
            batch_labels = fetch_labels(
                ctx, f"step4_labels/{predicate.pid}_{region.token}/{key}", wanted
            )
            for ranked_subject in batch:
                if len(facts) >= top:
                    break
                examined += 1
                subject = ranked_subject["sub"]
                kept = sorted(
                    o for o in objects[subject] if complete(batch_labels, o, ctx.languages)
                )
                if kept and complete(batch_labels, subject, ctx.languages):
                    facts.append(
                        {
                            **ranked_subject,
                            "obj": kept,
                            "country": fact_country(predicate, ranked_subject, kept),
                        }
                    )
                    labels.update({q: batch_labels[q] for q in [subject, *kept]})
        return {"facts": facts, "labels": labels, "n_examined": examined}

    return ctx.checkpoints.cached(f"{name}_{inputs}", compute)


def fact_country(predicate: Predicate, ranked: dict[str, Any], objects: list[str]) -> list[str]:
    """The `country` of a fact (sorted as text, as upstream's `sorted(set(...))`)."""
    if predicate.country_field == "object":
        return sorted(set(objects))
    if predicate.country_field == "subject":
        return [ranked["sub"]]
    return sorted(ranked["country"])


def ancestors_within(objects: Sequence[str], edges: list[tuple[str, str]]) -> dict[str, list[str]]:
    """For each object, itself and every object reachable along sub -> super edges
    (breadth-first).
    """
    graph: dict[str, list[str]] = defaultdict(list)
    for sub, sup in edges:
        graph[sub].append(sup)
    result = {}
    for start in objects:
        seen, queue = {start}, deque([start])
        while queue:
            for nxt in graph[queue.popleft()]:
                if nxt not in seen:
                    seen.add(nxt)
                    queue.append(nxt)
        result[start] = sorted(seen)
    return result


def step5_hierarchy(ctx: Context, predicate: Predicate, objects: Sequence[str]) -> dict[str, Any]:
    """{ancestors: {object: [object and its ancestors]}, labels: labels of new ancestors} for one
    predicate.
    """
    objects = sorted(set(objects), key=qid_order)
    name = f"step5_hierarchy/{predicate.pid}"
    grow = located_in_ancestors if predicate.located_in_chain else subclass_ancestors
    return ctx.checkpoints.cached(
        f"{name}_{digest(objects, ctx.languages, ctx.chunk_size)}", lambda: grow(ctx, name, objects)
    )


def subclass_ancestors(ctx: Context, name: str, objects: list[str]) -> dict[str, Any]:
    """Subclass-of ancestors among the predicate's own objects (every pair of chunks is asked, as
    upstream does).
    """
    edges = []
    parts = chunks(objects, ctx.chunk_size)
    for i, subs in enumerate(parts):
        for j, sups in enumerate(parts):
            rows = ctx.select(
                f"{name}/subclass", i * len(parts) + j, queries.subclass_query(subs, sups)
            )
            edges += [(r["sub"], r["super"]) for r in rows if r["sub"] != r["super"]]
    return {"ancestors": ancestors_within(objects, edges), "labels": {}}


def located_in_ancestors(ctx: Context, name: str, objects: list[str]) -> dict[str, Any]:
    """Places containing each place (below the country level); new places need a label in every
    language.
    """
    rows = ctx.chunked_select(f"{name}/located_in", objects, queries.located_in_query)
    edges = [(r["place"], r["macro"]) for r in rows if r["place"] != r["macro"]]
    new = sorted({m for _, m in edges} - set(objects), key=qid_order)
    labels = fetch_labels(ctx, f"{name}/labels", new) if new else {}
    known = set(objects) | {q for q in new if complete(labels, q, ctx.languages)}
    ancestors = {o: {o} for o in objects}
    for place, macro in edges:
        if macro in known:
            ancestors[place].add(macro)
    return {
        "ancestors": {o: sorted(a) for o, a in ancestors.items()},
        "labels": {q: labels[q] for q in sorted(known - set(objects))},
    }
