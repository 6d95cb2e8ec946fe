"""MAPS report views: reasoning accuracy overall and by figurative use (bars with bootstrap intervals), and the
memorisation rates per template with the accuracy on memorised vs other proverbs. Percentages are truncated to two
decimals, as the paper prints them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from culture_probe.metrics.display import format_score
from culture_probe.report.views import Bars, Section, Table, options_of
from culture_probe.tasks import Record
from culture_probe.tasks.maps import QUESTIONS, memorisation_templates


def sections(config: Mapping[str, Any], records: Sequence[Record], metrics: Mapping[str, Any]) -> list[Section]:
    """The views of one MAPS run."""
    options = options_of(config)
    reason = [r for r in records if not r.skipped and r["tag"].startswith("reason")]
    groups = {"all": [float(r["correct"]) for r in reason],  # per-item values: the bars' bootstrap intervals
              "figurative": [float(r["correct"]) for r in reason if r["is_figurative"]],
              "literal": [float(r["correct"]) for r in reason if not r["is_figurative"]]}
    subsets = metrics.get("subsets", {})
    cells = {"all": metrics, "figurative": subsets.get("figurative", {}), "literal": subsets.get("non_figurative", {})}
    rows = tuple((name, shown(cell.get("accuracy")), cell.get("n", 0)) for name, cell in cells.items())
    out = [Section("Reasoning", text=f"Question: {QUESTIONS[options.get('question', 'pos')]!r}. Chance is 50%.",
                   tables=(Table(("items", "accuracy %", "n"), rows),),
                   figures=(Bars({k: v for k, v in groups.items() if v}, ylabel="accuracy (%)", scale=100.0),))]
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


def shown(value: float | None) -> str:
    """A percentage as the MAPS paper prints it: truncated to 2 decimals, not rounded (spec 5); None is "-"."""
    return format_score(value, 2, "truncate")

