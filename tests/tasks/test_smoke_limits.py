"""Smoke runs that mean something: each benchmark's smoke limit is the smallest `--limit` whose
subset gives every headline number (one item fewer lacks one), `limit="smoke"` picks it, and a
smaller limit says what it will lack before any model loads. Chance levels: a random model's score
is read against the expectation on its own items.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from culture_probe.engine.types import CandidateScores
from culture_probe.errors import InvalidValueError
from culture_probe.runner import SmallLimitWarning, run

MAPS_DATA = "manual/maps"
MODEL = "planted:camel_co_prompts"  # a name whose kind is known without loading (or training) it


class RandomScorer:
    """A causal model that scores every candidate at random (seeded, in the order asked) and always
    says `reply`.
    """

    kind, identity = "causal", {"name_or_path": "random"}

    def __init__(self, reply: str = "no idea"):
        self.reply, self.rng = reply, np.random.default_rng(0)

    def score(self, requests, options=None):
        return [
            CandidateScores(
                r.candidates, self.rng.normal(size=len(r.candidates)), np.ones(len(r.candidates))
            )
            for r in requests
        ]

    def generate(self, prompts, options):
        return [self.reply] * len(prompts)


def smoke_run(config, limit, **keywords):
    """A run of `config` on the random model at `limit`, and the SmallLimitWarnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run(config, RandomScorer(), limit=limit, progress=False, **keywords)
    return result, [str(w.message) for w in caught if issubclass(w.category, SmallLimitWarning)]


def at_smoke_and_one_below(config, expected_smoke, **keywords):
    """(the run at `limit="smoke"`, the run at one item fewer, that run's warnings), checking the
    smoke number.
    """
    smoke, said = smoke_run(config, "smoke", **keywords)
    assert (
        smoke.config.subset["limit"] == "smoke"
        and smoke.config.subset["smoke_limit"] == expected_smoke
    )
    assert smoke.config.run.limit == smoke.config.subset["sampled"] == expected_smoke and not said
    below, warned = smoke_run(config, expected_smoke - 1, **keywords)
    assert below.config.subset == {
        **smoke.config.subset,
        "limit": expected_smoke - 1,
        "sampled": expected_smoke - 1,
    }
    assert len(warned) == 1 and f"below the smoke limit of {config} ({expected_smoke} " in warned[0]
    return smoke.metrics, below.metrics, warned[0]


def with_interval(estimates: dict) -> set[str]:
    """Labels whose estimate has an interval."""
    return {label for label, e in estimates.items() if e["ci_low"] is not None}


def predicate_cells(metrics: dict, language: str) -> set[tuple[str, str]]:
    """(predicate, culture) cells of DLAMA's P@1 table in `language`."""
    return {(p, c) for p, cultures in metrics[language]["predicates"].items() for c in cultures}


def test_dlama_needs_a_fact_in_every_language_culture_predicate_cell(mirror):
    smoke, below, said = at_smoke_and_one_below("dlama_arab_west", 40, language="en")
    # the table loses one
    assert len(predicate_cells(smoke, "en")) == 40 and len(predicate_cells(below, "en")) == 39
    assert (
        "numbers per predicate and culture" in said
        and "1 of its 40 language x culture x predicate cells" in said
    )


def test_fmlama_needs_two_dishes_of_every_group(mirror):
    smoke, below, said = at_smoke_and_one_below("fmlama_en", 30, families=("hasParts",))
    groups = smoke["results"]["by_group"]
    assert len(groups) == 15 and all(g["map_hasParts"]["n"] == 2 for g in groups.values())
    assert len(with_interval({k: v["map_hasParts"] for k, v in groups.items()})) == 15
    short = {k: v["map_hasParts"] for k, v in below["results"]["by_group"].items()}
    assert len(with_interval(short)) == 14 and "numbers per country group" in said


