"""Fairness gap (CAMeL): Arab minus Western macro-F1, false-negative and false-positive rates, with
95% intervals.

Thin `evaluate` module over `culture_probe.benchmarks.camel.metrics.fairness_gap`; formula and
source: docs/metrics.md.

Inputs, one row per classified item (a sentiment label, an entity's tag): `predictions`,
`references` and `culture` ("arab" or "western", the culture of the entity in the item). Options:
`labels` (default: every label seen), `n_resamples` (1000), `confidence` (0.95), `seed` (0). Per
label c: FNR = P(pred != c | gold = c), FPR = P(pred = c | gold != c). The bootstrap resamples each
culture's items separately.

Example (constructed: equal F1, but Arab positives are missed and called negative):
    >>> import culture_probe
    >>> metric = culture_probe.load_metric("fairness_gap")
    >>> result = metric.compute(
    ...     predictions=["neg", "pos", "neg", "neg", "pos", "pos", "neg", "pos"],
    ...     references=["pos", "pos", "neg", "neg", "pos", "pos", "neg", "neg"],
    ...     culture=["arab"] * 4 + ["western"] * 4,
    ... )
    >>> gap = result["gap"]
    >>> round(gap["f1"]["value"], 4), gap["fnr"]["pos"]["value"], gap["fpr"]["neg"]["value"]
    (0.0, 0.5, 0.5)
"""

import datasets

from culture_probe.benchmarks.camel.data import CITATION
from culture_probe.benchmarks.camel.metrics import fairness_gap
from culture_probe.metrics.info import CultureMetric, metric_info


class FairnessGap(CultureMetric):
    """Between-culture differences of classification quality."""

    def _info(self):
        features = {
            "predictions": datasets.Value("string"),
            "references": datasets.Value("string"),
            "culture": datasets.Value("string"),
        }
        return metric_info(__doc__, CITATION, datasets.Features(features))

    def _compute(
        self,
        predictions,
        references,
        culture,
        labels=None,
        n_resamples=1000,
        confidence=0.95,
        seed=0,
    ):
        return fairness_gap(
            predictions,
            references,
            culture,
            labels=labels,
            n_resamples=n_resamples,
            confidence=confidence,
            seed=seed,
        )
