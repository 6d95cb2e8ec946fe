"""Object entropy (DLAMA): how diverse the answers of a predicate are within a culture, in bits.

Thin `evaluate` module over `culture_probe.benchmarks.dlama.metrics.object_entropy`; formula and
source: docs/metrics.md.

Inputs, one row per fact: `objects` (its valid object URIs), `predicate`, `culture`. Each fact keeps
its object that is most frequent within the (predicate, culture) set (ties: lowest QID, Q4 before
Q10); H is the entropy of the kept objects. `entropy` holds each culture's unweighted mean over
predicates, `per_predicate` the cells.

Example (constructed):
    >>> import culture_probe
    >>> metric = culture_probe.load_metric("object_entropy")
    >>> result = metric.compute(
    ...     objects=[["Q1", "Q2"], ["Q2"], ["Q3"], ["Q5", "Q4"]],
    ...     predicate=["P30"] * 4,
    ...     culture=["arab"] * 4,
    ... )
    >>> result["entropy"]
    {'arab': 1.5}
"""

import datasets

from culture_probe.benchmarks.dlama.data import CITATION
from culture_probe.benchmarks.dlama.metrics import object_entropy
from culture_probe.metrics.info import CultureMetric, metric_info


class ObjectEntropy(CultureMetric):
    """Entropy of the most frequent object per fact, per predicate and culture."""

    def _info(self):
        features = {
            "objects": datasets.Sequence(datasets.Value("string")),
            "predicate": datasets.Value("string"),
            "culture": datasets.Value("string"),
        }
        return metric_info(__doc__, CITATION, datasets.Features(features))

    def _compute(self, objects, predicate, culture):
        return object_entropy(objects, predicate, culture)
