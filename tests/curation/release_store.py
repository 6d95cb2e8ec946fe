"""Wikidata-shaped stores built from the DLAMA-v1 release's own files, so curation can be checked
against the release.

One store per (predicate, region) file: upstream crawled each predicate separately (the same article
measured for two predicates can differ by a few bytes), so each file is its own snapshot. For every
released fact the store holds what upstream's queries read: the subject-object triples, the labels
of both languages, one article per subject on an allowed site with the released size, and the
pattern that ties the fact to its region's country (the object or subject itself when it is a
country; citizenship P27, origin P495, or a place's P17 otherwise). The region's membership (the
Arab League, P463 Q7172) and sovereignty of its countries are stated as Wikidata does.

Distractors that a real Wikidata has, none of which may reach the output: subjects of another
region, subjects with no label in one language, a historical (non-sovereign) country in the Arab
League, and a subject ranked just below the released top 1,000 (`top`).

Ties: `add_tie` adds a subject of the region with the same article size, objects and countries as a
released fact, under a QID from `tie_qids` (numerically below or above the released subject's, and
in the other order as text), so that the tie rule (equal sizes ranked by QID in numeric order)
decides where it lands.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

from culture_probe.curation import PREDICATES, resolve_region

WD, WDT = "http://www.wikidata.org/entity/", "http://www.wikidata.org/prop/direct/"
LABEL, SCHEMA = "http://www.w3.org/2000/01/rdf-schema#label", "http://schema.org/"
SOVEREIGN, HISTORICAL, BIG_CITY = "Q3624078", "Q3024240", "Q1549591"
ARAB_LEAGUE = "Q7172"
ELSEWHERE = "Q17"  # Japan: in neither region of arab-west
TOP = 1000
SOVEREIGN_STATES = frozenset(resolve_region("arab").countries + resolve_region("west").countries)


def read_release(root: Path, pair_dir: str, languages: tuple[str, ...], name: str) -> list[dict]:
    """The facts of one file, with the labels of every language: {sub, obj, country, size, uuid,
    labels}.
    """
    by_language = {
        lang: [
            json.loads(line)
            for line in (root / pair_dir / "dlama" / lang / f"{name}.jsonl")
            .read_text(encoding="utf-8")
            .splitlines()
        ]
        for lang in languages
    }
    first = by_language[languages[0]]
    facts = []
    for index, record in enumerate(first):
        labels: dict[str, dict[str, str]] = defaultdict(dict)
        for lang in languages:
            other = by_language[lang][index]
            assert other["uuid"] == record["uuid"], f"{name}: the languages' files are not aligned"
            labels[record["sub_uri"]][lang] = other["sub_label"]
            for uri, label in zip(other["obj_uri"], other["obj_label"], strict=True):
                labels[uri][lang] = label
        facts.append(
            {
                "sub": record["sub_uri"],
                "obj": record["obj_uri"],
                "country": record["country"],
                "size": record["size"],
                "uuid": record["uuid"],
                "labels": dict(labels),
            }
        )
    return facts


class Triples:
    """N-Triples text, one statement at a time."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def fact(self, subject: str, pid: str, obj: str) -> None:
        self.lines.append(f"<{WD}{subject}> <{WDT}{pid}> <{WD}{obj}> .")

    def label(self, qid: str, lang: str, text: str) -> None:
        self.lines.append(f"<{WD}{qid}> <{LABEL}> {json.dumps(text, ensure_ascii=False)}@{lang} .")

    def article(self, qid: str, size: int, site: str = "en") -> None:
        iri = f"<https://{site}.wikipedia.org/wiki/{qid}>"
        self.lines += [
            f"{iri} <{SCHEMA}about> <{WD}{qid}> .",
            f"{iri} <{SCHEMA}isPartOf> <https://{site}.wikipedia.org/> .",
            f'{iri} <{SCHEMA}contentSize> "{size}"^^<http://www.w3.org/2001/XMLSchema#integer> .',
        ]

    def write(self, path: Path) -> Path:
        path.write_text("\n".join(dict.fromkeys(self.lines)) + "\n", encoding="utf-8")
        return path


