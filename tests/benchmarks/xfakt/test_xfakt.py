"""X-FaKT: every count of spec xfakt.md 2/3/7 on the mirror, the corrected variant, and malformed
utils.py files.
"""

from __future__ import annotations

import hashlib
import pprint
import re
from collections import Counter
from pathlib import Path

import pytest
from xfakt_spec import GOLD_TABLE, TEMPLATES

from culture_probe.benchmarks.xfakt import data as xfakt
from culture_probe.data.registry import list_benchmarks, load_benchmark
from culture_probe.errors import SourceFormatError, UnknownNameError

CODES = ("en", "hi", "zh", "ru", "ar", "fr", "ne", "ja", "uk", "el", "tr", "sw", "th")
COUNTRIES = ("United States", "India", "China", "Russia", "Saudi Arabia", "France", "Nepal", "Japan", "Ukraine",
             "Greece", "Turkey", "Kenya", "Thailand")  # fmt: skip
# spec 2.3: entities per associated country, per category (in entity_idx order)
PER_COUNTRY = {
    "city": dict.fromkeys(COUNTRIES, 20) | {"Nepal": 19, "Greece": 19},
    "politician": dict.fromkeys(COUNTRIES, 10),
    "artist": dict.fromkeys(COUNTRIES, 10),
    "landmark": dict.fromkeys(COUNTRIES, 10),
    "festival": dict.fromkeys(COUNTRIES, 2) | {"Ukraine": 1},
    "athlete": dict.fromkeys(COUNTRIES, 10) | {"Turkey": 9},
}
BLOCKS = {"city": (0, 257), "politician": (258, 387), "artist": (388, 517), "landmark": (518, 647),
          "festival": (648, 672), "athlete": (673, 801)}  # fmt: skip
TEMPLATE_OF = {
    "city": "T1",
    "landmark": "T1",
    "politician": "T2",
    "artist": "T2",
    "athlete": "T2",
    "festival": "T3",
}
CORRECTED_GOLD = {
    ("zh", 10): "土耳其",
    ("ar", 10): "تركيا",
    ("ja", 10): "トルコ",
    ("th", 10): "ตุรกี",
    ("el", 12): "Ταϊλάνδη",
}
PEOPLE = {"United States": 7, "India": 10, "China": 10, "Russia": 10, "Saudi Arabia": 6, "France": 9, "Nepal": 8,
          "Japan": 8, "Ukraine": 10, "Greece": 8, "Turkey": 9, "Kenya": 7, "Thailand": 6}  # fmt: skip
UNTRANSLATED = {"fr": 516, "tr": 422, "sw": 664, "el": 236, "hi": 12, "ne": 9, "uk": 4}


def test(name: str, **kwargs):
    return load_benchmark(name, **kwargs)["test"]


test.__test__ = False  # a helper, not a test


def utils_path(mirror: Path) -> Path:
    return mirror / "raw.githubusercontent.com/kmrtanmay/X_FaKT" / xfakt.COMMIT / "src/utils.py"


def test_utils_holds_the_19_literals_and_the_judge_prompt(mirror: Path) -> None:
    values = xfakt.read_utils(utils_path(mirror))
    assert len(values) == 19
    prompt = values["PROMPT_OURS"]
    assert len(prompt) == 1412
    digest = "7e8a122eef9dba87372b73d50d686ece76017919eaa60ab75af398fc09dbeb22"
    assert hashlib.sha256(prompt.encode()).hexdigest() == digest
    assert values["SYSTEM_PROMPT_OURS"] == "You are a helpful assistant."


def test_factual_recall_reproduces_spec_counts(mirror: Path) -> None:
    split = test("xfakt_factual_recall")
    assert split.num_rows == 10426
    assert Counter(split["language"]) == dict.fromkeys(CODES, 802)
    english = split.filter(lambda row: row["language"] == "en")
    counts = Counter(zip(english["category"], english["country"], strict=True))
    assert counts == {(c, k): n for c, table in PER_COUNTRY.items() for k, n in table.items()}
    per_country = Counter(english["country"])
    assert {k for k, n in per_country.items() if n == 61} == {
        "Nepal",
        "Ukraine",
        "Greece",
        "Turkey",
    }
    assert set(per_country.values()) == {61, 62}
    for category, (first, last) in BLOCKS.items():
        indices = [
            i
            for i, c in zip(english["entity_idx"], english["category"], strict=True)
            if c == category
        ]
        assert (min(indices), max(indices), len(indices)) == (first, last, last - first + 1)
    assert set(zip(english["category"], english["template_id"], strict=True)) == set(
        TEMPLATE_OF.items()
    )
    assert english["id"][:2] == ["fr-000-en", "fr-001-en"]
    for code in CODES:  # associated rows: the entities of the language's own country
        rows = split.filter(lambda row, code=code: row["language"] == code and row["is_associated"])
        assert (
            set(rows["country_language"]) == {code}
            and rows.num_rows == per_country[COUNTRIES[CODES.index(code)]]
        )


