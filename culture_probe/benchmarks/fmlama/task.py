"""FmLAMA protocol (the paper's section 4): rank a language's whole ingredient pool for every dish,
in five cloze templates without (`hasParts_k`) and with (`country_k`) the dish's country named.

mAP and mWS per template and origin group, then mean ± sample std over the five templates of a
family (`culture_probe.benchmarks.fmlama.metrics.ranking_summary`). Records keep each dish's top
predictions and the rank of every gold ingredient, which is all that AP, P@k and mWS need.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from culture_probe.benchmarks.fmlama.data import OTHERS, candidate_pool
from culture_probe.benchmarks.fmlama.metrics import (
    FAMILIES,
    ChatReply,
    RankedDish,
    average_precision,
    chat_summary,
    ranking_summary,
    words_needed,
)
from culture_probe.data.registry import Benchmark, resolve
from culture_probe.data.resources import Need
from culture_probe.engine.types import GenerateOptions, ScoreOptions
from culture_probe.errors import CultureProbeError
from culture_probe.metrics import chance
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
    ranks_of,
    split_slot,
)
from culture_probe.tasks.deviations import Deviation, Scope
from culture_probe.tasks.filling import Fill, fill_slots
from culture_probe.tasks.options import at_least, in_range
from culture_probe.tasks.probes import GenerateProbe, Probe, Record, Skipped
from culture_probe.tasks.sampling import Smoke
from culture_probe.util.typecheck import check_types

TOP_K = 10  # predictions kept per record beyond |gold| (for reading items.jsonl)
# Placeholders: (dish, ingredient slot, country); Hebrew templates number them.
SLOTS = {"he": ("[1]", "[2]", "[3]")}
DEFAULT_SLOTS = ("[X]", "[Y]", "[C]")
# Country fillers of the with-context templates (the paper's section 4.1; F4/F5): English keeps the
# origin key except three; Chinese for the 8 cs origins.
COUNTRY_NAMES = {
    "en": {"People's Republic of China": "China", "United States of America": "the United States",
           "United Kingdom": "the United Kingdom"},
    "zh": {"Japan": "日本", "United States of America": "美国", "People's Republic of China": "中国", "France": "法国",
           "Italy": "意大利", "United Kingdom": "英国", "Indonesia": "印度尼西亚", "India": "印度"},
}  # fmt: skip
# Chat mode (the paper's section 5.3, Tables 3 and 13): the two instruction wordings appended to
# hasParts_1/country_1.
CHAT_INSTRUCTIONS = {
    "en": (" Please fill the sentence.", " Please fill the sentence with only one entity."),
    "zh": ("请填充这个句子。", "请用一个词填充这个句子。"),
}
# The named origin groups of the released v1 scorer (metrics_utils.COUNTRY; Indonesia and Korea
# commented out): every other origin, Germany, Iran, Greece and Russia included, is "Others" there
# (F10).
V1_CODE_GROUPS = (
    "U.S.",
    "France",
    "Italy",
    "India",
    "Japan",
    "U.K.",
    "Spain",
    "China",
    "Turkey",
    "Mexico",
)
REPLY_SPLIT = re.compile(r",|，|、|\n|\band\b")
PUNCTUATION = " \t.。!！?？;；:：\"'“”‘’()（）[]*-"


@dataclass(frozen=True)
class FmlamaOptions:
    """FmLAMA switches; defaults are the v1 paper's protocol."""

    # template families to probe: hasParts (no context), country
    families: tuple[str, ...] = FAMILIES
    template_set: Literal["faithful", "corrected"] = (
        "faithful"  # corrected: the template fixes of the corrected variant
    )
    # {lang: {origin key: name}} for the [C] slot
    country_names: dict[str, dict[str, str]] | None = None
    # F1 (ranking): False feeds each dish's gold set string whole, as one candidate and one gold
    # (the v1 runner); True splits it on ", " into ingredients (the paper's tables)
    split_gold: bool = True
    # F2: 10 drops candidates of more than 10 tokens from the ranking, as the v1 masked path did; it
    # applies to masked models only, as there (the v1 T5 path had no cap)
    max_candidate_tokens: int | None = None
    # F2b: "ranked" divides AP by the golds found in the ranking
    ap_denominator: Literal["gold", "ranked"] = "gold"
    # F3: "upstream_regex" fills [X] then [C] with re.sub as the v1 T5/mT5 path did (brackets stay,
    # every capital X of the template and every capital C of the text, dish names included, is
    # replaced); "replace" is str.replace
    fill: Fill = "replace"
    # F9: "alone" scores each candidate by its ids as tokenized on its own (the v1 masked path's
    # tokenizer.tokenize); "in_context" as it reads after the slot
    candidate_tokenization: Literal["in_context", "alone"] = "in_context"
    # F10 (ranking): "v1_code" keeps the 10 named origin groups of the released scorer (Germany,
    # Iran, Greece, Russia become Others); "paper" the paper's 14
    group_set: Literal["paper", "v1_code"] = "paper"
    # F11: round each template's mAP cells to 2 decimals before the mean, as v1 did
    round_template_map: bool = False
    # for mWS: fastText cc.<lang>.300.bin (or its folder) or text .vec; None: no mWS
    vectors: str | None = None
    group_by: Literal["group", "continent"] = "group"  # the aligned-175 tables group by continent
    # write every candidate's sum, token count and per-token log-probs (large)
    keep_scores: bool = False
    # chat: generate with the chat template (paper Table 3/13)
    mode: Literal["rank", "chat"] = "rank"
    chat_max_new_tokens: int = 64
    # sample: the paper's one draw, seeded by the run's seed
    chat_decoding: Literal["greedy", "sample"] = "greedy"
    # of chat_decoding="sample" (the paper sampled at 0.7, section 5.3)
    chat_temperature: float = 0.7

    def __post_init__(self) -> None:
        check_types(self)
        unknown = [f for f in self.families if f not in FAMILIES]
        if unknown or not self.families:
            raise CultureProbeError(
                f"families must be some of {', '.join(FAMILIES)}, got {list(self.families)}."
            )
        at_least("max_candidate_tokens", self.max_candidate_tokens, 1, none_ok=True)
        at_least("chat_max_new_tokens", self.chat_max_new_tokens, 1)
        in_range("chat_temperature", self.chat_temperature, 0, above=True)

    def needs(self, benchmark: Benchmark) -> dict[str, Need]:
        """The templates (faithful or corrected set), and the mWS vectors when `vectors=` names
        them.
        """
        needs = {
            "templates": Need("fmlama", "templates", corrected=self.template_set == "corrected")
        }
        if self.vectors and self.mode == "rank":
            params = (("path", self.vectors), ("language", config_language(benchmark)))
            needs["vectors"] = Need("fmlama", "vectors", params=params)
        return needs


