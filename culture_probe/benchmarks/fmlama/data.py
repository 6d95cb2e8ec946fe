"""FmLAMA (v1): dishes, their origin and their ingredients from Wikidata, in six languages.

Gold lists are stringified Python sets holding ONE comma-joined string (`"{'tofu, douchi'}"`): they
are read with `ast.literal_eval` and split on `", "`. Configs: one per language, the 175 dishes
aligned across languages, four code-switching sets, the 14-group English set and the templates; each
data config has a `_corrected` twin. Files come from the pinned URLs (mirror rule) or, with
`data_dir=`, from a local copy of the upstream repository (or of its `data/` folder); either way
they are checked against the pinned sha256 prefixes of the release.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import datasets

from culture_probe.data._builder import CultureProbeBuilder, CultureProbeConfig, corrected_twin
from culture_probe.data._pinned import pinned_file
from culture_probe.data.card import BenchmarkInfo, Correction, FileResource, Licence, SplitResource
from culture_probe.data.sources import parse_literal, read_jsonl
from culture_probe.data.vectors import vectors_resource
from culture_probe.errors import SourceFormatError

REPO = "https://raw.githubusercontent.com/lizhou21/FmLAMA-master"
DATA_COMMIT = "16c41230d03e53cc5315217f7b9e210cd7dcc7fc"
TEMPLATE_COMMIT = "9cb17018b377509c000d4d7e29d62a9900dd6cfc"
COUNTRY_COMMIT = "5db492048e9a8eb0b8c5f9c7814cacdae977a69b"
LANGUAGES = ("en", "zh", "ar", "ko", "ru", "he")

# Pinned sha256 prefixes of the release, per (folder, language).
DISHES_SHA256 = {
    ("data_lang", "en"): "5ce40b30c294",
    ("data_lang", "zh"): "4706343f3540",
    ("data_lang", "ar"): "b14ecda52a87",
    ("data_lang", "ko"): "0e164c35d8f8",
    ("data_lang", "ru"): "5bf5f27c3697",
    ("data_lang", "he"): "5ab257322abd",
    ("data_filter", "en"): "22fe4901763f",
    ("data_filter", "zh"): "8f4d8247e0df",
    ("data_filter", "ar"): "7b630b2354f4",
    ("data_filter", "ko"): "9bb135721e6c",
    ("data_filter", "ru"): "8c27304402a6",
    ("data_filter", "he"): "808a13ec2c30",
}
TEMPLATES_SHA256 = {
    "en": "9eada6cfe3c6",
    "zh": "3bf7c171b576",
    "ar": "36b463fb70f1",
    "ko": "7542c615f02d",
    "ru": "813bcf8d6431",
    "he": "1e01c10bef49",
}
COUNTRY_INFO_SHA256 = "76dc04dadc01"
DISHES_CSV_SHA256 = "ebb67ac90375"

# The 14 named origin groups; every other origin is "Others".
GROUPS = {
    "Italy": "Italy",
    "United States of America": "U.S.",
    "Turkey": "Turkey",
    "Japan": "Japan",
    "France": "France",
    "United Kingdom": "U.K.",
    "Mexico": "Mexico",
    "India": "India",
    "Germany": "Germany",
    "People's Republic of China": "China",
    "Iran": "Iran",
    "Greece": "Greece",
    "Spain": "Spain",
    "Russia": "Russia",
}
OTHERS = "Others"
# (prompt language, subject language)
CS_PAIRS = (("en", "en"), ("en", "zh"), ("zh", "zh"), ("zh", "en"))
CS_MIN_DISHES = 20  # code-switching keeps origins with MORE than this many en∩zh dishes
CANONICAL = re.compile(r"(hasParts|country)_[1-5]")

# Template fixes of the corrected set; zh country_5 inherits hasParts_5's missing 。.
TEMPLATE_FIXES = {
    ("he", "hasParts_2"): "[1] הוא מאכל עם [2].",
    ("he", "hasParts_4"): "[2] הוא מרכיב במאכל [1].",
    ("he", "country_4"): "[3], [2] הוא מרכיב במאכל [1].",
    ("ko", "hasParts_1"): "음식 [X]에는 [Y]의 성분이 포함되어 있습니다.",
    ("zh", "hasParts_5"): "[X]是一道美味的食物，它需要使用[Y]制作而成。",
    ("zh", "country_5"): "在[C]，[X]是一道美味的食物，它需要使用[Y]制作而成。",
}

# The paper's BibTeX: the dataset card's citation and that of the benchmark's `evaluate` metrics.
CITATION = (
    "@article{zhou2024mapo,\n  title={Does Mapo Tofu Contain Coffee? Probing LLMs for Food-related Cultural "
    "Knowledge},\n  author={Zhou, Li and Karidi, Taelin and Garneau, Nicolas and Cao, Yong and Liu, Wanlong "
    "and Chen, Wenyu and Hershcovich, Daniel},\n  journal={arXiv preprint arXiv:2404.06833},\n  year={2024}\n}"
)

INFO = BenchmarkInfo(
    name="fmlama",
    title="FmLAMA: food-related cultural knowledge in six languages",
    description=(
        "Which ingredients a dish contains: a masked or encoder-decoder LM ranks the language's whole ingredient "
        "pool in five cloze templates, with and without the dish's country of origin named. mAP (exact match) "
        "and mWS (fastText similarity) are compared across origin groups (U.S., Italy, China, ...) and prompt "
        "languages (en, zh, ar, ko, ru, he)."
    ),
    homepage="https://github.com/lizhou21/FmLAMA-master",
    licences=(
        Licence(
            "none stated",
            "the FmLAMA repository (no licence file): research use; the data is not vendored in culture_probe",
        ),
        Licence(
            "CC0 1.0",
            "the dishes, ingredients and labels themselves (from Wikidata)",
            "cc0-1.0",
            "https://www.wikidata.org/wiki/Wikidata:Licensing",
        ),
    ),
    citation=CITATION,
    version="1.0.0",
    paper="papers/fmlama_001_ece10dc1b62e9890.txt",
    sources=(
        f"{REPO}/{DATA_COMMIT}/data/data_lang/{{la}}/{{la}}_dishes.jsonl",
        f"{REPO}/{DATA_COMMIT}/data/data_filter/{{la}}/{{la}}_dishes.jsonl",
        f"{REPO}/{TEMPLATE_COMMIT}/data/templates/{{la}}_templates.jsonl",
        f"{REPO}/{COUNTRY_COMMIT}/data/country_info.json",
        f"{REPO}/{DATA_COMMIT}/data/Dishes.csv",
    ),
    suite=("fmlama_en", "fmlama_zh", "fmlama_ar", "fmlama_ko", "fmlama_ru", "fmlama_he"),
    corrections=(
        Correction(
            "case_variants",
            "Case-variant duplicate ingredients (en 4 pairs, e.g. Cinnamon/cinnamon; ru 10) "
            "merged into the config's most frequent surface form (tie: lower case); gold lists remapped.",
        ),
        Correction(
            "self_item",
            "A dish listed as its own ingredient (en 2, zh 2, ko 1, ru 1, he 3): the item is "
            "removed; a dish left without gold (zh 玉米黑粉菌) is dropped.",
        ),
        Correction(
            "templates",
            "Template set `corrected`: he hasParts_2/hasParts_4 slots and period restored, he "
            "country_4 prefixes hasParts_4, ko hasParts_1 single period, zh hasParts_5/country_5 final 。.",
        ),
        Correction(
            "lossy_join",
            "Ingredient labels containing ', ' were split by the upstream join; not recoverable, documented only.",
            rows_affected=0,
        ),
    ),
)

Subset = Literal["lang", "aligned", "cs", "en14", "templates", "full"]


@dataclass
class FmlamaConfig(CultureProbeConfig):
    """`subset` picks the source files and filter; `lang` is the data language (code-switching:
    both).

    `verify_checksums=False` accepts a `data_dir` whose files differ from the pinned release (an
    edited copy).
    """

    subset: Subset = "lang"
    lang: str = ""
    prompt_lang: str = ""
    subject_lang: str = ""
    verify_checksums: bool = True


@dataclass(frozen=True)
class Dish:
    """One parsed line of a `*_dishes.jsonl` file."""

    url: str
    qid: str
    origin: str
    lang: str
    sub_label: str
    obj_label: tuple[str, ...]
    row: int


def url(path: str, commit: str = DATA_COMMIT) -> str:
    """The pinned upstream URL of a repository path."""
    return f"{REPO}/{commit}/{path}"


def parse_obj_label(
    value: Any, *, path: str, line: int, field: str = "obj_label"
) -> tuple[str, ...]:
    """Gold ingredients from the stringified one-element set (v1) or a list (v2), split on `",
    "`.
    """
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    if not isinstance(value, str):
        raise SourceFormatError(
            f"{field} must be a string or a list, got {value!r}", path=path, line=line
        )
    parsed = parse_literal(value, path=path, line=line, expected=set)
    if len(parsed) != 1 or not isinstance(next(iter(parsed)), str):
        raise SourceFormatError(
            f"{field} must be a set holding one comma-joined string, got {value[:80]!r}",
            path=path,
            line=line,
        )
    text = next(iter(parsed))
    return tuple(text.split(", ")) if text else ()  # Dishes.csv writes an empty list as {''}


def qid_of(iri: Any, *, path: str, line: int) -> str:
    """`Q1298577` from `http://www.wikidata.org/entity/Q1298577`; anything else is a format
    error.
    """
    match = re.fullmatch(r"https?://www\.wikidata\.org/entity/(Q\d+)", str(iri))
    if not match:
        raise SourceFormatError(f"url is not a Wikidata entity IRI: {iri!r}", path=path, line=line)
    return match.group(1)


def read_dish_table(path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, row) of `Dishes.csv`: `hasParts` and `materia` parsed like `obj_label`; a bad row
    names its line.
    """
    columns = ("url", "origin", "name", "lang", "hasParts", "materia")
    # some gold lists exceed the default 128 KiB field limit
    previous = csv.field_size_limit(1 << 30)
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in columns if c not in (reader.fieldnames or [])]
            if missing:
                raise SourceFormatError(
                    f"missing column(s) {missing}; header {reader.fieldnames}", path=path, line=1
                )
            for record in reader:
                line = reader.line_num
                parts = {
                    key: parse_obj_label(record[key], path=path, line=line, field=key)
                    for key in ("hasParts", "materia")
                }
                yield line, {**record, **parts}
    finally:
        csv.field_size_limit(previous)


