"""DLAMA report views: per prompt language, P@1 per culture (bars with score intervals), per
predicate (table and heatmap) and the most common correct and wrong predictions (the paper's Table 3
view); object entropy; in generation mode, overlap and exact accuracy per culture.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from culture_probe.benchmarks.dlama.data import MISSING_LABELS, missing_note
from culture_probe.benchmarks.dlama.metrics import GENERATION_MEASURES, hits_at_k
from culture_probe.benchmarks.dlama.task import WEST, predicate_order
from culture_probe.data.card import CORRECTED_SUFFIX
from culture_probe.metrics.display import (
    Scale,
    bound_text,
    estimate_cells,
    format_number,
    format_value,
    interval_text,
    p_clause,
    with_n,
)
from culture_probe.record import ResultsTable, RunRecord
from culture_probe.report.views import Heatmap, Reference, Section, Table, result_bars
from culture_probe.tasks import Record

SCALES: dict[str, Scale] = {"p1": "%", "overlap": "%", "exact": "%"}
# options of the mode a run did not use (ranking vs generation), left out of its report
_RANK_ONLY = {"score", "keep_scores", "templates", "fill", "candidate_tokenization", "p1_gold"}
_GENERATE_ONLY = {"max_new_tokens", "generate_first_n"}

# The paper's Table 1: P@1 (%) of (config, prompt language, model) as
# (non-West, West, pair); drawn as reference lines when a run repeats one of these exactly.
PAPER_P1: dict[tuple[str, str, str], tuple[float, float, float]] = {
    ("dlama_arab_west", "ar", "bert-base-multilingual-cased"): (13.7, 15.1, 14.5),
    ("dlama_arab_west", "ar", "UBC-NLP/ARBERT"): (33.6, 23.0, 27.7),
    ("dlama_arab_west", "en", "bert-base-multilingual-cased"): (21.2, 37.7, 30.3),
    ("dlama_arab_west", "en", "bert-base-cased"): (27.5, 31.3, 29.6),
    ("dlama_asia_west", "ko", "bert-base-multilingual-cased"): (16.4, 28.5, 22.5),
    ("dlama_asia_west", "ko", "kykim/bert-kor-base"): (22.1, 19.5, 20.8),
    ("dlama_asia_west", "en", "bert-base-multilingual-cased"): (33.0, 39.9, 36.4),
    ("dlama_asia_west", "en", "bert-base-cased"): (38.3, 31.9, 35.1),
    ("dlama_south_america_west", "es", "bert-base-multilingual-cased"): (25.4, 33.8, 29.7),
    ("dlama_south_america_west", "es", "dccuchile/bert-base-spanish-wwm-cased"): (16.0, 26.5, 21.4),
    ("dlama_south_america_west", "en", "bert-base-multilingual-cased"): (27.0, 37.6, 32.4),
    ("dlama_south_america_west", "en", "bert-base-cased"): (26.9, 31.3, 29.2),
}


def paper_references(config: RunRecord, language: str) -> tuple[Reference, ...]:
    """The paper's P@1 for this config, prompt language and model, when the run repeats a Table 1
    cell with the paper's protocol (the default options, not a smoke subset).
    """
    key = (config.config, language, config.model.spec)
    if key not in PAPER_P1 or not config.repeats_the_paper:
        return ()
    non_west, west, pair = PAPER_P1[key]
    return (
        Reference("paper, non-West", non_west),
        Reference("paper, West", west),
        Reference("paper, pair", pair),
    )


def header_lines(config: RunRecord) -> list[str]:
    """DLAMA's lines of the report header: the labels a copy of the release may lack
    (`MISSING_LABELS`), when a language was left out (or the run did not record its languages), and
    templates not yet checked against mLAMA.
    """
    languages, protocol = config.benchmark.languages, config.protocol
    lines = []
    pair = config.config.removeprefix("dlama_").removesuffix(CORRECTED_SUFFIX)
    missing = [MISSING_LABELS[pair, lang] for lang in languages if (pair, lang) in MISSING_LABELS]
    probed = protocol.get("languages")
    unprobed = [lang for lang in languages if probed is not None and lang not in probed]
    if missing and (probed is None or unprobed):
        left_out = f" ({', '.join(unprobed)} not probed in this run)" if unprobed else ""
        lines.append(f"- **note**: {missing_note(missing[0])}{left_out}")
    if protocol.get("unverified_templates"):
        lines.append(
            f"- **provisional templates** for {', '.join(protocol['unverified_templates'])}: transcribed from the "
            "paper, not checked against the original mLAMA 1.1 files (see the DLAMA page)"
        )
    return lines


def inert_options(config: RunRecord) -> set[str]:
    """The options of the mode this run did not use."""
    return _RANK_ONLY if config.options.get("mode") == "generate" else _GENERATE_ONLY


def sections(
    config: RunRecord, records: Sequence[Record], metrics: Mapping[str, Any]
) -> list[Section]:
    """The views of one DLAMA run."""
    answered = [r for r in records if not r.skipped]
    if config.options.get("mode") == "generate":
        return generation_sections(answered, metrics)
    out = []
    for language, rows in by_language(answered):
        out += language_sections(language, rows, metrics, paper_references(config, language))
    entropy = metrics.get("object_entropy", {}).get("per_predicate", {})
    if entropy:
        cultures = sorted(entropy, key=culture_order)
        predicates = sorted({p for c in entropy.values() for p in c}, key=predicate_order)
        entropy_rows = tuple(
            (p, *(format_value(entropy[c].get(p)) for c in cultures)) for p in predicates
        )
        out.append(
            Section(
                "Object entropy (bits) per predicate",
                text="The diversity of each fact's most frequent valid object: 0 means every fact has the same answer.",
                tables=(Table(("predicate", *cultures), entropy_rows),),
            )
        )
    return out


def culture_bars(
    metrics: Mapping[str, Any],
    language: str,
    cultures: Sequence[str],
    metric: str,
    ylabel: str,
    references: Sequence[Reference] = (),
) -> Any:
    """The paper's per-culture bars of one prompt language, from the results block."""
    return result_bars(
        metrics,
        "language_culture",
        metric,
        ylabel,
        labels=[f"{language}/{c}" for c in cultures],
        names={f"{language}/{c}": c for c in cultures},
        references=references,
    )


