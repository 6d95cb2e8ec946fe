"""Fixtures of the benchmark and protocol tests (imported by tests/conftest.py): small releases in
the exact upstream file layout, written at test time and pinned as the release for the test (the
builders check every source against its pinned digest), so that the protocol tests run without the
mirror. Pass the folder as `data_dir`: the rows and the task's side data (resources) come from it.

- FmLAMA (`fmlama_release`): `data/templates/<lang>_templates.jsonl`, one {"relation", "template"}
  object per line, holding the canonical templates the protocol tests use. The strings are the
  paper's (spec fmlama.md 4.1); Korean keeps a variant relation that the protocol must not use (it
  is not canonical).
- X-FaKT (`xfakt_release`): `src/utils.py` of kmrtanmay/X_FaKT, the 19 literals with the shapes
  `read_utils` checks: the paper's questions and gold country names (spec xfakt.md 4.1), 80
  entities, one task-C person per country.
- MAPS (`maps_release`): `<lang>/test_proverbs.xlsx` and `<lang>/fs_proverbs.xlsx` for en and zh
  with the release's headers and sheet names; the rows are made up (MAPS is released on request
  only).
- CAMeL (`camel_release`): the ten `entities/<type>.xlsx` files and
  `prompts/camel-co/camelco-prompts-masked-lm.xlsx` of tareknaous/camel, a few entities per culture
  and a few prompts.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from xfakt_spec import GOLD_TABLE
from xfakt_spec import TEMPLATES as TEMPLATES_XFAKT

from culture_probe.benchmarks.camel import data as camel
from culture_probe.benchmarks.fmlama import data as fmlama
from culture_probe.benchmarks.maps import data as maps
from culture_probe.benchmarks.xfakt import data as xfakt

TEMPLATES = {
    "en": ["The food [X] has the ingredients of [Y] .", "[X] is a kind of food with [Y] .",
           "[X] is a type of food, comprising [Y] as its main constituents .", "[Y] is part of the food [X] .",
           "The food [X] has part of [Y] ."],
    "zh": ["美食[X]是以[Y]为主要原料制作的。", "美食[X]的制作需要[Y]作为主要成分。",
           "在制作美食[X]时，需要使用[Y]作为其中之一的成分。", "美食[X]中的主要成分之一是[Y]。",
           "[X]是一道美味的食物，它需要使用[Y]制作而成"],
    "he": ["במאכל [1] יש את המרכיבים של [2].", ".[2] הוא מאכל עם [1]", "מאכל [1] מכיל את [2] כמרכיביו העיקריים.",
           ".[1] הוא מרכיב במאכל [2]", "במאכל [1] יש משהו מתוך [2]."],
    "ko": ["음식 [X]에는 [Y]의 성분이 포함되어 있습니다. .", "[X]는 [Y]를 가진 음식의 일종입니다 .",
           "[X]는 [Y]를 주성분으로 하는 식품의 일종입니다.", "[Y]는 음식 [X]의 일부입니다.",
           "음식 [X]에는 [Y]의 일부가 포함되어 있습니다."],
    "ar": ["الطعام [X] يحتوي على مكونات [Y] .", "[X] هو نوع من الطعام مع [Y] .", "[Y] جزء من الطعام [X] .",
           "[Y] جزء من الطعام [X] .", "الطعام [X] يحتوي على جزء من [Y] ."],
    "ru": ["В пище [X] есть ингредиенты из [Y] .", "[X] это вид пищи с [Y] .", "[Y] это часть пищи [X] .",
           "[Y] это часть пищи [X] .", "Пища [X] содержит часть от [Y] ."],
}  # fmt: skip
COUNTRY_PREFIX = {
    "en": "In [C], ",
    "zh": "在[C]，",
    "he": "[3], ",
    "ko": "[C]에서 ",
    "ar": "في [C], ",
    "ru": "В [C], ",
}


def _lines(language: str) -> list[dict[str, str]]:
    prefix = COUNTRY_PREFIX[language]
    lines = [
        {"relation": f"hasParts_{i}", "template": t} for i, t in enumerate(TEMPLATES[language], 1)
    ]
    lines += [
        {
            "relation": f"country_{i}",
            "template": prefix + (t[0].lower() + t[1:] if language == "en" else t),
        }
        for i, t in enumerate(TEMPLATES[language], 1)
    ]
    if language == "ko":
        lines.append(
            {"relation": "hasParts_2-2", "template": "[X]는 [Y]을 가진 음식의 일종입니다 ."}
        )
    return lines


@pytest.fixture
def fmlama_release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder to pass as `data_dir`; its template files are pinned as the release for this
    test.
    """
    root = tmp_path / "fmlama"
    folder = root / "data" / "templates"
    folder.mkdir(parents=True)
    for language in TEMPLATES:
        path = folder / f"{language}_templates.jsonl"
        path.write_text(
            "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in _lines(language)),
            encoding="utf-8",
        )
        monkeypatch.setitem(
            fmlama.TEMPLATES_SHA256, language, hashlib.sha256(path.read_bytes()).hexdigest()
        )
    return root