def read_dishes(path: str) -> list[Dish]:
    """Every dish of one file, in file order (`row` = index among non-blank lines)."""
    dishes: list[Dish] = []
    for number, record in read_jsonl(path):
        missing = [
            key for key in ("url", "origin", "lang", "sub_label", "obj_label") if key not in record
        ]
        if missing:
            raise SourceFormatError(
                f"missing field(s) {missing}; found {sorted(record)}", path=path, line=number
            )
        qid = qid_of(record["url"], path=path, line=number)
        gold = parse_obj_label(record["obj_label"], path=path, line=number)
        row = len(dishes)
        dishes.append(
            Dish(
                record["url"], qid, record["origin"], record["lang"], record["sub_label"], gold, row
            )
        )
    if not dishes:
        raise SourceFormatError("the file holds no dishes", path=path)
    return dishes


def source_file(
    relpath: str,
    sha256: str,
    commit: str = DATA_COMMIT,
    *,
    data_dir: str | None = None,
    verify: bool = True,
) -> Path:
    """A file of the repository's `data/` folder: from `data_dir` when given, else the pinned
    URL.
    """
    if data_dir and Path(data_dir).is_dir() and not Path(data_dir, "data").is_dir():
        # data_dir is a copy of the data/ folder itself (it has data_lang/, templates/, ... at its
        # top)
        return pinned_file(url("data/", commit), relpath, sha256, data_dir=data_dir, verify=verify)
    return pinned_file(url("", commit), f"data/{relpath}", sha256, data_dir=data_dir, verify=verify)


