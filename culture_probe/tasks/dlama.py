"""DLAMA protocol (spec dlama.md section 4): each fact's model ranks every object label of its predicate across
both cultures of the pair, in the fact's language; P@1 per culture, per predicate and for the pair.

Masked models use mLAMA typed querying (k masks for a k-subword candidate; the paper's protocol); causal models
score the candidate after the text left of the slot (an extension, D3); seq2seq models the sentinel span.

`mode="generate"` is the paper's optional generation mode (spec 4.6, Appendix D; not part of Table 1): chat models
answer a question per fact (Arab-West, seven predicates, en/ar) after an "encyclopedia" system message, greedily;
a reply is right when it contains a gold label (overlap, the paper's measure) or equals one (exact).
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
from culture_probe.data.dlama import candidate_sets, label_collisions, unverified_template_languages
from culture_probe.engine.types import ScoreRequest
from culture_probe.errors import UnsupportedModelError
from culture_probe.metrics.compare import compare_groups
from culture_probe.metrics.display import format_score
from culture_probe.metrics.dlama import hits_at_k, object_entropy, precision_at_k
from culture_probe.tasks.base import (
    Bars,
    GenerateProbe,
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
    split_slot,
)

TOP_K = 5  # predictions kept per record
DECIMALS = 1  # spec 5: the paper shows 1 decimal, rounded half up
WEST = "west"
# Generation mode (spec 4.6): the system message per language and {predicate: (en, ar) question}, {} = sub_label.
SYSTEM = {"en": "You are an encyclopedia.", "ar": "تعامل كأنك موسوعة."}
QUESTIONS = {
    "P30": ('Where is "{}" located in? Reply with a name of a continent only.', 'أين يقع "{}"؟ أجب باسم قارة فقط'),
    "P36": ('What is the capital of "{}"? Reply with the name of the city only.',
            'ما هي عاصمة "{}"؟ أجب باسم المدينة فقط'),
    "P37": ('What is the official language of "{}"? Reply with the language name only.',
            'ما هي اللغة الرسمية ل "{}"؟ أجب باسم لغة فقط'),
    "P47": ('What is the country that shares border with "{}"? Reply with a country name only.',
            'ما هي الدولة التي تشترك حدودها مع "{}"؟ أجب باسم دولة فقط'),
    "P190": ('What is the twin city of "{}"? Reply with the name of the city only.',
             'ما هي المدينة التوأم لمدينة "{}"؟ أجب باسم المدينة فقط'),
    "P530": ('What is the country that maintains dimplomatic relations with "{}"? Reply with a country name only.',
             'ما هي الدولة التي تقيم علاقات دبلوماسية مع "{}"؟ أجب باسم دولة فقط'),
    "P1376": ('What is the country of which the capital is "{}"? Reply with a country name only.',
              'ما هي الدولة التي عاصمتها "{}"؟ أجب باسم دولة فقط'),
}
MEASURES = ("overlap", "exact")


@dataclass(frozen=True)
class DlamaOptions:
    """DLAMA switches; defaults are the paper's protocol."""

    score: Literal["mean", "sum"] = "mean"  # the paper ranks by the mean sub-token log-prob
    keep_scores: bool = False  # write every candidate's sum, token count and per-token log-probs to items.jsonl
    mode: Literal["rank", "generate"] = "rank"  # generate: the optional chat-model mode of spec 4.6
    max_new_tokens: int = 32  # generate mode (the paper does not say; replies are asked to be one name)


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
        Deviation("D6", "items.jsonl keeps each fact's top 5 candidates and their scores, not the sum, token count "
                  "and mean of every candidate (spec 4.4), which would multiply its size by the candidate count; "
                  "--option keep_scores=true records them all."),
    )

    def __init__(self, config: str, options: Any = None, *, kind: Any, seed: int = 0):
        super().__init__(config, options, kind=kind, seed=seed)
        if self.options.mode == "generate" and kind != "causal":
            raise UnsupportedModelError(
                f"DLAMA generation mode asks a chat model with a system message: it needs a causal model with a "
                f"chat template, not a {kind} one. Use mode=rank for {kind} models.")

    def describe_deviations(self) -> list[dict[str, str]]:
        """The log, with D4 in generation mode."""
        log = super().describe_deviations()
        if self.options.mode == "generate":
            log.append({"id": "D4", "description": "Generation mode asks every fact in scope, not the first 3 facts "
                        "per file as the paper's appendix did."})
        return log

    def describe(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Candidate-set sizes and one hash over all sets."""
        sets = candidate_sets(rows)
        digest = hashlib.sha256(json.dumps(sorted((list(k), v) for k, v in sets.items()),
                                           ensure_ascii=False).encode("utf-8")).hexdigest()
        return {"candidate_sets": {f"{lang}|{pred}": len(v) for (lang, pred), v in sorted(sets.items())},
                "candidates_sha256": digest, "label_collisions": label_collisions(rows),
                "unverified_templates": unverified_template_languages(rows)}

    # ------------------------------------------------------------ hooks

    def _probes(self, rows: Sequence[Mapping[str, Any]], stage: str, previous: Sequence[Record]) -> Iterable[Probe]:
        sets = candidate_sets(rows)
        for row in rows:
            meta = {"language": row["language"], "predicate": row["predicate"], "culture": row["culture"],
                    "gold": list(row["obj_label"]), "obj_uri": list(row["obj_uri"])}
            if not row["sub_label"].strip() or not [o for o in row["obj_label"] if o.strip()]:
                yield Skipped(row["id"], "empty subject or object label", meta=meta)
                continue
            if self.options.mode == "generate":
                yield self._question(row, meta)
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

    def _question(self, row: Mapping[str, Any], meta: dict[str, Any]) -> Probe:
        """The generation-mode probe of one fact, or why it is out of the mode's scope (spec 4.6)."""
        language, predicate = row["language"], row["predicate"]
        if row.get("pair") != "arab_west" or language not in SYSTEM or predicate not in QUESTIONS:
            return Skipped(row["id"], f"no generation question for {predicate} in {language} (spec 4.6 covers "
                           f"Arab-West, en/ar, {', '.join(QUESTIONS)})", meta=meta)
        meta["prompt"] = question(predicate, language, row["sub_label"],
                                  corrected=self.config.endswith("_corrected"))
        return GenerateProbe(row["id"], meta["prompt"], self.options.max_new_tokens, chat=True,
                             system=SYSTEM[language], meta=meta)

    def _record(self, probe: Probe, output: Any) -> Record:
        if isinstance(probe, GenerateProbe):
            reply = str(output).strip()
            return {"reply": reply, **answer_matches(reply, probe.meta["gold"])}
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
        if self.options.mode == "generate":
            for (language,), rows in iter_groups(scored, "language"):
                out[language] = generation_metrics(rows)
                out.update({f"{m}_{language}_{c}": v for m in MEASURES for c, v in out[language][m].items()})
            return out
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
        if self.options.mode == "generate":
            return [*generation_sections(scored, metrics), *skipped_sections(records)]
        sections = []
        for (language,), rows in iter_groups(scored, "language"):
            m = metrics[language]
            cultures = sorted(m["cultures"], key=lambda c: (c == WEST, c))
            hits = hits_at_k([r["prediction"] for r in rows], [r["gold"] for r in rows])
            bars = Bars({c: [h for h, r in zip(hits, rows, strict=True) if r["culture"] == c] for c in cultures},
                        ylabel="P@1 (%)", scale=100)
            table = Table(("culture", "P@1", "facts"),
                          tuple((c, format_score(m["cultures"][c], DECIMALS), m["n"][c]) for c in cultures)
                          + (("pair", format_score(m["p1"], DECIMALS), sum(m["n"].values())),))
            text = comparison_text(m.get("comparison"))
            sections.append(Section(f"P@1 per culture ({language} prompts)", text=text, tables=(table,),
                                    figures=(bars,)))
            predicates = sorted(m["predicates"], key=predicate_order)
            grid = tuple(tuple(m["predicates"][p].get(c) for c in cultures) for p in predicates)
            sections.append(Section(
                f"P@1 per predicate ({language} prompts)",
                tables=(Table(("predicate", *cultures),
                              tuple((p, *(format_score(v, DECIMALS) for v in row))
                                    for p, row in zip(predicates, grid, strict=True))),),
                figures=(Heatmap(tuple(predicates), tuple(cultures), grid, label="P@1 (%)"),),
            ))
            sections.append(Section(f"Most common predictions ({language} prompts)",
                                    tables=(common_predictions(rows, hits),)))
        entropy = metrics.get("object_entropy", {}).get("per_predicate", {})
        if entropy:
            cultures = sorted(entropy, key=lambda c: (c == WEST, c))
            predicates = sorted({p for c in entropy.values() for p in c}, key=predicate_order)
            rows = tuple((p, *(format_score(entropy[c].get(p), DECIMALS) for c in cultures)) for p in predicates)
            sections.append(Section("Object entropy (bits) per predicate", text="The diversity of each fact's most "
                                    "frequent valid object: 0 means every fact has the same answer.",
                                    tables=(Table(("predicate", *cultures), rows),)))
        return [*sections, *skipped_sections(records)]


def skipped_sections(records: Sequence[Record]) -> list[Section]:
    """The skipped facts per reason (none when nothing was skipped)."""
    skipped = Counter(r["skipped"] for r in records if "skipped" in r)
    if not skipped:
        return []
    return [Section("Skipped facts (not counted in P@1)",
                    tables=(Table(("reason", "facts"), tuple(skipped.items())),))]


# ---------------------------------------------------------------- prompts and candidates


def prompt(template: str, subject: str) -> tuple[str, str]:
    """(left, right) of a template: strip it, put the stripped subject in [X] (str.replace, D1), split at [Y]."""
    return split_slot(template.strip().replace("[X]", subject.strip()), "[Y]")


def question(predicate: str, language: str, subject: str, *, corrected: bool = False) -> str:
    """The generation-mode question (spec 4.6); `corrected` fixes the P530 typo "dimplomatic" (spec 7)."""
    text = QUESTIONS[predicate][list(SYSTEM).index(language)].format(subject.strip())
    return text.replace("dimplomatic", "diplomatic") if corrected else text


def answer_matches(reply: str, gold: Sequence[str]) -> dict[str, bool]:
    """Spec 4.6: `overlap` (the paper's measure) iff some gold label is a substring of the reply; `exact` iff the
    stripped reply equals a gold label.
    """
    labels = [g for g in gold if g.strip()]
    return {"overlap": any(g in reply for g in labels), "exact": reply.strip() in labels}


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


def generation_metrics(rows: list[Record]) -> dict[str, Any]:
    """Generation mode, one language: overlap and exact accuracy (%) per culture and for the pair, and overlap per
    (predicate, culture).
    """
    def pct(group: list[Record], measure: str) -> float:
        return 100.0 * float(np.mean([r[measure] for r in group]))

    cultures = list(iter_groups(rows, "culture"))
    out: dict[str, Any] = {m: {c: pct(g, m) for (c,), g in cultures} | {"pair": pct(rows, m)} for m in MEASURES}
    out["n"] = {c: len(g) for (c,), g in cultures}
    out["predicates"] = {p: {c: pct(g, "overlap") for (c,), g in iter_groups(group, "culture")}
                         for (p,), group in iter_groups(rows, "predicate")}
    return out


def generation_sections(scored: list[Record], metrics: Mapping[str, Any]) -> list[Section]:
    """Generation mode: per language, overlap and exact accuracy per culture (bars of the overlap hits)."""
    sections = []
    for (language,), rows in iter_groups(scored, "language"):
        m = metrics[language]
        cultures = sorted(m["n"], key=lambda c: (c == WEST, c))
        table = Table(("culture", "overlap %", "exact %", "facts"),
                      tuple((c, *(format_score(m[k][c], DECIMALS) for k in MEASURES), m["n"][c]) for c in cultures)
                      + (("pair", *(format_score(m[k]["pair"], DECIMALS) for k in MEASURES), len(rows)),))
        bars = Bars({c: [float(r["overlap"]) for r in rows if r["culture"] == c] for c in cultures},
                    ylabel="overlap accuracy (%)", scale=100)
        sections.append(Section(f"Generation accuracy per culture ({language} questions)",
                                text="A reply is right when it contains a gold label (overlap, the paper's "
                                "measure) or equals one (exact).", tables=(table,), figures=(bars,)))
    return sections


def comparison_text(comparison: Mapping[str, Any] | None) -> str:
    """One sentence on the culture gap and its uncertainty."""
    if not comparison:
        return ""
    low, high = (format_score(comparison[key], DECIMALS) for key in ("ci_low", "ci_high"))
    return (f"P@1({comparison['a']}) - P@1({comparison['b']}) = {format_score(comparison['difference'], DECIMALS)} "
            f"points (bootstrap 95% interval {low} to {high}; "
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
