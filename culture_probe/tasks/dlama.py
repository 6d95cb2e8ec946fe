"""DLAMA protocol (spec dlama.md section 4): each fact's model ranks every object label of its predicate across
both cultures of the pair, in the fact's language; P@1 per culture, per predicate and for the pair.

Masked models use mLAMA typed querying (k masks for a k-subword candidate; the paper's protocol); causal models
score the candidate after the text left of the slot (an extension, D3); seq2seq models the sentinel span.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from culture_probe.data.card import Deviation
from culture_probe.engine.types import ScoreRequest
from culture_probe.metrics.compare import compare_groups
from culture_probe.metrics.dlama import hits_at_k, object_entropy, precision_at_k
from culture_probe.tasks.base import (
    Bars,
    Heatmap,
    Probe,
    Record,
    ScoreProbe,
    Section,
    Skipped,
    Table,
    Task,
    all_scores,
    iter_groups,
    ranked_candidates,
    rounded,
    split_slot,
)

TOP_K = 5  # predictions kept per record
WEST = "west"


@dataclass(frozen=True)
class DlamaOptions:
    """DLAMA switches; defaults are the paper's protocol."""

    score: Literal["mean", "sum"] = "mean"  # the paper ranks by the mean sub-token log-prob
    keep_scores: bool = False  # write every candidate's sum, token count and per-token log-probs to items.jsonl


