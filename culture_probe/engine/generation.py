"""Greedy generation: batched, left-padded, deterministic whatever the checkpoint's generation config says."""

from __future__ import annotations

import copy
from typing import Any

from culture_probe.engine.encoding import chat_prompt
from culture_probe.errors import UnsupportedModelError


def _greedy_config(model: Any, pad_id: int | None, max_new_tokens: int):
    # A checkpoint may ship do_sample=True or beams; probing needs the plain argmax continuation.
    config = copy.deepcopy(model.generation_config)
    config.do_sample, config.num_beams, config.max_new_tokens = False, 1, max_new_tokens
    config.temperature = config.top_p = config.top_k = None
    if pad_id is not None:
        config.pad_token_id = pad_id
    return config


def prompt_texts(scorer: Any, prompts: list[str], chat: bool, system: str | None) -> tuple[list[str], bool]:
    """The texts to encode and whether the tokenizer should add its special tokens (a chat template already
    contains them).
    """
    if not chat:
        if system is not None:
            raise ValueError(f"generate(system={system!r}) needs chat=True: a system message only exists in a chat "
                             "template.")
        return prompts, True
    name = scorer.identity.get("name_or_path", "")
    return [chat_prompt(scorer.tokenizer, p, system, name=name) for p in prompts], False


def generate(scorer: Any, prompts: list[str], max_new_tokens: int, *, chat: bool = False,
             system: str | None = None) -> list[str]:
    """Greedy continuations of `prompts` (new text only, special tokens dropped)."""
    import torch

    if scorer.kind == "masked":
        raise UnsupportedModelError("generate() needs a causal or seq2seq model; this one is a masked LM.")
    if not prompts:
        return []
    tok, model = scorer.tokenizer, scorer.model
    texts, specials = prompt_texts(scorer, prompts, chat, system)
    side = tok.padding_side
    tok.padding_side = "left"  # new tokens must follow each prompt directly
    try:
        batch = tok(texts, return_tensors="pt", padding=True, add_special_tokens=specials).to(scorer.device)
    finally:
        tok.padding_side = side
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    with torch.inference_mode():
        out = model.generate(**batch, generation_config=_greedy_config(model, pad_id, max_new_tokens))
    new = out if scorer.kind == "seq2seq" else out[:, batch["input_ids"].shape[1]:]
    return tok.batch_decode(new, skip_special_tokens=True)
