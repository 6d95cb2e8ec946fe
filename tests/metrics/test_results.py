"""The one results schema: estimates against scipy and by-hand statistics, strata, the macro average
(CAMeL), intervals that are honest at any n (width at 0 of n, no zero-width interval, a reason where
there is none), the sampling designs they follow (facts asked in two languages, prompts crossed with
entity samples), paired differences whose interval and p-value agree, the published JSON Schema, and
bad input.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import optimize, stats
from scipy.special import xlogy

from culture_probe.benchmarks.camel.metrics import cbs
from culture_probe.benchmarks.xfakt.metrics import (
    ASSOCIATIONS,
    GradedAnswer,
    answers_summary,
    transfer_estimates,
)
from culture_probe.errors import CultureProbeError, MetricInputError
from culture_probe.metrics._intervals import (
    BOUNDED_MEAN,
    CROSSED,
    PAIRED_CROSSED,
    SIGN_FLIP,
    TANGO_CC,
    WILSON,
    WILSON_EFFECTIVE,
)
from culture_probe.metrics.results import (
    UnitTable,
    UnitValue,
    estimate,
    paired_difference,
    summarize,
    unit_table,
)
from culture_probe.schemas import metrics_schema, validate_metrics


def _table(values, metric="p1", strata=None, macro=None):
    ids = tuple(f"u{i}" for i in range(len(values)))
    return UnitTable(metric, ids, np.asarray(values, dtype=float), strata or {}, macro)


def _hits(values, metric="p1", strata=None):
    """A P@1-like table: each unit a hit (100) or a miss (0), declared so."""
    return _table(values, metric, strata).with_scale(100.0, binary=True)


def _has_honest_interval(result):
    """Either an interval that holds its value and has width, or none with a reason."""
    if result["ci_low"] is None:
        return result["ci_high"] is None and result["no_interval"]
    return (
        result["ci_low"] <= result["value"] <= result["ci_high"]
        and result["ci_low"] < result["ci_high"]
    )


def test_a_proportion_gets_the_wilson_score_interval():
    values = np.random.default_rng(3).integers(0, 2, 400) * 100.0
    result = estimate(_hits(values))
    k = int(values.sum() / 100)
    reference = stats.binomtest(k, 400).proportion_ci(method="wilson")
    assert result["value"] == pytest.approx(values.mean()) and result["n"] == 400
    assert (result["ci_low"], result["ci_high"]) == pytest.approx(
        (100 * reference.low, 100 * reference.high)
    )
    assert result["stderr"] == pytest.approx(100 * math.sqrt(k / 400 * (1 - k / 400) / 400))


def test_dlama_with_no_fact_right_of_20_is_not_certain():
    """DLAMA, 0 of 20 correct, printed [0, 0]: the score interval reaches about 16%."""
    none_right = estimate(_hits([0.0] * 20))
    assert none_right["value"] == 0.0 and none_right["ci_low"] == 0.0
    assert none_right["ci_high"] == pytest.approx(100 * 1.96**2 / (20 + 1.96**2), abs=0.01)  # 16.1
    # 24 of 24 was stored with stderr 0 beside [86.2, 100] (lm-eval's "0.0 ± 0.0000"): the width
    # over 2z instead
    assert none_right["stderr"] == pytest.approx(
        none_right["ci_high"] / (2 * stats.norm.ppf(0.975))
    )
    all_right = estimate(_hits([100.0] * 20))
    assert all_right["ci_high"] == 100.0 and all_right["ci_low"] == pytest.approx(
        100 - none_right["ci_high"]
    )


def test_one_to_three_successes_get_the_exact_poisson_lower_limit():
    # Wilson's lower limit for 1 of 50 (0.35%) sits above a true 0.2% too often; the Poisson limit
    # is lower
    result = estimate(_hits([100.0] + [0.0] * 49))
    assert result["ci_low"] == pytest.approx(100 * stats.chi2.ppf(0.025, 2) / 100)
    assert result["ci_low"] < 100 * stats.binomtest(1, 50).proportion_ci(method="wilson").low


def test_replicated_proportions_use_the_effective_sample_size():
    # proverbs answered in three demonstration sets: a proverb's answers agree, so the 20 proverbs
    # count, not 60
    rng = np.random.default_rng(0)
    consistent = np.repeat(rng.integers(0, 2, (20, 1)) * 100.0, 3, axis=1)
    result = estimate(_table(consistent).with_scale(100, binary=True))
    k = consistent[:, 0].sum() / 100
    per_proverb = stats.binomtest(int(k), 20).proportion_ci(method="wilson")
    assert result["ci_high"] - result["ci_low"] >= 100 * (per_proverb.high - per_proverb.low) - 1e-9
    none_right = estimate(_table(np.zeros((20, 3))).with_scale(100, binary=True))
    assert none_right["ci_low"] == 0.0 and none_right["ci_high"] == pytest.approx(
        100 * _wilson(0.0, 20)[1]
    )


def test_five_proverbs_with_no_right_answer_get_the_interval_of_five_not_of_two_and_a_half():
    """5 proverbs x 3 demonstration sets at p = 0.05 gave intervals 0.65 wide: with no success the
    answers' correlation is unknown, so the 5 proverbs count (Wilson's 0 of 5: [0, 43.4]), and the
    degrees-of-freedom shrinkage, which corrects an estimated variance, no longer halves them again.
    """
    result = estimate(_table(np.zeros((5, 3))).with_scale(100, binary=True))
    assert result["ci_high"] == pytest.approx(100 * 1.96**2 / (5 + 1.96**2), abs=0.01)
    assert result["ci_low"] == 0.0


def test_replicates_average_like_the_paper_and_missing_cells_are_left_out():
    # two templates; dish u2 has no value in the second: mAP = mean over templates of the mean over
    # dishes
    values = [[10.0, 20.0], [30.0, 40.0], [50.0, np.nan]]
    assert estimate(_table(values))["value"] == pytest.approx(
        ((10 + 30 + 50) / 3 + (20 + 40) / 2) / 2
    )


def _symmetric(centre, n):
    """n scores symmetric about `centre` (sample skewness 0, so Hall's correction leaves plain
    t).
    """
    half = np.linspace(1.0, 20.0, n // 2)
    return np.concatenate([centre - half, centre + half, [centre] * (n % 2)])


def test_a_mean_gets_a_t_interval_and_a_stratified_mean_satterthwaite_degrees_of_freedom():
    values = _symmetric(40.0, 32)
    result = estimate(_table(values).with_scale(100))
    reference = stats.ttest_1samp(values, 0).confidence_interval()
    assert (result["ci_low"], result["ci_high"]) == pytest.approx((reference.low, reference.high))
    assert result["stderr"] == pytest.approx(stats.sem(values))
    # each type symmetric, each with the units t needs
    a, b = _symmetric(30.0, 31), _symmetric(45.0, 41)
    types = ["food"] * 31 + ["names"] * 41
    macro = estimate(_table(np.concatenate([a, b]), strata={"type": types}, macro="type"))
    terms = np.array([a.var(ddof=1) / 31, b.var(ddof=1) / 41]) / 4
    df = terms.sum() ** 2 / (terms[0] ** 2 / 30 + terms[1] ** 2 / 40)
    half = stats.t.ppf(0.975, df) * math.sqrt(terms.sum())
    assert macro["value"] == pytest.approx((a.mean() + b.mean()) / 2)
    assert (macro["ci_low"], macro["ci_high"]) == pytest.approx(
        (macro["value"] - half, macro["value"] + half)
    )


def test_skewed_scores_get_an_interval_that_reaches_further_towards_the_long_tail():
    """Most dishes' AP is near 0 and a few near 100: a symmetric t interval misses the mean too
    often on the right (tests/metrics/test_coverage.py); Hall's correction reaches further up than
    down.
    """
    values = np.tile([0.5, 1.0, 0.0, 2.0, 1.5, 0.0, 3.0, 1.0, 60.0, 0.5], 3)
    result = estimate(_table(values).with_scale(100))
    symmetric = stats.ttest_1samp(values, 0).confidence_interval()
    assert result["ci_high"] - result["value"] > result["value"] - result["ci_low"]
    assert result["ci_high"] > symmetric.high


def test_a_skewed_mean_of_few_units_gets_the_bounded_means_wilson_interval_not_an_undercovering_t():
    """Skewed and bimodal means (AP with many zeros, per-fact RankC) covered 0.77 at n = 5 and
    0.85-0.89 up to n = 10-20 with the t interval: below 30 units, or with fewer than 3 units off an
    end of the range, a mean on [0, 100] gets Wilson's interval at its bound, which covers whatever
    the scores' shape.
    """
    few = np.array([0.0, 0.0, 0.0, 4.0, 90.0])
    result = estimate(_table(few).with_scale(100))
    low, high = (100 * x for x in _wilson(few.mean() / 100, 5))
    # 1-3 successes: Poisson's lower end
    assert result["ci_high"] == pytest.approx(high) and result["ci_low"] <= low
    # 50 dishes, 2 with any hit: the t interval would be far too short
    rare = np.r_[np.zeros(48), 70.0, 35.0]
    rare_result = estimate(_table(rare).with_scale(100))
    assert rare_result["ci_high"] == pytest.approx(100 * _wilson(rare.mean() / 100, 50)[1])
    # no dish has any hit: still an interval of 0 of 20
    nothing = estimate(_table(np.zeros(20)).with_scale(100))
    assert nothing["ci_low"] == 0.0 and nothing["ci_high"] == pytest.approx(
        100 * _wilson(0.0, 20)[1]
    )
    unbounded = estimate(_table(few))
    assert unbounded["ci_low"] is None and "below 30 units" in unbounded["no_interval"]
    assert summarize([_table(few).with_scale(100)], unit="dishes")["ci"]["methods"] == {
        "p1": BOUNDED_MEAN
    }


def _wilson(p, n):
    """Wilson's interval of a proportion p of n, from its formula (for fractional p)."""
    z = stats.norm.ppf(0.975)
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max((centre - half) / (1 + z * z / n), 0.0), min((centre + half) / (1 + z * z / n), 1.0)


