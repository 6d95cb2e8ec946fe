"""DLAMA protocol (the paper's section 5.1): each fact's model ranks every object label of its
predicate across both cultures of the pair, in the fact's language; P@1 per culture, per predicate
and for the pair.

Masked models use mLAMA typed querying (k masks for a k-subword candidate; the paper's protocol);
causal models score the candidate after the text left of the slot (an extension, D3); seq2seq models
the sentinel span.

`mode="generate"` is the paper's optional generation mode (Appendix D; not part of Table 1): chat
models answer a question per fact (Arab-West, seven predicates, en/ar) after an "encyclopedia"
system message, greedily; a reply is right when it contains a gold label (overlap, the paper's
measure) or equals one (exact).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from types import MappingProxyType
from typing import Any, Literal

from culture_probe.benchmarks.dlama.metrics import (
    AnsweredFact,
    RankedFact,
    generation_summary,
    hits_at_k,
    ranking_summary,
)
from culture_probe.data.registry import Benchmark
from culture_probe.data.resources import Need
from culture_probe.engine.types import GenerateOptions, ScoreOptions
from culture_probe.metrics import chance
from culture_probe.metrics.consistency import RANKING_DEPTH, AlignedAnswer
from culture_probe.metrics.results import UnitTable, UnitValue, unit_table
from culture_probe.record import SamplingDesign
from culture_probe.tasks.base import (
    ModelNeed,
    RecordFields,
    Scores,
    Stage,
    Task,
    all_scores,
    cloze_probe,
    missing_id,
    split_slot,
)
from culture_probe.tasks.deviations import Deviation, Scope
from culture_probe.tasks.filling import Fill, fill_slots
from culture_probe.tasks.options import at_least
from culture_probe.tasks.probes import GenerateProbe, Probe, Record, Skipped
from culture_probe.tasks.sampling import Parallel, Smoke
from culture_probe.util.typecheck import check_types

TOP_K = 5  # predictions kept per record
WEST = "west"
# Generation mode (the paper's Appendix D): the system message per language and {predicate: (en, ar)
# question}, {} = sub_label.
SYSTEM = {"en": "You are an encyclopedia.", "ar": "تعامل كأنك موسوعة."}
QUESTIONS = {
    "P30": (
        'Where is "{}" located in? Reply with a name of a continent only.',
        'أين يقع "{}"؟ أجب باسم قارة فقط',
    ),
    "P36": (
        'What is the capital of "{}"? Reply with the name of the city only.',
        'ما هي عاصمة "{}"؟ أجب باسم المدينة فقط',
    ),
    "P37": (
        'What is the official language of "{}"? Reply with the language name only.',
        'ما هي اللغة الرسمية ل "{}"؟ أجب باسم لغة فقط',
    ),
    "P47": (
        'What is the country that shares border with "{}"? Reply with a country name only.',
        'ما هي الدولة التي تشترك حدودها مع "{}"؟ أجب باسم دولة فقط',
    ),
    "P190": (
        'What is the twin city of "{}"? Reply with the name of the city only.',
        'ما هي المدينة التوأم لمدينة "{}"؟ أجب باسم المدينة فقط',
    ),
    "P530": (
        'What is the country that maintains dimplomatic relations with "{}"? Reply with a country name only.',
        'ما هي الدولة التي تقيم علاقات دبلوماسية مع "{}"؟ أجب باسم دولة فقط',
    ),
    "P1376": (
        'What is the country of which the capital is "{}"? Reply with a country name only.',
        'ما هي الدولة التي عاصمتها "{}"؟ أجب باسم دولة فقط',
    ),
}


@dataclass(frozen=True)
class DlamaOptions:
    """DLAMA switches; defaults are the paper's protocol."""

    score: Literal["mean", "sum"] = "mean"  # the paper ranks by the mean sub-token log-prob
    # write every candidate's sum, token count and per-token log-probs to items.jsonl
    keep_scores: bool = False
    # generate: the optional chat-model mode of the paper's Appendix D
    mode: Literal["rank", "generate"] = "rank"
    # generate mode (the paper does not say; replies are asked to be one name)
    max_new_tokens: int = 32
    # an mLAMA 1.1 folder (<lang>/templates.jsonl) or a JSON {lang: {pred: template}}
    templates: str | None = None
    # D1: "upstream_regex" fills [X] with re.sub("[X]", ...) as the released T5/mT5 path did
    # (brackets stay, every capital X of the template becomes the subject); "replace" is plain
    # str.replace
    fill: Fill = "replace"
    # D2: "alone" scores each candidate by its ids as tokenized on its own (the released masked
    # path's tokenizer.tokenize(obj): no leading-space piece on BPE/SentencePiece); "in_context" as
    # it reads after the slot
    candidate_tokenization: Literal["in_context", "alone"] = "in_context"
    # D4: generation mode asks only the first N facts of each (language, predicate, culture) file,
    # as the released GPT script did with N = 3; None asks every fact in scope
    generate_first_n: int | None = None
    # D7: "first" counts a fact right only when the top candidate is its first listed label, as the
    # released T5 path's P@1 did (ranks in obj_label order, ranks[0] scored); "any" when it is any
    # of its labels
    p1_gold: Literal["any", "first"] = "any"

    def __post_init__(self) -> None:
        check_types(self)
        at_least("max_new_tokens", self.max_new_tokens, 1)
        at_least("generate_first_n", self.generate_first_n, 1, none_ok=True)

    def needs(self, benchmark: Benchmark) -> dict[str, Need]:
        """The probing templates (vendored, or the user's file given as `templates=`)."""
        if self.mode != "rank":
            return {}
        params = (("path", self.templates),) if self.templates else ()
        return {"templates": Need("dlama", "templates", params=params)}


