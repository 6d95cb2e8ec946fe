"""The one results schema: estimates against scipy and by-hand statistics, strata, the macro average (CAMeL),
intervals that are honest at any n (width at 0 of n, no zero-width interval, a reason where there is none), paired
differences whose interval and p-value agree, the published JSON Schema, and bad input."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import optimize, stats
from scipy.special import xlogy

from culture_probe.errors import CultureProbeError, MetricInputError
from culture_probe.metrics._intervals import KORN_GRAUBARD, PAIRED_T, T_DESIGN, TANGO, WILSON
from culture_probe.metrics.camel import cbs
from culture_probe.metrics.results import UnitTable, UnitValue, estimate, paired_difference, summarize, unit_table
from culture_probe.metrics.xfakt import GradedAnswer, answers_summary, transfer_estimates
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
    return result["ci_low"] <= result["value"] <= result["ci_high"] and result["ci_low"] < result["ci_high"]


def test_a_proportion_gets_the_wilson_score_interval():
    values = np.random.default_rng(3).integers(0, 2, 400) * 100.0
    result = estimate(_hits(values))
    k = int(values.sum() / 100)
    reference = stats.binomtest(k, 400).proportion_ci(method="wilson")
    assert result["value"] == pytest.approx(values.mean()) and result["n"] == 400
    assert (result["ci_low"], result["ci_high"]) == pytest.approx((100 * reference.low, 100 * reference.high))
    assert result["stderr"] == pytest.approx(100 * math.sqrt(k / 400 * (1 - k / 400) / 400))


def test_dlama_with_no_fact_right_of_20_is_not_certain():
    """DLAMA, 0 of 20 correct, printed [0, 0]: the score interval reaches about 16%."""
    none_right = estimate(_hits([0.0] * 20))
    assert none_right["value"] == 0.0 and none_right["ci_low"] == 0.0
    assert none_right["ci_high"] == pytest.approx(100 * 1.96**2 / (20 + 1.96**2), abs=0.01)  # 16.1
    all_right = estimate(_hits([100.0] * 20))
    assert all_right["ci_high"] == 100.0 and all_right["ci_low"] == pytest.approx(100 - none_right["ci_high"])


def test_one_to_three_successes_get_the_exact_poisson_lower_limit():
    # Wilson's lower limit for 1 of 50 (0.35%) sits above a true 0.2% too often; the Poisson limit is lower
    result = estimate(_hits([100.0] + [0.0] * 49))
    assert result["ci_low"] == pytest.approx(100 * stats.chi2.ppf(0.025, 2) / 100)
    assert result["ci_low"] < 100 * stats.binomtest(1, 50).proportion_ci(method="wilson").low


def test_replicated_proportions_use_the_effective_sample_size():
    # proverbs answered in three demonstration sets: a proverb's answers agree, so the 20 proverbs count, not 60
    rng = np.random.default_rng(0)
    consistent = np.repeat(rng.integers(0, 2, (20, 1)) * 100.0, 3, axis=1)
    result = estimate(_table(consistent).with_scale(100, binary=True))
    k = consistent[:, 0].sum() / 100
    per_proverb = stats.binomtest(int(k), 20).proportion_ci(method="exact")
    assert result["ci_high"] - result["ci_low"] >= 100 * (per_proverb.high - per_proverb.low) - 1e-9
    none_right = estimate(_table(np.zeros((20, 3))).with_scale(100, binary=True))
    assert none_right["ci_low"] == 0.0 and 16 < none_right["ci_high"] < 30  # no correlation known: 20 units


def test_replicates_average_like_the_paper_and_missing_cells_are_left_out():
    # two templates; dish u2 has no value in the second: mAP = mean over templates of the mean over dishes
    values = [[10.0, 20.0], [30.0, 40.0], [50.0, np.nan]]
    assert estimate(_table(values))["value"] == pytest.approx(((10 + 30 + 50) / 3 + (20 + 40) / 2) / 2)


def test_a_mean_gets_a_t_interval_and_a_stratified_mean_satterthwaite_degrees_of_freedom():
    values = np.array([10.0, 20.0, 30.0, 40.0, 50.0, 20.0, 30.0, 40.0])  # symmetric about 30: plain t
    result = estimate(_table(values).with_scale(100))
    reference = stats.ttest_1samp(values, 0).confidence_interval()
    assert (result["ci_low"], result["ci_high"]) == pytest.approx((reference.low, reference.high))
    assert result["stderr"] == pytest.approx(stats.sem(values))
    a, b = np.array([10.0, 20.0, 30.0]), np.array([20.0, 30.0, 40.0, 50.0, 60.0])  # each type symmetric
    types = ["food"] * 3 + ["names"] * 5
    macro = estimate(_table(np.concatenate([a, b]), strata={"type": types}, macro="type"))
    terms = np.array([a.var(ddof=1) / 3, b.var(ddof=1) / 5]) / 4
    df = terms.sum() ** 2 / (terms[0] ** 2 / 2 + terms[1] ** 2 / 4)
    half = stats.t.ppf(0.975, df) * math.sqrt(terms.sum())
    assert macro["value"] == pytest.approx((a.mean() + b.mean()) / 2)
    assert (macro["ci_low"], macro["ci_high"]) == pytest.approx((macro["value"] - half, macro["value"] + half))


def test_skewed_scores_get_an_interval_that_reaches_further_towards_the_long_tail():
    """Most dishes' AP is near 0 and a few near 100: a symmetric t interval misses the mean too often on the right
    (90% at 10 dishes, tests/metrics/test_coverage.py); Hall's correction reaches further up than down."""
    values = np.array([0.5, 1.0, 0.0, 2.0, 1.5, 0.0, 3.0, 1.0, 60.0, 0.5])
    result = estimate(_table(values).with_scale(100))
    symmetric = stats.ttest_1samp(values, 0).confidence_interval()
    assert result["ci_high"] - result["value"] > result["value"] - result["ci_low"]
    assert result["ci_high"] > symmetric.high


