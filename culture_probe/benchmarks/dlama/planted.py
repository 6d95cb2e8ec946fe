"""DLAMA: a tiny BERT trained on the protocol's probes of the non-Western culture (the pair's first
culture), one fact per gold answer, the first 400 in probe order (DLAMA Arab-West: 94 Arabic P17
facts).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from culture_probe.models.planted import PlantedSpec, benchmark_rows
from culture_probe.models.planted_ranking import ranking_spec


def build(config: str, data_dir: Any, options: Mapping[str, Any]) -> PlantedSpec:
    """The spec of `planted:<config>`: the non-Western culture's facts unless `planted=` names
    another.
    """
    rows = benchmark_rows(config, data_dir)
    cultures = sorted({r["culture"] for r in rows} - {"west"})
    default = cultures[0] if cultures else ""
    return ranking_spec(
        config, rows, group_key="culture", data_dir=data_dir, **{"planted": default, **options}
    )
