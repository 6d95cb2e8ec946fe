"""X-FaKT's upstream profile (`--protocol upstream`) against a minimal restatement of the released
code.

Upstream is kmrtanmay/X_FaKT@57ca068e (line numbers as in the audit of the released code, sections 4
and 6):

- `src/eval.py:55-64`: per question language, the share of judge outputs holding "[4]" for each
  country, rounded with the built-in `round(x, 2)`; `:67-83`: the associated (diagonal) and other
  cells, `np.mean`, `np.std` (ddof 0) and `scipy.stats.ttest_ind(off_diagonal, diagonal)`, all on
  those rounded cells; `:84-86`: FRS, KTS and their harmonic mean.
- `src/factual_gen.py:30-31` (`incontext_gen.py:29-30`, `counter_factual_gen.py:29-30`): the reply
  is stripped, every copy of the question deleted, and stripped again; `src/llm_eval.py:26-27` does
  the same to the judge's output with the judge's prompt.

`upstream_cells`, `upstream_scores` and `upstream_reply` restate that logic in our own words, as
small as it goes; the library's metric and task run with the upstream profile's options
(`XfaktTask.options_for("upstream", ...)`) and must agree with them, and each test also shows what
the default profile gives instead. The double BOS (X1) is run end to end in
tests/benchmarks/xfakt/test_xfakt_protocol.py; here only the profile's probes are checked.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from test_xfakt_protocol import rows_of, xtask

from culture_probe.benchmarks.xfakt.metrics import ASSOCIATIONS, xfakt
from culture_probe.benchmarks.xfakt.task import XfaktTask
from culture_probe.data.registry import load_benchmark
from culture_probe.runner import run
from culture_probe.tasks.probes import Record

WRONG = {  # specs/xfakt.md 5.2: errors out of 7 facts per (question language, country)
    ("en", "United States"): 0,
    ("en", "Japan"): 1,
    ("en", "Kenya"): 3,
    ("ja", "United States"): 2,
    ("ja", "Japan"): 0,
    ("ja", "Kenya"): 4,
    ("sw", "United States"): 1,
    ("sw", "Japan"): 3,
    ("sw", "Kenya"): 1,
}


# ---------------------------------------------------------------- upstream, restated


def upstream_cells(wrong: dict, asked: dict) -> tuple[np.ndarray, np.ndarray]:
    """eval.py: each cell's error share rounded to 2 decimals; (off-diagonal, diagonal) cells."""
    cells = {cell: round(wrong[cell] / asked[cell], 2) for cell in asked}
    off = np.array([e for (lang, country), e in cells.items() if ASSOCIATIONS[lang] != country])
    diag = np.array([e for (lang, country), e in cells.items() if ASSOCIATIONS[lang] == country])
    return off, diag


def upstream_scores(wrong: dict, asked: dict) -> dict:
    """eval.py's numbers, every one from the rounded cells."""
    off, diag = upstream_cells(wrong, asked)
    with warnings.catch_warnings():  # constant cells: scipy warns and returns nan
        warnings.simplefilter("ignore", RuntimeWarning)
        t, p = stats.ttest_ind(off, diag)
    mean_non, mean_assoc = np.mean(off), np.mean(diag)
    frs = 1.5 * (1 / (mean_non + mean_assoc + 1) - 1 / 3)
    kts = 2 * (1 / (abs(mean_non - mean_assoc) + 1) - 1 / 2)
    return {
        "mu_assoc": mean_assoc,
        "mu_non": mean_non,
        "std_assoc": 100 * np.std(diag),
        "std_non": 100 * np.std(off),
        "t": t,
        "p": p,
        "frs": frs,
        "kts": kts,
        "xfakt": 2 * frs * kts / (frs + kts),
    }


def upstream_reply(generated: str, prompt: str) -> str:
    """factual_gen.py / llm_eval.py: strip, delete every copy of the prompt, strip."""
    return generated.strip().replace(prompt, "").strip()


# ---------------------------------------------------------------- the library with each profile


def records_of(wrong: dict, asked: dict) -> list[Record]:
    """Graded answer records: `wrong[cell]` of the `asked[cell]` questions of each cell answered
    wrongly.
    """
    return [
        Record(
            f"{lang}-{country}-{i}",
            "",
            "answer",
            {
                "language": lang,
                "country": country,
                "correct": i >= wrong[(lang, country)],
                "verdict": "x",
            },
            kind="generate",
        )
        for (lang, country), n in asked.items()
        for i in range(n)
    ]


def metrics_with(protocol: str, wrong: dict, asked: dict, kind: str = "causal") -> dict:
    options = XfaktTask.options_for(protocol, {"judge": "string"}, kind)
    return XfaktTask("xfakt_factual_recall", options, kind=kind).compute_metrics(
        records_of(wrong, asked)
    )


