"""MAPS protocol: proverbs in conversations; choose the speaker's meaning (a/b) and complete the proverb.

Spec section 4. Reasoning: the upstream prompt (lower-cased, multi-line), the model scores the option letters as
the next token (`log p(" a" | s)` vs `log p(" b" | s)`, ties to `a`); negative-question variants ask for the wrong
reading, so a prediction is correct when it differs from the label. Memorisation: the proverb without its last
word, five English templates, greedy generation (masked models: the argmax vocabulary piece at one mask after
the prompt); a proverb is memorised when any template's continuation starts with the missing word. The budget
is `max(4, T + 2)` new tokens, where T is the in-context token count of the missing word (measured by a scoring
stage first); `mem_max_new_tokens=4, mem_match="substring"` reproduces the paper's code (deviation M6). The culture gap
compares runs on the source, target and translated sets (`culture_gap_study`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from culture_probe.data.resources import Need
from culture_probe.engine.types import CandidateScores, FillMaskOptions, GenerateOptions, ScoreRequest
from culture_probe.errors import CultureProbeError, UnknownNameError
from culture_probe.metrics.proverbs import Completion, ReasonAnswer, run_summary, union_flags
from culture_probe.metrics.results import UnitTable, UnitValue, unit_table
from culture_probe.tasks.base import Deviation, RecordFields, Task
from culture_probe.tasks.options import at_least
from culture_probe.tasks.probes import FillMaskProbe, GenerateProbe, Output, Probe, Record, ScoreProbe, Skipped

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
# The upstream XLM-R memorisation templates in each proverb's own language (spec 4.7, M5: mem_template_lang="native").
NATIVE_MEMORISATION_TEMPLATES = {
    "en": MEMORISATION_TEMPLATES,
    "de": ("Sprichwort: {proverb}", "Vervollständige dieses Sprichwort: {proverb}", "Beende das Sprichwort: {proverb}",
           "Was fehlt am Ende dieses Sprichworts: {proverb}", "Was ist das letzte Wort dieses Sprichworts: {proverb}"),
    # a full-width colon is followed by the proverb with no space (upstream patterns.py; spec 4.7)
    "zh": ("谚语: {proverb}", "补全这个谚语：{proverb}", "完成这个谚语：{proverb}",
           "这个谚语结尾缺什么字：{proverb}", "这个谚语的最后一个字是什么：{proverb}"),
    "ru": ("пословицу: {proverb}", "Завершите эту пословицу: {proverb}", "Закончите пословицу: {proverb}",
           "Что отсутствует в конце этой пословицы: {proverb}", "Какое последнее слово в этой пословице: {proverb}"),
    "id": ("peribahasa: {proverb}", "lengkapi peribahasa ini: {proverb}", "selesaikan peribahasa ini: {proverb}",
           "apa yang hilang di akhir peribahasa ini: {proverb}", "apa kata terakhir peribahasa ini: {proverb}"),
    "bn": ("প্রবাদ: {proverb}", "এই প্রবাদটি সম্পূর্ণ করো: {proverb}", "প্রবাদটি শেষ করো: {proverb}",
           "এই প্রবাদের শেষে কি অনুপস্থিত: {proverb}", "এই প্রবাদের শেষ শব্দ কি: {proverb}"),
}
LABELS = ("a", "b")
TRAILING_PUNCTUATION = ".!?;,"
N_SETS = 5  # few-shot demonstration sets, averaged
# Translation sets of the culture-gap study (spec 4.5): direction -> (source, target, machine, human) configs.
GAP_CONFIGS = {
    "zh_en": ("maps_zh", "maps_en", "maps_zh_en_mt", "maps_zh_en_ht"),
    "en_zh": ("maps_en", "maps_zh", "maps_en_zh_mt", "maps_en_zh_ht"),
}


@dataclass(frozen=True)
class MapsOptions:
    """Switches of the MAPS protocol (defaults: spec section 4; compat flags reproduce the upstream code)."""

    question: Literal["pos", "neg", "neg1", "neg2", "neg3", "neg4"] = "pos"
    memorisation: bool = True
    mem_max_new_tokens: int | None = None  # None: max(4, T + 2); 4 = upstream (M6)
    mem_match: Literal["prefix", "substring"] = "prefix"  # substring = upstream (M6)
    mem_template_lang: Literal["en", "native"] = "en"  # native = upstream XLM-R (M5)
    n_shot: int = 0  # 0, or k English demonstrations in each of 5 seeded sets (Appendix D.5), from data_dir
    seq2seq_max_tokens: int | None = 1024  # seq2seq encoder input limit, cut on the left (spec 4.2, M12)

    def __post_init__(self) -> None:
        at_least("mem_max_new_tokens", self.mem_max_new_tokens, 1, none_ok=True)
        at_least("seq2seq_max_tokens", self.seq2seq_max_tokens, 1, none_ok=True)
        at_least("n_shot (the paper uses 2 and 5)", self.n_shot, 0)


# ---------------------------------------------------------------- prompts


def reasoning_prompt(row: Mapping[str, Any], question: str = "pos") -> str:
    """The upstream reasoning prompt, lower-cased, runs of spaces/tabs collapsed (spec 4.1)."""
    answers = "A: " + row["answer1"] + " B: " + row["answer2"]
    text = (QUESTIONS[question] + BODY).format(proverb=row["proverb"], conversation=row["conversation"],
                                               answers=answers).lower()
    return re.sub(r"[ \t]{2,}", " ", text).replace("\n ", "\n")


def split_proverb(proverb: str, language: str) -> tuple[str, str]:
    """(front, target): the proverb without its last word (Chinese: last character), and that word."""
    if language == "zh":
        return proverb[:-1], proverb[-1]
    words = proverb.split(" ")
    return " ".join(words[:-1]), words[-1]


def memorisation_templates(language: str, template_lang: str = "en") -> tuple[str, ...]:
    """The five memorisation templates: English (the paper's), or the proverb's own language (upstream XLM-R, M5)."""
    if template_lang == "en":
        return MEMORISATION_TEMPLATES
    if template_lang != "native":
        raise UnknownNameError("mem_template_lang", template_lang, ("en", "native"))
    if language not in NATIVE_MEMORISATION_TEMPLATES:
        raise CultureProbeError(f"mem_template_lang='native' has no templates for language {language!r}; the "
                                f"upstream ones cover {', '.join(NATIVE_MEMORISATION_TEMPLATES)}.")
    return NATIVE_MEMORISATION_TEMPLATES[language]


def memorisation_prompts(proverb: str, language: str, template_lang: str = "en") -> list[str]:
    """The five lower-cased memorisation prompts of one proverb, in upstream order (spec 4.3)."""
    front, _ = split_proverb(proverb, language)
    return [template.format(proverb=front).lower() for template in memorisation_templates(language, template_lang)]


def memorised(output: str, proverb: str, language: str, match: str = "prefix") -> bool:
    """Whether a continuation completes the proverb (prefix rule, or the upstream substring rule)."""
    front, target = split_proverb(proverb, language)
    said = output.strip().lower()
    if match == "substring":
        joiner = "" if language == "zh" else " "
        return proverb.lower() in (front.lower() + joiner + said)
    return said.startswith(target.lower().rstrip(TRAILING_PUNCTUATION))


def scorable_target(target: str, match: str = "prefix") -> bool:
    """False for a last word the prefix rule strips to "" (punctuation only): every output would count as success."""
    return match == "substring" or bool(target.strip().rstrip(TRAILING_PUNCTUATION))


def demo_sets(n_rows: int, k: int, n_sets: int = N_SETS) -> list[list[int]]:
    """The few-shot demo indices: a fresh `RandomState(42)`, then `permutation(n)[:k]` five times (spec 4.4)."""
    rs = np.random.RandomState(42)
    return [rs.permutation(n_rows)[:k].tolist() for _ in range(n_sets)]


def demonstration(row: Mapping[str, Any], question: str = "pos") -> str:
    """A demonstration: the filled prompt, a space, its answer (the other letter if negative), a newline."""
    label = label_name(row["label"])
    answer = label if question == "pos" else LABELS[1 - LABELS.index(label)]
    return reasoning_prompt(row, question) + " " + answer + "\n"


def label_name(value: Any) -> str:
    """A label as "a"/"b" (rows from `datasets` hold the ClassLabel index)."""
    return LABELS[value] if isinstance(value, int) else str(value)


# ---------------------------------------------------------------- the task


def _memorises(task: MapsTask) -> bool:
    return task.options.memorisation


class MapsTask(Task):
    """MAPS reasoning (a/b choice, negative variants, figurative split) and memorisation (spec section 4)."""

    Options = MapsOptions
    unit, strata = "proverbs", ("language", "is_figurative")
    options: MapsOptions
    deviations = (
        Deviation("M1", "Prompt fully lower-cased, multi-line layout (follows the code)."),
        Deviation("M2", "Causal reasoning score: log-prob of the letter continuation, not the mean raw logit.",
                  "causal models", lambda t: t.kind == "causal"),
        Deviation("M3", "XGLM newlines kept (upstream replaced them by the typo ' <\\s>').", "causal models",
                  lambda t: t.kind == "causal"),
        Deviation("M4", "XLM-R reasoning compares the word-initial pieces of ' a'/' b'.", "masked models",
                  lambda t: t.kind == "masked"),
        Deviation("M5", "XLM-R memorisation uses the English templates (upstream: the proverb's own language, "
                  "mem_template_lang='native').", "masked models, memorisation, mem_template_lang='en'",
                  lambda t: t.kind == "masked" and _memorises(t) and t.options.mem_template_lang == "en"),
        Deviation("M6", "Memorisation budget max(4, T + 2) new tokens; success = the output starts with the target "
                  "(upstream: 4 tokens, substring match: mem_max_new_tokens=4, mem_match='substring').",
                  "memorisation with the default budget or match",
                  lambda t: _memorises(t) and t.kind != "masked"
                  and (t.options.mem_max_new_tokens is None or t.options.mem_match == "prefix")),
        Deviation("M7", "bf16/fp16 or fp32 weights instead of 8-bit."),
        Deviation("M8", "Seq2seq letters are scored by the engine's seq2seq rule (the letter as the sentinel span "
                        "after the prompt) instead of as the first decoder step; the a/b decision is unchanged "
                        "whenever both letters are single tokens.", "seq2seq models", lambda t: t.kind == "seq2seq"),
        Deviation("M9", "Masked LMs: memorisation fills one mask after each template's prompt (prompt + ' <mask>', "
                        "zh without the space; spec 4.3) and takes the argmax vocabulary piece, special tokens "
                        "excluded, so a last word of several subwords cannot be completed; reasoning compares the "
                        "word-initial pieces of ' a'/' b' (M4).", "masked models, memorisation",
                  lambda t: t.kind == "masked" and _memorises(t)),
        Deviation("M10", "The memorisation budget T is measured on the first template's prompt (all five end with "
                         "the same proverb front, so the in-context tokenisation of the missing word is the same).",
                  "causal and seq2seq models, memorisation with the default budget",
                  lambda t: _memorises(t) and t.kind != "masked" and t.options.mem_max_new_tokens is None),
        Deviation("M11", "Few-shot demonstrations ask the probed question variant and are answered correctly for it "
                         "(the other letter for negative questions), so every demonstration is consistent.",
                  "n_shot > 0", lambda t: t.options.n_shot > 0),
        Deviation("M12", "Seq2seq reasoning prompts longer than seq2seq_max_tokens (1,024) lose their start, not their "
                         "end: upstream truncated on the right (the tokenizer default), which drops the question "
                         "and the answer cue of long few-shot prompts.", "seq2seq models with a token limit",
                  lambda t: t.kind == "seq2seq" and t.options.seq2seq_max_tokens is not None),
    )

    def __init__(self, config: str, options: Any = None, *, kind: Any, seed: int = 0,
                 resources: Mapping[str, Any] | None = None):
        super().__init__(config, options, kind=kind, seed=seed, resources=resources)
        memorisation_templates("en", self.options.mem_template_lang)  # an unknown choice fails before any work
        self.stages = ("reason", "memorise") if self.options.memorisation else ("reason",)

    @classmethod
    def needs(cls, config: str, options: MapsOptions) -> dict[str, Need]:
        """The English few-shot split, when demonstrations are asked for (from the run's MAPS folder)."""
        return {"few_shot": Need("maps", "few_shot")} if options.n_shot else {}

    def describe(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Protocol facts recorded in config.json."""
        budget = self.options.mem_max_new_tokens or "max(4, T + 2)"
        if self.kind == "masked":
            budget = "one mask: the argmax vocabulary piece (M9)"
        return {"question": QUESTIONS[self.options.question], "memorisation": self.options.memorisation,
                "mem_max_new_tokens": budget, "mem_match": self.options.mem_match,
                "mem_template_lang": self.options.mem_template_lang,
                "seq2seq_max_tokens": self.options.seq2seq_max_tokens if self.kind == "seq2seq" else None,
                "few_shot": f"{self.options.n_shot} English demonstrations x {N_SETS} sets (RandomState(42))"
                if self.options.n_shot else None}

    def _demo_prefixes(self) -> list[str]:
        """One prompt prefix per demonstration set (a single empty prefix when zero-shot)."""
        if not self.options.n_shot:
            return [""]
        rows = self.resource("few_shot")
        if self.options.n_shot > len(rows):
            raise CultureProbeError(f"n_shot={self.options.n_shot} exceeds the {len(rows)} few-shot items.")
        return ["\n".join(demonstration(rows[i], self.options.question) for i in indices) + "\n"
                for indices in demo_sets(len(rows), self.options.n_shot)]

    # ------------------------------------------------------------ probes

    def _probes(self, rows: Sequence[Mapping[str, Any]], stage: str, previous: Sequence[Record]) -> Iterable[Probe]:
        if stage == "memorise":
            yield from self._generation_probes(previous)
            return
        prefixes = self._demo_prefixes()
        limit = self.options.seq2seq_max_tokens if self.kind == "seq2seq" else None
        for row in rows:
            meta = {"is_figurative": bool(row["is_figurative"]), "label": label_name(row["label"]),
                    "proverb": row["proverb"], "language": row["language"]}
            for i, prefix in enumerate(prefixes):
                request = ScoreRequest(prefix + reasoning_prompt(row, self.options.question), LABELS, sep=" ",
                                       max_tokens=limit)
                tag = "reason" if len(prefixes) == 1 else f"reason{i}"
                yield ScoreProbe(row["id"], request, tag=tag, meta={**meta, "demo_set": i})
            if self.options.memorisation:
                _, target = split_proverb(row["proverb"], row["language"])
                if not scorable_target(target, self.options.mem_match):
                    yield Skipped(row["id"], f"the proverb's last word {target!r} is only punctuation: any "
                                  "continuation would complete it, so memorisation is not scored", tag="mem_length",
                                  meta=meta)
                    continue
                prompt = memorisation_prompts(row["proverb"], row["language"], self.options.mem_template_lang)[0]
                sep = "" if row["language"] == "zh" else " "
                yield ScoreProbe(row["id"], ScoreRequest(prompt, (target,), sep=sep), tag="mem_length", meta=meta)

    def _generation_probes(self, previous: Sequence[Record]) -> Iterator[Probe]:
        for record in previous:
            if record["tag"] != "mem_length" or record.skipped:
                continue
            budget = self.options.mem_max_new_tokens or max(4, record["target_tokens"] + 2)
            meta = {k: record[k] for k in ("is_figurative", "label", "proverb", "language")}
            sep = "" if record["language"] == "zh" else " "
            prompts = memorisation_prompts(record["proverb"], record["language"], self.options.mem_template_lang)
            for t, prompt in enumerate(prompts, 1):
                if self.kind == "masked":  # spec 4.3: prompt + " <mask>", the argmax piece (M9)
                    yield FillMaskProbe(record["id"], prompt, FillMaskOptions(sep=sep), tag=f"mem{t}",
                                        meta={**meta, "template": t})
                else:
                    yield GenerateProbe(record["id"], prompt, GenerateOptions(budget), tag=f"mem{t}",
                                        meta={**meta, "template": t})

    # ------------------------------------------------------------ records

    def _read(self, probe: Probe, output: Output) -> RecordFields:
        meta = probe.meta
        if probe.tag.startswith("reason"):
            assert isinstance(output, CandidateScores)
            score_a, score_b = (float(x) for x in output.sum_logprob)
            pred = "b" if score_b > score_a else "a"
            correct = pred == meta["label"] if self.options.question == "pos" else pred != meta["label"]
            return {"pred": pred, "score_a": score_a, "score_b": score_b, "correct": correct}
        if probe.tag == "mem_length":
            assert isinstance(output, CandidateScores)
            return {"target": output.candidates[0], "target_tokens": int(output.n_tokens[0]),
                    "target_logprob": float(output.sum_logprob[0])}
        text = str(output)
        return {"output": text,
                "success": memorised(text, meta["proverb"], meta["language"], self.options.mem_match)}

    # ------------------------------------------------------------ metrics

    def _metrics(self, records: list[Record], skipped: list[Record]) -> dict[str, Any]:
        answers = [ReasonAnswer(r["id"], r["pred"], r["label"], r["is_figurative"], r["correct"], r["demo_set"])
                   for r in records if r["tag"].startswith("reason")]
        completions = [Completion(r["id"], r["template"], bool(r["success"])) for r in records if "success" in r]
        flags = union_flags(completions)
        # The split by memorisation needs a flag for every item, or the record of why it has none (a punctuation
        # target): an interrupted run reports no split rather than a partial one.
        unscorable = {r["id"] for r in skipped if r["tag"] == "mem_length"}
        complete = bool(completions) and all(a.item_id in flags or a.item_id in unscorable for a in answers)
        return run_summary(answers, completions, question=self.options.question,
                           n_templates=len(MEMORISATION_TEMPLATES), n_sets=N_SETS if self.options.n_shot else 0,
                           memorised=flags if complete else None)

    def _unit_tables(self, records: list[Record]) -> Iterable[UnitTable]:
        """Per proverb (and few-shot demonstration set): whether the asked question was answered right."""
        return [unit_table("accuracy", [
            UnitValue(r["id"], 100.0 * bool(r["correct"]),
                      {"language": r["language"], "figurative": "figurative" if r["is_figurative"] else "literal"},
                      str(r["demo_set"])) for r in records if r["tag"].startswith("reason")])]


def culture_gap_study(accuracy: Mapping[str, float], direction: Literal["zh_en", "en_zh"] = "zh_en"
                      ) -> dict[str, Any]:
    """Culture and language gaps (spec 4.5) from the accuracies of the four runs of one direction.

    `accuracy` maps config names (e.g. "maps_zh", "maps_en", "maps_zh_en_mt", "maps_zh_en_ht") to their
    positive-question accuracy (`run(...).metrics["accuracy"]`).
    """
    from culture_probe.metrics.proverbs import culture_gap

    needed = GAP_CONFIGS[direction]
    missing = [name for name in needed if name not in accuracy]
    if missing:
        raise CultureProbeError(f"The {direction} culture-gap study needs runs of {', '.join(needed)}; "
                                f"missing {', '.join(missing)}.")
    src, tgt, mt, ht = (accuracy[name] for name in needed)
    return culture_gap(source=src, target=tgt, human_translated=ht, machine_translated=mt)


MT_TO_ENGLISH = re.compile(r"maps_([a-z]+)_en_mt")  # a language's items machine-translated into English


def delta_en_study(accuracy: Mapping[str, float]) -> dict[str, float]:
    """Δ_En per language (spec 5, the paper's Table 11) from run accuracies: `maps_en` minus `maps_<lang>_en_mt`.

    `accuracy` maps config names to positive-question accuracy; configs other than those two kinds are ignored,
    so the accuracies of a whole study can be passed at once.
    """
    from culture_probe.metrics.proverbs import delta_en

    translated = {match[1]: value for name, value in accuracy.items() if (match := MT_TO_ENGLISH.fullmatch(name))}
    if "maps_en" not in accuracy or not translated:
        raise CultureProbeError("Δ_En needs the accuracy of maps_en and of at least one maps_<lang>_en_mt run "
                                f"(e.g. maps_de_en_mt); got {', '.join(accuracy) or 'none'}.")
    return delta_en(accuracy["maps_en"], translated)


TASK = MapsTask
