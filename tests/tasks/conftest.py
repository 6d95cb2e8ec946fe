"""Fixtures of the protocol tests.

An FmLAMA data folder in the exact upstream layout (`data/templates/<lang>_templates.jsonl`, one
{"relation", "template"} object per line) holding the canonical templates the protocol tests use, pinned as the
release for the test (the builder checks every source against its pinned digest), so that the protocol tests run
without the mirror. The strings are the paper's (spec fmlama.md 4.1); Korean keeps a variant relation that the
protocol must not use (it is not canonical)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from culture_probe.data import fmlama

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
COUNTRY_PREFIX = {"en": "In [C], ", "zh": "在[C]，", "he": "[3], ", "ko": "[C]에서 ", "ar": "في [C], ", "ru": "В [C], "}


def _lines(language: str) -> list[dict[str, str]]:
    prefix = COUNTRY_PREFIX[language]
    lines = [{"relation": f"hasParts_{i}", "template": t} for i, t in enumerate(TEMPLATES[language], 1)]
    lines += [{"relation": f"country_{i}", "template": prefix + (t[0].lower() + t[1:] if language == "en" else t)}
              for i, t in enumerate(TEMPLATES[language], 1)]
    if language == "ko":
        lines.append({"relation": "hasParts_2-2", "template": "[X]는 [Y]을 가진 음식의 일종입니다 ."})
    return lines


@pytest.fixture
def fmlama_release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder to pass as `data_dir`; its template files are pinned as the release for this test."""
    root = tmp_path / "fmlama"
    folder = root / "data" / "templates"
    folder.mkdir(parents=True)
    for language in TEMPLATES:
        path = folder / f"{language}_templates.jsonl"
        path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in _lines(language)),
                        encoding="utf-8")
        monkeypatch.setitem(fmlama.TEMPLATES_SHA256, language, hashlib.sha256(path.read_bytes()).hexdigest())
    return root
