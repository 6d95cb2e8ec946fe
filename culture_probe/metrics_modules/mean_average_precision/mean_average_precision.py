"""Mean average precision (FmLAMA): how early a dish's gold ingredients appear in its ranked pool,
in percent.

Thin `evaluate` module over `culture_probe.benchmarks.fmlama.metrics.mean_average_precision`;
formula and source: docs/metrics.md.

Inputs: `predictions` (per dish the ranked ingredient pool, best first) and `references` (its gold
ingredients; duplicates count once; a gold item missing from the ranking contributes 0). Option
`groups` (per-dish key, e.g. the country of origin). Returns `map`, `p_at_1`, `p_at_5` (percent),
`n`, `n_skipped` (dishes without gold).

Example (constructed):
    >>> import culture_probe
    >>> metric = culture_probe.load_metric("mean_average_precision")
    >>> result = metric.compute(
    ...     predictions=[["tofu", "beef", "rice", "cheese", "tomato", "flour"],
    ...                  ["beef", "cheese", "rice", "tofu", "tomato", "flour"]],
    ...     references=[["tofu", "rice"], ["cheese", "flour", "tomato"]],
    ... )
    >>> round(result["map"], 2), result["p_at_1"], round(result["p_at_5"], 2)
    (65.0, 50.0, 40.0)
"""

import datasets

from culture_probe.benchmarks.fmlama.data import CITATION
from culture_probe.benchmarks.fmlama.metrics import mean_average_precision
from culture_probe.metrics.info import CultureMetric, metric_info


class MeanAveragePrecision(CultureMetric):
    """mAP over ranked lists and gold sets."""

    def _info(self):
        features = {
            "predictions": datasets.Sequence(datasets.Value("string")),
            "references": datasets.Sequence(datasets.Value("string")),
        }
        return metric_info(__doc__, CITATION, datasets.Features(features))

    def _compute(self, predictions, references, groups=None):
        return mean_average_precision(predictions, references, groups=groups)
