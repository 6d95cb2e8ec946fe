"""`culture-probe compare`: numbers lined up with their intervals, paired differences of runs on the
same facts (a model that knows the facts against one that guesses) whose interval and p-value come
from one named procedure, refusals to pair runs on different items, notes on incomplete runs, and
the written files.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from dlama_fixture import CONTINENT_FACTS, CONTINENTS, TableScorer, write_dlama

from culture_probe.errors import CultureProbeError
from culture_probe.metrics._intervals import TANGO_CC
from culture_probe.report import compare_main, compare_runs
from culture_probe.runner import run

FACTS = CONTINENT_FACTS


def knowing() -> TableScorer:
    """Ranks each fact's gold continent first."""
    return TableScorer(
        {
            (s, c): (-0.5 if c == labels[0] else -2.0)
            for (_, s), (_, labels, _) in FACTS.items()
            for c in CONTINENTS
        }
    )


def forgetting(n: int) -> TableScorer:
    """Knows every fact but the first `n` of the Arab region, where it names the next continent."""
    forgotten = {subject for _, subject in sorted(FACTS)[:n]}
    scores = {}
    for (_, subject), (_, labels, _) in FACTS.items():
        wrong = CONTINENTS[(CONTINENTS.index(labels[0]) + 1) % 4]
        best = wrong if subject in forgotten else labels[0]
        scores.update({(subject, c): -0.5 if c == best else -2.0 for c in CONTINENTS})
    return TableScorer(scores)


def guessing() -> TableScorer:
    """Always says Europe."""
    return TableScorer(
        {(s, c): (-0.5 if c == "Europe" else -2.0) for (_, s) in FACTS for c in CONTINENTS}
    )


@pytest.fixture
def runs(tmp_path):
    data = write_dlama(tmp_path / "dlama", facts=FACTS)
    made = {}
    for name, scorer in (("knows", knowing()), ("guesses", guessing())):
        made[name] = tmp_path / name
        run(
            "dlama_arab_west",
            scorer,
            data_dir=str(data),
            out=made[name],
            progress=False,
            language="en",
        )
    return data, made


def test_knowing_beats_guessing_paired_on_the_same_facts(runs):
    _, made = runs
    comparison = compare_runs([made["knows"], made["guesses"]])
    overall = next(p for p in comparison.paired if p["group"] == "overall")
    # the guesser is right on the 6 Europe facts of 24: 25 points against 100
    assert overall["difference"] == pytest.approx(25.0 - 100.0) and overall["n"] == 24
    assert overall["ci_high"] < 0 and overall["p_value"] < 0.001
    by_culture = {p["group"]: p for p in comparison.paired if p["group"].startswith("culture=")}
    assert set(by_culture) == {"culture=arab", "culture=west"}
    rows = {(r[0], r[1]): r[2:] for r in comparison.table.rows}
    # 24 of 24 is not certainty
    assert rows[("overall", "p1")][0].startswith("100.00 [86.20, 100.00] (n=24)")
    assert rows[("overall", "p1")][1].startswith("25.00 [")
    text = comparison.markdown()
    assert (
        "Paired differences (run minus knows, same items" in text
        and "| guesses | p1 | overall | -75.00 |" in text
    )


def test_the_paired_interval_and_p_value_never_contradict_and_name_their_procedure(runs, tmp_path):
    """A DLAMA compare printed an interval excluding 0 beside "permutation p = 0.08": a percentile
    bootstrap cannot leave the 0/n boundary. 4 facts forgotten of 24 is that case (the old
    procedure: [-33.3, -4.2], p = 0.14).
    """
    data, made = runs
    run(
        "dlama_arab_west",
        forgetting(4),
        data_dir=str(data),
        out=tmp_path / "forgets",
        progress=False,
        language="en",
    )
    comparison = compare_runs([made["knows"], tmp_path / "forgets"])
    for row in comparison.paired:
        excludes_zero = row["ci_low"] is not None and (row["ci_low"] > 0 or row["ci_high"] < 0)
        assert excludes_zero == (row["p_value"] < 0.05) and row["method"] == TANGO_CC, row
    overall = next(p for p in comparison.paired if p["group"] == "overall")
    assert overall["difference"] == pytest.approx(-100 * 4 / 24)
    assert comparison.procedures == {"p1": TANGO_CC} and comparison.to_json()[
        "paired_procedures"
    ] == {"p1": TANGO_CC}
    assert (
        f"p1: {TANGO_CC}" in comparison.markdown()
        and "excludes 0 exactly when p < 0.05" in comparison.markdown()
    )


def test_a_run_paired_with_itself_differs_by_nothing(runs):
    _, made = runs
    comparison = compare_runs([made["knows"], made["knows"].parent / "knows"])
    overall = next(p for p in comparison.paired if p["group"] == "overall")
    assert (overall["difference"], overall["p_value"]) == (0.0, 1.0)
    # agreeing on 24 facts still leaves a difference open
    assert overall["ci_low"] < 0 < overall["ci_high"]
    # a zero is shown by the one rounding rule of its scale (percent: 2 decimals), like every other
    # number
    assert "| p1 | overall | 0.00 | [-" in comparison.markdown()


def test_runs_on_different_items_are_not_paired_unless_asked(runs, tmp_path):
    data, made = runs
    run(
        "dlama_arab_west",
        knowing(),
        data_dir=str(data),
        out=tmp_path / "subset",
        progress=False,
        language="en",
        limit=6,
        seed=3,
    )
    with pytest.raises(CultureProbeError, match="probed different units.*--unpaired") as refused:
        compare_runs([made["guesses"], tmp_path / "subset"])
    # the 18 facts the subset left out are named as the first run's, not the other way round
    assert "(0 only in subset, " in str(refused.value) and "; 18 only in guesses, " in str(
        refused.value
    )
    unpaired = compare_runs([made["guesses"], tmp_path / "subset"], paired=False)
    assert unpaired.paired == () and ("overall", "p1") in {
        (r[0], r[1]) for r in unpaired.table.rows
    }


