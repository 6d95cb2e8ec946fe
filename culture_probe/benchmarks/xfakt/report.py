"""X-FaKT report views: the headline scores, the error rate per question language, and (factual
recall) the language x country error grid with the associated pairs outlined.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from culture_probe.benchmarks.xfakt.metrics import GradedAnswer, error_pct
from culture_probe.benchmarks.xfakt.task import (
    ASSOCIATIONS,
    COUNTRIES,
    LANGUAGES,
    XfaktOptions,
    graded_answers,
)
from culture_probe.metrics.display import Scale, estimate_cells, format_number
from culture_probe.record import ResultsTable, RunRecord
from culture_probe.report.views import (
    Reference,
    Section,
    Table,
    chance_cell,
    chance_reference,
    language_country_grid,
    result_bars,
)
from culture_probe.tasks import Record
from culture_probe.tasks.options import options_from_dict

SCALES: dict[str, Scale] = {"error_rate": "%", "frs": "0-1", "kts": "0-1", "xfakt": "0-1"}
# the headline table: each number with its unit, since it mixes % with 0-1 scores
HEADLINE: dict[str, tuple[str, Scale | None]] = {
    "frs": ("0-1 score", "0-1"),
    "kts": ("0-1 score", "0-1"),
    "xfakt": ("0-1 score", "0-1"),
    "mu_assoc": ("0-1 share of wrong answers", "0-1"),
    "mu_non": ("0-1 share of wrong answers", "0-1"),
    "error_rate": ("% of wrong answers", "%"),
    "n_items": ("questions", None),
}
# options that act only when replies are generated (and judged), only when answers are ranked, or
# only on the language x country transfer scores of factual recall
_GENERATE_ONLY = {
    "judge",
    "judge_model",
    "max_new_tokens",
    "judge_max_new_tokens",
    "double_bos",
    "strip_echo",
}
_LLM_JUDGE_ONLY = {"judge_model", "judge_max_new_tokens"}
_TRANSFER_ONLY = {"round_cells", "round_statistics", "tiers"}
# The paper's Table 2: mean associated and non-associated error (%) of factual recall per
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


def references(config: RunRecord, part: str | None) -> tuple[Reference, ...]:
    """The paper's associated and non-associated error for this model, when the run repeats a Table
    2 row.
    """
    paper = PAPER_ERRORS.get(config.model.spec)
    if part != "factual_recall" or paper is None or not config.repeats_the_paper:
        return ()
    return Reference("paper, associated", paper[0]), Reference("paper, non-associated", paper[1])


def inert_options(config: RunRecord) -> set[str]:
    """The options that did not act on this run: a ranking run has no reply to generate and no
    judge; a generating run ranks nothing, and its string judge needs no judge model; only factual
    recall has transfer scores; only a causal model's chat template can double its BOS (X1).
    """
    options, part = config.options, config.protocol.get("part")
    if options.get("mode") == "rank":
        unused = set(_GENERATE_ONLY)
    else:
        unused = {"rank_prompt"} | (_LLM_JUDGE_ONLY if options.get("judge") == "string" else set())
        unused |= {"double_bos"} if config.model.kind not in (None, "causal") else set()
    return unused | (_TRANSFER_ONLY if part is not None and part != "factual_recall" else set())


def sections(
    config: RunRecord, records: Sequence[Record], metrics: Mapping[str, Any]
) -> list[Section]:
    """The views of one X-FaKT run."""
    part = config.protocol.get("part")
    head = tuple(
        (k, format_number(metrics[k], scale), unit)
        for k, (unit, scale) in HEADLINE.items()
        if k in metrics
    )
    by_language = ResultsTable.of(metrics).by("language")
    languages = [lang for lang in LANGUAGES if lang in metrics["error_by_language"]]
    language_rows = tuple(
        (lang, *estimate_cells(by_language.get(lang, {}).get("error_rate"), "%"))
        for lang in languages
    )
    out = [
        Section(
            "X-FaKT",
            text=headline_text(part, metrics, grading(config)),
            tables=(Table(("metric", "value", "unit"), head),),
        ),
        Section(
            "Error rate by question language (%)",
            tables=(
                Table(("language", "error (%)", "95% interval", "n (questions)"), language_rows),
            ),
            figures=(
                result_bars(
                    metrics,
                    "language",
                    "error_rate",
                    "error (%)",
                    labels=languages,
                    references=references(config, part),
                    title="Error rate per question language",
                ),
            ),
        ),
    ]
    cells: dict[tuple[str, str], list[GradedAnswer]] = {}
    for r in (
        graded_answers(
            records, llm_judged=options_from_dict(XfaktOptions, config.options).llm_judged
        )
        if part == "factual_recall"
        else ()
    ):
        cells.setdefault((r["language"], r["country"]), []).append(
            GradedAnswer(r["language"], bool(r["correct"]), r["verdict"], r["country"])
        )
    if cells:
        errors = {key: error_pct(group) for key, group in cells.items()}
        grid = language_country_grid(
            errors,
            languages=[lang for lang in LANGUAGES if any(k[0] == lang for k in errors)],
            countries=[c for c in COUNTRIES if any(k[1] == c for k in errors)],
            associations=ASSOCIATIONS,
            label="error (%)",
            counts={key: len(group) for key, group in cells.items()},
            scale="%",
        )
        # every question ranks the same countries, so its chance error (1 - 1/k) is the same in
        # every cell
        grid = replace(grid, references=chance_reference(metrics, "error_rate"))
        out.append(
            Section(
                "Language x country errors",
                text="Rows: question language; columns: the entity's country; outlined: the associated pair; "
                "each cell: error (%) and its n questions.",
                figures=(grid,),
            )
        )
    return out


def grading(config: RunRecord) -> str:
    """How the run's answers were graded, as the headline sentence says it: ranked, or judged (by
    which judge).
    """
    if config.options.get("mode") == "rank":
        return "of the top-ranked answers (the answer the model scores highest among the countries)"
    judge = config.protocol.get("judge")
    return "of the replies, as graded by the judge" + (f" ({judge})" if judge else "")


def headline_text(
    part: str | None, metrics: Mapping[str, Any], graded: str = "of the replies"
) -> str:
    """The scores in one sentence, or why FRS, KTS and X-FaKT are not available; `graded` says how
    the answers were graded (`grading`).
    """
    if part != "factual_recall" or metrics.get("kts") is None:
        reason = metrics.get("xfakt_unavailable")
        note = f" FRS, KTS and X-FaKT are not available: {reason}" if reason else ""
        return f"Error rates {graded}." + note
    gap = metrics["mu_non"] - metrics["mu_assoc"]
    pct = {
        key: format_number(100 * value, "%")
        for key, value in (
            ("assoc", metrics["mu_assoc"]),  # spec: errors
            ("non", metrics["mu_non"]),
            ("gap", gap),
        )
    }
    # spec: scores, 3 decimals
    score = {key: format_number(metrics[key], "0-1") for key in ("kts", "frs", "xfakt")}
    random = ResultsTable.of(metrics).chance.get("kts")
    # KTS is high for a model at chance by construction: say what random answers score on these
    # cells beside it
    reference = (
        f"; random answers score {chance_cell(random, '0-1')} on these cells" if random else ""
    )
    return (
        f"Associated-language error {pct['assoc']}% vs non-associated {pct['non']}% (gap {pct['gap']} points): "
        f"KTS {score['kts']} (1 = the same knowledge in every language{reference}), FRS {score['frs']}, "
        f"X-FaKT {score['xfakt']}."
    )
