"""RankC (Qi et al., 2023): how far two languages' rankings of the same candidates agree, 0-1,
whatever the accuracy.

Thin `evaluate` module over `culture_probe.metrics.rankc`; formula, weights and source:
docs/consistency.md.

Inputs, one row per query: `rankings_a` and `rankings_b`, the query's candidate ids (e.g. Wikidata
QIDs) ranked best first in languages A and B; both must rank the same ids. Options: `weight`
("softmax", the paper's; "norm1" linear; "norm2" squared). Returns `value` (the mean over queries),
`per_query`, `n_queries` and `weight`.

Example (docs/consistency.md: the languages swap the top two candidates of the first query, agree on
the second):
    >>> import culture_probe
    >>> metric = culture_probe.load_metric("rankc")
    >>> result = metric.compute(
    ...     rankings_a=[["egypt", "morocco", "france"], ["paris", "lyon"]],
    ...     rankings_b=[["morocco", "egypt", "france"], ["paris", "lyon"]],
    ... )
    >>> round(result["value"], 4), [round(v, 4) for v in result["per_query"]], result["n_queries"]
    (0.6674, [0.3348, 1.0], 2)
"""

import datasets

from culture_probe.metrics import rankc
from culture_probe.metrics.consistency import CITATION
from culture_probe.metrics.info import CultureMetric, metric_info


class Rankc(CultureMetric):
    """RankC over per-query rankings in two languages."""

    def _info(self):
        features = {
            "rankings_a": datasets.Sequence(datasets.Value("string")),
            "rankings_b": datasets.Sequence(datasets.Value("string")),
        }
        return metric_info(__doc__, CITATION, datasets.Features(features))

    def _compute(self, rankings_a, rankings_b, weight="softmax"):
        return rankc(rankings_a, rankings_b, weight=weight)