def test_intervals_stay_inside_the_metrics_range():
    rng = np.random.default_rng(9)
    for _ in range(200):
        n = int(rng.integers(2, 60))
        values = 100 * rng.beta(0.3, rng.uniform(0.2, 3), (n, int(rng.integers(1, 4))))
        result = estimate(_table(values).with_scale(100))
        assert 0.0 <= result["ci_low"] <= result["value"] <= result["ci_high"] <= 100.0, result


def test_macro_average_over_entity_types_equals_camel_cbs():
    rng = np.random.default_rng(0)
    rows, types, runs, ids, cultures, scores = [], [], [], [], [], []
    for prompt in range(12):
        entity_type = "food" if prompt < 4 else "names"  # unequal type sizes: macro != pooled mean
        for run in range(2):
            arab, western = rng.normal(size=3), rng.normal(size=4)
            share = 100.0 * np.mean([w > a for a in arab for w in western])
            rows.append(UnitValue(f"p{prompt}", share, {"entity_type": entity_type}, str(run)))
            for culture, values in (("arab", arab), ("western", western)):
                ids += [f"p{prompt}"] * len(values)
                cultures += [culture] * len(values)
                scores += list(values)
                types += [entity_type] * len(values)
                runs += [run] * len(values)
    table = unit_table("cbs", rows, macro="entity_type", crossed="entity samples").with_scale(100)
    reference = cbs(ids, cultures, scores, entity_type=types, run=runs)
    result = estimate(table)
    # prompts, not prompt x run
    assert result["value"] == pytest.approx(reference["cbs"]) and result["n"] == 12
    summary = summarize([table], unit="prompts")
    assert summary["by_entity_type"]["food"]["cbs"]["value"] == pytest.approx(
        reference["per_type"]["food"]
    )
    assert summary["ci"]["methods"] == {"cbs": CROSSED}