def test_a_fmlama_smoke_ranks_two_templates_of_each_family_and_keeps_every_headline_number(mirror):
    """A smoke run ranked the 1,287-ingredient pool in all 10 templates of 30 dishes (about 15
    minutes on the 2-core machine); it asks templates 1-2 of each family, two-fifths of that, and
    keeps every number: each family's mAP with its interval, its mean and std over templates, and
    each group's mAP with an interval.
    """
    smoke, said = smoke_run("fmlama_en", "smoke")
    asked = {r.tag for r in smoke.records}
    assert asked == {"hasParts_1", "hasParts_2", "country_1", "country_2"} and not said
    assert len(smoke.records) == 30 * 4 and smoke.config.subset["sampled"] == 30
    results = smoke.metrics["results"]
    for family in ("hasParts", "country"):
        assert results["overall"][f"map_{family}"]["ci_low"] is not None
        cells = smoke.metrics["map"][family]
        # a spread over templates
        assert all(c["std"] is not None and c["n_templates"] == 2 for c in cells.values())
        assert len(cells) == 16  # ALL and the 15 groups
        assert (
            len(with_interval({k: v[f"map_{family}"] for k, v in results["by_group"].items()}))
            == 15
        )
    full, _ = smoke_run("fmlama_en", 30)  # the same dishes at --limit 30: every template
    assert {r.item_id for r in full.records} == {r.item_id for r in smoke.records} and len(
        full.records
    ) == 300


def test_camel_needs_two_prompts_of_every_entity_type_and_two_entity_samples(mirror):
    smoke, below, said = at_smoke_and_one_below("camel_co_prompts", 20, n_runs=2, sample_size=10)
    types = {k: v["cbs"] for k, v in smoke["results"]["by_entity_type"].items()}
    assert (
        len(types) == 10
        and all(t["n"] == 2 for t in types.values())
        and len(with_interval(types)) == 10
    )
    short = {k: v["cbs"] for k, v in below["results"]["by_entity_type"].items()}
    assert len(with_interval(short)) == 9 and "fewer than 2 items" in said and "entity type" in said
    # one run is one entity sample per type: the CBS would be conditional on that draw, so it gets
    # no interval
    one_sample, _ = smoke_run("camel_co_prompts", "smoke", n_runs=1, sample_size=10)
    overall = one_sample.metrics["results"]["overall"]["cbs"]
    assert overall["ci_low"] is None and "one entity sample per group" in overall["no_interval"]


def test_xfakt_transfer_scores_need_every_language_country_cell(mirror, tmp_path):
    """The quickstart's smoke run: at --limit 30 it printed "frs/kts/xfakt: not reported" without
    saying why. A limit counts entities, each asked in all 13 languages: one of each country gives
    every language x country cell.
    """
    smoke, below, said = at_smoke_and_one_below("xfakt_factual_recall", 13, judge="string")
    assert (
        smoke["n_empty_cells"] == 0
        and {"frs", "kts", "xfakt"} <= smoke["results"]["overall"].keys()
    )
    # a country fewer: not the paper's statistic
    assert below["n_empty_cells"] == 13 or below["frs"] is None
    assert "FRS, KTS and X-FaKT" in said and "(13 entities, each asked in its 13 languages)" in said
    # every pair of languages, on the same entities
    assert len(smoke["results"]["by_language_pair"]) == 13 * 12 / 2
    _, short = smoke_run("xfakt_factual_recall", 10, judge="string", out=tmp_path / "quick")
    assert (
        "the 10 entities drawn leave 3 of its 13 country cells without one, so 39 of its 169 language x country "
        "cells get no item" in short[0]
    )
    assert "--limit smoke probes 13 entities" in short[0]
    assert "**below the smoke limit** (13)" in (tmp_path / "quick" / "report.md").read_text()


def test_maps_needs_two_figurative_and_two_literal_proverbs(mirror):
    data = str(mirror / MAPS_DATA)
    smoke, below, said = at_smoke_and_one_below("maps_en", 4, data_dir=data, memorisation=False)
    kinds = {k: v["accuracy"] for k, v in smoke["results"]["by_figurative"].items()}
    assert {k: v["n"] for k, v in kinds.items()} == {"figurative": 2, "literal": 2} and len(
        with_interval(kinds)
    ) == 2
    short = {k: v["accuracy"] for k, v in below["results"]["by_figurative"].items()}
    assert len(with_interval(short)) == 1 and "figurative and on literal" in said


