"""FmLAMA: a tiny BERT trained on the protocol's probes of the country group with the most dishes,
one fact per gold answer, the first 400 in probe order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from culture_probe.models.planted import PlantedSpec, benchmark_rows
from culture_probe.models.planted_ranking import ranking_spec


def build(config: str, data_dir: Any, options: Mapping[str, Any]) -> PlantedSpec:
    """The spec of `planted:<config>`: the largest country group's dishes unless `planted=` names
    another.
    """
    rows = benchmark_rows(config, data_dir)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["group"]] = counts.get(row["group"], 0) + 1
    default = max(sorted(counts), key=counts.__getitem__) if counts else ""
    return ranking_spec(
        config,
        rows,
        group_key="group",
        metric="mAP",
        data_dir=data_dir,
        **{"planted": default, **options},
    )