def _ranks(task: DlamaTask) -> bool:
    return task.options.mode == "rank"


# the ranking runs (not the generation mode), which most deviations concern
RANKING = Scope("ranking", _ranks)


class DlamaTask(Task):
    """DLAMA-v1: Wikidata facts of two contrasting cultures, asked in English and a local
    language.
    """

    Options = DlamaOptions
    unit, strata = "facts", ("language", "culture", "predicate")
    # `--limit` draws facts by their released id, each asked in every language of the pair
    # (`Parallel`)
    parallel = Parallel(("uuid",), "facts")
    design = SamplingDesign(
        "fact (its release uuid)",
        repeated=("prompt language",),
        observations="fact-language answers",
        note="pooled numbers (overall, per culture, per predicate) count a fact once however many languages ask it; "
        "the numbers of one prompt language have one answer per fact",
    )
    smoke = Smoke(
        1,
        "the numbers per predicate and culture in each language (the report's table) and the culture gap need a fact "
        "in each",
    )
    options: DlamaOptions
    # each (language, predicate)'s aligned candidates, set when the probes are built
    # (`aligned_candidates`)
    _aligned: Mapping[tuple[str, str], AlignedCandidates] = MappingProxyType({})
    alignment = (
        "facts by their released id (`uuid`: the same subject and objects, by QID, in every language); candidates by "
        "object QID. A label that names two QIDs in some language collapses them into one candidate there, so RankC "
        "leaves those QIDs out in every language of the run (config.json's `label_collisions` counts them)."
    )
    aligned_fields = {
        "uuid": str,
        "language": str,
        "prediction": str,
        "gold": list[str],
        "overlap": bool,
        "ranked_ids": list[str],
        "n_aligned": int,
        "aligned_set": str,
    }

    def _configure(self) -> None:
        """Generation mode asks a causal model through its chat template (a refusal names --option
        mode=rank).
        """
        if self.options.mode == "generate":
            why = "DLAMA generation mode asks with a system message: it needs a causal model with a chat template"
            need = ModelNeed(("causal",), chat=True, why=why, instead="--option mode=rank")
            self.stages = (Stage("main", need=need),)

    def _row_facts(
        self, rows: Sequence[Mapping[str, Any]], sets: Mapping[tuple[str, str], Sequence[str]]
    ) -> dict[str, Any]:
        """The languages probed; candidate-set sizes and one hash over all sets; label collisions;
        provisional templates used: what config.json records of the rows.
        """
        digest = hashlib.sha256(
            json.dumps(sorted((list(k), v) for k, v in sets.items()), ensure_ascii=False).encode(
                "utf-8"
            )
        ).hexdigest()
        facts = {
            "languages": sorted({row["language"] for row in rows}),
            "candidate_sets": {
                f"{lang}|{pred}": len(v) for (lang, pred), v in sorted(sets.items())
            },
            "candidates_sha256": digest,
            "label_collisions": label_collisions(rows),
        }
        if self.options.mode == "rank":
            facts["unverified_templates"] = self.unverified_template_languages(rows)
        return facts

    def template(self, language: str, predicate: str) -> dict[str, Any] | None:
        """{"template", "verified"} of a (language, predicate), or None when there is none."""
        return self.resource("templates").get(language, {}).get(predicate)

    def unverified_template_languages(self, rows: Iterable[Mapping[str, Any]]) -> list[str]:
        """Languages of `rows` probed with at least one provisional vendored template (recorded with
        every run).
        """
        used = {(row["language"], row["predicate"]) for row in rows}
        return sorted(
            {
                lang
                for lang, pred in used
                if (entry := self.template(lang, pred)) is not None and not entry["verified"]
            }
        )

    # ------------------------------------------------------------ hooks

    def _probes(
        self, rows: Sequence[Mapping[str, Any]], stage: str, previous: Sequence[Record]
    ) -> Iterable[Probe]:
        sets = candidate_sets(rows)
        self.facts = {**self._row_facts(rows, sets), **self.facts}
        # read back by `_read`: each ranking's aligned QIDs
        self._aligned = aligned_candidates(rows)
        options = ScoreOptions(keep_tokens=self.options.keep_scores)
        ids = self.options.candidate_tokenization
        first_n, position = self.options.generate_first_n, Counter[tuple[str, str, str]]()
        for row in rows:
            meta = {
                "uuid": row["uuid"],
                "language": row["language"],
                "predicate": row["predicate"],
                "culture": row["culture"],
                "gold": list(row["obj_label"]),
                "obj_uri": list(row["obj_uri"]),
            }
            # one fact file of the release, in file order
            file = (row["language"], row["predicate"], row["culture"])
            position[file] += 1
            if not row["sub_label"].strip() or not [o for o in row["obj_label"] if o.strip()]:
                yield Skipped(row["id"], "empty subject or object label", meta=meta)
                continue
            if self.options.mode == "generate":
                if first_n is not None and position[file] > first_n:
                    yield Skipped(
                        row["id"],
                        f"not among the first {first_n} facts of its file (generate_first_n, D4)",
                        meta=meta,
                    )
                else:
                    yield self._question(row, meta)
                continue
            entry = self.template(row["language"], row["predicate"])
            # ko P17/P19: unreadable in the paper
            if entry is None or not entry["template"].strip():
                yield Skipped(
                    row["id"],
                    f"no {row['language']} template for {row['predicate']} (pass --option "
                    "templates= the mLAMA 1.1 folder or a JSON file)",
                    meta=meta,
                )
                continue
            left, right = prompt(entry["template"], row["sub_label"], self.options.fill)
            candidates = sets[row["language"], row["predicate"]]
            yield cloze_probe(row["id"], left, right, candidates, options, meta, candidate_ids=ids)

    def _question(self, row: Mapping[str, Any], meta: dict[str, Any]) -> Probe:
        """The generation-mode probe of one fact, or why it is out of the mode's scope (the paper's
        Appendix D).
        """
        language, predicate = row["language"], row["predicate"]
        if row.get("pair") != "arab_west" or language not in SYSTEM or predicate not in QUESTIONS:
            return Skipped(
                row["id"],
                f"no generation question for {predicate} in {language} (the paper's Appendix D covers "
                f"Arab-West, en/ar, {', '.join(QUESTIONS)})",
                meta=meta,
            )
        meta["prompt"] = question(
            predicate, language, row["sub_label"], corrected=self.benchmark.corrected
        )
        options = GenerateOptions(self.options.max_new_tokens, chat=True, system=SYSTEM[language])
        return GenerateProbe(row["id"], meta["prompt"], options, meta=meta)

    def _read(self, probe: Probe, output: Any) -> RecordFields:
        if isinstance(probe, GenerateProbe):
            reply = str(output).strip()
            return {"reply": reply, **answer_matches(reply, probe.meta["gold"])}
        by = self.options.score
        order = output.ranking(by, ties="fewer_tokens")
        top = [output.candidates[i] for i in order[:TOP_K].tolist()]
        values, where = output.scores(by), output.positions()
        fields = {
            "prediction": top[0],
            "top": top,
            # a candidate text given twice shows its later score, as a {candidate: score} mapping
            # does
            "top_scores": [round(float(values[where[c][-1]]), 6) for c in top],
            "n_candidates": len(order),
            **self._aligned_ranking(probe.meta, (output.candidates[i] for i in order.tolist())),
        }
        if self.options.keep_scores:
            fields["scores"] = all_scores(output)
        return fields

    def _aligned_ranking(self, meta: Mapping[str, Any], ranking: Iterable[str]) -> RecordFields:
        """What consistency across languages needs of a ranking (docs/consistency.md): its first
        `RANKING_DEPTH` aligned candidates as QIDs, how many there are, and which set they come
        from.
        """
        aligned = self._aligned.get((meta["language"], meta["predicate"]))
        if aligned is None:
            return {}
        ids = (aligned.ids[label] for label in ranking if label in aligned.ids)
        return {
            "ranked_ids": list(islice(ids, RANKING_DEPTH)),
            "n_aligned": len(aligned.ids),
            "aligned_set": aligned.set_id,
        }

    def _metrics(self, records: list[Record], skipped: list[Record]) -> Scores:
        """P@1 (generation mode: overlap and exact accuracy) per fact and prompt language, beside
        its expected value under a random ranking of the candidate set, g/N (none when a record
        does not say how many candidates it ranked, e.g. one written by hand); the culture gap needs
        both cultures. The design's unit is the fact (its release id): its answers in the config's
        languages are repeated measures on it, and it is what consistency across languages pairs.
        """
        cultures = sorted({r["culture"] for r in records})
        omitted = (
            {}
            if len(cultures) == 2
            else {
                "culture_gap": f"needs facts of both cultures; this run has {', '.join(cultures) or 'none'}"
            }
        )
        aligned = self._aligned_answers(records)
        unaligned = missing_id(records, "uuid", "fact id", "fact")
        if self.options.mode == "generate":
            facts = [answered_fact(r) for r in records]
            return Scores(
                generation_summary(facts),
                [self._generation_table(records, facts, m) for m in ("overlap", "exact")],
                omitted=omitted,
                aligned=aligned,
                unaligned=unaligned,
            )
        summary = ranking_summary(
            [ranked_fact(r, self.options.p1_gold) for r in records], reference=WEST
        )
        hits = hits_at_k(
            [r["prediction"] for r in records],
            [scored_gold(r, self.options.p1_gold) for r in records],
        )
        p1 = p1_table(records, 100.0 * hits, self.cluster_of).with_scale(100.0, binary=True)
        return Scores(
            summary,
            [p1],
            chance=self._chance(records),
            omitted=omitted,
            aligned=aligned,
            unaligned=unaligned,
        )

    def _generation_table(
        self, records: Sequence[Record], facts: Sequence[Any], measure: str
    ) -> UnitTable:
        """Generation mode: each fact-language answer's `measure` ("overlap" or "exact"), %."""
        return unit_table(
            measure,
            [
                UnitValue(
                    r.item_id,
                    100.0 * getattr(f, measure),
                    fact_strata(r),
                    cluster=self.cluster_of(r),
                )
                for r, f in zip(records, facts, strict=True)
            ],
            higher_is_better=True,
        ).with_scale(100.0, binary=True)

    def _chance(self, records: Sequence[Record]) -> list[tuple[UnitTable, str]]:
        """Each fact's expected P@1 under a random ranking of its candidate set, g/N; none when a
        record does not say how many candidates it ranked.
        """
        if not all("n_candidates" in r for r in records):
            return []
        expected = [
            100.0
            * chance.random_precision_at_1(
                len(gold_labels(r, self.options.p1_gold)), r["n_candidates"]
            )
            for r in records
        ]
        return [(p1_table(records, expected, self.cluster_of), chance.P_AT_1)]

    def _aligned_answers(self, answered: Sequence[Record]) -> list[AlignedAnswer]:
        """Each fact's P@1 (generation: overlap) and aligned ranking, by its released id (records
        written before the id was kept have none and are left out).
        """
        facts = [r for r in answered if "uuid" in r]
        if not facts:
            return []
        if self.options.mode == "generate":
            hits = [bool(r["overlap"]) for r in facts]
        else:
            found = hits_at_k(
                [r["prediction"] for r in facts],
                [scored_gold(r, self.options.p1_gold) for r in facts],
            )
            hits = [bool(hit) for hit in found]
        return [
            AlignedAnswer(
                r["language"],
                r["uuid"],
                bool(hit),
                tuple(r.get("ranked_ids", ())),
                r.get("n_aligned", 0),
                r.get("aligned_set", ""),
            )
            for r, hit in zip(facts, hits, strict=True)
        ]

    # Where this protocol differs from the released code (docs/deviations.md)
    deviations = (
        Deviation.for_kind(
            "D1",
            "Subjects are inserted with plain str.replace; the released T5/mT5 path used "
            "re.sub('[X]', subject, template), a character class that replaces every capital X of the "
            "template and leaves the brackets ('[Egypt] is located in [Y] .').",
            "seq2seq",
            RANKING,
            upstream={"fill": "upstream_regex"},
        ),
        Deviation.for_kind(
            "D2",
            "Candidates are scored with their in-context token ids; the released masked path "
            "tokenized each candidate on its own (no leading-space piece on BPE/SentencePiece; identical "
            "for the WordPiece models of the paper).",
            "masked",
            RANKING,
            upstream={"candidate_tokenization": "alone"},
        ),
        Deviation.for_kind(
            "D3",
            "Causal models: mean log-prob of the candidate after the text left of the slot: a "
            "culture_probe extension, not comparable with the paper.",
            "causal",
            RANKING,
            upstream_note="upstream cannot run it: the released code has no causal ranking path "
            "(evaluate_bloom.py only generates text)",
        ),
        Deviation(
            "D4",
            "Generation mode asks every fact in scope, greedily; the released GPT script asked only "
            "the first 3 facts of each file (generate_first_n=3) and sampled gpt-3.5-turbo at the API's "
            "default temperature, which no option reproduces.",
            "mode='generate'",
            lambda t: t.options.mode == "generate",
            upstream={"generate_first_n": 3},
            upstream_kinds=("causal",),
        ),
        Deviation(
            "D5",
            "Fast tokenizers with [MASK] as a special token (what the released code effectively ran).",
            "masked models",
            lambda t: _ranks(t) and t.kind == "masked",
            upstream_note="changes no number: the released code set a slow-tokenizer override on a fast "
            "tokenizer, which ignored it, so it ran what the library runs",
        ),
        Deviation.kept_scores(
            "D6", "each fact's top 5 candidates and their scores", "candidate count", RANKING
        ),
        Deviation.for_kind(
            "D7",
            "P@1 counts a fact right when the top candidate is any of its labels; the released T5/mT5 "
            "path scored only the rank of its first listed label (obj_label[0]).",
            "seq2seq",
            RANKING,
            upstream={"p1_gold": "first"},
        ),
    )


