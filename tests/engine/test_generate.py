"""Greedy generation: argmax continuations, batched equals one by one, chat template applied."""

from __future__ import annotations

import copy

import pytest
import torch
from engine_reference import tiny

from culture_probe.engine import Scorer
from culture_probe.errors import InvalidValueError, UnsupportedModelError

PROMPTS = ["Egypt is located in", "日本の首都は", "한국의 수도는 서울", "عاصمة مصر"]


@torch.no_grad()
def _argmax_continuation(model, tok, text: str, n: int) -> str:
    """The reference: n steps of full forward + argmax, no cache."""
    ids = tok(text)["input_ids"]
    new = []
    for _ in range(n):
        new.append(int(model(torch.tensor([ids + new])).logits[0, -1].argmax()))
    return tok.decode(new, skip_special_tokens=True)


@pytest.mark.parametrize(
    "arch,kind", [("gpt2", "bpe"), ("llama", "metaspace"), ("bloom", "wordpiece")]
)
def test_generate_is_greedy_even_when_the_checkpoint_says_sample(arch, kind):
    model, tok = tiny(arch, kind)
    model.generation_config.do_sample, model.generation_config.top_k = True, 5
    try:
        got = Scorer(model, tok).generate(PROMPTS, max_new_tokens=5)
    finally:
        model.generation_config.do_sample, model.generation_config.top_k = False, None
    assert got == [_argmax_continuation(model, tok, p, 5) for p in PROMPTS]


@pytest.mark.parametrize(
    "arch,kind", [("gpt2", "bpe"), ("llama", "metaspace"), ("t5", "metaspace")]
)
def test_batched_left_padded_equals_one_by_one(arch, kind):
    scorer = Scorer(*tiny(arch, kind))
    assert scorer.generate(PROMPTS, max_new_tokens=4) == [
        scorer.generate([p], max_new_tokens=4)[0] for p in PROMPTS
    ]


def test_chat_uses_the_chat_template():
    model, tok = tiny("gpt2", "bpe")
    scorer = Scorer(model, tok)
    with pytest.raises(UnsupportedModelError, match="no chat template"):
        scorer.generate(PROMPTS[:1], max_new_tokens=3, chat=True)
    tok.chat_template = (
        "{% for m in messages %}<user> {{ m['content'] }} </user>{% endfor %}"
        "{% if add_generation_prompt %} assistant:{% endif %}"
    )
    try:
        rendered = [f"<user> {p} </user> assistant:" for p in PROMPTS]
        assert scorer.generate(PROMPTS, max_new_tokens=4, chat=True) == scorer.generate(
            rendered, max_new_tokens=4
        )
        assert scorer.generate(PROMPTS, max_new_tokens=4, chat=True) != scorer.generate(
            PROMPTS, max_new_tokens=4
        )
    finally:
        tok.chat_template = None


def test_masked_models_do_not_generate():
    with pytest.raises(UnsupportedModelError, match="causal or seq2seq"):
        Scorer(*tiny("bert", "wordpiece")).generate(PROMPTS, max_new_tokens=3)


def test_chat_takes_a_system_message():
    model, tok = tiny("gpt2", "bpe")
    scorer = Scorer(model, tok)
    with pytest.raises(InvalidValueError, match="needs chat=True"):
        scorer.generate(PROMPTS[:1], max_new_tokens=3, system="Be brief.")
    tok.chat_template = (
        "{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} "
        "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    try:
        rendered = [f"<system> Be brief. <user> {p} <assistant>" for p in PROMPTS]
        got = scorer.generate(PROMPTS, max_new_tokens=4, chat=True, system="Be brief.")
        assert got == [_argmax_continuation(model, tok, text, 4) for text in rendered]
        assert got != scorer.generate(PROMPTS, max_new_tokens=4, chat=True)
    finally:
        tok.chat_template = None


def test_prompts_run_in_batches_of_the_token_budget_with_the_same_texts(monkeypatch):
    model, tok = tiny("gpt2", "bpe")
    expected = Scorer(model, tok).generate(PROMPTS, max_new_tokens=4)
    sizes = []
    original = type(model).generate

    def counting(self, *args, **kwargs):
        sizes.append(len(kwargs["input_ids"]))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(model), "generate", counting)
    # Each prompt is at most ~12 tokens + 4 new ones: a 32-token budget holds one or two of them per
    # batch.
    assert Scorer(model, tok, batch_tokens=32).generate(PROMPTS, max_new_tokens=4) == expected
    assert len(sizes) > 1 and sum(sizes) == len(PROMPTS) and max(sizes) <= 2


