"""Consistency across DLAMA's languages, end to end through the runner: facts aligned by their
released id and candidates by QID, a model that knows the facts in both languages is consistent, one
that knows them in English only is not and the report shows the asymmetry, and collapsed labels are
left out of RankC, never matched by text.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from dlama_fixture import ARABIC, FACTS, N_TOKENS, spec_table, write_dlama  # noqa: E402

from culture_probe import run  # noqa: E402
from culture_probe.benchmarks.dlama.task import DlamaTask, aligned_candidates  # noqa: E402
from culture_probe.engine.types import CandidateScores  # noqa: E402
from culture_probe.metrics import rankc  # noqa: E402
from culture_probe.tasks.probes import Record  # noqa: E402

ENGLISH = {arabic: english for english, arabic in ARABIC.items()}


class BilingualScorer:
    """Scores from the spec's table in English; in Arabic the same scores (`knows_arabic`) or their
    reverse.
    """

    kind = "masked"
    identity = {"name_or_path": "bilingual-table"}

    def __init__(self, knows_arabic: bool):
        self.table, self.knows_arabic = spec_table(), knows_arabic

    def score(self, requests, options=None):
        return [self._scores(request) for request in requests]

    def _scores(self, request):
        subject = next(s for (_, s) in FACTS if s in request.left or ARABIC[s] in request.left)
        arabic = ARABIC[subject] in request.left
        names = [ENGLISH.get(c, c) for c in request.candidates]
        means = np.array([self.table.get((subject, c), -9.0) for c in names])
        if arabic and not self.knows_arabic:
            means = -10.0 - means  # the English order reversed
        tokens = np.array([N_TOKENS.get(c, 1) for c in names])
        return CandidateScores(request.candidates, means * tokens, tokens)


def _run(tmp_path: Path, knows_arabic: bool):
    data = write_dlama(tmp_path / "dlama")
    out = tmp_path / ("both" if knows_arabic else "english")
    return run(
        "dlama_arab_west",
        BilingualScorer(knows_arabic),
        data_dir=str(data),
        out=out,
        progress=False,
    ), out


def test_a_model_that_knows_the_facts_in_both_languages_is_fully_consistent(tmp_path):
    result, _ = _run(tmp_path, knows_arabic=True)
    pair = result.metrics["consistency"]["pairs"]["ar/en"]
    estimates = result.metrics["results"]["by_language_pair"]["ar/en"]
    assert pair["n"] == len(FACTS) and pair["right_only_a"] == pair["right_only_b"] == 0
    assert estimates["rankc"]["value"] == pytest.approx(100.0) and estimates["rankc"]["n"] == len(
        FACTS
    )
    assert estimates["both_right"]["value"] == pytest.approx(
        result.metrics["results"]["by_language"]["en"]["p1"]["value"]
    )


def test_a_model_that_knows_them_in_english_only_is_not_and_the_report_shows_which_way(tmp_path):
    result, out = _run(tmp_path, knows_arabic=False)
    pair = result.metrics["consistency"]["pairs"]["ar/en"]
    by_language = result.metrics["results"]["by_language"]
    right_en = round(by_language["en"]["p1"]["value"] * len(FACTS) / 100)
    assert (
        pair["right_only_b"] == right_en > 0
        and pair["right_only_a"] == 0
        and pair["both_right"] == 0
    )
    assert (
        pair["difference"]["difference"] < 0
        and pair["difference"]["of"] == "P@1 in ar minus P@1 in en"
    )

    # RankC is the paper's, over the QIDs: each fact's English ranking against its reverse
    records = [r for r in result.records if not r.skipped]
    en = {r["uuid"]: r["ranked_ids"] for r in records if r["language"] == "en"}
    ar = {r["uuid"]: r["ranked_ids"] for r in records if r["language"] == "ar"}
    expected = rankc([ar[f] for f in en], [en[f] for f in en])["value"]
    rankc_estimate = result.metrics["results"]["by_language_pair"]["ar/en"]["rankc"]
    assert rankc_estimate["value"] == pytest.approx(100 * expected) and rankc_estimate["value"] < 60

    report = (out / "report.md").read_text(encoding="utf-8")
    section = report.split("## Consistency across languages", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith("| ar/en |"))
    assert f"| {len(FACTS)} | 0 (0.00%) † | 0 (0.00%) | {right_en} (" in row  # † : n below 10
    assert "RankC (%) per pair of languages" in section and "(plots/" in section
    saved = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert saved["results"]["by_language_pair"] == result.metrics["results"]["by_language_pair"]


def test_candidates_align_by_qid_and_a_collapsed_label_leaves_its_qids_out_in_every_language():
    def row(language, predicate, uris, labels):
        return {"language": language, "predicate": predicate, "obj_uri": uris, "obj_label": labels}

    rows = [
        row("en", "P19", ["Q1"], ["Paris"]),
        # two towns called Paris in English: one candidate there
        row("en", "P19", ["Q2"], ["Paris"]),
        row("en", "P19", ["Q3"], ["Cairo"]),
        row("en", "P19", ["Q4"], ["Rome"]),
        row("ar", "P19", ["Q1"], ["باريس"]),
        row("ar", "P19", ["Q2"], ["باريس تكساس"]),
        row("ar", "P19", ["Q3"], ["القاهرة"]),
        row("ar", "P19", ["Q4"], ["روما"]),
    ]
    aligned = aligned_candidates(rows)
    assert dict(aligned["en", "P19"].ids) == {"Cairo": "Q3", "Rome": "Q4"}
    assert dict(aligned["ar", "P19"].ids) == {"القاهرة": "Q3", "روما": "Q4"}
    assert aligned["en", "P19"].set_id == aligned["ar", "P19"].set_id
    only_english = aligned_candidates([r for r in rows if r["language"] == "en"])
    # Paris is out in English on its own
    assert only_english["en", "P19"].set_id == aligned["en", "P19"].set_id
    only_arabic = aligned_candidates([r for r in rows if r["language"] == "ar"])
    assert (
        len(only_arabic["ar", "P19"].ids) == 4
        and only_arabic["ar", "P19"].set_id != aligned["ar", "P19"].set_id
    )


def test_two_runs_of_one_language_each_are_paired_as_one_run_of_both(tmp_path, capsys):
    from culture_probe.cli import main

    data = str(write_dlama(tmp_path / "dlama"))
    scorer = BilingualScorer(knows_arabic=False)
    both = run("dlama_arab_west", scorer, data_dir=data, progress=False)
    for language in ("en", "ar"):
        run(
            "dlama_arab_west",
            scorer,
            data_dir=data,
            language=language,
            out=tmp_path / language,
            progress=False,
        )
    assert (
        main(
            [
                "consistency",
                str(tmp_path / "ar"),
                str(tmp_path / "en"),
                "--out",
                str(tmp_path / "c"),
            ]
        )
        == 0
    )
    saved = json.loads((tmp_path / "c" / "consistency.json").read_text(encoding="utf-8"))
    assert saved["runs"] == ["ar", "en"]
    assert saved["consistency"]["pairs"] == both.metrics["consistency"]["pairs"]
    assert saved["results"]["by_language_pair"] == both.metrics["results"]["by_language_pair"]
    assert "| ar/en | 5 |" in capsys.readouterr().out
    assert list((tmp_path / "c" / "plots").glob("*.png"))


def test_runs_that_cannot_be_paired_are_refused_naming_why(tmp_path, capsys):
    from culture_probe.cli import main

    data = str(write_dlama(tmp_path / "dlama"))
    for name, knows, language in (
        ("en", False, "en"),
        ("en2", False, "en"),
        ("ar_other", True, "ar"),
    ):
        scorer = BilingualScorer(knows_arabic=knows)
        scorer.identity = {"name_or_path": f"table-{knows}"}
        run(
            "dlama_arab_west",
            scorer,
            data_dir=data,
            language=language,
            out=tmp_path / name,
            progress=False,
        )
    assert main(["consistency", str(tmp_path / "en"), str(tmp_path / "en2")]) == 2
    assert "both probed en: pass runs of different languages" in capsys.readouterr().err
    assert main(["consistency", str(tmp_path / "en"), str(tmp_path / "ar_other")]) == 2
    assert "their model differ" in capsys.readouterr().err


def _identical_records(sizes):
    """Ranking records of one fact per candidate-set size, in English and Arabic, ranked the same in
    both (right).
    """
    records = []
    for n in sizes:
        qids = [f"Q{n}_{k}" for k in range(n)]
        for language in ("en", "ar"):
            labels = [f"{q}@{language}" for q in qids]
            fields = {
                "uuid": f"P{n}_general_ARAB_REGION_0",
                "language": language,
                "predicate": f"P{n}",
                "culture": "arab",
                "gold": labels[:1],
                "obj_uri": qids[:1],
                "prediction": labels[0],
                "top": labels[:5],
                "n_candidates": n,
                "ranked_ids": qids[:20],
                "n_aligned": n,
                "aligned_set": f"set{n}",
            }
            records.append(
                Record(f"P{n}_general_ARAB_REGION_0|{language}", "", "main", fields, kind="score")
            )
    return records


def test_a_fully_consistent_model_gets_its_metrics_with_rankc_100():
    """Identical rankings of 9, 10, 12 or 17 candidates gave RankC 1.0000000000000002, so
    100.00000000000001 %, and the results' range check refused the run's metrics.
    """
    task = DlamaTask("dlama_arab_west", kind="masked")
    metrics = task.compute_metrics(_identical_records([9, 10, 12, 17, 20]))
    estimate = metrics["results"]["by_language_pair"]["ar/en"]["rankc"]
    assert estimate["value"] == 100.0 and estimate["n"] == 5
    # prefixes of 20: within 1.1e-9 of 1, never above
    beyond = task.compute_metrics(_identical_records([24, 40, 60]))
    assert 100 - 1.1e-7 <= beyond["results"]["by_language_pair"]["ar/en"]["rankc"]["value"] <= 100.0


def test_pooled_numbers_count_each_fact_once_and_say_how_many_answers_they_hold(tmp_path):
    """DLAMA's overall and per-culture P@1 took "fact X in English" and "fact X in Arabic" for two
    independent units and called them n facts: the design's unit is the fact (its release id), asked
    in both languages.
    """
    result, out = _run(tmp_path, knows_arabic=True)
    results = result.metrics["results"]
    overall, english = results["overall"]["p1"], results["by_language"]["en"]["p1"]
    assert overall["n"] == len(FACTS) and overall["n_observations"] == 2 * len(FACTS)
    assert english["n"] == len(FACTS) and "n_observations" not in english  # one answer per fact
    assert results["design"]["unit"] == "fact (its release uuid)"
    assert results["design"]["repeated"] == ["prompt language"]
    assert results["ci"]["methods"]["p1"].startswith(
        "Wilson score interval at the design's effective sample size"
    )
    report = (out / "report.md").read_text(encoding="utf-8")
    assert f"| {len(FACTS)} ({2 * len(FACTS)} fact-language answers) |" in report