def language_sections(
    language: str,
    rows: list[Record],
    metrics: Mapping[str, Any],
    references: Sequence[Reference] = (),
) -> list[Section]:
    """P@1 per culture (against the paper's values when the run repeats one), per predicate, and the
    most common predictions, of one prompt language.
    """
    m = metrics[language]
    cultures = sorted(m["cultures"], key=culture_order)
    hits = hits_at_k([r["prediction"] for r in rows], [r["gold"] for r in rows])
    bars = culture_bars(metrics, language, cultures, "p1", "P@1 (%)", references)
    predicates = sorted(m["predicates"], key=predicate_order)
    facts = Counter((r["predicate"], r["culture"]) for r in rows)
    grid = tuple(tuple(m["predicates"][p].get(c) for c in cultures) for p in predicates)
    counts = tuple(tuple(facts[p, c] or None for c in cultures) for p in predicates)
    return [
        Section(
            f"P@1 per culture ({language} prompts)",
            text=comparison_text(m.get("comparison")),
            tables=(culture_table(metrics, language, cultures, [("p1", "P@1 (%)")]),),
            figures=(bars,),
        ),
        Section(
            f"P@1 per predicate ({language} prompts)",
            text="Each cell: P@1 (%) and the facts it counts.",
            tables=(
                Table(
                    ("predicate", *cultures),
                    tuple(
                        (p, *(with_n(v, n, "%") for v, n in zip(row, ns, strict=True)))
                        for p, row, ns in zip(predicates, grid, counts, strict=True)
                    ),
                ),
            ),
            figures=(
                Heatmap(
                    tuple(predicates),
                    tuple(cultures),
                    grid,
                    label="P@1 (%)",
                    scale="%",
                    counts=counts,
                ),
            ),
        ),
        Section(
            f"Most common predictions ({language} prompts)",
            tables=(common_predictions(rows, hits),),
        ),
    ]


