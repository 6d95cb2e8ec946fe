"""Built-in planted models (`planted:<config>`): each benchmark's protocol finds the knowledge that
was planted, in the direction the planting predicts. These are self-tests of the probing setups, end
to end through `run`.
"""

from __future__ import annotations

import dataclasses
import os
from functools import cache

import pytest

from culture_probe.benchmarks.camel.planted import camel_spec
from culture_probe.benchmarks.maps.planted import maps_spec
from culture_probe.benchmarks.xfakt.planted import planted_entities, xfakt_spec
from culture_probe.data.registry import load_benchmark
from culture_probe.errors import CultureProbeError, UnknownNameError
from culture_probe.models.planted import train_planted
from culture_probe.models.planted_benchmarks import (
    CHAT_TEMPLATE,
    chat_prompt,
    planted_model_dir,
    planted_spec,
)
from culture_probe.runner import run


@cache
def recall_rows() -> tuple[dict, ...]:
    return tuple(load_benchmark("xfakt_factual_recall")["test"])


def test_xfakt_facts_are_stated_only_in_the_associated_language(mirror):
    rows = recall_rows()
    spec = xfakt_spec(rows, per_country=2)
    chosen = planted_entities(rows, 2)
    # 2 entities x 13 countries, one language each
    assert len(chosen) == 26 and len(spec.facts) == 26
    associated = {
        r["question"]: r for r in rows if r["entity_idx"] in chosen and r["is_associated"]
    }
    for fact in spec.facts:
        question = fact.left.removeprefix("Q: ").removesuffix("\nA:")
        assert fact.left == chat_prompt(question) and associated[question]["answer"] == fact.answer
    assert chat_prompt("Why?") == "Q: Why?\nA:"
    from jinja2 import Template

    rendered = Template(CHAT_TEMPLATE).render(
        messages=[{"role": "user", "content": "Why?"}], add_generation_prompt=True
    )
    assert rendered == chat_prompt("Why?")  # what the engine's chat rendering feeds the model


@pytest.mark.slow
def test_xfakt_associated_language_recall_beats_the_others(mirror, tmp_path):
    rows = recall_rows()
    chosen = planted_entities(rows, 5)
    probed = [r for r in rows if r["entity_idx"] in chosen]
    result = run(
        "xfakt_factual_recall",
        "planted:xfakt_factual_recall",
        rows=probed,
        judge="string",
        out=tmp_path / "run",
        progress=False,
    )
    metrics = result.metrics
    assert result.config.model.spec == "planted:xfakt_factual_recall"
    # recall where planted, not elsewhere
    assert metrics["mu_assoc"] <= 0.2 and metrics["mu_non"] >= 0.8
    assert metrics["kts"] < 0.4 and metrics["frs"] < 0.5
    # a model that knows its facts: its low KTS says something
    assert "warnings" not in metrics["results"]
    by_language = {}
    for r in result.records:
        by_language.setdefault((r["language"], r["is_associated"]), []).append(r["correct"])
    for language in {r["language"] for r in probed}:
        assert sum(by_language[language, True]) / 5 > sum(by_language[language, False]) / 60


@cache
def camel_prompt_rows() -> tuple[dict, ...]:
    return tuple(
        r for r in load_benchmark("camel_co_prompts")["test"] if r["entity_type"] in (3, 4)
    )  # clothing


@pytest.mark.slow
@pytest.mark.parametrize("culture", ["western", "arab"])
def test_camel_cbs_moves_towards_the_planted_culture(mirror, tmp_path, culture):
    rows = list(camel_prompt_rows())
    entities = load_benchmark("camel_entities")["test"]
    spec = dataclasses.replace(camel_spec(rows, entities, culture=culture, n_runs=2), steps=120)
    path = train_planted(spec)
    result = run("camel_co_prompts", str(path), rows=rows, n_runs=2, progress=False)
    if culture == "western":
        assert result.metrics["cbs"] > 70
    else:
        assert result.metrics["cbs"] < 30