def test_questions_and_gold_names_are_verbatim(mirror: Path) -> None:
    split = test("xfakt_factual_recall")
    seen = set()
    for row in split.select(range(0, split.num_rows, 7)):
        template = TEMPLATES[row["language"]][int(row["template_id"][1]) - 1]
        assert row["question"] == template.format(row["entity"])
        assert row["country_names"] == GOLD_TABLE[row["language"]]
        assert row["answer"] == GOLD_TABLE[row["language"]][COUNTRIES.index(row["country"])]
        assert row["answer_en"] == row["country"] and row["flags"] == []
        seen.add(row["language"])
    assert seen == set(CODES)
    untranslated = Counter(r for r, e, n in zip(split["language"], split["entity"], split["entity_en"], strict=True)
                           if e == n and r != "en")  # fmt: skip
    assert {code: untranslated[code] for code in UNTRANSLATED} == UNTRANSLATED


def test_corrected_factual_recall_fixes_gold_names_and_flags_rows(mirror: Path) -> None:
    faithful, split = test("xfakt_factual_recall"), test("xfakt_factual_recall", corrected=True)
    expected = {code: list(names) for code, names in GOLD_TABLE.items()}
    for (code, column), name in CORRECTED_GOLD.items():
        expected[code][column] = name
    for code in CODES:
        assert split[CODES.index(code) * 802]["country_names"] == expected[code]
    flags = Counter(f for row_flags in split["flags"] for f in row_flags)
    # 4 languages x 61 Turkey facts + 62 Thailand facts in Greek; 3 duplicated entities x 2 x 13; 2
    # x 13; 5 names
    assert flags == {"mistranslated_answer": 4 * 61 + 62, "duplicate_entity": 78, "questionable_gold": 26,
                     "mixed_script": 5, "mistranslated_entity": 2}  # fmt: skip
    rows = list(
        zip(split["language"], split["entity_en"], split["entity"], split["flags"], strict=True)
    )
    assert {n for _, n, _, f in rows if "duplicate_entity" in f} == {
        "Mount Everest",
        "Kazimir Malevich",
        "Jeddah",
    }
    assert {n for _, n, _, f in rows if "questionable_gold" in f} == {
        "Sergey Bubka",
        "Constantin Brâncuși",
    }
    assert {(lang, e) for lang, _, e, f in rows if "mixed_script" in f} == {
        ("ne", "Peterhof दरबार"), ("ne", "Meteora मठहरू"), ("ne", "Kutztown लोक महोत्सव"), ("hi", "Sainte-चैपल"),
        ("uk", "Gu Ailing (Ейлін Гу)"),
    }  # fmt: skip
    assert {(lang, n, e) for lang, n, e, f in rows if "mistranslated_entity" in f} == {
        ("zh", "Bursa", "布尔萨"),
        ("ne", "Janadriyah", "जनाद्रिया"),
    }
    changed = [
        i
        for i, (a, b) in enumerate(zip(faithful["answer"], split["answer"], strict=True))
        if a != b
    ]
    assert changed == [i for i, f in enumerate(split["flags"]) if "mistranslated_answer" in f]


def test_in_context_pairs_and_gold(mirror: Path) -> None:
    split = test("xfakt_in_context")
    assert split.num_rows == 2028 and Counter(split["language"]) == dict.fromkeys(CODES, 156)
    assert (
        split[0]["question"]
        == "David lives in India and Rahul lives in United States. Who lives in India?"
    )
    pattern = re.compile(r"(.+) lives in (.+) and (.+) lives in (.+)\. Who lives in (.+)\?")
    for row in split.filter(lambda r: r["language"] == "en"):
        first, c1, second, c2, asked = pattern.fullmatch(row["question"]).groups()
        assert (first, second) == (row["name_u"], row["name_v"])
        # each name placed in the other's country
        assert (c1, c2) == (row["country_v"], row["country_u"])
        assert asked == row["asked_country"] and row["answer"] == (first if asked == c1 else second)
    assert len(set(split["id"])) == 2028


