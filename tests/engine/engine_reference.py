"""Tiny models and a slow, obviously correct reference scorer for the engine tests (a plain module,
not a conftest, so its name cannot clash with other test folders' conftest modules).

The reference runs one full forward per context+candidate (per subword for l2r), takes the full
log_softmax and reads the scored positions: no cache, no trie, no batching, no shortcuts.
"""

from __future__ import annotations

import functools
import random

import numpy as np
import torch

from culture_probe.models.tiny import ARCH_KIND, tiny_model, train_tokenizer

WORDS = {
    "latin": "Egypt Africa Asia Europe pizza cheese tomato rice sushi Japan Korea kimchi mosque capital located "
    "ingredients include the of is in Afric Africana olive oil garlic".split(),
    "arabic": "مصر أفريقيا آسيا الأرز الجبن تقع في عاصمة المكونات زيت الزيتون ثوم".split(),
    "cjk": [
        "日本",
        "東京",
        "首都",
        "寿司",
        "米",
        "中国",
        "北京",
        "饺子",
        "の",
        "は",
        "です",
        "料理",
    ],
    "korean": "한국 서울 김치 수도 재료 불고기 비빔밥 의 는 입니다".split(),
}
ALL_WORDS = [w for words in WORDS.values() for w in words]


@functools.cache
def corpus() -> tuple[str, ...]:
    rng = random.Random(0)
    lines = []
    for _ in range(400):
        script = rng.choice(list(WORDS))
        words = [rng.choice(WORDS[script]) for _ in range(rng.randint(3, 9))]
        joiner = "" if script == "cjk" else " "
        lines.append(joiner.join(words))
    return tuple(lines)


@functools.cache
def tiny(arch: str, kind: str, seed: int = 0):
    """A (model, tokenizer) pair, built once per test session."""
    tokenizer = train_tokenizer(corpus(), kind, model_kind=ARCH_KIND[arch], vocab_size=300)
    return tiny_model(arch, tokenizer, layers=2, hidden=32, heads=4, seed=seed), tokenizer


def _ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"] if text else []


def _affixes(tok) -> tuple[list[int], list[int]]:
    bare, full = _ids(tok, "a"), tok("a")["input_ids"]
    start = next(i for i in range(len(full)) if full[i : i + len(bare)] == bare)
    return full[:start], full[start + len(bare) :]


def _split(tok, known: list[int], head: str, tail: str) -> list[int]:
    joint = _ids(tok, head + tail)
    return (
        joint[len(known) :]
        if len(joint) > len(known) and joint[: len(known)] == known
        else _ids(tok, tail)
    )


def _sep(left: str, sep: str | None) -> str:
    if sep is not None:
        return sep
    no_space = bool(left) and (left[-1].isspace() or "\u3000" <= left[-1] <= "\u9fff")
    return "" if not left or no_space else " "


def reference_tokens(tok, left: str, cand: str, right: str, sep: str | None):
    """The DESIGN.md rule, written out: (context ids with specials, candidate ids, right ids,
    suffix).
    """
    core = left.rstrip()
    lead = left[len(core) :] + _sep(left, sep)
    prefix, suffix = _affixes(tok)
    ctx = _ids(tok, core)
    cand_ids = _split(tok, ctx, core, lead + cand) if core else _ids(tok, lead + cand)
    right_ids = _split(tok, ctx + cand_ids, core + lead + cand, right) if right else []
    full = prefix + ctx or [tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id]
    return full, cand_ids, right_ids, suffix


def masked_right_ids(tok, left: str, n_masks: int, right: str, sep: str | None) -> list[int]:
    """The right text's ids as the original masked probes get them: the whole sentence, with the
    mask token's text in the slot, tokenized at once (the mask is a special token, so the text after
    it starts afresh); the ids after the last mask.
    """
    if not right:
        return []
    sentence = _ids(
        tok,
        left.rstrip()
        + left[len(left.rstrip()) :]
        + _sep(left, sep)
        + tok.mask_token * n_masks
        + right,
    )
    last = max(i for i, t in enumerate(sentence) if t == tok.mask_token_id)
    return sentence[last + 1 :]