def region_countries(token: str) -> list[str]:
    """The countries a region selects: the Arab League's members, or the West's list."""
    return list(resolve_region("arab" if token == "ARAB_REGION" else "west").countries)


def tie_to_country(triples: Triples, pid: str, fact: dict, places: dict[str, list[str]]) -> None:
    """The pattern of step 1 that ties a released fact to its region's country (see
    `PREDICATES`).
    """
    predicate = PREDICATES[pid]
    # the object or subject is the country: its own membership decides
    if predicate.country_field is not None:
        return
    for country in fact["country"]:
        if predicate.subject == "person":
            triples.fact(fact["sub"], "P27", country)
        elif predicate.subject == "piece_of_work":
            triples.fact(fact["sub"], "P495", country)
        # P190: the subject city lies in the country; both cities are big
        elif predicate.subject == "city":
            triples.fact(fact["sub"], "P17", country)
            triples.fact(fact["sub"], "P31", BIG_CITY)
    if predicate.object == "city":  # P19, P20: the place lies in the country
        for place in fact["obj"]:
            for country in places[place]:
                triples.fact(place, "P17", country)
        if set(fact["obj"]) <= SOVEREIGN_STATES:
            # Only the country survived upstream's augmentation, so the place step 1 found (not a
            # sovereign state: step 1 leaves those out) lost its label later; stand in for it with a
            # place labelled in one language.
            place = f"Q96{fact['sub'][1:]}"
            triples.fact(fact["sub"], pid, place)
            triples.label(
                place, "en", f"a place in {fact['country'][0]} without a label in every language"
            )
            for country in fact["country"]:
                triples.fact(place, "P17", country)
    if predicate.object == "city1":
        for city in fact["obj"]:
            triples.fact(city, "P31", BIG_CITY)


def place_countries(facts: list[dict]) -> dict[str, list[str]]:
    """For places of birth and death, the countries each place lies in: those every fact naming it
    agrees on, so that no fact gains a country it does not have in the release.
    """
    found: dict[str, set[str]] = {}
    for fact in facts:
        for place in fact["obj"]:
            found[place] = (
                found[place] & set(fact["country"]) if place in found else set(fact["country"])
            )
    return {place: sorted(countries) for place, countries in found.items()}


def distractors(
    triples: Triples, pid: str, token: str, facts: list[dict], languages: tuple[str, ...], top: int
) -> None:
    """Entities a real Wikidata has that the curation must leave out: a subject of another region
    and one without a label in the first language (both larger than every released subject), a
    historical state of the Arab League (for the predicates whose subject is a country), and a
    subject just below the released top 1,000 (`top`).
    """
    predicate = PREDICATES[pid]
    home = next(c for f in facts for c in f["country"] if c in region_countries(token))
    top_size = max(f["size"] for f in facts) + 1000
    cases = [
        (f"Q980{pid[1:]}", ELSEWHERE, languages, top_size),
        (f"Q981{pid[1:]}", home, languages[1:], top_size),
    ]
    if len(facts) == top:
        cases.append((f"Q982{pid[1:]}", home, languages, min(f["size"] for f in facts) - 1))
    # the subject is the country: another region's, or a historical one
    if predicate.country_field == "subject":
        # a sovereign state of neither region
        cases = [("Q9800000", "Q9800000", languages, top_size)]
        triples.fact("Q9800000", "P31", SOVEREIGN)
        if token == "ARAB_REGION":
            triples.fact("Q9900000", "P463", ARAB_LEAGUE)
            triples.fact("Q9900000", "P31", HISTORICAL)
            cases.append(("Q9900000", "Q9900000", languages, top_size))
    for n, (subject, country, labelled, size) in enumerate(cases):
        obj = country if predicate.country_field == "object" else f"Q983{n}{pid[1:]}"
        triples.fact(subject, pid, obj)
        triples.article(subject, size)
        for lang in labelled:
            triples.label(subject, lang, f"distractor {subject}")
        if obj != country:  # a made-up object needs labels; a real country has the release's
            for lang in languages:
                triples.label(obj, lang, f"distractor {obj}")
        tie_to_country(
            triples, pid, {"sub": subject, "obj": [obj], "country": [country]}, {obj: [country]}
        )


