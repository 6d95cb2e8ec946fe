"""Planted controls of consistency across languages (docs/consistency.md): a tiny BERT taught the
same facts in English and Arabic is consistent on them; one taught them in Arabic only is not, and
the report shows which way.
"""

from __future__ import annotations

import pytest

from culture_probe import load_benchmark, run
from culture_probe.models.planted import train_planted
from culture_probe.models.planted_ranking import ranking_spec

CONFIG = "dlama_arab_west"


@pytest.fixture
def facts(mirror):
    """Twenty facts of one predicate (country, P17) in both languages, from the release in the
    mirror.
    """
    rows = load_benchmark(CONFIG)["test"].to_list()
    chosen = list(
        dict.fromkeys(r["uuid"] for r in rows if r["predicate"] == "P17" and r["language"] == "en")
    )[:20]
    return [r for r in rows if r["uuid"] in set(chosen)]


def _consistency(rows, tmp_path, group_key, planted):
    model = train_planted(
        ranking_spec(CONFIG, rows, group_key=group_key, planted=planted), tmp_path / planted
    )
    result = run(CONFIG, str(model), rows=rows, out=tmp_path / f"run_{planted}", progress=False)
    return (
        result,
        result.metrics["consistency"]["pairs"]["ar/en"],
        result.metrics["results"]["by_language_pair"]["ar/en"],
    )


@pytest.mark.slow
def test_a_model_taught_the_facts_in_both_languages_is_consistent_on_them(facts, tmp_path):
    _, pair, estimates = _consistency(facts, tmp_path, "predicate", "P17")
    assert pair["n"] == 20 and pair["both_right"] >= 18
    assert estimates["rankc"]["value"] > 60 and estimates["rankc"]["n"] == 20


@pytest.mark.slow
def test_a_model_taught_them_in_arabic_only_is_not_and_the_report_shows_the_asymmetry(
    facts, tmp_path
):
    result, pair, estimates = _consistency(facts, tmp_path, "language", "ar")
    assert pair["right_only_a"] >= 15 and pair["right_only_b"] <= 2  # a = ar, b = en
    assert pair["difference"]["ci_low"] > 0  # P@1 in ar minus en: the interval excludes 0
    assert estimates["both_right"]["value"] < 25
    report = (result.run_dir / "report.md").read_text(encoding="utf-8")
    row = next(line for line in report.splitlines() if line.startswith("| ar/en |"))
    assert f"| {pair['right_only_a']} (" in row and f"| {pair['right_only_b']} (" in row
