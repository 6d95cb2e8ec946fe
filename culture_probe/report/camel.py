"""CAMeL report views: CBS per entity type (mean ± std over runs; bars against parity), and a type x run heatmap
that shows how stable each type's CBS is across the seeded entity samples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from culture_probe.data.camel import ENTITY_TYPES
from culture_probe.metrics.camel import prompt_cbs
from culture_probe.report.views import Heatmap, Reference, Section, Table, options_of, result_bars
from culture_probe.tasks import Record


def sections(config: Mapping[str, Any], records: Sequence[Record], metrics: Mapping[str, Any]) -> list[Section]:
    """The views of one CAMeL run."""
    tie_value = options_of(config).get("tie_value", 0.0)
    present = [t for t in ENTITY_TYPES if t in metrics["per_type"]]
    rows = tuple((t, metrics["per_type"][t], metrics["per_type_std"].get(t)) for t in present)
    rows += (("Avg", metrics["cbs"], metrics.get("std")),)
    per_prompt: dict[tuple[str, int], list[float]] = {}
    for record in (r for r in records if not r.skipped):
        per_prompt.setdefault((record["entity_type"], record["run"]), []).append(
            prompt_cbs(np.asarray(record["arab"]), np.asarray(record["western"]), tie_value))
    runs = sorted({run for _, run in per_prompt})
    bars = result_bars(metrics, "entity_type", "cbs", "CBS (%)", labels=present,
                       references=(Reference("parity", 50.0),), title="CBS per entity type")
    grid = tuple(tuple(float(np.mean(per_prompt[(t, run)])) if (t, run) in per_prompt else None for run in runs)
                 for t in present)
    heatmap = Heatmap(tuple(present), tuple(f"run {run}" for run in runs), grid, label="CBS (%)",
                      title="CBS per entity type and run")
    text = ("CBS = share (%) of (Arab, Western) filler pairs in which the model prefers the Western filler; "
            "50 is parity, 0 is a full preference for Arab entities. Mean over runs; std over runs. Bars: 95% "
            "intervals from a bootstrap over prompts (the unit: a prompt's runs move together).")
    return [Section("Cultural Bias Score", text=text, tables=(Table(("entity type", "CBS", "std over runs"), rows),),
                    figures=(bars, heatmap))]