def _anova_variance(block):
    """The variance of a units x replicates block's mean under crossed random effects, from the
    textbook mean squares written out with loops (a slow reference for `crossed_design`).
    """
    units, replicates = len(block), len(block[0])
    grand = sum(sum(row) for row in block) / (units * replicates)
    unit_means = [sum(row) / replicates for row in block]
    rep_means = [sum(block[i][j] for i in range(units)) / units for j in range(replicates)]
    ms_units = replicates * sum((m - grand) ** 2 for m in unit_means) / (units - 1)
    ms_reps = units * sum((m - grand) ** 2 for m in rep_means) / (replicates - 1)
    residual = sum(
        (block[i][j] - unit_means[i] - rep_means[j] + grand) ** 2
        for i in range(units)
        for j in range(replicates)
    )
    ms_error = residual / ((units - 1) * (replicates - 1))
    a, b = max(ms_units - ms_error, 0) / replicates, max(ms_reps - ms_error, 0) / units
    return a / units + b / replicates + ms_error / (units * replicates)


def test_camel_interval_holds_the_entity_samples_spread_not_only_the_prompts():
    """A random GPT-2 gave authors 46.50 [46.25, 46.75] while the std over the same row's runs
    (entity samples) was 1.98: the interval was conditional on one draw of the entities. Prompts
    crossed with entity samples: the sample-to-sample spread now joins the interval (variance
    components, the smaller factor's degrees of freedom).
    """
    rng = np.random.default_rng(4)
    prompts, runs = 20, 5
    values = (
        46.5
        + rng.normal(0, 0.6, (prompts, 1))
        + rng.normal(0, 2.0, (1, runs))
        + rng.normal(0, 0.3, (20, 5))
    )
    crossed = replace(_table(values, "cbs").with_scale(100), crossed="entity samples")
    result = estimate(crossed)
    run_spread = values.mean(axis=0).std(ddof=1)
    prompt_means = values.mean(axis=1)  # the old interval: prompts only, the entity draw held fixed
    assert 2 * stats.t.ppf(0.975, 19) * stats.sem(prompt_means) < run_spread
    variance = _anova_variance(values.tolist())
    half = stats.t.ppf(0.975, runs - 1) * math.sqrt(variance)
    assert (result["ci_low"], result["ci_high"]) == pytest.approx(
        (values.mean() - half, values.mean() + half)
    )
    assert result["ci_high"] - result["ci_low"] > 2 * run_spread / math.sqrt(runs)
    one_sample = estimate(replace(crossed, values=values[:, :1]))
    assert (
        one_sample["ci_low"] is None and "one entity sample per group" in one_sample["no_interval"]
    )


def test_camel_with_one_prompt_per_entity_type_has_no_interval_and_says_why():
    """CAMeL at --limit 5 printed 47.52 [47.52, 47.52]: one prompt per type cannot vary under
    resampling.
    """
    table = _table(
        [40.0, 55.0, 47.5, 60.0, 35.0], strata={"entity_type": list("abcde")}, macro="entity_type"
    )
    result = estimate(table)
    assert result["ci_low"] is None and result["ci_high"] is None and result["stderr"] is None
    assert (
        result["no_interval"]
        == "the statistic cannot vary under resampling (one unit per entity_type)"
    )
    partly = estimate(_table([40.0, 55.0, 47.5], strata={"t": ["a", "a", "b"]}, macro="t"))
    assert partly["ci_low"] is None and "one unit in t b" in partly["no_interval"]


