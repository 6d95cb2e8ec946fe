"""DLAMA's 20 predicates: subject and object types and how a fact is tied to a region's `?country`.

Transcribed from upstream `dlama/dlama_queries.py` and `filters.py` (AMR-KELEG/DLAMA). Variables are
named by entity type, as upstream does, so the region pattern (over `?country`) reads naturally: for
P27 the object *is* the country; for P106 the person's citizenship links to it; for P19 the place of
birth lies in it.
"""

from __future__ import annotations

from dataclasses import dataclass

from culture_probe.errors import UnknownNameError

# Reusable graph patterns (upstream FILTERS_DICTIONARY entries).
CITIZEN = "?person wdt:P27 ?country ."
WORK_ORIGIN = "?piece_of_work wdt:P495 ?country ."
CITY_IN_COUNTRY = "?city (wdt:P131|wdt:P17) ?country ."
SOVEREIGN = "?country wdt:P31 wd:Q3624078 ."
SOVEREIGN1 = "?country1 wdt:P31 wd:Q3624078 ."
BIG_CITY = "?city wdt:P31 wd:Q1549591 ."
BIG_CITY1 = "?city1 wdt:P31 wd:Q1549591 ."
CITY_NOT_SOVEREIGN = "MINUS { ?city wdt:P31 wd:Q3624078 . }"
CITY_NOT_UK_COUNTRY = "MINUS { ?city wdt:P31 wd:Q3336843 . }"


@dataclass(frozen=True)
class Predicate:
    """One relation: `?subject wdt:<pid> ?object`, plus the patterns that tie it to a region (step
    1).
    """

    pid: str
    label: str
    subject: str
    object: str
    patterns: tuple[str, ...] = ()

    @property
    def country_field(self) -> str | None:
        """The side of the fact ("subject" or "object") that is the country itself, else None (the
        region's country that selected the fact). Upstream then fills a fact's `country` from it:
        its objects for P17, P27, P495, P1376; the subject for P30, P36, ...
        """
        if self.object == "country":
            return "object"
        if self.subject == "country":
            return "subject"
        return None

    @property
    def located_in_chain(self) -> bool:
        """Places of birth and death are augmented with the places that contain them (paper Appendix
        B).
        """
        return self.pid in ("P19", "P20")


PREDICATES: dict[str, Predicate] = {
    p.pid: p
    for p in (
        Predicate("P17", "country", "place", "country"),
        Predicate(
            "P19",
            "place of birth",
            "person",
            "city",
            (CITY_IN_COUNTRY, CITY_NOT_SOVEREIGN, CITY_NOT_UK_COUNTRY),
        ),
        Predicate(
            "P20",
            "place of death",
            "person",
            "city",
            (CITY_IN_COUNTRY, CITY_NOT_SOVEREIGN, CITY_NOT_UK_COUNTRY),
        ),
        Predicate("P27", "country of citizenship", "person", "country"),
        Predicate("P30", "continent", "country", "continent", (SOVEREIGN,)),
        Predicate("P36", "capital", "country", "city", (SOVEREIGN,)),
        Predicate("P37", "official language", "country", "language", (SOVEREIGN,)),
        Predicate("P47", "shares border with", "country", "country1", (SOVEREIGN, SOVEREIGN1)),
        Predicate("P103", "native language", "person", "language", (CITIZEN,)),
        Predicate("P106", "occupation", "person", "occupation", (CITIZEN,)),
        Predicate("P136", "genre", "person", "genre", (CITIZEN,)),
        Predicate(
            "P190",
            "twinned administrative body",
            "city",
            "city1",
            (CITY_IN_COUNTRY, BIG_CITY, BIG_CITY1),
        ),
        Predicate("P264", "record label", "person", "record_label", (CITIZEN,)),
        Predicate(
            "P364",
            "original language of film or TV show",
            "piece_of_work",
            "language",
            (WORK_ORIGIN,),
        ),
        Predicate(
            "P449", "original broadcaster", "piece_of_work", "original_network", (WORK_ORIGIN,)
        ),
        Predicate("P495", "country of origin", "piece_of_work", "country"),
        Predicate("P530", "diplomatic relation", "country", "country1", (SOVEREIGN, SOVEREIGN1)),
        Predicate("P1303", "instrument", "person", "instrument", (CITIZEN,)),
        Predicate("P1376", "capital of", "city", "country", (SOVEREIGN,)),
        Predicate("P1412", "languages spoken, written or signed", "person", "language", (CITIZEN,)),
    )
}


def object_type_patterns(predicate: Predicate) -> tuple[str, ...]:
    """culture_probe's optional step-3 filter on the objects of the kept subjects
    (`object_filters=True`; off by default). Upstream's released framework has no such filter: its
    step 3 asks for every object of the kept subjects, with no pattern at all
    (`dlama/generate_data_files.py` builds a fresh query and `Query.add_subjects_filter` adds only
    the `VALUES` list). An earlier upstream version of `add_subjects_filter` did filter objects,
    which is where these patterns come from; they are kept as an option for users who want cleaner
    object sets, at the cost of not reproducing the release.

    Countries must be sovereign and not historical; cities must not be lost cities, countries or UK
    nations; the instrument "voice" and sign languages are dropped.
    """
    patterns: list[str] = []
    for var in (predicate.subject, predicate.object):
        if var in ("country", "country1"):
            patterns += [
                f"?{var} wdt:P31 wd:Q3624078 .",
                f"MINUS {{ ?{var} wdt:P31 wd:Q3024240 . }}",
            ]
    if predicate.object == "city":
        patterns += [
            f"MINUS {{ ?city wdt:P31 wd:{q} . }}"
            for q in ("Q2974842", "Q3624078", "Q3024240", "Q3336843")
        ]
    if predicate.object == "instrument":
        patterns.append("FILTER(?instrument != wd:Q17172850)")
    if predicate.object == "language":
        patterns.append("MINUS { ?language wdt:P31 wd:Q34228 . }")
    return tuple(patterns)


def resolve_predicates(pids: str | tuple[str, ...] | list[str] | None) -> tuple[Predicate, ...]:
    """Predicates by id (a comma-separated string or a sequence); None means all 20, in table
    order.
    """
    if pids is None:
        return tuple(PREDICATES.values())
    if isinstance(pids, str):
        pids = [p.strip() for p in pids.split(",") if p.strip()]
    for pid in pids:
        if pid not in PREDICATES:
            raise UnknownNameError("DLAMA predicate", pid, PREDICATES)
    return tuple(PREDICATES[p] for p in pids)