class DlamaTask(Task):
    """DLAMA-v1: Wikidata facts of two contrasting cultures, asked in English and a local language."""

    Options = DlamaOptions
    options: DlamaOptions
    deviations = (
        Deviation("D1", "Subjects inserted with plain str.replace (the original T5 path used re.sub('[X]', ...), "
                  "a character class that replaced every letter X)."),
        Deviation("D2", "Candidates are scored with their in-context token ids (the original tokenised them "
                  "without a leading space; identical for the WordPiece models of the paper)."),
        Deviation("D3", "Causal models: mean log-prob of the candidate after the text left of the slot: a "
                  "culture_probe extension, not comparable with the paper."),
        Deviation("D5", "Fast tokenizers with [MASK] as a special token (what the released code effectively ran)."),
    )

    def describe(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Candidate-set sizes and one hash over all sets."""
        sets = candidate_sets(rows)
        digest = hashlib.sha256(json.dumps(sorted((list(k), v) for k, v in sets.items()),
                                           ensure_ascii=False).encode("utf-8")).hexdigest()
        return {"candidate_sets": {f"{lang}|{pred}": len(v) for (lang, pred), v in sorted(sets.items())},
                "candidates_sha256": digest, "label_collisions": label_collisions(rows)}

    # ------------------------------------------------------------ hooks

    def _probes(self, rows: Sequence[Mapping[str, Any]], stage: str, previous: Sequence[Record]) -> Iterable[Probe]:
        sets = candidate_sets(rows)
        for row in rows:
            meta = {"language": row["language"], "predicate": row["predicate"], "culture": row["culture"],
                    "gold": list(row["obj_label"]), "obj_uri": list(row["obj_uri"])}
            if not row["sub_label"].strip() or not [o for o in row["obj_label"] if o.strip()]:
                yield Skipped(row["id"], "empty subject or object label", meta=meta)
                continue
            if not row["template"].strip():  # ko P17/P19: unreadable in the paper, no vendored string
                yield Skipped(row["id"], f"no {row['language']} template for {row['predicate']} (load the data "
                              "with mlama_templates_dir= for the mLAMA 1.1 strings)", meta=meta)
                continue
            left, right = prompt(row["template"], row["sub_label"])
            meta["prompt"] = f"{left}[Y]{right}"
            stripped = left.rstrip()  # a space before the slot moves onto the candidate (in-context ids)
            request = ScoreRequest(left=stripped, candidates=sets[row["language"], row["predicate"]], right=right,
                                   sep=" " if stripped != left else "")
            yield ScoreProbe(row["id"], request, meta=meta, keep_tokens=self.options.keep_scores)

    def _record(self, probe: Probe, output: Any) -> Record:
        ranking = ranked_candidates(output, self.options.score)
        scores = dict(zip(output.candidates, output.scores(self.options.score).tolist(), strict=True))
        record = {"prediction": ranking[0], "top": ranking[:TOP_K],
                  "top_scores": [round(scores[c], 6) for c in ranking[:TOP_K]], "n_candidates": len(ranking)}
        if self.options.keep_scores:
            record["scores"] = all_scores(output)
        return record

    def _metrics(self, records: list[Record]) -> dict[str, Any]:
        scored = [r for r in records if "skipped" not in r]
        out: dict[str, Any] = {"n_facts": len(scored), "n_skipped": len(records) - len(scored)}
        for (language,), rows in iter_groups(scored, "language"):
            out[language] = language_metrics(rows)
            out[f"p1_{language}"] = out[language]["p1"]
            out.update({f"p1_{language}_{c}": v for c, v in out[language]["cultures"].items()})
        if scored:
            first = [r for r in scored if r["language"] == scored[0]["language"]]
            out["object_entropy"] = object_entropy([r["obj_uri"] for r in first], [r["predicate"] for r in first],
                                                   [r["culture"] for r in first])
        return out

    # ------------------------------------------------------------ report views

    def sections(self, records: Sequence[Record], metrics: Mapping[str, Any]) -> list[Section]:
        """Per language: P@1 per culture (bars with bootstrap intervals), per predicate (table and heatmap),
        and the most common correct and wrong predictions (the paper's Table 3 view).
        """
        scored = [r for r in records if "skipped" not in r]
        sections = []
        for (language,), rows in iter_groups(scored, "language"):
            m = metrics[language]
            cultures = sorted(m["cultures"], key=lambda c: (c == WEST, c))
            hits = hits_at_k([r["prediction"] for r in rows], [r["gold"] for r in rows])
            bars = Bars({c: [h for h, r in zip(hits, rows, strict=True) if r["culture"] == c] for c in cultures},
                        ylabel="P@1 (%)", scale=100)
            table = Table(("culture", "P@1", "facts"),
                          tuple((c, rounded(m["cultures"][c]), m["n"][c]) for c in cultures)
                          + (("pair", rounded(m["p1"]), sum(m["n"].values())),))
            text = comparison_text(m.get("comparison"))
            sections.append(Section(f"P@1 per culture ({language} prompts)", text=text, tables=(table,),
                                    figures=(bars,)))
            predicates = sorted(m["predicates"], key=predicate_order)
            grid = tuple(tuple(m["predicates"][p].get(c) for c in cultures) for p in predicates)
            sections.append(Section(
                f"P@1 per predicate ({language} prompts)",
                tables=(Table(("predicate", *cultures),
                              tuple((p, *map(rounded, row)) for p, row in zip(predicates, grid, strict=True))),),
                figures=(Heatmap(tuple(predicates), tuple(cultures), grid, label="P@1 (%)"),),
            ))
            sections.append(Section(f"Most common predictions ({language} prompts)",
                                    tables=(common_predictions(rows, hits),)))
        entropy = metrics.get("object_entropy", {}).get("per_predicate", {})
        if entropy:
            cultures = sorted(entropy, key=lambda c: (c == WEST, c))
            predicates = sorted({p for c in entropy.values() for p in c}, key=predicate_order)
            rows = tuple((p, *(rounded(entropy[c].get(p)) for c in cultures)) for p in predicates)
            sections.append(Section("Object entropy (bits) per predicate", text="The diversity of each fact's most "
                                    "frequent valid object: 0 means every fact has the same answer.",
                                    tables=(Table(("predicate", *cultures), rows),)))
        skipped = Counter(r["skipped"] for r in records if "skipped" in r)
        if skipped:
            sections.append(Section("Skipped facts (not counted in P@1)",
                                    tables=(Table(("reason", "facts"), tuple(skipped.items())),)))
        return sections


# ---------------------------------------------------------------- prompts and candidates


def prompt(template: str, subject: str) -> tuple[str, str]:
    """(left, right) of a template: strip it, put the stripped subject in [X] (str.replace, D1), split at [Y]."""
    return split_slot(template.strip().replace("[X]", subject.strip()), "[Y]")


def candidate_sets(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], tuple[str, ...]]:
    """{(language, predicate): every object label of both cultures, sorted in code-point order} (spec 4.2)."""
    sets: dict[tuple[str, str], set[str]] = defaultdict(set)
    for row in rows:
        sets[row["language"], row["predicate"]].update(o for o in row["obj_label"] if o.strip())
    return {key: tuple(sorted(labels)) for key, labels in sets.items()}


def label_collisions(rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """{"language|predicate": number of labels shared by two or more QIDs} (they become one candidate)."""
    uris: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for row in rows:
        for uri, label in zip(row["obj_uri"], row["obj_label"], strict=True):
            uris[row["language"], row["predicate"], label].add(uri)
    counts = Counter(f"{lang}|{pred}" for (lang, pred, _), found in uris.items() if len(found) > 1)
    return dict(sorted(counts.items()))


def predicate_order(predicate: str) -> tuple[int, str]:
    """P17 before P103 (numeric order of the id)."""
    digits = predicate.lstrip("P")
    return (int(digits) if digits.isdigit() else 10**9, predicate)


# ---------------------------------------------------------------- metrics


def language_metrics(rows: list[Record]) -> dict[str, Any]:
    """P@1 of one prompt language: the pair (micro), each culture, each (predicate, culture), and the
    non-West minus West difference with a bootstrap interval and a permutation p-value.
    """
    predictions, golds = [r["prediction"] for r in rows], [r["gold"] for r in rows]
    by_culture = precision_at_k(predictions, golds, groups=[r["culture"] for r in rows])
    by_cell = precision_at_k(predictions, golds, groups=[f"{r['predicate']}|{r['culture']}" for r in rows])
    predicates: dict[str, dict[str, float | None]] = defaultdict(dict)
    for key, value in by_cell["groups"].items():
        predicate, culture = key.split("|")
        predicates[predicate][culture] = value["precision"]
    result = {
        "p1": by_culture["precision"],
        "cultures": {c: v["precision"] for c, v in by_culture["groups"].items()},
        "n": {c: v["n"] for c, v in by_culture["groups"].items()},
        "predicates": dict(predicates),
    }
    cultures = set(result["cultures"])
    if len(cultures) == 2 and WEST in cultures:
        hits = hits_at_k(predictions, golds) * 100
        result["comparison"] = compare_groups(hits, [r["culture"] for r in rows], reference=WEST,
                                              n_resamples=2000)["comparisons"][0]
    return result


def comparison_text(comparison: Mapping[str, Any] | None) -> str:
    """One sentence on the culture gap and its uncertainty."""
    if not comparison:
        return ""
    return (f"P@1({comparison['a']}) - P@1({comparison['b']}) = {comparison['difference']:.1f} points "
            f"(bootstrap 95% interval {comparison['ci_low']:.1f} to {comparison['ci_high']:.1f}; "
            f"permutation p = {comparison['p_value']:.3g}).")


def common_predictions(rows: list[Record], hits: np.ndarray) -> Table:
    """Per (predicate, culture): the most common correct and the most common wrong prediction, with counts."""
    cells: dict[tuple[str, str], tuple[Counter, Counter]] = defaultdict(lambda: (Counter(), Counter()))
    for row, hit in zip(rows, hits, strict=True):
        cells[row["predicate"], row["culture"]][0 if hit else 1][row["prediction"]] += 1
    out = []
    for (predicate, culture), (right, wrong) in sorted(cells.items(), key=lambda kv: (predicate_order(kv[0][0]),
                                                                                      kv[0][1])):
        out.append((predicate, culture, _top(right), _top(wrong)))
    return Table(("predicate", "culture", "most common correct", "most common wrong"), tuple(out))


def _top(counter: Counter) -> str:
    if not counter:
        return ""
    label, count = min(counter.items(), key=lambda kv: (-kv[1], kv[0]))
    return f"{label} ({count})"


TASK = DlamaTask
