"""MAPS (Liu et al., NAACL 2024): proverbs used in conversations, in six languages, plus translated
sets.

The data is released on request only (no download URL, no stated data licence), so every config
needs `data_dir=`: a folder laid out as `<lang>/<file>.xlsx`. Configs: `maps_<lang>` (splits `test`,
`few_shot`), the machine/human translation sets used by the culture-gap study (`maps_<src>_en_mt`,
`maps_zh_en_ht`, `maps_en_zh_{mt,ht}`), `maps_en_transfer` (`train`, `test`), each with a
`_corrected` twin that only aligns metadata and adds flags (see docs/benchmarks/maps.md, Known data
errors and the corrected variant); labels, proverbs and conversations never change.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets

from culture_probe.data._builder import (
    CultureProbeBuilder,
    CultureProbeConfig,
    with_corrected_twins,
)
from culture_probe.data._pinned import verify_pinned
from culture_probe.data.card import BenchmarkInfo, Correction, Licence, SplitResource, base_name
from culture_probe.data.sources import read_xlsx
from culture_probe.errors import MissingDataError, SourceFormatError

LANGUAGES = ("en", "zh", "de", "ru", "bn", "id")
COLUMNS = (
    "proverb",
    "conversation",
    "explanation",
    "answer1",
    "answer2",
    "is_figurative",
    "answer_key",
)
REQUIRED_TEXT = ("proverb", "conversation", "answer1", "answer2")
LABELS = ("a", "b")
# Pinned sha256 prefixes of the release, by path under data_dir.
SHA256 = {
    "en/test_proverbs.xlsx": "20a033ef062a", "zh/test_proverbs.xlsx": "5bfd1b36b72a",
    "de/test_proverbs.xlsx": "68b5862f4919", "ru/test_proverbs.xlsx": "8a48cfa077c1",
    "bn/test_proverbs.xlsx": "a96057d443bf", "id/test_proverbs.xlsx": "5a6c37735f3c",
    "en/fs_proverbs.xlsx": "3998c0c48d59", "zh/fs_proverbs.xlsx": "be4201ae9f17",
    "de/fs_proverbs.xlsx": "0a08acd99183", "ru/fs_proverbs.xlsx": "34f17702c11d",
    "bn/fs_proverbs.xlsx": "62d226b80c8a", "id/fs_proverbs.xlsx": "cce58a7914d2",
    "zh/machine_translation_2en.xlsx": "b0b5884881cc", "de/machine_translation_2en.xlsx": "866c14dc2ba5",
    "ru/machine_translation_2en.xlsx": "bf29c63565a9", "bn/machine_translation_2en.xlsx": "5ca2c0712e1f",
    "id/machine_translation_2en.xlsx": "f5731ca424c1", "zh/human_translation_2en.xlsx": "1e3e26faec7a",
    "en/machine_translation_en2zh.xlsx": "85103f0c1829", "en/human_translation_en2zh.xlsx": "c0148a10d74c",
    "en/transfer_train_proverbs.xlsx": "b462baa6cfbe", "en/transfer_test_proverbs.xlsx": "ad41ae01570f",
}  # fmt: skip
HOW_TO_GET = (
    "MAPS is distributed on request only: ask for it through the data request form linked from "
    "https://github.com/UKPLab/maps, unpack it so that it holds <lang>/test_proverbs.xlsx etc. for en, zh, de, ru, "
    "bn, id, and pass that folder: `--data-dir path/to/maps` on the command line, "
    "load_benchmark('maps_en', data_dir='path/to/maps') in Python. The offline mirror has it at "
    "$CULTURE_PROBE_MIRROR/manual/maps."
)

FEATURES = datasets.Features(
    {
        "id": datasets.Value("string"),
        "row": datasets.Value("int32"),
        "language": datasets.Value("string"),
        "source_language": datasets.Value("string"),
        "proverb": datasets.Value("string"),
        "conversation": datasets.Value("string"),
        "explanation": datasets.Value("string"),
        "answer1": datasets.Value("string"),
        "answer2": datasets.Value("string"),
        "is_figurative": datasets.Value("bool"),
        "label": datasets.ClassLabel(names=list(LABELS)),
        "flags": datasets.List(datasets.Value("string")),
    }
)

# The paper's BibTeX: the dataset card's citation and that of the benchmark's `evaluate` metrics.
CITATION = (
    "@inproceedings{liu-etal-2024-multilingual,\n  title = {Are Multilingual {LLM}s Culturally-Diverse "
    "Reasoners? An Investigation into Multicultural Proverbs and Sayings},\n  author = {Liu, Chen Cecilia and "
    "Koto, Fajri and Baldwin, Timothy and Gurevych, Iryna},\n  booktitle = {Proceedings of NAACL 2024},\n"
    "  year = {2024}\n}"
)

INFO = BenchmarkInfo(
    name="maps",
    title="MAPS: MulticultrAl Proverbs and Sayings",
    description=(
        "Proverbs and sayings of six cultures (en, zh, de, ru, bn, id), each used in a short conversation with two "
        "candidate interpretations (the right one and its negation). Probes memorisation (complete the proverb) and "
        "reasoning (pick the meant interpretation), with figurative/literal and culture-gap breakdowns on machine- "
        "and human-translated sets. Released on request for research use only; never redistribute the data."
    ),
    homepage="https://github.com/UKPLab/maps",
    licences=(
        Licence(
            "Apache-2.0",
            "the MAPS code",
            "apache-2.0",
            "https://github.com/UKPLab/maps/blob/main/LICENSE",
        ),
        Licence(
            "none stated, released on request", "the proverbs and conversations: research use only"
        ),
    ),
    on_request="the request form linked from https://github.com/UKPLab/maps (the MAPS authors, UKP Lab)",
    citation=CITATION,
    version="1.0.0",
    paper="maps_004_9751a7a423d744f9.txt",
    sources=(
        "manual: released on request through the form linked from https://github.com/UKPLab/maps",
    ),
    suite=(
        "maps_en",
        "maps_zh",
        "maps_de",
        "maps_ru",
        "maps_bn",
        "maps_id",
        "maps_zh_en_mt",
        "maps_zh_en_ht",
        "maps_en_zh_mt",
        "maps_en_zh_ht",
    ),
    corrections=(
        Correction(
            "maps-figurative-from-source",
            "zh MT/HT is_figurative disagrees with zh test on rows 196, 197, "
            "254, 282, 312, 327; copied from the source test row and flagged figurative_from_source "
            "(6 rows in each of maps_zh_en_mt and maps_zh_en_ht)",
            12,
        ),
        Correction(
            "maps-duplicate-proverb",
            "bn test holds 'তালপাতার ছায়া মিছা কর তার মায়া' twice (two "
            "conversations); both rows kept and flagged duplicate_proverb",
            2,
        ),
        Correction(
            "maps-fs-test-overlap",
            "de 'knapp daneben ist auch vorbei' is in both few_shot and test; both "
            "rows flagged fs_test_overlap (excluded from de few-shot demo pools)",
            2,
        ),
    ),  # fmt: skip
)


@dataclass
class MapsConfig(CultureProbeConfig):
    """One MAPS set: its (split, file under data_dir) pairs, the language of its text and where that
    came from.
    """

    files: tuple[tuple[str, str], ...] = ()
    language: str = ""
    source_language: str = ""
    verify_checksums: bool = True


def _configs() -> list[MapsConfig]:
    native = [
        MapsConfig(name=f"maps_{lang}", languages=(lang,), language=lang, source_language=lang, rows=rows,
                   files=(("test", f"{lang}/test_proverbs.xlsx"), ("few_shot", f"{lang}/fs_proverbs.xlsx")),
                   description=f"MAPS {lang} proverbs: test and few-shot")
        for lang, rows in zip(LANGUAGES, (424, 364, 364, 420, 370, 371), strict=True)
    ]  # fmt: skip
    kinds = {"mt": "machine", "ht": "human"}
    translated = [
        (f"maps_{src}_en_{kind}", src, "en", f"{src}/{kinds[kind]}_translation_2en.xlsx", kind, rows)
        for src, kind, rows in (("zh", "mt", 334), ("zh", "ht", 334), ("de", "mt", 334), ("ru", "mt", 390),
                                ("bn", "mt", 340), ("id", "mt", 341))
    ] + [
        ("maps_en_zh_mt", "en", "zh", "en/machine_translation_en2zh.xlsx", "mt", 394),
        ("maps_en_zh_ht", "en", "zh", "en/human_translation_en2zh.xlsx", "ht", 394),
    ]  # fmt: skip
    translations = [
        MapsConfig(name=name, languages=(lang,), language=lang, source_language=src, rows=rows, files=(("test", path),),
                   description=f"MAPS {src} test set, {kinds[kind]}-translated into {lang}")
        for name, src, lang, path, kind, rows in translated
    ]  # fmt: skip
    transfer = MapsConfig(
        name="maps_en_transfer", languages=("en",), language="en", source_language="en", rows=424,
        files=(("train", "en/transfer_train_proverbs.xlsx"), ("test", "en/transfer_test_proverbs.xlsx")),
        description="MAPS en fine-tuning transfer split (train 254 / test 170)",
    )  # fmt: skip
    return with_corrected_twins([*native, *translations, transfer])


def _figurative(cell: Any, path: Path, line: int) -> bool:
    """`is_figurative` is a numeric 0/1 cell (0.0/1.0 in the release)."""
    try:
        value = float(cell)
    except (TypeError, ValueError):
        value = None
    if value not in (0.0, 1.0):
        raise SourceFormatError(f"is_figurative {cell!r} is not 0 or 1", path=str(path), line=line)
    return bool(int(value))


def read_proverbs(path: Path) -> list[dict[str, Any]]:
    """The rows of one MAPS file, mapped by header name (en/test has an extra, always empty
    `answer3`).
    """
    rows = []
    for line, record in read_xlsx(path, required=COLUMNS):
        if all(cell is None or str(cell).strip() == "" for cell in record.values()):
            raise SourceFormatError(
                "empty row inside the data (rows must be contiguous)", path=str(path), line=line
            )
        for column in REQUIRED_TEXT:
            if not isinstance(record.get(column), str) or not record[column].strip():
                raise SourceFormatError(f"{column} {record.get(column)!r} is not a non-empty string", path=str(path),
                                        line=line)  # fmt: skip
        if record.get("answer_key") not in LABELS:
            raise SourceFormatError(f"answer_key {record.get('answer_key')!r} is none of {LABELS}", path=str(path),
                                    line=line)  # fmt: skip
        explanation = record.get("explanation")
        rows.append({
            **{column: record[column] for column in REQUIRED_TEXT},
            "explanation": str(explanation) if explanation is not None and str(explanation).strip() else None,
            "is_figurative": _figurative(record.get("is_figurative"), path, line),
            "label": record["answer_key"],
        })  # fmt: skip
    return rows


def data_root(data_dir: str | os.PathLike | None) -> Path:
    """The MAPS folder the user obtained; its absence is an error that says how to get the data."""
    if not data_dir:
        raise MissingDataError(
            f"MAPS needs data_dir= (--data-dir; no download URL exists). {HOW_TO_GET}"
        )
    root = Path(data_dir).expanduser()
    if not root.is_dir():
        raise MissingDataError(f"MAPS data_dir {str(data_dir)!r} is not a folder. {HOW_TO_GET}")
    return root


class MapsBuilder(CultureProbeBuilder):
    """Builds one MAPS set from the manually obtained xlsx release in `data_dir`."""

    CARD = INFO
    BUILDER_CONFIG_CLASS = MapsConfig
    BUILDER_CONFIGS = _configs()
    config: MapsConfig

    def _features(self) -> datasets.Features:
        return FEATURES

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        data_root(self.config.data_dir)  # fail before any split is written
        return [
            datasets.SplitGenerator(name=split, gen_kwargs={"split": split})
            for split, _ in self.config.files
        ]

    def _read(self, relpath: str) -> list[dict[str, Any]]:
        path = data_root(self.config.data_dir) / relpath
        if not path.is_file():
            raise MissingDataError(
                f"The MAPS folder has no {relpath}: expected the file {path}. {HOW_TO_GET}"
            )
        if self.config.verify_checksums and relpath in SHA256:
            verify_pinned(path, SHA256[relpath])
        return read_proverbs(path)

    def _rows(self, split: str) -> Iterator[dict[str, Any]]:
        files = dict(self.config.files)
        rows = self._read(files[split])
        flags: list[list[str]] = [[] for _ in rows]
        if self.config.corrected:
            self._correct(split, rows, flags)
        base = base_name(self.config.name)
        for index, (row, row_flags) in enumerate(zip(rows, flags, strict=True)):
            for flag in row_flags:
                self.tally(f"{flag}: rows")
            yield {"id": f"{base}-{split}-{index:04d}", "row": index, "language": self.config.language,
                   "source_language": self.config.source_language, **row, "flags": row_flags}  # fmt: skip

    def _correct(self, split: str, rows: list[dict[str, Any]], flags: list[list[str]]) -> None:
        """The corrected variant: translations take metadata from their source; originals get repeat
        flags.
        """
        if self.config.source_language != self.config.language:
            self._align_with_source(split, rows, flags)
        else:
            self._flag_repeats(split, rows, flags)

    def _align_with_source(
        self, split: str, rows: list[dict[str, Any]], flags: list[list[str]]
    ) -> None:
        """Copy `is_figurative` from the source test row (labels already agree; the zh MT/HT flags
        do not).
        """
        source_path = f"{self.config.source_language}/test_proverbs.xlsx"
        source = self._read(source_path)
        if len(source) != len(rows):
            raise SourceFormatError(
                f"{len(rows)} rows, but the source test file {source_path} has {len(source)}; translations must be "
                "aligned with it row by row",
                path=str(Path(str(self.config.data_dir)) / dict(self.config.files)[split]),
            )
        for row, row_flags, original in zip(rows, flags, source, strict=True):
            if row["is_figurative"] != original["is_figurative"]:
                row["is_figurative"] = original["is_figurative"]
                row_flags.append("figurative_from_source")

    def _flag_repeats(self, split: str, rows: list[dict[str, Any]], flags: list[list[str]]) -> None:
        """Flag a proverb held twice in one split, and one held by both `test` and `few_shot`."""
        files = dict(self.config.files)
        counts = Counter(row["proverb"] for row in rows)
        other = {"test": "few_shot", "few_shot": "test"}.get(split)
        overlap = {row["proverb"] for row in self._read(files[other])} if other in files else set()
        for row, row_flags in zip(rows, flags, strict=True):
            if counts[row["proverb"]] > 1:
                row_flags.append("duplicate_proverb")
            if row["proverb"] in overlap:
                row_flags.append("fs_test_overlap")


FEW_SHOT_FILE = "en/fs_proverbs.xlsx"


def few_shot_files(data_dir: str | None) -> list[Path]:
    """The English few-shot file, from the MAPS folder the user obtained."""
    return [data_root(data_dir) / FEW_SHOT_FILE]


# demonstrations (App. D.5)
RESOURCES = {"few_shot": SplitResource("maps_en", few_shot_files, split="few_shot")}

BUILDER = MapsBuilder
