"""Golden tests of the generated SPARQL text, and the errors for bad query inputs."""

from __future__ import annotations

import pytest

from culture_probe.curation import PREDICATES, Region, resolve_predicates, resolve_region
from culture_probe.curation import queries as q
from culture_probe.errors import CultureProbeError, UnknownNameError

HEAD = (
    "PREFIX wd: <http://www.wikidata.org/entity/>\n"
    "PREFIX wdt: <http://www.wikidata.org/prop/direct/>\n"
    "PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>\n"
    "PREFIX schema: <http://schema.org/>\n"
)


def test_person_predicate_filters_on_citizenship_with_the_arab_league_condition():
    ((key, pattern),) = q.region_patterns(resolve_region("arab"))
    assert key == "condition"
    assert q.facts_query(PREDICATES["P106"], pattern) == HEAD + (
        "SELECT DISTINCT ?person ?occupation ?country\n"
        "WHERE {\n"
        "  ?country wdt:P463 wd:Q7172 .\n"
        "  ?person wdt:P106 ?occupation .\n"
        "  ?person wdt:P27 ?country .\n"
        "}\n"
    )


def test_place_of_birth_lies_in_a_listed_country_one_query_per_country():
    patterns = q.region_patterns(resolve_region("west"))
    assert [k for k, _ in patterns][:3] == ["Q408", "Q16", "Q664"]
    assert len(patterns) == 20
    assert q.facts_query(PREDICATES["P19"], patterns[1][1]) == HEAD + (
        "SELECT DISTINCT ?person ?city ?country\n"
        "WHERE {\n"
        "  VALUES ?country { wd:Q16 }\n"
        "  ?person wdt:P19 ?city .\n"
        "  ?city (wdt:P131|wdt:P17) ?country .\n"
        "  MINUS { ?city wdt:P31 wd:Q3624078 . }\n"
        "  MINUS { ?city wdt:P31 wd:Q3336843 . }\n"
        "}\n"
    )


def test_country_subject_is_the_region_variable_and_must_be_sovereign():
    assert q.facts_query(PREDICATES["P47"], "VALUES ?country { wd:Q79 }") == HEAD + (
        "SELECT DISTINCT ?country ?country1\n"
        "WHERE {\n"
        "  VALUES ?country { wd:Q79 }\n"
        "  ?country wdt:P47 ?country1 .\n"
        "  ?country wdt:P31 wd:Q3624078 .\n"
        "  ?country1 wdt:P31 wd:Q3624078 .\n"
        "}\n"
    )


def test_step3_objects_query_is_upstreams_values_list_and_nothing_else():
    # upstream dlama/generate_data_files.py: a fresh query with no filter, and add_subjects_filter's
    # VALUES list
    assert q.objects_query(PREDICATES["P27"], ["Q5673", "Q937"]) == HEAD + (
        "SELECT DISTINCT ?person ?country\n"
        "WHERE {\n"
        "  VALUES ?person { wd:Q5673 wd:Q937 }\n"
        "  ?person wdt:P27 ?country .\n"
        "}\n"
    )


def test_optional_object_filters_for_countries_cities_instruments_and_languages():
    assert q.objects_query(PREDICATES["P27"], ["Q5673"], object_filters=True).endswith(
        "  ?country wdt:P31 wd:Q3624078 .\n  MINUS { ?country wdt:P31 wd:Q3024240 . }\n}\n"
    )
    city = q.objects_query(PREDICATES["P36"], ["Q79"], object_filters=True)
    for cls in ("Q2974842", "Q3624078", "Q3024240", "Q3336843"):
        assert f"  MINUS {{ ?city wdt:P31 wd:{cls} . }}\n" in city
    instrument = q.objects_query(PREDICATES["P1303"], ["Q1"], object_filters=True)
    assert "  FILTER(?instrument != wd:Q17172850)\n" in instrument
    language = q.objects_query(PREDICATES["P1412"], ["Q1"], object_filters=True)
    assert "  MINUS { ?language wdt:P31 wd:Q34228 . }\n" in language
    assert all(
        "MINUS" not in q.objects_query(p, ["Q1"]) and "FILTER" not in q.objects_query(p, ["Q1"])
        for p in PREDICATES.values()
    )


