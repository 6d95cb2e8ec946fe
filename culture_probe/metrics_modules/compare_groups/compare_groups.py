"""Compare groups: the difference in mean score between groups, with an interval and a p-value from
one test.

Thin `evaluate` module over `culture_probe.metrics.compare_groups`; method and rationale:
docs/metrics.md.

Inputs, one row per item: `scores` (any per-item score: a hit, an AP, a CBS) and `groups` (its
culture or language). Options: `reference` (compare every group with this one; default: every pair),
`n_resamples` (10,000), `confidence` (0.95), `seed` (0), `success` (scores that are 0 or this value,
e.g. 1 for hits: a difference of proportions). Each comparison reports mean(a) − mean(b), a
two-sided p-value and the interval that inverts the same test (a permutation test; for proportions
the Miettinen-Nurminen score test), named in `method`.

Example (constructed: P@1 hits of two cultures):
    >>> import culture_probe
    >>> metric = culture_probe.load_metric("compare_groups")
    >>> result = metric.compute(
    ...     scores=[1, 1, 1, 0, 0, 0, 1, 0],
    ...     groups=["west"] * 4 + ["arab"] * 4,
    ...     reference="arab",
    ...     n_resamples=2000,
    ... )
    >>> comparison = result["comparisons"][0]
    >>> comparison["a"], comparison["b"], comparison["difference"]
    ('west', 'arab', 0.5)
    >>> comparison["ci_low"] <= 0.5 <= comparison["ci_high"] and 0 < comparison["p_value"] <= 1
    True
"""

import datasets

from culture_probe.metrics import compare_groups
from culture_probe.metrics.compare import CITATION
from culture_probe.metrics.info import CultureMetric, metric_info


class CompareGroups(CultureMetric):
    """Group differences with uncertainty."""

    def _info(self):
        features = {"scores": datasets.Value("float64"), "groups": datasets.Value("string")}
        return metric_info(__doc__, CITATION, datasets.Features(features))

    def _compute(
        self,
        scores,
        groups,
        reference=None,
        n_resamples=10_000,
        confidence=0.95,
        seed=0,
        success=None,
    ):
        return compare_groups(
            scores,
            groups,
            reference=reference,
            n_resamples=n_resamples,
            confidence=confidence,
            seed=seed,
            success=success,
        )
