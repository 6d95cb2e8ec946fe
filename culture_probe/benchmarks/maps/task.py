"""MAPS protocol: proverbs in conversations; choose the speaker's meaning (a/b) and complete the
proverb.

The paper's section 4 (Experimental Setup). Reasoning: the upstream prompt (lower-cased,
multi-line), the model scores the option letters as the next token (`log p(" a" | s)` vs `log p(" b"
| s)`, ties to `a`); negative-question variants ask for the wrong reading, so a prediction is
correct when it differs from the label. Memorisation: the proverb without its last word, five
English templates, greedy generation (masked models: the argmax vocabulary piece at one mask after
the prompt); a proverb is memorised when any template's continuation starts with the missing word.
The budget is `max(4, T + 2)` new tokens, where T is the in-context token count of the missing word
(measured by a scoring stage first). The culture gap compares runs on the source, target and
translated sets (`culture_gap_study`).

`--protocol upstream` reproduces the released code (UKPLab/maps) where it can: each deviation M1-M12
below holds the option values that give upstream's behaviour for the model kinds whose upstream path
behaved so (e.g. 4 new tokens and upstream's substring success for causal models, M6a), or says why
there are none.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from culture_probe.benchmarks.maps.data import REQUIRED_TEXT
from culture_probe.benchmarks.maps.metrics import Completion, ReasonAnswer, run_summary, union_flags
from culture_probe.data.registry import Benchmark
from culture_probe.data.resources import Need
from culture_probe.engine.types import (
    CandidateScores,
    FillMaskOptions,
    GenerateOptions,
    ScoreOptions,
    ScoreRequest,
)
from culture_probe.errors import CultureProbeError, UnknownNameError
from culture_probe.metrics import chance
from culture_probe.metrics.results import UnitTable, UnitValue, unit_table
from culture_probe.record import SamplingDesign
from culture_probe.tasks.base import RecordFields, Scores, Stage, Task
from culture_probe.tasks.deviations import Deviation, Scope
from culture_probe.tasks.options import at_least
from culture_probe.tasks.probes import (
    FillMaskProbe,
    GenerateProbe,
    Output,
    Probe,
    Record,
    ScoreProbe,
    Skipped,
)
from culture_probe.tasks.sampling import Smoke
from culture_probe.util.typecheck import check_types

QUESTIONS = {
    "pos": "Question: What does the person mean by the proverb?",
    "neg": "Question: What does the person not mean by the proverb?",
    "neg1": "Question: Which answer is contrary to what the person means by the proverb?",
    "neg2": "Question: Which answer is impossible as the interpretation of what the person means by the proverb?",
    "neg3": "Question: Pick the opposite answer to what the person means by the proverb.",
    "neg4": "Question: Pick the wrong answer to what the person means by the proverb.",
}
BODY = "\nProverb:'{proverb}'\nContext: {conversation}\nChoices: {answers}\nAnswer:"
MEMORISATION_TEMPLATES = (
    "Proverb: {proverb}",
    "Complete this proverb: {proverb}",
    "Finish the proverb: {proverb}",
    "What's missing at the end of this proverb: {proverb}",
    "What's the last word of this proverb: {proverb}",
)
# The upstream XLM-R memorisation templates in each proverb's own language (deviation M5:
# mem_template_lang="native").
NATIVE_MEMORISATION_TEMPLATES = {
    "en": MEMORISATION_TEMPLATES,
    "de": (
        "Sprichwort: {proverb}",
        "Vervollständige dieses Sprichwort: {proverb}",
        "Beende das Sprichwort: {proverb}",
        "Was fehlt am Ende dieses Sprichworts: {proverb}",
        "Was ist das letzte Wort dieses Sprichworts: {proverb}",
    ),
    # a full-width colon is followed by the proverb with no space (upstream patterns.py)
    "zh": (
        "谚语: {proverb}",
        "补全这个谚语：{proverb}",
        "完成这个谚语：{proverb}",
        "这个谚语结尾缺什么字：{proverb}",
        "这个谚语的最后一个字是什么：{proverb}",
    ),
    "ru": (
        "пословицу: {proverb}",
        "Завершите эту пословицу: {proverb}",
        "Закончите пословицу: {proverb}",
        "Что отсутствует в конце этой пословицы: {proverb}",
        "Какое последнее слово в этой пословице: {proverb}",
    ),
    "id": (
        "peribahasa: {proverb}",
        "lengkapi peribahasa ini: {proverb}",
        "selesaikan peribahasa ini: {proverb}",
        "apa yang hilang di akhir peribahasa ini: {proverb}",
        "apa kata terakhir peribahasa ini: {proverb}",
    ),
    "bn": (
        "প্রবাদ: {proverb}",
        "এই প্রবাদটি সম্পূর্ণ করো: {proverb}",
        "প্রবাদটি শেষ করো: {proverb}",
        "এই প্রবাদের শেষে কি অনুপস্থিত: {proverb}",
        "এই প্রবাদের শেষ শব্দ কি: {proverb}",
    ),
}
LABELS = ("a", "b")
TRAILING_PUNCTUATION = ".!?;,"
N_SETS = 5  # few-shot demonstration sets, averaged
# Translation sets of the culture-gap study (the paper's section 5.3): direction -> (source, target,
# machine, human) configs.
GAP_CONFIGS: dict[Literal["zh_en", "en_zh"], tuple[str, str, str, str]] = {
    "zh_en": ("maps_zh", "maps_en", "maps_zh_en_mt", "maps_zh_en_ht"),
    "en_zh": ("maps_en", "maps_zh", "maps_en_zh_mt", "maps_en_zh_ht"),
}


@dataclass(frozen=True)
class MapsOptions:
    """Switches of the MAPS protocol (defaults: the paper's section 4, see docs/benchmarks/maps.md,
    Protocol; `--protocol upstream` sets the values that reproduce the released code, per model
    kind: see the deviations of `MapsTask`).
    """

    question: Literal["pos", "neg", "neg1", "neg2", "neg3", "neg4"] = "pos"
    memorisation: bool = True
    # None: max(4, T + 2); upstream: 4 causal (M6a), 19 seq2seq (M6b)
    mem_max_new_tokens: int | None = None
    # substring = upstream's search and post-processing (M6)
    mem_match: Literal["prefix", "substring"] = "prefix"
    mem_template_lang: Literal["en", "native"] = "en"  # native = upstream XLM-R (M5)
    # masked models; bare = upstream XLM-R (M4)
    mlm_letter_pieces: Literal["word_initial", "bare"] = "word_initial"
    # seq2seq letters; plain = upstream mT0 (M8)
    seq2seq_style: Literal["sentinel", "plain"] = "sentinel"
    # 0, or k English demonstrations in each of 5 seeded sets (Appendix D.5), from data_dir
    n_shot: int = 0
    seq2seq_max_tokens: int | None = 1024  # seq2seq encoder input limit, cut on the left (M12)

    def __post_init__(self) -> None:
        check_types(self)
        at_least("mem_max_new_tokens", self.mem_max_new_tokens, 1, none_ok=True)
        at_least("seq2seq_max_tokens", self.seq2seq_max_tokens, 1, none_ok=True)
        at_least("n_shot (the paper uses 2 and 5)", self.n_shot, 0)

    def needs(self, benchmark: Benchmark) -> dict[str, Need]:
        """The English few-shot split, when demonstrations are asked for (from the run's MAPS
        folder).
        """
        return {"few_shot": Need("maps", "few_shot")} if self.n_shot else {}


# ---------------------------------------------------------------- prompts


def reasoning_prompt(row: Mapping[str, Any], question: str = "pos") -> str:
    """The upstream reasoning prompt, lower-cased, runs of spaces/tabs collapsed (the paper's Table
    3).
    """
    answers = "A: " + row["answer1"] + " B: " + row["answer2"]
    text = (
        (QUESTIONS[question] + BODY)
        .format(proverb=row["proverb"], conversation=row["conversation"], answers=answers)
        .lower()
    )
    return re.sub(r"[ \t]{2,}", " ", text).replace("\n ", "\n")


def split_proverb(proverb: str, language: str) -> tuple[str, str]:
    """(front, target): the proverb without its last word (Chinese: last character), and that
    word.
    """
    if language == "zh":
        return proverb[:-1], proverb[-1]
    words = proverb.split(" ")
    return " ".join(words[:-1]), words[-1]


def memorisation_templates(language: str, template_lang: str = "en") -> tuple[str, ...]:
    """The five memorisation templates: English (the paper's), or the proverb's own language
    (upstream XLM-R, M5).
    """
    if template_lang == "en":
        return MEMORISATION_TEMPLATES
    if template_lang != "native":
        raise UnknownNameError("mem_template_lang", template_lang, ("en", "native"))
    if language not in NATIVE_MEMORISATION_TEMPLATES:
        raise CultureProbeError(
            f"mem_template_lang='native' has no templates for language {language!r}; the "
            f"upstream ones cover {', '.join(NATIVE_MEMORISATION_TEMPLATES)}."
        )
    return NATIVE_MEMORISATION_TEMPLATES[language]


def memorisation_prompts(proverb: str, language: str, template_lang: str = "en") -> list[str]:
    """The five lower-cased memorisation prompts of one proverb, in upstream order (the paper's
    Table 8 lists 4 and 5 the other way round).
    """
    front, _ = split_proverb(proverb, language)
    return [
        template.format(proverb=front).lower()
        for template in memorisation_templates(language, template_lang)
    ]


def memorised(
    output: str,
    proverb: str,
    language: str,
    match: str = "prefix",
    *,
    template: str = MEMORISATION_TEMPLATES[0],
    kind: str = "causal",
) -> bool:
    """Whether a continuation completes the proverb.

    "prefix" (the default): the continuation, stripped and lower-cased, starts with the missing word
    (its trailing `.!?;,` ignored). "substring" (upstream, M6): the lower-cased proverb is in the
    text upstream searched (`upstream_completion`, which needs the unfilled `template` asked and the
    model `kind`), or that text is the whole filled template (upstream's second, redundant success
    branch; memorization.py:62-75).
    """
    front, target = split_proverb(proverb, language)
    if match == "substring":
        text = upstream_completion(output, front, language, template=template, kind=kind)
        return (
            proverb.lower() in text
            or text == upstream_template(template).format(proverb=proverb).lower()
        )
    return output.strip().lower().startswith(target.lower().rstrip(TRAILING_PUNCTUATION))


def upstream_template(template: str) -> str:
    """A memorisation template as upstream's patterns.py:4-10 writes it: the English ones in lower
    case (the paper's Table 8 and this library capitalise them). It matters only where upstream
    removed the template's text up to its first ":" from the output, a case-sensitive replace.
    """
    return template.lower() if template in MEMORISATION_TEMPLATES else template


def upstream_completion(output: str, front: str, language: str, *, template: str, kind: str) -> str:
    """The text in which the released code looked for the proverb (UKPLab/maps
    experiments/memorization.py:37-60).

    Causal models: the decoded prompt and continuation; seq2seq (mT0): the continuation; masked
    (XLM-R): the argmax piece. Upstream then dropped "</s>" (not for XLM-R), put a space after every
    ">", removed the template's text up to its first ":" (and the colon), dropped the
    space-separated tokens that hold a ">", lower-cased and stripped periods from both ends; seq2seq
    and masked outputs were appended to the front (after a space, none for zh).

    The engine decodes the continuation alone, and a SentencePiece tokenizer drops the leading space
    of a decoded text: the space is given back between the prompt and a continuation that does not
    start with whitespace, as a joint decoding shows it. It differs from upstream only where a model
    glues its first token to the prompt's last word, or writes a special token against a word
    (skipped here; upstream's ">" filter dropped the word with it).
    """
    joiner = "" if language == "zh" else " "
    literal = upstream_template(template)
    text = output
    if kind == "causal":
        prompt = literal.format(proverb=front).lower()
        spaced = not output or output[0].isspace() or prompt[-1:].isspace()
        text = prompt + ("" if spaced else joiner) + output
    if kind != "masked":
        text = text.replace("</s>", "")
    text = text.replace(">", "> ").replace(literal.split(":")[0] + ":", "").strip()
    text = (
        " ".join(token.strip() for token in text.split(" ") if ">" not in token)
        .strip()
        .lower()
        .strip(".")
    )
    if kind == "seq2seq":
        return front.lower() + joiner + text
    if kind == "masked":  # upstream's front held " <mask>" (zh "<mask>"), removed and stripped here
        return front.lower().strip() + joiner + text
    return text


def scorable_target(target: str, match: str = "prefix") -> bool:
    """False for a last word the prefix rule strips to "" (punctuation only): every output would
    count as success.
    """
    return match == "substring" or bool(target.strip().rstrip(TRAILING_PUNCTUATION))


def demo_sets(n_rows: int, k: int, n_sets: int = N_SETS) -> list[list[int]]:
    """The few-shot demo indices: a fresh `RandomState(42)`, then `permutation(n)[:k]` five times
    (the paper's Appendix D.5).
    """
    rs = np.random.RandomState(42)
    return [rs.permutation(n_rows)[:k].tolist() for _ in range(n_sets)]


def demonstration(row: Mapping[str, Any], question: str = "pos") -> str:
    """A demonstration: the filled prompt, a space, its answer (the other letter if negative), a
    newline.
    """
    label = label_name(row["label"])
    answer = label if question == "pos" else LABELS[1 - LABELS.index(label)]
    return reasoning_prompt(row, question) + " " + answer + "\n"


def label_name(value: Any) -> str:
    """A label as "a"/"b" (rows from `datasets` hold the ClassLabel index)."""
    return LABELS[value] if isinstance(value, int) else str(value)


# ---------------------------------------------------------------- the task


def _memorises(task: MapsTask) -> bool:
    return task.options.memorisation


# the runs with the memorisation stage, which several deviations concern
MEMORISATION = Scope("memorisation", _memorises)


class MapsTask(Task):
    """MAPS reasoning (a/b choice, negative variants, figurative split) and memorisation (the
    paper's section 4).
    """

    Options = MapsOptions
    unit, strata = "proverbs", ("language", "is_figurative")
    design = SamplingDesign("proverb", repeated=("demonstration set (few-shot)",))
    text_columns = REQUIRED_TEXT
    smoke = Smoke(
        2,
        "accuracy on figurative and on literal proverbs (the paper's split) needs 2 of each for an interval",
    )
    options: MapsOptions

    def _configure(self) -> None:
        """The memorisation stage follows the reasoning one when asked for; the facts config.json
        records: the question asked, the memorisation budget and match, the few-shot sets.
        """
        memorise = (Stage("memorise"),) if self.options.memorisation else ()
        self.stages = (Stage("reason"), *memorise)
        budget = self.options.mem_max_new_tokens or "max(4, T + 2)"
        if self.kind == "masked":
            budget = "one mask: the argmax vocabulary piece (M9)"
        self.facts = {
            "question": QUESTIONS[self.options.question],
            "memorisation": self.options.memorisation,
            "mem_max_new_tokens": budget,
            "mem_match": self.options.mem_match,
            "mem_template_lang": self.options.mem_template_lang,
            "mlm_letter_pieces": self.options.mlm_letter_pieces if self.kind == "masked" else None,
            "seq2seq_style": self.options.seq2seq_style if self.kind == "seq2seq" else None,
            "seq2seq_max_tokens": self.options.seq2seq_max_tokens
            if self.kind == "seq2seq"
            else None,
            "few_shot": f"{self.options.n_shot} English demonstrations x {N_SETS} sets (RandomState(42))"
            if self.options.n_shot
            else None,
        }

    def _demo_prefixes(self) -> list[str]:
        """One prompt prefix per demonstration set (a single empty prefix when zero-shot)."""
        if not self.options.n_shot:
            return [""]
        rows = self.resource("few_shot")
        if self.options.n_shot > len(rows):
            raise CultureProbeError(
                f"n_shot={self.options.n_shot} exceeds the {len(rows)} few-shot items."
            )
        return [
            "\n".join(demonstration(rows[i], self.options.question) for i in indices) + "\n"
            for indices in demo_sets(len(rows), self.options.n_shot)
        ]

    # ------------------------------------------------------------ probes

    def _probes(
        self, rows: Sequence[Mapping[str, Any]], stage: str, previous: Sequence[Record]
    ) -> Iterable[Probe]:
        if stage == "memorise":
            yield from self._generation_probes(previous)
            return
        prefixes = self._demo_prefixes()
        limit = self.options.seq2seq_max_tokens if self.kind == "seq2seq" else None
        # M4: upstream XLM-R read the bare pieces "a"/"b" at the mask; M8: upstream mT0 scored the
        # letter as the whole decoder target after the prompt alone (the engine's "plain" seq2seq
        # style).
        ids: Literal["piece", "in_context"] = (
            "piece"
            if self.kind == "masked" and self.options.mlm_letter_pieces == "bare"
            else "in_context"
        )
        scoring = ScoreOptions(
            seq2seq_style=self.options.seq2seq_style if self.kind == "seq2seq" else "sentinel"
        )
        for row in rows:
            meta = {
                "is_figurative": bool(row["is_figurative"]),
                "label": label_name(row["label"]),
                "proverb": row["proverb"],
                "language": row["language"],
            }
            for i, prefix in enumerate(prefixes):
                request = ScoreRequest(
                    prefix + reasoning_prompt(row, self.options.question),
                    LABELS,
                    sep=" ",
                    max_tokens=limit,
                    candidate_ids=ids,
                )
                tag = "reason" if len(prefixes) == 1 else f"reason{i}"
                yield ScoreProbe(row["id"], request, scoring, tag=tag, meta={**meta, "demo_set": i})
            if self.options.memorisation:
                _, target = split_proverb(row["proverb"], row["language"])
                if not scorable_target(target, self.options.mem_match):
                    yield Skipped(
                        row["id"],
                        f"the proverb's last word {target!r} is only punctuation: any "
                        "continuation would complete it, so memorisation is not scored",
                        tag="mem_length",
                        meta=meta,
                    )
                    continue
                prompt = memorisation_prompts(
                    row["proverb"], row["language"], self.options.mem_template_lang
                )[0]
                sep = "" if row["language"] == "zh" else " "
                yield ScoreProbe(
                    row["id"], ScoreRequest(prompt, (target,), sep=sep), tag="mem_length", meta=meta
                )

    def _generation_probes(self, previous: Sequence[Record]) -> Iterator[Probe]:
        for record in previous:
            if record["tag"] != "mem_length" or record.skipped:
                continue
            budget = self.options.mem_max_new_tokens or max(4, record["target_tokens"] + 2)
            meta = {k: record[k] for k in ("is_figurative", "label", "proverb", "language")}
            sep = "" if record["language"] == "zh" else " "
            prompts = memorisation_prompts(
                record["proverb"], record["language"], self.options.mem_template_lang
            )
            for t, prompt in enumerate(prompts, 1):
                if self.kind == "masked":  # prompt + " <mask>", the argmax piece (M9)
                    yield FillMaskProbe(
                        record["id"],
                        prompt,
                        FillMaskOptions(sep=sep),
                        tag=f"mem{t}",
                        meta={**meta, "template": t},
                    )
                else:
                    yield GenerateProbe(
                        record["id"],
                        prompt,
                        GenerateOptions(budget),
                        tag=f"mem{t}",
                        meta={**meta, "template": t},
                    )

    # ------------------------------------------------------------ records

    def _read(self, probe: Probe, output: Output) -> RecordFields:
        meta = probe.meta
        if probe.tag.startswith("reason"):
            assert isinstance(output, CandidateScores)
            score_a, score_b = (float(x) for x in output.sum_logprob)
            pred = "b" if score_b > score_a else "a"
            correct = (
                pred == meta["label"] if self.options.question == "pos" else pred != meta["label"]
            )
            return {"pred": pred, "score_a": score_a, "score_b": score_b, "correct": correct}
        if probe.tag == "mem_length":
            assert isinstance(output, CandidateScores)
            return {
                "target": output.candidates[0],
                "target_tokens": int(output.n_tokens[0]),
                "target_logprob": float(output.sum_logprob[0]),
            }
        text = str(output)
        template = memorisation_templates(meta["language"], self.options.mem_template_lang)[
            meta["template"] - 1
        ]
        return {
            "output": text,
            "success": memorised(
                text,
                meta["proverb"],
                meta["language"],
                self.options.mem_match,
                template=template,
                kind=self.kind,
            ),
        }

    # ------------------------------------------------------------ metrics

    def _metrics(self, records: list[Record], skipped: list[Record]) -> Scores:
        """Accuracy (overall, figurative and literal, by memorisation) and memorisation; per proverb
        (and few-shot demonstration set) whether the asked question was answered right, beside a
        random letter's chance of it (half, whichever question is asked).
        """
        answers = [
            ReasonAnswer(
                r["id"], r["pred"], r["label"], r["is_figurative"], r["correct"], r["demo_set"]
            )
            for r in records
            if r["tag"].startswith("reason")
        ]
        completions = [
            Completion(r["id"], r["template"], bool(r["success"]))
            for r in records
            if "success" in r
        ]
        flags = union_flags(completions)
        # The split by memorisation needs a flag for every item, or the record of why it has none (a
        # punctuation target): an interrupted run reports no split rather than a partial one.
        unscorable = {r["id"] for r in skipped if r["tag"] == "mem_length"}
        complete = bool(completions) and all(
            a.item_id in flags or a.item_id in unscorable for a in answers
        )
        summary = run_summary(
            answers,
            completions,
            question=self.options.question,
            n_templates=len(MEMORISATION_TEMPLATES),
            n_sets=N_SETS if self.options.n_shot else 0,
            memorised=flags if complete else None,
        )
        correct = accuracy_table(records, lambda r: float(bool(r["correct"])))
        random = accuracy_table(records, lambda r: chance.random_precision_at_1(1, len(LABELS)))
        return Scores(
            summary,
            [correct.with_scale(100.0, binary=True)],
            chance=[(random, chance.CHOICE.format(options="two options (a, b): 1/2"))],
        )

    # Where this protocol differs from the released code (docs/deviations.md)
    deviations = (
        Deviation(
            "M1",
            "Prompt fully lower-cased, multi-line layout, as the released code (qa_experiments.py:40-43); "
            "the paper's Table 3 shows one line in mixed case.",
            upstream_note="none needed: the library follows the released code here",
        ),
        Deviation.for_kind(
            "M2",
            "Causal reasoning score: log-prob of the letter continuation ' a'/' b'; upstream: the mean raw "
            "logit over the whole sequence prompt + ' a' (qa_experiments.py:126-135).",
            "causal",
            upstream_note="the engine returns log-probs, not raw logits; the a/b decision is the same whenever "
            "' a' and ' b' are single tokens (the prompt's logits are shared by both sequences and "
            "the letters' logits share one normaliser), so only multi-token letters could differ",
        ),
        Deviation.for_kind(
            "M3",
            "XGLM newlines kept and the letter after a space; upstream put the letter on a new line and "
            "replaced every newline by the typo ' <\\s>' (qa_experiments.py:114-115).",
            "causal",
            upstream_note="a rule of one model family (XGLM), which a profile chosen by model kind cannot "
            "select (the library never guesses a family from a name); XGLM is at chance on MAPS",
        ),
        Deviation.for_kind(
            "M4",
            "Masked reasoning compares the word-initial pieces of ' a'/' b' at the mask; upstream XLM-R "
            "compared the bare pieces 'a'/'b' (convert_tokens_to_ids, qa_experiments.py:103-112).",
            "masked",
            upstream={"mlm_letter_pieces": "bare"},
        ),
        Deviation.for_kind(
            "M5",
            "Masked memorisation uses the English templates (the paper's); upstream XLM-R used "
            "templates in the proverb's own language (memorization.py:101). Upstream also used them for "
            "the '-mt' models (bloomz-7b1-mt, mt0-xxl-mt), a rule by model name the profile cannot know: "
            "pass --option mem_template_lang=native for those.",
            "masked",
            MEMORISATION,
            upstream={"mem_template_lang": "native"},
        ),
        Deviation.for_kind(
            "M6a",
            "Causal memorisation: budget max(4, T + 2) new tokens, success = the continuation starts "
            "with the missing word (trailing .!?;, ignored); upstream: 4 new tokens (memorization.py:41), "
            "success = the proverb is in the post-processed prompt + continuation (:45-50, :62-75), "
            "which fails a proverb ending in '.' unless the model writes on after it.",
            "causal",
            MEMORISATION,
            upstream={"mem_max_new_tokens": 4, "mem_match": "substring"},
        ),
        Deviation.for_kind(
            "M6b",
            "Seq2seq memorisation: budget max(4, T + 2) new tokens, prefix success; upstream mT0: the "
            "HF default max_length 20, i.e. up to 19 new tokens (memorization.py:37), success = the "
            "proverb is in front + ' ' + the post-processed output (:45-55, :62-75).",
            "seq2seq",
            MEMORISATION,
            upstream={"mem_max_new_tokens": 19, "mem_match": "substring"},
        ),
        Deviation.for_kind(
            "M6c",
            "Masked memorisation: success = the argmax piece starts with the missing word; upstream "
            "XLM-R: the proverb is in front + ' ' + the post-processed piece (memorization.py:45-50, "
            ":56-75): a proverb ending in punctuation succeeds only if the piece holds it too (never for "
            "'.', which upstream stripped).",
            "masked",
            MEMORISATION,
            upstream={"mem_match": "substring"},
        ),
        Deviation(
            "M7",
            "bf16/fp16 or fp32 weights; upstream loaded mT0, BLOOMZ, XGLM and Llama-2 in 8-bit "
            "(model_collection.py:108, :115, :119), XLM-R in full precision.",
            upstream_note="weights are loaded by the engine, not set by the protocol: "
            "--model-args load_in_8bit=true (bitsandbytes, a CUDA GPU) loads them as upstream did",
        ),
        Deviation.for_kind(
            "M8",
            "Seq2seq letters are scored as the sentinel span after the prompt (encoder: prompt + "
            "<extra_id_0>); upstream mT0 encoded the prompt alone and scored the letter as the decoder "
            "target from the start token, by its mean raw logit (qa_experiments.py:82-87, :91). "
            "seq2seq_style='plain' feeds upstream's inputs and reads log-probs, the same a/b decision "
            "whenever both letters are single tokens.",
            "seq2seq",
            upstream={"seq2seq_style": "plain"},
        ),
        Deviation.for_kind(
            "M9",
            "Masked memorisation takes the argmax vocabulary piece at one mask after each template's "
            "prompt (prompt + ' <mask>', zh without the space), special tokens excluded; upstream's argmax "
            "included them (model_collection.py:125-129), and a special token, dropped by the '>' filter, "
            "failed that template.",
            "masked",
            MEMORISATION,
            upstream_note="the engine's fill_mask never predicts special tokens and has no switch; it differs "
            "only on the templates where a special token is the argmax",
        ),
        Deviation(
            "M10",
            "The memorisation budget T is measured on the first template's prompt (all five end with "
            "the same proverb front, so the in-context tokenisation of the missing word is the same).",
            "causal and seq2seq models, memorisation with the default budget",
            lambda t: _memorises(t) and t.kind != "masked" and t.options.mem_max_new_tokens is None,
            upstream_note="concerns only the library's own budget max(4, T + 2); upstream's budget was fixed "
            "(M6a, M6b)",
        ),
        Deviation(
            "M11",
            "Few-shot demonstrations ask the probed question variant and are answered correctly for it "
            "(the other letter for negative questions), so every demonstration is consistent.",
            "n_shot > 0",
            lambda t: t.options.n_shot > 0,
            upstream_note="nothing to switch: identical to upstream for question=pos and neg (patterns.py:"
            "112-138, the same RandomState(42) sets); upstream ran no few-shot neg1-neg4 "
            "(it would have asked them with the neg wording)",
        ),
        Deviation(
            "M12",
            "Seq2seq reasoning prompts longer than seq2seq_max_tokens (1,024) lose their start, not their "
            "end: upstream truncated on the right (qa_experiments.py:83), which drops the question "
            "and the answer cue of long few-shot prompts.",
            "seq2seq models with a token limit",
            lambda t: t.kind == "seq2seq" and t.options.seq2seq_max_tokens is not None,
            upstream_note="the engine cuts a context on the left only, and a protocol has no tokenizer to cut "
            "on the right itself; it matters only for prompts over 1,024 tokens (long few-shot "
            "prompts)",
        ),
    )


def accuracy_table(records: Sequence[Record], right: Callable[[Record], float]) -> UnitTable:
    """The `accuracy` table: each reasoning record's `right(record)` (0-1) in %, per proverb and
    demonstration set.
    """
    return unit_table(
        "accuracy",
        [
            UnitValue(
                r["id"],
                100.0 * right(r),
                {
                    "language": r["language"],
                    "figurative": "figurative" if r["is_figurative"] else "literal",
                },
                str(r["demo_set"]),
            )
            for r in records
            if r["tag"].startswith("reason")
        ],
        higher_is_better=True,
    )


def culture_gap_study(
    accuracy: Mapping[str, float], direction: Literal["zh_en", "en_zh"] = "zh_en"
) -> dict[str, Any]:
    """Culture and language gaps (the paper's section 5.3) from the accuracies of the four runs of
    one direction.

    `accuracy` maps config names (e.g. "maps_zh", "maps_en", "maps_zh_en_mt", "maps_zh_en_ht") to
    their positive-question accuracy (`run(...).metrics["accuracy"]`).
    """
    from culture_probe.benchmarks.maps.metrics import culture_gap

    needed = GAP_CONFIGS[direction]
    missing = [name for name in needed if name not in accuracy]
    if missing:
        raise CultureProbeError(
            f"The {direction} culture-gap study needs runs of {', '.join(needed)}; missing {', '.join(missing)}."
        )
    src, tgt, mt, ht = (accuracy[name] for name in needed)
    return culture_gap(source=src, target=tgt, human_translated=ht, machine_translated=mt)


# a language's items machine-translated into English
MT_TO_ENGLISH = re.compile(r"maps_([a-z]+)_en_mt")


def delta_en_study(accuracy: Mapping[str, float]) -> dict[str, float]:
    """Δ_En per language (the paper's Table 11) from run accuracies: `maps_en` minus
    `maps_<lang>_en_mt`.

    `accuracy` maps config names to positive-question accuracy; configs other than those two kinds
    are ignored, so the accuracies of a whole study can be passed at once.
    """
    from culture_probe.benchmarks.maps.metrics import delta_en

    translated = {
        match[1]: value
        for name, value in accuracy.items()
        if (match := MT_TO_ENGLISH.fullmatch(name))
    }
    if "maps_en" not in accuracy or not translated:
        raise CultureProbeError(
            "Δ_En needs the accuracy of maps_en and of at least one maps_<lang>_en_mt run "
            f"(e.g. maps_de_en_mt); got {', '.join(accuracy) or 'none'}."
        )
    return delta_en(accuracy["maps_en"], translated)


TASK = MapsTask
