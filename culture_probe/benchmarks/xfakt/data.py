"""X-FaKT (Aggarwal et al., 2025): country-related facts asked in 13 languages, each paired with one
country.

The whole release is Python literals in upstream `src/utils.py`. They are read with `ast.parse` and
`ast.literal_eval` on each assigned value, never imported or executed. Three configs, each with a
`_corrected` twin (see docs/benchmarks/xfakt.md, Known data errors and the corrected variant):
`xfakt_factual_recall` (802 entities x 13 languages), `xfakt_in_context` (task B) and
`xfakt_counter_factual` (task C). Rows are ordered by question language, in the language-country
bijection order.
"""

from __future__ import annotations

import ast
import copy
import os
import string
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any, Literal, NoReturn

import datasets

from culture_probe.data._builder import (
    CultureProbeBuilder,
    CultureProbeConfig,
    with_corrected_twins,
)
from culture_probe.data._pinned import pinned_file
from culture_probe.data.card import BenchmarkInfo, Correction, FileResource, Licence
from culture_probe.errors import SourceFormatError, UnknownNameError

COMMIT = "57ca068e84b43f008e8216bfde15ea7a69986a80"
BASE_URL = f"https://raw.githubusercontent.com/kmrtanmay/X_FaKT/{COMMIT}/"
UTILS = "src/utils.py"
UTILS_SHA256 = "8d3324a4309bf0bc80e7b27fc634eae24669808598af2650115e53410b15aee5"

# The language-country bijection; index order is used everywhere (entity names, COUNTRIES columns,
# ids).
LANGUAGES = (
    ("English", "en", "United States"), ("Hindi", "hi", "India"), ("Chinese", "zh", "China"),
    ("Russian", "ru", "Russia"), ("Arabic", "ar", "Saudi Arabia"), ("French", "fr", "France"),
    ("Nepali", "ne", "Nepal"), ("Japanese", "ja", "Japan"), ("Ukrainian", "uk", "Ukraine"),
    ("Greek", "el", "Greece"), ("Turkish", "tr", "Turkey"), ("Swahili", "sw", "Kenya"), ("Thai", "th", "Thailand"),
)  # fmt: skip
KEYS = tuple(key for key, _, _ in LANGUAGES)
CODES = tuple(code for _, code, _ in LANGUAGES)
COUNTRY_NAMES = tuple(country for _, _, country in LANGUAGES)
# (dict in utils.py, clean category, template); this order is the entity_idx order.
CATEGORIES = (
    ("cities", "city", "T1"), ("politicians", "politician", "T2"), ("artists", "artist", "T2"),
    ("landmarks", "landmark", "T1"), ("festivals", "festival", "T3"), ("sports_persons", "athlete", "T2"),
)  # fmt: skip
TEMPLATES = {"T1": "QUESTIONS_1", "T2": "QUESTIONS_2", "T3": "QUESTIONS_3"}
# `{}` slots per template; the released Arabic task-C template has only two of its three (section
# 7).
TEMPLATE_SLOTS = {"QUESTIONS_1": (1, 1), "QUESTIONS_2": (1, 1), "QUESTIONS_3": (1, 1),
                  "question_translation_dict": (5, 5), "incontext_factual_questions": (2, 3)}  # fmt: skip
NAMES = (
    "cities", "artists", "sports_persons", "politicians", "landmarks", "festivals", "QUESTIONS_1", "QUESTIONS_2",
    "QUESTIONS_3", "COUNTRIES", "SYSTEM_PROMPT_OURS", "PROMPT_OURS", "PROMPT_ROBUST", "name_translation_dict",
    "question_translation_dict", "sentence_translation_dict", "only_question_translations",
    "famous_characters_translated", "incontext_factual_questions",
)  # fmt: skip