def test_counter_factual_people_controls_and_order(mirror: Path) -> None:
    split = test("xfakt_counter_factual")
    assert split.num_rows == 18252 and Counter(split["language"]) == dict.fromkeys(CODES, 1404)
    english = split.filter(lambda r: r["language"] == "en")
    people = Counter(english.filter(lambda r: not r["is_counterfactual"])["true_country"])
    assert people == PEOPLE and sum(people.values()) == 108
    assert english["context_country"][:13] == list(COUNTRIES)
    assert [c for c in english["true_country"][::13]] == [
        c for c in COUNTRIES for _ in range(PEOPLE[c])
    ]
    assert english[0]["question"] == ("Instruction: Answer the question based on the given fact.\nFact: George "
                                      "Washington lives in the country of United States.\nQuestion: In which country "
                                      "does George Washington live?")  # fmt: skip
    assert all(row["answer"] == GOLD_TABLE[row["language"]][COUNTRIES.index(row["context_country"])]
               for row in split.select(range(0, 18252, 11)))  # fmt: skip


def test_corrected_tasks_b_and_c(mirror: Path) -> None:
    arabic = test("xfakt_counter_factual", languages=("ar",))
    fixed = test("xfakt_counter_factual", languages=("ar", "el"), corrected=True)
    person = arabic[0]["person"]
    assert arabic[0]["question"].count(person) == 1 and arabic[0]["question"].endswith("يعيش ؟")
    assert fixed[0]["question"].count(person) == 2 and fixed[0]["question"].endswith(
        f"يعيش {person}؟"
    )
    assert fixed[1404]["question"].endswith(f"Σε ποια χώρα ζει ο {fixed[1404]['person']};")
    flags = Counter(
        f for row_flags in test("xfakt_counter_factual", corrected=True)["flags"] for f in row_flags
    )
    assert flags == {"template_fixed": 2 * 1404, "mistranslated_answer": 4 * 108 + 108}
    task_b = test("xfakt_in_context", corrected=True)
    flags = Counter(f for row_flags in task_b["flags"] for f in row_flags)
    # pairs with Turkey (zh, ar, ja, th) or Thailand (el): 12 pairs x 2 rows each; Bahadur (zh): 12
    # x 2
    assert flags == {
        "mistranslated_country": 5 * 24,
        "mistranslated_entity": 24,
        "mistranslated_answer": 12,
    }
    assert "阁下" not in set(task_b["name_u"]) | set(task_b["name_v"])


def test_card_counts_match_the_flags(mirror: Path) -> None:
    card = {c.id: c.rows_affected for c in xfakt.INFO.corrections}
    assert card["xfakt-turkey"] + card["xfakt-siam"] == 306 + 120 + 540
    assert card["xfakt-turkey"] == 4 * 61 + 4 * 24 + 4 * 108
    assert card["xfakt-entity-names"] == 2 + 24
    assert (card["xfakt-ar-template"], card["xfakt-el-template"]) == (1404, 1404)
    assert (
        card["xfakt-duplicates"],
        card["xfakt-questionable-gold"],
        card["xfakt-mixed-script"],
    ) == (78, 26, 5)
    description = test("xfakt_counter_factual", corrected=True).info.description
    assert "template_fixed: rows: 2808" in description


def test_listing_and_language_filter(mirror: Path) -> None:
    entries = {e.name: e for e in list_benchmarks() if e.benchmark == "xfakt"}
    assert {n: e.rows for n, e in entries.items()} == {
        "xfakt_factual_recall": 10426, "xfakt_in_context": 2028, "xfakt_counter_factual": 18252,
        "xfakt_factual_recall_corrected": 10426, "xfakt_in_context_corrected": 2028,
        "xfakt_counter_factual_corrected": 18252,
    }  # fmt: skip
    assert all(e.languages == CODES for e in entries.values())
    subset = test("xfakt_factual_recall", languages=("sw", "en"))
    assert subset.num_rows == 2 * 802 and subset["language"][0] == "en"
    with pytest.raises(UnknownNameError, match=r"Unknown X-FaKT language code 'ch'"):
        test("xfakt_factual_recall", languages=("ch",))


# ---- synthetic utils.py files
# -----------------------------------------------------------------------------------

KEYS = [key for key, _, _ in xfakt.LANGUAGES]