def _xfakt(per_cell):
    """X-FaKT transfer estimates over en/hi x United States/India, `per_cell[cell]` questions in
    each cell (the first of them wrong).
    """
    cells = [("en", "United States"), ("en", "India"), ("hi", "United States"), ("hi", "India")]
    answers = [
        GradedAnswer(language, i > 0, "", country)
        for (language, country), k in zip(cells, per_cell, strict=True)
        for i in range(k)
    ]
    return transfer_estimates(answers, answers_summary(answers, transfer=True))


def test_xfakt_transfer_scores_never_collapse_on_cells_whose_answers_agree():
    """X-FaKT at --limit 169 printed FRS 0.1783 [0.1783, 0.1783], and with low error rates (most
    cells all right) FRS/KTS covered 0.81-0.87: a cell whose answers agree contributed no variance.
    Each mean of cell error rates now gets Wilson's interval at its cells' effective size, so one
    question per cell, or cells all right, still leave the scores an interval with width and a
    standard error.
    """
    lone = _xfakt([1, 1, 1, 1])
    for name in ("frs", "kts", "xfakt"):
        assert lone[name]["ci_low"] < lone[name]["ci_high"] and lone[name]["stderr"] > 0
    strong = _xfakt([12, 12, 12, 12])  # one wrong answer of 12 in every cell
    assert strong["kts"]["ci_low"] < strong["kts"]["value"] == 1.0 and strong["kts"]["stderr"] > 0
    enough = _xfakt([3, 4, 5, 3])
    for name in ("frs", "kts", "xfakt"):
        assert (
            _has_honest_interval(enough[name])
            and enough[name]["ci_low"] is not None
            and enough[name]["stderr"] > 0
        )
        assert (
            0 <= enough[name]["ci_low"] and enough[name]["ci_high"] <= 1 and enough[name]["method"]
        )
        # the paper: fewer errors, and errors less tied to language
        assert enough[name]["higher_is_better"] is True


def _facts(per_fact, languages=("en", "ar")):
    """DLAMA-like rows: each fact (a release uuid) asked in every language, `per_fact[i]` its hits
    (100 or 0) per language.
    """
    rows = [
        UnitValue(f"{lang}/{fact}", hit, {"language": lang}, cluster=f"uuid{fact}")
        for fact, hits in enumerate(per_fact)
        for lang, hit in zip(languages, hits, strict=True)
    ]
    return unit_table("p1", rows, higher_is_better=True).with_scale(100.0, binary=True)


def test_dlama_counts_a_fact_once_however_many_languages_ask_it():
    """DLAMA treated "fact X in English" and "fact X in Arabic" as independent and called them n
    facts: with answers that agree across languages the pooled interval covered 0.82-0.87. The fact
    is the unit: n facts, m answers.
    """
    rng = np.random.default_rng(2)
    known = rng.random(40) < 0.4
    # a model knows a fact in both languages or in neither
    table = _facts([(100.0 * k, 100.0 * k) for k in known])
    pooled = estimate(table)
    assert (
        pooled["n"] == 40
        and pooled["n_observations"] == 80
        and pooled["value"] == pytest.approx(100 * known.mean())
    )
    naive = estimate(_hits(list(table.values[:, 0])))  # 80 independent answers
    assert pooled["ci_high"] - pooled["ci_low"] > 1.3 * (naive["ci_high"] - naive["ci_low"])
    per_language = summarize([table], unit="facts")["by_language"]["en"]["p1"]
    # one answer per fact: plain Wilson
    assert per_language["n"] == 40 and "n_observations" not in per_language
    assert summarize([table], unit="facts")["ci"]["methods"] == {"p1": WILSON_EFFECTIVE}


def test_a_unit_lies_in_one_macro_group():
    rows = [
        UnitValue("en/1", 1.0, {"t": "a"}, cluster="f1"),
        UnitValue("ar/1", 1.0, {"t": "b"}, cluster="f1"),
    ]
    with pytest.raises(MetricInputError, match="unit 'f1' lies in two t groups"):
        unit_table("p1", rows, macro="t")


def test_xfakt_counts_an_entity_asked_in_every_language_once():
    """Factual recall asks each entity in every language: its 13 answers are repeated measures
    shared by mu_assoc and mu_non. Taken as independent questions per cell, FRS covered 0.72-0.84
    when an entity known in one language is known in the others; the entities are now the units (n),
    their answers the observations.
    """
    codes = list(ASSOCIATIONS)[:4]
    rng = np.random.default_rng(5)
    known = rng.random((4, 6)) < 0.7  # [country, entity]: known in every language or in none
    answers = [
        GradedAnswer(language, bool(known[j, e]), "", ASSOCIATIONS[country], f"{country}|{e}")
        for language in codes
        for j, country in enumerate(codes)
        for e in range(6)
    ]
    clustered = transfer_estimates(answers, answers_summary(answers, transfer=True))
    independent = [replace(a, entity=None) for a in answers]
    separate = transfer_estimates(independent, answers_summary(independent, transfer=True))
    assert (
        clustered["frs"]["n"] == 24
        and clustered["frs"]["n_observations"] == 96
        and separate["frs"]["n"] == 96
    )
    width = {
        name: e["frs"]["ci_high"] - e["frs"]["ci_low"]
        for name, e in (("c", clustered), ("s", separate))
    }
    assert width["c"] > 1.3 * width["s"]


