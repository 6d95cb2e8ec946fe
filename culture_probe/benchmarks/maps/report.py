"""MAPS report views: reasoning accuracy overall and by figurative use (bars with their intervals),
and the memorisation rates per template with the accuracy on memorised vs other proverbs, each with
its n. Percentages follow the library's one rounding rule (2 decimals, half up), not the paper's
truncation, so that a report shows the number metrics.json holds (43.5897 as 43.59).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from culture_probe.benchmarks.maps.task import (
    GAP_CONFIGS,
    QUESTIONS,
    culture_gap_study,
    memorisation_templates,
)
from culture_probe.metrics.display import Scale, estimate_cells, with_n
from culture_probe.record import ResultsTable, RunRecord
from culture_probe.report.views import Bars, Reference, Section, Table
from culture_probe.tasks import Record

SCALES: dict[str, Scale] = {"accuracy": "%"}
# options of memorisation (a run without it) and of other model kinds
_MEMORISATION = {"mem_max_new_tokens", "mem_match", "mem_template_lang"}
_OTHER_KINDS = {
    # one mask: no generation budget (M9)
    "masked": {"mem_max_new_tokens", "seq2seq_style", "seq2seq_max_tokens"},
    "causal": {"mlm_letter_pieces", "seq2seq_style", "seq2seq_max_tokens"},
    "seq2seq": {"mlm_letter_pieces"},
}
# The paper's Table 4: non-figurative / figurative accuracy (%) per model and language, drawn as
# reference lines when a run repeats one of them (the released figurative flags differ slightly).
_TABLE_4 = {
    "bigscience/bloomz-3b": "58.76/57.60 53.12/61.97 53.33/60.52 51.66/47.54 52.43/45.13 55.88/49.26",
    "bigscience/bloomz-7b1": "79.66/68.20 66.66/68.30 72.00/75.18 54.30/53.55 52.43/49.55 67.64/53.30",
    "bigscience/mt0-xl": "75.14/62.21 62.50/64.08 74.67/69.54 74.17/61.74 73.78/61.94 69.12/52.94",
    "bigscience/mt0-xxl": "87.01/82.95 81.77/83.09 84.00/84.96 88.74/83.61 87.80/76.99 63.23/69.85",
    "meta-llama/Llama-2-13b-hf": "81.36/76.50 53.12/54.23 54.66/58.27 72.19/65.03 67.07/59.73 47.05/49.63",
}
PAPER_ACCURACY: dict[tuple[str, str], tuple[float, float]] = {
    (model, f"maps_{language}"): tuple(float(v) for v in cell.split("/"))  # type: ignore[misc]
    for model, cells in _TABLE_4.items()
    for language, cell in zip(("en", "zh", "id", "de", "ru", "bn"), cells.split(), strict=True)
}


def suite_studies(metrics: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The culture and language gaps (the paper's section 5.3) of each direction whose four configs
    ran, from the metrics of a suite's full runs ({config: metrics}), by study name.
    """
    accuracy = {c: m["accuracy"] for c, m in metrics.items() if m.get("accuracy") is not None}
    return {
        f"maps_culture_gap_{direction}": culture_gap_study(accuracy, direction)
        for direction, needed in GAP_CONFIGS.items()
        if all(c in accuracy for c in needed)
    }


def references(config: RunRecord) -> tuple[Reference, ...]:
    """Chance, and the paper's literal and figurative accuracy when the run repeats a Table 4 cell
    (positive question, released data).
    """
    key = (config.model.spec, config.config)
    positive = config.options.get("question", "pos") == "pos"
    if key not in PAPER_ACCURACY or not positive or not config.repeats_the_paper:
        return (Reference("chance", 50.0),)
    literal, figurative = PAPER_ACCURACY[key]
    return (
        Reference("chance", 50.0),
        Reference("paper, literal", literal),
        Reference("paper, figurative", figurative),
    )


def inert_options(config: RunRecord) -> set[str]:
    """Memorisation's options in a run without it, and the options of other model kinds."""
    unused = _OTHER_KINDS.get(str(config.model.kind), set())
    return unused | (_MEMORISATION if config.options.get("memorisation") is False else set())


def sections(
    config: RunRecord, records: Sequence[Record], metrics: Mapping[str, Any]
) -> list[Section]:
    """The views of one MAPS run."""
    options = config.options
    table = ResultsTable.of(metrics)
    estimates = {
        "all": table.overall.get("accuracy"),
        **{k: v.get("accuracy") for k, v in table.by("figurative").items()},
    }
    bars = Bars(
        {k: v for k, v in estimates.items() if v and v["value"] is not None},
        "accuracy (%)",
        references(config),
        title=f"Accuracy ({metrics_language(config)})",
        scale="%",
    )
    rows = tuple((name, *estimate_cells(estimate, "%")) for name, estimate in estimates.items())
    out = [
        Section(
            "Reasoning",
            text=f"Question: {QUESTIONS[options.get('question', 'pos')]!r}. Chance is 50%.",
            tables=(Table(("proverbs", "accuracy (%)", "95% interval", "n (proverbs)"), rows),),
            figures=(bars,),
        )
    ]
    mem = metrics.get("memorisation")
    if isinstance(mem, Mapping):
        language = next(r["language"] for r in records if r["tag"].startswith("mem"))
        templates = zip(
            memorisation_templates(language, options.get("mem_template_lang", "en")),
            mem["per_template"],
            strict=True,
        )
        mem_rows = (
            ("union over templates", with_n(mem["union"], mem["n"], "%")),
            *((f"template `{t}`", with_n(v, mem["n"], "%")) for t, v in templates),
            ("mean per template", with_n(mem["mean_per_template"], mem["n"], "%")),
        )
        subsets = metrics["subsets"]
        accuracy = ", ".join(
            f"{name} {subset_text(subsets.get(name) or {})}"
            for name in ("memorised", "not_memorised")
        )
        text = (
            "Completion of the proverb's last word (%, n proverbs). Accuracy (%) on memorised vs other proverbs: "
            + accuracy
        )
        out.append(
            Section(
                "Memorisation",
                text=text,
                tables=(Table(("memorisation", "% (n proverbs)"), mem_rows),),
            )
        )
    return out


def metrics_language(config: RunRecord) -> str:
    """The run's language, as the benchmark card lists it."""
    return ", ".join(config.benchmark.languages or ["?"])


def subset_text(subset: Mapping[str, Any]) -> str:
    """A subset's accuracy with its n (`- (n=0)` for an empty one)."""
    n = subset.get("n", 0)
    return with_n(subset.get("accuracy"), n, "%") or f"- (n={n})"