def library_view(metrics: dict) -> dict:
    """The library's numbers under the names of `upstream_scores`."""
    return {
        "mu_assoc": metrics["mu_assoc"],
        "mu_non": metrics["mu_non"],
        "std_assoc": metrics["assoc_error"]["std"],
        "std_non": metrics["non_assoc_error"]["std"],
        "t": metrics["t_statistic"],
        "p": metrics["p_value"],
        **{k: metrics[k] for k in ("frs", "kts", "xfakt")},
    }


def test_the_profiles_options_and_what_upstream_never_did():
    assert XfaktTask.profile("upstream", "causal") == {
        "double_bos": True,
        "round_cells": True,
        "round_statistics": True,
        "strip_echo": True,
    }
    # aya-101 (seq2seq) ran through HF on the raw question, with no echo removal: only the scorer
    # applies
    assert XfaktTask.profile("upstream", "seq2seq") == {
        "round_cells": True,
        "round_statistics": True,
    }
    # eval.py:16-18 defines tier lists but never uses them: the upstream profile adds no tier
    # breakdown of its own
    assert XfaktTask.options_for("upstream", {}, "causal").tiers == "paper"


def test_worked_example_statistics_are_upstreams_rounded_cells():
    asked = dict.fromkeys(WRONG, 7)
    upstream = upstream_scores(WRONG, asked)
    # the audit's numbers (section 6): std 6.5997 / 15.8815 %, t 2.6454, p 0.0332
    assert (upstream["std_assoc"], upstream["std_non"]) == (
        pytest.approx(6.5997, abs=1e-4),
        pytest.approx(15.8815, abs=1e-4),
    )
    assert (upstream["t"], upstream["p"]) == (
        pytest.approx(2.6454, abs=1e-4),
        pytest.approx(0.0332, abs=1e-4),
    )
    assert library_view(metrics_with("upstream", WRONG, asked)) == pytest.approx(
        upstream, rel=1e-12
    )
    # the default: the same FRS, KTS and X-FaKT, the statistics from unrounded cells (spec 5.1)
    default = library_view(metrics_with("default", WRONG, asked))
    for key in ("mu_assoc", "mu_non", "frs", "kts", "xfakt"):
        assert default[key] == pytest.approx(upstream[key], rel=1e-12)
    assert [round(default[k], 4) for k in ("std_assoc", "std_non", "t", "p")] == [
        6.7344,
        15.7935,
        2.6458,
        0.0331,
    ]
    assert [round(upstream[k], 6) for k in ("frs", "kts", "xfakt")] == [
        0.586957,
        0.554404,
        0.570216,
    ]


@st.composite
def tables(draw):
    """A square table like upstream's: some question languages, each with its own country and the
    others'.
    """
    languages = draw(
        st.lists(st.sampled_from(sorted(ASSOCIATIONS)), min_size=2, max_size=6, unique=True)
    )
    cells = [(lang, ASSOCIATIONS[other]) for lang in languages for other in languages]
    asked = {cell: draw(st.integers(1, 9)) for cell in cells}
    wrong = {cell: draw(st.integers(0, n)) for cell, n in asked.items()}
    return wrong, asked


@settings(max_examples=60, deadline=None)
@given(tables())
def test_random_tables_score_as_upstreams_eval(table):
    wrong, asked = table
    languages = [lang for lang, _ in asked]
    columns = {"correct": [], "language": [], "country": []}
    for (lang, country), n in asked.items():
        columns["correct"] += [i >= wrong[(lang, country)] for i in range(n)]
        columns["language"] += [lang] * n
        columns["country"] += [country] * n
    upstream = upstream_scores(wrong, asked)
    # the scorer's options are the same for every kind upstream ran
    for kind in ("causal", "seq2seq"):
        options = XfaktTask.options_for("upstream", {}, kind)
        ours = library_view(
            xfakt(
                **columns,
                associations={lang: ASSOCIATIONS[lang] for lang in languages},
                round_cells=options.round_cells,
                round_statistics=options.round_statistics,
            )
        )
        if math.isfinite(upstream["t"]):
            assert (ours["t"], ours["p"]) == (
                pytest.approx(upstream["t"], rel=1e-9),
                pytest.approx(upstream["p"], rel=1e-9, abs=1e-15),
            )
        else:  # constant cells: upstream's t is nan (or inf); the library says it is undefined
            assert (ours["t"], ours["p"]) == (None, None)
        for key in ("mu_assoc", "mu_non", "std_assoc", "std_non", "frs", "kts", "xfakt"):
            assert ours[key] == pytest.approx(upstream[key], rel=1e-9, abs=1e-12), key
    # the default moves only the statistics: FRS, KTS and X-FaKT are upstream's either way
    default = library_view(
        xfakt(**columns, associations={lang: ASSOCIATIONS[lang] for lang in languages})
    )
    for key in ("frs", "kts", "xfakt"):
        assert default[key] == pytest.approx(upstream[key], rel=1e-9, abs=1e-12)


# ---------------------------------------------------------------- replies (X9) and the double BOS
# (X1)


