"""X-FaKT: factual recall (FRS), knowledge transfer across languages (KTS) and their harmonic mean.

Thin `evaluate` module over `culture_probe.benchmarks.xfakt.metrics`; formula and source:
docs/metrics.md.

Inputs, one row per (question language, entity): `correct` (the judged answer was right), `language`
(ISO 639-1 code of the question) and `country` (the entity's country, English name). Options:
`associations` (language -> country; default the benchmark's 13 pairs), `round_cells` (True: round
each cell error to 2 decimals first, as the official scorer does), `tiers` ("paper" or "upstream"),
`round_statistics` (True: mean ± std and the t-test from the rounded cells too, as the official
scorer; default unrounded). Returns `frs`, `kts`, `xfakt`, `mu_assoc`, `mu_non`, `error_table`, the
paper's mean ± std (percent) and t-test, and per-tier statistics.

Example (constructed: 7 facts per country, error counts per question language and country):
    >>> import culture_probe
    >>> metric = culture_probe.load_metric("xfakt")
    >>> wrong = {("en", "United States"): 0, ("en", "Japan"): 1, ("en", "Kenya"): 3,
    ...          ("ja", "United States"): 2, ("ja", "Japan"): 0, ("ja", "Kenya"): 4,
    ...          ("sw", "United States"): 1, ("sw", "Japan"): 3, ("sw", "Kenya"): 1}
    >>> rows = [(i >= k, lang, country) for (lang, country), k in wrong.items() for i in range(7)]
    >>> correct, language, country = (list(column) for column in zip(*rows))
    >>> result = metric.compute(correct=correct, language=language, country=country)
    >>> [round(result[key], 6) for key in ("frs", "kts", "xfakt")]
    [0.586957, 0.554404, 0.570216]
"""

import datasets

from culture_probe.benchmarks.xfakt.data import CITATION
from culture_probe.benchmarks.xfakt.metrics import xfakt
from culture_probe.metrics.info import CultureMetric, metric_info


class Xfakt(CultureMetric):
    """FRS, KTS and X-FaKT from per-question correctness."""

    def _info(self):
        features = {
            "correct": datasets.Value("bool"),
            "language": datasets.Value("string"),
            "country": datasets.Value("string"),
        }
        return metric_info(__doc__, CITATION, datasets.Features(features))

    def _compute(
        self,
        correct,
        language,
        country,
        associations=None,
        round_cells=True,
        tiers="paper",
        round_statistics=False,
    ):
        return xfakt(
            correct,
            language,
            country,
            associations=associations,
            round_cells=round_cells,
            tiers=tiers,
            round_statistics=round_statistics,
        )
