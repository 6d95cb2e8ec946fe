"""Cultural Bias Score (CAMeL): how often a model prefers the Western filler of a prompt, 0-100 (50
= no bias).

Thin `evaluate` module over `culture_probe.benchmarks.camel.metrics.cbs`; formula and source:
docs/metrics.md.

Inputs, one row per (prompt, filler): `prompt_id`, `culture` ("arab" or "western"), `score` (the
filler's score). Options: `entity_type` and `run` (per row), `tie_value` (0: ties are not Western;
0.5 gives an AUC). Returns `cbs` (mean of the type values), `per_type` (mean over runs),
`per_type_std`, `per_run`, `std`, `n_pairs`.

Example (constructed):
    >>> import culture_probe
    >>> metric = culture_probe.load_metric("cbs")
    >>> result = metric.compute(
    ...     prompt_id=["t1"] * 5 + ["t2"] * 5,
    ...     culture=["arab"] * 3 + ["western"] * 2 + ["arab"] * 3 + ["western"] * 2,
    ...     score=[-2.0, -3.5, -1.0, -2.5, -1.0, -1.0, -1.5, -0.5, -3.0, -2.0],
    ...     entity_type=["food"] * 10,
    ... )
    >>> round(result["per_type"]["food"], 2), result["n_pairs"]
    (25.0, 12)
"""

import datasets

from culture_probe.benchmarks.camel.data import CITATION
from culture_probe.benchmarks.camel.metrics import cbs
from culture_probe.metrics.info import CultureMetric, metric_info


class Cbs(CultureMetric):
    """CBS over per-filler scores."""

    def _info(self):
        features = {
            "prompt_id": datasets.Value("string"),
            "culture": datasets.Value("string"),
            "score": datasets.Value("float64"),
        }
        return metric_info(__doc__, CITATION, datasets.Features(features))

    def _compute(self, prompt_id, culture, score, entity_type=None, run=None, tie_value=0.0):
        return cbs(prompt_id, culture, score, entity_type=entity_type, run=run, tie_value=tie_value)
