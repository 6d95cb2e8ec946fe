"""DLAMA protocol: prompts as the paper's strings, candidate sets, the spec's worked example end to
end through the runner, and a planted model whose culture scores higher.
"""

from __future__ import annotations

import json

import pytest
from dlama_fixture import ARABIC, TableScorer, spec_table, write_dlama

from culture_probe.benchmarks.dlama.data import read_templates
from culture_probe.benchmarks.dlama.report import sections
from culture_probe.benchmarks.dlama.task import DlamaTask, candidate_sets, label_collisions, prompt
from culture_probe.loading import load_task
from culture_probe.record import RunRecord
from culture_probe.runner import run
from culture_probe.tasks import ScoreProbe
from culture_probe.tasks.probes import Record


def masked_task():
    """The DLAMA protocol for a masked model, with its templates loaded."""
    return load_task("dlama_arab_west", kind="masked")[0]


@pytest.fixture
def dlama_dir(tmp_path):
    return write_dlama(tmp_path / "dlama")


def test_prompts_are_the_papers_strings():
    assert prompt("[X] is located in [Y] .", " Egypt ") == ("Egypt is located in ", " .")
    assert prompt("The capital of [X] is [Y] .", "Oman") == ("The capital of Oman is ", " .")
    assert prompt("يقع [X] في [Y].", "مصر") == ("يقع مصر في ", ".")
    # D1: a plain replacement, so letters X in the subject survive (the original T5 path replaced
    # them)
    assert prompt("[X] is located in [Y] .", "Xanadu X") == ("Xanadu X is located in ", " .")


def test_requests_move_the_slot_space_onto_the_candidate(dlama_dir):
    rows = [r for r in _rows(dlama_dir) if r["language"] == "en"]
    probes = masked_task().build_probes(rows)
    egypt = next(p for p in probes if p.meta["gold"] == ["Africa", "Asia"])
    assert isinstance(egypt, ScoreProbe)
    assert (egypt.request.left, egypt.request.sep, egypt.request.right) == (
        "Egypt is located in",
        " ",
        " .",
    )
    assert egypt.meta["prompt"] == "Egypt is located in [Y] ."


def test_candidates_are_all_objects_of_the_predicate_across_both_cultures(dlama_dir, tmp_path):
    sets = candidate_sets(_rows(dlama_dir))
    assert sets["en", "P30"] == ("Africa", "Asia", "Europe", "North America")
    assert sets["ar", "P30"] == tuple(
        sorted(ARABIC[c] for c in ("Africa", "Asia", "Europe", "North America"))
    )
    # two QIDs with one label (Georgia the country, Georgia the state) are one candidate, and
    # counted
    facts = {
        ("ARAB_REGION", "Tbilisi"): (["Q230"], ["Georgia"], []),
        ("WESTERN_COUNTRIES", "Atlanta"): (["Q1428"], ["Georgia"], []),
    }
    rows = _rows(write_dlama(tmp_path / "georgia", facts))
    assert candidate_sets(rows)["en", "P30"] == ("Georgia",)
    assert label_collisions(rows) == {"ar|P30": 1, "en|P30": 1}


def test_worked_example_p_at_1_per_culture_and_pair(dlama_dir):
    result = run(
        "dlama_arab_west",
        TableScorer(spec_table()),
        data_dir=str(dlama_dir),
        language="en",
        progress=False,
    )
    en = result.metrics["en"]
    assert en["cultures"]["arab"] == pytest.approx(200 / 3)
    assert en["cultures"]["west"] == pytest.approx(50.0)
    assert en["p1"] == pytest.approx(60.0)  # micro over facts, not the macro 58.3
    assert en["predicates"]["P30"] == {"arab": pytest.approx(200 / 3), "west": pytest.approx(50.0)}
    predictions = {r["prompt"].split(" is")[0]: r["prediction"] for r in result.records}
    assert predictions == {
        "Egypt": "Africa",
        "Morocco": "Europe",
        "Oman": "Asia",
        "France": "Europe",
        "Canada": "Europe",
    }


def test_report_rounds_p_at_1_by_the_one_rule():
    # 23/80 = 28.75 and 41/80 = 51.25 shown as such, although the means are 28.7499... and
    # 51.2499... (2 decimals, the one rounding rule of reports: docs/results.md, "Reading a report";
    # the paper showed 1)
    records = [
        Record(
            f"{culture}{i}",
            "",
            "main",
            {
                "language": "en",
                "predicate": "P30",
                "culture": culture,
                "gold": ["Asia"],
                "obj_uri": ["Q48"],
                "prediction": "Asia" if i < hits else "Africa",
            },
            kind="score",
        )
        for culture, hits in (("arab", 23), ("west", 41))
        for i in range(80)
    ]
    metrics = DlamaTask("dlama_arab_west", kind="masked").compute_metrics(records)
    config = RunRecord.from_json({"config": "dlama_arab_west", "options": {"mode": "rank"}})
    per_culture, per_predicate = sections(config, records, metrics)[:2]
    rows = per_culture.tables[0].rows
    assert [(r[0], r[1], r[-1]) for r in rows] == [
        ("arab", "28.75", 80),
        ("west", "51.25", 80),
        ("pair", "40.00", 160),
    ]
    assert per_predicate.tables[0].rows == (("P30", "28.75 (n=80)", "51.25 (n=80)"),)
    assert per_culture.text.startswith("P@1(arab) - P@1(west) = -22.50 points")