# Corrections of the corrected variant, applied only by the `_corrected` configs; each fixes only
# the released wrong value.
COUNTRY_FIXES = {  # (question language, the country's language): (released, corrected)
    ("Chinese", "Turkish"): ("火鸡", "土耳其"), ("Arabic", "Turkish"): ("ديك رومى", "تركيا"),
    ("Japanese", "Turkish"): ("七面鳥", "トルコ"), ("Thai", "Turkish"): ("ไก่งวง", "ตุรกี"),
    ("Greek", "Thai"): ("Σιάμ", "Ταϊλάνδη"),
}  # fmt: skip
ENTITY_FIXES = {  # (language, English name): (released, corrected)
    ("Chinese", "Bursa"): ("囊", "布尔萨"), ("Nepali", "Janadriyah"): ("जनाद्रियाhungary. kgm", "जनाद्रिया"),
}  # fmt: skip
# task-B names: (language, index) -> (released, corrected)
NAME_FIXES = {("Chinese", 6): ("阁下", "巴哈杜尔")}
TEMPLATE_FIXES = {  # task-C templates: language -> (released substring, corrected substring)
    "Arabic": ("في أي بلد يعيش ؟", "في أي بلد يعيش {}؟"),
    "Greek": ("Σε ποια χώρα ζει ο χρήστης {};", "Σε ποια χώρα ζει ο {};"),
}
QUESTIONABLE_GOLD = frozenset({("Russian", "Sergey Bubka"), ("Greek", "Constantin Brâncuși")})
MIXED_SCRIPT = frozenset({
    ("Nepali", "Peterhof दरबार"), ("Nepali", "Meteora मठहरू"), ("Nepali", "Kutztown लोक महोत्सव"),
    ("Hindi", "Sainte-चैपल"), ("Ukrainian", "Gu Ailing (Ейлін Гу)"),
})  # fmt: skip

_STRINGS = datasets.List(datasets.Value("string"))
FEATURES = {
    "factual_recall": datasets.Features({
        "id": datasets.Value("string"), "entity_idx": datasets.Value("int32"), "category": datasets.Value("string"),
        "template_id": datasets.Value("string"), "country": datasets.Value("string"),
        "country_language": datasets.Value("string"), "language": datasets.Value("string"),
        "is_associated": datasets.Value("bool"), "entity": datasets.Value("string"),
        "entity_en": datasets.Value("string"), "question": datasets.Value("string"),
        "answer": datasets.Value("string"), "answer_en": datasets.Value("string"), "country_names": _STRINGS,
        "flags": _STRINGS,
    }),
    "in_context": datasets.Features({
        "id": datasets.Value("string"), "language": datasets.Value("string"), "name_u": datasets.Value("string"),
        "name_v": datasets.Value("string"), "country_u": datasets.Value("string"),
        "country_v": datasets.Value("string"), "asked_country": datasets.Value("string"),
        "question": datasets.Value("string"), "answer": datasets.Value("string"), "flags": _STRINGS,
    }),
    "counter_factual": datasets.Features({
        "id": datasets.Value("string"), "language": datasets.Value("string"), "person": datasets.Value("string"),
        "person_en": datasets.Value("string"), "true_country": datasets.Value("string"),
        "context_country": datasets.Value("string"), "is_counterfactual": datasets.Value("bool"),
        "question": datasets.Value("string"), "answer": datasets.Value("string"), "flags": _STRINGS,
    }),
}  # fmt: skip

# The paper's BibTeX: the dataset card's citation and that of the benchmark's `evaluate` metrics.
CITATION = (
    "@misc{aggarwal2025factuality,\n  title = {Language Models' Factuality Depends on the Language of Inquiry},"
    "\n  author = {Aggarwal, Tushar and Tanmay, Kumar and Agrawal, Ayush and Ayush, Kumar and Palangi, Hamid "
    "and Liang, Paul Pu},\n  year = {2025}\n}"
)

