"""FmLAMA: every count of spec fmlama.md 2.4/3 on the mirror, the corrected variant, and malformed
sources.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from culture_probe.benchmarks.fmlama import data as fmlama
from culture_probe.data.registry import load_benchmark
from culture_probe.errors import MissingDataError, SourceFormatError

LANGS = ("en", "zh", "ar", "ko", "ru", "he")
GROUP_ORDER = (
    "Italy",
    "U.S.",
    "Turkey",
    "Japan",
    "France",
    "U.K.",
    "Mexico",
    "India",
    "Germany",
    "China",
    "Iran",
    "Greece",
    "Spain",
    "Russia",
    "Others",
)
# spec 2.4, FmLAMA-la: per-group rows, ALL, #cand
TABLE = {
    "en": ((215, 285, 98, 186, 175, 83, 57, 132, 57, 97, 21, 21, 95, 27, 1031), 2580, 1287),
    "zh": ((49, 101, 12, 114, 70, 38, 19, 24, 16, 87, 7, 7, 12, 8, 251), 815, 525),
    "ar": ((76, 54, 52, 44, 37, 26, 20, 18, 13, 13, 11, 11, 10, 10, 176), 571, 354),
    "ko": ((88, 64, 19, 101, 67, 27, 13, 32, 15, 54, 8, 9, 21, 8, 281), 807, 509),
    "ru": ((101, 79, 28, 68, 93, 33, 22, 21, 45, 30, 13, 18, 38, 45, 327), 961, 597),
    "he": ((59, 67, 12, 19, 65, 23, 11, 18, 11, 9, 6, 6, 7, 4, 146), 463, 363),
}
MAX_GOLD = {"en": 22, "zh": 17, "ar": 17, "ko": 14, "ru": 15, "he": 16}
ALIGNED_POOLS = {"en": 226, "zh": 198, "ar": 187, "ko": 197, "ru": 212, "he": 194}


def test(name: str, **kwargs):
    return load_benchmark(name, **kwargs)["test"]


test.__test__ = False  # a helper, not a test


@pytest.mark.parametrize("lang", LANGS)
def test_language_configs_reproduce_spec_counts(mirror: Path, lang: str) -> None:
    split = test(f"fmlama_{lang}")
    groups, total, pool = TABLE[lang]
    counts = Counter(split["group"])
    assert tuple(counts[g] for g in GROUP_ORDER) == groups
    assert split.num_rows == total and len(fmlama.candidate_pool(split)) == pool
    lengths = [len(labels) for labels in split["obj_label"]]
    assert (min(lengths), max(lengths)) == (1, MAX_GOLD[lang])
    assert len(set(split["url"])) == total and set(split["lang"]) == {lang}
    assert split["row"] == list(range(total))


@pytest.mark.parametrize("lang", LANGS)
def test_group_counts_match_upstream_count_files(mirror: Path, lang: str) -> None:
    # an independent reference: the upstream `<la>_count.jsonl` (["All", N], then [origin, n])
    path = (
        mirror
        / "raw.githubusercontent.com/lizhou21/FmLAMA-master"
        / fmlama.DATA_COMMIT
        / f"data/data_lang/{lang}/{lang}_count.jsonl"
    )
    upstream = [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    split = test(f"fmlama_{lang}")
    assert upstream[0] == ["All", split.num_rows]
    assert dict(map(tuple, upstream[1:])) == dict(Counter(split["origin"]))


def test_apostrophe_gold_lists_use_double_quoted_literals(mirror: Path) -> None:
    split = test("fmlama_en")
    with_apostrophe = [
        labels for labels in split["obj_label"] if any("'" in item for item in labels)
    ]
    assert [
        "sugar",
        "cream",
        "saffron",
        "almond",
        "cow's milk",
        "chicken egg",
        "porridge rice",
    ] in with_apostrophe
    assert not any(
        item.startswith(("{", "'", '"')) or item.endswith(("}", "'", '"'))
        for labels in split["obj_label"]
        for item in labels
    )


def test_example_record(mirror: Path) -> None:
    rows = {row["qid"]: row for row in test("fmlama_en")}
    assert rows["Q1298577"] == {
        "id": "Q1298577|en",
        "url": "http://www.wikidata.org/entity/Q1298577",
        "qid": "Q1298577",
        "origin": "People's Republic of China",
        "group": "China",
        "continent": "Asia",
        "lang": "en",
        "sub_label": "mapo doufu",
        "obj_label": ["tofu", "douchi", "doubanjiang"],
        "row": rows["Q1298577"]["row"],
    }


def test_aligned_configs(mirror: Path) -> None:
    urls = None
    for lang in LANGS:
        split = test(f"fmlama_aligned_{lang}")
        assert split.num_rows == 175 and len(fmlama.candidate_pool(split)) == ALIGNED_POOLS[lang]
        urls = urls or set(split["url"])
        assert set(split["url"]) == urls
    assert len(set(split["origin"])) == 40
    assert Counter(split["continent"]) == {
        "Europe": 93,
        "Asia": 36,
        "North America": 35,
        "Oceania": 5,
        "South America": 4,
        "Africa": 2,
    }


def test_code_switching_configs(mirror: Path) -> None:
    origins = {
        "Japan": 114,
        "United States of America": 101,
        "People's Republic of China": 85,
        "France": 68,
        "Italy": 49,
        "United Kingdom": 38,
        "Indonesia": 29,
        "India": 24,
    }
    pools = {("en", "en"): 421, ("en", "zh"): 421, ("zh", "zh"): 368, ("zh", "en"): 368}
    zh_names = {row["url"]: row["sub_label"] for row in test("fmlama_zh")}
    en_gold = {row["url"]: row["obj_label"] for row in test("fmlama_en")}
    for (prompt, subject), pool in pools.items():
        split = test(f"fmlama_cs_{prompt}_{subject}")
        assert split.num_rows == 508 and dict(Counter(split["origin"])) == origins
        assert len(fmlama.candidate_pool(split)) == pool
        assert set(split["prompt_lang"]) == {prompt} and set(split["subject_lang"]) == {subject}
        assert split[0]["id"].endswith(f"|{prompt}_{subject}")
    en_zh = test("fmlama_cs_en_zh")
    # EN_zh: English template and gold objects, Chinese dish names
    assert all(
        zh_names[r["url"]] == r["sub_label"] and en_gold[r["url"]] == r["obj_label"] for r in en_zh
    )
    assert en_zh["row"] == sorted(en_zh["row"])  # en file order


def test_en14(mirror: Path) -> None:
    split = test("fmlama_en14")
    assert split.num_rows == 1549 and len(fmlama.candidate_pool(split)) == 873
    assert "Others" not in set(split["group"]) and len(set(split["group"])) == 14


def test_templates_config(mirror: Path) -> None:
    split = test("fmlama_templates")
    assert dict(Counter(split["language"])) == {
        "en": 10,
        "zh": 10,
        "ar": 10,
        "ko": 22,
        "ru": 10,
        "he": 25,
    }
    assert Counter(
        lang for lang, canon in zip(split["language"], split["canonical"], strict=True) if canon
    ) == dict.fromkeys(LANGS, 10)
    table = {(r["language"], r["relation"]): r for r in split}
    assert table["en", "hasParts_1"]["template"] == "The food [X] has the ingredients of [Y] ."
    assert (
        table["en", "country_1"]["template"] == "In [C], the food [X] has the ingredients of [Y] ."
    )
    assert table["ko", "hasParts_1"]["template"] == "음식 [X]에는 [Y]의 성분이 포함되어 있습니다. ."
    assert table["he", "hasParts_2"]["template"] == ".[2] הוא מאכל עם [1]"
    assert (table["ko", "hasParts_2-2"]["family"], table["ko", "hasParts_2-2"]["canonical"]) == (
        "hasParts",
        False,
    )


def test_corrected_templates(mirror: Path) -> None:
    table = {
        (r["language"], r["relation"]): r["template"]
        for r in test("fmlama_templates", corrected=True)
    }
    assert table["he", "hasParts_2"] == "[1] הוא מאכל עם [2]."
    assert table["he", "hasParts_4"] == "[2] הוא מרכיב במאכל [1]."
    assert table["he", "country_4"] == "[3], [2] הוא מרכיב במאכל [1]."
    assert table["ko", "hasParts_1"] == "음식 [X]에는 [Y]의 성분이 포함되어 있습니다."
    assert table["zh", "hasParts_5"] == "[X]是一道美味的食物，它需要使用[Y]制作而成。"
    assert table["en", "hasParts_1"] == "The food [X] has the ingredients of [Y] ."


def test_corrected_en_merges_case_variants_and_removes_self_items(mirror: Path) -> None:
    faithful, corrected = test("fmlama_en"), test("fmlama_en", corrected=True)
    assert corrected.num_rows == 2580
    pool = fmlama.candidate_pool(corrected)
    assert len({item.casefold() for item in pool}) == len(pool)
    before = Counter(item for labels in faithful["obj_label"] for item in labels)
    for a, b in (
        ("Cinnamon", "cinnamon"),
        ("Potash", "potash"),
        ("Stockfish", "stockfish"),
        ("Sweet potato", "sweet potato"),
    ):
        winner = max((a, b), key=lambda form: (before[form], form == form.lower()))
        assert winner in pool and ({a, b} - {winner}).isdisjoint(pool)
    names = dict(zip(corrected["sub_label"], corrected["obj_label"], strict=True))
    assert "bánh canh" not in names["bánh canh"] and "medianoche" not in names["medianoche"]
    assert "corrected: case-variant labels merged: 4" in corrected.info.description
    assert "corrected: self-item removed: 2" in corrected.info.description


def test_corrected_zh_drops_the_dish_left_without_gold(mirror: Path) -> None:
    corrected = test("fmlama_zh_corrected")
    assert corrected.num_rows == 814 and "玉米黑粉菌" not in corrected["sub_label"]
    assert "玉米黑粉菌" in test("fmlama_zh")["sub_label"]


def test_second_load_reuses_the_cache(
    mirror: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    original = fmlama.read_dishes

    def parse_once(path: str):
        calls.append(path)
        if len(calls) > 1:
            raise AssertionError(
                "sources parsed again although the datasets cache holds the config"
            )
        return original(path)

    monkeypatch.setattr(fmlama, "read_dishes", parse_once)
    first = test("fmlama_he", cache_dir=str(tmp_path))
    second = test("fmlama_he", cache_dir=str(tmp_path))
    assert len(calls) == 1 and first.to_list() == second.to_list()


def write(tmp_path: Path, *lines: str) -> str:
    path = tmp_path / "xx_dishes.jsonl"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def dish(**changes) -> str:
    record = {
        "url": "http://www.wikidata.org/entity/Q1",
        "origin": "Italy",
        "lang": "en",
        "sub_label": "pizza",
        "obj_label": "{'cheese, tomato'}",
    }
    return json.dumps({**record, **changes})


def test_read_dishes_parses_the_stringified_set(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        dish(),
        "",
        dish(url="http://www.wikidata.org/entity/Q2", obj_label=["a", "b"]),
        "",
    )
    dishes = fmlama.read_dishes(path)
    assert [d.obj_label for d in dishes] == [("cheese", "tomato"), ("a", "b")]
    assert [(d.qid, d.row) for d in dishes] == [("Q1", 0), ("Q2", 1)]


def test_candidate_pool_keeps_items_as_stored_but_not_blank_ones(tmp_path: Path) -> None:
    # "a, , b" splits into a blank item: no ingredient, and the engine could not score it (spec 2.3,
    # 4.2)
    path = write(tmp_path, dish(obj_label="{'tomato, , Cheese'}"), dish(obj_label="{'cheese, '}"))
    assert fmlama.candidate_pool({"obj_label": d.obj_label} for d in fmlama.read_dishes(path)) == [
        "Cheese",
        "cheese",
        "tomato",
    ]


@pytest.mark.parametrize(
    ("line", "match"),
    [
        (
            dish(obj_label="{'a', 'b'}"),
            r"xx_dishes\.jsonl:2: obj_label must be a set holding one comma-joined",
        ),
        (
            dish(obj_label="['a, b']"),
            r"xx_dishes\.jsonl:2: expected a Python set literal, got list",
        ),
        (dish(obj_label="__import__('os').getcwd()"), r"xx_dishes\.jsonl:2: not a Python literal"),
        (dish(obj_label="{'a, b'"), r"xx_dishes\.jsonl:2: not a Python literal \(SyntaxError\)"),
        (dish(url="Q1"), r"xx_dishes\.jsonl:2: url is not a Wikidata entity IRI"),
        (json.dumps({"url": "x"}), r"xx_dishes\.jsonl:2: missing field\(s\) \['origin', 'lang'"),
        ('{"url": ', r"xx_dishes\.jsonl:2: invalid JSON"),
    ],
)
def test_malformed_dish_names_file_and_line(tmp_path: Path, line: str, match: str) -> None:
    with pytest.raises(SourceFormatError, match=match):
        fmlama.read_dishes(write(tmp_path, dish(), line))


def test_empty_dish_file(tmp_path: Path) -> None:
    with pytest.raises(SourceFormatError, match=r"xx_dishes\.jsonl: the file holds no dishes"):
        fmlama.read_dishes(write(tmp_path, ""))


def fake_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CULTURE_PROBE_MIRROR", str(tmp_path))
    return (
        tmp_path / "raw.githubusercontent.com/lizhou21/FmLAMA-master" / fmlama.DATA_COMMIT / "data"
    )


def test_missing_mirror_file_names_the_expected_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = fake_mirror(tmp_path, monkeypatch)
    with pytest.raises(
        MissingDataError, match=rf"expected the file {data}/data_lang/he/he_dishes\.jsonl"
    ):
        load_benchmark("fmlama_he", cache_dir=str(tmp_path / "cache"))


def test_mirror_file_with_wrong_checksum(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = fake_mirror(tmp_path, monkeypatch)
    (data / "data_lang/he").mkdir(parents=True)
    (data / "data_lang/he/he_dishes.jsonl").write_text(dish() + "\n")
    with pytest.raises(
        SourceFormatError, match=r"he_dishes\.jsonl: checksum mismatch.*pinned 5ab257322abd"
    ):
        load_benchmark("fmlama_he", cache_dir=str(tmp_path / "cache"))


def local_repository(root: Path) -> Path:
    """A copy of the upstream repository's data folder holding two Hebrew dishes and the continent
    table.
    """
    data = root / "data"
    (data / "data_lang/he").mkdir(parents=True)
    lines = [
        dish(lang="he", sub_label="פיצה"),
        dish(
            url="http://www.wikidata.org/entity/Q2",
            origin="Peru",
            lang="he",
            sub_label="סביצ'ה",
            obj_label="{'דג'}",
        ),
    ]
    (data / "data_lang/he/he_dishes.jsonl").write_text(
        "".join(line + "\n" for line in lines), encoding="utf-8"
    )
    (data / "country_info.json").write_text(
        json.dumps({"Italy": "Europe", "Peru": "South America"})
    )
    return root


@pytest.mark.parametrize("folder", ["repository", "data folder"])
def test_data_dir_reads_a_local_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, folder: str
) -> None:
    # the mirror is never consulted when data_dir is given
    fake_mirror(tmp_path / "empty_mirror", monkeypatch)
    root = local_repository(tmp_path / "FmLAMA-master")
    data_dir = root if folder == "repository" else root / "data"
    split = test(
        "fmlama_he", data_dir=data_dir, verify_checksums=False, cache_dir=str(tmp_path / "cache")
    )
    assert [
        (r["qid"], r["sub_label"], r["obj_label"], r["group"], r["continent"]) for r in split
    ] == [
        ("Q1", "פיצה", ["cheese", "tomato"], "Italy", "Europe"),
        ("Q2", "סביצ'ה", ["דג"], "Others", "South America"),
    ]


def test_data_dir_files_are_checked_and_must_exist(tmp_path: Path) -> None:
    root = local_repository(tmp_path / "FmLAMA-master")
    match = r"he_dishes\.jsonl: checksum mismatch.*pinned 5ab257322abd.*pass verify_checksums=False"
    with pytest.raises(SourceFormatError, match=match):
        test("fmlama_he", data_dir=root, cache_dir=str(tmp_path / "cache"))
    match = rf"has no data/data_lang/ko/ko_dishes\.jsonl: expected the file {root}/data/data_lang/ko/ko_dishes\.jsonl"
    with pytest.raises(MissingDataError, match=match):
        test("fmlama_ko", data_dir=root, verify_checksums=False, cache_dir=str(tmp_path / "cache"))


@pytest.mark.slow
def test_full_crawl(mirror: Path) -> None:
    split = test("fmlama_full")
    assert split.num_rows == 33_693
    assert (len(set(split["url"])), len(set(split["lang"])), len(set(split["origin"]))) == (
        2818,
        253,
        127,
    )
    first = split[0]
    assert (first["sub_label"], first["lang"], first["obj_label"], first["materia"]) == (
        "Pizza Hawaii",
        "de",
        ["Prosciutto", "Tomatensauce", "Ananas"],
        [],
    )  # "{''}" is an empty list


def test_dish_table_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "Dishes.csv"
    path.write_text(
        "url,origin,name,lang,hasParts,materia,image\n"
        "http://www.wikidata.org/entity/Q1,Italy,pizza,en,\"{'a, b'}\",{''},\n"
        "http://www.wikidata.org/entity/Q2,Italy,pasta,en,\"{'a', 'b'}\",{''},\n",
        encoding="utf-8",
    )
    rows = fmlama.read_dish_table(str(path))
    assert next(rows)[1]["hasParts"] == ("a", "b")
    with pytest.raises(
        SourceFormatError, match=r"Dishes\.csv:3: hasParts must be a set holding one"
    ):
        next(rows)
    path.write_text("url,origin,name\n", encoding="utf-8")
    match = r"Dishes\.csv:1: missing column\(s\) \['lang', 'hasParts', 'materia'\]"
    with pytest.raises(SourceFormatError, match=match):
        list(fmlama.read_dish_table(str(path)))