@pytest.mark.parametrize("make", [_table, _hits])
def test_one_unit_has_no_interval(make):
    assert estimate(make([100.0])) == {
        "value": 100.0,
        "stderr": None,
        "ci_low": None,
        "ci_high": None,
        "no_interval": "one unit",
        "n": 1,
    }


def test_a_mean_whose_units_all_agree_has_no_interval_but_a_bounded_mean_or_a_proportion_has_one():
    flat = estimate(_table([100.0, 100.0, 100.0]))
    assert flat["ci_low"] is None and "every unit has the same value" in flat["no_interval"]
    assert estimate(_hits([100.0, 100.0, 100.0]))["ci_low"] < 100.0
    assert estimate(_table([100.0, 100.0, 100.0]).with_scale(100))["ci_low"] < 100.0


def test_no_interval_with_two_units_is_ever_zero_width_and_every_value_sits_inside_its_own():
    """A suite crashed drawing a value 7e-15 above its upper bound: intervals now hold their value
    exactly.
    """
    rng = np.random.default_rng(7)
    for _ in range(300):
        n, replicates = int(rng.integers(1, 12)), int(rng.integers(1, 4))
        binary = bool(rng.integers(2))
        values = (
            rng.integers(0, 2, (n, replicates)) * 100.0
            if binary
            else rng.choice([0.0, 1 / 3, 50.0], (n, 3))
        )
        values[rng.random(values.shape) < 0.1] = np.nan
        table = _table(
            values,
            strata={"t": list(rng.choice(["a", "b"], n))},
            macro="t" if rng.integers(2) else None,
        )
        result = estimate(table.with_scale(100.0, binary=binary))
        if result["value"] is not None:
            assert _has_honest_interval(result), result


def test_summarize_groups_every_stratum_and_names_each_metrics_interval_method():
    table = _hits(
        [100.0, 0.0, 100.0, 100.0],
        strata={"culture": ["arab", "arab", "west", "west"], "language": ["en", "ar", "en", "ar"]},
    )
    replicated = _table([[100.0, 0.0]] * 4, "accuracy").with_scale(100, binary=True)
    summary = summarize(
        [table, replicated, _table([1.0, 2.0], "map")],
        unit="facts",
        omitted={"kts": "one language"},
    )
    assert (
        summary["headline"] == "p1"
        and summary["unit"] == "facts"
        and summary["omitted"] == {"kts": "one language"}
    )
    assert summary["ci"]["methods"] == {
        "p1": WILSON,
        "accuracy": WILSON_EFFECTIVE,
        "map": BOUNDED_MEAN,
    }
    assert summary["ci"]["method"] == f"{WILSON}; {WILSON_EFFECTIVE}; {BOUNDED_MEAN}"
    assert (
        summary["by_culture"]["arab"]["p1"]["value"] == 50.0
        and summary["by_culture"]["west"]["p1"]["n"] == 2
    )
    assert set(summary["by_language"]) == {"en", "ar"}
    validate_metrics({"results": summary, "n_probes": 4, "n_skipped": 0, "skipped": {}})


def test_an_estimate_computed_elsewhere_brings_its_method():
    extra = {
        "frs": {
            "value": 0.5,
            "stderr": 0.1,
            "ci_low": 0.3,
            "ci_high": 0.7,
            "n": 9,
            "method": "by hand",
        }
    }
    summary = summarize([_hits([0.0, 100.0])], unit="questions", extra=extra)
    assert summary["overall"]["frs"] == {
        "value": 0.5,
        "stderr": 0.1,
        "ci_low": 0.3,
        "ci_high": 0.7,
        "n": 9,
    }
    assert summary["ci"]["methods"]["frs"] == "by hand"


def test_each_metric_gives_its_direction_and_the_schema_allows_only_a_direction_or_none():
    """P@1 up, an error rate down, a bias score neither (50 = no bias), an estimate from elsewhere
    brings its own; the direction is declared once, with the table, and stays through the table's
    other declarations and subsets.
    """
    errors = unit_table(
        "error_rate", [UnitValue("q1", 0.0), UnitValue("q2", 100.0)], higher_is_better=False
    )
    hits = replace(_hits([100.0, 0.0], strata={"culture": ["arab", "west"]}), higher_is_better=True)
    bias = _table([40.0, 60.0], "cbs").with_scale(100.0)  # declares no direction: it has none
    extra = {
        "frs": {"value": 0.5, "stderr": 0.1, "ci_low": 0.3, "ci_high": 0.7, "n": 9, "method": "m"}
    }
    extra["kts"] = {**extra["frs"], "higher_is_better": True}
    summary = summarize(
        [hits.select(np.array([True, True])), errors.with_scale(100.0, binary=True), bias],
        unit="u",
        extra=extra,
    )
    assert summary["higher_is_better"] == {
        "p1": True,
        "error_rate": False,
        "cbs": None,
        "frs": None,
        "kts": True,
    }
    # beside the estimates, not inside them
    assert "higher_is_better" not in summary["overall"]["kts"]
    metrics = {"results": summary, "n_probes": 2, "n_skipped": 0, "skipped": {}}
    validate_metrics(metrics)
    metrics["results"]["higher_is_better"]["cbs"] = "neither"
    with pytest.raises(
        CultureProbeError, match="at results/higher_is_better/cbs: 'neither' is not of type"
    ):
        validate_metrics(metrics)


