"""Tables of several p-values say how many tests they hold and give Holm-adjusted p-values beside
the raw ones (issue 34, item 4): compare's paired rows (the headline metric overall is the planned
row, not adjusted; a stratum of one unit has no row and is counted under the table), and DLAMA's
culture gap per prompt language. Every p-value is printed by `format_p` (item 5).
"""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import pytest
from dlama_fixture import CONTINENT_FACTS, CONTINENTS, TableScorer, write_dlama

from culture_probe.benchmarks.dlama.report import comparison_text
from culture_probe.metrics.compare import holm
from culture_probe.metrics.display import format_p, p_clause
from culture_probe.report import compare_main, compare_runs
from culture_probe.report.compare import PLANNED
from culture_probe.runner import run

FACTS = CONTINENT_FACTS
# one more predicate with a single fact: its stratum has one unit
LONE = {
    "sub_uri": "Q900",
    "obj_uri": ["Q79"],
    "sub_label": "Cairo",
    "obj_label": ["Egypt"],
    "country": ["Q79"],
}


def scorer(answer) -> TableScorer:
    """Ranks first the continent `answer(gold)` gives for each fact (and Egypt for the lone
    fact).
    """
    table = {
        (s, c): (-0.5 if c == answer(labels[0]) else -2.0)
        for (_, s), (_, labels, _) in FACTS.items()
        for c in CONTINENTS
    }
    return TableScorer({**table, ("Cairo", "Egypt"): -0.5})


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("multiplicity")
    data = write_dlama(root / "dlama", facts=FACTS)
    lone = {**LONE, "size": 5, "uuid": "P17_general_ARAB_REGION_0"}
    (data / "arab-west/dlama/en/P17_general_ARAB_REGION.jsonl").write_text(
        json.dumps(lone) + "\n", encoding="utf-8"
    )
    made = {}
    for name, answer in (("knows", lambda gold: gold), ("guesses", lambda gold: "Europe")):
        made[name] = root / name
        run(
            "dlama_arab_west",
            scorer(answer),
            data_dir=str(data),
            out=made[name],
            progress=False,
            language="en",
        )
    return made


def test_paired_rows_but_the_planned_one_are_holm_adjusted_and_the_table_counts_its_tests(
    runs, tmp_path
):
    """compare.md printed ~45 per-stratum p-values for DLAMA with no correction and no sentence
    saying so, a row of blanks for each stratum of one fact, and a one-language run's strata that
    repeat another row's units.
    """
    comparison = compare_runs([runs["knows"], runs["guesses"]])
    planned, *others = comparison.paired
    assert (planned["group"], planned["metric"], planned["planned"], planned["p_holm"]) == (
        "overall",
        "p1",
        True,
        None,
    )
    assert others and not any(row["planned"] for row in others)
    assert [row["p_holm"] for row in others] == holm([row["p_value"] for row in others])
    assert all(row["p_holm"] >= row["p_value"] for row in others)
    # the lone P17 fact: no row of its own, counted once
    assert "predicate=P17" not in {
        row["group"] for row in comparison.paired
    } and comparison.one_unit == ("predicate=P17",)
    assert comparison.tests == {"guesses": len(others)}
    text = comparison.markdown()
    assert "| run | metric | group | difference | 95% CI | p | p (Holm) | n |" in text
    assert "| guesses | p1 | overall | -72.00 | " in text and f"| {PLANNED} | 25 |" in text
    assert (
        f"one family of exploratory tests (guesses: {len(others)} tests)" in text
        and "not adjusted" in text
    )
    assert (
        "Not listed: 1 stratum of a single unit (predicate: 1): a paired test needs at least two units."
        in text
    )
    # a one-language run's language=en is overall again, and en/arab is culture=arab: the same test
    # is not counted twice
    repeats = {
        "language=en": "overall",
        "language_culture=en/arab": "culture=arab",
        "language_culture=en/west": "culture=west",
    }
    assert dict(comparison.repeats) == repeats and not set(repeats) & {
        row["group"] for row in comparison.paired
    }
    assert [row["group"] for row in others] == ["culture=arab", "culture=west", "predicate=P30"]
    assert (
        "the same test as an earlier row: language=en (as overall), language_culture=en/arab (as culture=arab)"
        in text
    )
    for row in others:
        assert f"| {format_p(row['p_value'])} | {format_p(row['p_holm'])} | {row['n']} |" in text

    out = tmp_path / "cmp"
    compare_main(
        SimpleNamespace(
            run_dirs=[str(runs["knows"]), str(runs["guesses"])], out=str(out), unpaired=False
        )
    )
    saved = json.loads((out / "compare.json").read_text(encoding="utf-8"))
    assert (
        saved["multiplicity"]["tests"] == {"guesses": len(others)}
        and saved["multiplicity"]["planned"] == "p1 overall"
    )
    assert (
        saved["multiplicity"]["one_unit_strata"] == ["predicate=P17"]
        and "Holm" in saved["multiplicity"]["method"]
    )
    assert saved["multiplicity"]["repeated_strata"] == repeats
    assert [row["p_holm"] for row in saved["paired"]] == [None, *(row["p_holm"] for row in others)]


def test_compare_prints_p_values_on_the_right_side_of_005(runs):
    """A row at p = 0.04997 (its interval excludes 0) and one at p = 0.05001 (it does not) both
    printed 0.05.
    """
    comparison = compare_runs([runs["knows"], runs["guesses"]])
    planned, first, second, *rest = comparison.paired
    rows = (
        planned,
        {**first, "p_value": 0.04997, "p_holm": 0.0999},
        {**second, "p_value": 0.05001},
        *rest,
    )
    text = replace(comparison, paired=rows).markdown()
    assert "| 0.04997 | 0.0999 |" in text and "| 0.05001 |" in text and "| 0.05 |" not in text


def test_dlamas_culture_gap_per_language_is_holm_adjusted_over_the_languages(tmp_path):
    data = write_dlama(tmp_path / "dlama", facts=FACTS)
    result = run(
        "dlama_arab_west",
        scorer(lambda gold: gold if gold != "Africa" else "Asia"),
        data_dir=str(data),
        out=tmp_path / "run",
        progress=False,
    )
    gaps = [result.metrics[language]["comparison"] for language in ("ar", "en")]
    assert [g["p_holm"] for g in gaps] == holm([g["p_value"] for g in gaps]) and {
        g["n_tests"] for g in gaps
    } == {2}
    report = (tmp_path / "run" / "report.md").read_text(encoding="utf-8")
    for gap in gaps:
        sentence = comparison_text(gap)
        assert (
            sentence in report
            and "over this run's 2 culture gaps, one per prompt language" in sentence
        )
        assert (
            p_clause(gap["p_holm"], "Holm-adjusted p") in sentence
            and p_clause(gap["p_value"]) in sentence
        )


def test_a_tiny_culture_gap_p_value_is_not_printed_as_0():
    """The DLAMA report printed "p = 0" for p = 3.3e-09 (4 decimals, trailing zeros dropped)."""
    gap = {
        "a": "arab",
        "b": "west",
        "difference": 100.0,
        "ci_low": 80.2,
        "ci_high": 100.0,
        "p_value": 3.3e-09,
        "method": "Miettinen-Nurminen score interval; p: its score test at 0",
    }
    sentence = comparison_text(gap)
    # one language: one test
    assert "p < 0.0001;" in sentence and "p = 0" not in sentence and "Holm" not in sentence
    assert "p = 0.0500" in comparison_text({**gap, "p_value": 0.05})
    assert "95% interval < 0.01 to 100.00" in comparison_text({**gap, "ci_low": 0.002})
