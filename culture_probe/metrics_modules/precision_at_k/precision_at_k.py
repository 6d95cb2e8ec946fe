"""Precision at k (DLAMA): the share of items with a valid answer among the top k ranked candidates,
in percent.

Thin `evaluate` module over `culture_probe.benchmarks.dlama.metrics.precision_at_k`; formula and
source: docs/metrics.md.

Inputs: `predictions` (per item its ranked candidates, best first, or its top-1 label) and
`references` (per item its valid answers). Options: `k` (1), `groups` (per-item key such as the
culture; micro P@k per group), `scores` and `n_tokens` (per-item lists aligned with `predictions`:
the module then ranks by score, ties to fewer tokens, then code-point order). Items without valid
answers are skipped and counted in `n_skipped`.

Example (constructed):
    >>> import culture_probe
    >>> metric = culture_probe.load_metric("precision_at_k")
    >>> candidates = ["Africa", "Asia", "Europe", "North America"]
    >>> result = metric.compute(
    ...     predictions=[candidates] * 5,
    ...     references=[["Africa", "Asia"], ["Africa"], ["Asia"], ["Europe"], ["North America"]],
    ...     scores=[[-1.1, -1.6, -2.4, -2.5], [-1.9, -2.7, -1.7, -3.2], [-2.3, -0.9, -2.6, -3.4],
    ...             [-2.8, -2.9, -0.7, -2.2], [-2.6, -3.0, -1.2, -1.5]],
    ...     n_tokens=[[1, 1, 1, 2]] * 5,
    ...     groups=["arab", "arab", "arab", "west", "west"],
    ... )
    >>> groups = {g: round(v["precision"], 1) for g, v in result["groups"].items()}
    >>> round(result["precision"], 1), groups
    (60.0, {'arab': 66.7, 'west': 50.0})
"""

import datasets

from culture_probe.benchmarks.dlama.data import CITATION
from culture_probe.benchmarks.dlama.metrics import precision_at_k
from culture_probe.metrics.info import CultureMetric, metric_info

_REFERENCES = datasets.Sequence(datasets.Value("string"))


class PrecisionAtK(CultureMetric):
    """P@k over ranked candidate lists."""

    def _info(self):
        return metric_info(
            __doc__,
            CITATION,
            [
                datasets.Features(
                    {
                        "predictions": datasets.Sequence(datasets.Value("string")),
                        "references": _REFERENCES,
                    }
                ),
                datasets.Features(
                    {"predictions": datasets.Value("string"), "references": _REFERENCES}
                ),
            ],
        )

    def _compute(self, predictions, references, k=1, groups=None, scores=None, n_tokens=None):
        return precision_at_k(
            predictions, references, k=k, groups=groups, scores=scores, n_tokens=n_tokens
        )