def test_labels_sitelinks_sizes_and_hierarchy_queries():
    assert q.labels_query(["Q79", "Q85"], ["ar", "en"]) == HEAD + (
        "SELECT DISTINCT ?item ?lang ?label\n"
        "WHERE {\n"
        "  VALUES ?item { wd:Q79 wd:Q85 }\n"
        "  ?item rdfs:label ?label .\n"
        "  BIND(LANG(?label) AS ?lang)\n"
        '  FILTER(?lang IN ("ar", "en"))\n'
        "}\n"
    )
    assert q.sitelinks_query(["Q79"], ["ar", "en"]) == HEAD + (
        "SELECT DISTINCT ?item ?site ?article\n"
        "WHERE {\n"
        "  VALUES ?item { wd:Q79 }\n"
        "  VALUES ?site { <https://ar.wikipedia.org/> <https://en.wikipedia.org/> }\n"
        "  ?article schema:about ?item ;\n"
        "           schema:isPartOf ?site .\n"
        "}\n"
    )
    assert q.article_sizes_query(["https://en.wikipedia.org/wiki/Egypt"]) == HEAD + (
        "SELECT DISTINCT ?article ?size\n"
        "WHERE {\n"
        "  VALUES ?article { <https://en.wikipedia.org/wiki/Egypt> }\n"
        "  ?article schema:contentSize ?size .\n"
        "}\n"
    )
    assert q.subclass_query(["Q7976"], ["Q1860", "Q7976"]) == HEAD + (
        "SELECT DISTINCT ?sub ?super\n"
        "WHERE {\n"
        "  VALUES ?sub { wd:Q7976 }\n"
        "  VALUES ?super { wd:Q1860 wd:Q7976 }\n"
        "  ?sub wdt:P279+ ?super .\n"
        "}\n"
    )
    assert q.located_in_query(["Q18424"]) == HEAD + (
        "SELECT DISTINCT ?place ?macro\n"
        "WHERE {\n"
        "  VALUES ?place { wd:Q18424 }\n"
        "  ?place wdt:P131* ?macro .\n"
        "  MINUS { ?macro wdt:P31 wd:Q3624078 . }\n"
        "  MINUS { ?macro wdt:P31 wd:Q3024240 . }\n"
        "  MINUS { ?macro wdt:P31 wd:Q3336843 . }\n"
        "}\n"
    )


def test_fmlama_dish_query():
    assert q.dishes_query("Q148") == HEAD + (
        "SELECT DISTINCT ?dish ?ingredient\n"
        "WHERE {\n"
        "  ?dish (wdt:P31|wdt:P279)+ wd:Q746549 .\n"
        "  { ?dish wdt:P495 wd:Q148 . }\n"
        "  UNION { ?dish (wdt:P2012|wdt:P361) ?cuisine . ?cuisine (wdt:P17|wdt:P495) wd:Q148 . }\n"
        "  FILTER NOT EXISTS { ?dish wdt:P495 ?other . FILTER(?other != wd:Q148) }\n"
        "  ?dish wdt:P527 ?ingredient .\n"
        "}\n"
    )


def test_every_predicate_query_parses_and_projects_its_columns(store):
    from rdflib.plugins.sparql import prepareQuery

    for predicate in PREDICATES.values():
        facts = q.facts_query(predicate, "VALUES ?country { wd:Q79 }")
        objects = q.objects_query(predicate, ["Q79"])
        columns = list(dict.fromkeys([predicate.subject, predicate.object, "country"]))
        # a second SPARQL parser agrees on what each query selects, and Oxigraph runs it
        assert [str(v) for v in prepareQuery(facts).algebra["PV"]] == columns
        assert [str(v) for v in prepareQuery(objects).algebra["PV"]] == [
            predicate.subject,
            predicate.object,
        ]
        assert f"?{predicate.subject} wdt:{predicate.pid} ?{predicate.object} ." in facts
        for query, names in ((facts, columns), (objects, [predicate.subject, predicate.object])):
            assert all(set(row) <= set(names) for row in store.select(query))


def test_the_paper_regions():
    assert len(resolve_region("arab").countries) == 22
    assert len(resolve_region("west").countries) == 20  # the paper says 21 but lists 20 (spec 7)
    assert len(resolve_region("asia").countries) == 13
    assert len(resolve_region("south_america").countries) == 12
    assert resolve_region("west").sites_for("Q39") == ("de", "fr", "it", "rm", "en")
    assert resolve_region("arab").sites_for("Q79") == ("ar", "en", "fr")
    assert len(PREDICATES) == 20


def test_bad_inputs_get_clear_errors():
    with pytest.raises(UnknownNameError, match=r"Unknown region 'arabic'.*Did you mean 'arab'"):
        resolve_region("arabic")
    with pytest.raises(UnknownNameError, match=r"Unknown DLAMA predicate 'P999'"):
        resolve_predicates("P17,P999")
    with pytest.raises(CultureProbeError, match=r"not Wikidata QIDs: \['Egypt'\]"):
        resolve_region("maghreb=Egypt")
    with pytest.raises(CultureProbeError, match=r"must constrain \?country"):
        Region("x", "X", condition="?c wdt:P463 wd:Q7172 .")
    with pytest.raises(CultureProbeError, match=r"Wikimedia language codes.*\['en\"'\]"):
        q.labels_query(["Q1"], ['en"'])
    with pytest.raises(CultureProbeError, match="empty VALUES"):
        q.values("item", [])
    with pytest.raises(CultureProbeError, match=r"neither a Wikidata QID"):
        q.values("item", ["wd:Q1 } ?x ?y ?z {"])


def test_new_region_from_qids():
    region = resolve_region("maghreb=Q1028, Q262,Q948", sites=("ar", "fr", "en"))
    assert (region.name, region.token, region.countries) == (
        "maghreb",
        "MAGHREB",
        ("Q1028", "Q262", "Q948"),
    )
    assert region.sites_for("Q262") == ("ar", "fr", "en")