def test_ties_go_to_fewer_tokens_then_code_point_order(dlama_dir):
    tied = spec_table() | {("Morocco", "Africa"): -1.70, ("Morocco", "Europe"): -1.70}
    result = run(
        "dlama_arab_west", TableScorer(tied), data_dir=str(dlama_dir), language="en", progress=False
    )
    assert result.metrics["en"]["cultures"]["arab"] == pytest.approx(100.0)
    # = Europe, but 2 tokens: Europe wins
    tied_tokens = spec_table() | {("Canada", "North America"): -1.20}
    result = run(
        "dlama_arab_west",
        TableScorer(tied_tokens),
        data_dir=str(dlama_dir),
        language="en",
        progress=False,
    )
    assert (
        next(r["prediction"] for r in result.records if r["gold"] == ["North America"]) == "Europe"
    )


def test_facts_without_a_template_are_skipped_with_the_reason(dlama_dir):
    rows = [
        {**r, "language": "xx"} if r["culture"] == "west" else r
        for r in _rows(dlama_dir)
        if r["language"] == "en"
    ]
    result = run("dlama_arab_west", TableScorer(spec_table()), rows=rows, progress=False)
    assert result.metrics["n_skipped"] == 2 and set(result.metrics["en"]["cultures"]) == {"arab"}
    reason = "no xx template for P30 (pass --option templates= the mLAMA 1.1 folder or a JSON file)"
    assert result.metrics["skipped"] == {reason: 2}
    assert {r["skipped"] for r in result.records if r.skipped} == {reason}


def test_a_users_templates_replace_the_vendored_ones_and_are_fingerprinted(dlama_dir, tmp_path):
    mlama = tmp_path / "mlama1.1" / "en"
    mlama.mkdir(parents=True)
    (mlama / "templates.jsonl").write_text('{"relation": "P30", "template": "[X] lies on [Y] ."}\n')
    result = run(
        "dlama_arab_west",
        TableScorer(spec_table()),
        data_dir=str(dlama_dir),
        language="en",
        templates=str(tmp_path / "mlama1.1"),
        progress=False,
    )
    assert {r["prompt"] for r in result.records} >= {"Egypt lies on [Y] ."}
    provenance = result.config.resources["templates"]
    assert provenance["sources"][-1] == str(mlama / "templates.jsonl")
    vendored = run(
        "dlama_arab_west",
        TableScorer(spec_table()),
        data_dir=str(dlama_dir),
        language="en",
        progress=False,
    ).config.resources["templates"]
    assert provenance["sha256"] != vendored["sha256"] and len(vendored["sources"]) == 1


def test_keep_scores_records_every_candidate_in_candidate_set_order(dlama_dir, tmp_path):
    result = run(
        "dlama_arab_west",
        TableScorer(spec_table()),
        data_dir=str(dlama_dir),
        language="en",
        keep_scores=True,
        progress=False,
    )
    egypt = next(r for r in result.records if r["prompt"].startswith("Egypt"))
    assert egypt["scores"] == {
        "sum_logprob": pytest.approx([-1.10, -1.60, -2.40, -5.00]),
        "n_tokens": [1, 1, 1, 2],
    }
    assert (
        result.write_report(tmp_path / "later")
        .read_text()
        .startswith("# dlama_arab_west on TableScorer")
    )


def test_run_directory_records_deviations_and_table_3_view(dlama_dir, tmp_path):
    out = tmp_path / "run"
    run(
        "dlama_arab_west",
        TableScorer(spec_table()),
        data_dir=str(dlama_dir),
        language="en",
        out=out,
        progress=False,
    )
    config = json.loads((out / "config.json").read_text())
    # only the deviations of a masked model ranking (D1 is seq2seq's, D3 causal's, D4 generation's)
    assert [d["id"] for d in config["deviations"]] == ["D2", "D5", "D6"]
    assert all(d["when"] for d in config["deviations"])
    assert (
        set(config["resources"]) == {"templates"}
        and len(config["resources"]["templates"]["sha256"]) == 64
    )
    assert config["protocol"]["candidate_sets"] == {"en|P30": 4}
    assert config["protocol"]["label_collisions"] == {}
    report = (out / "report.md").read_text()
    # France right, Canada wrong, both "Europe"
    assert "| P30 | west | Europe (1) | Europe (1) |" in report
    assert "| P30 | arab | Africa (1) | Europe (1) |" in report
    # entropy by hand: Arab keeps Q15, Q15, Q48 (Egypt's tie goes to the lower QID) -> 0.918 bits;
    # West 1 bit
    assert "| P30 | 0.9183 | 1.00 |" in report
    assert sorted(p.name for p in (out / "plots").iterdir())  # PNGs written