def test_incomplete_runs_and_other_configs_are_named(runs, tmp_path):
    _, made = runs
    # as if interrupted: the numbers come from its records
    (made["guesses"] / "metrics.json").unlink()
    comparison = compare_runs([made["knows"], made["guesses"]])
    assert any("guesses is INCOMPLETE 24/24" in note for note in comparison.notes)
    other = tmp_path / "other"
    other.mkdir()
    config = json.loads((made["knows"] / "config.json").read_text())
    (other / "config.json").write_text(
        json.dumps({**config, "config": "dlama_arab_west_corrected"})
    )
    (other / ".culture_probe_run").write_text("")
    for name in ("items.jsonl", "metrics.json"):
        (other / name).write_text((made["knows"] / name).read_text())
    mixed = compare_runs([made["knows"], other])
    assert mixed.paired == () and any("different configs" in note for note in mixed.notes)


def test_compare_writes_markdown_json_and_the_plot(runs, tmp_path, capsys):
    _, made = runs
    out = tmp_path / "cmp"
    assert (
        compare_main(
            SimpleNamespace(
                run_dirs=[str(made["knows"]), str(made["guesses"])], out=str(out), unpaired=False
            )
        )
        == 0
    )
    assert "| group | metric | knows | guesses |" in capsys.readouterr().out
    saved = json.loads((out / "compare.json").read_text())
    assert saved["metric"] == "p1" and saved["headlines"]["guesses"]["value"] == 25.0
    assert (out / "compare.png").read_bytes()[:4] == b"\x89PNG" and (
        out / "compare.pdf"
    ).read_bytes()[:4] == b"%PDF"
    # the headline comparison first
    assert (out / "compare.md").read_text().startswith("**Headline**: p1 overall")


def test_compare_needs_two_runs(runs):
    with pytest.raises(CultureProbeError, match="at least two run directories"):
        compare_runs([runs[1]["knows"]])


SUITE_CONFIGS = ("dlama_arab_west", "dlama_arab_west_corrected", "dlama_arab_west_raw")


@pytest.fixture
def suites(tmp_path, monkeypatch):
    """Two models' suites on the same facts: the knower's runs three configs, the guesser's two of
    them (no figures: they have their own tests).
    """
    import shutil

    from culture_probe.runner.suite import run_suite

    for module in ("markdown", "summary"):
        monkeypatch.setattr(
            f"culture_probe.report.{module}.available", lambda name: name != "matplotlib"
        )

    data = write_dlama(tmp_path / "dlama", facts=FACTS)
    shutil.copytree(data / "arab-west" / "dlama", data / "arab-west" / "dlama_raw")
    made = {}
    for name, scorer, configs in (
        ("knows", knowing(), SUITE_CONFIGS),
        ("guesses", guessing(), SUITE_CONFIGS[:2]),
    ):
        made[name] = tmp_path / name
        run_suite(
            list(configs), scorer, data_dir=str(data), out=made[name], progress=False, language="en"
        )
    return made


def test_two_suites_are_compared_config_by_config_in_one_report_with_one_holm_family(
    suites, tmp_path, capsys
):
    """`compare SUITE_A SUITE_B` read the suites as runs and refused; users ran one `compare` per
    config (23 for the five benchmarks), each with its own Holm family.
    """
    from culture_probe.cli import main
    from culture_probe.metrics.compare import holm

    out = tmp_path / "cmp"
    assert main(["compare", str(suites["knows"]), str(suites["guesses"]), "--out", str(out)]) == 0
    saved = json.loads((out / "compare.json").read_text(encoding="utf-8"))
    assert saved["suites"] == ["knows", "guesses"]
    assert list(saved["configs"]) == list(SUITE_CONFIGS[:2])
    assert saved["left_out"] == {"dlama_arab_west_raw": "only in knows; no run in guesses"}
    rows = [row for config in saved["configs"].values() for row in config["paired"]]
    # one family across both configs: each p adjusted over every row, none planned
    assert [row["p_holm"] for row in rows] == holm(row["p_value"] for row in rows)
    assert saved["multiplicity"]["tests"] == len(rows) > 2 and not any(
        row["planned"] for row in rows
    )
    single = compare_runs(
        [suites["knows"] / SUITE_CONFIGS[0], suites["guesses"] / SUITE_CONFIGS[0]]
    )
    stricter = [row["p_holm"] for row in saved["configs"][SUITE_CONFIGS[0]]["paired"]]
    assert all(
        s >= (p["p_holm"] or p["p_value"]) for s, p in zip(stricter, single.paired, strict=True)
    )
    text = capsys.readouterr().out
    assert (
        "| dlama_arab_west | p1 | 100.00 [" in text and "| dlama_arab_west_corrected | p1 |" in text
    )
    assert "- **left out**: dlama_arab_west_raw: only in knows; no run in guesses" in text
    assert (
        f"their {len(rows)} paired tests (every row above, each config's headline included) are one family"
        in text
    )
    assert (out / "compare.md").read_text(encoding="utf-8") == text.split("wrote ")[0]


def test_a_suite_and_a_run_are_not_compared_together(suites):
    from culture_probe.report.compare_suites import compare_folders

    with pytest.raises(
        CultureProbeError, match=r"run directories or suite folders, not both: .*knows is a suite"
    ):
        compare_folders([suites["knows"], suites["guesses"] / SUITE_CONFIGS[0]])