def test_intervals_stay_inside_the_metrics_range():
    result = estimate(_table([0.0, 2.0, 95.0]).with_scale(100))
    assert result["ci_low"] == 0.0 and result["ci_high"] == 100.0


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
    table = unit_table("cbs", rows, macro="entity_type").with_scale(100)
    reference = cbs(ids, cultures, scores, entity_type=types, run=runs)
    result = estimate(table)
    assert result["value"] == pytest.approx(reference["cbs"]) and result["n"] == 12  # prompts, not prompt x run
    summary = summarize([table], unit="prompts")
    assert summary["by_entity_type"]["food"]["cbs"]["value"] == pytest.approx(reference["per_type"]["food"])
    assert summary["ci"]["methods"] == {"cbs": T_DESIGN}


def test_camel_with_one_prompt_per_entity_type_has_no_interval_and_says_why():
    """CAMeL at --limit 5 printed 47.52 [47.52, 47.52]: one prompt per type cannot vary under resampling."""
    table = _table([40.0, 55.0, 47.5, 60.0, 35.0], strata={"entity_type": list("abcde")}, macro="entity_type")
    result = estimate(table)
    assert result["ci_low"] is None and result["ci_high"] is None and result["stderr"] is None
    assert result["no_interval"] == "the statistic cannot vary under resampling (one unit per entity_type)"
    partly = estimate(_table([40.0, 55.0, 47.5], strata={"t": ["a", "a", "b"]}, macro="t"))
    assert partly["ci_low"] is None and "one unit in t b" in partly["no_interval"]


def _xfakt(per_cell):
    """X-FaKT transfer estimates over en/hi x United States/India, `per_cell[cell]` questions in each cell (the
    first of them wrong)."""
    cells = [("en", "United States"), ("en", "India"), ("hi", "United States"), ("hi", "India")]
    answers = [
        GradedAnswer(language, i > 0, "", country)
        for (language, country), k in zip(cells, per_cell, strict=True)
        for i in range(k)
    ]
    return transfer_estimates(answers, answers_summary(answers, transfer=True))


def test_xfakt_transfer_scores_with_one_question_per_cell_have_no_interval_and_say_why():
    """X-FaKT at --limit 169 printed FRS 0.1783 [0.1783, 0.1783], and the README's limit=50 run an FRS with stderr 0:
    a cell of one question has no spread, so the scores have none to estimate."""
    lone = _xfakt([1, 1, 1, 1])
    assert lone["frs"]["ci_low"] is None and lone["frs"]["stderr"] is None
    assert lone["frs"]["no_interval"] == (
        "the statistic cannot vary under resampling (one question per language x country cell)"
    )
    assert "1 of the 4 language x country cells have one question" in _xfakt([3, 3, 1, 3])["kts"]["no_interval"]
    enough = _xfakt([3, 4, 5, 3])
    for name in ("frs", "kts", "xfakt"):
        assert _has_honest_interval(enough[name]) and enough[name]["ci_low"] is not None and enough[name]["stderr"] > 0
        assert 0 <= enough[name]["ci_low"] and enough[name]["ci_high"] <= 1 and enough[name]["method"]
        assert enough[name]["higher_is_better"] is True  # the paper: fewer errors, and errors less tied to language


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