# ---------------------------------------------------------------- paired differences


def _paired(gained, lost, n, both_right=0):
    """Two runs on n facts: `gained` facts only run a got, `lost` only run b, `both_right` both."""
    a = [100.0] * gained + [0.0] * lost + [100.0] * both_right
    b = [0.0] * gained + [100.0] * lost + [100.0] * both_right
    rest = n - len(a)
    return _hits(a + [0.0] * rest), _hits(b + [0.0] * rest)


def _old_paired_procedure(a, b):
    """What `compare` printed before: a paired percentile bootstrap interval and a paired
    permutation p-value.
    """
    x, y = a.values[:, 0], b.values[:, 0]
    difference = lambda u, v, axis=-1: u.mean(axis) - v.mean(axis)  # noqa: E731
    interval = stats.bootstrap(
        (x, y),
        difference,
        paired=True,
        method="percentile",
        n_resamples=2000,
        rng=np.random.default_rng(0),
    ).confidence_interval
    test = stats.permutation_test(
        (x, y),
        difference,
        permutation_type="samples",
        n_resamples=9999,
        rng=np.random.default_rng(0),
    )
    return interval.low, interval.high, test.pvalue


def _excludes_zero(result):
    return result["ci_low"] is not None and (result["ci_low"] > 0 or result["ci_high"] < 0)


def test_compare_never_prints_an_interval_that_excludes_zero_with_p_above_005():
    """DLAMA compare said "difference 11.5, 95% interval 1.9 to 21.2; permutation p = 0.07" (52
    facts, 7 against 1 discordant): the percentile bootstrap cannot leave the 0/n boundary, so it
    excluded 0 while the test did not reject. Now one procedure gives both.
    """
    a, b = _paired(7, 1, 52, both_right=20)
    low, high, p = _old_paired_procedure(a, b)
    assert low > 0 and p > 0.05  # the contradiction, as the old procedure printed it
    result = paired_difference(a, b)
    assert result["difference"] == pytest.approx(100 * 6 / 52) and result["method"] == TANGO_CC
    assert _excludes_zero(result) == (result["p_value"] < 0.05)


def _mcnemar_corrected(gained, lost):
    """McNemar's test with Edwards' continuity correction, from its formula."""
    if gained + lost == 0:
        return 1.0
    z = max(abs(gained - lost) - 1, 0) / math.sqrt(gained + lost)
    return 2 * stats.norm.sf(z)


def test_paired_proportions_interval_excludes_zero_exactly_when_mcnemars_corrected_test_rejects():
    rng = np.random.default_rng(11)
    for _ in range(200):
        n = int(rng.integers(5, 80))
        gained, lost = (int(x) for x in rng.multinomial(n, [0.15, 0.1, 0.75])[:2])
        result = paired_difference(*_paired(gained, lost, n))
        assert _excludes_zero(result) == (result["p_value"] < 0.05), (gained, lost, n, result)
        assert result["p_value"] == pytest.approx(_mcnemar_corrected(gained, lost))


def test_two_models_with_opposite_answer_priors_do_not_differ_by_chance():
    """MAPS: a model that always answers (a) and one that always answers (b), gold split evenly,
    disagree on every proverb; uncorrected McNemar rejected this true null 7.8% of the time (n =
    21). The corrected test holds 5%.
    """
    n = 21
    outcomes = np.arange(n + 1)
    rejected = [_excludes_zero(paired_difference(*_paired(k, n - k, n))) for k in outcomes]
    size = float(stats.binom.pmf(outcomes, n, 0.5)[rejected].sum())
    assert size <= 0.05
    uncorrected = np.abs(2 * outcomes - n) / math.sqrt(n) > stats.norm.ppf(0.975)
    assert float(stats.binom.pmf(outcomes, n, 0.5)[uncorrected].sum()) > 0.07


def test_tangos_interval_ends_are_where_the_corrected_score_test_reaches_its_critical_value():
    gained, lost, n = 9, 3, 40
    result = paired_difference(*_paired(gained, lost, n))

    # restricted maximum likelihood found numerically, independently of the closed form
    def score(d):
        def minus_log_likelihood(q):
            return -(
                xlogy(gained, q + d) + xlogy(lost, q) + xlogy(n - gained - lost, 1 - 2 * q - d)
            )

        q = optimize.minimize_scalar(
            minus_log_likelihood,
            bounds=(max(0, -d), (1 - d) / 2),
            method="bounded",
            options={"xatol": 1e-12},
        ).x
        numerator = gained - lost - n * d
        return math.copysign(abs(numerator) - 1, numerator) / math.sqrt(n * (2 * q + d - d * d))

    for end, sign in (("ci_low", 1), ("ci_high", -1)):
        assert score(result[end] / 100) == pytest.approx(sign * stats.norm.ppf(0.975), abs=1e-4)