def _logsoftmax(logits) -> np.ndarray:
    return torch.log_softmax(logits.double(), dim=-1).numpy()


@torch.no_grad()
def reference_score(
    model, tok, left, cand, right="", sep=None, *, method="typed", score_right=False
):
    """Per-token log-probs of one candidate, the slow way."""
    kind = ARCH_KIND[model.config.model_type.replace("_", "-")]
    if kind == "seq2seq":
        src = tok(left + _sep(left, sep) + "<extra_id_0>" + right)["input_ids"]
        s0, s1 = tok.convert_tokens_to_ids(["<extra_id_0>", "<extra_id_1>"])
        target = _ids(tok, f"<extra_id_0> {cand} <extra_id_1>")
        ids = target[target.index(s0) + 1 : target.index(s1)]
        dec = [model.config.decoder_start_token_id, s0] + ids
        lp = _logsoftmax(
            model(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([dec])).logits[0]
        )
        return np.array([lp[1 + j, t] for j, t in enumerate(ids)])
    ctx, ids, right_ids, suffix = reference_tokens(tok, left, cand, right, sep)
    if kind == "causal":
        seq = ids + (right_ids if score_right else [])
        lp = _logsoftmax(model(torch.tensor([ctx + seq])).logits[0])
        return np.array([lp[len(ctx) - 1 + j, t] for j, t in enumerate(seq)])
    mask = tok.mask_token_id
    right_ids = masked_right_ids(tok, left, len(ids), right, sep)
    if method == "typed":
        inp = ctx + [mask] * len(ids) + right_ids + suffix
        lp = _logsoftmax(model(torch.tensor([inp])).logits[0])
        return np.array([lp[len(ctx) + j, t] for j, t in enumerate(ids)])
    out = []
    for i, t in enumerate(ids):
        inp = ctx + ids[:i] + [mask] + right_ids + suffix
        out.append(_logsoftmax(model(torch.tensor([inp])).logits[0])[len(ctx) + i, t])
    return np.array(out)


# A small Jinja chat template for the chat-scoring tests: BOS from the template, an optional system
# turn, the reply after "of " (markers built from the corpus's words, so they are real tokens, not
# unknowns).
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}capital {{ m['content'] }} . "
    "{% elif m['role'] == 'user' %}the {{ m['content'] }} . {% else %}of {{ m['content'] }}"
    "{{ eos_token }}{% endif %}{% endfor %}{% if add_generation_prompt %}of {% endif %}"
)


def _chat_ids(tok, messages, reply: str | None = None) -> list[int]:
    """Token ids of the chat prompt, or of the prompt continued by the start of an assistant
    `reply`, as the tokenizer's own apply_chat_template renders and tokenizes them.
    """
    if reply is None:
        out = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    else:
        out = tok.apply_chat_template(
            messages + [{"role": "assistant", "content": reply}],
            tokenize=True,
            continue_final_message=True,
        )
    return list(out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out)


@torch.no_grad()
def reference_chat_score(model, tok, user, cand, right="", *, system=None, score_right=False):
    """Per-token log-probs of `cand` as the start of the assistant reply to `user`, the slow way."""
    messages = ([{"role": "system", "content": system}] if system is not None else []) + [
        {"role": "user", "content": user}
    ]
    ctx = _chat_ids(tok, messages)
    joint = _chat_ids(tok, messages, cand)
    ids = (
        joint[len(ctx) :] if len(joint) > len(ctx) and joint[: len(ctx)] == ctx else _ids(tok, cand)
    )
    seq = ids
    if score_right and right:
        known = ctx + ids
        both = _chat_ids(tok, messages, cand + right)
        seq = ids + (
            both[len(known) :]
            if len(both) > len(known) and both[: len(known)] == known
            else _ids(tok, right)
        )
    lp = _logsoftmax(model(torch.tensor([ctx + seq])).logits[0])
    return np.array([lp[len(ctx) - 1 + j, t] for j, t in enumerate(seq)])