def test_the_notice_comes_before_the_model_loads(mirror, monkeypatch):
    def refuse(spec):
        raise RuntimeError("the model was loaded")

    monkeypatch.setattr("culture_probe.engine.loading.ModelSpec.load", refuse)
    with (
        pytest.warns(SmallLimitWarning, match="FRS, KTS and X-FaKT"),
        pytest.raises(RuntimeError, match="loaded"),
    ):
        run(
            "xfakt_factual_recall",
            "planted:xfakt_factual_recall",
            judge="string",
            limit=10,
            progress=False,
        )
    with pytest.raises(
        InvalidValueError, match=r"limit must be a whole number >= 1, got 'some' \(or \"smoke\""
    ):
        run("xfakt_factual_recall", RandomScorer(), limit="some")


def test_a_suite_says_what_each_config_lacks_before_its_model_loads(mirror, monkeypatch):
    from culture_probe.runner.suite import run_suite

    said_before_load = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        monkeypatch.setattr(
            "culture_probe.engine.loading.ModelSpec.load",
            lambda spec: said_before_load.append(len(caught)) or RandomScorer(),
        )
        run_suite(
            ["camel_co_prompts", "camel_ag_prompts"],
            MODEL,
            limit=12,
            n_runs=1,
            sample_size=2,
            progress=False,
        )
    said = [str(w.message) for w in caught if issubclass(w.category, SmallLimitWarning)]
    # each config's notice once, all before the model loads
    assert len(said) == 2 and said_before_load == [2]
    assert "camel_co_prompts (20 prompts)" in said[0] and "camel_ag_prompts (" in said[1]


def test_a_random_model_is_read_against_its_chance_level(mirror):
    """A random ranking scores 15-20% P@1 on small candidate sets: the results block says what
    chance is, exactly.
    """
    result, _ = smoke_run("dlama_arab_west", "smoke", language="en")
    records = [r for r in result.records if not r.skipped]
    expected = 100 * np.mean(
        [len({g for g in r["gold"] if g.strip()}) / r["n_candidates"] for r in records]
    )
    chance = result.metrics["results"]["chance"]["p1"]
    assert chance["value"] == pytest.approx(expected) and "g/N" in chance["method"]
    # random: near chance
    assert abs(result.metrics["results"]["overall"]["p1"]["value"] - expected) < 15
    ranked, _ = smoke_run("xfakt_factual_recall", "smoke", mode="rank")
    assert ranked.metrics["results"]["chance"]["error_rate"]["value"] == pytest.approx(
        100 * 12 / 13
    )
    # each question ranks the two people it names
    two, _ = smoke_run("xfakt_in_context", "smoke", mode="rank")
    assert two.metrics["results"]["chance"]["error_rate"]["value"] == pytest.approx(50.0)
    maps, _ = smoke_run("maps_en", "smoke", data_dir=str(mirror / MAPS_DATA), memorisation=False)
    assert maps.metrics["results"]["chance"]["accuracy"]["value"] == pytest.approx(50.0)
    judged, _ = smoke_run("xfakt_factual_recall", "smoke", judge="string")
    assert "chance" not in judged.metrics["results"]  # an open answer has no chance level


def test_fmlama_chance_is_the_expected_map_of_each_dish_candidate_set(mirror):
    from culture_probe.metrics.chance import random_average_precision

    result, _ = smoke_run("fmlama_en", 3, families=("hasParts",))
    records = [r for r in result.records if not r.skipped]
    per_dish = {}
    for r in records:  # the mean over templates of the mean over dishes
        per_dish.setdefault(r["template"], []).append(
            100 * random_average_precision(len(set(r["gold"])), r["n_candidates"])
        )
    expected = np.mean([np.mean(v) for v in per_dish.values()])
    assert result.metrics["results"]["chance"]["map_hasParts"]["value"] == pytest.approx(expected)
    # 1,287 candidates: chance is tiny
    assert result.metrics["results"]["chance"]["map_hasParts"]["value"] < 2
