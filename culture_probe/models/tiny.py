"""Tiny models of real architectures, with random weights and tokenizers trained on the fly.

No weights can be downloaded here, so tests, demos and benchmarks build what they need: a tokenizer
of one of the three families real checkpoints use (byte-level BPE like GPT-2/RoBERTa, WordPiece like
BERT, SentencePiece-style Metaspace like Llama/T5/XLM-R) and a model of a real architecture whose
config agrees with it.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable
from itertools import pairwise
from pathlib import Path
from typing import Literal

from culture_probe.engine.types import ModelKind
from culture_probe.errors import UnknownNameError

TokenizerKind = Literal["bpe", "wordpiece", "metaspace"]
Arch = Literal["gpt2", "llama", "bloom", "bert", "xlm-roberta", "t5"]

N_SENTINELS = 10
_ANGLE = {"bos": "<s>", "eos": "</s>", "unk": "<unk>", "pad": "<pad>", "mask": "<mask>"}
_SQUARE = {"bos": "[CLS]", "eos": "[SEP]", "unk": "[UNK]", "pad": "[PAD]", "mask": "[MASK]"}
# Which roles each model kind needs, and the template that adds them around one sequence.
_ROLES: dict[str, tuple[tuple[str, ...], str | None]] = {
    "causal": (("bos", "eos", "unk", "pad"), "bos $A"),
    "masked": (("bos", "pad", "eos", "unk", "mask"), "bos $A eos"),
    "seq2seq": (("pad", "eos", "unk"), "$A eos"),
}
ARCH_KIND: dict[str, ModelKind] = {
    "gpt2": "causal",
    "llama": "causal",
    "bloom": "causal",
    "bert": "masked",
    "xlm-roberta": "masked",
    "t5": "seq2seq",
}


def _special_names(
    kind: TokenizerKind, model_kind: ModelKind
) -> tuple[dict[str, str], list[str], str | None]:
    """Role -> token, every special token in id order, and the post-processor template (None: add
    nothing).
    """
    roles, template = _ROLES[model_kind]
    # GPT-2: one <|endoftext|> for bos/eos/unk, nothing added
    if kind == "bpe" and model_kind == "causal":
        names = {
            "bos": "<|endoftext|>",
            "eos": "<|endoftext|>",
            "unk": "<|endoftext|>",
            "pad": "<pad>",
        }
        template = None
    else:
        table = _SQUARE if kind == "wordpiece" else _ANGLE
        names = {role: table[role] for role in roles}
    ordered = list(dict.fromkeys(names.values()))
    if model_kind == "seq2seq":
        ordered += [f"<extra_id_{i}>" for i in range(N_SENTINELS)]
    return names, ordered, template


def _backend(
    kind: TokenizerKind, names: dict[str, str], specials: list[str], vocab_size: int, causal: bool
):
    """An untrained `tokenizers.Tokenizer` of the family and its trainer (None for WordPiece).

    WordPiece vocabularies come from `_wordpiece_vocab`, not from the library's trainer.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    if kind == "bpe":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=specials,
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        )
    elif kind == "wordpiece":
        tok = Tokenizer(models.WordPiece(unk_token=names["unk"]))
        tok.normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=False)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        # `tokenizers`' WordPieceTrainer is not reproducible across processes: see _wordpiece_vocab
        trainer = None
    elif kind == "metaspace":
        # Llama's SentencePiece model is a BPE over "▁"-marked text (Unigram degenerates on tiny
        # corpora).
        tok = Tokenizer(models.BPE(unk_token=names["unk"]))
        tok.normalizer = normalizers.NFKC()
        metaspace = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
        # Llama keeps every space; T5/XLM-R split on whitespace first, so "a <extra_id_1>" has no
        # lone "▁".
        tok.pre_tokenizer = (
            metaspace
            if causal
            else pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), metaspace])
        )
        tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size, special_tokens=specials, show_progress=False
        )
    else:
        raise UnknownNameError("tokenizer kind", kind, ["bpe", "wordpiece", "metaspace"])
    return tok, trainer