def test_a_mean_whose_units_all_agree_has_no_interval_but_a_proportion_has_one():
    flat = estimate(_table([100.0, 100.0, 100.0]))
    assert flat["ci_low"] is None and "every unit has the same value" in flat["no_interval"]
    assert estimate(_hits([100.0, 100.0, 100.0]))["ci_low"] < 100.0


def test_no_interval_with_two_units_is_ever_zero_width_and_every_value_sits_inside_its_own():
    """A suite crashed drawing a value 7e-15 above its upper bound: intervals now hold their value exactly."""
    rng = np.random.default_rng(7)
    for _ in range(300):
        n, replicates = int(rng.integers(1, 12)), int(rng.integers(1, 4))
        binary = bool(rng.integers(2))
        values = rng.integers(0, 2, (n, replicates)) * 100.0 if binary else rng.choice([0.0, 1 / 3, 50.0], (n, 3))
        values[rng.random(values.shape) < 0.1] = np.nan
        table = _table(values, strata={"t": list(rng.choice(["a", "b"], n))}, macro="t" if rng.integers(2) else None)
        result = estimate(table.with_scale(100.0, binary=binary))
        if result["value"] is not None:
            assert _has_honest_interval(result), result


def test_summarize_groups_every_stratum_and_names_each_metrics_interval_method():
    table = _hits(
        [100.0, 0.0, 100.0, 100.0],
        strata={"culture": ["arab", "arab", "west", "west"], "language": ["en", "ar", "en", "ar"]},
    )
    replicated = _table([[100.0, 0.0]] * 4, "accuracy").with_scale(100, binary=True)
    summary = summarize([table, replicated, _table([1.0, 2.0], "map")], unit="facts", omitted={"kts": "one language"})
    assert summary["headline"] == "p1" and summary["unit"] == "facts" and summary["omitted"] == {"kts": "one language"}
    assert summary["ci"]["methods"] == {"p1": WILSON, "accuracy": KORN_GRAUBARD, "map": T_DESIGN}
    assert summary["ci"]["method"] == f"{WILSON}; {KORN_GRAUBARD}; {T_DESIGN}"
    assert summary["by_culture"]["arab"]["p1"]["value"] == 50.0 and summary["by_culture"]["west"]["p1"]["n"] == 2
    assert set(summary["by_language"]) == {"en", "ar"}
    validate_metrics({"results": summary, "n_probes": 4, "n_skipped": 0, "skipped": {}})


def test_an_estimate_computed_elsewhere_brings_its_method():
    extra = {"frs": {"value": 0.5, "stderr": 0.1, "ci_low": 0.3, "ci_high": 0.7, "n": 9, "method": "by hand"}}
    summary = summarize([_hits([0.0, 100.0])], unit="questions", extra=extra)
    assert summary["overall"]["frs"] == {"value": 0.5, "stderr": 0.1, "ci_low": 0.3, "ci_high": 0.7, "n": 9}
    assert summary["ci"]["methods"]["frs"] == "by hand"


def test_each_metric_gives_its_direction_and_the_schema_allows_only_a_direction_or_none():
    """P@1 up, an error rate down, a bias score neither (50 = no bias), an estimate from elsewhere brings its own; the
    direction is declared once, with the table, and stays through the table's other declarations and subsets.
    """
    errors = unit_table("error_rate", [UnitValue("q1", 0.0), UnitValue("q2", 100.0)], higher_is_better=False)
    hits = replace(_hits([100.0, 0.0], strata={"culture": ["arab", "west"]}), higher_is_better=True)
    bias = _table([40.0, 60.0], "cbs").with_scale(100.0)  # declares no direction: it has none
    extra = {"frs": {"value": 0.5, "stderr": 0.1, "ci_low": 0.3, "ci_high": 0.7, "n": 9, "method": "m"}}
    extra["kts"] = {**extra["frs"], "higher_is_better": True}
    summary = summarize(
        [hits.select(np.array([True, True])), errors.with_scale(100.0, binary=True), bias], unit="u", extra=extra
    )
    assert summary["higher_is_better"] == {"p1": True, "error_rate": False, "cbs": None, "frs": None, "kts": True}
    assert "higher_is_better" not in summary["overall"]["kts"]  # beside the estimates, not inside them
    metrics = {"results": summary, "n_probes": 2, "n_skipped": 0, "skipped": {}}
    validate_metrics(metrics)
    metrics["results"]["higher_is_better"]["cbs"] = "neither"
    with pytest.raises(CultureProbeError, match="at results/higher_is_better/cbs: 'neither' is not of type"):
        validate_metrics(metrics)


