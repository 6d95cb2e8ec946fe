"""FmLAMA protocol (spec fmlama.md section 4): rank a language's whole ingredient pool for every dish, in five
cloze templates without (`hasParts_k`) and with (`country_k`) the dish's country named.

mAP and mWS per template and origin group, then mean ± sample std over the five templates of a family. Records
keep each dish's top predictions and the rank of every gold ingredient, which is all that AP, P@k and mWS need.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from culture_probe.data.card import Deviation
from culture_probe.data.fmlama import candidate_pool
from culture_probe.engine.types import ScoreRequest
from culture_probe.errors import CultureProbeError, UnsupportedModelError
from culture_probe.metrics.display import format_score
from culture_probe.metrics.fmlama import (
    average_precision,
    map_mws_correlation,
    mean_average_precision,
    mws,
    read_vectors,
    template_mean_std,
    vectors_file,
)
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
    ranked_candidates,
    split_slot,
)

FAMILIES = ("hasParts", "country")
ALL = "ALL"
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


class FmlamaTask(Task):
    """FmLAMA: ingredients of dishes, ranked against the language's whole pool."""

    Options = FmlamaOptions
    options: FmlamaOptions
    deviations = (
        Deviation("F1", "Gold set strings are split on ', ' (the v1 runner fed the whole string as one candidate)."),
        Deviation("F3", "Templates filled with str.replace, never re.sub('[X]', ...) (v1 T5/mT5 artifact)."),
        Deviation("F4", "No double space in the English country filler ('the United States')."),
        Deviation("F5", "Country names per spec 4.1 (en origin keys, zh for the 8 code-switching origins, "
                  "others from country_names=); rows without a name are skipped for country templates, counted."),
        Deviation("F6", "Causal models: teacher-forced mean log-prob of the ingredient (plus the text after it "
                  "when the dish comes after the slot): a culture_probe extension, not in the v1 paper."),
        Deviation("F7", "items.jsonl keeps the top |G| + 10 candidates and every gold rank, not the sum, token count "
                  "and mean of every candidate, which would multiply its size by the pool size; "
                  "--option keep_scores=true records them all."),
    )

    def __init__(self, config: str, options: FmlamaOptions | None = None, *, kind: str, seed: int = 0):
        super().__init__(config, options, kind=kind, seed=seed)
        self.seeded = self.options.mode == "chat" and self.options.chat_decoding == "sample"
        if self.options.mode == "chat" and kind == "masked":
            raise UnsupportedModelError("FmLAMA chat mode generates replies: it needs a causal or seq2seq (chat) "
                                        "model, not a masked one. Use mode=rank for masked models.")

    def describe_deviations(self) -> list[dict[str, str]]:
        """The log, with F2 stating whether this run used the paper's rule or the v1 code's."""
        compat = self.options.max_candidate_tokens is not None or self.options.ap_denominator == "ranked"
        cap, denominator = self.options.max_candidate_tokens, self.options.ap_denominator
        f2 = (f"compat: v1 code behaviour (max_candidate_tokens={cap}, ap_denominator={denominator!r})" if compat
              else "No candidate length cap; AP divides by |G| as in the paper (v1: 10-token cap, golds ranked).")
        log = [*super().describe_deviations(), {"id": "F2", "description": f2}]
        if self.options.mode == "chat":
            log.append({"id": "F-chat", "description": f"Chat mode {self.decoding()} and parses replies with a "
                        "documented approximation (the original parser was never released): split on commas, 'and', "
                        "newlines and 、, case-folded, crude English singular."})
        return log

    def decoding(self) -> str:
        """How chat replies are decoded, for the deviation log."""
        if self.options.chat_decoding == "sample":
            return (f"samples one reply at temperature {self.options.chat_temperature} as the paper did, seeded per "
                    f"prompt from the run's seed {self.seed} (the paper's sampling seed is unknown)")
        return "decodes greedily (default; the paper sampled once at temperature 0.7: chat_decoding='sample')"

    def describe(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Candidate pool size and hash, and the templates used."""
        pool = candidate_pool(rows)
        digest = hashlib.sha256(json.dumps(pool, ensure_ascii=False).encode("utf-8")).hexdigest()
        language = prompt_language(rows[0]) if rows else None
        templates = {rel: text for rel, _, text in self.templates(language)} if language else {}
        described = {"n_candidates": len(pool), "candidates_sha256": digest, "templates": templates}
        if self.options.vectors and language:  # which vectors file mWS read: a 7 GB model is named, not hashed
            described["vectors_file"] = _file_identity(vectors_file(self.options.vectors, language))
        return described

    def templates(self, language: str) -> list[tuple[str, str, str]]:
        """(relation, family, template) of the canonical templates of `language`, families as optioned."""
        return [t for t in canonical_templates(language, self.options.template_set)
                if t[1] in self.options.families]

    # ------------------------------------------------------------ hooks

    def _probes(self, rows: Sequence[Mapping[str, Any]], stage: str, previous: Sequence[Record]) -> Iterable[Probe]:
        pool = tuple(candidate_pool(rows))
        for row in rows:
            language = prompt_language(row)
            for relation, family, template in self.templates(language):
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
        return ScoreProbe(row["id"], slot_request(left, right, pool), tag=relation, meta=meta,
                          score_right=self.kind == "causal" and dish_after_slot, keep_tokens=self.options.keep_scores)

    def chat_probes(self, row: Mapping[str, Any], relation: str, family: str, template: str) -> Iterator[Probe]:
        """Chat mode: the template with the slot shown as `[]`, then each instruction wording (spec 4.3)."""
        language = prompt_language(row)
        if language not in CHAT_INSTRUCTIONS:
            raise CultureProbeError(f"FmLAMA chat mode has instructions for {', '.join(CHAT_INSTRUCTIONS)} only, "
                                    f"not {language!r} (the paper's code-switching configs); use mode=rank.")
        for index, instruction in enumerate(CHAT_INSTRUCTIONS[language]):
            tag = f"{relation}_chat{index}"
            meta, country, skipped = self._context(row, relation, family, tag)
            if skipped is not None:
                yield skipped
                continue
            left, right, _ = fill(template, row["sub_label"], country, language)
            meta.update(prompt=f"{left}[]{right}{instruction}", instruction=index, frame=[left, right])
            sample = self.options.chat_decoding == "sample"
            yield GenerateProbe(row["id"], meta["prompt"], self.options.chat_max_new_tokens, tag=tag, chat=True,
                                meta=meta, temperature=self.options.chat_temperature if sample else None,
                                seed=self.seed if sample else None)

    def _record(self, probe: Probe, output: Any) -> Record:
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
        record = {"prediction": ranking[0] if ranking else None, "top": ranking[: len(set(gold)) + TOP_K],
                  "gold_ranks": [rank.get(g) for g in gold], "n_candidates": len(ranking)}
        if self.options.keep_scores:
            record["scores"] = all_scores(output)
        return record

    def _metrics(self, records: list[Record]) -> dict[str, Any]:
        scored = [r for r in records if "skipped" not in r]
        skipped = Counter(r["skipped"] for r in records if "skipped" in r)
        out: dict[str, Any] = {"n_probes": len(records), "n_skipped": sum(skipped.values()),
                               "skipped": dict(skipped)}
        if self.options.mode == "chat":
            out["chat"] = chat_metrics(scored, self.options.group_by)
            out["chat_accuracy_best"] = max((cell[ALL] for cell in out["chat"].values()), default=None)
            return out
        vectors = self.load_vectors(scored) if self.options.vectors else None
        per_template: dict[str, dict[str, Any]] = {}
        for relation in sorted({r["template"] for r in scored}, key=lambda t: (FAMILIES.index(t.split("_")[0]), t)):
            rows = [r for r in scored if r["template"] == relation]
            per_template[relation] = self.template_metrics(rows, vectors)
        out["templates"] = per_template
        for measure in ("map", "mws"):
            table = family_table(per_template, measure)
            if table:
                out[measure] = table
                out.update({f"{measure}_{fam}": cells[ALL]["mean"] for fam, cells in table.items()
                            if cells.get(ALL)})
        if "mws" in out:
            out["map_mws_correlation"] = table_correlation(out["map"], out["mws"])
        return out

    def load_vectors(self, records: Sequence[Record]) -> dict[str, Any]:
        """The word vectors mWS needs (golds and top-|G| predictions), read once from the vectors file or model."""
        needed = {s for r in records for s in (*r["gold"], *r["top"][: len(set(r["gold"]))])}
        return read_vectors(self.options.vectors, keep=needed, language=records[0]["lang"] if records else "en")

    def template_metrics(self, records: list[Record], vectors: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The mAP (and mWS, given vectors) of one template, overall and per group."""
        rankings = [record_ranking(r) for r in records]
        golds = [reference(r, self.options.ap_denominator) for r in records]
        groups = [r[self.options.group_by] or "unknown" for r in records]
        result = {"map": _per_group(mean_average_precision(rankings, golds, groups=groups), "map")}
        if vectors is not None:
            result["mws"] = _per_group(mws(rankings, golds, embed=vectors, groups=groups), "mws")
        return result

    # ------------------------------------------------------------ report views

    def sections(self, records: Sequence[Record], metrics: Mapping[str, Any]) -> list[Section]:
        """The mAP (mWS) per group as mean ± std over templates; per-dish AP bars; template x group heatmap."""
        sections = []
        if "chat" in metrics:
            groups = sorted({g for cell in metrics["chat"].values() for g in cell}, key=lambda g: (g != ALL, g))
            rows = tuple((cell, *(format_score(v.get(g), 2) for g in groups)) for cell, v in metrics["chat"].items())
            sections.append(Section("Chat mode: accuracy (%) per template and instruction",
                                    text="A dish counts when an item of the reply equals a gold ingredient after "
                                    "normalisation (an approximation of the paper's unreleased parser).",
                                    tables=(Table(("template / instruction", *groups), rows),)))
        for measure, title in (("map", "mAP (%)"), ("mws", "mWS")):
            if measure in metrics:
                sections.append(Section(f"{title}: mean ± std over the templates of each family",
                                        text=correlation_text(metrics.get("map_mws_correlation"))
                                        if measure == "mws" else "",
                                        tables=(family_markdown(metrics[measure]),)))
        scored = [r for r in records if "skipped" not in r]
        bars = {}
        for family in self.options.families:
            per_dish: dict[tuple[str, str], list[float]] = {}
            for r in scored:
                if r["family"] == family and reference(r, self.options.ap_denominator):
                    per_dish.setdefault((r[self.options.group_by] or "unknown", r["id"]), []).append(
                        average_precision(record_ranking(r), set(reference(r, self.options.ap_denominator))))
            by_group: dict[str, list[float]] = {}
            for (group, _), values in per_dish.items():
                by_group.setdefault(group, []).append(sum(values) / len(values))
            if by_group:
                bars[family] = Bars(dict(sorted(by_group.items())), ylabel="AP (%)", scale=100,
                                    title=f"Per-dish AP by group, {family} templates")
        figures: list[Any] = list(bars.values())
        heat = template_heatmap(metrics.get("templates", {}))
        if heat is not None:
            figures.append(heat)
        sections.append(Section("Per-dish AP by group and mAP per template",
                                text="Bars: mean over each group's dishes of the dish's AP averaged over the "
                                "family's templates, with bootstrap 95% intervals over dishes.",
                                figures=tuple(figures)))
        if metrics.get("skipped"):
            rows = tuple(metrics["skipped"].items())
            sections.append(Section("Skipped probes", tables=(Table(("reason", "count"), rows),)))
        return sections


# ---------------------------------------------------------------- prompts


def prompt_language(row: Mapping[str, Any]) -> str:
    """The template language: the prompt language of code-switching rows, else the row's language."""
    return row.get("prompt_lang") or row["lang"]


@cache
def canonical_templates(language: str, template_set: str) -> list[tuple[str, str, str]]:
    """(relation, family, template) of the ten canonical templates of `language` from `fmlama_templates`."""
    from culture_probe.data.registry import load_benchmark

    rows = load_benchmark("fmlama_templates", corrected=template_set == "corrected")["test"]
    found = [(r["relation"], r["family"], r["template"]) for r in rows if r["language"] == language and r["canonical"]]
    return sorted(found, key=lambda t: (FAMILIES.index(t[1]), t[0]))


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


def chat_metrics(records: Sequence[Record], group_by: str) -> dict[str, dict[str, float | None]]:
    """{"<template> / <instruction>": {ALL and each group: accuracy in %}} of chat-mode records."""
    cells: dict[str, dict[str, list[bool]]] = {}
    for r in records:
        cell = cells.setdefault(f"{r['template']} / {r['instruction']}", {})
        for group in (ALL, r[group_by] or "unknown"):
            cell.setdefault(group, []).append(bool(r["correct"]))
    return {name: {g: 100 * sum(v) / len(v) for g, v in sorted(groups.items(), key=lambda kv: (kv[0] != ALL, kv[0]))}
            for name, groups in sorted(cells.items())}


# ---------------------------------------------------------------- metrics from records


def record_ranking(record: Mapping[str, Any]) -> list[str]:
    """A ranking equivalent to the full one for AP, P@k and mWS: the stored top predictions, each gold at its
    rank, unique fillers elsewhere (the records do not keep the whole pool order).
    """
    ranks = [r for r in record["gold_ranks"] if r is not None]
    ranking = list(record["top"]) + [f"\0{i}" for i in range(len(record["top"]), max(ranks, default=0))]
    for gold, rank in zip(record["gold"], record["gold_ranks"], strict=True):
        if rank is not None:
            ranking[rank - 1] = gold
    return ranking


def reference(record: Mapping[str, Any], denominator: str) -> list[str]:
    """Gold items; with the v1 code's `ranked` denominator only those present in the ranking (F2)."""
    if denominator == "ranked":
        return [g for g, rank in zip(record["gold"], record["gold_ranks"], strict=True) if rank is not None]
    return list(record["gold"])


def _per_group(result: Mapping[str, Any], measure: str) -> dict[str, Any]:
    cells = {ALL: result[measure]}
    cells.update({g: v[measure] for g, v in result.get("groups", {}).items()})
    return cells


def family_table(per_template: Mapping[str, Mapping[str, Any]], measure: str) -> dict[str, dict[str, Any]]:
    """{family: {group: {mean, std, n_templates}}} over the templates of each family (spec 4.4)."""
    table: dict[str, dict[str, Any]] = {}
    for family in FAMILIES:
        cells = [v[measure] for rel, v in per_template.items() if rel.startswith(family + "_") and measure in v]
        if not cells:
            continue
        groups = sorted({g for c in cells for g in c}, key=lambda g: (g != ALL, g))
        table[family] = {}
        for group in groups:
            values = [c[group] for c in cells if c.get(group) is not None]
            stats = template_mean_std(values) if len(values) > 1 else {
                "mean": values[0] if values else None, "std": None}
            table[family][group] = {**stats, "n_templates": len(values)}
    return table


def table_correlation(map_table: Mapping[str, Mapping[str, Any]], mws_table: Mapping[str, Mapping[str, Any]]
                      ) -> dict[str, Any] | None:
    """Pearson r between the mAP and mWS means of the cells (family x group, ALL included, as in the paper's
    Table 2 correlation) that have both; None with fewer than two such cells.
    """
    pairs = [(cell["mean"], mws_table[family][group]["mean"]) for family, cells in map_table.items()
             for group, cell in cells.items()
             if cell["mean"] is not None and (mws_table.get(family, {}).get(group) or {}).get("mean") is not None]
    if len(pairs) < 2:
        return None
    return map_mws_correlation(*zip(*pairs, strict=True))


def correlation_text(correlation: Mapping[str, Any] | None) -> str:
    """One sentence on how alike mAP and mWS rank this table's cells (the paper reports r = 0.66 for English)."""
    if not correlation or correlation["pearson_r"] is None:
        return ""
    return (f"Pearson r between the mAP and mWS cells: {format_score(correlation['pearson_r'], 2)} "
            f"({correlation['n_cells']} cells).")


def family_markdown(table: Mapping[str, Mapping[str, Any]]) -> Table:
    """Groups as rows, families as columns, cells 'mean ± std'."""
    families = list(table)
    groups = sorted({g for cells in table.values() for g in cells}, key=lambda g: (g != ALL, g))

    def cell(family: str, group: str) -> str:
        value = table[family].get(group)
        if not value or value["mean"] is None:
            return ""
        digits = 2 if value["mean"] > 1 else 4  # spec 5: mAP (%) with 2 decimals, mWS (cosine) with 4
        std = "" if value["std"] is None else f" ± {format_score(value['std'], digits)}"
        return f"{format_score(value['mean'], digits)}{std}"

    return Table(("group", *families), tuple((g, *(cell(f, g) for f in families)) for g in groups))


def template_heatmap(per_template: Mapping[str, Mapping[str, Any]]) -> Heatmap | None:
    """The mAP per template (rows) and group (columns)."""
    if not per_template:
        return None
    relations = list(per_template)
    groups = sorted({g for v in per_template.values() for g in v["map"]}, key=lambda g: (g != ALL, g))
    values = tuple(tuple(per_template[r]["map"].get(g) for g in groups) for r in relations)
    return Heatmap(tuple(relations), tuple(groups), values, label="mAP (%)", title="mAP per template and group")


def _file_identity(path: Path) -> dict[str, Any]:
    """Path, size and modification time of a file the run reads (checked before any scoring is done)."""
    if not path.is_file():
        raise CultureProbeError(f"The mWS vectors file {str(path)!r} does not exist: pass --option vectors= a "
                                "fastText cc.<lang>.300.bin (or the folder holding it) or a text .vec file.")
    stat = path.stat()
    return {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


TASK = FmlamaTask

