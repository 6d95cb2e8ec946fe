"""MAPS report views: reasoning accuracy overall and by figurative use (bars with bootstrap intervals), and the
memorisation rates per template with the accuracy on memorised vs other proverbs. Percentages are truncated to two
decimals, as the paper prints them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from culture_probe.metrics.display import format_score
from culture_probe.report.views import Bars, Reference, Section, Table, options_of
from culture_probe.tasks import Record
from culture_probe.tasks.maps import QUESTIONS, memorisation_templates


def sections(config: Mapping[str, Any], records: Sequence[Record], metrics: Mapping[str, Any]) -> list[Section]:
    """The views of one MAPS run."""
    options = options_of(config)
    results = metrics.get("results", {})
    estimates = {"all": results.get("overall", {}).get("accuracy"),
                 **{k: v.get("accuracy") for k, v in results.get("by_figurative", {}).items()}}
    bars = Bars({k: v for k, v in estimates.items() if v and v["value"] is not None}, "accuracy (%)",
                (Reference("chance", 50.0),), title=f"Accuracy ({metrics_language(config)})")
    subsets = metrics.get("subsets", {})
    cells = {"all": metrics, "figurative": subsets.get("figurative", {}), "literal": subsets.get("non_figurative", {})}
    rows = tuple((name, shown(cell.get("accuracy")), cell.get("n", 0)) for name, cell in cells.items())
    out = [Section("Reasoning", text=f"Question: {QUESTIONS[options.get('question', 'pos')]!r}. Chance is 50%.",
                   tables=(Table(("items", "accuracy %", "n"), rows),),
                   figures=(bars,))]
    mem = metrics.get("memorisation")
    if isinstance(mem, Mapping):
        language = next(r["language"] for r in records if r["tag"].startswith("mem"))
        templates = zip(memorisation_templates(language, options.get("mem_template_lang", "en")),
                        mem["per_template"], strict=True)
        rows = (("union over templates", shown(mem["union"])),
                *((f"template `{t}`", shown(v)) for t, v in templates),
                ("mean per template", shown(mem["mean_per_template"])), ("proverbs", mem["n"]))
        subsets = metrics["subsets"]
        accuracy = ", ".join(f"{name} {shown(subsets.get(name, {}).get('accuracy'))}"
                             for name in ("memorised", "not_memorised"))
        text = f"Completion of the proverb's last word (%). Accuracy (%) on memorised vs other proverbs: {accuracy}"
        out.append(Section("Memorisation", text=text, tables=(Table(("memorisation", "%"), rows),)))
    return out


def metrics_language(config: Mapping[str, Any]) -> str:
    """The run's language, as the benchmark card lists it."""
    return ", ".join(config.get("benchmark", {}).get("languages") or ["?"])


def shown(value: float | None) -> str:
    """A percentage as the MAPS paper prints it: truncated to 2 decimals, not rounded (spec 5); None is "-"."""
    return format_score(value, 2, "truncate")