def literals() -> dict:
    """Valid X-FaKT literals: one entity per category and language, one person per country."""
    values = {name: {k: [[f"{name[:3]}{a}-{q}" for q in range(13)]] for a, k in enumerate(KEYS)}
              for name, _, _ in xfakt.CATEGORIES}  # fmt: skip
    values |= {f"QUESTIONS_{i}": {k: f"Q{i} {k} {{}}?" for k in KEYS} for i in (1, 2, 3)}
    values["COUNTRIES"] = {q: {a: f"{a}@{q}" for a in KEYS} for q in KEYS}
    values |= {
        "SYSTEM_PROMPT_OURS": "sys",
        "PROMPT_OURS": "judge {answers} {predicted}",
        "PROMPT_ROBUST": "",
    }
    values["name_translation_dict"] = {k: [f"N{i}{k[:2]}" for i in range(13)] for k in KEYS}
    values["question_translation_dict"] = {k: "{} in {} and {} in {}. Who in {}?" for k in KEYS}
    values["sentence_translation_dict"] = {k: "{} in {}." for k in KEYS}
    values["only_question_translations"] = {k: "Who in {}?" for k in KEYS}
    values["famous_characters_translated"] = {
        c: {k: [f"P{c[:3]}-{k[:2]}"] for k in KEYS} for c in xfakt.COUNTRY_NAMES
    }
    values["incontext_factual_questions"] = {k: "Fact: {} in {}. Where is {}?" for k in KEYS}
    return values


def write_utils(root: Path, values: dict | None = None, extra: str = "") -> Path:
    values = literals() if values is None else values
    text = (
        "".join(f"{name} = {pprint.pformat(value, width=100)}\n" for name, value in values.items())
        + extra
    )
    path = root / "src/utils.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_synthetic_release_builds_every_task(tmp_path: Path) -> None:
    write_utils(tmp_path)
    kwargs = {"data_dir": str(tmp_path), "verify_checksums": False}
    recall = test("xfakt_factual_recall", **kwargs)
    assert recall.num_rows == 6 * 13 * 13
    hindi_question_on_a_chinese_city = recall[1 * 78 + 2]
    assert hindi_question_on_a_chinese_city == {
        "id": "fr-002-hi", "entity_idx": 2, "category": "city", "template_id": "T1", "country": "China",
        "country_language": "zh", "language": "hi", "is_associated": False, "entity": "cit2-1", "entity_en": "cit2-0",
        "question": "Q1 Hindi cit2-1?", "answer": "Chinese@Hindi", "answer_en": "Chinese@English",
        "country_names": [f"{a}@Hindi" for a in KEYS], "flags": [],
    }  # fmt: skip
    assert (
        recall[13 + 1]["category"] == "politician"
        and recall[13 + 1]["question"] == "Q2 English pol1-0?"
    )
    task_b = test("xfakt_in_context", **kwargs)
    # each name is placed in the other one's country; row 2 of a pair asks for u's country, where v
    # was placed
    assert (
        task_b[1]["question"]
        == "N0En in Hindi@English and N1En in English@English. Who in English@English?"
    )
    assert task_b[1]["answer"] == "N1En" and task_b[0]["answer"] == "N0En"
    task_c = test("xfakt_counter_factual", **kwargs)
    assert task_c.num_rows == 13 * 13 * 13
    assert task_c[14]["question"] == "Fact: PInd-En in Hindi@English. Where is PInd-En?"
    assert (
        task_c[14]["true_country"],
        task_c[14]["context_country"],
        task_c[14]["is_counterfactual"],
    ) == (
        "India",
        "India",
        False,
    )
    assert (
        task_c[15]["context_country"],
        task_c[15]["is_counterfactual"],
        task_c[15]["answer"],
    ) == (
        "China",
        True,
        "Chinese@English",
    )


def test_corrections_fix_only_the_released_wrong_values(tmp_path: Path) -> None:
    values = literals()
    kwargs = {"data_dir": str(tmp_path), "verify_checksums": False, "corrected": True}
    write_utils(tmp_path, values)
    clean = test("xfakt_factual_recall", languages=("zh",), **kwargs)
    assert not any(clean["flags"]) and clean["country_names"][0][10] == "Turkish@Chinese"
    values["COUNTRIES"]["Chinese"]["Turkish"] = "火鸡"
    values["incontext_factual_questions"]["Greek"] = (
        "Fact: {} in {}. Σε ποια χώρα ζει ο χρήστης {};"
    )
    write_utils(tmp_path / "released", values)
    kwargs["data_dir"] = str(tmp_path / "released")
    recall = test("xfakt_factual_recall", languages=("zh",), **kwargs)
    assert recall["country_names"][0][10] == "土耳其"
    assert [r["entity_idx"] for r in recall if r["flags"]] == [r["entity_idx"] for r in recall if r["country"] ==
                                                               "Turkey"]  # fmt: skip
    task_c = test("xfakt_counter_factual", languages=("el",), **kwargs)
    assert task_c[0]["question"] == "Fact: PUni-Gr in English@Greek. Σε ποια χώρα ζει ο PUni-Gr;"
    assert all(f == ["template_fixed"] for f in task_c["flags"])