def test_a_run_paired_with_itself_differs_by_nothing_but_not_with_certainty():
    result = paired_difference(*_paired(0, 0, 50, both_right=20))
    assert (result["difference"], result["p_value"]) == (0.0, 1.0)
    # 0 of 50 discordant
    assert result["ci_low"] == pytest.approx(-result["ci_high"]) and 5 < result["ci_high"] < 12
    assert result["stderr"] > 0


def test_clustered_proportions_count_each_fact_once_in_a_paired_difference():
    """DLAMA's pooled P@1 paired two runs on fact-language answers: with a fact's two answers moving
    together the paired compare rejected a true null up to 15% of the time. The answers now count
    once per design effect.
    """
    gained = [(100.0, 100.0)] * 6 + [(0.0, 0.0)] * 34
    lost = [(0.0, 0.0)] * 6 + [(0.0, 0.0)] * 34
    a, b = _facts(gained), _facts(lost)
    clustered = paired_difference(a, b)
    plain = paired_difference(*_paired(12, 0, 80))  # the same answers taken as 80 independent facts
    assert clustered["method"] == TANGO_CC and clustered["n"] == 40
    assert clustered["p_value"] > plain["p_value"] and clustered["ci_low"] < plain["ci_low"]
    assert _excludes_zero(clustered) == (clustered["p_value"] < 0.05)


def test_paired_means_use_one_sign_flip_procedure_for_interval_and_p():
    rng = np.random.default_rng(5)
    for _ in range(100):
        n = int(rng.integers(6, 40))
        base = rng.uniform(0, 100, (n, 2))
        other = np.clip(base + rng.normal(rng.normal(0, 5), 10, (n, 2)), 0, 100)
        result = paired_difference(
            _table(other, "map").with_scale(100), _table(base, "map").with_scale(100)
        )
        assert result["method"] == SIGN_FLIP and _excludes_zero(result) == (
            result["p_value"] < 0.05
        ), result


def test_the_sign_flip_p_value_is_the_exact_paired_permutation_test():
    rng = np.random.default_rng(8)
    x = rng.uniform(20, 80, 11)
    y = np.clip(x + rng.normal(4, 6, 11), 0, 100)
    result = paired_difference(_table(y, "map").with_scale(100), _table(x, "map").with_scale(100))
    reference = stats.permutation_test(
        (y, x),
        lambda u, v, axis: np.mean(u - v, axis=axis),
        permutation_type="samples",
        n_resamples=np.inf,
    )
    assert result["p_value"] == pytest.approx(reference.pvalue)


def test_a_difference_with_no_spread_gets_an_exact_p_never_0():
    """When every unit differed by the same amount compare printed p < 0.0001 from as few as 2
    units; the sign-flip test gives 2 / 2^n, and 5 units cannot reject anything (2 / 32 > 0.05), so
    they get no interval.
    """
    x = np.array([10.0, 30.0, 50.0, 70.0])
    same = paired_difference(_table(x + 5, "map").with_scale(100), _table(x, "map").with_scale(100))
    assert same["p_value"] == pytest.approx(2 / 2**4) and same["ci_low"] is None
    assert "every unit differs by the same amount" in same["no_interval"]
    # 2^-1999 is below every float: the smallest positive one, never 0
    many = np.linspace(10.0, 80.0, 2000)
    assert paired_difference(_table(many + 5, "map"), _table(many, "map"))["p_value"] == 5e-324
    five = paired_difference(
        _table([12.0, 40, 33, 80, 9], "map").with_scale(100), _table([2.0, 37, 31, 60, 8], "map")
    )
    assert (
        five["p_value"] == pytest.approx(2 / 32)
        and "no difference can be rejected" in five["no_interval"]
    )


def test_groups_that_differ_by_constant_amounts_are_tested_not_declared_without_spread():
    """Differences of +2 in one entity type and -1 in the other, constant within each, have no
    within-group spread; they were reported as "every unit differs by the same amount" with p =
    2/2^n (0.031), where the sign-flip test of the same parts gives 0.625.
    """
    types = {"t": ["a"] * 3 + ["b"] * 3}
    x = np.array([20.0, 40.0, 60.0, 30.0, 50.0, 70.0])
    shifted = x + np.array([2.0, 2.0, 2.0, -1.0, -1.0, -1.0])
    result = paired_difference(
        _table(shifted, "map", types, "t").with_scale(100),
        _table(x, "map", types, "t").with_scale(100),
    )
    assert result["p_value"] == pytest.approx(0.625) and result["ci_low"] < 0 < result["ci_high"]


