"""X-FaKT report views: the headline scores, the error rate per question language, and (factual recall) the
language x country error grid with the associated pairs outlined.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from culture_probe.metrics.display import format_score
from culture_probe.metrics.factuality import GradedAnswer, error_pct
from culture_probe.report.views import Reference, Section, Table, language_country_grid, repeats_the_paper, result_bars
from culture_probe.tasks import Record
from culture_probe.tasks.xfakt import ASSOCIATIONS, COUNTRIES, LANGUAGES, graded_answers

HEADLINE = ("frs", "kts", "xfakt", "mu_assoc", "mu_non", "error_rate", "n_items")
# The paper's Table 2 (specs/xfakt.md section 6): mean associated and non-associated error (%) of factual recall per
# model, drawn as reference lines when a run repeats one of them.
PAPER_ERRORS: dict[str, tuple[float, float]] = {
    "meta-llama/Meta-Llama-3-70B-Instruct": (2.36, 9.85),
    "google/gemma-2-27b-it": (4.23, 16.46),
    "microsoft/phi-4": (12.87, 30.15),
    "microsoft/Phi-3-medium-128k-instruct": (25.09, 55.57),
    "google/gemma-2-9b-it": (4.98, 22.32),
    "meta-llama/Meta-Llama-3-8B-Instruct": (4.60, 25.77),
    "microsoft/Orca-2-7b": (31.95, 56.77),
    "deepseek-ai/deepseek-llm-7b-chat": (31.49, 63.73),
    "mistralai/Mistral-7B-Instruct-v0.2": (16.96, 45.25),
    "microsoft/Phi-3.5-mini-instruct": (41.85, 69.87),
    "microsoft/Phi-3-mini-128k-instruct": (42.45, 77.95),
    "meta-llama/Llama-3.2-3B-Instruct": (24.10, 47.48),
}


def references(config: Mapping[str, Any], part: str | None) -> tuple[Reference, ...]:
    """The paper's associated and non-associated error for this model, when the run repeats a Table 2 row."""
    paper = PAPER_ERRORS.get(config.get("model", {}).get("spec"))
    if part != "factual_recall" or paper is None or not repeats_the_paper(config):
        return ()
    return Reference("paper, associated", paper[0]), Reference("paper, non-associated", paper[1])


def sections(config: Mapping[str, Any], records: Sequence[Record], metrics: Mapping[str, Any]) -> list[Section]:
    """The views of one X-FaKT run."""
    part = (config.get("protocol") or {}).get("part")
    head = tuple((k, metrics[k]) for k in HEADLINE if k in metrics)
    out = [
        Section("X-FaKT", text=headline_text(part, metrics), tables=(Table(("metric", "value"), head),)),
        Section(
            "Error rate by question language (%)",
            tables=(Table(("language", "error %"), tuple(metrics["error_by_language"].items())),),
            figures=(
                result_bars(
                    metrics,
                    "language",
                    "error_rate",
                    "error (%)",
                    labels=[lang for lang in LANGUAGES if lang in metrics["error_by_language"]],
                    references=references(config, part),
                    title="Error rate per question language",
                ),
            ),
        ),
    ]
    if part == "factual_recall":
        cells: dict[tuple[str, str], list[GradedAnswer]] = {}
        for r in graded_answers(records):
            cells.setdefault((r["language"], r["country"]), []).append(
                GradedAnswer(r["language"], bool(r["correct"]), r["verdict"], r["country"])
            )
        errors = {key: error_pct(group) for key, group in cells.items()}
        languages = [lang for lang in LANGUAGES if any(k[0] == lang for k in errors)]
        countries = [c for c in COUNTRIES if any(k[1] == c for k in errors)]
        grid = language_country_grid(
            errors, languages=languages, countries=countries, associations=ASSOCIATIONS, label="error %"
        )
        out.append(
            Section(
                "Language x country errors",
                text="Rows: question language; columns: the entity's country; outlined: the associated pair.",
                figures=(grid,),
            )
        )
    return out


def headline_text(part: str | None, metrics: Mapping[str, Any]) -> str:
    """The scores in one sentence, or why FRS, KTS and X-FaKT are not available."""
    if part != "factual_recall" or metrics.get("kts") is None:
        reason = metrics.get("xfakt_unavailable")
        note = f" FRS, KTS and X-FaKT are not available: {reason}" if reason else ""
        return "Error rates of the replies, as graded by the judge." + note
    gap = metrics["mu_non"] - metrics["mu_assoc"]
    pct = {
        key: format_score(100 * value, 2)
        for key, value in (
            ("assoc", metrics["mu_assoc"]),  # spec: errors
            ("non", metrics["mu_non"]),
            ("gap", gap),
        )
    }
    score = {key: format_score(metrics[key], 3) for key in ("kts", "frs", "xfakt")}  # spec: scores, 3 decimals
    return (
        f"Associated-language error {pct['assoc']}% vs non-associated {pct['non']}% (gap {pct['gap']} points): "
        f"KTS {score['kts']} (1 = the same knowledge in every language), FRS {score['frs']}, "
        f"X-FaKT {score['xfakt']}."
    )
