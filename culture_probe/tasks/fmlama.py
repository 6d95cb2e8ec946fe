"""FmLAMA protocol (spec fmlama.md section 4): rank a language's whole ingredient pool for every dish, in five
cloze templates without (`hasParts_k`) and with (`country_k`) the dish's country named.

mAP and mWS per template and origin group, then mean ± sample std over the five templates of a family
(`culture_probe.metrics.fmlama.ranking_summary`). Records keep each dish's top predictions and the rank of every
gold ingredient, which is all that AP, P@k and mWS need.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from culture_probe.data.fmlama import candidate_pool
from culture_probe.data.registry import resolve
from culture_probe.data.resources import Need
from culture_probe.engine.types import GenerateOptions, ScoreOptions, ScoreRequest
from culture_probe.errors import CultureProbeError, UnsupportedModelError
from culture_probe.metrics.fmlama import (
    FAMILIES,
    ChatReply,
    RankedDish,
    average_precision,
    chat_summary,
    ranking_summary,
    words_needed,
)
from culture_probe.metrics.results import UnitTable, UnitValue, unit_table
from culture_probe.tasks.base import Deviation, RecordFields, Task, all_scores, ranked_candidates, split_slot
from culture_probe.tasks.options import at_least
from culture_probe.tasks.probes import GenerateProbe, Probe, Record, ScoreProbe, Skipped

TOP_K = 10  # predictions kept per record beyond |gold| (for reading items.jsonl)
# Placeholders: (dish, ingredient slot, country); Hebrew templates number them.
SLOTS = {"he": ("[1]", "[2]", "[3]")}
DEFAULT_SLOTS = ("[X]", "[Y]", "[C]")
# Country fillers of spec 4.1 (F4/F5): English keeps the origin key except three; Chinese for the 8 cs origins.
COUNTRY_NAMES = {
    "en": {"People's Republic of China": "China", "United States of America": "the United States",
           "United Kingdom": "the United Kingdom"},
    "zh": {"Japan": "日本", "United States of America": "美国", "People's Republic of China": "中国", "France": "法国",
           "Italy": "意大利", "United Kingdom": "英国", "Indonesia": "印度尼西亚", "India": "印度"},
}  # fmt: skip
# Chat mode (spec 4.3, the paper's Table 3/13): the two instruction wordings appended to hasParts_1/country_1.
CHAT_INSTRUCTIONS = {
    "en": (" Please fill the sentence.", " Please fill the sentence with only one entity."),
    "zh": ("请填充这个句子。", "请用一个词填充这个句子。"),
}
REPLY_SPLIT = re.compile(r",|，|、|\n|\band\b")
PUNCTUATION = " \t.。!！?？;；:：\"'“”‘’()（）[]*-"


@dataclass(frozen=True)
class FmlamaOptions:
    """FmLAMA switches; defaults are the v1 paper's protocol."""

    families: tuple[str, ...] = FAMILIES  # template families to probe: hasParts (no context), country
    template_set: Literal["faithful", "corrected"] = "faithful"  # corrected: spec 7 template fixes
    country_names: dict[str, dict[str, str]] | None = None  # {lang: {origin key: name}} for the [C] slot
    max_candidate_tokens: int | None = None  # F2 compat: 10 drops longer candidates, as the v1 MLM path did
    ap_denominator: Literal["gold", "ranked"] = "gold"  # F2 compat: "ranked" divides by golds in the ranking
    vectors: str | None = None  # for mWS: fastText cc.<lang>.300.bin (or its folder) or text .vec; None: no mWS
    group_by: Literal["group", "continent"] = "group"  # the aligned-175 tables group by continent
    keep_scores: bool = False  # write every candidate's sum, token count and per-token log-probs (large)
    mode: Literal["rank", "chat"] = "rank"  # chat: generate with the chat template (paper Table 3/13)
    chat_max_new_tokens: int = 64
    chat_decoding: Literal["greedy", "sample"] = "greedy"  # sample: the paper's one draw, seeded by the run's seed
    chat_temperature: float = 0.7  # of chat_decoding="sample" (spec 4.3: the paper sampled at 0.7)

    def __post_init__(self) -> None:
        unknown = [f for f in self.families if f not in FAMILIES]
        if unknown or not self.families:
            raise CultureProbeError(f"families must be some of {', '.join(FAMILIES)}, got {list(self.families)}.")
        at_least("max_candidate_tokens", self.max_candidate_tokens, 1, none_ok=True)
        at_least("chat_max_new_tokens", self.chat_max_new_tokens, 1)