INFO = BenchmarkInfo(
    name="xfakt",
    title="X-FaKT: cross-lingual factual knowledge transfer",
    description=(
        "802 country-related entities (cities, landmarks, festivals, politicians, artists, athletes) asked about "
        "in 13 languages, each paired with one country; errors on associated vs non-associated (language, country) "
        "cells give FRS, KTS and X-FaKT. Plus in-context recall (task B) and counter-factual adherence (task C). "
        "Untranslated entity names (identical to English, out of 802): fr 516, tr 422, sw 664, el 236, hi 12, "
        "ne 9, uk 4; they inflate Latin-script transfer."
    ),
    homepage="https://github.com/kmrtanmay/X_FaKT",
    licences=(
        Licence(
            "MIT",
            "the X-FaKT repository, Copyright (c) 2025 Tushar Aggarwal",
            "mit",
            "https://github.com/kmrtanmay/X_FaKT/blob/main/LICENSE",
        ),
    ),
    citation=CITATION,
    version="1.0.0",
    paper="xfakt_003_85f5c3a437efb55e.txt",
    sources=(BASE_URL + UTILS,),
    suite=("xfakt_factual_recall", "xfakt_in_context", "xfakt_counter_factual"),
    corrections=(
        Correction(
            "xfakt-turkey",
            "gold 'Turkey' rendered as the bird in zh/ar/ja/th (火鸡, ديك رومى, 七面鳥, "
            "ไก่งวง) -> 土耳其, تركيا, トルコ, ตุรกี; rows whose answer or question changed: factual recall 244, "
            "in-context 96, counter-factual 432",
            772,
        ),
        Correction(
            "xfakt-siam",
            "Greek gold for Thailand is the archaic Σιάμ -> Ταϊλάνδη; factual recall 62, "
            "in-context 24, counter-factual 108",
            194,
        ),
        Correction(
            "xfakt-entity-names",
            "mistranslated names: zh Bursa 囊 -> 布尔萨, ne Janadriyah "
            "'जनाद्रियाhungary. kgm' -> जनाद्रिया (factual recall 2 rows); task-B zh name Bahadur 阁下 "
            "('Your Excellency') -> 巴哈杜尔 (in-context 24 rows)",
            26,
        ),
        Correction(
            "xfakt-ar-template",
            "the Arabic task-C template has no slot for the person, so the name never "
            "reached the question; slot added (counter-factual, all Arabic rows)",
            1404,
        ),
        Correction(
            "xfakt-el-template",
            "the Greek task-C question asked where 'the user {}' lives -> "
            "'Σε ποια χώρα ζει ο {};' (counter-factual, all Greek rows)",
            1404,
        ),
        Correction(
            "xfakt-duplicates",
            "Mount Everest (China, Nepal), Kazimir Malevich (Russia, Ukraine) and Jeddah "
            "(Saudi city and festival) appear twice; rows flagged duplicate_entity",
            78,
        ),
        Correction(
            "xfakt-questionable-gold",
            "Sergey Bubka under Russia, Constantin Brâncuși under Greece; rows "
            "flagged questionable_gold (not relabelled)",
            26,
        ),
        Correction(
            "xfakt-mixed-script",
            "half-translated names (ne Peterhof दरबार, Meteora मठहरू, Kutztown लोक "
            "महोत्सव; hi Sainte-चैपल; uk Gu Ailing (Ейлін Гу)); rows flagged mixed_script",
            5,
        ),
    ),  # fmt: skip
)


@dataclass
class XfaktConfig(CultureProbeConfig):
    """One X-FaKT task; `languages` (codes) selects question languages."""

    task: Literal["factual_recall", "in_context", "counter_factual"] = "factual_recall"
    verify_checksums: bool = True


BUILDER_CONFIGS = with_corrected_twins([
    XfaktConfig(name="xfakt_factual_recall", task="factual_recall", languages=CODES, rows=10426,
                description="Which country is this entity in / from? 802 entities asked in 13 languages"),
    XfaktConfig(name="xfakt_in_context", task="in_context", languages=CODES, rows=2028,
                description="Task B: who lives in the country named in the context? (78 name pairs x 2)"),
    XfaktConfig(name="xfakt_counter_factual", task="counter_factual", languages=CODES, rows=18252,
                description="Task C: does the model follow a counter-factual context? (108 people x 13 countries)"),
])  # fmt: skip


def source_file(
    *, data_dir: str | os.PathLike | None = None, verify_checksums: bool = True
) -> Path:
    """The pinned `src/utils.py` (mirror rule), or `data_dir/src/utils.py` from a local copy of the
    repository.
    """
    return pinned_file(BASE_URL, UTILS, UTILS_SHA256, data_dir=data_dir, verify=verify_checksums)


