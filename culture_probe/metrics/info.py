"""What the thin `evaluate` modules share: their `MetricInfo`.

A module passes the BibTeX of the paper it implements from that paper's one home: the benchmark's data module
(`culture_probe.data.<bench>.CITATION`, which is also its card's `INFO.citation`), or, for a paper no benchmark
carries, the metric's own module (RankC: `metrics.consistency`; the library's own comparison: `metrics.compare`).
Importing the constant, rather than looking the benchmark up in the registry, keeps a published metric Space
self-contained: the string is copied into it.
"""

from __future__ import annotations

import datasets
import evaluate


def metric_info(
    doc: str, citation: str, features: datasets.Features | list[datasets.Features]
) -> evaluate.MetricInfo:
    """The `_info` of a module: its docstring (first paragraph as description), the paper's BibTeX, inputs."""
    return evaluate.MetricInfo(
        description=doc.strip().split("\n\n")[0],
        citation=citation,
        inputs_description=doc,
        features=features,
    )