def _ranks(task: FmlamaTask) -> bool:
    return task.options.mode == "rank"


def _chat(task: FmlamaTask) -> bool:
    return task.options.mode == "chat"


class FmlamaTask(Task):
    """FmLAMA: ingredients of dishes, ranked against the language's whole pool."""

    Options = FmlamaOptions
    unit, strata = "dishes", ("lang", "group")
    options: FmlamaOptions
    deviations = (
        Deviation("F1", "Gold set strings are split on ', ' (the v1 runner fed the whole string as one candidate)."),
        Deviation("F2", "No candidate length cap; AP divides by |G| as in the paper (the v1 code capped candidates "
                  "at 10 sub-tokens and divided by the golds found in the ranking: max_candidate_tokens=10, "
                  "ap_denominator='ranked').", "ranking with the default cap and denominator",
                  lambda t: _ranks(t) and t.options.max_candidate_tokens is None
                  and t.options.ap_denominator == "gold"),
        Deviation("F3", "Templates filled with str.replace, never re.sub('[X]', ...) (v1 T5/mT5 artifact).",
                  "seq2seq models", lambda t: t.kind == "seq2seq"),
        Deviation("F4", "No double space in the English country filler ('the United States').",
                  "country templates", lambda t: "country" in t.options.families),
        Deviation("F5", "Country names per spec 4.1 (en origin keys, zh for the 8 code-switching origins, "
                  "others from country_names=); rows without a name are skipped for country templates, counted.",
                  "country templates", lambda t: "country" in t.options.families),
        Deviation("F6", "Causal models: teacher-forced mean log-prob of the ingredient (plus the text after it "
                  "when the dish comes after the slot): a culture_probe extension, not in the v1 paper.",
                  "causal models, ranking", lambda t: _ranks(t) and t.kind == "causal"),
        Deviation("F7", "items.jsonl keeps the top |G| + 10 candidates and every gold rank, not the sum, token count "
                  "and mean of every candidate, which would multiply its size by the pool size; "
                  "--option keep_scores=true records them all.", "ranking without keep_scores",
                  lambda t: _ranks(t) and not t.options.keep_scores),
        Deviation("F-chat", "Chat replies are parsed with a documented approximation (the original parser was "
                  "never released): split on commas, 'and', newlines and 、, case-folded, crude English singular.",
                  "mode='chat'", _chat),
        Deviation("F8", "Chat replies are decoded greedily; the paper sampled one reply at temperature 0.7 "
                  "(chat_decoding='sample' does, seeded per prompt from the run's seed).",
                  "mode='chat' with greedy decoding", lambda t: _chat(t) and t.options.chat_decoding == "greedy"),
    )

    def __init__(self, config: str, options: FmlamaOptions | None = None, *, kind: Any, seed: int = 0,
                 resources: Mapping[str, Any] | None = None):
        super().__init__(config, options, kind=kind, seed=seed, resources=resources)
        self.seeded = self.options.mode == "chat" and self.options.chat_decoding == "sample"
        if self.options.mode == "chat" and kind == "masked":
            raise UnsupportedModelError("FmLAMA chat mode generates replies: it needs a causal or seq2seq (chat) "
                                        "model, not a masked one. Use mode=rank for masked models.")

    @classmethod
    def needs(cls, config: str, options: FmlamaOptions) -> dict[str, Need]:
        """The templates (faithful or corrected set), and the mWS vectors when `vectors=` names them."""
        needs = {"templates": Need("fmlama", "templates", corrected=options.template_set == "corrected")}
        if options.vectors and options.mode == "rank":
            params = (("path", options.vectors), ("language", config_language(config)))
            needs["vectors"] = Need("fmlama", "vectors", params=params)
        return needs

    def describe(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Candidate pool size and hash, the templates used, and how chat replies are decoded."""
        pool = candidate_pool(rows)
        digest = hashlib.sha256(json.dumps(pool, ensure_ascii=False).encode("utf-8")).hexdigest()
        language = prompt_language(rows[0]) if rows else None
        templates = {rel: text for rel, _, text in self.templates(language)} if language else {}
        described: dict[str, Any] = {"n_candidates": len(pool), "candidates_sha256": digest, "templates": templates}
        if self.options.mode == "chat":
            described["chat_decoding"] = (
                f"one sample at temperature {self.options.chat_temperature}, seeded per prompt from seed {self.seed}"
                if self.seeded else "greedy")
        return described

    def templates(self, language: str) -> list[tuple[str, str, str]]:
        """(relation, family, template) of the canonical templates of `language`, families as optioned."""
        found = [(r["relation"], r["family"], r["template"]) for r in self.resource("templates")
                 if r["language"] == language and r["canonical"] and r["family"] in self.options.families]
        return sorted(found, key=lambda t: (FAMILIES.index(t[1]), t[0]))

    # ------------------------------------------------------------ hooks

    def _probes(self, rows: Sequence[Mapping[str, Any]], stage: str, previous: Sequence[Record]) -> Iterable[Probe]:
        pool = tuple(candidate_pool(rows))
        by_language = {}
        for row in rows:
            language = prompt_language(row)
            if language not in by_language:
                by_language[language] = self.templates(language)
            for relation, family, template in by_language[language]:
                if self.options.mode == "rank":
                    yield self.probe(row, relation, family, template, pool)
                elif relation.endswith("_1"):  # chat mode asks with the first template of each family
                    yield from self.chat_probes(row, relation, family, template)

    def _context(self, row: Mapping[str, Any], relation: str, family: str,
                 tag: str) -> tuple[dict[str, Any], str | None, Skipped | None]:
        """(record meta, country filler, a Skipped when the country has no name in the prompt language)."""
        language = prompt_language(row)
        meta = {"template": relation, "family": family, "group": row["group"], "continent": row.get("continent"),
                "origin": row["origin"], "lang": language, "gold": list(row["obj_label"])}
        if family != "country":
            return meta, None, None
        country = country_name(row["origin"], language, self.options.country_names)
        if country is None:
            reason = f"no {language} name for country {row['origin']!r} (pass country_names=)"
            return meta, None, Skipped(row["id"], reason, tag=tag, meta=meta)
        return meta, country, None

    def probe(self, row: Mapping[str, Any], relation: str, family: str, template: str,
              pool: tuple[str, ...]) -> Probe:
        """One dish in one template: the filled prompt split at the ingredient slot."""
        meta, country, skipped = self._context(row, relation, family, relation)
        if skipped is not None:
            return skipped
        left, right, dish_after_slot = fill(template, row["sub_label"], country, prompt_language(row))
        meta["prompt"] = f"{left}[Y]{right}"
        options = ScoreOptions(score_right=self.kind == "causal" and dish_after_slot,
                               keep_tokens=self.options.keep_scores)
        return ScoreProbe(row["id"], slot_request(left, right, pool), options, tag=relation, meta=meta)

    def chat_probes(self, row: Mapping[str, Any], relation: str, family: str, template: str) -> Iterator[Probe]:
        """Chat mode: the template with the slot shown as `[]`, then each instruction wording (spec 4.3)."""
        language = prompt_language(row)
        if language not in CHAT_INSTRUCTIONS:
            raise CultureProbeError(f"FmLAMA chat mode has instructions for {', '.join(CHAT_INSTRUCTIONS)} only, "
                                    f"not {language!r} (the paper's code-switching configs); use mode=rank.")
        sample = self.options.chat_decoding == "sample"
        options = GenerateOptions(self.options.chat_max_new_tokens, chat=True,
                                  temperature=self.options.chat_temperature if sample else None,
                                  seed=self.seed if sample else None)
        for index, instruction in enumerate(CHAT_INSTRUCTIONS[language]):
            tag = f"{relation}_chat{index}"
            meta, country, skipped = self._context(row, relation, family, tag)
            if skipped is not None:
                yield skipped
                continue
            left, right, _ = fill(template, row["sub_label"], country, language)
            meta.update(prompt=f"{left}[]{right}{instruction}", instruction=index, frame=[left, right])
            yield GenerateProbe(row["id"], meta["prompt"], options, tag=tag, meta=meta)

    def _read(self, probe: Probe, output: Any) -> RecordFields:
        if isinstance(probe, GenerateProbe):
            items = reply_items(output, probe.meta["frame"])
            gold = {normalise(g, probe.meta["lang"]) for g in probe.meta["gold"]}
            return {"reply": output, "items": items,
                    "correct": any(normalise(i, probe.meta["lang"]) in gold for i in items)}
        cap = self.options.max_candidate_tokens
        ranking = ranked_candidates(output)
        if cap is not None:
            tokens = dict(zip(output.candidates, output.n_tokens.tolist(), strict=True))
            ranking = [c for c in ranking if tokens[c] <= cap]
        rank = {c: i for i, c in enumerate(ranking, 1)}
        gold = probe.meta["gold"]
        fields = {"prediction": ranking[0] if ranking else None, "top": ranking[: len(set(gold)) + TOP_K],
                  "gold_ranks": [rank.get(g) for g in gold], "n_candidates": len(ranking)}
        if self.options.keep_scores:
            fields["scores"] = all_scores(output)
        return fields

    def _metrics(self, records: list[Record], skipped: list[Record]) -> dict[str, Any]:
        if self.options.mode == "chat":
            return chat_summary([chat_reply(r, self.options.group_by) for r in records])
        dishes = [self.ranked_dish(r) for r in records]
        embed = None
        if self.options.vectors:  # read only the vectors mWS needs, once
            embed = self.resource("vectors").lookup(words_needed([d.ranking for d in dishes],
                                                                 [d.gold for d in dishes]))
        return ranking_summary(dishes, embed)

    def _unit_tables(self, records: list[Record]) -> Iterable[UnitTable]:
        """Per dish, per template of a family: its AP (mAP = the mean over templates of the mean over dishes, as
        `map_<family>`); chat mode: per dish and prompt cell, whether it named a gold ingredient (the mean over cells,
        where the paper reports the best cell).
        """
        if self.options.mode == "chat":
            replies = [chat_reply(r, self.options.group_by) for r in records]
            return [unit_table("chat_accuracy", [
                UnitValue(r.item_id, 100.0 * c.correct, {"lang": r["lang"], "group": c.group},
                          f"{c.template} / {c.instruction}") for r, c in zip(records, replies, strict=True)])]
        rows: dict[str, list[UnitValue]] = {}
        for record in records:
            dish = self.ranked_dish(record)
            ap = 100.0 * average_precision(dish.ranking, set(dish.gold)) if dish.gold else float("nan")
            rows.setdefault(f"map_{dish.family}", []).append(
                UnitValue(record.item_id, ap, {"lang": record["lang"], "group": dish.group}, dish.template))
        return [unit_table(name, rows[name]) for name in (f"map_{f}" for f in FAMILIES) if name in rows]

    def ranked_dish(self, record: Record) -> RankedDish:
        """The metric input of a ranking record."""
        return RankedDish(record["template"], record["family"], record[self.options.group_by] or "unknown",
                          tuple(record_ranking(record)), tuple(reference(record, self.options.ap_denominator)))


def chat_reply(record: Record, group_by: str) -> ChatReply:
    """The metric input of a chat-mode record."""
    return ChatReply(record["template"], record["instruction"], record[group_by] or "unknown", bool(record["correct"]))


# ---------------------------------------------------------------- prompts


def config_language(config: str) -> str:
    """The prompt language of a config (its `prompt_lang`, else its `lang`)."""
    _, builder_config = resolve(config)
    return getattr(builder_config, "prompt_lang", "") or getattr(builder_config, "lang", "") or "en"


def prompt_language(row: Mapping[str, Any]) -> str:
    """The template language: the prompt language of code-switching rows, else the row's language."""
    return row.get("prompt_lang") or row["lang"]


def country_name(origin: str, language: str, names: Mapping[str, Mapping[str, str]] | None) -> str | None:
    """The [C] filler: a user table first, then spec 4.1's rules; None when no name is known."""
    if names and origin in names.get(language, {}):
        return names[language][origin]
    if language == "en":
        return COUNTRY_NAMES["en"].get(origin, origin)
    return COUNTRY_NAMES.get(language, {}).get(origin)


def fill(template: str, dish: str, country: str | None, language: str) -> tuple[str, str, bool]:
    """(left, right, dish after slot) of a template filled with plain `str.replace` (never a regex: F3)."""
    dish_slot, slot, country_slot = SLOTS.get(language, DEFAULT_SLOTS)
    dish_after_slot = template.index(dish_slot) > template.index(slot)
    text = template.replace(dish_slot, dish)
    if country is not None:
        text = text.replace(country_slot, country)
    left, right = split_slot(text, slot)
    return left, right, dish_after_slot


def slot_request(left: str, right: str, candidates: Sequence[str]) -> ScoreRequest:
    """A request that keeps the template's own spacing: a space before the slot moves onto the candidate
    (in-context ids, like ' tofu' for BPE), no space stays none (zh, or a slot glued to punctuation).
    """
    stripped = left.rstrip()
    sep = " " if stripped != left else ""
    return ScoreRequest(left=stripped, candidates=tuple(candidates), right=right, sep=sep)


def reply_items(reply: str, frame: Sequence[str]) -> list[str]:
    """The items a chat reply names: the prompt's own text removed, split on commas, "and", newlines, 、."""
    text = reply
    for part in frame:
        if part.strip():
            text = re.sub(re.escape(part.strip()), " ", text, flags=re.IGNORECASE)
    items = (item.strip(PUNCTUATION) for item in REPLY_SPLIT.split(text))
    return [item for item in items if item]


def normalise(text: str, language: str) -> str:
    """Case-folded, punctuation-stripped; English words reduced to a crude singular (no lemmatiser offline)."""
    text = text.strip(PUNCTUATION).casefold()
    return " ".join(_singular(w) for w in text.split()) if language == "en" else text


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("ses", "xes", "zes", "ches", "shes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


# ---------------------------------------------------------------- records to metric inputs


def record_ranking(record: Mapping[str, Any] | Record) -> list[str]:
    """A ranking equivalent to the full one for AP, P@k and mWS: the stored top predictions, each gold at its
    rank, unique fillers elsewhere (the records do not keep the whole pool order).
    """
    ranks = [r for r in record["gold_ranks"] if r is not None]
    ranking = list(record["top"]) + [f"\0{i}" for i in range(len(record["top"]), max(ranks, default=0))]
    for gold, rank in zip(record["gold"], record["gold_ranks"], strict=True):
        if rank is not None:
            ranking[rank - 1] = gold
    return ranking


def reference(record: Mapping[str, Any] | Record, denominator: str) -> list[str]:
    """Gold items; with the v1 code's `ranked` denominator only those present in the ranking (F2)."""
    if denominator == "ranked":
        return [g for g, rank in zip(record["gold"], record["gold_ranks"], strict=True) if rank is not None]
    return list(record["gold"])


TASK = FmlamaTask
