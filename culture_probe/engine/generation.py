"""Generation: batched, left-padded greedy decoding (deterministic whatever the checkpoint's generation config
says), or seeded temperature sampling that gives each prompt the same text whatever the batch or process count.
Prompts are shared out between processes like scoring requests.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from culture_probe.engine import parallel
from culture_probe.engine.encoding import chat_prompt
from culture_probe.errors import UnsupportedModelError


def _decoding_config(model: Any, pad_id: int | None, max_new_tokens: int, temperature: float | None):
    # A checkpoint may ship do_sample=True, beams or top-k/top-p: probing needs either the plain argmax
    # continuation or plain temperature sampling over the whole vocabulary. Unset values would be refilled from
    # the checkpoint and transformers' defaults (top_k=50), so the sampling filters are set to their no-op values.
    config = copy.deepcopy(model.generation_config)
    config.num_beams, config.max_new_tokens = 1, max_new_tokens
    if temperature is None:
        config.do_sample = False
        config.temperature = config.top_p = config.top_k = None
    else:
        config.do_sample, config.temperature = True, temperature
        config.top_k, config.top_p, config.typical_p, config.min_p = 0, 1.0, 1.0, None
        config.epsilon_cutoff = config.eta_cutoff = 0.0
    if pad_id is not None:
        config.pad_token_id = pad_id
    return config


def prompt_seed(seed: int, text: str) -> int:
    """The sampling seed of one prompt: a hash of the run's `seed` and the prompt's text, so a prompt draws the
    same sample whatever batch, position or process it lands in.
    """
    digest = hashlib.sha256(f"{seed}\0{text}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1  # torch seeds must fit a signed 64-bit integer


def _check_sampling(temperature: float | None, seed: int | None) -> None:
    if temperature is None:
        if seed is not None:
            raise ValueError(f"generate(seed={seed!r}) without temperature=: greedy decoding draws nothing at "
                             "random; pass temperature= to sample.")
        return
    if not temperature > 0:
        raise ValueError(f"generate(temperature={temperature!r}): the temperature must be > 0 (None: greedy).")
    if seed is None:
        raise ValueError(f"generate(temperature={temperature!r}) needs seed=: sampling without a seed could not "
                         "be repeated.")


def prompt_texts(scorer: Any, prompts: list[str], chat: bool, system: str | None,
                 add_special_tokens: bool | None = None) -> tuple[list[str], bool]:
    """The texts to encode and whether the tokenizer should add its special tokens: by default yes for plain
    prompts and no for chat prompts (the template already holds them); `add_special_tokens` overrides.
    """
    if not chat:
        if system is not None:
            raise ValueError(f"generate(system={system!r}) needs chat=True: a system message only exists in a chat "
                             "template.")
        return prompts, True if add_special_tokens is None else add_special_tokens
    name = scorer.identity.get("name_or_path", "")
    texts = [chat_prompt(scorer.tokenizer, p, system, name=name) for p in prompts]
    return texts, False if add_special_tokens is None else add_special_tokens


def generate(scorer: Any, prompts: list[str], max_new_tokens: int, *, chat: bool = False,
             system: str | None = None, temperature: float | None = None, seed: int | None = None,
             add_special_tokens: bool | None = None) -> list[str]:
    """Continuations of `prompts` (new text only, special tokens dropped): greedy by default, batched by token
    budget; with `temperature`, sampled one prompt at a time, each from a generator seeded by
    `prompt_seed(seed, text)`. With several processes, each generates its share and every process gets all texts.
    """
    _check_sampling(temperature, seed)
    if scorer.kind == "masked":
        raise UnsupportedModelError("generate() needs a causal or seq2seq model; this one is a masked LM.")
    if not prompts:
        return []
    texts, specials = prompt_texts(scorer, prompts, chat, system, add_special_tokens)
    rank, size = parallel.world()
    mine = range(rank, len(texts), size)
    if temperature is None:
        local = _greedy(scorer, {i: texts[i] for i in mine}, specials, max_new_tokens)
    else:
        local = {i: _decode(scorer, [texts[i]], specials, max_new_tokens, temperature,
                            prompt_seed(seed, texts[i]))[0] for i in mine}
    done = parallel.gather(local, size)
    return [done[i] for i in range(len(texts))]


def _greedy(scorer: Any, texts: dict[int, str], specials: bool, max_new_tokens: int) -> dict[int, str]:
    """Greedy continuations of `texts`, in batches of about the engine's token budget (prompt and new tokens)."""
    lengths = scorer.tokenizer(list(texts.values()), add_special_tokens=specials)["input_ids"] if texts else []
    costs = {i: len(ids) + max_new_tokens for i, ids in zip(texts, lengths, strict=True)}
    out: dict[int, str] = {}

    def run(batch: list[int], _budget: int) -> list[str]:
        return _decode(scorer, [texts[i] for i in batch], specials, max_new_tokens, None)

    for batch, decoded in scorer.batches(costs, run):
        out.update(zip(batch, decoded, strict=True))
    return out


def _decode(scorer: Any, texts: list[str], specials: bool, max_new_tokens: int, temperature: float | None,
            seed: int | None = None) -> list[str]:
    import torch

    tok, model = scorer.tokenizer, scorer.model
    side = tok.padding_side
    tok.padding_side = "left"  # new tokens must follow each prompt directly
    try:
        batch = tok(texts, return_tensors="pt", padding=True, add_special_tokens=specials).to(scorer.device)
    finally:
        tok.padding_side = side
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    config = _decoding_config(model, pad_id, max_new_tokens, temperature)
    device = torch.device(scorer.device)
    # Sampling draws from the global generator (transformers takes no generator argument): fork it so the
    # caller's random state is left untouched, and seed it for this prompt alone.
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), torch.inference_mode():
        if seed is not None:
            torch.manual_seed(seed)
        out = model.generate(**batch, generation_config=config)
    new = out if scorer.kind == "seq2seq" else out[:, batch["input_ids"].shape[1]:]
    return tok.batch_decode(new, skip_special_tokens=True)