@pytest.mark.parametrize(
    "generated",
    [
        "{q}\nUnited States",
        "  {q}  United States ",
        "United States. {q}",
        "{q}{q}",
        "United States",
        " {q} ",
    ],
)
def test_an_echoed_question_is_deleted_from_the_reply_as_upstream(xfakt_release, generated):
    rows = rows_of(xfakt_release, "New York", languages=("en",))
    output = generated.format(q=rows[0]["question"])
    upstream = xtask(xfakt_release, judge="string", **XfaktTask.profile("upstream", "causal"))
    default = xtask(xfakt_release, judge="string")
    (probe,) = upstream.build_probes(rows)
    assert upstream.to_record(probe, output)["reply"] == upstream_reply(output, rows[0]["question"])
    default.build_probes(rows)
    assert default.to_record(probe, output)["reply"] == output.strip()


def test_an_echo_can_decide_the_verdict(xfakt_release):
    # in-context questions name both people: an echo puts the wrong one first for the string judge
    rows = list(
        load_benchmark("xfakt_in_context", data_dir=str(xfakt_release))["test"].select(range(2))
    )
    row = rows[1]
    output = f"{row['question']} {row['answer']}"
    upstream = xtask(
        xfakt_release, "xfakt_in_context", judge="string", **XfaktTask.profile("upstream", "causal")
    )
    default = xtask(xfakt_release, "xfakt_in_context", judge="string")
    probe = upstream.build_probes(rows)[1]
    default.build_probes(rows)
    assert upstream.to_record(probe, output)["correct"] is True
    assert default.to_record(probe, output)["correct"] is False


def test_the_judges_echoed_prompt_is_deleted_before_reading_the_verdict(xfakt_release):
    answer = Record(
        "fr-000-en",
        "",
        "answer",
        {
            "gold": "United States",
            "reply": "See [4]: United States",
            "question": "In which country is New York located?",
        },
        kind="generate",
    )
    upstream = xtask(xfakt_release, **XfaktTask.profile("upstream", "causal"))
    default = xtask(xfakt_release)
    (probe,) = upstream.build_probes([], stage="judge", previous=[answer])
    # the reply inside the echoed prompt holds "[4]"
    output = "Echo:" + probe.prompt + "Rating: [[1]]"
    assert upstream_reply(output, probe.prompt) == "Echo:Rating: [[1]]"
    assert upstream.to_record(probe, output, stage="judge")["judge_output"] == "Echo:Rating: [[1]]"
    assert upstream.to_record(probe, output, stage="judge")["correct"] is True
    assert default.to_record(probe, output, stage="judge")["correct"] is False
    # the rubric starts with a newline, which the first strip takes off an echo at the very start:
    # upstream then finds no copy of the prompt to delete, and neither does the library
    at_start = probe.prompt + "Rating: [[1]]"
    assert upstream_reply(at_start, probe.prompt) == at_start.strip()
    assert upstream.to_record(probe, at_start, stage="judge")["correct"] is False


def test_the_profile_doubles_the_bos_of_chat_prompts_only(xfakt_release):
    rows = rows_of(xfakt_release, "New York", languages=("en",))
    causal = xtask(xfakt_release, **XfaktTask.profile("upstream", "causal")).build_probes(rows)
    seq2seq = xtask(
        xfakt_release, kind="seq2seq", **XfaktTask.profile("upstream", "seq2seq")
    ).build_probes(rows)
    default = xtask(xfakt_release).build_probes(rows)
    # vLLM tokenised the templated string with BOS again
    assert causal[0].options.add_special_tokens is True
    assert (
        seq2seq[0].options.add_special_tokens is None
        and default[0].options.add_special_tokens is None
    )


class _Echo:
    """A duck-typed causal scorer that repeats the question, then answers (no model needed)."""

    kind, identity = "causal", "echo"

    def generate(self, prompts, options):
        return [f"{prompt}\nUnited States" for prompt in prompts]


def test_an_upstream_run_records_each_side(xfakt_release, tmp_path):
    rows = rows_of(xfakt_release, "New York", languages=("en",))
    results = {
        protocol: run(
            "xfakt_factual_recall",
            _Echo(),
            rows=rows,
            judge="string",
            progress=False,
            data_dir=str(xfakt_release),
            protocol=protocol,
            out=tmp_path / protocol,
        )
        for protocol in ("default", "upstream")
    }
    assert results["upstream"].records[0]["reply"] == "United States"
    assert results["default"].records[0]["reply"] == f"{rows[0]['question']}\nUnited States"
    sides = {p: {d["id"]: d["side"] for d in r.config.deviations} for p, r in results.items()}
    assert {i for i, side in sides["upstream"].items() if side == "upstream"} == {"X1", "X8", "X9"}
    assert set(sides["default"].values()) == {"default"}
    # the deviations without an upstream side say why, in config.json and the report
    x4 = next(d for d in results["upstream"].config.deviations if d["id"] == "X4")
    assert x4["upstream"].startswith("no upstream side: the engine generates with HF transformers")
    assert "| X9 |" in (tmp_path / "upstream" / "report.md").read_text()