GROUP_NEEDS = (
    "the numbers per country group (the paper's table) need 2 dishes of each for an interval"
)
# A smoke run ranks the pool (1,287 ingredients in English) in the first two templates of each
# family, not all five: the family's mAP, its mean and std over templates and every group's number
# are there, at two-fifths of the cost.
RANK_SMOKE = Smoke(
    2,
    GROUP_NEEDS,
    tags=tuple(f"{family}_{n}" for family in FAMILIES for n in (1, 2)),
    omits="templates 3-5 of each family (the mean and std over templates are over templates 1-2)",
)
# the model kinds of the released v1 code's two paths (masked, T5/mT5)
V1_KINDS = ("masked", "seq2seq")


def _ranks(task: FmlamaTask) -> bool:
    return task.options.mode == "rank"


def _chat(task: FmlamaTask) -> bool:
    return task.options.mode == "chat"


# the ranking runs (not the chat mode), which most deviations concern
RANKING = Scope("ranking", _ranks)


class FmlamaTask(Task):
    """FmLAMA: ingredients of dishes, ranked against the language's whole pool."""

    Options = FmlamaOptions
    unit, strata = "dishes", ("lang", "group")
    design = SamplingDesign(
        "dish", repeated=("template (chat mode: prompt cell, template x instruction)",)
    )
    smoke = Smoke(2, GROUP_NEEDS)
    options: FmlamaOptions

    def _configure(self) -> None:
        """Chat mode samples with the seed when asked to, and asks a causal or seq2seq model through
        its chat template (a refusal names mode=rank); ranking smoke runs ask two templates per
        family.
        """
        self.seeded = self.options.mode == "chat" and self.options.chat_decoding == "sample"
        if self.options.mode == "rank":
            # ranking the whole pool is the costly part: two templates per family
            self.smoke = RANK_SMOKE
            return
        why = "FmLAMA chat mode generates replies through the model's chat template (the paper's section 5.3)"
        need = ModelNeed(("causal", "seq2seq"), chat=True, why=why, instead="--option mode=rank")
        self.stages = (Stage("main", need=need),)
        self.facts["chat_decoding"] = (
            f"one sample at temperature {self.options.chat_temperature}, seeded per prompt from seed {self.seed}"
            if self.seeded
            else "greedy"
        )

    def _row_facts(self, rows: Sequence[Mapping[str, Any]], pool: Sequence[str]) -> dict[str, Any]:
        """Candidate pool size and hash, and the templates used, as config.json records them."""
        digest = hashlib.sha256(
            json.dumps(list(pool), ensure_ascii=False).encode("utf-8")
        ).hexdigest()
        language = prompt_language(rows[0]) if rows else None
        templates = {rel: text for rel, _, text in self.templates(language)} if language else {}
        return {"n_candidates": len(pool), "candidates_sha256": digest, "templates": templates}

    def gold(self, row: Mapping[str, Any]) -> list[str]:
        """A dish's gold items: its ingredients, or (ranking with split_gold=False, F1) the one
        string the v1 runner read.
        """
        if self.options.split_gold or self.options.mode != "rank" or not row["obj_label"]:
            return list(row["obj_label"])
        # the loader split the released string on ", ": this rejoins it exactly
        return [", ".join(row["obj_label"])]

    def pool(self, rows: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        """The candidates every dish is ranked against: the gold items of all rows, in code-point
        order.
        """
        return tuple(candidate_pool({"obj_label": self.gold(row)} for row in rows))

    def templates(self, language: str) -> list[tuple[str, str, str]]:
        """(relation, family, template) of the canonical templates of `language`, families as
        optioned.
        """
        found = [
            (r["relation"], r["family"], r["template"])
            for r in self.resource("templates")
            if r["language"] == language and r["canonical"] and r["family"] in self.options.families
        ]
        return sorted(found, key=lambda t: (FAMILIES.index(t[1]), t[0]))

    # ------------------------------------------------------------ hooks

    def _probes(
        self, rows: Sequence[Mapping[str, Any]], stage: str, previous: Sequence[Record]
    ) -> Iterable[Probe]:
        pool = self.pool(rows)
        self.facts = {**self._row_facts(rows, pool), **self.facts}
        by_language = {}
        for row in rows:
            language = prompt_language(row)
            if language not in by_language:
                by_language[language] = self.templates(language)
            for relation, family, template in by_language[language]:
                if self.options.mode == "rank":
                    yield self.probe(row, relation, family, template, pool)
                # chat mode asks with the first template of each family
                elif relation.endswith("_1"):
                    yield from self.chat_probes(row, relation, family, template)

    def _context(
        self, row: Mapping[str, Any], relation: str, family: str, tag: str
    ) -> tuple[dict[str, Any], str | None, Skipped | None]:
        """(record meta, country filler, a Skipped when the country has no name in the prompt
        language).
        """
        language = prompt_language(row)
        meta = {
            "template": relation,
            "family": family,
            "group": row["group"],
            "continent": row.get("continent"),
            "origin": row["origin"],
            "lang": language,
            "gold": self.gold(row),
        }
        if family != "country":
            return meta, None, None
        country = country_name(row["origin"], language, self.options.country_names)
        if country is None:
            reason = f"no {language} name for country {row['origin']!r} (pass country_names=)"
            return meta, None, Skipped(row["id"], reason, tag=tag, meta=meta)
        return meta, country, None

    def probe(
        self,
        row: Mapping[str, Any],
        relation: str,
        family: str,
        template: str,
        pool: tuple[str, ...],
    ) -> Probe:
        """One dish in one template: the filled prompt split at the ingredient slot."""
        meta, country, skipped = self._context(row, relation, family, relation)
        if skipped is not None:
            return skipped
        left, right, dish_after_slot = fill(
            template, row["sub_label"], country, prompt_language(row), self.options.fill
        )
        options = ScoreOptions(
            score_right=self.kind == "causal" and dish_after_slot,
            keep_tokens=self.options.keep_scores,
        )
        ids = self.options.candidate_tokenization
        return cloze_probe(
            row["id"], left, right, pool, options, meta, candidate_ids=ids, tag=relation
        )

    def chat_probes(
        self, row: Mapping[str, Any], relation: str, family: str, template: str
    ) -> Iterator[Probe]:
        """Chat mode: the template with the slot shown as `[]`, then each instruction wording (the
        paper's section 5.3).
        """
        language = prompt_language(row)
        if language not in CHAT_INSTRUCTIONS:
            raise CultureProbeError(
                f"FmLAMA chat mode has instructions for {', '.join(CHAT_INSTRUCTIONS)} only, "
                f"not {language!r} (the paper's code-switching configs); use mode=rank."
            )
        sample = self.options.chat_decoding == "sample"
        options = GenerateOptions(
            self.options.chat_max_new_tokens,
            chat=True,
            temperature=self.options.chat_temperature if sample else None,
            seed=self.seed if sample else None,
        )
        for index, instruction in enumerate(CHAT_INSTRUCTIONS[language]):
            tag = f"{relation}_chat{index}"
            meta, country, skipped = self._context(row, relation, family, tag)
            if skipped is not None:
                yield skipped
                continue
            # F3 concerns the T5 ranking only
            left, right, _ = fill(template, row["sub_label"], country, language)
            meta.update(
                prompt=f"{left}[]{right}{instruction}", instruction=index, frame=[left, right]
            )
            yield GenerateProbe(row["id"], meta["prompt"], options, tag=tag, meta=meta)

    def _read(self, probe: Probe, output: Any) -> RecordFields:
        if isinstance(probe, GenerateProbe):
            items = reply_items(output, probe.meta["frame"])
            gold = {normalise(g, probe.meta["lang"]) for g in probe.meta["gold"]}
            return {
                "reply": output,
                "items": items,
                "correct": any(normalise(i, probe.meta["lang"]) in gold for i in items),
            }
        # F2: v1's masked path only
        cap = self.options.max_candidate_tokens if self.kind == "masked" else None
        order = output.ranking("mean", ties="fewer_tokens")
        if cap is not None:
            order = order[output.n_tokens[order] <= cap]
        gold = probe.meta["gold"]
        top = [output.candidates[i] for i in order[: len(set(gold)) + TOP_K].tolist()]
        fields: RecordFields = {
            "prediction": top[0] if top else None,
            "top": top,
            "gold_ranks": ranks_of(output, order, gold),
            "n_candidates": len(order),
        }
        if self.options.keep_scores:
            fields["scores"] = all_scores(output)
        return fields

    def _metrics(self, records: list[Record], skipped: list[Record]) -> Scores:
        """Ranking: per dish, per template of a family, its AP (mAP = the mean over templates of the
        mean over dishes, as `map_<family>`), beside its expected AP under a random ranking of the
        candidates it was ranked against (gold absent from the ranking, F2, count in the denominator
        as in its AP; none when a record does not say how many candidates it ranked, e.g. one
        written by hand). Chat mode: per dish and prompt cell, whether it named a gold ingredient
        (the mean over cells, where the paper reports the best cell).
        """
        if self.options.mode == "chat":
            replies = [chat_reply(r, self.group(r)) for r in records]
            accuracy = unit_table(
                "chat_accuracy",
                [
                    UnitValue(
                        r.item_id,
                        100.0 * c.correct,
                        {"lang": r["lang"], "group": c.group},
                        f"{c.template} / {c.instruction}",
                    )
                    for r, c in zip(records, replies, strict=True)
                ],
                higher_is_better=True,
            )
            return Scores(chat_summary(replies), [accuracy.with_scale(100.0, binary=True)])
        dishes = [self.ranked_dish(r) for r in records]
        embed = None
        if self.options.vectors:  # read only the vectors mWS needs, once
            embed = self.resource("vectors").lookup(
                words_needed([d.ranking for d in dishes], [d.gold for d in dishes])
            )
        summary = ranking_summary(
            dishes, embed, map_decimals=2 if self.options.round_template_map else None
        )
        ranked = self._map_tables(
            records, lambda dish, _: average_precision(dish.ranking, set(dish.gold))
        )
        counted = all("n_candidates" in r for r in records)
        random = self._map_tables(records, random_ap) if counted else []
        return Scores(
            summary,
            [table.with_scale(100.0) for table in ranked],
            chance=[(table, chance.AVERAGE_PRECISION) for table in random],
        )

    def _map_tables(
        self, records: Sequence[Record], ap: Callable[[RankedDish, Record], float]
    ) -> list[UnitTable]:
        """Per family, `map_<family>`: each dish's `ap(dish, record)` (%) per template (NaN without
        gold).
        """
        rows: dict[str, list[UnitValue]] = {}
        for record in records:
            dish = self.ranked_dish(record)
            value = 100.0 * ap(dish, record) if dish.gold else float("nan")
            rows.setdefault(f"map_{dish.family}", []).append(
                UnitValue(
                    record.item_id,
                    value,
                    {"lang": record["lang"], "group": dish.group},
                    dish.template,
                )
            )
        return [
            unit_table(name, rows[name], higher_is_better=True)
            for name in (f"map_{f}" for f in FAMILIES)
            if name in rows
        ]

    def ranked_dish(self, record: Record) -> RankedDish:
        """The metric input of a ranking record."""
        return RankedDish(
            record["template"],
            record["family"],
            self.group(record),
            tuple(record_ranking(record)),
            tuple(reference(record, self.options.ap_denominator)),
        )

    def group(self, record: Record) -> str:
        """The record's group in the tables: its origin group (of the paper's 14, or in ranking
        tables the v1 scorer's 10: F10) or its continent, as `group_by` says.
        """
        group = record[self.options.group_by] or "unknown"
        v1_code = self.options.group_set == "v1_code" and self.options.mode == "rank"
        if v1_code and self.options.group_by == "group" and group not in V1_CODE_GROUPS:
            return OTHERS
        return group

    # Where this protocol differs from the released code (docs/deviations.md)
    deviations = (
        Deviation(
            "F1",
            "Gold set strings are split on ', ' into ingredients, each a candidate; the v1 runner fed "
            "each dish's whole string as one gold and one candidate.",
            "ranking",
            _ranks,
            upstream={"split_gold": False},
            upstream_kinds=V1_KINDS,
        ),
        Deviation.for_kind(
            "F2",
            "No candidate length cap; the v1 masked path dropped candidates of more than 10 sub-tokens "
            "(its T5 path had no cap).",
            "masked",
            RANKING,
            upstream={"max_candidate_tokens": 10},
        ),
        Deviation(
            "F2b",
            "AP divides by |G| as in the paper; the v1 scorer divided by the golds found in the "
            "ranking and skipped dishes with none.",
            "ranking",
            _ranks,
            upstream={"ap_denominator": "ranked"},
            upstream_kinds=V1_KINDS,
        ),
        Deviation.for_kind(
            "F3",
            "Templates filled with str.replace; the v1 T5/mT5 path used re.sub('[X]', ...) then "
            "re.sub('[C]', ...): brackets stay and every capital C, dish names included, becomes the country.",
            "seq2seq",
            RANKING,
            upstream={"fill": "upstream_regex"},
        ),
        Deviation(
            "F4",
            "No double space in the English country filler ('the United States'); v1 wrote ' the United States'.",
            "country templates, ranking",
            lambda t: _ranks(t) and "country" in t.options.families,
            upstream={"country_names": {"en": {"United States of America": " the United States"}}},
            upstream_kinds=V1_KINDS,
        ),
        Deviation(
            "F5",
            "Country names by the library's rules (en origin keys, zh for the 8 code-switching origins, "
            "others from country_names=); rows without a name are skipped for country templates, counted.",
            "country templates",
            lambda t: "country" in t.options.families,
            upstream_note="upstream cannot run on the released data: v1 looks every origin up in 33-country "
            "tables before it checks the template, so the first origin outside them (en: 659 of 2,580 "
            "dishes) raises KeyError, even for hasParts templates; the profile keeps the library's names",
        ),
        Deviation.for_kind(
            "F6",
            "Causal models: teacher-forced mean log-prob of the ingredient (plus the text after it "
            "when the dish comes after the slot): a culture_probe extension, not in the v1 paper.",
            "causal",
            RANKING,
            upstream_note="upstream cannot run it: v1 has no causal path; v2's scores read off one greedy "
            "generation are not reproduced",
        ),
        Deviation.kept_scores(
            "F7", "the top |G| + 10 candidates and every gold rank", "pool size", RANKING
        ),
        Deviation(
            "F-chat",
            "Chat replies are parsed with a documented approximation (the original parser was "
            "never released): split on commas, 'and', newlines and 、, case-folded, crude English singular.",
            "mode='chat'",
            _chat,
            upstream_note="upstream cannot run it: no parser of the chat replies was released",
        ),
        Deviation(
            "F8",
            "Chat replies are decoded greedily (at most 64 new tokens by default) with the tokenizer's "
            "chat template; the paper sampled one reply at temperature 0.7 with up to 1,024 new tokens "
            "(chat_decoding='sample' does, seeded per prompt from the run's seed) through fastchat's "
            "conversation templates, which no option reproduces.",
            "mode='chat'",
            _chat,
            upstream={
                "chat_decoding": "sample",
                "chat_temperature": 0.7,
                "chat_max_new_tokens": 1024,
            },
            upstream_kinds=("causal",),
        ),
        Deviation.for_kind(
            "F9",
            "Candidates are scored with their in-context token ids; the v1 masked path tokenized each "
            "candidate on its own (no leading-space piece on BPE/SentencePiece; identical for WordPiece).",
            "masked",
            RANKING,
            upstream={"candidate_tokenization": "alone"},
        ),
        Deviation(
            "F10",
            "Origin groups are the paper's 14; the v1 scorer named 10 (Germany, Iran, Greece and Russia "
            "fall into Others there).",
            "ranking grouped by country",
            lambda t: _ranks(t) and t.options.group_by == "group",
            upstream={"group_set": "v1_code"},
            upstream_kinds=V1_KINDS,
        ),
        Deviation(
            "F11",
            "Each template's mAP is kept unrounded; the v1 scorer rounded it to 2 decimals "
            "(round(100 * map, 2)) before the mean over templates.",
            "ranking",
            _ranks,
            upstream={"round_template_map": True},
            upstream_kinds=V1_KINDS,
        ),
    )


def random_ap(dish: RankedDish, record: Record) -> float:
    """A dish's expected AP (0-1) under a uniformly random ranking of the candidates it was ranked
    against.
    """
    ranked = {
        g for g, rank in zip(record["gold"], record["gold_ranks"], strict=True) if rank is not None
    }
    gold = set(dish.gold)
    return chance.random_average_precision(len(ranked & gold), record["n_candidates"], len(gold))


def chat_reply(record: Record, group: str) -> ChatReply:
    """The metric input of a chat-mode record in its table group."""
    return ChatReply(record["template"], record["instruction"], group, bool(record["correct"]))


# ---------------------------------------------------------------- prompts


def config_language(config: str | Benchmark) -> str:
    """The prompt language of a config (its `prompt_lang`, else its `lang`)."""
    builder_config = resolve(config).config
    return getattr(builder_config, "prompt_lang", "") or getattr(builder_config, "lang", "") or "en"


def prompt_language(row: Mapping[str, Any]) -> str:
    """The template language: the prompt language of code-switching rows, else the row's
    language.
    """
    return row.get("prompt_lang") or row["lang"]


def country_name(
    origin: str, language: str, names: Mapping[str, Mapping[str, str]] | None
) -> str | None:
    """The [C] filler: a user table first, then the library's rules (F5); None when no name is
    known.
    """
    if names and origin in names.get(language, {}):
        return names[language][origin]
    if language == "en":
        return COUNTRY_NAMES["en"].get(origin, origin)
    return COUNTRY_NAMES.get(language, {}).get(origin)


def fill(
    template: str, dish: str, country: str | None, language: str, how: Fill = "replace"
) -> tuple[str, str, bool]:
    """(left, right, dish after slot) of a template: the stripped template, the stripped dish in its
    slot, then the country (unstripped: a filler's own spaces are kept, F4), by `str.replace` or the
    v1 T5 path's regex (F3).

    The v1 masked path stripped the template and the dish as here; its T5 path stripped neither,
    which changes nothing on the released data (no template or dish has surrounding whitespace). The
    regex concerns the `[X]` and `[C]` slots only: v1 never filled Hebrew's numbered slots (its
    prompts kept no dish and no slot, which cannot be scored), so Hebrew is filled by `str.replace`
    either way.
    """
    dish_slot, slot, country_slot = SLOTS.get(language, DEFAULT_SLOTS)
    template = template.strip()
    dish_after_slot = template.index(dish_slot) > template.index(slot)
    fillers = [(dish_slot, dish.strip())] + (
        [(country_slot, country)] if country is not None else []
    )
    text = fill_slots(template, fillers, "replace" if language in SLOTS else how)
    left, right = split_slot(text, slot)
    return left, right, dish_after_slot


def reply_items(reply: str, frame: Sequence[str]) -> list[str]:
    """The items a chat reply names: the prompt's own text removed, split on commas, "and",
    newlines, 、.
    """
    text = reply
    for part in frame:
        if part.strip():
            text = re.sub(re.escape(part.strip()), " ", text, flags=re.IGNORECASE)
    items = (item.strip(PUNCTUATION) for item in REPLY_SPLIT.split(text))
    return [item for item in items if item]


def normalise(text: str, language: str) -> str:
    """Case-folded, punctuation-stripped; English words reduced to a crude singular (no lemmatiser
    offline).
    """
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
    """A ranking equivalent to the full one for AP, P@k and mWS: the stored top predictions, each
    gold at its rank, unique fillers elsewhere (the records do not keep the whole pool order).
    """
    ranks = [r for r in record["gold_ranks"] if r is not None]
    ranking = list(record["top"]) + [
        f"\0{i}" for i in range(len(record["top"]), max(ranks, default=0))
    ]
    for gold, rank in zip(record["gold"], record["gold_ranks"], strict=True):
        if rank is not None:
            ranking[rank - 1] = gold
    return ranking


def reference(record: Mapping[str, Any] | Record, denominator: str) -> list[str]:
    """Gold items; with the v1 code's `ranked` denominator only those present in the ranking
    (F2).
    """
    if denominator == "ranked":
        return [
            g
            for g, rank in zip(record["gold"], record["gold_ranks"], strict=True)
            if rank is not None
        ]
    return list(record["gold"])


TASK = FmlamaTask
