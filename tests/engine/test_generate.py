"""Greedy generation: argmax continuations, batched equals one by one, chat template applied."""

from __future__ import annotations

import pytest
import torch
from engine_reference import tiny

from culture_probe.engine import Scorer
from culture_probe.errors import UnsupportedModelError

PROMPTS = ["Egypt is located in", "日本の首都は", "한국의 수도는 서울", "عاصمة مصر"]


@torch.no_grad()
def _argmax_continuation(model, tok, text: str, n: int) -> str:
    """The reference: n steps of full forward + argmax, no cache."""
    ids = tok(text)["input_ids"]
    new = []
    for _ in range(n):
        new.append(int(model(torch.tensor([ids + new])).logits[0, -1].argmax()))
    return tok.decode(new, skip_special_tokens=True)


@pytest.mark.parametrize("arch,kind", [("gpt2", "bpe"), ("llama", "metaspace"), ("bloom", "wordpiece")])
def test_generate_is_greedy_even_when_the_checkpoint_says_sample(arch, kind):
    model, tok = tiny(arch, kind)
    model.generation_config.do_sample, model.generation_config.top_k = True, 5
    try:
        got = Scorer(model, tok).generate(PROMPTS, max_new_tokens=5)
    finally:
        model.generation_config.do_sample, model.generation_config.top_k = False, None
    assert got == [_argmax_continuation(model, tok, p, 5) for p in PROMPTS]


@pytest.mark.parametrize("arch,kind", [("gpt2", "bpe"), ("llama", "metaspace"), ("t5", "metaspace")])
def test_batched_left_padded_equals_one_by_one(arch, kind):
    scorer = Scorer(*tiny(arch, kind))
    assert scorer.generate(PROMPTS, max_new_tokens=4) == [scorer.generate([p], 4)[0] for p in PROMPTS]


def test_chat_uses_the_chat_template():
    model, tok = tiny("gpt2", "bpe")
    scorer = Scorer(model, tok)
    with pytest.raises(ValueError, match="no chat template"):
        scorer.generate(PROMPTS[:1], 3, chat=True)
    tok.chat_template = ("{% for m in messages %}<user> {{ m['content'] }} </user>{% endfor %}"
                         "{% if add_generation_prompt %} assistant:{% endif %}")
    try:
        rendered = [f"<user> {p} </user> assistant:" for p in PROMPTS]
        assert scorer.generate(PROMPTS, 4, chat=True) == scorer.generate(rendered, 4)
        assert scorer.generate(PROMPTS, 4, chat=True) != scorer.generate(PROMPTS, 4)
    finally:
        tok.chat_template = None


def test_masked_models_do_not_generate():
    with pytest.raises(UnsupportedModelError, match="causal or seq2seq"):
        Scorer(*tiny("bert", "wordpiece")).generate(PROMPTS, 3)


def test_chat_takes_a_system_message():
    model, tok = tiny("gpt2", "bpe")
    scorer = Scorer(model, tok)
    with pytest.raises(ValueError, match="needs chat=True"):
        scorer.generate(PROMPTS[:1], 3, system="Be brief.")
    tok.chat_template = ("{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} "
                         "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}")
    try:
        rendered = [f"<system> Be brief. <user> {p} <assistant>" for p in PROMPTS]
        got = scorer.generate(PROMPTS, 4, chat=True, system="Be brief.")
        assert got == [_argmax_continuation(model, tok, text, 4) for text in rendered]
        assert got != scorer.generate(PROMPTS, 4, chat=True)
    finally:
        tok.chat_template = None