def culture_table(
    metrics: Mapping[str, Any],
    language: str,
    cultures: Sequence[str],
    measures: Sequence[tuple[str, str]],
) -> Table:
    """Metrics (`measures`: (metric, column name)) per culture of one prompt language and for the
    pair, each with its interval, and the n facts.
    """
    table = ResultsTable.of(metrics)
    by_cell = table.by("language_culture")
    cells = {c: by_cell.get(f"{language}/{c}", {}) for c in cultures}
    cells["pair"] = table.by("language").get(language, {})
    rows = []
    for label, estimates in cells.items():
        shown = [estimate_cells(estimates.get(metric), "%") for metric, _ in measures]
        rows.append(
            (
                label,
                *(cell for value, interval, _ in shown for cell in (value, interval)),
                shown[0][2],
            )
        )
    columns = [column for _, name in measures for column in (name, "95% interval")]
    return Table(("culture", *columns, "n (facts)"), tuple(rows))


def generation_sections(answered: list[Record], metrics: Mapping[str, Any]) -> list[Section]:
    """Generation mode: per language, overlap and exact accuracy per culture (bars of the overlap
    hits).
    """
    out = []
    for language, _ in by_language(answered):
        cultures = sorted(metrics[language]["n"], key=culture_order)
        table = culture_table(
            metrics, language, cultures, [(m, f"{m} (%)") for m in GENERATION_MEASURES]
        )
        bars = culture_bars(metrics, language, cultures, "overlap", "overlap accuracy (%)")
        out.append(
            Section(
                f"Generation accuracy per culture ({language} questions)",
                text="A reply is right when it contains a gold label (overlap, the paper's measure) or "
                "equals one (exact).",
                tables=(table,),
                figures=(bars,),
            )
        )
    return out


def by_language(records: list[Record]) -> list[tuple[str, list[Record]]]:
    """(language, its records), languages in sorted order."""
    groups: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        groups[record["language"]].append(record)
    return sorted(groups.items())


def culture_order(culture: str) -> tuple[bool, str]:
    """The non-Western culture first, the West last."""
    return (culture == WEST, culture)


def comparison_text(comparison: Mapping[str, Any] | None) -> str:
    """One sentence on the culture gap and its uncertainty, with the procedure that gave the
    interval and p, and, when the run has a gap per prompt language, its p-value Holm-adjusted over
    them (how many tests, said).
    """
    if not comparison:
        return ""
    if comparison.get("ci_low") is None:
        # `no interval: <reason>`
        interval = interval_text({**comparison, "value": comparison["difference"]})
    else:
        interval = f"95% interval {bound_text(comparison['ci_low'], '%')} to {bound_text(comparison['ci_high'], '%')}"
    p_value = comparison["p_value"]
    test = p_clause(p_value) if p_value is not None else "too few facts for a test"
    n_tests = comparison.get("n_tests") or 0
    if p_value is not None and n_tests > 1 and comparison.get("p_holm") is not None:
        adjusted = p_clause(comparison["p_holm"], "Holm-adjusted p")
        test += f"; {adjusted} over this run's {n_tests} culture gaps, one per prompt language"
    procedure = comparison.get("method") or "bootstrap interval, permutation test"
    return (
        f"P@1({comparison['a']}) - P@1({comparison['b']}) = {format_number(comparison['difference'], '%')} "
        f"points ({interval}; {test}; {procedure})."
    )


def common_predictions(rows: list[Record], hits: np.ndarray) -> Table:
    """Per (predicate, culture): the most common correct and the most common wrong prediction, with
    counts.
    """
    cells: dict[tuple[str, str], tuple[Counter, Counter]] = defaultdict(
        lambda: (Counter(), Counter())
    )
    for row, hit in zip(rows, hits, strict=True):
        cells[row["predicate"], row["culture"]][0 if hit else 1][row["prediction"]] += 1
    out = []
    for (predicate, culture), (right, wrong) in sorted(
        cells.items(), key=lambda kv: (predicate_order(kv[0][0]), kv[0][1])
    ):
        out.append((predicate, culture, _top(right), _top(wrong)))
    return Table(("predicate", "culture", "most common correct", "most common wrong"), tuple(out))


def _top(counter: Counter) -> str:
    if not counter:
        return ""
    label, count = min(counter.items(), key=lambda kv: (-kv[1], kv[0]))
    return f"{label} ({count})"