# ---------------------------------------------------------------- paired differences


def _paired(gained, lost, n, both_right=0):
    """Two runs on n facts: `gained` facts only run a got, `lost` only run b, `both_right` both."""
    a = [100.0] * gained + [0.0] * lost + [100.0] * both_right
    b = [0.0] * gained + [100.0] * lost + [100.0] * both_right
    rest = n - len(a)
    return _hits(a + [0.0] * rest), _hits(b + [0.0] * rest)


def _old_paired_procedure(a, b):
    """What `compare` printed before: a paired percentile bootstrap interval and a paired permutation p-value."""
    x, y = a.values[:, 0], b.values[:, 0]
    difference = lambda u, v, axis=-1: u.mean(axis) - v.mean(axis)  # noqa: E731
    interval = stats.bootstrap(
        (x, y), difference, paired=True, method="percentile", n_resamples=2000, rng=np.random.default_rng(0)
    ).confidence_interval
    test = stats.permutation_test(
        (x, y), difference, permutation_type="samples", n_resamples=9999, rng=np.random.default_rng(0)
    )
    return interval.low, interval.high, test.pvalue


def _excludes_zero(result):
    return result["ci_low"] is not None and (result["ci_low"] > 0 or result["ci_high"] < 0)


def test_compare_never_prints_an_interval_that_excludes_zero_with_p_above_005():
    """DLAMA compare said "difference 11.5, 95% interval 1.9 to 21.2; permutation p = 0.07" (52 facts, 7 against 1
    discordant): the percentile bootstrap cannot leave the 0/n boundary, so it excluded 0 while the test did not
    reject. Now one procedure gives both."""
    a, b = _paired(7, 1, 52, both_right=20)
    low, high, p = _old_paired_procedure(a, b)
    assert low > 0 and p > 0.05  # the contradiction, as the old procedure printed it
    result = paired_difference(a, b)
    assert result["difference"] == pytest.approx(100 * 6 / 52) and result["method"] == TANGO
    assert _excludes_zero(result) == (result["p_value"] < 0.05)


def test_paired_proportions_interval_excludes_zero_exactly_when_mcnemars_test_rejects():
    rng = np.random.default_rng(11)
    for _ in range(200):
        n = int(rng.integers(5, 80))
        gained, lost = (int(x) for x in rng.multinomial(n, [0.15, 0.1, 0.75])[:2])
        result = paired_difference(*_paired(gained, lost, n))
        assert _excludes_zero(result) == (result["p_value"] < 0.05), (gained, lost, n, result)
        if gained + lost:  # McNemar's statistic, uncorrected
            z = (gained - lost) / math.sqrt(gained + lost)
            assert result["p_value"] == pytest.approx(2 * stats.norm.sf(abs(z)))


def test_tangos_interval_ends_are_where_the_score_test_reaches_its_critical_value():
    gained, lost, n = 9, 3, 40
    result = paired_difference(*_paired(gained, lost, n))

    def score(d):  # restricted maximum likelihood found numerically, independently of the closed form
        def minus_log_likelihood(q):
            return -(xlogy(gained, q + d) + xlogy(lost, q) + xlogy(n - gained - lost, 1 - 2 * q - d))

        q = optimize.minimize_scalar(
            minus_log_likelihood, bounds=(max(0, -d), (1 - d) / 2), method="bounded", options={"xatol": 1e-12}
        ).x
        return (gained - lost - n * d) / math.sqrt(n * (2 * q + d - d * d))

    for end, sign in (("ci_low", 1), ("ci_high", -1)):
        assert score(result[end] / 100) == pytest.approx(sign * stats.norm.ppf(0.975), abs=1e-4)


