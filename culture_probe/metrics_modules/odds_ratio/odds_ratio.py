"""Odds ratio of words (CAMeL): is a word more likely in texts about Western or Arab entities (> 1:
Western)?

Thin `evaluate` module over `culture_probe.benchmarks.camel.metrics.odds_ratio`; formula and source:
docs/metrics.md.

Inputs, one row per word occurrence (e.g. each adjective of a generated story): `word` and `culture`
("arab" or "western", the culture of the story's entity). Options: `smoothing` (added to each cell;
0.5 by default, 0 is the paper's formula) and `confidence` (0.95). Returns per word its
`odds_ratio`, Woolf interval and counts.

Example (constructed; no smoothing: OR(rich) = (3/1) / (1/3) = 9):
    >>> import culture_probe
    >>> metric = culture_probe.load_metric("odds_ratio")
    >>> result = metric.compute(
    ...     word=["poor", "rich", "rich", "rich", "poor", "poor", "poor", "rich"],
    ...     culture=["western"] * 4 + ["arab"] * 4,
    ...     smoothing=0.0,
    ... )
    >>> {w: round(v["odds_ratio"], 4) for w, v in result["words"].items()}
    {'rich': 9.0, 'poor': 0.1111}
"""

import datasets

from culture_probe.benchmarks.camel.data import CITATION
from culture_probe.benchmarks.camel.metrics import odds_ratio
from culture_probe.metrics.info import CultureMetric, metric_info


class OddsRatio(CultureMetric):
    """Smoothed odds ratios with confidence intervals."""

    def _info(self):
        features = {"word": datasets.Value("string"), "culture": datasets.Value("string")}
        return metric_info(__doc__, CITATION, datasets.Features(features))

    def _compute(self, word, culture, smoothing=0.5, confidence=0.95):
        return odds_ratio(word, culture, smoothing=smoothing, confidence=confidence)
