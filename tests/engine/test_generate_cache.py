"""In-process generations are cached as scores are: keyed by the model, the prompt as the model
reads it (chat template applied) and every generation option, sampled texts by their seed; a damaged
row is asked again.
"""

from __future__ import annotations

import copy
import sqlite3

import pytest
from engine_reference import tiny
from served_helpers import CHAT_TEMPLATE

from culture_probe.engine import Scorer
from culture_probe.engine.cache import CacheCorruptionWarning

PROMPTS = ["Egypt is located in", "日本の首都は", "한국의 수도는 서울", "Egypt is located in"]
GREEDY = {"max_new_tokens": 4}
SAMPLED = {"max_new_tokens": 4, "temperature": 1.0, "seed": 1}


def asked(monkeypatch, model) -> list[int]:
    """A list that gets the number of prompts of each `model.generate` call."""
    calls: list[int] = []
    generate = model.generate

    def counted(*args, **kwargs):
        calls.append(len(kwargs["input_ids"]))
        return generate(*args, **kwargs)

    monkeypatch.setattr(model, "generate", counted)
    return calls


@pytest.mark.parametrize("arch,kind", [("gpt2", "bpe"), ("t5", "metaspace")])
@pytest.mark.parametrize("options", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
def test_a_second_generate_asks_the_model_nothing_and_returns_the_same_texts(
    arch, kind, options, tmp_path, monkeypatch
):
    model, tok = tiny(arch, kind)
    calls = asked(monkeypatch, model)
    first = Scorer(model, tok, cache_dir=tmp_path).generate(PROMPTS, **options)
    assert sum(calls) == len(set(PROMPTS))  # a prompt given twice is generated once
    calls.clear()
    assert (
        Scorer(model, tok, cache_dir=tmp_path).generate(PROMPTS, **options) == first and calls == []
    )
    # no cache: asked again, the same texts
    assert Scorer(model, tok).generate(PROMPTS, **options) == first
    assert sum(calls) == len(set(PROMPTS))


@pytest.mark.parametrize(
    "changed",
    [
        {"max_new_tokens": 5},
        {"max_new_tokens": 4, "stop": ("a",)},
        {"max_new_tokens": 4, "temperature": 1.0, "seed": 2},
        {"max_new_tokens": 4, "temperature": 0.5, "seed": 1},
    ],
)
def test_a_different_option_or_seed_asks_again(changed, tmp_path, monkeypatch):
    model, tok = tiny("gpt2", "bpe")
    scorer = Scorer(model, tok, cache_dir=tmp_path)
    scorer.generate(PROMPTS, **GREEDY)
    scorer.generate(PROMPTS, **SAMPLED)
    calls = asked(monkeypatch, model)
    got = scorer.generate(PROMPTS, **changed)
    assert sum(calls) == len(set(PROMPTS))
    # not another option's text read back
    assert got == Scorer(model, tok).generate(PROMPTS, **changed)


def test_the_key_is_the_prompt_after_the_chat_template(tmp_path, monkeypatch):
    model, tok = tiny("gpt2", "bpe")
    # the template is no part of the tokenizer's hash, so the model's cache file is one
    tok = copy.deepcopy(tok)
    tok.chat_template = CHAT_TEMPLATE
    scorer = Scorer(model, tok, cache_dir=tmp_path)
    first = scorer.generate(PROMPTS, max_new_tokens=4, chat=True)
    calls = asked(monkeypatch, model)
    tok.chat_template = CHAT_TEMPLATE.replace("<assistant>", "<reply>")
    scorer.generate(PROMPTS, max_new_tokens=4, chat=True)
    assert sum(calls) == len(set(PROMPTS))
    calls.clear()
    tok.chat_template = CHAT_TEMPLATE
    assert scorer.generate(PROMPTS, max_new_tokens=4, chat=True) == first and calls == []


def test_a_damaged_text_row_is_reported_and_generated_again(tmp_path, monkeypatch):
    model, tok = tiny("gpt2", "bpe")
    scorer = Scorer(model, tok, cache_dir=tmp_path)
    first = scorer.generate(PROMPTS, **GREEDY)
    with sqlite3.connect(scorer.cache_path) as db:
        db.execute(
            "UPDATE texts SET text = 'tampered' WHERE prompt = (SELECT prompt FROM texts LIMIT 1)"
        )
    calls = asked(monkeypatch, model)
    with pytest.warns(CacheCorruptionWarning, match="damaged text row"):
        again = scorer.generate(PROMPTS, **GREEDY)
    assert again == first and calls == [1]
    calls.clear()
    # the recomputed row was stored
    assert scorer.generate(PROMPTS, **GREEDY) == first and calls == []