def test_a_run_paired_with_itself_differs_by_nothing_but_not_with_certainty():
    result = paired_difference(*_paired(0, 0, 50, both_right=20))
    assert (result["difference"], result["p_value"]) == (0.0, 1.0)
    assert result["ci_low"] == pytest.approx(-result["ci_high"]) and 5 < result["ci_high"] < 10  # 0 of 50 discordant


def test_paired_means_use_one_t_procedure_for_interval_and_p():
    rng = np.random.default_rng(5)
    for _ in range(200):
        n = int(rng.integers(3, 30))
        types = list(rng.choice(["x", "y"], n))
        if min(types.count("x"), types.count("y")) < 2:
            continue
        base = rng.uniform(0, 100, (n, 2))
        other = np.clip(base + rng.normal(rng.normal(0, 5), 10, (n, 2)), 0, 100)
        a, b = (_table(v, "cbs", {"t": types}, "t").with_scale(100) for v in (other, base))
        result = paired_difference(a, b)
        assert result["method"] == PAIRED_T and _excludes_zero(result) == (result["p_value"] < 0.05)
    x = rng.uniform(20, 80, 8)
    y = x + 3 + np.array([-6.0, -4.0, -1.0, 0.0, 0.0, 1.0, 4.0, 6.0])  # differences symmetric about 3: plain t
    plain = paired_difference(_table(y, "cbs"), _table(x, "cbs"))
    reference = stats.ttest_rel(y, x)
    assert plain["p_value"] == pytest.approx(reference.pvalue)
    assert (plain["ci_low"], plain["ci_high"]) == pytest.approx(tuple(reference.confidence_interval()))


def test_paired_difference_pairs_by_unit_id_not_by_position():
    a = UnitTable("p1", ("x", "y", "z"), np.array([100.0, 0.0, 0.0])).with_scale(100, binary=True)
    b = UnitTable("p1", ("z", "y", "x"), np.array([0.0, 0.0, 100.0])).with_scale(100, binary=True)
    assert paired_difference(a, b)["difference"] == 0.0 and paired_difference(a, b)["p_value"] == 1.0


def test_runs_on_different_units_are_not_paired():
    a = UnitTable("p1", ("x", "y"), np.array([1.0, 0.0]))
    b = UnitTable("p1", ("x", "w"), np.array([1.0, 0.0]))
    with pytest.raises(MetricInputError, match=r"probed different units \(1 only in the first, e.g. \['y'\]"):
        paired_difference(a, b)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: UnitTable("p1", ("a", "a"), np.zeros(2)), "lists a unit twice"),
        (lambda: UnitTable("p1", ("a",), np.zeros(2)), "`values` has 2 items but `ids` has 1"),
        (lambda: UnitTable("p1", ("a",), np.zeros(1), {}, macro="type"), "not a stratum"),
        (lambda: unit_table("p1", [UnitValue("a", 1.0), UnitValue("a", 2.0)]), "two values in replicate"),
        (lambda: _table([0.0, 50.0]).with_scale(100, binary=True), "declared binary, but has values other than"),
        (lambda: _table([0.0, 150.0]).with_scale(100), r"outside its range \[0, 100\]"),
        (lambda: UnitTable("p1", ("a",), np.zeros(1), binary=True), "give the value of a success as `scale`"),
    ],
)
def test_bad_unit_tables_name_the_problem(make, message):
    with pytest.raises(MetricInputError, match=message):
        make()


def test_the_schema_rejects_a_number_without_its_interval_or_its_reason_and_names_where():
    assert metrics_schema()["$defs"]["estimate"]["required"] == ["value", "stderr", "ci_low", "ci_high", "n"]
    broken = {"results": summarize([_hits([100.0, 0.0])], unit="facts"), "n_probes": 2, "n_skipped": 0, "skipped": {}}
    del broken["results"]["overall"]["p1"]["stderr"]
    with pytest.raises(CultureProbeError, match="at results/overall/p1: 'stderr' is a required property"):
        validate_metrics(broken)
    silent = {"results": summarize([_table([5.0])], unit="facts"), "n_probes": 1, "n_skipped": 0, "skipped": {}}
    validate_metrics(silent)
    del silent["results"]["overall"]["p1"]["no_interval"]
    with pytest.raises(CultureProbeError, match="at results/overall/p1: 'no_interval' is a required property"):
        validate_metrics(silent)