# ---------------------------------------------------------------- X-FaKT: `src/utils.py` of
# kmrtanmay/X_FaKT

# The release's first entities (13 names each, bijection order); every other entity is untranslated
# (its English name in all 13 languages, as hundreds of released entities are).
XFAKT_TRANSLATED = {
    "New York": ["New York", "न्यूयॉर्क", "纽约", "Нью-Йорк", "نيويورك", "New York", "न्यूयोर्क", "ニューヨーク",
                 "Нью-Йорк", "Νέα Υόρκη", "New York", "New York", "นิวยอร์ค"],
    "George Washington": ["George Washington", "जॉर्ज वॉशिंगटन", "乔治·华盛顿", "Джордж Вашингтон", "جورج واشنطن",
                          "George Washington", "जर्ज वाशिंगटन", "ジョージ・ワシントン", "Джордж Вашингтон",
                          "Τζορτζ Ουάσιγκτον", "George Washington", "George Washington", "จอร์จ วอชิงตัน"],
}  # fmt: skip
# English names per associated country (bijection order): three United States cities, one of
# everything else.
XFAKT_ENTITIES = {
    "cities": [
        ["New York", "Los Angeles", "Chicago"],
        ["Mumbai"],
        ["Shanghai"],
        ["Moscow"],
        ["Riyadh"],
        ["Paris"],
        ["Kathmandu"],
        ["Tokyo"],
        ["Kyiv"],
        ["Athens"],
        ["Istanbul"],
        ["Nairobi"],
        ["Bangkok"],
    ],
    "politicians": [["George Washington"], *([f"politician {a}"] for a in range(1, 13))],
    "artists": [[f"artist {a}"] for a in range(13)],
    "landmarks": [["Statue of Liberty"], *([f"landmark {a}"] for a in range(1, 13))],
    "festivals": [["Kutztown Folk Festival"], *([f"festival {a}"] for a in range(1, 13))],
    "sports_persons": [[f"athlete {a}"] for a in range(13)],
}
# Task B names (English row of the release; the Chinese row keeps the released 阁下 that the
# corrected twin fixes).
XFAKT_NAMES = {
    "English": ["David", "Rahul", "Li Wei", "Sergey", "Abdulaziz", "Gabriel", "Bahadur", "Haruto", "Nykolai", "Maria",
                "Mustafa", "Djimon", "Somchai"],
    "Chinese": ["大卫", "拉胡尔", "李炜", "谢尔盖", "阿卜杜勒阿齐兹", "加布里埃尔", "阁下", "晴人", "尼古拉伊",
                "玛丽亚", "穆斯塔法", "吉蒙", "颂猜"],
}  # fmt: skip
XFAKT_PEOPLE = ["George Washington", "Ashoka the Great", "Qin Shi Huang", "Peter the Great", "Ibn Saud", "Louis XIV",
                "Prithvi Narayan Shah", "Emperor Meiji", "Yaroslav the Wise", "Alexander the Great",
                "Suleiman the Magnificent", "Mwana Mkisi", "Phutthayotfa Chulalok"]  # fmt: skip
# The judge's system prompt as released; the rubric keeps the released opening, the four scores and
# the slots (the released text, checked by its sha256 on the mirror, also holds a worked example).
XFAKT_SYSTEM_PROMPT = "You are a helpful assistant."
XFAKT_RUBRIC = (
    "\n[Instruction]\nPlease act as an impartial judge and evaluate the quality of the response provided by an AI "
    "assistant to the user question displayed below. The assistant should be penalized if it doesn't answer the "
    "question based on the given reference. For this evaluation, you should primarily consider the following "
    "criteria:\n\nScore 1: The Assistant's answer is in the same language as the reference and aligns with the "
    "reference.\nScore 2: The Assistant's answer is in English and aligns with the reference.\nScore 3: The "
    "Assistant's answer is in any other language and aligns with the reference.\nScore 4: The Assistant's answer is "
    "unrelated to the reference.\nOnly respond with a numerical score.\n\nAfter providing your explanation, you must "
    'rate the response on a scale of 1 to 4 by strictly following this format: "[[rating]]".\n\n'
    "[Reference]\n{answers}\n\n[Question]\n{question}\n\n[The Start of Assistant's Answer]\n{predicted}\n\n"
    "[The End of Assistant's Answer]\n"
)