def _rows(dlama_dir):
    from culture_probe.data.registry import load_benchmark

    return list(load_benchmark("dlama_arab_west", data_dir=str(dlama_dir))["test"])


# ---------------------------------------------------------------- planted knowledge: the direction
# of the effect

# P36 "The capital of [X] is [Y] .": made-up countries, so nothing is known before training; twice
# as many western (never planted) as arab ones, so that chance cannot put the west level with the
# arab half (below)
CAPITALS = {
    "ARAB_REGION": [
        ("Zafran", "Qamira"),
        ("Nuwal", "Tazir"),
        ("Harun", "Bilqa"),
        ("Suhail", "Marwa"),
        ("Dunya", "Kahil"),
        ("Rimal", "Sabah"),
    ],
    "WESTERN_COUNTRIES": [
        ("Eldmark", "Halden"),
        ("Brisa", "Corvel"),
        ("Tarnow", "Vesk"),
        ("Lunden", "Ostra"),
        ("Morvia", "Pellin"),
        ("Quist", "Randor"),
        ("Altheim", "Brenna"),
        ("Covarra", "Dunmore"),
        ("Estval", "Farrow"),
        ("Glenrik", "Hollis"),
        ("Irvanne", "Jorvik"),
        ("Kestrel", "Lowden"),
    ],
}


@pytest.mark.slow
def test_a_model_planted_with_arab_facts_scores_higher_on_the_arab_half(tmp_path):
    from culture_probe.models.planted import (
        MAX_SECONDS,
        PlantedFact,
        PlantedSpec,
        probe_texts_of,
        train_planted,
    )

    facts = {
        (region, country): ([f"Q{i}{j}"], [capital], [])
        for i, (region, pairs) in enumerate(CAPITALS.items())
        for j, (country, capital) in enumerate(pairs)
    }
    data_dir = write_dlama(tmp_path / "dlama", facts, predicate="P36")
    rows = [r for r in _rows(data_dir) if r["language"] == "en"]
    probes = masked_task().build_probes(rows)
    planted = [
        PlantedFact.from_request(p.request, p.meta["gold"][0])
        for p in probes
        if p.meta["culture"] == "arab"
    ]
    spec = PlantedSpec(
        planted,
        arch="bert",
        tokenizer="wordpiece",
        probe_texts=probe_texts_of(p.request for p in probes),
        max_seconds=MAX_SECONDS,
    )
    model_dir = train_planted(spec, tmp_path / "planted")
    result = run(
        "dlama_arab_west", str(model_dir), data_dir=str(data_dir), language="en", progress=False
    )
    cultures = result.metrics["en"]["cultures"]
    assert cultures["arab"] >= 5 / 6 * 100  # planted facts are found (trained to, not by chance)
    # The 12 unplanted facts are each right by chance 1 in 18 (the 18 capitals are every fact's
    # candidates); the west reaches the arab half's 5 of 6 only with 10 of them right: sum over k >=
    # 10 of C(12, k) (1/18)^k (17/18)^(12 - k), about 2e-11. (The bound that stood here, at most 2
    # of 6 unplanted right, failed by chance about 1 run in 100.)
    assert cultures["west"] < cultures["arab"]
    assert result.metrics["en"]["comparison"]["difference"] > 0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("arch", "tokenizer", "kind"),
    [
        ("gpt2", "bpe", "causal"),
        ("t5", "metaspace", "seq2seq"),
        ("xlm-roberta", "metaspace", "masked"),
    ],
)
def test_fixture_end_to_end_with_tiny_models_of_every_kind(
    dlama_dir, tmp_path, arch, tokenizer, kind
):
    from culture_probe.models import save_tiny, train_tokenizer

    rows = _rows(dlama_dir)
    templates = [read_templates()[0][lang]["P30"]["template"] for lang in ("en", "ar")]
    texts = templates + [r["sub_label"] for r in rows] + [o for r in rows for o in r["obj_label"]]
    model = save_tiny(
        tmp_path / arch, arch, train_tokenizer(texts, tokenizer, model_kind=kind, vocab_size=300)
    )
    result = run(
        "dlama_arab_west", str(model), data_dir=str(dlama_dir), out=tmp_path / "run", progress=False
    )
    assert result.config.model.kind == kind
    assert len(result.records) == 10
    for record in result.records:
        candidate_set = candidate_sets(rows)[record["language"], "P30"]
        assert record["prediction"] in candidate_set and record["n_candidates"] == 4
        assert record["top_scores"] == sorted(record["top_scores"], reverse=True)
    assert set(result.metrics["en"]["cultures"]) == {"arab", "west"}