def test_out_of_memory_in_generation_halves_the_automatic_budget(monkeypatch):
    from culture_probe.engine import generation

    model, tok = tiny("gpt2", "bpe")
    scorer = Scorer(model, tok)
    expected = scorer.generate(PROMPTS, max_new_tokens=4)
    original = generation._decode

    def flaky(scorer_, texts, *args, **kwargs):
        if len(texts) > 1:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return original(scorer_, texts, *args, **kwargs)

    monkeypatch.setattr(generation, "_decode", flaky)
    assert scorer.generate(PROMPTS, max_new_tokens=4) == expected
    # halved until one prompt per batch
    assert scorer.auto_budget is not None and scorer.auto_budget <= 32


def test_chat_prompts_get_the_tokenizers_special_tokens_only_when_asked(monkeypatch):
    # The rendered template already starts with BOS: by default it is not added again;
    # add_special_tokens=True reproduces pipelines that add it anyway (X-FaKT's upstream double
    # BOS), False drops it from plain prompts.
    model, base = tiny("llama", "metaspace")
    tok = copy.deepcopy(base)
    tok.chat_template = (
        "{{ bos_token }}{% for m in messages %}<user> {{ m['content'] }}{% endfor %}"
        "{% if add_generation_prompt %} assistant:{% endif %}"
    )
    bos, firsts = tok.bos_token_id, []
    original = type(model).generate

    def first_ids(self, *args, **kwargs):
        firsts.append(kwargs["input_ids"][0].tolist()[:2])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(model), "generate", first_ids)
    scorer = Scorer(model, tok)
    scorer.generate(["Egypt"], max_new_tokens=2, chat=True)
    scorer.generate(["Egypt"], max_new_tokens=2, chat=True, add_special_tokens=True)
    scorer.generate(["Egypt"], max_new_tokens=2)
    scorer.generate(["Egypt"], max_new_tokens=2, add_special_tokens=False)
    assert [ids.count(bos) for ids in firsts] == [1, 2, 1, 0]


@pytest.mark.parametrize("arch,kind", [("gpt2", "bpe"), ("llama", "metaspace")])
def test_generation_stops_at_a_stop_string_and_cuts_it_off(arch, kind, monkeypatch):
    model, tok = tiny(arch, kind)
    scorer = Scorer(model, tok)
    full = [_argmax_continuation(model, tok, p, 12) for p in PROMPTS]
    # two characters from inside one greedy text
    stop = next(t[3:5] for t in full if len(t.strip()) >= 6)
    steps: list[int] = []
    generate = type(model).generate
    monkeypatch.setattr(
        type(model),
        "generate",
        lambda self, *a, **k: (out := generate(self, *a, **k), steps.append(out.shape[1]))[0],
    )
    got = scorer.generate(PROMPTS, max_new_tokens=12, stop=[stop])
    # each cut at its first stop, the rest whole
    assert got == [t[: t.find(stop)] if stop in t else t for t in full]
    # every prompt stopped early: the batch ended before 12 new tokens
    if all(stop in t for t in full):
        assert steps[-1] < max(len(tok(p)["input_ids"]) for p in PROMPTS) + 12
    with pytest.raises(InvalidValueError, match="give a list of non-empty strings"):
        scorer.generate(PROMPTS, max_new_tokens=2, stop="\n")


def test_a_tokenizer_without_a_pad_token_generates_in_batches():
    model, shared = tiny("gpt2", "bpe")
    tok = copy.deepcopy(shared)  # the tiny tokenizer is shared between tests: change a copy
    tok.pad_token = None  # as GPT-2 and Llama checkpoints are released
    assert tok.pad_token_id is None
    scorer = Scorer(model, tok)
    assert scorer.generate(PROMPTS, max_new_tokens=4) == [
        _argmax_continuation(model, tok, p, 4) for p in PROMPTS
    ]


def test_a_prompt_longer_than_the_positions_is_cut_on_the_left_with_one_warning():
    from culture_probe.models import tiny_model

    _, tok = tiny("gpt2", "bpe")
    model = tiny_model("gpt2", tok, positions=32)
    long = " ".join(["Egypt is located in Africa ."] * 20)
    ids = tok(long)["input_ids"]
    assert len(ids) > 32
    with pytest.warns(UserWarning, match="cut on the left") as caught:
        got = Scorer(model, tok).generate([long, PROMPTS[0]], max_new_tokens=6)
    assert len(caught) == 1
    kept = ids[-(32 - 6) :]  # room for the six new tokens in the 32 positions
    with torch.no_grad():
        new = []
        for _ in range(6):
            new.append(int(model(torch.tensor([kept + new])).logits[0, -1].argmax()))
    assert got[0] == tok.decode(new, skip_special_tokens=True)
    assert got[1] == _argmax_continuation(model, tok, PROMPTS[0], 6)
