"""X-FaKT protocol: country facts asked in 13 languages, answered by generation (then judged) or by
ranking.

Paper protocol (the paper's section 4.1): the question is the only user turn of the model's chat
template, greedy, at most 128 new tokens; a judge grades each reply against the gold country written
in the question language. Two judges are built in, chosen by `judge=`:

- `"llm"`: an LLM judge run through the engine as a second stage, with the paper's system prompt and
  rubric (`SYSTEM_PROMPT_OURS`, `PROMPT_OURS`, read verbatim from the data file); `[4]` in its
  output means an error. Comparable with the paper only with the paper's judge
  (`judge_model="Qwen/Qwen2.5-72B-Instruct"`, the default).
- `"string"`: offline string matching against the gold's names in every language (`StringJudge`).

Every generated reply carries the string judge's verdict, and the LLM judge's (when it is asked) is
a stage of its own: so a resumed run may change the judge (`judge`, `judge_model`) and keep its
answers (`Task.stage_options`).

`mode="rank"` is a closed-set extension, not the paper's protocol: the 13 countries are ranked by
the mean log-prob of their names as the start of the assistant reply to the chat-templated question
(`rank_prompt="plain"` scores them after the plain question instead, for causal models without a
chat template: deviation X7). Factual recall gives FRS, KTS and X-FaKT (`metrics` beside this
module); the in-context and counter-factual configs give per-language error rates.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from culture_probe.benchmarks.xfakt.chance import random_answers, transfer_warning
from culture_probe.benchmarks.xfakt.data import CODES, COUNTRY_NAMES, KEYS
from culture_probe.benchmarks.xfakt.metrics import GradedAnswer, answers_summary, transfer_estimates
from culture_probe.data.registry import Benchmark
from culture_probe.data.resources import Need
from culture_probe.engine.types import CandidateScores, GenerateOptions, ScoreRequest
from culture_probe.errors import CultureProbeError
from culture_probe.metrics import chance
from culture_probe.metrics.consistency import AlignedAnswer
from culture_probe.metrics.results import CONFIDENCE, UnitTable, UnitValue, unit_table
from culture_probe.record import Chance, SamplingDesign
from culture_probe.tasks.base import ModelNeed, RecordFields, Scores, Stage, Task, missing_id
from culture_probe.tasks.deviations import Deviation
from culture_probe.tasks.options import at_least
from culture_probe.tasks.probes import GenerateProbe, Output, Probe, Record, ScoreProbe
from culture_probe.tasks.sampling import Parallel, Smoke
from culture_probe.util.typecheck import check_types

LANGUAGES = CODES
COUNTRIES = COUNTRY_NAMES
ASSOCIATIONS = dict(zip(LANGUAGES, COUNTRIES, strict=True))
PAPER_JUDGE = "Qwen/Qwen2.5-72B-Instruct"
ERROR_MARK = "[4]"
# Judge verdicts, checked in this order (the rubric of PROMPT_OURS); an output with none of them is
# an error.
VERDICTS = (("[1]", "same_language"), ("[2]", "english"), ("[3]", "other_language"))
# The options that change each stage's records (the others change metrics only): a resumed run may
# change the judge and keep its answers, which are read by the string judge in every generation run
# (docs/benchmarks/xfakt.md).
STAGE_OPTIONS = {
    "answer": ("mode", "rank_prompt", "max_new_tokens", "double_bos", "strip_echo"),
    "judge": ("judge", "judge_model", "judge_max_new_tokens", "strip_echo"),
}
PLAIN_RANK = (
    "--option mode=rank --option rank_prompt=plain "
    "(the 13 countries ranked after the plain question, deviation X7)"
)
JUDGE_NEED = ModelNeed(
    ("causal", "seq2seq"),
    chat=True,
    why="The LLM judge grades each reply through its chat template, after the paper's system prompt (section 4.1)",
    instead="--option judge=string (offline string matching), a local chat model as --option judge_model=PATH, or "
    "a served one as --option judge_model=openai:NAME with --base-url",
)


@dataclass(frozen=True)
class XfaktOptions:
    """Switches of the X-FaKT protocol (defaults: the paper's generation protocol and judge)."""

    mode: Literal["generate", "rank"] = "generate"
    # plain: for causal models without a chat template (X7)
    rank_prompt: Literal["chat", "plain"] = "chat"
    judge: Literal["llm", "string"] = "llm"
    judge_model: str = PAPER_JUDGE
    max_new_tokens: int = 128
    judge_max_new_tokens: int = 256
    # FRS/KTS from cells rounded to 2 decimals, as upstream eval.py (False: exact cells)
    round_cells: bool = True
    # True = upstream: mean ± std and the t-test from the rounded cells too (X8)
    round_statistics: bool = False
    # a breakdown upstream never computed: eval.py defines its tier lists but uses them nowhere (see
    # the docs)
    tiers: Literal["paper", "upstream"] = "paper"
    # True = upstream: the chat-templated prompt gets the tokenizer's BOS again (X1)
    double_bos: bool = False
    # True = upstream: the question deleted from the reply, the prompt from the judge's (X9)
    strip_echo: bool = False

    def __post_init__(self) -> None:
        check_types(self)
        at_least("max_new_tokens", self.max_new_tokens, 1)
        at_least("judge_max_new_tokens", self.judge_max_new_tokens, 1)

    @property
    def llm_judged(self) -> bool:
        """Whether the answers are graded by the LLM judge stage (else by the string judge, when
        generated).
        """
        return self.mode == "generate" and self.judge == "llm"

    def needs(self, benchmark: Benchmark) -> dict[str, Need]:
        """The data file's literals, released and corrected (country names in every language, judge
        prompts).
        """
        return {
            "literals": Need("xfakt", "literals"),
            "corrected_literals": Need("xfakt", "literals", corrected=True),
        }


# ---------------------------------------------------------------- judges


def normalise(text: str) -> str:
    """NFKC + casefold: how replies and names are compared by the string judge."""
    return unicodedata.normalize("NFKC", text).casefold()


def _needs_boundaries(form: str) -> bool:
    # Scripts without word spaces (CJK, kana, Thai) match anywhere; others only as whole words.
    return not any(
        0x0E00 <= ord(c) <= 0x0E7F or 0x3040 <= ord(c) <= 0x9FFF or 0xF900 <= ord(c) <= 0xFAFF
        for c in form
    )


class StringJudge:
    """Grades a reply by the first answer it names, matching every name of every answer, in any
    language.

    `forms` maps each answer label (e.g. "India") to its names ("India", "भारत", "印度", ...).
    A reply is correct iff the earliest name found in it belongs to the gold label; at one position
    the longest name wins (so "Saudi Arabia" is not read as a shorter name inside it). Names in
    scripts with word spaces match whole words only. The verdict says in which language the matching
    name is written, like the paper's rubric.
    """

    def __init__(self, forms: Mapping[str, Iterable[str]]):
        self._label: dict[str, str] = {}
        for label, names in forms.items():
            for name in names:
                key = normalise(name.strip())
                if key:
                    self._label.setdefault(key, label)
        if not self._label:
            raise CultureProbeError("StringJudge needs at least one answer name; got none.")
        parts = []
        for key in sorted(self._label, key=len, reverse=True):
            escaped = re.escape(key)
            parts.append(rf"(?<!\w){escaped}(?!\w)" if _needs_boundaries(key) else escaped)
        self._pattern = re.compile("|".join(parts))

    def first_answer(self, reply: str) -> tuple[str, str] | None:
        """(label, matched name) of the first answer named in `reply`, or None."""
        match = self._pattern.search(normalise(reply))
        return None if match is None else (self._label[match.group(0)], match.group(0))

    def judge(
        self, reply: str, gold: str, *, gold_name: str = "", english_name: str = ""
    ) -> tuple[bool, str]:
        """(correct, verdict): verdict is same_language / english / other_language / incorrect."""
        found = self.first_answer(reply)
        if found is None or found[0] != gold:
            return False, "incorrect"
        if found[1] == normalise(gold_name):
            return True, "same_language"
        if found[1] == normalise(english_name):
            return True, "english"
        return True, "other_language"


def parse_verdict(judge_output: str) -> tuple[bool, str]:
    """(correct, verdict) from an LLM judge's output: `[4]` anywhere means an error (deviation
    X3).
    """
    if ERROR_MARK in judge_output:
        return False, "incorrect"
    for mark, verdict in VERDICTS:
        if mark in judge_output:
            return True, verdict
    return True, "unparsed"


def judge_template(literals: Mapping[str, Any]) -> tuple[str, str]:
    """(system prompt, user prompt template) of the paper's judge, verbatim from the X-FaKT data
    file.
    """
    return literals["SYSTEM_PROMPT_OURS"], literals["PROMPT_OURS"]


def judge_prompt(literals: Mapping[str, Any], gold: str, question: str, reply: str) -> str:
    """The judge's user message: the paper's rubric filled with the reference, the question and the
    reply.
    """
    return judge_template(literals)[1].format(answers=gold, question=question, predicted=reply)


def country_table(literals: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """{question language code: the 13 country names written in it, bijection order}."""
    countries = literals["COUNTRIES"]
    return {
        code: tuple(countries[key][k] for k in KEYS) for key, code in zip(KEYS, CODES, strict=True)
    }


def country_forms(*literal_sets: Mapping[str, Any]) -> dict[str, set[str]]:
    """{English country name: its names in all 13 languages}, over every literal set given (the
    released and the corrected spellings alike).

    The released names include the mistranslations (火鸡 for Turkey): they are what the gold says,
    so a reply using them is accepted, and so is the correct spelling.
    """
    forms: dict[str, set[str]] = {country: {country} for country in COUNTRIES}
    for literals in literal_sets:
        for names in country_table(literals).values():
            for country, name in zip(COUNTRIES, names, strict=True):
                forms[country].add(name)
    return forms


def rank_forms(corrected_literals: Mapping[str, Any], language: str) -> dict[str, tuple[str, ...]]:
    """Surface forms ranked in `mode="rank"`: each country's corrected name in `language`, and its
    English name.
    """
    names = country_table(corrected_literals)[language]
    return {
        country: tuple(dict.fromkeys((name, country)))
        for country, name in zip(COUNTRIES, names, strict=True)
    }


# ---------------------------------------------------------------- the task


def _generates(task: XfaktTask) -> bool:
    return task.options.mode == "generate"


class XfaktTask(Task):
    """X-FaKT factual recall, in-context recall and counter-factual adherence (the paper's sections
    3 and 4.1).
    """

    Options = XfaktOptions
    unit, strata = "questions", ("language", "country")
    options: XfaktOptions
    kinds = ("causal", "seq2seq")  # no cloze slot: masked LMs cannot answer
    alignment = (
        "factual recall: questions by (country, entity) (the release's entity index: the same entity and template "
        "asked in every language); in rank mode candidates by country (the 13 countries, each ranking whole). "
        "In-context recall and counter-factual adherence are not aligned: no consistency is computed for them."
    )
    aligned_fields = {
        "language": str,
        "country": str,
        "entity_idx": int,
        "correct": bool | None,
        "scores": dict[str, Any],
    }

    def _configure(self) -> None:
        """The part of X-FaKT the config holds sets the smoke cells, parallel units and design; the
        LLM judge answers a stage of its own; the facts config.json records: the part, the mode, the
        judge and whether the chat template asks.
        """
        self.part = _part(self.benchmark)
        self.smoke = SMOKE[self.part]
        # factual recall asks each entity in all 13 languages: `--limit` draws entities, each in
        # every language
        self.parallel = ENTITIES if self.part == "factual_recall" else None
        self.design = DESIGNS.get(self.part, SamplingDesign("question"))
        # a resumed run may change the judge and keep its answers (`STAGE_OPTIONS`)
        answer = Stage("answer", need=self._answer_need(), options=STAGE_OPTIONS["answer"])
        judge = Stage(
            "judge", model=self.options.judge_model, need=JUDGE_NEED, options=STAGE_OPTIONS["judge"]
        )
        self.stages = (answer, judge) if self.llm_judged else (answer,)
        self._judge: StringJudge | None = None
        if self.options.mode == "rank":
            judged_by = "argmax of the ranked answers"
        elif self.options.judge == "llm":
            judged_by = self.options.judge_model
        else:
            judged_by = "string matching (StringJudge)"
        self.facts = {
            "part": self.part,
            "mode": self.options.mode,
            "judge": judged_by,
            "chat_template": self.chat,
        }

    def _answer_need(self) -> ModelNeed:
        """Causal models asked through their chat template need one (rank_prompt=plain does not)."""
        if not self.chat:
            return ModelNeed(self.kinds)
        if self.options.mode == "generate":
            why = "X-FaKT asks each question as the only user turn of the model's chat template (section 4.1)"
            return ModelNeed(self.kinds, chat=True, why=why, instead=PLAIN_RANK)
        why = "X-FaKT's rank mode scores the countries as the start of the reply to the chat-templated question"
        return ModelNeed(self.kinds, chat=True, why=why, instead="--option rank_prompt=plain")

    @property
    def _double_bos(self) -> bool:
        """Whether chat-templated answer prompts get the tokenizer's special tokens again (upstream,
        X1).
        """
        return self.options.double_bos and self.chat and self.options.mode == "generate"

    @property
    def chat(self) -> bool:
        """Whether the model is asked through its chat template (causal models; in rank mode unless
        plain).
        """
        return self.kind == "causal" and (
            self.options.mode == "generate" or self.options.rank_prompt == "chat"
        )

    @property
    def llm_judged(self) -> bool:
        """Whether the answers are graded by the LLM judge stage (`XfaktOptions.llm_judged`)."""
        return self.options.llm_judged

    # ------------------------------------------------------------ probes

    def _probes(
        self, rows: Sequence[Mapping[str, Any]], stage: str, previous: Sequence[Record]
    ) -> Iterable[Probe]:
        if stage == "judge":
            system, _ = judge_template(self.resource("literals"))
            options = GenerateOptions(self.options.judge_max_new_tokens, chat=True, system=system)
            for record in previous:
                if record["stage"] == "answer":
                    prompt = judge_prompt(
                        self.resource("literals"),
                        record["gold"],
                        record["question"],
                        record["reply"],
                    )
                    yield GenerateProbe(record["id"], prompt, options, tag="judge")
            return
        # every reply gets the string verdict: a resume may switch judges
        if self.options.mode == "generate":
            self._judge = StringJudge(self._answer_forms(rows))
        options = GenerateOptions(
            self.options.max_new_tokens,
            chat=self.chat,
            add_special_tokens=True if self._double_bos else None,
        )
        for row in rows:
            meta = self._meta(row)
            if self.options.mode == "rank":
                forms = tuple(
                    dict.fromkeys(
                        form for names in self._rank_forms(row).values() for form in names
                    )
                )
                # chat: the reply starts right after the generation prompt, no separator
                request = (
                    ScoreRequest(row["question"], forms, chat=True)
                    if self.chat
                    else ScoreRequest(row["question"], forms, sep=" ")
                )
                yield ScoreProbe(row["id"], request, meta=meta)
            else:
                yield GenerateProbe(row["id"], row["question"], options, meta=meta)

    def _meta(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """What each answer record carries: the question, its gold (name and label) and the grouping
        fields.
        """
        meta = {
            "language": row["language"],
            "question": row["question"],
            "gold": row["answer"],
            "gold_label": self._gold_label(row),
            "gold_en": row.get("answer_en", self._gold_label(row)),
        }
        if self.part == "factual_recall":
            meta.update(
                country=row["country"],
                entity_idx=row["entity_idx"],
                category=row["category"],
                is_associated=row["is_associated"],
            )
        elif self.part == "counter_factual":
            meta.update(country=row["context_country"], is_counterfactual=row["is_counterfactual"])
        else:
            meta.update(name_u=row["name_u"], name_v=row["name_v"])
        return meta

    def _answer_forms(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, set[str]]:
        if self.part == "in_context":  # the answers are the two people named in the question
            return {name: {name} for row in rows for name in (row["name_u"], row["name_v"])}
        return country_forms(self.resource("literals"), self.resource("corrected_literals"))

    def _rank_forms(self, row: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
        """{answer label: its surface forms} ranked for one row."""
        if self.part == "in_context":
            return {row["name_u"]: (row["name_u"],), row["name_v"]: (row["name_v"],)}
        return rank_forms(self.resource("corrected_literals"), row["language"])

    # ------------------------------------------------------------ records

    def _read(self, probe: Probe, output: Output) -> RecordFields:
        if probe.tag == "judge":
            # `_probes` makes every judge probe a GenerateProbe
            assert isinstance(probe, GenerateProbe)
            judged = (
                self._unecho(str(output), probe.prompt) if self.options.strip_echo else str(output)
            )
            correct, verdict = parse_verdict(judged)
            return {"judge_output": judged, "correct": correct, "verdict": verdict}
        meta, gold = probe.meta, probe.meta["gold_label"]
        if isinstance(output, CandidateScores):
            scores = best_form_scores(self._rank_forms(meta), output)
            reply = max(scores, key=scores.__getitem__)  # first of equal scores: bijection order
            return {
                "reply": reply,
                "scores": scores,
                "correct": reply == gold,
                "verdict": "same_language" if reply == gold else "incorrect",
            }
        reply = str(output).strip()
        fields: RecordFields = {
            "reply": self._unecho(reply, meta["question"]) if self.options.strip_echo else reply
        }
        if self._judge is not None:
            fields["correct"], fields["verdict"] = self._judge.judge(
                fields["reply"], gold, gold_name=meta["gold"], english_name=meta["gold_en"]
            )
        return fields

    @staticmethod
    def _unecho(text: str, prompt: str) -> str:
        """`text` with every copy of `prompt` deleted, as upstream did (X9): strip, delete, strip
        again.
        """
        return text.strip().replace(prompt, "").strip()

    def _gold_label(self, row: Mapping[str, Any]) -> str:
        if self.part == "factual_recall":
            return row["country"]
        if self.part == "counter_factual":
            return row["context_country"]
        return row["answer"]

    # ------------------------------------------------------------ metrics

    def _graded(self, records: Sequence[Record]) -> list[Record]:
        return graded_answers(records, llm_judged=self.llm_judged)

    def _metrics(self, records: list[Record], skipped: list[Record]) -> Scores:
        """Per question, whether its answer was wrong (`error_rate`, %), by language and the
        entity's country (in factual recall an entity asked in every language is one unit, the
        design's, its questions repeated measures), beside its expected error when one of the
        answers it ranks is picked at random (rank mode); FRS, KTS and X-FaKT (factual recall) with
        their intervals and reference points: what random answers score on these cells (rank mode),
        and a warning when the error rates cannot be told from a model that knows nothing, so that
        KTS says nothing about transfer (`culture_probe.benchmarks.xfakt.chance`). Answers still
        waiting for the judge's verdict (an interrupted run) are left out, and counted.
        """
        graded = self._graded(records)
        summary = answers_summary(
            [graded_answer(r) for r in graded],
            transfer=self.part == "factual_recall",
            round_cells=self.options.round_cells,
            tiers=self.options.tiers,
            round_statistics=self.options.round_statistics,
        )
        answered = sum(1 for r in records if r["stage"] == "answer")
        detail = {**summary, "n_ungraded": answered - len(graded)}
        wrong = error_table(graded, lambda r: float(not r["correct"]), self.cluster_of)
        composites, omitted = self._composites(graded, detail)
        references, warnings = self._references(graded, detail, composites)
        return Scores(
            detail,
            [wrong.with_scale(100.0, binary=True)],
            chance=self._chance(graded),
            composites=composites,
            omitted=omitted,
            references=references,
            warnings=warnings,
            aligned=self._aligned_answers(graded),
            unaligned=self._unaligned(records),
        )

    def _chance(self, graded: Sequence[Record]) -> list[tuple[UnitTable, str]]:
        """Rank mode: each question's expected error when one of the answers it ranks is picked at
        random.
        """
        if self.options.mode != "rank":
            return []
        table = error_table(
            graded, lambda r: 1 - chance.random_precision_at_1(1, len(r["scores"])), self.cluster_of
        )
        options = (
            "two people named in the question" if self.part == "in_context" else "13 countries"
        )
        method = chance.CHOICE.format(
            options=f"ranked answers ({options}), wrong with probability 1 - 1/k"
        )
        return [(table, method)]

    def _composites(
        self, graded: Sequence[Record], detail: Mapping[str, Any]
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """FRS, KTS and X-FaKT (factual recall) with their intervals, or why they are left out."""
        if self.part != "factual_recall":
            return {}, {}
        if detail.get("kts") is None:
            return {}, {
                name: detail.get("xfakt_unavailable", "") for name in ("frs", "kts", "xfakt")
            }
        answers = [graded_answer(r, self.cluster_of(r)) for r in graded]
        return transfer_estimates(answers, detail), {}

    def _references(
        self, graded: Sequence[Record], detail: Mapping[str, Any], composites: Mapping[str, Any]
    ) -> tuple[dict[str, Chance], dict[str, str]]:
        """KTS's reference points: what random answers score on these cells (rank mode), and the
        warning when the run cannot be told from a model that knows nothing.
        """
        if "kts" not in composites:
            return {}, {}
        references: dict[str, Chance] = {}
        p_random = None
        if self.options.mode == "rank":
            cells: dict[tuple[str, str], list[float]] = {}
            for r in graded:
                cells.setdefault((r["language"], r["country"]), []).append(1 - 1 / len(r["scores"]))
            random = random_answers(cells, round_cells=self.options.round_cells)
            references = dict(random.reference(CONFIDENCE))
            p_random = random.p_value(detail["mu_assoc"], detail["mu_non"])
        warning = transfer_warning(composites, references, p_random, confidence=CONFIDENCE)
        return references, ({"kts": warning} if warning else {})

    def _aligned_answers(self, graded: Sequence[Record]) -> list[AlignedAnswer]:
        """Factual recall: each question's verdict (as the metrics grade it) and, in rank mode, its
        ranking of the 13 countries, by (country, entity index); records written before the index
        was kept are left out.
        """
        if self.part != "factual_recall":
            return []
        answers = []
        for r in graded:
            if "entity_idx" in r:
                ranking = ranked_answers(r.get("scores") or {})
                fact = f"{r['country']}|{r['entity_idx']}"
                answers.append(
                    AlignedAnswer(
                        r["language"], fact, bool(r["correct"]), ranking, len(ranking), "countries"
                    )
                )
        return answers

    def _unaligned(self, answered: Sequence[Record]) -> str | None:
        """In-context recall and counter-factual adherence ask no question in every language;
        factual recall records written before the entity index was kept cannot be matched.
        """
        if self.part != "factual_recall":
            what = "in-context recall" if self.part == "in_context" else "counter-factual adherence"
            return (
                f"{what} does not ask one question in every language (only factual recall asks each entity in all "
                "13), so no answer is matched across languages"
            )
        return missing_id(answered, "entity_idx", "entity index", "question")

    # Where this protocol differs from the released code (docs/deviations.md)
    deviations = (
        Deviation(
            "X1",
            "The chat-templated answer prompt is tokenised with add_special_tokens=False, so a template "
            "that starts with BOS has it once; upstream passed the templated string to vLLM 0.2.7, which added "
            "the tokenizer's special tokens again (factual_gen.py:28-29: a double BOS for Llama-3, Gemma-2).",
            "generation through the chat template (causal models)",
            lambda t: _generates(t) and t.chat,
            upstream={"double_bos": True},
            upstream_kinds=("causal",),
            in_process=True,
        ),
        Deviation(
            "X2",
            "Clean category values (upstream labels landmarks and festivals 'lakes').",
            upstream_note="upstream's label column (factual_gen.py:63, :66) feeds no metric: eval.py groups "
            "the answers by country only, so the labels change no number",
        ),
        Deviation(
            "X3",
            "One judge rule: '[4]' in the judge output means error, anything else is correct (upstream "
            "eval.py:61 too); the verdict breakdown checks '[4]' first, then [1], [2], [3].",
            "the LLM judge",
            lambda t: _generates(t) and t.options.judge == "llm",
            upstream_note="the error rule is upstream's metric rule already; only upstream's per-verdict "
            "counts (llm_eval.py:63-73, results_exact_match_*.csv) check [1], [2], [3] first and count the "
            "rest as [4], which moves no error rate or score",
        ),
        Deviation(
            "X4",
            "HF generate instead of the pinned vLLM 0.2.7 stack.",
            "mode='generate'",
            _generates,
            upstream_note="the engine generates with HF transformers; upstream's vLLM 0.2.7 / transformers "
            "4.36.2 stack (environment.yml:167, :174) cannot load several of the evaluated models and is no "
            "option here, and it stopped answers only at tokenizer.eos_token (factual_gen.py:41)",
        ),
        Deviation(
            "X5",
            "Bounded FRS/KTS forms of the paper, not the earlier README's unbounded ones.",
            "factual recall",
            lambda t: t.part == "factual_recall",
            upstream_note="no difference from the code: upstream eval.py:84-86 computes the same bounded forms",
        ),
        Deviation(
            "X7",
            "mode='rank' scores each answer after the plain question (`question + ' ' + answer`; "
            "seq2seq models: the engine's sentinel span) instead of as the start of the reply to the "
            "chat-templated question.",
            "mode='rank' with rank_prompt='plain' or a seq2seq model",
            lambda t: t.options.mode == "rank" and not t.chat,
            upstream_note="upstream has no ranking mode (its scripts generate, then judge): an extension "
            "with nothing to reproduce",
        ),
        Deviation(
            "X8",
            "Mean ± std and the t-test of the cells are computed from unrounded cell errors, as in the paper's "
            "Table 2, FRS/KTS from cells rounded to 2 decimals (round_cells); upstream eval.py:64, :79-83 computes "
            "all of them from the rounded cells.",
            "factual recall",
            lambda t: t.part == "factual_recall",
            upstream={"round_cells": True, "round_statistics": True},
        ),
        Deviation(
            "X9",
            "Replies are judged as generated (stripped); upstream deleted the question wherever the "
            "reply repeats it (factual_gen.py:31: output.replace(question, '').strip()), and the judge prompt "
            "from the judge's output (llm_eval.py:27).",
            "mode='generate'",
            _generates,
            upstream={"strip_echo": True},
            upstream_kinds=("causal",),
        ),
    )


# Factual recall asks the same entity (and template) of a country in every language: the unit
# `--limit` draws
ENTITIES = Parallel(("country", "entity_idx"), "entities")
DESIGNS = {
    "factual_recall": SamplingDesign(
        "entity (country, entity index)",
        repeated=("question language",),
        observations="questions",
        note="FRS, KTS and X-FaKT: the questions of each language x country cell are drawn at random, the cells "
        "fixed; the error rate of one language has one question per entity",
    )
}
# What each part's headline numbers need of a `--limit` subset (cells: language x country; in
# context: language)
SMOKE = {
    "factual_recall": Smoke(
        1,
        "FRS, KTS and X-FaKT average the error of every language x country cell: an entity of each country, asked "
        "in every language, gives each cell a question",
    ),
    "counter_factual": Smoke(
        1, "the error per language and context country needs a question in each cell"
    ),
    "in_context": Smoke(1, "the error per question language needs a question in each"),
}


def error_table(
    answers: Sequence[Record],
    wrong: Callable[[Record], float],
    cluster_of: Callable[[Record], str | None],
) -> UnitTable:
    """The `error_rate` table: each graded answer's `wrong(record)` (0-1) in %, by language and
    country, and its entity (`cluster_of`: factual recall asks one entity in every language, a unit
    with repeated measures).
    """
    return unit_table(
        "error_rate",
        [
            UnitValue(
                r.item_id,
                100.0 * wrong(r),
                {"language": r["language"]}
                | ({"country": r["country"]} if r.get("country") else {}),
                cluster=cluster_of(r),
            )
            for r in answers
        ],
        higher_is_better=False,
    )


def best_form_scores(
    forms: Mapping[str, Sequence[str]], output: CandidateScores
) -> dict[str, float]:
    """{answer label: the best mean log-prob over its surface forms} (the ranking mode)."""
    means = dict(zip(output.candidates, (float(x) for x in output.mean_logprob), strict=True))
    return {label: max(means[form] for form in names) for label, names in forms.items()}


def ranked_answers(scores: Mapping[str, float]) -> tuple[str, ...]:
    """The rank mode's answers, best first; equal scores keep the bijection order, as the reply
    does.
    """
    return tuple(sorted(scores, key=lambda answer: -scores[answer]))


def graded_answer(record: Record, entity: str | None = None) -> GradedAnswer:
    """The metric input of a graded record (`entity`: its unit where one entity is asked in every
    language).
    """
    return GradedAnswer(
        record["language"],
        bool(record["correct"]),
        record["verdict"],
        record.get("country"),
        entity,
    )


def graded_answers(records: Sequence[Record], *, llm_judged: bool = False) -> list[Record]:
    """Answered records with their verdict: the judge stage's where an LLM judged them, else the
    answer's own (the string judge's, or the ranking's). `llm_judged=True` (a run with judge=llm)
    keeps only the answers the LLM judged, so that an interrupted judge stage leaves the others out
    rather than counting their string verdicts.
    """
    verdicts = {r["id"]: r for r in records if r["stage"] == "judge" and not r.skipped}
    graded = []
    for record in records:
        if (
            record["stage"] != "answer"
            or record.skipped
            or (llm_judged and record["id"] not in verdicts)
        ):
            continue
        if record["id"] in verdicts:
            judged = verdicts[record["id"]]
            verdict = {"correct": judged["correct"], "verdict": judged["verdict"]}
            record = replace(record, fields={**record.fields, **verdict})
        if "correct" in record:
            graded.append(record)
    return graded


def _part(benchmark: Benchmark) -> str:
    base = benchmark.base.removeprefix("xfakt_")
    if base not in ("factual_recall", "in_context", "counter_factual"):
        raise CultureProbeError(f"{benchmark.name!r} is not an X-FaKT config this protocol knows.")
    return base


TASK = XfaktTask
