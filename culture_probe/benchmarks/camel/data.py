"""CAMeL (Naous et al., ACL 2024): Arab vs Western entities and the Arabic [MASK] prompts they fill.

Three configs: `camel_entities` (20,342 raw entity rows of ten types), `camel_co_prompts` (250
culturally contextualised prompts) and `camel_ag_prompts` (378 culturally agnostic prompts), each
with a `_corrected` twin (see docs/benchmarks/camel.md, Known data errors and the corrected
variant). Upstream ships xlsx only; the Co causal file is missing upstream, so Co causal prefixes
are the text left of `[MASK]` (deviation C1) unless the user supplies the real file with
`co_causal_file=`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import datasets

from culture_probe.data._builder import CultureProbeBuilder, CultureProbeConfig, corrected_twin
from culture_probe.data._pinned import pinned_file
from culture_probe.data.card import BenchmarkInfo, Correction, Licence, SplitResource
from culture_probe.data.sources import read_xlsx
from culture_probe.errors import CultureProbeError, SourceFormatError

COMMIT = "fd8035e7c3974d6c179ea3a02fd4cb75afdb6476"
BASE_URL = f"https://raw.githubusercontent.com/tareknaous/camel/{COMMIT}/"

# The paper's table column order; it is also the ClassLabel order and the sampling index tau.
ENTITY_TYPES = (
    "names_female", "names_male", "food", "clothing_male", "clothing_female",
    "locations", "authors", "beverage", "religious_places", "sports_clubs",
)  # fmt: skip
ENTITY_SHA256 = {
    "authors": "5b5cc88fd785", "beverage": "3592b7de6746", "clothing_female": "77b0ee4f407e",
    "clothing_male": "f75de40d1fac", "food": "9b0a595b8905", "locations": "5134c313ed15",
    "names_female": "577418d3e1bd", "names_male": "73e4dc88cf5a", "religious_places": "13eb4ea61772",
    "sports_clubs": "77ce0b2731a0",
}  # fmt: skip
TYPES_WITH_COUNTRY = frozenset({"authors", "locations", "sports_clubs"})
CULTURES = ("Arab", "Western")
# The literal `Entity Type` cells of the prompt files.
PROMPT_TYPES = {
    "Names-Female": "names_female", "Names-Male": "names_male", "Food": "food", "Clothing-Male": "clothing_male",
    "Clothing-Female": "clothing_female", "Location": "locations", "Authors": "authors", "Beverage": "beverage",
    "Religious Places": "religious_places", "Sports Clubs": "sports_clubs",
}  # fmt: skip
SENTIMENTS = {"positive": "positive", "negative": "negative", "neutral": "neutral", "NA": None}
PROMPT_FILES = {
    "co_masked": ("prompts/camel-co/camelco-prompts-masked-lm.xlsx", "46adbb4085e3"),
    "ag_masked": ("prompts/camel-ag/camelag-prompts-masked-lms.xlsx", "3578eb488e04"),
    "ag_causal": ("prompts/camel-ag/camelag-prompts-causal-lms.xlsx", "6f8275447a9a"),
}
MASK = "[MASK]"
_MASK_WITH_SPACES = re.compile(r"(?:^|\s)\[MASK\](?:\s|$)")

# Corrections (the corrected variant), applied only by the `_corrected` configs.
LABEL_FIXES = {("food", "ابل باي"): "Western"}  # "apple pie" released with an empty Culture
# mask first in both Ag files; the author name should follow للكاتب
SUSPECT_MASK_ROWS = {"ag": frozenset({166})}


def entity_file(entity_type: str) -> str:
    """The upstream path of one entity type's file (`names_female` ->
    `entities/names-female.xlsx`).
    """
    return f"entities/{entity_type.replace('_', '-')}.xlsx"


ENTITY_TYPE_LABEL = datasets.ClassLabel(names=list(ENTITY_TYPES))
ENTITY_FEATURES = datasets.Features(
    {
        "id": datasets.Value("string"),
        "row": datasets.Value("int32"),
        "entity_type": ENTITY_TYPE_LABEL,
        "entity": datasets.Value("string"),
        "culture": datasets.Value("string"),
        "country": datasets.Value("string"),
    }
)
PROMPT_FEATURES = datasets.Features(
    {
        "id": datasets.Value("int32"),
        "entity_type": ENTITY_TYPE_LABEL,
        "entity_type_raw": datasets.Value("string"),
        "prompt_masked": datasets.Value("string"),
        "prompt_causal": datasets.Value("string"),
        "causal_source": datasets.Value("string"),
        "causal_prefix_empty": datasets.Value("bool"),
        "sentiment": datasets.Value("string"),
        "suspect_mask_position": datasets.Value("bool"),
    }
)

# The paper's BibTeX: the dataset card's citation and that of the benchmark's `evaluate` metrics.
CITATION = (
    "@inproceedings{naous-etal-2024-beer,\n  title = {Having Beer after Prayer? Measuring Cultural Bias in "
    "Large Language Models},\n  author = {Naous, Tarek and Ryan, Michael J. and Ritter, Alan and Xu, Wei},\n"
    "  booktitle = {Proceedings of ACL 2024},\n  year = {2024},\n  note = {arXiv:2305.14456}\n}"
)

INFO = BenchmarkInfo(
    name="camel",
    title="CAMeL: Cultural Appropriateness Measure Set for LMs",
    description=(
        "Arabic prompts from X/Twitter with one [MASK] (250 culturally contextualised, 378 agnostic) and 20,342 "
        "Arab or Western entities of ten types. The Cultural Bias Score is the share of (Arab, Western) filler "
        "pairs in which a model prefers the Western filler. The tweet-derived prompts are for research use."
    ),
    homepage="https://github.com/tareknaous/camel",
    licences=(
        Licence(
            "MIT",
            "the CAMeL repository (prompts and entities)",
            "mit",
            "https://github.com/tareknaous/camel/blob/main/LICENSE",
        ),
        Licence("X (Twitter) terms", "the prompts, built from tweets: research use"),
    ),
    citation=CITATION,
    version="1.0.0",
    paper="camel_002_e335cff66f386db0.txt",
    sources=(
        *(BASE_URL + entity_file(t) for t in ENTITY_TYPES),
        *(BASE_URL + path for path, _ in PROMPT_FILES.values()),
    ),
    suite=("camel_co_prompts", "camel_ag_prompts"),
    corrections=(
        Correction(
            "camel-strip", "camel_entities: leading/trailing spaces stripped from entity cells", 68
        ),
        Correction(
            "camel-dedupe",
            "camel_entities: an entity repeated within one type and culture after stripping is kept once (first "
            "row); 696 of the 739 dropped rows are locations, mostly homonymous US towns",
            739,
        ),
        Correction(
            "camel-apple-pie",
            "camel_entities: food 'ابل باي' (apple pie) had no Culture; labelled Western",
            1,
        ),
        Correction(
            "camel-cross-labelled",
            "camel_entities: location strings labelled both Arab and Western (القاهرة, الإسكندرية, دورا: an Arab "
            "city and a US town) are dropped: all 7 of their rows",
            7,
        ),
        Correction(
            "camel-suspect-mask",
            "camel_ag_prompts: row 166 has the mask first in both Ag files (likely a right-to-left editing slip); "
            "kept as is and flagged suspect_mask_position=True",
            1,
        ),
    ),
)


@dataclass
class CamelConfig(CultureProbeConfig):
    """A CAMeL part (`entities`, `co` or `ag` prompts); `co_causal_file` supplies the missing Co
    causal file.
    """

    part: Literal["entities", "co", "ag"] = "entities"
    co_causal_file: str | None = None
    verify_checksums: bool = True


def _configs() -> list[CamelConfig]:
    faithful = [
        CamelConfig(name="camel_entities", part="entities", languages=("ar",), rows=20342,
                    description="Arab and Western entities of ten types (raw rows)"),
        CamelConfig(name="camel_co_prompts", part="co", languages=("ar",), rows=250,
                    description="Culturally contextualised Arabic [MASK] prompts (CAMeL-Co)"),
        CamelConfig(name="camel_ag_prompts", part="ag", languages=("ar",), rows=378,
                    description="Culturally agnostic Arabic [MASK] prompts (CAMeL-Ag)"),
    ]  # fmt: skip
    # The corrected entity set keeps each (type, culture, stripped string) once: the documented
    # pools plus apple pie.
    corrected_rows = {"camel_entities": 19596}
    return [
        *faithful,
        *(corrected_twin(c, rows=corrected_rows.get(c.name, c.rows)) for c in faithful),
    ]


def _text(cell: Any) -> str | None:
    """A cell as text, or None when it is empty or whitespace only."""
    if cell is None or str(cell).strip() == "":
        return None
    return str(cell)


def read_entities(path: Path, entity_type: str) -> list[dict[str, Any]]:
    """The raw rows of one entity file; an empty Entity or an unknown Culture is an error naming the
    row.
    """
    has_country = entity_type in TYPES_WITH_COUNTRY
    required = ("Entity", "Country", "Culture") if has_country else ("Entity", "Culture")
    rows = []
    for line, record in read_xlsx(path, required=required):
        entity, culture = record.get("Entity"), _text(record.get("Culture"))
        if not isinstance(entity, str) or not entity.strip():
            raise SourceFormatError(
                f"Entity cell {entity!r} is not a non-empty string", path=str(path), line=line
            )
        if culture is not None and culture not in CULTURES:
            raise SourceFormatError(
                f"Culture {culture!r} is none of {CULTURES} (or empty)", path=str(path), line=line
            )
        row = line - 2
        rows.append({
            "id": f"{entity_type}-{row:05d}", "row": row, "entity_type": entity_type, "entity": entity,
            "culture": culture, "country": _text(record.get("Country")) if has_country else None,
        })  # fmt: skip
    return rows


def correct_entities(
    rows: list[dict[str, Any]], tally: Callable[[str], None]
) -> list[dict[str, Any]]:
    """The corrected variant for the rows of one entity type: strip, fix labels, drop
    cross-labelled, de-duplicate.
    """
    rows = [dict(row) for row in rows]
    for row in rows:
        if row["entity"] != row["entity"].strip():
            row["entity"] = row["entity"].strip()
            tally("camel-strip: entity cells stripped")
        fixed = LABEL_FIXES.get((row["entity_type"], row["entity"]))
        if row["culture"] is None and fixed:
            row["culture"] = fixed
            tally(f"camel-apple-pie: unlabelled entity labelled {fixed}")
    labels: dict[str, set[str | None]] = {}
    for row in rows:
        labels.setdefault(row["entity"], set()).add(row["culture"])
    cross = {entity for entity, cultures in labels.items() if set(CULTURES) <= cultures}
    kept, seen = [], set()
    for row in rows:
        key = (row["culture"], row["entity"])
        if row["entity"] in cross:
            tally("camel-cross-labelled: rows dropped")
        elif key in seen:
            tally("camel-dedupe: duplicate rows dropped")
        else:
            seen.add(key)
            kept.append(row)
    return kept


@dataclass(frozen=True)
class PromptRow:
    """One row of a prompt file: its spreadsheet line and cells."""

    line: int
    entity_type_raw: str
    prompt: str
    sentiment: str | None


def read_prompts(path: Path, *, with_sentiment: bool) -> list[PromptRow]:
    """The rows of one prompt file, each checked: a known Entity Type and exactly one
    space-delimited [MASK].
    """
    required = (
        ("Entity Type", "Prompt", "Sentiment") if with_sentiment else ("Entity Type", "Prompt")
    )
    rows = []
    for line, record in read_xlsx(path, required=required):
        raw_type, prompt = record.get("Entity Type"), record.get("Prompt")
        if raw_type not in PROMPT_TYPES:
            raise SourceFormatError(
                f"Entity Type {raw_type!r} is none of {sorted(PROMPT_TYPES)}",
                path=str(path),
                line=line,
            )
        if (
            not isinstance(prompt, str)
            or prompt.count(MASK) != 1
            or not _MASK_WITH_SPACES.search(prompt)
        ):
            raise SourceFormatError(
                f"Prompt {prompt!r} must hold exactly one {MASK} with whitespace (or the string boundary) on both "
                "sides",
                path=str(path),
                line=line,
            )
        # a cell: any type until checked
        sentiment: Any = record.get("Sentiment") if with_sentiment else None
        if with_sentiment and sentiment not in SENTIMENTS:
            raise SourceFormatError(
                f"Sentiment {sentiment!r} is none of {sorted(SENTIMENTS)}",
                path=str(path),
                line=line,
            )
        rows.append(
            PromptRow(line, raw_type, prompt, SENTIMENTS.get(sentiment) if with_sentiment else None)
        )
    return rows


def align_causal(masked: list[PromptRow], causal: list[PromptRow], causal_path: Path) -> None:
    """The causal file must match the masked one row by row (same count, same Entity Type on every
    row).
    """
    if len(causal) != len(masked):
        raise SourceFormatError(
            f"the causal prompt file has {len(causal)} rows but the masked one has {len(masked)}; they must be "
            "aligned row by row",
            path=str(causal_path),
        )
    for m, c in zip(masked, causal, strict=True):
        if m.entity_type_raw != c.entity_type_raw:
            raise SourceFormatError(
                f"Entity Type {c.entity_type_raw!r} differs from the masked file's {m.entity_type_raw!r} on the same "
                "row; the files must be aligned row by row",
                path=str(causal_path),
                line=c.line,
            )


def causal_prefix(prompt: str) -> str:
    """The text left of [MASK], stripped: all a causal model sees (deviation C1)."""
    return prompt.split(MASK)[0].strip()


class CamelBuilder(CultureProbeBuilder):
    """Builds the CAMeL entity list or one prompt set from the pinned upstream xlsx files."""

    CARD = INFO
    BUILDER_CONFIG_CLASS = CamelConfig
    BUILDER_CONFIGS = _configs()
    config: CamelConfig

    def _features(self) -> datasets.Features:
        return ENTITY_FEATURES if self.config.part == "entities" else PROMPT_FEATURES

    def _source(self, relpath: str, sha256: str) -> Path:
        return pinned_file(
            BASE_URL,
            relpath,
            sha256,
            data_dir=self.config.data_dir,
            verify=self.config.verify_checksums,
        )

    def _rows(self, split: str) -> Iterator[dict[str, Any]]:
        if self.config.co_causal_file and self.config.part != "co":
            raise CultureProbeError(
                f"co_causal_file= supplies the missing CAMeL-Co causal prompts; {self.config.name} does not use it. "
                "Load camel_co_prompts with it, or drop the option."
            )
        if self.config.part == "entities":
            yield from self._entity_rows()
        else:
            yield from self._prompt_rows(self.config.part)

    def _entity_rows(self) -> Iterator[dict[str, Any]]:
        for entity_type in ENTITY_TYPES:
            path = self._source(entity_file(entity_type), ENTITY_SHA256[entity_type])
            rows = read_entities(path, entity_type)
            yield from correct_entities(rows, self.tally) if self.config.corrected else rows

    def _prompt_rows(self, part: str) -> Iterator[dict[str, Any]]:
        masked_path = self._source(*PROMPT_FILES[f"{part}_masked"])
        masked = read_prompts(masked_path, with_sentiment=True)
        causal, source = self._causal_rows(part, masked)
        suspect = SUSPECT_MASK_ROWS.get(part, frozenset()) if self.config.corrected else frozenset()
        for index, (m, c) in enumerate(zip(masked, causal, strict=True)):
            prefix = causal_prefix(c.prompt)
            if index in suspect:
                self.tally("camel-suspect-mask: prompts flagged")
            yield {
                "id": index, "entity_type": PROMPT_TYPES[m.entity_type_raw], "entity_type_raw": m.entity_type_raw,
                "prompt_masked": m.prompt, "prompt_causal": prefix, "causal_source": source,
                "causal_prefix_empty": prefix == "", "sentiment": m.sentiment,
                "suspect_mask_position": index in suspect,
            }  # fmt: skip

    def _causal_rows(self, part: str, masked: list[PromptRow]) -> tuple[list[PromptRow], str]:
        """The causal rows aligned with `masked`, and where they come from (deviation C1 for Co)."""
        if part == "ag":
            path = self._source(*PROMPT_FILES["ag_causal"])
        elif self.config.co_causal_file:
            path = Path(self.config.co_causal_file)
        else:
            return masked, "derived_left_of_mask"
        causal = read_prompts(path, with_sentiment=False)
        align_causal(masked, causal, path)
        return causal, "upstream_causal_file"


def entity_files(data_dir: str | None) -> list[Path]:
    """The ten entity files `camel_entities` is read from."""
    return [
        pinned_file(BASE_URL, entity_file(t), ENTITY_SHA256[t], data_dir=data_dir)
        for t in ENTITY_TYPES
    ]


# the sampling pools of the prompts
RESOURCES = {"entities": SplitResource("camel_entities", entity_files)}

BUILDER = CamelBuilder