@pytest.mark.slow
def test_maps_planted_proverbs_are_memorised_and_understood(mirror, tmp_path):
    data_dir = os.path.join(os.environ["CULTURE_PROBE_MIRROR"], "manual", "maps")
    rows = list(load_benchmark("maps_en", data_dir=data_dir)["test"])[:16]
    spec = dataclasses.replace(maps_spec(rows, n_planted=8), steps=300)
    path = train_planted(spec)
    result = run("maps_en", str(path), rows=rows, progress=False)
    planted = {r["id"] for r in rows[:8]}
    union = {}
    for r in result.records:
        if "success" in r:
            union[r["id"]] = union.get(r["id"], False) or r["success"]
    assert (
        sum(union[i] for i in planted) >= 7
        and sum(v for i, v in union.items() if i not in planted) <= 2
    )
    reason = {r["id"]: r["correct"] for r in result.records if r["tag"] == "reason"}
    assert sum(reason[i] for i in planted) >= 7


def test_planted_configs_are_checked(mirror):
    with pytest.raises(CultureProbeError, match="use planted:xfakt_factual_recall"):
        planted_spec("xfakt_in_context")
    with pytest.raises(CultureProbeError, match="use planted:camel_co_prompts"):
        planted_spec("camel_entities")
    with pytest.raises(UnknownNameError, match="Unknown culture 'martian'"):
        camel_spec(list(camel_prompt_rows())[:1], [], culture="martian")
    with pytest.raises(CultureProbeError, match="per_country must be at least 1"):
        xfakt_spec(recall_rows(), per_country=0)


@pytest.mark.slow
def test_dlama_planted_culture_scores_higher(tmp_path):

    from dlama_fixture import FACTS, write_dlama

    # 10 western facts more than the fixture's 2, never planted: each is right by chance 1 in 4 (the
    # 4 continents are every fact's candidates), so the west reaches the arab half's 3 of 3 only
    # with all 12 right, (1/4)^12, about 6e-8 (with the fixture's 2 alone, 1 in 16)
    west = {
        ("WESTERN_COUNTRIES", f"Westland{i}"): (["Q46"], ["Europe"], [0.0] * 4) for i in range(10)
    }
    root = write_dlama(tmp_path / "dlama", {**FACTS, **west})
    path = planted_model_dir("dlama_arab_west", data_dir=str(root))
    result = run(
        "dlama_arab_west",
        "planted:dlama_arab_west",
        data_dir=str(root),
        language="en",
        progress=False,
    )
    cultures = result.metrics["en"]["cultures"]
    assert cultures["arab"] == 100.0  # the planted facts are found (trained to, not by chance)
    assert path.is_dir() and cultures["arab"] > cultures["west"]


@pytest.mark.slow
def test_fmlama_planted_group_has_the_higher_map(mirror):
    from culture_probe.models.planted_ranking import ranking_spec

    rows = list(load_benchmark("fmlama_en")["test"])
    data = [r for r in rows if r["group"] == "Italy"][:5] + [
        r for r in rows if r["group"] == "Japan"
    ][:5]
    spec = dataclasses.replace(
        ranking_spec("fmlama_en", data, group_key="group", planted="Italy"), steps=200
    )
    result = run(
        "fmlama_en", str(train_planted(spec)), rows=data, families=("hasParts",), progress=False
    )
    by_group = result.metrics["map"]["hasParts"]
    assert by_group["Italy"]["mean"] > 80 > 30 > by_group["Japan"]["mean"]
    with pytest.raises(UnknownNameError, match="Unknown group to plant 'Atlantis'"):
        ranking_spec("fmlama_en", data, group_key="group", planted="Atlantis")


@pytest.mark.slow
def test_make_demo_writes_the_xfakt_run_with_the_cross_lingual_gap(mirror, tmp_path, capsys):
    import json

    from culture_probe import demo

    out = tmp_path / "demo"
    assert demo.main(["--out", str(out), "--arch", "gpt2", "--per-country", "2"]) == 0
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert (
        config["model"]["spec"] == "planted:xfakt_factual_recall"
        and config["options"]["judge"] == "string"
    )
    assert (
        metrics["n_items"] == 845
        and metrics["mu_assoc"] < 0.2 < 0.8 < metrics["mu_non"]
        and metrics["kts"] < 0.4
    )
    report = (out / "report.md").read_text(encoding="utf-8")
    # the run's own report
    assert "Language x country errors" in report and "Self-test" not in report
    assert "Self-test: planted vs unplanted countries" in (out / "self_test.md").read_text(
        encoding="utf-8"
    )
    assert f"KTS {metrics['kts']:.3f}" in capsys.readouterr().out
    # a second run resumes
    assert demo.main(["--out", str(out), "--arch", "gpt2", "--per-country", "2"]) == 0
