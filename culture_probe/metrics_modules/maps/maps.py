"""MAPS accuracy: how often a model picks the right interpretation of a proverb used in a
conversation, in percent.

Thin `evaluate` module over `culture_probe.benchmarks.maps.metrics`; formula and source:
docs/metrics.md. The culture gap and memorisation rate are the functions `culture_gap` and
`memorisation_rate` of that module.

Inputs: `predictions` and `references` (option letters "a"/"b") and `negative` (True for the variant
that asks for the wrong interpretation: correct when the prediction differs from the label).
Options: `is_figurative` and `memorised` (per item) add subsets. An empty subset gives None.

Example (constructed; the tied third item went to "a"):
    >>> import culture_probe
    >>> metric = culture_probe.load_metric("maps")
    >>> result = metric.compute(
    ...     predictions=["a", "b", "a", "b"],
    ...     references=["a", "b", "b", "a"],
    ...     negative=[False] * 4,
    ...     is_figurative=[True, True, False, False],
    ... )
    >>> subsets = result["subsets"]
    >>> result["accuracy"], subsets["figurative"]["accuracy"], subsets["non_figurative"]["accuracy"]
    (50.0, 100.0, 0.0)
"""

import datasets

from culture_probe.benchmarks.maps.data import CITATION
from culture_probe.benchmarks.maps.metrics import maps
from culture_probe.metrics.info import CultureMetric, metric_info


class Maps(CultureMetric):
    """Accuracy of option letters, with negative questions and subsets."""

    def _info(self):
        features = {
            "predictions": datasets.Value("string"),
            "references": datasets.Value("string"),
            "negative": datasets.Value("bool"),
        }
        return metric_info(__doc__, CITATION, datasets.Features(features))

    def _compute(self, predictions, references, negative, is_figurative=None, memorised=None):
        return maps(
            predictions,
            references,
            negative=negative,
            is_figurative=is_figurative,
            memorised=memorised,
        )
