"""Consistency across a run's languages: RankC from the ranking prefixes records keep equals RankC
of the whole rankings (within the stated bound), and every pair of languages gets its agreement,
RankC and what it left out.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from culture_probe.errors import MetricInputError
from culture_probe.metrics import rankc
from culture_probe.metrics.consistency import (
    RANKING_DEPTH,
    AlignedAnswer,
    language_consistency,
    prefix_rankc,
)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 400), seed=st.integers(0, 2**32 - 1), shared_top=st.integers(0, 25))
def test_rankc_from_the_kept_prefixes_is_within_its_bound_of_rankc_of_the_whole_rankings(
    n, seed, shared_top
):
    rng = np.random.default_rng(seed)
    a = [f"Q{i}" for i in rng.permutation(n)]
    b = a[: min(shared_top, n)] + [a[i] for i in rng.permutation(range(min(shared_top, n), n))]
    whole = rankc([a], [b])["value"]
    prefix = prefix_rankc(a[:RANKING_DEPTH], b[:RANKING_DEPTH], n)
    if n <= RANKING_DEPTH:
        assert prefix == pytest.approx(whole, abs=1e-15)
    assert abs(prefix - whole) <= 1.1e-9


def test_a_short_prefix_is_as_far_off_as_its_unknown_depths_weigh():
    a = [f"Q{i}" for i in range(50)]
    reverse = a[::-1]
    for k in (1, 3, 5):
        tail = 1 - sum(np.exp(-np.arange(k))) / sum(np.exp(-np.arange(50)))
        assert (
            abs(prefix_rankc(a[:k], reverse[:k], 50) - rankc([a], [reverse])["value"])
            <= tail / 2 + 1e-12
        )


def _answers(language, outcomes, rankings, candidates=None):
    return [
        AlignedAnswer(language, fact, right, tuple(ranking), candidates or len(ranking))
        for (fact, right), ranking in zip(outcomes.items(), rankings, strict=True)
    ]


def test_each_pair_of_languages_gets_agreement_and_rankc_on_its_shared_facts():
    en = _answers(
        "en",
        {"f1": True, "f2": True, "f3": False, "f4": True},
        [["a", "b"], ["x", "y", "z"], ["p", "q"], ["m", "n"]],
    )
    ar = _answers(
        "ar",
        {"f1": True, "f2": False, "f3": False, "f5": True},
        [["a", "b"], ["y", "x", "z"], ["q", "p"], ["s", "t"]],
    )
    es = _answers("es", {"f1": False, "f2": True}, [["b", "a"], ["x", "y", "z", "w"]])
    out = language_consistency([*en, *ar, *es], languages=["en", "ar", "es"])
    assert list(out["by_language_pair"]) == ["en/ar", "en/es", "ar/es"]

    en_ar = out["pairs"]["en/ar"]
    assert (
        en_ar["n"],
        en_ar["both_right"],
        en_ar["right_only_a"],
        en_ar["right_only_b"],
        en_ar["both_wrong"],
    ) == (
        3,
        1,
        1,
        0,
        1,
    )
    assert en_ar["unpaired"] == {"only_a": 1, "only_b": 1}
    expected = rankc(
        [["a", "b"], ["x", "y", "z"], ["p", "q"]], [["a", "b"], ["y", "x", "z"], ["q", "p"]]
    )
    estimates = out["by_language_pair"]["en/ar"]
    assert estimates["rankc"]["value"] == pytest.approx(100 * expected["value"])
    assert estimates["rankc"]["n"] == 3
    assert (
        estimates["both_right"]["value"] == pytest.approx(100 / 3)
        and estimates["both_right"]["n"] == 3
    )
    assert estimates["both_right"]["ci_low"] < 100 / 3 < estimates["both_right"]["ci_high"]

    # f2's candidate sets differ in size: agreement counts it, RankC leaves it out
    en_es = out["pairs"]["en/es"]
    assert en_es["rankc_facts"] == 1 and en_es["rankc_left_out"]["candidate sets differ"] == 1
    assert out["by_language_pair"]["en/es"]["rankc"]["n"] == 1
    assert out["methods"]["both_right"] == "Wilson score interval"


def test_identical_answers_in_two_languages_are_fully_consistent():
    outcomes = {f"f{i}": i % 3 == 0 for i in range(30)}
    rankings = [[f"c{(i + j) % 7}" for j in range(7)] for i in range(30)]
    out = language_consistency(
        [*_answers("en", outcomes, rankings), *_answers("ko", outcomes, rankings)]
    )
    pair = out["by_language_pair"]["en/ko"]
    assert pair["rankc"]["value"] == pytest.approx(100.0)
    # 30 facts all fully consistent do not make RankC certain: the bounded mean's interval reaches
    # below 100
    assert 85 < pair["rankc"]["ci_low"] < 100 == pair["rankc"]["ci_high"]
    assert out["pairs"]["en/ko"]["right_only_a"] == out["pairs"]["en/ko"]["right_only_b"] == 0
    assert out["pairs"]["en/ko"]["difference"]["difference"] == 0


def test_answers_without_rankings_get_agreement_only():
    en = [AlignedAnswer("en", f"q{i}", i % 2 == 0) for i in range(10)]
    hi = [AlignedAnswer("hi", f"q{i}", i % 4 == 0) for i in range(10)]
    out = language_consistency(en + hi)
    assert list(out["by_language_pair"]["en/hi"]) == ["both_right"]
    assert out["pairs"]["en/hi"]["rankc_left_out"] == {"candidate sets differ": 0, "not ranked": 10}


def test_one_language_or_no_shared_fact_gives_nothing_and_a_fact_twice_is_an_error():
    assert language_consistency([AlignedAnswer("en", "f1", True)]) == {}
    assert (
        language_consistency([AlignedAnswer("en", "f1", True), AlignedAnswer("ar", "f2", True)])
        == {}
    )
    with pytest.raises(MetricInputError, match="'f1' is answered twice in 'en'"):
        language_consistency([AlignedAnswer("en", "f1", True), AlignedAnswer("en", "f1", False)])


@pytest.mark.parametrize("weight", ["softmax", "norm1", "norm2"])
def test_identical_rankings_of_1_to_60_candidates_score_exactly_one(weight):
    """Weights that sum to 1 + 2e-16 in floats gave 9, 10, 12, 17, 24, ... candidates a RankC of
    1.0000000000000002, which in percent leaves the results' range [0, 100].
    """
    for n in range(1, 61):
        ids = [f"Q{k}" for k in range(n)]
        assert rankc([ids], [ids], weight=weight)["per_query"] == [1.0], n
        if weight == "softmax":
            assert prefix_rankc(ids, ids, n) == 1.0, n  # whole rankings: the exact value
            # beyond depth 20: within its bound
            prefix = prefix_rankc(ids[:RANKING_DEPTH], ids[:RANKING_DEPTH], n)
            assert 1 - 1.1e-9 <= prefix <= 1.0, n


@settings(max_examples=80, deadline=None)
@given(n=st.integers(1, 80), seed=st.integers(0, 2**32 - 1), depth=st.integers(1, 25))
def test_rankc_of_any_rankings_stays_between_0_and_1(n, seed, depth):
    rng = np.random.default_rng(seed)
    a = [f"Q{i}" for i in rng.permutation(n)]
    for b in (a, a[::-1], [a[i] for i in rng.permutation(n)]):
        assert 0.0 <= rankc([a], [b])["value"] <= 1.0
        assert 0.0 <= prefix_rankc(a[:depth], b[:depth], n) <= 1.0


def test_the_paired_differences_of_many_language_pairs_are_one_holm_family():
    """X-FaKT's 13 languages give 78 paired P@1 differences with no correction and no count: each
    pair now carries its Holm-adjusted p over the run's pairs, and the report's table says how many
    tests it holds.
    """
    from culture_probe.metrics.compare import holm
    from culture_probe.report.consistency import consistency_sections

    rng = np.random.default_rng(3)
    rates = {"a": 0.2, "b": 0.3, "c": 0.5, "d": 0.7}
    outcomes = {
        lang: {f"f{i}": bool(rng.random() < rate) for i in range(40)}
        for lang, rate in rates.items()
    }
    answers = [
        AlignedAnswer(lang, fact, right)
        for lang, facts in outcomes.items()
        for fact, right in facts.items()
    ]
    out = language_consistency(answers)
    differences = [pair["difference"] for pair in out["pairs"].values()]
    assert len(differences) == 6 and {d["n_tests"] for d in differences} == {6}
    assert [d["p_holm"] for d in differences] == holm([d["p_value"] for d in differences])
    (section,) = consistency_sections(
        {"consistency": out, "results": {"by_language_pair": out["by_language_pair"]}}
    )
    # nothing ranked: one line, not a table
    assert "are 6 tests, one per pair of languages" in section.text
    assert "the paired P@1 difference has p (Holm) < 0.05 in" in section.text and not section.tables


def test_two_runs_of_one_language_each_say_which_facts_rankc_left_out_why_and_how_to_get_all(
    tmp_path,
):
    """`consistency RUN_EN RUN_AR` of DLAMA computed RankC on 14 of 40 facts (the two runs'
    candidate sets differ where Arabic names two objects alike) and said so only as `n (RankC) 14`,
    its "not paired" column empty.
    """

    from dlama_fixture import write_dlama

    from culture_probe import run
    from culture_probe.engine.types import CandidateScores
    from culture_probe.report.consistency import consistency_of_runs

    class ByLength:
        """Ranks the candidates by their length: rankings, nothing more."""

        kind, identity = "masked", {"name_or_path": "by-length"}

        def score(self, requests, options=None):
            return [
                CandidateScores(
                    r.candidates,
                    -np.array([len(c) for c in r.candidates], float),
                    np.ones(len(r.candidates)),
                )
                for r in requests
            ]

    def facts(prefix, n, objects):
        return {
            (("ARAB_REGION", "WESTERN_COUNTRIES")[i % 2], f"{prefix}{i}"): (
                [f"Q{prefix}{i % objects}"],
                [f"{prefix}o{i % objects}"],
                [],
            )
            for i in range(n)
        }

    data = write_dlama(tmp_path / "dlama", facts("Land", 14, 4), predicate="P30")
    write_dlama(data, facts("City", 26, 5), predicate="P36")
    for path in (data / "arab-west" / "dlama" / "ar").glob(
        "P36_*.jsonl"
    ):  # two capitals named alike in Arabic
        path.write_text(
            path.read_text(encoding="utf-8").replace("Cityo1", "Cityo0"), encoding="utf-8"
        )
    for language in ("en", "ar"):
        run(
            "dlama_arab_west",
            ByLength(),
            data_dir=str(data),
            language=language,
            out=tmp_path / language,
            progress=False,
        )
    result = consistency_of_runs(tmp_path / "en", tmp_path / "ar")
    pair = result.metrics["consistency"]["pairs"]["en/ar"]
    assert (pair["n"], result.metrics["results"]["by_language_pair"]["en/ar"]["rankc"]["n"]) == (
        40,
        14,
    )
    text = result.markdown()
    row = next(line for line in text.splitlines() if line.startswith("| en/ar |"))
    assert row.endswith("| 14 | 26 left out of RankC: candidate sets differ |")
    assert (
        "RankC covers 14 of the 40 facts in both languages; it leaves out 26 whose rankings are over candidate sets"
        in text
    )
    assert (
        "probe both languages in one run (`culture-probe run dlama_arab_west ...` without `--language`)"
        in text
    )
    assert result.to_json()["how_to_get_all"] in text
    # as it says: one run of both languages ranks every fact over one aligned set
    both = run("dlama_arab_west", ByLength(), data_dir=str(data), progress=False)
    assert both.metrics["results"]["by_language_pair"]["ar/en"]["rankc"]["n"] == 40