def _wordpiece_vocab(tok, texts: list[str], specials: list[str], vocab_size: int) -> dict[str, int]:
    """WordPiece vocabulary learnt as `tokenizers`' WordPieceTrainer does (BPE merges with a "##"
    continuation prefix), but with ties broken by the pair itself rather than by hash order.

    The library's trainer gives "##" pieces ids in hash-map order, which breaks merge-count ties
    differently in every process (huggingface/tokenizers#1794): the same corpus gave different
    vocabularies, hence different planted models and result-cache identities. Merges: most frequent
    pair first, ties by the smaller pair.
    """
    counts: Counter[str] = Counter()
    for text in texts:
        normal = tok.normalizer.normalize_str(text)
        counts.update(word for word, _ in tok.pre_tokenizer.pre_tokenize_str(normal))
    words = [[w[0], *(f"##{c}" for c in w[1:])] for w in counts]
    freq = list(counts.values())
    alphabet = sorted({piece for word in words for piece in word})
    vocab = dict.fromkeys([*specials, *alphabet])  # ordered set
    pairs: Counter[tuple[str, str]] = Counter()
    where: dict[tuple[str, str], set[int]] = {}
    for i, word in enumerate(words):
        for pair in pairwise(word):
            pairs[pair] += freq[i]
            where.setdefault(pair, set()).add(i)
    heap = [(-n, pair) for pair, n in pairs.items()]
    heapq.heapify(heap)
    while len(vocab) < vocab_size and heap:
        negative, pair = heapq.heappop(heap)
        if pairs.get(pair, 0) != -negative or not negative:
            continue  # stale entry: the pair's count changed since it was pushed
        merged = pair[0] + pair[1].removeprefix("##")
        vocab[merged] = None
        for i in sorted(where.pop(pair, ())):
            changed = _merge_word(words, i, pair, merged, freq[i], pairs, where)
            for p in changed:
                heapq.heappush(heap, (-pairs[p], p))
        pairs.pop(pair, None)
    return {token: i for i, token in enumerate(vocab)}


def _merge_word(
    words: list[list[str]],
    i: int,
    pair: tuple[str, str],
    merged: str,
    count: int,
    pairs: Counter,
    where: dict[tuple[str, str], set[int]],
) -> set[tuple[str, str]]:
    """Replace `pair` by `merged` in word `i`, updating pair counts and the pair -> words index.

    Returns the pairs whose counts changed (they go back on the heap with their new counts).
    """
    old = words[i]
    new: list[str] = []
    j = 0
    while j < len(old):
        if j + 1 < len(old) and (old[j], old[j + 1]) == pair:
            new.append(merged)
            j += 2
        else:
            new.append(old[j])
            j += 1
    before, after = Counter(pairwise(old)), Counter(pairwise(new))
    for p, n in before.items():
        pairs[p] -= n * count
    for p, n in after.items():
        pairs[p] += n * count
        where.setdefault(p, set()).add(i)
    for p in before.keys() - after.keys():
        where.get(p, set()).discard(i)
    words[i] = new
    return {p for p in before.keys() | after.keys() if p != pair and before[p] != after[p]}


