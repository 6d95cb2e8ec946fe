"""MAPS: every count of spec maps.md 2.4/3/7 on the mirror copy of the release, and synthetic
malformed files.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import openpyxl
import pytest
from openpyxl.styles import Font

from culture_probe.benchmarks.maps import data as maps
from culture_probe.data.registry import list_benchmarks, load_benchmark
from culture_probe.errors import MissingDataError, SourceFormatError

# spec 2.4: test, (non-fig, fig), (a, b), empty explanations, fs, fs fig
TABLE = {
    "en": (394, (180, 214), (196, 198), 0, 30, 18),
    "zh": (334, (191, 143), (167, 167), 0, 30, 15),
    "de": (334, (151, 183), (167, 167), 103, 30, 20),
    "ru": (390, (164, 226), (195, 195), 7, 30, 17),
    "bn": (340, (68, 272), (170, 170), 19, 30, 23),
    "id": (341, (74, 267), (171, 170), 0, 30, 22),
}
PAPER_TOTALS = {"en": 424, "zh": 364, "de": 364, "ru": 420, "bn": 370, "id": 371}
TRANSLATIONS = {"maps_zh_en_mt": ("zh", "en"), "maps_zh_en_ht": ("zh", "en"), "maps_de_en_mt": ("de", "en"),
                "maps_ru_en_mt": ("ru", "en"), "maps_bn_en_mt": ("bn", "en"), "maps_id_en_mt": ("id", "en"),
                "maps_en_zh_mt": ("en", "zh"), "maps_en_zh_ht": ("en", "zh")}  # fmt: skip
ZH_FIGURATIVE_DIFF = [196, 197, 254, 282, 312, 327]


def load(name: str, data_dir: Path, **kwargs):
    return load_benchmark(name, data_dir=str(data_dir), **kwargs)


@pytest.fixture
def release(mirror: Path) -> Path:
    return mirror / "manual" / "maps"


def label_names(split) -> list[str]:
    return [split.features["label"].int2str(i) for i in split["label"]]


@pytest.mark.parametrize("lang", list(TABLE))
def test_language_configs_reproduce_spec_counts(release: Path, lang: str) -> None:
    data = load(f"maps_{lang}", release)
    test, few_shot = data["test"], data["few_shot"]
    n, (literal, figurative), (a, b), empty, n_fs, fs_fig = TABLE[lang]
    assert test.num_rows == n and few_shot.num_rows == n_fs
    assert Counter(test["is_figurative"]) == {False: literal, True: figurative}
    assert Counter(label_names(test)) == {"a": a, "b": b}
    assert sum(e is None for e in test["explanation"]) == empty
    assert sum(few_shot["is_figurative"]) == fs_fig and Counter(label_names(few_shot)) == {
        "a": 15,
        "b": 15,
    }
    assert test.num_rows + few_shot.num_rows == PAPER_TOTALS[lang]
    assert set(test["language"]) == set(test["source_language"]) == {lang}
    assert test["id"][:2] == [f"maps_{lang}-test-0000", f"maps_{lang}-test-0001"]
    assert test["row"] == list(range(n))
    assert not any(test["flags"]) and not any(few_shot["flags"])


def test_totals_and_first_english_row(release: Path) -> None:
    assert sum(load(f"maps_{lang}", release)["test"].num_rows for lang in TABLE) == 2133
    assert sum(load(f"maps_{lang}", release)["few_shot"].num_rows for lang in TABLE) == 180
    row = load("maps_en", release)["test"][0]
    assert row == {
        "id": "maps_en-test-0000", "row": 0, "language": "en", "source_language": "en",
        "proverb": "an apple a day keeps the doctor away",
        "conversation": 'Person 1: "Why do you eat an apple every day?" '
                        'Person 2: "An apple a day keeps the doctor away."',
        "explanation": row["explanation"], "answer1": "Eating an apple a day helps one to stay healthy.",
        "answer2": "Eating an apple a day doesn't help one to stay healthy.", "is_figurative": False, "label": 0,
        "flags": [],
    }  # fmt: skip
    assert row["explanation"]


@pytest.mark.parametrize("name", list(TRANSLATIONS))
def test_translations_are_aligned_with_their_source(release: Path, name: str) -> None:
    source_language, language = TRANSLATIONS[name]
    split, source = load(name, release)["test"], load(f"maps_{source_language}", release)["test"]
    assert list(load(name, release)) == ["test"]
    assert split.num_rows == source.num_rows
    assert split["label"] == source["label"]
    assert set(split["language"]) == {language} and set(split["source_language"]) == {
        source_language
    }
    differ = [
        i
        for i, (x, y) in enumerate(
            zip(split["is_figurative"], source["is_figurative"], strict=True)
        )
        if x != y
    ]
    assert differ == (ZH_FIGURATIVE_DIFF if source_language == "zh" else [])
    # the six disagreements cancel out
    assert sum(split["is_figurative"]) == sum(source["is_figurative"])
    corrected = load(name, release, corrected=True)["test"]
    assert corrected["is_figurative"] == source["is_figurative"]
    assert [i for i, f in enumerate(corrected["flags"]) if f] == differ
    assert all(f == ["figurative_from_source"] for f in corrected["flags"] if f)
    assert corrected["label"] == split["label"] and corrected["proverb"] == split["proverb"]
    assert corrected["id"] == split["id"]


def test_transfer_split(release: Path) -> None:
    data = load("maps_en_transfer", release)
    train, test = data["train"], data["test"]
    assert (train.num_rows, test.num_rows) == (254, 170)
    assert Counter(train["is_figurative"]) == {False: 122, True: 132}
    assert Counter(label_names(train)) == {"a": 127, "b": 127}
    assert Counter(test["is_figurative"]) == {False: 70, True: 100}
    assert Counter(label_names(test)) == {"a": 84, "b": 86}
    english = load("maps_en", release)
    assert set(english["few_shot"]["proverb"]) <= set(train["proverb"])
    assert set(test["proverb"]) <= set(english["test"]["proverb"])
    assert not set(train["proverb"]) & set(test["proverb"])


def test_corrected_flags_duplicates_and_overlaps(release: Path) -> None:
    flagged = {}
    for lang in TABLE:
        data = load(f"maps_{lang}", release, corrected=True)
        for split in ("test", "few_shot"):
            for proverb, flags in zip(data[split]["proverb"], data[split]["flags"], strict=True):
                for flag in flags:
                    flagged.setdefault((lang, split, flag), []).append(proverb)
    assert flagged == {
        ("bn", "test", "duplicate_proverb"): ["তালপাতার ছায়া মিছা কর তার মায়া"] * 2,
        ("de", "test", "fs_test_overlap"): ["knapp daneben ist auch vorbei"],
        ("de", "few_shot", "fs_test_overlap"): ["knapp daneben ist auch vorbei"],
    }
    faithful, corrected = (
        load("maps_bn", release)["test"],
        load("maps_bn", release, corrected=True)["test"],
    )
    for column in ("proverb", "conversation", "answer1", "answer2", "label", "is_figurative", "id"):
        assert faithful[column] == corrected[column]
    card = {c.id: c.rows_affected for c in maps.INFO.corrections}
    assert card == {"maps-figurative-from-source": 2 * len(ZH_FIGURATIVE_DIFF), "maps-duplicate-proverb": 2,
                    "maps-fs-test-overlap": 2}  # fmt: skip


def test_listing_promises_the_loaded_row_counts(release: Path) -> None:
    entries = {e.name: e for e in list_benchmarks() if e.benchmark == "maps"}
    assert len(entries) == 2 * (6 + 8 + 1)
    for name, entry in entries.items():
        data = load(name, release)
        assert sum(split.num_rows for split in data.values()) == entry.rows, name
        assert entry.languages == (data[next(iter(data))]["language"][0],)
    assert {lang: entries[f"maps_{lang}"].rows for lang in TABLE} == PAPER_TOTALS


def test_missing_data_dir_says_how_to_get_the_data() -> None:
    with pytest.raises(MissingDataError, match=r"MAPS needs data_dir=.*on request.*manual/maps"):
        load_benchmark("maps_en")


# ---- synthetic files with the release's headers and quirks
# ------------------------------------------------------

HEADER = [
    "proverb",
    "conversation",
    "explanation",
    "answer1",
    "answer2",
    "is_figurative",
    "answer_key",
]


def item(i: int, figurative: float = 1.0, key: str = "a") -> list:
    return [
        f"proverb {i}",
        f"A: talk {i}",
        None if i % 2 else f"gloss {i}",
        f"yes {i}",
        f"no {i}",
        figurative,
        key,
    ]


def write_xlsx(path: Path, header: list, rows: list[list], phantom: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = path.stem
    for row in [header, *rows]:
        sheet.append(row)
    # styled empty cells: openpyxl reads them back as empty or short rows
    for extra in range(phantom):
        sheet.cell(row=len(rows) + 2 + extra, column=1 + extra % 3).font = Font(bold=True)
    book.save(path)
    return path


def make_release(root: Path) -> Path:
    for lang in maps.LANGUAGES:
        write_xlsx(
            root / lang / "test_proverbs.xlsx",
            HEADER,
            [item(0, 0.0, "b"), item(1), item(2)],
            phantom=5,
        )
        write_xlsx(root / lang / "fs_proverbs.xlsx", HEADER, [item(7), item(8, 0.0)])
    with_answer3 = [*HEADER[:5], "answer3", *HEADER[5:]]
    write_xlsx(root / "en" / "test_proverbs.xlsx", with_answer3,
               [[*r[:5], None, *r[5:]] for r in (item(0, 0.0, "b"), item(1), item(2))], phantom=7)  # fmt: skip
    write_xlsx(
        root / "zh" / "machine_translation_2en.xlsx", HEADER, [item(0, 1.0, "b"), item(1), item(2)]
    )
    return root


def test_synthetic_release_maps_columns_by_header(tmp_path: Path) -> None:
    root = make_release(tmp_path / "maps")
    data = load("maps_en", root, verify_checksums=False)
    # phantom rows dropped
    assert {k: v.num_rows for k, v in data.items()} == {"test": 3, "few_shot": 2}
    assert data["test"][0] == {
        "id": "maps_en-test-0000", "row": 0, "language": "en", "source_language": "en", "proverb": "proverb 0",
        "conversation": "A: talk 0", "explanation": "gloss 0", "answer1": "yes 0", "answer2": "no 0",
        "is_figurative": False, "label": 1, "flags": [],
    }  # fmt: skip
    assert data["test"]["explanation"][1] is None
    corrected = load("maps_zh_en_mt", root, verify_checksums=False, corrected=True)["test"]
    assert corrected["is_figurative"] == [False, True, True]
    assert corrected["flags"] == [["figurative_from_source"], [], []]


@pytest.mark.parametrize(("rows", "match"), [
    ([item(0), [None] * 7, item(2)], r"test_proverbs\.xlsx:3: empty row inside the data"),
    ([item(0), item(1, figurative="yes")], r"test_proverbs\.xlsx:3: is_figurative 'yes' is not 0 or 1"),
    ([item(0), item(1, figurative=2.0)], r"test_proverbs\.xlsx:3: is_figurative 2(\.0)? is not 0 or 1"),
    ([item(0), item(1, figurative=None)], r"test_proverbs\.xlsx:3: is_figurative None is not 0 or 1"),
    ([item(0), item(1, key="A")], r"test_proverbs\.xlsx:3: answer_key 'A' is none of \('a', 'b'\)"),
    ([item(0), [None, *item(1)[1:]]], r"test_proverbs\.xlsx:3: proverb None is not a non-empty string"),
])  # fmt: skip
def test_malformed_rows_name_file_and_line(tmp_path: Path, rows: list, match: str) -> None:
    root = make_release(tmp_path / "maps")
    write_xlsx(root / "de" / "test_proverbs.xlsx", HEADER, rows)
    with pytest.raises(SourceFormatError, match=match):
        load("maps_de", root, verify_checksums=False)


def test_malformed_files(tmp_path: Path) -> None:
    root = make_release(tmp_path / "maps")
    write_xlsx(root / "ru" / "fs_proverbs.xlsx", HEADER[:-1], [item(0)[:-1]])
    with pytest.raises(
        SourceFormatError, match=r"fs_proverbs\.xlsx:1: missing column\(s\) \['answer_key'\]"
    ):
        load("maps_ru", root, verify_checksums=False)
    write_xlsx(root / "ru" / "fs_proverbs.xlsx", [], [])
    with pytest.raises(SourceFormatError, match=r"fs_proverbs\.xlsx: the sheet is empty"):
        load("maps_ru", root, verify_checksums=False)
    write_xlsx(root / "zh" / "machine_translation_2en.xlsx", HEADER, [item(0)])
    with pytest.raises(
        SourceFormatError, match=r"machine_translation_2en\.xlsx: 1 rows, but the source test file"
    ):
        load("maps_zh_en_mt", root, verify_checksums=False, corrected=True)


def test_missing_files_and_checksums(tmp_path: Path) -> None:
    root = make_release(tmp_path / "maps")
    with pytest.raises(
        MissingDataError, match=r"no bn/machine_translation_2en\.xlsx: expected the file .*bn"
    ):
        load("maps_bn_en_mt", root, verify_checksums=False)
    with pytest.raises(MissingDataError, match=r"is not a folder.*request"):
        load("maps_bn", tmp_path / "nowhere")
    with pytest.raises(
        SourceFormatError, match=r"bn/test_proverbs\.xlsx: checksum mismatch.*pinned a96057d443bf"
    ):
        load("maps_bn", root)