def p1_table(
    records: Sequence[Record], values: Iterable[float], cluster_of: Callable[[Record], str | None]
) -> UnitTable:
    """The `p1` table: one value (%) per fact and prompt language, with its strata and its fact
    (`cluster_of`).
    """
    return unit_table(
        "p1",
        [
            UnitValue(r.item_id, value, fact_strata(r), cluster=cluster_of(r))
            for r, value in zip(records, values, strict=True)
        ],
        higher_is_better=True,
    )


def gold_labels(record: Record, p1_gold: str = "any") -> set[str]:
    """The distinct gold labels a top-1 prediction can hit: the scored gold that is among the fact's
    candidates (every label that is not blank is one: `candidate_sets`).
    """
    return {label for label in scored_gold(record, p1_gold) if label.strip()}


def fact_strata(record: Record) -> dict[str, str]:
    """The strata of a fact in the results schema."""
    return {
        "language": record["language"],
        "culture": record["culture"],
        "predicate": record["predicate"],
        "language_culture": f"{record['language']}/{record['culture']}",
    }


def ranked_fact(record: Record, p1_gold: str = "any") -> RankedFact:
    """The metric input of a ranking record."""
    return RankedFact(
        record["language"],
        record["predicate"],
        record["culture"],
        record["prediction"],
        tuple(scored_gold(record, p1_gold)),
        tuple(record["obj_uri"]),
    )


