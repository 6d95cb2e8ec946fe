"""The one results schema: estimates against scipy and by-hand statistics, strata, the macro average (CAMeL), paired
differences against an exact sign-flip enumeration, the published JSON Schema, and bad input."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from culture_probe.errors import CultureProbeError, MetricInputError
from culture_probe.metrics.camel import cbs
from culture_probe.metrics.results import UnitTable, UnitValue, estimate, paired_difference, summarize, unit_table
from culture_probe.schemas import metrics_schema, validate_metrics


def _table(values, metric="p1", strata=None, macro=None):
    ids = tuple(f"u{i}" for i in range(len(values)))
    return UnitTable(metric, ids, np.asarray(values, dtype=float), strata or {}, macro)


def test_estimate_of_a_mean_matches_scipy_and_the_analytic_standard_error():
    values = np.random.default_rng(3).integers(0, 2, 400) * 100.0
    result = estimate(_table(values))
    reference = stats.bootstrap((values,), np.mean, method="percentile", n_resamples=2000, rng=np.random.default_rng(7))
    assert result["value"] == pytest.approx(values.mean()) and result["n"] == 400
    assert result["ci_low"] == pytest.approx(reference.confidence_interval.low, abs=1.5)
    assert result["ci_high"] == pytest.approx(reference.confidence_interval.high, abs=1.5)
    assert result["stderr"] == pytest.approx(values.std(ddof=1) / np.sqrt(400), rel=0.1)


def test_replicates_average_like_the_paper_and_missing_cells_are_left_out():
    # two templates; dish u2 has no value in the second: mAP = mean over templates of the mean over dishes
    values = [[10.0, 20.0], [30.0, 40.0], [50.0, np.nan]]
    assert estimate(_table(values))["value"] == pytest.approx(((10 + 30 + 50) / 3 + (20 + 40) / 2) / 2)


def test_macro_average_over_entity_types_equals_camel_cbs_and_resamples_prompts_within_types():
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
    table = unit_table("cbs", rows, macro="entity_type")
    reference = cbs(ids, cultures, scores, entity_type=types, run=runs)
    result = estimate(table)
    assert result["value"] == pytest.approx(reference["cbs"]) and result["n"] == 12  # prompts, not prompt x run
    summary = summarize([table], unit="prompts")
    assert summary["by_entity_type"]["food"]["cbs"]["value"] == pytest.approx(reference["per_type"]["food"])


def test_summarize_groups_every_stratum_and_names_the_interval_method():
    table = _table(
        [100.0, 0.0, 100.0, 100.0],
        strata={"culture": ["arab", "arab", "west", "west"], "language": ["en", "ar", "en", "ar"]},
    )
    summary = summarize([table], unit="facts", omitted={"kts": "one language"})
    assert summary["headline"] == "p1" and summary["unit"] == "facts" and summary["omitted"] == {"kts": "one language"}
    assert summary["ci"]["method"].startswith("percentile bootstrap (scipy.stats.bootstrap)")
    assert summary["by_culture"]["arab"]["p1"]["value"] == 50.0 and summary["by_culture"]["west"]["p1"]["n"] == 2
    assert set(summary["by_language"]) == {"en", "ar"}
    validate_metrics({"results": summary, "n_probes": 4, "n_skipped": 0, "skipped": {}})


def test_one_unit_has_no_interval():
    assert estimate(_table([70.0])) == {"value": 70.0, "stderr": None, "ci_low": None, "ci_high": None, "n": 1}


def _exact_sign_flip_p(a, b):
    diffs = np.asarray(a) - np.asarray(b)
    observed = abs(diffs.mean())
    flips = [abs((diffs * signs).mean()) >= observed - 1e-12 for signs in itertools.product((1, -1), repeat=len(diffs))]
    return float(np.mean(flips))


def test_paired_difference_matches_an_exact_sign_flip_test_and_a_paired_bootstrap():
    a = [100.0, 100.0, 0.0, 100.0, 100.0, 0.0, 100.0, 100.0, 100.0, 0.0]
    b = [0.0, 100.0, 0.0, 0.0, 100.0, 0.0, 0.0, 100.0, 0.0, 0.0]
    result = paired_difference(_table(a), _table(b), n_permutations=2**10)  # scipy enumerates all 1024 flips
    assert result["difference"] == pytest.approx(np.mean(a) - np.mean(b)) and result["n"] == 10
    assert result["p_value"] == pytest.approx(_exact_sign_flip_p(a, b))
    reference = stats.bootstrap(
        (np.asarray(a), np.asarray(b)),
        lambda x, y, axis: x.mean(axis) - y.mean(axis),
        paired=True,
        method="percentile",
        n_resamples=2000,
        rng=np.random.default_rng(5),
    )
    assert result["ci_low"] == pytest.approx(reference.confidence_interval.low, abs=10)
    assert result["ci_high"] == pytest.approx(reference.confidence_interval.high, abs=10)


def test_paired_difference_of_a_run_with_itself_is_zero_with_p_one():
    table = _table([100.0, 0.0, 100.0, 0.0, 100.0])
    result = paired_difference(table, table)
    assert (result["difference"], result["ci_low"], result["ci_high"], result["p_value"]) == (0.0, 0.0, 0.0, 1.0)


def test_paired_difference_pairs_by_unit_id_not_by_position():
    a = UnitTable("p1", ("x", "y", "z"), np.array([100.0, 0.0, 0.0]))
    b = UnitTable("p1", ("z", "y", "x"), np.array([0.0, 0.0, 100.0]))
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
    ],
)
def test_bad_unit_tables_name_the_problem(make, message):
    with pytest.raises(MetricInputError, match=message):
        make()


def test_the_schema_rejects_a_number_without_its_interval_and_names_where():
    assert metrics_schema()["$defs"]["estimate"]["required"] == ["value", "stderr", "ci_low", "ci_high", "n"]
    broken = {"results": summarize([_table([1.0, 0.0])], unit="facts"), "n_probes": 2, "n_skipped": 0, "skipped": {}}
    del broken["results"]["overall"]["p1"]["stderr"]
    with pytest.raises(CultureProbeError, match="at results/overall/p1: 'stderr' is a required property"):
        validate_metrics(broken)