def template_files(data_dir: str | None) -> list[Path]:
    """The template files of every language (what `fmlama_templates` is read from)."""
    return [
        source_file(
            f"templates/{la}_templates.jsonl",
            TEMPLATES_SHA256[la],
            TEMPLATE_COMMIT,
            data_dir=data_dir,
        )
        for la in LANGUAGES
    ]


def group_of(origin: str) -> str:
    """The origin group used in the paper's tables (`U.S.`, `China`, ..., or `Others`)."""
    return GROUPS.get(origin, OTHERS)


def candidate_pool(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """The candidate pool the FmLAMA task scores: every gold ingredient of a split (or of any rows),
    sorted in code-point order. Items are kept exactly as stored; a blank item names no ingredient
    (`{''}` reads as an empty list) and could not be scored, so it is left out.
    """
    return sorted({item for row in rows for item in row["obj_label"] if item.strip()})


def _configs() -> list[FmlamaConfig]:
    version = INFO.version
    rows = {"en": 2580, "zh": 815, "ar": 571, "ko": 807, "ru": 961, "he": 463}
    configs = [
        FmlamaConfig(
            name=f"fmlama_{la}",
            version=version,
            languages=(la,),
            lang=la,
            rows=rows[la],
            subset="lang",
            description=f"FmLAMA-la dishes with {la} labels, all origins.",
        )
        for la in LANGUAGES
    ]
    configs += [
        FmlamaConfig(
            name=f"fmlama_aligned_{la}",
            version=version,
            languages=(la,),
            lang=la,
            rows=175,
            subset="aligned",
            description=f"The 175 dishes present in all six languages, {la} labels.",
        )
        for la in LANGUAGES
    ]
    configs += [
        FmlamaConfig(
            name=f"fmlama_cs_{p}_{s}",
            version=version,
            languages=tuple(dict.fromkeys((p, s))),
            rows=508,
            subset="cs",
            prompt_lang=p,
            subject_lang=s,
            description=f"Code-switching: {p} template and gold objects, {s} dish names.",
        )
        for p, s in CS_PAIRS
    ]
    configs.append(
        FmlamaConfig(
            name="fmlama_en14",
            version=version,
            languages=("en",),
            lang="en",
            rows=1549,
            subset="en14",
            description="English dishes of the 14 named origin groups (the v2 English set).",
        )
    )
    # the corrected zh set drops 玉米黑粉菌 (its only ingredient is itself)
    corrected_rows = {"fmlama_zh": 814}
    twins = [corrected_twin(c, rows=corrected_rows.get(c.name, c.rows)) for c in configs]
    templates = FmlamaConfig(
        name="fmlama_templates",
        version=version,
        languages=LANGUAGES,
        rows=87,
        subset="templates",
        description="The cloze templates of all six languages (v1).",
    )
    full = FmlamaConfig(
        name="fmlama_full",
        version=version,
        rows=33_693,
        subset="full",
        description="The full Wikidata crawl (Dishes.csv): every dish in all 253 label languages.",
    )
    return [*configs, *twins, templates, corrected_twin(templates), full]


def _dish_features(code_switching: bool) -> datasets.Features:
    columns = {
        "id": datasets.Value("string"),
        "url": datasets.Value("string"),
        "qid": datasets.Value("string"),
        "origin": datasets.Value("string"),
        "group": datasets.Value("string"),
        "continent": datasets.Value("string"),
        "lang": datasets.Value("string"),
        "sub_label": datasets.Value("string"),
        "obj_label": datasets.List(datasets.Value("string")),
        "row": datasets.Value("int32"),
    }
    if code_switching:
        columns.update(prompt_lang=datasets.Value("string"), subject_lang=datasets.Value("string"))
    return datasets.Features(columns)


TEMPLATE_FEATURES = datasets.Features(
    {
        "language": datasets.Value("string"),
        "relation": datasets.Value("string"),
        "family": datasets.Value("string"),
        "canonical": datasets.Value("bool"),
        "template": datasets.Value("string"),
    }
)


class Fmlama(CultureProbeBuilder):
    """FmLAMA builder; `variant="corrected"` applies the fixes of the corrected variant
    (docs/benchmarks/fmlama.md).
    """

    CARD = INFO
    BUILDER_CONFIG_CLASS = FmlamaConfig
    BUILDER_CONFIGS = _configs()
    config: FmlamaConfig

    def _features(self) -> datasets.Features:
        if self.config.subset == "templates":
            return TEMPLATE_FEATURES
        features = _dish_features(self.config.subset == "cs")
        if self.config.subset == "full":
            features["materia"] = datasets.List(datasets.Value("string"))
        return features

    def _rows(self, split: str) -> Iterator[dict[str, Any]]:
        if self.config.subset == "templates":
            yield from self._template_rows()
            return
        if self.config.subset == "cs":
            yield from self._code_switching_rows()
            return
        if self.config.subset == "full":
            yield from self._full_rows()
            return
        folder = "data_filter" if self.config.subset == "aligned" else "data_lang"
        dishes = self._dishes(folder, self.config.lang)
        if self.config.subset == "en14":
            dishes = [dish for dish in dishes if dish.origin in GROUPS]
        continents = self._continents()
        for dish in self._correct(dishes):
            yield self._row(dish, dish, continents, f"{dish.qid}|{dish.lang}")

    def _code_switching_rows(self) -> Iterator[dict[str, Any]]:
        """en∩zh dishes of origins with more than 20 of them, in en file order; gold in the prompt
        language.
        """
        prompt, subject = self.config.prompt_lang, self.config.subject_lang
        by_lang = {la: {d.url: d for d in self._dishes("data_lang", la)} for la in ("en", "zh")}
        shared = [d for d in by_lang["en"].values() if d.url in by_lang["zh"]]
        counts = Counter(d.origin for d in shared)
        kept = [d.url for d in shared if counts[d.origin] > CS_MIN_DISHES]
        gold = self._correct([by_lang[prompt][u] for u in kept])
        continents = self._continents()
        for dish in gold:
            row = self._row(
                dish, by_lang[subject][dish.url], continents, f"{dish.qid}|{prompt}_{subject}"
            )
            row.update(row=by_lang["en"][dish.url].row, prompt_lang=prompt, subject_lang=subject)
            yield row

    @staticmethod
    def _row(gold: Dish, subject: Dish, continents: dict[str, str], row_id: str) -> dict[str, Any]:
        return {
            "id": row_id,
            "url": gold.url,
            "qid": gold.qid,
            "origin": gold.origin,
            "group": group_of(gold.origin),
            "continent": continents.get(gold.origin),
            "lang": gold.lang,
            "sub_label": subject.sub_label,
            "obj_label": list(gold.obj_label),
            "row": gold.row,
        }

    def _source(self, relpath: str, sha256: str, commit: str = DATA_COMMIT) -> Path:
        return source_file(
            relpath,
            sha256,
            commit,
            data_dir=self.config.data_dir,
            verify=self.config.verify_checksums,
        )

    def _dishes(self, folder: str, language: str) -> list[Dish]:
        path = self._source(
            f"{folder}/{language}/{language}_dishes.jsonl", DISHES_SHA256[folder, language]
        )
        return read_dishes(str(path))

    def _continents(self) -> dict[str, str]:
        path = self._source("country_info.json", COUNTRY_INFO_SHA256, COUNTRY_COMMIT)
        try:
            table = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise SourceFormatError(
                f"invalid JSON ({error.msg})", path=str(path), line=error.lineno
            ) from error
        if not isinstance(table, dict):
            raise SourceFormatError("expected a JSON object {country: continent}", path=str(path))
        return table

    def _correct(self, dishes: list[Dish]) -> list[Dish]:
        """The corrected variant: drop self-items (and dishes left empty), merge case-variant
        ingredients.
        """
        if not self.config.corrected:
            return dishes
        kept = []
        for dish in dishes:
            gold = tuple(item for item in dish.obj_label if item != dish.sub_label)
            if len(gold) < len(dish.obj_label):
                self.tally("corrected: self-item removed")
            if not gold:
                self.tally("corrected: dish dropped (no gold left)")
                continue
            kept.append(dataclasses.replace(dish, obj_label=gold))
        canonical = case_canonical_forms(item for dish in kept for item in dish.obj_label)
        merged = sum(form != target for form, target in canonical.items())
        if merged:
            self.tally("corrected: case-variant labels merged", merged)
        return [
            dataclasses.replace(
                d, obj_label=tuple(dict.fromkeys(canonical[i] for i in d.obj_label))
            )
            for d in kept
        ]

    def _full_rows(self) -> Iterator[dict[str, Any]]:
        path = str(self._source("Dishes.csv", DISHES_CSV_SHA256))
        continents = self._continents()
        for row, (line, record) in enumerate(read_dish_table(path)):
            qid = qid_of(record["url"], path=path, line=line)
            dish = Dish(
                record["url"],
                qid,
                record["origin"],
                record["lang"],
                record["name"],
                record["hasParts"],
                row,
            )
            yield {
                **self._row(dish, dish, continents, f"{dish.qid}|{dish.lang}|{row}"),
                "materia": list(record["materia"]),
            }

    def _template_rows(self) -> Iterator[dict[str, Any]]:
        for language in self.config.languages:
            path = self._source(
                f"templates/{language}_templates.jsonl", TEMPLATES_SHA256[language], TEMPLATE_COMMIT
            )
            for number, record in read_jsonl(path):
                if not isinstance(record.get("relation"), str) or not isinstance(
                    record.get("template"), str
                ):
                    raise SourceFormatError(
                        "expected string fields 'relation' and 'template'",
                        path=str(path),
                        line=number,
                    )
                relation, template = record["relation"], record["template"]
                if self.config.corrected and (language, relation) in TEMPLATE_FIXES:
                    template = TEMPLATE_FIXES[language, relation]
                    self.tally("corrected: template fixed")
                yield {
                    "language": language,
                    "relation": relation,
                    "family": relation.split("_")[0],
                    "canonical": CANONICAL.fullmatch(relation) is not None,
                    "template": template,
                }


def case_canonical_forms(items: Iterator[str] | list[str]) -> dict[str, str]:
    """{label: its merged form}: case variants map to the most frequent surface form (tie: the
    lower-case one).
    """
    counts = Counter(items)
    variants: dict[str, list[str]] = {}
    for label in counts:
        variants.setdefault(label.casefold(), []).append(label)
    canonical = {}
    for forms in variants.values():
        best = max(forms, key=lambda form: (counts[form], form == form.lower(), form))
        canonical.update({form: best for form in forms})
    return canonical


RESOURCES = {
    # the probing templates, every language
    "templates": SplitResource("fmlama_templates", template_files),
    "vectors": FileResource(vectors_resource),  # mWS word vectors (params: path, language)
}

BUILDER = Fmlama
