"""A planted model says what was planted (which culture, group, entities or languages), so that its
run's report tells a reader which pattern a correct probe finds: config.json records it and the
report prints it.
"""

from __future__ import annotations

import dataclasses
import json

from stand_ins import NoIdeaScorer

from culture_probe.benchmarks.camel.planted import camel_spec
from culture_probe.benchmarks.maps.planted import maps_spec
from culture_probe.benchmarks.xfakt.planted import xfakt_spec
from culture_probe.data.registry import load_benchmark
from culture_probe.models.planted_benchmarks import planted_spec
from culture_probe.runner import run


def test_each_builtin_planted_model_says_what_it_learned(mirror):
    recall = list(load_benchmark("xfakt_factual_recall")["test"])
    assert xfakt_spec(recall, per_country=2).what.startswith(
        "a tiny GPT-2 trained on 26 entities (2 of each of 13 countries), each fact stated only in its country's "
        "own language"
    )
    prompts = [r for r in load_benchmark("camel_co_prompts")["test"] if r["entity_type"] == 3]
    entities = list(load_benchmark("camel_entities")["test"])
    arab = camel_spec(prompts, entities, culture="arab", n_runs=1, sample_size=2).what
    assert "filled with the arab entities" in arab and "expect a CBS below 50" in arab
    proverbs = list(load_benchmark("maps_en", data_dir=mirror / "manual" / "maps")["test"])
    assert "the first 16 of the 394 proverbs" in maps_spec(proverbs).what
    # DLAMA plants the first 400 gold answers of the Arab facts: 94 Arabic P17 facts, not every
    # predicate
    dlama = planted_spec("dlama_arab_west").what
    assert (
        "trained on 94 of the 21,892 facts whose culture is arab (language ar; predicate P17;"
        in dlama
    )
    assert "P@1 near 100% on those facts" in dlama
    fmlama = planted_spec("fmlama_en").what
    assert "dishes whose group is Others (lang en;" in fmlama and "expect mAP near 100%" in fmlama


def test_what_was_planted_is_no_part_of_the_cache_key(mirror):
    spec = planted_spec("xfakt_factual_recall")
    # no cached model is retrained
    assert dataclasses.replace(spec, what="something else").key() == spec.key()


def test_a_planted_run_records_and_reports_what_was_planted(mirror, tmp_path, monkeypatch):
    monkeypatch.setattr("culture_probe.engine.loading.ModelSpec.load", lambda spec: NoIdeaScorer())
    result = run(
        "xfakt_factual_recall",
        "planted:xfakt_factual_recall",
        judge="string",
        limit="smoke",
        out=tmp_path / "run",
        progress=False,
    )
    what = planted_spec("xfakt_factual_recall").what
    assert what.startswith("a tiny GPT-2 trained on 65 entities (5 of each of 13 countries)")
    assert json.loads((tmp_path / "run" / "config.json").read_text())["model"]["planted"] == what
    assert result.config.model.planted == what
    assert f"- **planted model**: {what}" in (tmp_path / "run" / "report.md").read_text()
    other = run(
        "xfakt_factual_recall", NoIdeaScorer(), judge="string", limit="smoke", progress=False
    )
    assert "planted" not in other.config.to_json()["model"]
