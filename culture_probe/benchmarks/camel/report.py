"""CAMeL report views: CBS per entity type (mean ± std over runs; bars against parity), and a type x
run heatmap that shows how stable each type's CBS is across the seeded entity samples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from culture_probe.benchmarks.camel.data import ENTITY_TYPES
from culture_probe.benchmarks.camel.metrics import prompt_cbs
from culture_probe.metrics.display import Scale, estimate_cells, format_number
from culture_probe.record import ResultsTable, RunRecord
from culture_probe.report.views import Heatmap, Reference, Section, Table, result_bars
from culture_probe.tasks import Record

SCALES: dict[str, Scale] = {"cbs": "%"}
# The papers' Tables 10 and 11: the average CBS over the ten entity types, per model,
# for CAMeL-Co and CAMeL-Ag; drawn as a reference line when a run repeats one of them.
_MODELS = (
    "UBC-NLP/ARBERT",
    "UBC-NLP/MARBERT",
    "aubmindlab/bert-base-arabertv02",
    "aubmindlab/bert-large-arabertv02",
    "aubmindlab/bert-base-arabertv02-twitter",
    "aubmindlab/bert-large-arabertv02-twitter",
    "CAMeL-Lab/bert-base-arabic-camelbert-mix",
    "CAMeL-Lab/bert-base-arabic-camelbert-msa",
    "CAMeL-Lab/bert-base-arabic-camelbert-da",
    "bert-base-multilingual-cased",
    "lanwuwei/GigaBERT-v3-Arabic-and-English",
    "lanwuwei/GigaBERT-v4-Arabic-and-English",
    "xlm-roberta-base",
    "xlm-roberta-large",
    "aubmindlab/aragpt2-base",
    "aubmindlab/aragpt2-large",
    "bigscience/bloom",
    "FreedomIntelligence/AceGPT-13B-chat",
    "inception-mbzuai/jais-13b",
    "text-davinci-003",
    "google/mt5-xxl",
    "CohereForAI/aya-101",
)
PAPER_CBS: dict[str, dict[str, float]] = {
    "camel_co_prompts": dict(
        zip(
            _MODELS,
            (
                46.40,
                49.33,
                49.33,
                48.20,
                50.27,
                46.50,
                57.09,
                56.82,
                56.53,
                49.18,
                54.37,
                57.73,
                50.43,
                54.04,
                53.23,
                45.52,
                63.47,
                60.37,
                51.15,
                62.47,
                48.80,
                50.66,
            ),
            strict=True,
        )
    ),
    "camel_ag_prompts": dict(
        zip(
            _MODELS,
            (
                48.22,
                50.21,
                50.89,
                49.32,
                52.40,
                49.13,
                60.32,
                59.37,
                57.80,
                49.83,
                55.65,
                60.44,
                51.16,
                55.81,
                55.92,
                46.10,
                61.68,
                58.96,
                51.82,
                60.89,
                46.29,
                50.41,
            ),
            strict=True,
        )
    ),
}


def references(config: RunRecord) -> tuple[Reference, ...]:
    """Parity, and the paper's average CBS when the run repeats one of its models on the released
    prompts.
    """
    paper = PAPER_CBS.get(config.config, {}).get(config.model.spec)
    lines = (Reference("parity", 50.0),)
    return lines + (
        (Reference("paper, Avg", paper),) if paper is not None and config.repeats_the_paper else ()
    )


def inert_options(config: RunRecord) -> set[str]:
    """The options of other model kinds: the masked rule (C4), the seq2seq style, the empty-prefix
    rule (C1, which concerns left-context models only).
    """
    kind = str(config.model.kind)
    return {
        "masked": {"seq2seq_style", "exclude_empty_prefix"},
        "causal": {"mlm_mode", "seq2seq_style"},
        "seq2seq": {"mlm_mode"},
    }.get(kind, set())


def sections(
    config: RunRecord, records: Sequence[Record], metrics: Mapping[str, Any]
) -> list[Section]:
    """The views of one CAMeL run."""
    tie_value = config.options.get("tie_value", 0.0)
    present = [t for t in ENTITY_TYPES if t in metrics["per_type"]]
    table = ResultsTable.of(metrics)
    by_type = table.by("entity_type")
    rows = tuple(
        (
            t,
            *estimate_cells(by_type.get(t, {}).get("cbs"), "%"),
            format_number(metrics["per_type_std"].get(t), "%"),
        )
        for t in present
    )
    rows += (
        (
            "Avg",
            *estimate_cells(table.overall.get("cbs"), "%"),
            format_number(metrics.get("std"), "%"),
        ),
    )
    per_prompt: dict[tuple[str, int], list[float]] = {}
    for record in (r for r in records if not r.skipped):
        per_prompt.setdefault((record["entity_type"], record["run"]), []).append(
            prompt_cbs(np.asarray(record["arab"]), np.asarray(record["western"]), tie_value)
        )
    runs = sorted({run for _, run in per_prompt})
    bars = result_bars(
        metrics,
        "entity_type",
        "cbs",
        "CBS (%)",
        labels=present,
        references=references(config),
        title="CBS per entity type",
    )
    cells = [[per_prompt.get((t, run)) for run in runs] for t in present]
    heatmap = Heatmap(
        tuple(present),
        tuple(f"run {run}" for run in runs),
        tuple(tuple(None if c is None else float(np.mean(c)) for c in row) for row in cells),
        label="CBS (%)",
        title="CBS per entity type and run",
        scale="%",
        counts=tuple(tuple(None if c is None else len(c) for c in row) for row in cells),
    )
    text = (
        "CBS = share (%) of (Arab, Western) filler pairs in which the model prefers the Western filler; "
        "50 is parity, 0 is a full preference for Arab entities. Mean over runs; std over runs. Intervals: 95%, "
        "over prompts crossed with the runs' entity samples (each run's sample fills every prompt of a type, so "
        "the spread between samples is part of the interval); n: prompts."
    )
    return [
        Section(
            "Cultural Bias Score",
            text=text,
            tables=(
                Table(
                    ("entity type", "CBS (%)", "95% interval", "n (prompts)", "std over runs (%)"),
                    rows,
                ),
            ),
            figures=(bars, heatmap),
        )
    ]