def train_tokenizer(
    texts: Iterable[str],
    kind: TokenizerKind,
    *,
    vocab_size: int = 600,
    model_kind: ModelKind = "causal",
):
    """Train a tokenizer of family `kind` on `texts`, with the special tokens a `model_kind` model
    needs.

    bpe+causal is GPT-2 style (nothing added around a sequence); other causal ones add BOS (Llama
    style); masked ones add BOS/EOS ([CLS]/[SEP] for WordPiece) and have a mask token; seq2seq ones
    append EOS and have T5 sentinels `<extra_id_0..9>`. Every tokenizer has a pad token. Returns a
    `PreTrainedTokenizerFast`, the same in every process for the same arguments.
    """
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    if model_kind not in _ROLES:
        raise UnknownNameError("model kind", model_kind, _ROLES)
    names, specials, template = _special_names(kind, model_kind)
    tok, trainer = _backend(kind, names, specials, vocab_size, model_kind == "causal")
    texts = list(texts)
    if trainer is None:
        from tokenizers import models

        tok.model = models.WordPiece(
            _wordpiece_vocab(tok, texts, specials, vocab_size), unk_token=names["unk"]
        )
    else:
        tok.train_from_iterator(texts, trainer=trainer)
    if template is not None:
        single = " ".join(names.get(part, part) for part in template.split())
        tok.post_processor = processors.TemplateProcessing(
            single=single,
            special_tokens=[(t, tok.token_to_id(t)) for t in specials if t in single.split()],
        )
    elif kind == "bpe":
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    extra: dict[str, str | list[str]] = {f"{role}_token": token for role, token in names.items()}
    if kind == "wordpiece" and model_kind == "masked":
        extra.update(cls_token=names["bos"], sep_token=names["eos"])
    sentinels = [t for t in specials if t.startswith("<extra_id_")]
    if sentinels:
        extra["extra_special_tokens"] = sentinels
    return PreTrainedTokenizerFast(tokenizer_object=tok, **extra)


def tiny_config(arch: Arch, tokenizer, layers: int, hidden: int, heads: int, positions: int = 512):
    """A transformers config of `arch` sized as asked (`positions`: the decoders' position count),
    with vocab and special ids taken from `tokenizer`.
    """
    import transformers as tf

    ids = {
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }
    vocab = len(tokenizer)
    if arch == "gpt2":
        return tf.GPT2Config(
            vocab_size=vocab,
            n_positions=positions,
            n_embd=hidden,
            n_layer=layers,
            n_head=heads,
            **ids,
        )
    if arch == "llama":
        return tf.LlamaConfig(
            vocab_size=vocab,
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=heads // 2,
            max_position_embeddings=positions,
            **ids,
        )
    if arch == "bloom":
        return tf.BloomConfig(
            vocab_size=vocab, hidden_size=hidden, n_layer=layers, n_head=heads, **ids
        )
    if arch in ("bert", "xlm-roberta"):
        cls = tf.BertConfig if arch == "bert" else tf.XLMRobertaConfig
        return cls(
            vocab_size=vocab,
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            intermediate_size=2 * hidden,
            max_position_embeddings=514,
            **ids,
        )
    if arch == "t5":
        return tf.T5Config(
            vocab_size=vocab,
            d_model=hidden,
            d_kv=hidden // heads,
            d_ff=2 * hidden,
            num_layers=layers,
            num_decoder_layers=layers,
            num_heads=heads,
            # PreTrainedConfig takes extra kwargs at runtime (strict(accept_kwargs=True)); its typed
            # __init__ does not
            decoder_start_token_id=tokenizer.pad_token_id,  # type: ignore[call-arg]
            **ids,
        )
    raise UnknownNameError("architecture", arch, ARCH_KIND)


def tiny_model(
    arch: Arch,
    tokenizer,
    *,
    layers: int = 2,
    hidden: int = 64,
    heads: int = 4,
    seed: int = 0,
    positions: int = 512,
):
    """A randomly initialised model of architecture `arch` (eval mode), consistent with
    `tokenizer`.
    """
    import torch
    import transformers as tf

    config = tiny_config(arch, tokenizer, layers, hidden, heads, positions)
    head = {
        "causal": tf.AutoModelForCausalLM,
        "masked": tf.AutoModelForMaskedLM,
        "seq2seq": tf.AutoModelForSeq2SeqLM,
    }[ARCH_KIND[arch]]
    torch.manual_seed(seed)
    model = head.from_config(config)
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model.eval()


def save_tiny(path: str | Path, arch: Arch, tokenizer, *, seed: int = 0, **size: int) -> Path:
    """Save a tiny model and its tokenizer to `path`, loadable offline by
    `Scorer.from_pretrained(path)`.
    """
    path = Path(path)
    tiny_model(arch, tokenizer, seed=seed, **size).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