def read_utils(path: str | os.PathLike) -> dict[str, Any]:
    """The 19 literals of `utils.py` by name, parsed with `ast` and checked; anything else is an
    error.

    The judge prompts (`SYSTEM_PROMPT_OURS`, `PROMPT_OURS`) are read from here verbatim by the
    protocol.
    """
    path = Path(path)
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, ValueError) as error:
        line = getattr(error, "lineno", None)
        raise SourceFormatError(
            f"not Python source ({error})", path=str(path), line=line
        ) from error
    values: dict[str, Any] = {}
    nodes: dict[str, ast.expr] = {}
    for node in tree.body:
        if not (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            raise SourceFormatError(
                f"expected only `NAME = <literal>` statements, found a {type(node).__name__} statement",
                path=str(path), line=node.lineno,
            )  # fmt: skip
        name = node.targets[0].id
        if name not in NAMES or name in values:
            problem = (
                "assigned twice"
                if name in values
                else f"is not one of the 19 expected names {list(NAMES)}"
            )
            raise SourceFormatError(f"{name!r} {problem}", path=str(path), line=node.lineno)
        try:
            values[name] = ast.literal_eval(node.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as error:
            raise SourceFormatError(
                f"the value of {name!r} is not a Python literal ({error})",
                path=str(path),
                line=node.value.lineno,
            ) from error
        nodes[name] = node.value
    missing = [name for name in NAMES if name not in values]
    if missing:
        raise SourceFormatError(f"missing assignments {missing}", path=str(path))
    _Checker(path, nodes).check(values)
    return values


@dataclass
class _Checker:
    """Structural checks of the parsed literals; each error names the file and the line of the
    offending value.
    """

    path: Path
    nodes: dict[str, ast.expr]

    def fail(self, message: str, node: ast.AST) -> NoReturn:
        raise SourceFormatError(message, path=str(self.path), line=getattr(node, "lineno", None))

    def entries(
        self, name: str, value: Any, node: ast.AST, keys: tuple[str, ...]
    ) -> Iterator[tuple]:
        """(key, value, node) of a dict that must have exactly `keys`."""
        if not isinstance(value, dict) or set(value) != set(keys):
            found = sorted(map(str, value)) if isinstance(value, dict) else type(value).__name__
            self.fail(f"{name} must be a dict with the keys {list(keys)}; found {found}", node)
        key_nodes = dict(zip([ast.literal_eval(k) for k in node.keys], node.values, strict=True))  # type: ignore[attr-defined]
        for key in keys:
            yield key, value[key], key_nodes.get(key, node)

    def strings(self, name: str, value: Any, node: ast.AST, length: int | None = None) -> None:
        ok = isinstance(value, list) and all(isinstance(s, str) and s.strip() for s in value)
        if not ok or (length is not None and len(value) != length):
            self.fail(
                f"{name} must be a list of {length or 'some'} non-empty strings; found {value!r:.120}",
                node,
            )

    def template(self, name: str, value: Any, node: ast.AST, slots: tuple[int, int]) -> None:
        """A `str.format` template with `slots[0]..slots[1]` positional `{}` fields and nothing
        else.
        """
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(value) if f is not None]
        except (AttributeError, TypeError, ValueError):
            fields = ["invalid"]
        low, high = slots
        if any(fields) or not low <= len(fields) <= high:
            wanted = f"{low}" if low == high else f"{low} to {high}"
            self.fail(
                f"{name} must be a str.format template with {wanted} '{{}}' slots; found {value!r}",
                node,
            )

    def check(self, values: dict[str, Any]) -> None:
        n = self.nodes
        for name, _, _ in CATEGORIES:
            for key, entities, node in self.entries(name, values[name], n[name], KEYS):
                if not isinstance(entities, list) or not entities:
                    self.fail(
                        f"{name}[{key!r}] must be a non-empty list of entities; found {entities!r:.80}",
                        node,
                    )
                for i, entity in enumerate(entities):
                    self.strings(f"{name}[{key!r}][{i}]", entity, _item(node, i), len(KEYS))
        for name, slots in TEMPLATE_SLOTS.items():
            for key, template, node in self.entries(name, values[name], n[name], KEYS):
                self.template(f"{name}[{key!r}]", template, node, slots)
        for key, row, node in self.entries("COUNTRIES", values["COUNTRIES"], n["COUNTRIES"], KEYS):
            for column, country, cell in self.entries(f"COUNTRIES[{key!r}]", row, node, KEYS):
                self.strings(f"COUNTRIES[{key!r}][{column!r}]", [country], cell, 1)
        for key, names, node in self.entries("name_translation_dict", values["name_translation_dict"],
                                             n["name_translation_dict"], KEYS):  # fmt: skip
            self.strings(f"name_translation_dict[{key!r}]", names, node, len(KEYS))
        people = values["famous_characters_translated"]
        for country, by_lang, node in self.entries("famous_characters_translated", people,
                                                   n["famous_characters_translated"], COUNTRY_NAMES):  # fmt: skip
            for key, names, cell in self.entries(
                f"famous_characters_translated[{country!r}]", by_lang, node, KEYS
            ):
                self.strings(f"famous_characters_translated[{country!r}][{key!r}]", names, cell,
                             len(by_lang["English"]) if isinstance(by_lang["English"], list) else None)  # fmt: skip
        for name in ("SYSTEM_PROMPT_OURS", "PROMPT_OURS", "PROMPT_ROBUST"):
            if not isinstance(values[name], str):
                self.fail(f"{name} must be a string; found {type(values[name]).__name__}", n[name])


def _item(node: ast.AST, index: int) -> ast.AST:
    """The node of list element `index` (for its line number), or the list itself."""
    elements = getattr(node, "elts", [])
    return elements[index] if index < len(elements) else node


@dataclass(frozen=True)
class Fixes:
    """The released cells the corrected variant changed (all empty for the faithful release)."""

    countries: frozenset[tuple[str, str]] = field(default_factory=frozenset)
    entities: frozenset[tuple[str, str]] = field(default_factory=frozenset)
    names: frozenset[tuple[str, int]] = field(default_factory=frozenset)
    templates: frozenset[str] = field(default_factory=frozenset)


def correct(values: dict[str, Any]) -> tuple[dict[str, Any], Fixes]:
    """A corrected copy of the literals (the corrected variant) and the cells it changed.

    A cell is fixed only when it still holds the released wrong value, so the flags count real
    changes.
    """
    values = copy.deepcopy(values)
    countries = {
        pair
        for pair, (old, _) in COUNTRY_FIXES.items()
        if values["COUNTRIES"][pair[0]][pair[1]] == old
    }
    for q, a in countries:
        values["COUNTRIES"][q][a] = COUNTRY_FIXES[q, a][1]
    entities = set()
    for name, _, _ in CATEGORIES:
        for entity in (e for group in values[name].values() for e in group):
            for i, key in enumerate(KEYS):
                old, new = ENTITY_FIXES.get((key, entity[0]), (None, None))
                if entity[i] == old:
                    entity[i] = new
                    entities.add((key, entity[0]))
    names = {
        cell
        for cell, (old, _) in NAME_FIXES.items()
        if values["name_translation_dict"][cell[0]][cell[1]] == old
    }
    for key, index in names:
        values["name_translation_dict"][key][index] = NAME_FIXES[key, index][1]
    templates = {
        key
        for key, (old, _) in TEMPLATE_FIXES.items()
        if old in values["incontext_factual_questions"][key]
    }
    for key in templates:
        values["incontext_factual_questions"][key] = values["incontext_factual_questions"][
            key
        ].replace(*TEMPLATE_FIXES[key])
    return values, Fixes(
        frozenset(countries), frozenset(entities), frozenset(names), frozenset(templates)
    )


def entity_table(values: dict[str, Any]) -> list[tuple[str, str, int, list[str]]]:
    """(category, template id, associated-language index, 13 names) in entity_idx order."""
    return [
        (category, template_id, a, names)
        for dict_name, category, template_id in CATEGORIES
        for a, key in enumerate(KEYS)
        for names in values[dict_name][key]
    ]


def factual_recall_rows(
    values: dict[str, Any], codes: tuple[str, ...], fixes: Fixes, corrected: bool
) -> Iterator[dict]:
    """Task A: every entity asked in every selected language; `corrected` adds the section-7
    flags.
    """
    table = entity_table(values)
    twice = (
        {n for n, c in Counter(names[0] for *_, names in table).items() if c > 1}
        if corrected
        else set()
    )
    for q, (qkey, qcode, _) in enumerate(LANGUAGES):
        if qcode not in codes:
            continue
        country_names = [values["COUNTRIES"][qkey][key] for key in KEYS]
        for idx, (category, template_id, a, names) in enumerate(table):
            flags = [flag for flag, hit in (
                ("mistranslated_answer", (qkey, KEYS[a]) in fixes.countries),
                ("mistranslated_entity", (qkey, names[0]) in fixes.entities),
                ("duplicate_entity", names[0] in twice),
                ("questionable_gold", corrected and (KEYS[a], names[0]) in QUESTIONABLE_GOLD),
                ("mixed_script", corrected and (qkey, names[q]) in MIXED_SCRIPT),
            ) if hit]  # fmt: skip
            yield {
                "id": f"fr-{idx:03d}-{qcode}", "entity_idx": idx, "category": category, "template_id": template_id,
                "country": COUNTRY_NAMES[a], "country_language": CODES[a], "language": qcode,
                "is_associated": q == a, "entity": names[q], "entity_en": names[0],
                "question": values[TEMPLATES[template_id]][qkey].format(names[q]),
                "answer": country_names[a], "answer_en": values["COUNTRIES"]["English"][KEYS[a]],
                "country_names": country_names, "flags": flags,
            }  # fmt: skip


def in_context_rows(values: dict[str, Any], codes: tuple[str, ...], fixes: Fixes) -> Iterator[dict]:
    """Task B: each name placed in the other's country; asked who lives in country v (gold u), then
    u (gold v).
    """
    for qkey, qcode, _ in LANGUAGES:
        if qcode not in codes:
            continue
        names, countries = values["name_translation_dict"][qkey], values["COUNTRIES"][qkey]
        template = values["question_translation_dict"][qkey]
        for u, v in combinations(range(len(KEYS)), 2):
            fixed_country = (qkey, KEYS[u]) in fixes.countries or (qkey, KEYS[v]) in fixes.countries
            for n, (asked, gold) in enumerate(((v, u), (u, v)), start=1):
                flags = [flag for flag, hit in (
                    ("mistranslated_answer", (qkey, gold) in fixes.names),
                    ("mistranslated_entity", (qkey, u) in fixes.names or (qkey, v) in fixes.names),
                    ("mistranslated_country", fixed_country),
                ) if hit]  # fmt: skip
                yield {
                    "id": f"ic-{u:02d}-{v:02d}-{n}-{qcode}", "language": qcode, "name_u": names[u],
                    "name_v": names[v], "country_u": COUNTRY_NAMES[u], "country_v": COUNTRY_NAMES[v],
                    "asked_country": COUNTRY_NAMES[asked],
                    "question": template.format(names[u], countries[KEYS[v]], names[v], countries[KEYS[u]],
                                                countries[KEYS[asked]]),
                    "answer": names[gold], "flags": flags,
                }  # fmt: skip


def counter_factual_rows(
    values: dict[str, Any], codes: tuple[str, ...], fixes: Fixes
) -> Iterator[dict]:
    """Task C: each person placed in each of the 13 countries (one of them the true one, a
    control).
    """
    people = values["famous_characters_translated"]
    for qkey, qcode, _ in LANGUAGES:
        if qcode not in codes:
            continue
        countries, template = values["COUNTRIES"][qkey], values["incontext_factual_questions"][qkey]
        index = 0
        for c, country in enumerate(COUNTRY_NAMES):
            for person, person_en in zip(
                people[country][qkey], people[country]["English"], strict=True
            ):
                for y, ykey in enumerate(KEYS):
                    flags = [flag for flag, hit in (
                        ("mistranslated_answer", (qkey, ykey) in fixes.countries),
                        ("template_fixed", qkey in fixes.templates),
                    ) if hit]  # fmt: skip
                    yield {
                        "id": f"cf-{index:03d}-{y:02d}-{qcode}", "language": qcode, "person": person,
                        "person_en": person_en, "true_country": country, "context_country": COUNTRY_NAMES[y],
                        "is_counterfactual": y != c, "question": template.format(person, countries[ykey], person),
                        "answer": countries[ykey], "flags": flags,
                    }  # fmt: skip
                index += 1


class XfaktBuilder(CultureProbeBuilder):
    """Builds one X-FaKT task from the literals of the pinned `src/utils.py`."""

    CARD = INFO
    LANGUAGE_FILTER = True
    BUILDER_CONFIG_CLASS = XfaktConfig
    BUILDER_CONFIGS = BUILDER_CONFIGS
    config: XfaktConfig

    def _features(self) -> datasets.Features:
        return FEATURES[self.config.task]

    def _rows(self, split: str) -> Iterator[dict[str, Any]]:
        codes = tuple(self.config.languages)
        unknown = [code for code in codes if code not in CODES]
        if unknown:
            raise UnknownNameError("X-FaKT language code", unknown[0], CODES)
        path = source_file(
            data_dir=self.config.data_dir, verify_checksums=self.config.verify_checksums
        )
        values, fixes = read_utils(path), Fixes()
        if self.config.corrected:
            values, fixes = correct(values)
        if self.config.task == "factual_recall":
            rows = factual_recall_rows(values, codes, fixes, self.config.corrected)
        elif self.config.task == "in_context":
            rows = in_context_rows(values, codes, fixes)
        else:
            rows = counter_factual_rows(values, codes, fixes)
        for row in rows:
            for flag in row["flags"]:
                self.tally(f"{flag}: rows")
            yield row


def read_literals(
    *, data_dir: str | None = None, corrected: bool = False
) -> tuple[dict[str, Any], list[Path]]:
    """The `literals` resource: the literals of `utils.py` (country names per language, the judge's
    prompts), corrected when asked, and the file they come from.
    """
    path = source_file(data_dir=data_dir)
    values = read_utils(path)
    return (correct(values)[0] if corrected else values), [path]


RESOURCES = {"literals": FileResource(read_literals)}

BUILDER = XfaktBuilder