def scored_gold(record: Record, p1_gold: str = "any") -> list[str]:
    """The labels a top-1 prediction is checked against: all of the fact's, or only its first listed
    one (D7).
    """
    gold = list(record["gold"])
    return gold[:1] if p1_gold == "first" else gold


def answered_fact(record: Record) -> AnsweredFact:
    """The metric input of a generation record."""
    return AnsweredFact(
        record["language"],
        record["predicate"],
        record["culture"],
        bool(record["overlap"]),
        bool(record["exact"]),
    )


# ---------------------------------------------------------------- prompts and candidates


def prompt(template: str, subject: str, fill: Fill = "replace") -> tuple[str, str]:
    """(left, right) of a template: strip it, put the stripped subject in [X] (str.replace, or the
    released T5 path's regex: D1), split at [Y]. (That path stripped neither; no released template
    or subject has surrounding whitespace, so stripping changes nothing there.)
    """
    return split_slot(fill_slots(template.strip(), [("[X]", subject.strip())], fill), "[Y]")


def question(predicate: str, language: str, subject: str, *, corrected: bool = False) -> str:
    """The generation-mode question (the paper's Appendix D); `corrected` fixes the P530 typo
    "dimplomatic".
    """
    text = QUESTIONS[predicate][list(SYSTEM).index(language)].format(subject.strip())
    return text.replace("dimplomatic", "diplomatic") if corrected else text


