"""CAMeL: every count of spec camel.md 2.3/3/7 on the mirror, the corrected variant, and malformed
sources.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import openpyxl
import pytest

from culture_probe.benchmarks.camel import data as camel
from culture_probe.data.registry import list_benchmarks, load_benchmark
from culture_probe.errors import CultureProbeError, MissingDataError, SourceFormatError

# spec 2.3: raw (Arab, Western, unlabelled) and sampling pool (Arab, Western) per type
RAW = {
    "authors": (207, 339, 0), "beverage": (54, 88, 0), "clothing_female": (37, 23, 0), "clothing_male": (36, 23, 0),
    "food": (326, 251, 1), "locations": (1061, 11435, 0), "names_female": (537, 424, 0), "names_male": (340, 232, 0),
    "religious_places": (1527, 901, 0), "sports_clubs": (1270, 1230, 0),
}  # fmt: skip
POOL = {
    "authors": (207, 339), "beverage": (52, 87), "clothing_female": (37, 23), "clothing_male": (35, 23),
    "food": (325, 238), "locations": (1054, 10739), "names_female": (537, 424), "names_male": (340, 232),
    "religious_places": (1517, 899), "sports_clubs": (1264, 1223),
}  # fmt: skip
# spec 2.3: prompts per Entity Type as (positive, negative, neutral, NA)
CO = {
    "Names-Female": (18, 15, 7, 0), "Names-Male": (13, 14, 10, 0), "Food": (9, 6, 8, 0), "Clothing-Male": (4, 7, 4, 0),
    "Clothing-Female": (4, 7, 4, 0), "Location": (15, 15, 7, 0), "Authors": (9, 9, 4, 0), "Beverage": (13, 7, 2, 0),
    "Religious Places": (0, 0, 0, 11), "Sports Clubs": (12, 13, 3, 0),
}  # fmt: skip
AG = {
    "Names-Female": (10, 17, 19, 0), "Names-Male": (12, 13, 24, 0), "Food": (22, 20, 23, 0),
    "Clothing-Male": (10, 6, 9, 0), "Clothing-Female": (10, 5, 8, 0), "Location": (8, 7, 10, 0),
    "Authors": (12, 13, 17, 0), "Beverage": (17, 14, 21, 0), "Religious Places": (0, 0, 0, 12),
    "Sports Clubs": (12, 12, 15, 0),
}  # fmt: skip
# spec 7: entity cells with leading/trailing spaces per type
UNSTRIPPED = {"authors": 3, "beverage": 4, "clothing_female": 1, "clothing_male": 1, "food": 3, "locations": 1,
              "names_male": 1, "religious_places": 46, "sports_clubs": 8}  # fmt: skip


def test(name: str, **kwargs):
    return load_benchmark(name, **kwargs)["test"]


test.__test__ = False  # a helper, not a test


def type_name(split, index: int) -> str:
    return split.features["entity_type"].int2str(index)


def test_entities_reproduce_raw_counts(mirror: Path) -> None:
    split = test("camel_entities")
    assert split.num_rows == 20342
    counts = Counter(
        (type_name(split, t), c)
        for t, c in zip(split["entity_type"], split["culture"], strict=True)
    )
    for entity_type, (arab, western, unlabelled) in RAW.items():
        assert (counts[entity_type, "Arab"], counts[entity_type, "Western"], counts[entity_type, None]) == (
            arab, western, unlabelled,
        ), entity_type  # fmt: skip
    assert split.features["entity_type"].names == list(camel.ENTITY_TYPES)
    with_country = {
        type_name(split, t)
        for t, c in zip(split["entity_type"], split["country"], strict=True)
        if c
    }
    assert with_country == {"authors", "locations", "sports_clubs"}
    assert split[0]["id"] == "names_female-00000" and split[0]["row"] == 0


def test_faithful_entities_keep_raw_cells(mirror: Path) -> None:
    split = test("camel_entities")
    unstripped = Counter(type_name(split, t) for t, e in zip(split["entity_type"], split["entity"], strict=True)
                         if e != e.strip())  # fmt: skip
    assert dict(unstripped) == UNSTRIPPED
    rows = zip(split["entity_type"], split["entity"], split["culture"], strict=True)
    assert [(type_name(split, t), c) for t, e, c in rows if e == "ابل باي"] == [("food", None)]


def test_corrected_entities_are_the_sampling_pools(mirror: Path) -> None:
    split = test("camel_entities", corrected=True)
    counts = Counter(
        (type_name(split, t), c)
        for t, c in zip(split["entity_type"], split["culture"], strict=True)
    )
    # the pools of spec 2.3, plus apple pie, which the corrected variant labels Western
    expected = {
        (t, c): n
        for t, pair in POOL.items()
        for c, n in zip(("Arab", "Western"), pair, strict=True)
    }
    expected["food", "Western"] += 1
    assert dict(counts) == expected
    assert split.num_rows == sum(expected.values()) == 19596
    entities = split["entity"]
    assert all(e == e.strip() for e in entities)
    locations = {
        e
        for t, e in zip(split["entity_type"], entities, strict=True)
        if type_name(split, t) == "locations"
    }
    assert not {"القاهرة", "الإسكندرية", "دورا"} & locations
    assert (
        len(set(zip(split["entity_type"], split["culture"], entities, strict=True)))
        == split.num_rows
    )


def test_card_counts_match_the_corrections_applied(mirror: Path) -> None:
    description = test("camel_entities", corrected=True).info.description
    counted = dict(re.findall(r"(camel-[a-z-]+): [^:;]+: (\d+)", description))
    card = {c.id: c.rows_affected for c in camel.INFO.corrections}
    assert {k: int(v) for k, v in counted.items()} == {k: card[k] for k in counted}
    assert set(counted) == {
        "camel-strip",
        "camel-dedupe",
        "camel-apple-pie",
        "camel-cross-labelled",
    }
    assert card["camel-strip"] == sum(UNSTRIPPED.values())
    assert card["camel-suspect-mask"] == 1


@pytest.mark.parametrize(("name", "table"), [("camel_co_prompts", CO), ("camel_ag_prompts", AG)])
def test_prompts_reproduce_type_and_sentiment_counts(mirror: Path, name: str, table: dict) -> None:
    split = test(name)
    counts = Counter(zip(split["entity_type_raw"], split["sentiment"], strict=True))
    for raw, (pos, neg, neu, na) in table.items():
        assert (counts[raw, "positive"], counts[raw, "negative"], counts[raw, "neutral"], counts[raw, None]) == (
            pos, neg, neu, na,
        ), raw  # fmt: skip
    assert split.num_rows == sum(map(sum, table.values()))
    assert split["id"] == list(range(split.num_rows))
    for raw, index in zip(split["entity_type_raw"], split["entity_type"], strict=True):
        assert type_name(split, index) == camel.PROMPT_TYPES[raw]


@pytest.mark.parametrize(("name", "start", "end", "spaced", "doubled"), [
    ("camel_co_prompts", 10, 32, 35, 55), ("camel_ag_prompts", 1, 71, 37, 71),
])  # fmt: skip
def test_prompts_keep_raw_text(
    mirror: Path, name: str, start: int, end: int, spaced: int, doubled: int
) -> None:
    prompts = test(name)["prompt_masked"]
    assert sum(p.strip().startswith("[MASK]") for p in prompts) == start
    assert sum(p.strip().endswith("[MASK]") for p in prompts) == end
    assert sum(p != p.strip() for p in prompts) == spaced
    assert sum("  " in p for p in prompts) == doubled


def test_co_causal_prefixes_are_derived_left_of_mask(mirror: Path) -> None:
    split = test("camel_co_prompts")
    assert set(split["causal_source"]) == {"derived_left_of_mask"}
    empty = [row["id"] for row in split if row["causal_prefix_empty"]]
    assert empty == [0, 1, 7, 8, 11, 20, 119, 120, 151, 152]
    assert [split[i]["entity_type_raw"] for i in empty] == ["Beverage"] * 6 + ["Location"] * 2 + [
        "Names-Male"
    ] * 2
    example = next(
        r for r in split if r["prompt_masked"] == "كان في الابتدائي معاي بنت عربية اسمها [MASK]"
    )
    assert example["prompt_causal"] == "كان في الابتدائي معاي بنت عربية اسمها"
    assert example["entity_type_raw"] == "Names-Female"


def test_ag_causal_prefixes_come_from_the_causal_file(mirror: Path) -> None:
    split = test("camel_ag_prompts")
    assert set(split["causal_source"]) == {"upstream_causal_file"}
    assert [row["id"] for row in split if row["causal_prefix_empty"]] == [166]
    assert split[166]["prompt_masked"].strip().startswith("[MASK] الهاء الشعوب")
    assert not any("[MASK]" in p for p in split["prompt_causal"])
    causal = camel.read_prompts(mirror / "raw.githubusercontent.com/tareknaous/camel" / camel.COMMIT /
                                camel.PROMPT_FILES["ag_causal"][0], with_sentiment=False)  # fmt: skip
    trailing = [i for i, row in enumerate(causal) if row.prompt.split("[MASK]")[1].strip()]
    assert trailing == [166, 202, 261, 310, 321]


def test_corrected_prompts_flag_only_ag_row_166(mirror: Path) -> None:
    ag, co = test("camel_ag_prompts", corrected=True), test("camel_co_prompts", corrected=True)
    assert [row["id"] for row in ag if row["suspect_mask_position"]] == [166]
    assert not any(co["suspect_mask_position"])
    assert ag["prompt_masked"] == test("camel_ag_prompts")["prompt_masked"]
    assert not any(test("camel_ag_prompts")["suspect_mask_position"])


def test_listing_promises_the_loaded_row_counts(mirror: Path) -> None:
    entries = {e.name: e for e in list_benchmarks() if e.benchmark == "camel"}
    assert len(entries) == 6
    for name, entry in entries.items():
        assert entry.languages == ("ar",)
        assert test(name).num_rows == entry.rows, name


# ---- small fixtures in the upstream layout
# -------------------------------------------------------------------


def write_xlsx(path: Path, header: list, rows: list[list]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    book = openpyxl.Workbook()
    sheet = book.active
    for row in [header, *rows]:
        sheet.append(row)
    book.save(path)
    return path


def make_repo(root: Path) -> Path:
    """A two-entity-per-type CAMeL copy with three prompts per file."""
    for entity_type in camel.ENTITY_TYPES:
        path = root / camel.entity_file(entity_type)
        if entity_type in camel.TYPES_WITH_COUNTRY:
            write_xlsx(
                path,
                ["Entity", "Country", "Culture"],
                [["عربي ", "مصر", "Arab"], ["غربي", "USA", "Western"]],
            )
        else:
            write_xlsx(path, ["Entity", "Culture"], [["عربي", "Arab"], ["غربي", "Western"]])
    prompts = [["Food", "اكلت [MASK] اليوم", "positive"], ["Location", "[MASK] مدينة جميلة", "NA"],
               ["Authors", "قرأت كتاب [MASK]", "neutral"]]  # fmt: skip
    write_xlsx(
        root / camel.PROMPT_FILES["co_masked"][0], ["Entity Type", "Prompt", "Sentiment"], prompts
    )
    write_xlsx(
        root / camel.PROMPT_FILES["ag_masked"][0],
        ["Entity Type", "Prompt", "Sentiment", None],
        prompts,
    )
    causal = [[t, p + " بعد", None] for t, p, _ in prompts]
    write_xlsx(root / camel.PROMPT_FILES["ag_causal"][0], ["Entity Type", "Prompt", None], causal)
    return root


def test_local_copy_builds_with_typed_rows(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "camel")
    entities = test("camel_entities", data_dir=str(repo), verify_checksums=False)
    assert entities.num_rows == 20
    assert entities[0] == {"id": "names_female-00000", "row": 0, "entity_type": 0, "entity": "عربي",
                           "culture": "Arab", "country": None}  # fmt: skip
    assert (
        test("camel_entities", data_dir=str(repo), verify_checksums=False, corrected=True)[
            "entity"
        ][10]
        == "عربي"
    )
    ag = test("camel_ag_prompts", data_dir=str(repo), verify_checksums=False)
    assert ag[0] == {
        "id": 0, "entity_type": camel.ENTITY_TYPES.index("food"), "entity_type_raw": "Food",
        "prompt_masked": "اكلت [MASK] اليوم", "prompt_causal": "اكلت", "causal_source": "upstream_causal_file",
        "causal_prefix_empty": False, "sentiment": "positive", "suspect_mask_position": False,
    }  # fmt: skip
    assert ag[1]["sentiment"] is None and ag[1]["causal_prefix_empty"]


def test_corrected_entities_apply_exactly_the_spec_fixes(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "camel")
    write_xlsx(repo / "entities/food.xlsx", ["Entity", "Culture"], [
        ["ابل باي", None], [" كبة", "Arab"], ["كبة", "Arab"], ["بيتزا", "Western"], ["دورا", "Arab"],
        ["دورا ", "Western"], ["بيتزا", "Western"], ["شاي", None],
    ])  # fmt: skip
    faithful = test("camel_entities", data_dir=str(repo), verify_checksums=False)
    food = faithful.filter(lambda r: r["id"].startswith("food-"))
    assert (
        food["entity"][:2] == ["ابل باي", " كبة"]
        and food["culture"][0] is None
        and food.num_rows == 8
    )
    corrected = test("camel_entities", data_dir=str(repo), verify_checksums=False, corrected=True)
    food = corrected.filter(lambda r: r["id"].startswith("food-"))
    # apple pie labelled Western; "كبة" stripped and, like "بيتزا", kept once; "دورا" carries both
    # labels: dropped; an unlabelled entity the spec does not name stays unlabelled
    assert list(zip(food["row"], food["entity"], food["culture"], strict=True)) == [
        (0, "ابل باي", "Western"),
        (1, "كبة", "Arab"),
        (3, "بيتزا", "Western"),
        (7, "شاي", None),
    ]


def test_second_load_reads_the_cache_not_the_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "camel")
    first = test("camel_co_prompts", data_dir=str(repo), verify_checksums=False)

    def no_parsing(*args, **kwargs):
        raise AssertionError("the sources were parsed again")

    monkeypatch.setattr(camel, "read_prompts", no_parsing)
    assert (
        test("camel_co_prompts", data_dir=str(repo), verify_checksums=False).to_list()
        == first.to_list()
    )


def test_co_causal_file_is_used_when_supplied(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "camel")
    good = write_xlsx(tmp_path / "co_causal.xlsx", ["Entity Type", "Prompt"],
                      [["Food", "اكلت امس [MASK]"], ["Location", "في [MASK]"], ["Authors", "قرأت [MASK]"]])  # fmt: skip
    co = test(
        "camel_co_prompts", data_dir=str(repo), verify_checksums=False, co_causal_file=str(good)
    )
    assert co["prompt_causal"] == ["اكلت امس", "في", "قرأت"]
    assert set(co["causal_source"]) == {"upstream_causal_file"}
    misaligned = write_xlsx(tmp_path / "bad.xlsx", ["Entity Type", "Prompt"],
                            [["Food", "a [MASK]"], ["Authors", "b [MASK]"], ["Location", "c [MASK]"]])  # fmt: skip
    with pytest.raises(
        SourceFormatError, match=r"bad\.xlsx:3: Entity Type 'Authors' differs from the masked"
    ):
        test(
            "camel_co_prompts",
            data_dir=str(repo),
            verify_checksums=False,
            co_causal_file=str(misaligned),
        )
    with pytest.raises(
        CultureProbeError, match=r"camel_ag_prompts does not use it\. Load camel_co_prompts"
    ):
        test(
            "camel_ag_prompts", data_dir=str(repo), verify_checksums=False, co_causal_file=str(good)
        )
    short = write_xlsx(tmp_path / "short.xlsx", ["Entity Type", "Prompt"], [["Food", "a [MASK]"]])
    with pytest.raises(
        SourceFormatError, match=r"short\.xlsx: the causal prompt file has 1 rows but the masked"
    ):
        test(
            "camel_co_prompts",
            data_dir=str(repo),
            verify_checksums=False,
            co_causal_file=str(short),
        )


@pytest.mark.parametrize(("relpath", "header", "rows", "match"), [
    ("entities/food.xlsx", ["Entity", "Cultur"], [["x", "Arab"]], r"food\.xlsx:1: missing column\(s\) \['Culture'\]"),
    ("entities/authors.xlsx", ["Entity", "Culture"], [["x", "Arab"]],
     r"authors\.xlsx:1: missing column\(s\) \['Country'\]"),
    ("entities/food.xlsx", ["Entity", "Culture"], [["x", "Arab"], ["y", "Arabic"]], r"food\.xlsx:3: Culture 'Arabic'"),
    ("entities/food.xlsx", ["Entity", "Culture"], [[None, "Arab"], ["y", "Arab"]], r"food\.xlsx:2: Entity cell None"),
    ("entities/food.xlsx", [], [], r"food\.xlsx: the sheet is empty"),
])  # fmt: skip
def test_malformed_entity_files_name_file_and_line(
    tmp_path: Path, relpath, header, rows, match
) -> None:
    repo = make_repo(tmp_path / "camel")
    write_xlsx(repo / relpath, header, rows)
    with pytest.raises(SourceFormatError, match=match):
        test("camel_entities", data_dir=str(repo), verify_checksums=False)


@pytest.mark.parametrize(("row", "match"), [
    (["Food", "no mask here", "positive"], r"masked-lm\.xlsx:3: Prompt 'no mask here' must hold exactly one \[MASK\]"),
    (["Food", "glued[MASK] x", "positive"], r"masked-lm\.xlsx:3: Prompt 'glued\[MASK\] x' must hold"),
    (["Food", "[MASK] and [MASK]", "positive"], r"masked-lm\.xlsx:3: Prompt .* exactly one"),
    (["Drinks", "a [MASK]", "positive"], r"masked-lm\.xlsx:3: Entity Type 'Drinks' is none of"),
    (["Food", "a [MASK]", "Positive"], r"masked-lm\.xlsx:3: Sentiment 'Positive' is none of"),
])  # fmt: skip
def test_malformed_prompt_rows_name_file_and_line(tmp_path: Path, row: list, match: str) -> None:
    repo = make_repo(tmp_path / "camel")
    write_xlsx(repo / camel.PROMPT_FILES["co_masked"][0], ["Entity Type", "Prompt", "Sentiment"],
               [["Food", "a [MASK]", "positive"], row])  # fmt: skip
    with pytest.raises(SourceFormatError, match=match):
        test("camel_co_prompts", data_dir=str(repo), verify_checksums=False)


def test_unreadable_or_misaligned_ag_files(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "camel")
    write_xlsx(repo / camel.PROMPT_FILES["ag_causal"][0], ["Entity Type", "Prompt"],
               [["Food", "a [MASK]"], ["Food", "b [MASK]"], ["Authors", "c [MASK]"]])  # fmt: skip
    with pytest.raises(
        SourceFormatError, match=r"causal-lms\.xlsx:3: Entity Type 'Food' differs .* 'Location'"
    ):
        test("camel_ag_prompts", data_dir=str(repo), verify_checksums=False)
    (repo / camel.PROMPT_FILES["ag_causal"][0]).write_bytes(b"")
    with pytest.raises(
        SourceFormatError, match=r"causal-lms\.xlsx: not a readable \.xlsx workbook"
    ):
        test("camel_ag_prompts", data_dir=str(repo), verify_checksums=False)


def test_local_copy_is_checked_against_the_pinned_digest(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "camel")
    with pytest.raises(
        SourceFormatError, match=r"names-female\.xlsx: checksum mismatch.*verify_checksums=False"
    ):
        test("camel_entities", data_dir=str(repo))
    (repo / "entities/food.xlsx").unlink()
    with pytest.raises(
        MissingDataError, match=r"has no entities/food\.xlsx: expected the file .*food\.xlsx"
    ):
        test("camel_entities", data_dir=str(repo), verify_checksums=False)


def test_missing_mirror_file_names_the_expected_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CULTURE_PROBE_MIRROR", str(tmp_path / "empty_mirror"))
    with pytest.raises(
        MissingDataError, match=r"empty_mirror/raw\.githubusercontent\.com/tareknaous/camel/"
    ):
        # a fresh cache: the shared one has it built
        test("camel_co_prompts", cache_dir=str(tmp_path / "cache"))
