"""Runs a user makes while trying things out: smoke runs on a few items, provisional DLAMA
templates, and MAPS memorisation targets that cannot be scored.
"""

from __future__ import annotations

import json

import numpy as np
from dlama_fixture import TableScorer, spec_table, write_dlama

from culture_probe.benchmarks.maps.task import scorable_target
from culture_probe.engine.types import CandidateScores
from culture_probe.runner import run


def test_runs_with_provisional_dlama_templates_say_so(tmp_path):
    data = write_dlama(tmp_path / "dlama")
    both = run(
        "dlama_arab_west",
        TableScorer(spec_table()),
        data_dir=str(data),
        out=tmp_path / "both",
        progress=False,
    )
    # en: exact mLAMA strings; ar: transcribed
    assert both.config.protocol["unverified_templates"] == ["ar"]
    assert json.loads((tmp_path / "both" / "config.json").read_text())["protocol"][
        "unverified_templates"
    ] == ["ar"]
    assert "**provisional templates** for ar" in (tmp_path / "both" / "report.md").read_text()
    english = run(
        "dlama_arab_west",
        TableScorer(spec_table()),
        data_dir=str(data),
        language="en",
        out=tmp_path / "en",
        progress=False,
    )
    assert english.config.protocol["unverified_templates"] == []
    assert "provisional templates" not in (tmp_path / "en" / "report.md").read_text()


class EchoScorer:
    """A causal stand-in: letter "a" always wins; every generation is `reply`."""

    kind, identity = "causal", "echo"

    def __init__(self, reply: str):
        self.reply = reply

    def score(self, requests, options=None):
        return [
            CandidateScores(
                r.candidates,
                np.array([-1.0 - i for i in range(len(r.candidates))]),
                np.ones(len(r.candidates), dtype=int),
            )
            for r in requests
        ]

    def generate(self, prompts, options):
        return [self.reply] * len(prompts)


MAPS_ROW = {
    "language": "en",
    "conversation": 'Person 1: "Sign now?" Person 2: "Look first."',
    "answer1": "Think first.",
    "answer2": "Do not think first.",
    "is_figurative": True,
    "label": 0,
}


def test_a_memorisation_target_of_punctuation_only_is_not_scored(tmp_path):
    rows = [
        {**MAPS_ROW, "id": "word", "proverb": "Look before you leap"},
        {**MAPS_ROW, "id": "punct", "proverb": "Look before you leap !"},
    ]  # last "word" is "!"
    assert not scorable_target("!") and not scorable_target("?!.") and scorable_target("leap.")
    result = run("maps_en", EchoScorer(" nothing"), rows=rows, progress=False)
    skipped = [r for r in result.records if r["id"] == "punct" and r["tag"] == "mem_length"]
    assert "only punctuation" in skipped[0]["skipped"]
    assert not any(
        r["id"] == "punct" and r["tag"].startswith("mem") and "success" in r for r in result.records
    )
    memorisation = result.metrics["memorisation"]
    # the "!" proverb does not count as memorised
    assert memorisation["n"] == 1 and memorisation["union"] == 0.0
    assert result.metrics["subsets"]["not_memorised"]["n"] == 2


def test_smoke_runs_of_one_culture_or_one_item_write_metrics_and_report(tmp_path):
    data = write_dlama(tmp_path / "dlama")
    dlama = run(
        "dlama_arab_west",
        TableScorer(spec_table()),
        data_dir=str(data),
        language="en",
        limit=1,
        out=tmp_path / "dlama_run",
        progress=False,
    )
    # one fact: one culture, and no comparison computed from one side
    assert len(dlama.metrics["en"]["cultures"]) == 1 and "comparison" not in dlama.metrics["en"]
    maps = run(
        "maps_en",
        EchoScorer(" leap"),
        rows=[{**MAPS_ROW, "id": "one", "proverb": "Look before you leap"}],
        limit=1,
        out=tmp_path / "maps_run",
        progress=False,
    )
    assert (
        maps.metrics["subsets"]["figurative"]["n"] == 1
        and maps.metrics["subsets"]["non_figurative"]["n"] == 0
    )
    for name in ("dlama_run", "maps_run"):
        assert (tmp_path / name / "metrics.json").is_file() and (
            tmp_path / name / "report.md"
        ).is_file()
