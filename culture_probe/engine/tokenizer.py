"""What the engine reads of a tokenizer: its Rust tokenizer (a private copy), the special tokens it
adds, the chat prompt, whether it marks the start of a text, where it splits words, the model's
input limit, and the separator rule.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from culture_probe.errors import UnsupportedModelError

if TYPE_CHECKING:
    from tokenizers import Encoding, Tokenizer
    from transformers import PreTrainedModel

# Scripts written without spaces between words: CJK ideographs and punctuation, kana, Thai, Lao,
# Khmer, Myanmar.
_NO_SPACE = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u2e80-\u2fdf\u3000-\u30ff\u3100-\u312f\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef\U00020000-\U0002fa1f]"
)


def separator(left: str, sep: str | None) -> str:
    """The text put between `left` and a candidate: `sep` if given, else one space unless none is
    needed.
    """
    if sep is not None:
        return sep
    if not left or left[-1].isspace() or _NO_SPACE.match(left[-1]):
        return ""
    return " "


def chat_prompt(tokenizer: Any, user: str, system: str | None = None, *, name: str = "") -> str:
    """The tokenizer's chat template rendered with an optional system turn, `user` as the user turn,
    and the generation prompt: the text an assistant reply follows (it carries the template's own
    special tokens).
    """
    if not getattr(tokenizer, "chat_template", None):
        model = name or getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        raise UnsupportedModelError(
            f"Chat prompting was asked for, but the tokenizer of {model!r} has no chat template. "
            "Use a chat (instruction-tuned) model, set tokenizer.chat_template to its Jinja template, or prompt "
            "without chat (chat=False)."
        )
    messages = [{"role": "system", "content": system}] if system is not None else []
    messages.append({"role": "user", "content": user})
    prompt: str = tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True
    )
    return prompt


def plain_backend(tokenizer: Any) -> Tokenizer | None:
    """A private copy of a fast tokenizer's Rust tokenizer, set up as `tokenizer(texts,
    add_special_tokens=False)` uses it (no padding, no truncation, special tokens in the text
    recognised unless the tokenizer splits them); a copy, so padding that other calls switch on in
    the shared one never reaches it. None for slow tokenizers and for those whose class encodes in
    Python on its way to the Rust one (CPM's word segmentation, code infilling).
    """
    from tokenizers import Tokenizer
    from transformers.tokenization_utils_base import PreTrainedTokenizerBase
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    cls = type(tokenizer)
    plain_class = (
        isinstance(tokenizer, TokenizersBackend)
        and cls._encode_plus is TokenizersBackend._encode_plus
        and cls.__call__ is PreTrainedTokenizerBase.__call__
    )
    backend = getattr(tokenizer, "backend_tokenizer", None) if plain_class else None
    if backend is None:
        return None

    plain = Tokenizer.from_str(backend.to_str())
    plain.no_padding()
    plain.no_truncation()
    plain.encode_special_tokens = bool(getattr(tokenizer, "split_special_tokens", False))
    return plain


# the start of a right-hand text that decides whether it splits from the text before it: its first
# two words
HEAD = re.compile(r"\s*\S+(\s+\S+)?")


def split_at(encoding: Encoding, at: int) -> bool:
    """Whether `encoding` (of a text) has a split at character `at`: no token across it, and no
    word.
    """
    left_words: set[int | None] = set()
    right_words: set[int | None] = set()
    for (start, stop), word in zip(encoding.offsets, encoding.word_ids, strict=True):
        if start < at < stop:
            return False
        (left_words if stop <= at else right_words).add(word)
    return not left_words & right_words


def marks_start(backend: Tokenizer | None) -> bool:
    """Whether the tokenizer tokenizes a word at the start of a text unlike the same word after
    another glued to it (a prefix space, a leading "▁" added to the text; a normalizer that changes
    a plain letter counts too).
    """
    if backend is None:
        return False
    text = backend.normalizer.normalize_str("a") if backend.normalizer is not None else "a"
    if text != "a":
        return True
    pre = backend.pre_tokenizer
    return pre is not None and pre.pre_tokenize_str("a")[0][0] != "a"


def special_affixes(tokenizer: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The special tokens the tokenizer adds before and after a sequence by default."""
    bare = tokenizer("a", add_special_tokens=False)["input_ids"]
    full = tokenizer("a")["input_ids"]
    for start in range(len(full) - len(bare) + 1):
        if full[start : start + len(bare)] == bare:
            return tuple(full[:start]), tuple(full[start + len(bare) :])
    return (), ()


def model_max_length(model: PreTrainedModel, tokenizer: Any) -> int | None:
    """The longest sequence the model takes: its position table, else the tokenizer's (sane)
    limit.
    """
    config = model.config
    for name in ("n_positions", "max_position_embeddings", "seq_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            # RoBERTa-style models offset positions by padding_idx + 1.
            offset = (
                config.pad_token_id + 1 if config.model_type in ("roberta", "xlm-roberta") else 0
            )
            return value - offset
    limit = getattr(tokenizer, "model_max_length", None)
    return limit if isinstance(limit, int) and limit < 10**7 else None