def xfakt_literals() -> dict:
    """The 19 literals of a small X-FaKT release (80 entities), in the order and shapes `read_utils`
    checks.
    """
    keys = [key for key, _, _ in xfakt.LANGUAGES]
    gold = GOLD_TABLE
    values: dict = {
        name: {
            key: [
                XFAKT_TRANSLATED.get(english, [english] * 13) for english in XFAKT_ENTITIES[name][a]
            ]
            for a, key in enumerate(keys)
        }
        for name in XFAKT_ENTITIES
    }
    for i in range(3):
        values[f"QUESTIONS_{i + 1}"] = {
            key: TEMPLATES_XFAKT[code][i] for key, code, _ in xfakt.LANGUAGES
        }
    values["COUNTRIES"] = {
        key: dict(zip(keys, gold[code], strict=True)) for key, code, _ in xfakt.LANGUAGES
    }
    values |= {
        "SYSTEM_PROMPT_OURS": XFAKT_SYSTEM_PROMPT,
        "PROMPT_OURS": XFAKT_RUBRIC,
        "PROMPT_ROBUST": XFAKT_RUBRIC.replace("the given reference", "the given fact"),
    }
    values["name_translation_dict"] = {
        key: XFAKT_NAMES.get(key, XFAKT_NAMES["English"]) for key in keys
    }
    values["question_translation_dict"] = dict.fromkeys(
        keys, "{} lives in {} and {} lives in {}. Who lives in {}?"
    )
    values["sentence_translation_dict"] = dict.fromkeys(keys, "{} lives in {}.")
    values["only_question_translations"] = dict.fromkeys(keys, "Who lives in {}?")
    values["famous_characters_translated"] = {
        country: {key: [person] for key in keys}
        for country, person in zip(xfakt.COUNTRY_NAMES, XFAKT_PEOPLE, strict=True)
    }
    values["incontext_factual_questions"] = dict.fromkeys(
        keys,
        (
            "Instruction: Answer the question based on the given fact.\nFact: {} lives in the country of {}.\n"
            "Question: In which country does {} live?"
        ),
    )
    return values


