"""Seeded temperature sampling: plain softmax(logits / T) draws, one generator per prompt, so a
prompt's text depends on the seed and the prompt only (not on the batch it came in), and no unseeded
sampling.
"""

from __future__ import annotations

import pytest
import torch
from engine_reference import tiny

from culture_probe.engine import Scorer
from culture_probe.engine.generation import prompt_seed
from culture_probe.errors import InvalidValueError

PROMPTS = [
    "Egypt is located in",
    "日本の首都は",
    "한국의 수도는 서울",
    "عاصمة مصر",
    "The food poutine has",
]
# a high temperature flattens a random tiny model's distribution: samples differ between seeds
HOT = 5.0


@torch.no_grad()
def _reference_sample(model, tok, text: str, n: int, temperature: float, seed: int) -> str:
    """n steps of full forward, softmax(logits / T), one multinomial draw from a generator seeded
    for this prompt, no cache, no filters; stops at EOS like generate.
    """
    generator = torch.Generator().manual_seed(prompt_seed(seed, text))
    ids, new = tok(text)["input_ids"], []
    for _ in range(n):
        logits = model(torch.tensor([ids + new])).logits[0, -1].float()
        token = int(
            torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=generator)
        )
        new.append(token)
        if token == tok.eos_token_id:
            break
    return tok.decode(new, skip_special_tokens=True)


@pytest.mark.parametrize("arch,kind", [("gpt2", "bpe"), ("llama", "metaspace")])
def test_sampling_is_plain_temperature_sampling_even_when_the_checkpoint_filters(arch, kind):
    model, tok = tiny(arch, kind)
    # would make sampling greedy
    model.generation_config.top_k, model.generation_config.top_p = 1, 0.1
    try:
        got = Scorer(model, tok).generate(PROMPTS, max_new_tokens=6, temperature=HOT, seed=3)
    finally:
        model.generation_config.top_k = model.generation_config.top_p = None
    assert got == [_reference_sample(model, tok, p, 6, HOT, 3) for p in PROMPTS]


@pytest.mark.parametrize("arch,kind", [("gpt2", "bpe"), ("t5", "metaspace")])
def test_same_seed_same_texts_whatever_the_batch(arch, kind):
    scorer = Scorer(*tiny(arch, kind))
    whole = scorer.generate(PROMPTS, max_new_tokens=6, temperature=HOT, seed=11)
    assert [
        scorer.generate([p], max_new_tokens=6, temperature=HOT, seed=11)[0] for p in PROMPTS
    ] == whole
    again = scorer.generate(PROMPTS[::-1] + PROMPTS[:2], max_new_tokens=6, temperature=HOT, seed=11)
    assert again == whole[::-1] + whole[:2]


def test_different_seeds_draw_different_texts_and_leave_the_global_generator_alone():
    scorer = Scorer(*tiny("gpt2", "bpe"))
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    first = scorer.generate(PROMPTS, max_new_tokens=8, temperature=HOT, seed=0)
    assert torch.rand(1) == expected_next
    assert scorer.generate(PROMPTS, max_new_tokens=8, temperature=HOT, seed=1) != first
    assert scorer.generate(PROMPTS, max_new_tokens=8, temperature=HOT, seed=0) == first
    assert first != scorer.generate(PROMPTS, max_new_tokens=8)  # greedy stays the default


def test_sampling_needs_a_seed_and_a_positive_temperature():
    scorer = Scorer(*tiny("gpt2", "bpe"))
    with pytest.raises(InvalidValueError, match="needs seed="):
        scorer.generate(PROMPTS, max_new_tokens=3, temperature=0.7)
    with pytest.raises(InvalidValueError, match="must be > 0"):
        scorer.generate(PROMPTS, max_new_tokens=3, temperature=0.0, seed=0)
    with pytest.raises(InvalidValueError, match="without temperature"):
        scorer.generate(PROMPTS, max_new_tokens=3, seed=0)