def test_a_pair_is_a_cell_both_runs_answered():
    """An interrupted run's missing cells made the difference and the interval come from different
    cells (difference -25 with the interval [-25, 63.9] and p = 0.043): both now come from the cells
    both runs answered.
    """
    rng = np.random.default_rng(12)
    for _ in range(100):
        a, b = (100.0 * (rng.random((20, 2)) < 0.5) for _ in range(2))
        a[rng.random(20) < 0.7, 1] = np.nan  # the second replicate of run a mostly missing
        result = paired_difference(*(_table(v).with_scale(100, binary=True) for v in (a, b)))
        both = ~np.isnan(a)
        shared = (
            np.nanmean(np.where(both, a, np.nan), axis=0).mean()
            - np.nanmean(np.where(both, b, np.nan), axis=0).mean()
        )
        assert result["difference"] == pytest.approx(shared)
        assert _excludes_zero(result) == (result["p_value"] < 0.05)


def test_an_interrupted_crossed_run_has_no_interval_instead_of_a_division_by_zero():
    values = 50 + np.arange(12.0).reshape(6, 2)
    values[1:, 1] = np.nan  # the second entity sample reached one prompt only
    table = replace(_table(values, "cbs").with_scale(100), crossed="entity samples")
    result = estimate(table)
    assert result["ci_low"] is None and "an interrupted run" in result["no_interval"]
    assert paired_difference(table, table)["p_value"] is None


def test_paired_camel_differences_follow_the_crossed_design():
    rng = np.random.default_rng(6)
    values = 50 + rng.normal(0, 3, (12, 1)) + rng.normal(0, 2, (1, 4)) + rng.normal(0, 1, (12, 4))
    shifted = values + 1.5 + rng.normal(0, 1, (1, 4)) + rng.normal(0, 1, (12, 4))
    a, b = (
        replace(_table(v, "cbs").with_scale(100), crossed="entity samples")
        for v in (shifted, values)
    )
    result = paired_difference(a, b)
    half = stats.t.ppf(0.975, 3) * math.sqrt(_anova_variance((shifted - values).tolist()))
    difference = float((shifted - values).mean())
    assert result["method"] == PAIRED_CROSSED
    assert (result["ci_low"], result["ci_high"]) == pytest.approx(
        (difference - half, difference + half)
    )
    assert _excludes_zero(result) == (result["p_value"] < 0.05)


def test_paired_difference_pairs_by_unit_id_not_by_position():
    a = UnitTable("p1", ("x", "y", "z"), np.array([100.0, 0.0, 0.0])).with_scale(100, binary=True)
    b = UnitTable("p1", ("z", "y", "x"), np.array([0.0, 0.0, 100.0])).with_scale(100, binary=True)
    assert (
        paired_difference(a, b)["difference"] == 0.0 and paired_difference(a, b)["p_value"] == 1.0
    )


def test_runs_on_different_units_are_not_paired():
    a = UnitTable("p1", ("x", "y"), np.array([1.0, 0.0]))
    b = UnitTable("p1", ("x", "w"), np.array([1.0, 0.0]))
    with pytest.raises(
        MetricInputError, match=r"probed different units \(1 only in the first, e.g. \['y'\]"
    ):
        paired_difference(a, b)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: UnitTable("p1", ("a", "a"), np.zeros(2)), "lists a row twice"),
        (lambda: UnitTable("p1", ("a",), np.zeros(2)), "`values` has 2 items but `ids` has 1"),
        (lambda: UnitTable("p1", ("a",), np.zeros(1), {}, macro="type"), "not a stratum"),
        (
            lambda: unit_table("p1", [UnitValue("a", 1.0), UnitValue("a", 2.0)]),
            "two values in replicate",
        ),
        (
            lambda: _table([0.0, 50.0]).with_scale(100, binary=True),
            "declared binary, but has values other than",
        ),
        (lambda: _table([0.0, 150.0]).with_scale(100), r"outside its range \[0, 100\]"),
        (
            lambda: UnitTable("p1", ("a",), np.zeros(1), binary=True),
            "give the value of a success as `scale`",
        ),
    ],
)
def test_bad_unit_tables_name_the_problem(make, message):
    with pytest.raises(MetricInputError, match=message):
        make()


def test_the_schema_rejects_a_number_without_its_interval_or_its_reason_and_names_where():
    assert set(metrics_schema()["$defs"]["Estimate"]["required"]) == {
        "value",
        "stderr",
        "ci_low",
        "ci_high",
        "n",
    }
    broken = {
        "results": summarize([_hits([100.0, 0.0])], unit="facts"),
        "n_probes": 2,
        "n_skipped": 0,
        "skipped": {},
    }
    del broken["results"]["overall"]["p1"]["stderr"]
    with pytest.raises(
        CultureProbeError, match="at results/overall/p1: 'stderr' is a required property"
    ):
        validate_metrics(broken)
    silent = {
        "results": summarize([_table([5.0])], unit="facts"),
        "n_probes": 1,
        "n_skipped": 0,
        "skipped": {},
    }
    validate_metrics(silent)
    del silent["results"]["overall"]["p1"]["no_interval"]
    with pytest.raises(
        CultureProbeError, match="at results/overall/p1: 'no_interval' is a required property"
    ):
        validate_metrics(silent)