def answer_matches(reply: str, gold: Sequence[str]) -> dict[str, bool]:
    """The generation mode (the paper's Appendix D): `overlap` (the paper's measure) iff some gold
    label is a substring of the reply; `exact` iff the stripped reply equals a gold label.
    """
    labels = [g for g in gold if g.strip()]
    return {"overlap": any(g in reply for g in labels), "exact": reply.strip() in labels}


def candidate_sets(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], tuple[str, ...]]:
    """{(language, predicate): every object label of both cultures, sorted by code point}: the
    candidate set (docs/benchmarks/dlama.md, Protocol).

    Blank labels are not objects (a fact left without one is skipped) and could not be scored, so
    they are left out; every other label is kept exactly as stored.
    """
    sets: dict[tuple[str, str], set[str]] = defaultdict(set)
    for row in rows:
        sets[row["language"], row["predicate"]].update(
            label for label in row["obj_label"] if label.strip()
        )
    return {key: tuple(sorted(labels)) for key, labels in sets.items()}


def label_collisions(rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """{"language|predicate": labels that name two or more QIDs} (they collapse into one
    candidate).
    """
    uris: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for row in rows:
        for uri, label in zip(row["obj_uri"], row["obj_label"], strict=True):
            if label.strip():
                uris[row["language"], row["predicate"], label].add(uri)
    counts = Counter(f"{lang}|{pred}" for (lang, pred, _), found in uris.items() if len(found) > 1)
    return dict(sorted(counts.items()))


@dataclass(frozen=True)
class AlignedCandidates:
    """A predicate's candidates that align across the languages of a run, as one language names
    them: label -> QID, and an id of the aligned set (the same in every language).
    """

    ids: Mapping[str, str]
    set_id: str


def aligned_candidates(
    rows: Iterable[Mapping[str, Any]],
) -> dict[tuple[str, str], AlignedCandidates]:
    """{(language, predicate): AlignedCandidates}: the QIDs that are candidates in every language of
    `rows` under a label of their own. A label naming two QIDs collapses them into one candidate
    (`label_collisions`), which no other language's candidates match, so those QIDs are left out in
    every language; QIDs are compared, never labels.
    """
    uris: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    languages: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        languages[row["predicate"]].add(row["language"])
        for uri, label in zip(row["obj_uri"], row["obj_label"], strict=True):
            if label.strip():
                uris[row["language"], row["predicate"], label].add(uri)
    # (language, predicate) -> {QID: label}
    named: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    left_out: dict[str, set[str]] = defaultdict(set)
    for (language, predicate, label), found in uris.items():
        (uri,) = found if len(found) == 1 else (None,)
        # collapsed, or one QID under two labels
        if uri is None or uri in named[language, predicate]:
            left_out[predicate] |= found
        else:
            named[language, predicate][uri] = label
    aligned = {}
    for predicate, langs in languages.items():
        shared = (
            set.intersection(*(set(named[lang, predicate]) for lang in langs)) - left_out[predicate]
        )
        set_id = hashlib.sha256("\n".join(sorted(shared)).encode()).hexdigest()[:16]
        for lang in langs:
            aligned[lang, predicate] = AlignedCandidates(
                {named[lang, predicate][q]: q for q in shared}, set_id
            )
    return aligned


def predicate_order(predicate: str) -> tuple[int, str]:
    """P17 before P103 (numeric order of the id)."""
    digits = predicate.lstrip("P")
    return (int(digits) if digits.isdigit() else 10**9, predicate)


TASK = DlamaTask