@pytest.fixture(scope="session")
def _xfakt_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("xfakt")
    path = root / xfakt.UTILS
    path.parent.mkdir(parents=True)
    path.write_text(
        "".join(f"{name} = {value!r}\n" for name, value in xfakt_literals().items()),
        encoding="utf-8",
    )
    return root, hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def xfakt_release(_xfakt_files: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout of X_FaKT holding only `src/utils.py` (the 19 literals, see `xfakt_literals`),
    pinned as the release for the test: the folder to pass as `data_dir`.
    """
    root, sha256 = _xfakt_files
    monkeypatch.setattr(xfakt, "UTILS_SHA256", sha256)
    return root


# ---------------------------------------------------------------- xlsx files (MAPS, CAMeL)


def write_xlsx(path: Path, header: list, rows: list[list], sheet: str = "Sheet1") -> str:
    """One worksheet: the header row, then the rows; the file's sha256."""
    import openpyxl

    path.parent.mkdir(parents=True, exist_ok=True)
    book = openpyxl.Workbook()
    book.active.title = sheet
    for row in [header, *rows]:
        book.active.append(row)
    book.save(path)
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------- MAPS: `<lang>/<file>.xlsx` of the
# release

MAPS_HEADER = [
    "proverb",
    "conversation",
    "explanation",
    "answer1",
    "answer2",
    "is_figurative",
    "answer_key",
]
# Made-up rows (MAPS is released on request only): (proverb, conversation, explanation, answer1,
# answer2, is_figurative, answer_key), the release's columns and cell types (is_figurative 0.0/1.0,
# explanation may be empty).
MAPS_FEW_SHOT = [
    ("all good things come to an end", 'Person 1: "The holiday is over already." Person 2: "All good things come to '
     'an end."', "nothing good lasts forever", "The holiday could not last forever.", "The holiday could last "
     "forever.", 0.0, "a"),
    ("the early bird catches the worm", 'Person 1: "Why are you up at five?" Person 2: "The early bird catches the '
     'worm."', "who starts early succeeds", "Getting up late gets you the best.", "Getting up early gets you the "
     "best.", 1.0, "b"),
    ("practice makes perfect", 'Person 1: "My scales still sound bad." Person 2: "Keep going, practice makes '
     'perfect."', None, "Playing more will make them better.", "Playing more will not make them better.", 0.0, "a"),
    ("too many cooks spoil the broth", 'Person 1: "Ten of us wrote the report." Person 2: "Too many cooks spoil the '
     'broth."', "too many people ruin a task", "Ten writers made the report better.", "Ten writers made the report "
     "worse.", 1.0, "b"),
    ("honesty is the best policy", 'Person 1: "Should I tell her I broke it?" Person 2: "Honesty is the best '
     'policy."', "telling the truth pays", "Tell her the truth.", "Do not tell her the truth.", 0.0, "a"),
    ("a watched pot never boils", 'Person 1: "Is the parcel here yet?" Person 2: "A watched pot never boils."',
     "waiting makes time slow", "Checking will not make it come sooner.", "Checking will make it come sooner.",
     1.0, "a"),
]  # fmt: skip
MAPS_TEST = [
    ("look before you leap", 'Person 1: "Should I sign now?" Person 2: "Look before you leap."', "think first",
     "Think first.", "Do not think first.", 1.0, "a"),
    ("haste makes waste", 'Person 1: "I rushed the essay in an hour." Person 2: "Haste makes waste."', None,
     "Rushing made it better.", "Rushing made it worse.", 0.0, "b"),
    ("an apple a day keeps the doctor away", 'Person 1: "Why do you eat an apple every day?" Person 2: "An apple a '
     'day keeps the doctor away."', "apples keep you healthy", "Apples keep one healthy.", "Apples do not keep one "
     "healthy.", 0.0, "a"),
]  # fmt: skip
MAPS_ZH_TEST = [
    ("一寸光阴一寸金", "甲：我想明天再学。乙：一寸光阴一寸金。", "时间宝贵", "时间很宝贵。", "时间不宝贵。", 1.0, "a"),
    ("一石二鸟", "甲：我顺路买了菜又取了快递。乙：真是一石二鸟。", None, "一件事没办成。", "一举两得。", 1.0, "b"),
    ("熟能生巧", "甲：我的字还是写不好。乙：多练练，熟能生巧。", "练多了就会", "多练会写好。", "多练也写不好。",
     0.0, "a"),
]  # fmt: skip
MAPS_ZH_FEW_SHOT = [
    ("画蛇添足", "甲：我在写好的信后面又加了三页。乙：这是画蛇添足。", "多此一举", "加得好。", "加了反而不好。",
     1.0, "b"),
]  # fmt: skip


@pytest.fixture(scope="session")
def _maps_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("maps")
    # en/test_proverbs.xlsx has an extra, always empty `answer3` column in the release; the sheet is
    # named as the file
    with_answer3 = [*MAPS_HEADER[:5], "answer3", *MAPS_HEADER[5:]]
    digests = {
        "en/test_proverbs.xlsx": write_xlsx(
            root / "en" / "test_proverbs.xlsx",
            with_answer3,
            [[*r[:5], None, *r[5:]] for r in MAPS_TEST],
            sheet="test_proverbs",
        ),
        "en/fs_proverbs.xlsx": write_xlsx(
            root / "en" / "fs_proverbs.xlsx",
            MAPS_HEADER,
            [list(r) for r in MAPS_FEW_SHOT],
            sheet="fs_proverbs",
        ),
        "zh/test_proverbs.xlsx": write_xlsx(
            root / "zh" / "test_proverbs.xlsx",
            MAPS_HEADER,
            [list(r) for r in MAPS_ZH_TEST],
            sheet="test_proverbs",
        ),
        "zh/fs_proverbs.xlsx": write_xlsx(
            root / "zh" / "fs_proverbs.xlsx",
            MAPS_HEADER,
            [list(r) for r in MAPS_ZH_FEW_SHOT],
            sheet="fs_proverbs",
        ),
    }
    return root, digests


@pytest.fixture
def maps_release(_maps_files: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch) -> Path:
    """A MAPS folder holding the English and Chinese test and few-shot files (configs `maps_en`,
    `maps_zh`), pinned as the release for the test: the folder to pass as `data_dir`.
    """
    root, digests = _maps_files
    for relpath, sha256 in digests.items():
        monkeypatch.setitem(maps.SHA256, relpath, sha256)
    return root


# ---------------------------------------------------------------- CAMeL: entities and Co prompts of
# tareknaous/camel

# Entity rows per type: (Entity, Culture) or, for the types with a country, (Entity, Country,
# Culture). A few entities per culture; clothing_male has min(50, pool) = the whole pool (4 Arab, 3
# Western), one cell unstripped.
CAMEL_ENTITIES = {
    "names_female": [("فاطمة", "Arab"), ("مريم", "Arab"), ("نورة", "Arab"), ("جينيفر", "Western"),
                     ("ماري", "Western")],
    "names_male": [("محمد", "Arab"), ("خالد", "Arab"), ("جون", "Western"), ("ديفيد", "Western")],
    "food": [("كبسة", "Arab"), ("منسف", "Arab"), ("بيتزا", "Western"), ("ابل باي", None)],
    "clothing_male": [("غترة", "Arab"), ("ثوب", "Arab"), ("عقال", "Arab"), ("بشت ", "Arab"), ("بدلة", "Western"),
                      ("جينز", "Western"), ("كرافتة", "Western")],
    "clothing_female": [("عباية", "Arab"), ("فستان", "Western")],
    "locations": [("الرياض", "Saudi Arabia", "Arab"), ("القاهرة", "Egypt", "Arab"), ("باريس", "France", "Western")],
    "authors": [("نجيب محفوظ", "Egypt", "Arab"), ("شكسبير", "UK", "Western")],
    "beverage": [("قهوة عربية", "Arab"), ("شاي", "Arab"), ("بيرة", "Western")],
    "religious_places": [("مسجد", "Arab"), ("كنيسة", "Western")],
    "sports_clubs": [("الهلال", "Saudi Arabia", "Arab"), ("ريال مدريد", "Spain", "Western")],
}  # fmt: skip
# (Entity Type, Prompt, Sentiment) rows of the Co masked-LM file: the two names_female prompts the
# protocol tests quote (the second with the release's raw double space and trailing space) and two
# made-up clothing_male prompts, the second with the mask first (an empty causal prefix, as some
# released prompts have).
CAMEL_CO_PROMPTS = [
    ("Names-Female", "كان في الابتدائي معاي بنت عربية اسمها [MASK]", "neutral"),
    (
        "Names-Female",
        "كان في الابتدائي معاي  بنت عربية اسمها [MASK] و ما كنت احبها ابدا ",
        "negative",
    ),
    ("Clothing-Male", "لبس ابوي [MASK] في العيد", "positive"),
    ("Clothing-Male", "[MASK] ما يناسب الحفلة", "neutral"),
]


@pytest.fixture(scope="session")
def _camel_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], str]:
    root = tmp_path_factory.mktemp("camel")
    digests = {}
    for entity_type, rows in CAMEL_ENTITIES.items():
        header = (
            ["Entity", "Country", "Culture"]
            if entity_type in camel.TYPES_WITH_COUNTRY
            else ["Entity", "Culture"]
        )
        digests[entity_type] = write_xlsx(
            root / camel.entity_file(entity_type), header, [list(r) for r in rows]
        )
    co_masked = camel.PROMPT_FILES["co_masked"][0]
    prompts = write_xlsx(
        root / co_masked,
        ["Entity Type", "Prompt", "Sentiment"],
        [list(r) for r in CAMEL_CO_PROMPTS],
    )
    return root, digests, prompts


@pytest.fixture
def camel_release(
    _camel_files: tuple[Path, dict[str, str], str], monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A checkout of tareknaous/camel with the ten entity files and the Co masked-LM prompt file
    (configs `camel_entities` and `camel_co_prompts`), pinned as the release for the test: the
    folder to pass as `data_dir`.
    """
    root, digests, prompts = _camel_files
    for entity_type, sha256 in digests.items():
        monkeypatch.setitem(camel.ENTITY_SHA256, entity_type, sha256)
    monkeypatch.setitem(
        camel.PROMPT_FILES, "co_masked", (camel.PROMPT_FILES["co_masked"][0], prompts)
    )
    return root