def build_store(
    facts: list[dict], pid: str, token: str, languages: tuple[str, ...], path: Path, top: int = TOP
) -> Path:
    """The N-Triples file of one (predicate, region) store."""
    return store_triples(facts, pid, token, languages, top).write(path)


def store_triples(
    facts: list[dict], pid: str, token: str, languages: tuple[str, ...], top: int = TOP
) -> Triples:
    """The statements of one (predicate, region) store: the released facts and the distractors."""
    triples = Triples()
    for country in SOVEREIGN_STATES:
        triples.fact(country, "P31", SOVEREIGN)
    members = set(region_countries("ARAB_REGION"))
    # the League's members then, e.g.
    if token == "ARAB_REGION" and PREDICATES[pid].country_field != "object":
        # the Emirate of Transjordan (Q1121819)
        members |= {c for fact in facts for c in fact["country"]}
    for country in members:
        triples.fact(country, "P463", ARAB_LEAGUE)
    places = place_countries(facts)
    for fact in facts:
        for obj in fact["obj"]:
            triples.fact(fact["sub"], pid, obj)
            if PREDICATES[pid].object == "country1":  # P47, P530: both sides sovereign
                triples.fact(obj, "P31", SOVEREIGN)
        for qid, by_language in fact["labels"].items():
            for lang, text in by_language.items():
                triples.label(qid, lang, text)
        triples.article(fact["sub"], fact["size"])
        tie_to_country(triples, pid, fact, places)
    distractors(triples, pid, token, facts, languages, top)
    return triples


def tie_qids(triples: Triples, subject: str) -> tuple[str, str]:
    """Two QIDs the store does not mention, one numerically below `subject` and one above it, each
    on the other side of it in text order (Q999 < Q1028 < Q10000 as numbers, not as text), so only
    numeric order ranks them right.
    """
    used = {int(n) for n in re.findall(rf"<{re.escape(WD)}Q(\d+)>", "\n".join(triples.lines))}
    number, digits = int(subject[1:]), len(subject) - 1  # fewer digits: below; more digits: above
    below = next(
        (k for k in range(10 ** (digits - 1) - 1, 0, -1) if k not in used and str(k) > str(number)),
        None,
    )
    above = next(
        (
            k
            for k in range(10**digits, 10 ** (digits + 1))
            if k not in used and str(k) < str(number)
        ),
        None,
    )
    assert below is not None and above is not None, (
        f"{subject}: no QIDs around it in the other text order"
    )
    return f"Q{below}", f"Q{above}"


def add_tie(
    triples: Triples, pid: str, fact: dict, subject: str, languages: tuple[str, ...]
) -> dict:
    """A subject `subject` of the same region as the released `fact`, with its size, objects and
    countries and a label in every language; returns its fact (`uuid` left to the caller: it is
    rank-numbered). Not for predicates whose subject is the country, or whose objects are places
    (P19, P20: the place decides the region).
    """
    predicate = PREDICATES[pid]
    assert predicate.country_field != "subject" and predicate.object != "city", (
        f"{pid}: no tie subject"
    )
    labels = {obj: fact["labels"][obj] for obj in fact["obj"]}
    labels[subject] = {lang: f"tie {subject} ({lang})" for lang in languages}
    tie = {**fact, "sub": subject, "labels": labels}
    for obj in fact["obj"]:
        triples.fact(subject, pid, obj)
    for lang, text in labels[subject].items():
        triples.label(subject, lang, text)
    triples.article(subject, fact["size"])
    tie_to_country(triples, pid, tie, {})
    return tie