def test_parsing_never_executes_the_file(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    write_utils(tmp_path, extra=f"PROMPT_ROBUST = open({str(marker)!r}, 'w').write('x')\n")
    with pytest.raises(SourceFormatError, match=r"utils\.py:\d+: 'PROMPT_ROBUST' assigned twice"):
        xfakt.read_utils(tmp_path / "src/utils.py")
    values = literals()
    del values["PROMPT_ROBUST"]
    path = write_utils(
        tmp_path, values, extra=f"PROMPT_ROBUST = open({str(marker)!r}, 'w').write('x')\n"
    )
    last = len(path.read_text(encoding="utf-8").splitlines())
    with pytest.raises(
        SourceFormatError, match=rf"utils\.py:{last}: the value of 'PROMPT_ROBUST' is not a Python"
    ):
        xfakt.read_utils(tmp_path / "src/utils.py")
    assert not marker.exists()


@pytest.mark.parametrize(("change", "match"), [
    (lambda v: v.pop("PROMPT_ROBUST"), r"utils\.py: missing assignments \['PROMPT_ROBUST'\]"),
    (lambda v: v.update(extra=1), r"utils\.py:\d+: 'extra' is not one of the 19 expected names"),
    (lambda v: v["COUNTRIES"].pop("Greek"), r"COUNTRIES must be a dict with the keys \['English'"),
    (lambda v: v["COUNTRIES"]["Thai"].pop("Greek"), r"COUNTRIES\['Thai'\] must be a dict with the keys"),
    (lambda v: v["artists"]["Hindi"][0].pop(), r"utils\.py:\d+: artists\['Hindi'\]\[0\] must be a list of 13"),
    (lambda v: v["festivals"].update(Thai=[]), r"festivals\['Thai'\] must be a non-empty list of entities"),
    (lambda v: v["QUESTIONS_2"].update(Greek="no slot"), r"QUESTIONS_2\['Greek'\] must be a str\.format template"),
    (lambda v: v["QUESTIONS_1"].update(Thai="{name}?"), r"QUESTIONS_1\['Thai'\] must be a str\.format template"),
    (lambda v: v["incontext_factual_questions"].update(Thai="{} {} {} {}"), r"incontext_factual_questions\['Thai'\]"),
    (lambda v: v["famous_characters_translated"]["Kenya"]["Thai"].append("x"),
     r"famous_characters_translated\['Kenya'\]\['Thai'\] must be a list of 1 non-empty strings"),
    (lambda v: v.update(PROMPT_OURS=3), r"PROMPT_OURS must be a string; found int"),
])  # fmt: skip
def test_malformed_literals_name_file_and_line(tmp_path: Path, change, match: str) -> None:
    values = literals()
    change(values)
    write_utils(tmp_path, values)
    with pytest.raises(SourceFormatError, match=match):
        xfakt.read_utils(tmp_path / "src/utils.py")


def test_errors_point_at_the_offending_line(tmp_path: Path) -> None:
    values = literals()
    values["landmarks"]["Nepali"][0][3] = ""
    path = write_utils(tmp_path, values)
    line = 1 + next(i for i, text in enumerate(path.read_text().splitlines()) if "lan6-0" in text)
    with pytest.raises(SourceFormatError, match=rf"utils\.py:{line}: landmarks\['Nepali'\]\[0\]"):
        xfakt.read_utils(path)


@pytest.mark.parametrize(("text", "match"), [
    ("", r"utils\.py: missing assignments \['cities'"),
    ("cities = {\n", r"utils\.py:1: not Python source"),
    ("import os\n", r"utils\.py:1: expected only `NAME = <literal>` statements, found a Import statement"),
    ("a, b = 1, 2\n", r"utils\.py:1: expected only `NAME = <literal>` statements, found a Assign"),
])  # fmt: skip
def test_files_that_are_not_the_expected_literals(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "utils.py"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SourceFormatError, match=match):
        xfakt.read_utils(path)


def test_local_copy_is_checked_against_the_pinned_digest(tmp_path: Path) -> None:
    write_utils(tmp_path)
    with pytest.raises(
        SourceFormatError, match=r"src/utils\.py: checksum mismatch.*verify_checksums=False"
    ):
        test("xfakt_in_context", data_dir=str(tmp_path))
