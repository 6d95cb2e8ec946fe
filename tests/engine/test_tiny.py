"""Tokenizers trained on the fly are the same in every process (planted models and result-cache
identities depend on it), and the WordPiece vocabulary is the one BPE-with-"##" merging learns.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from itertools import pairwise
from pathlib import Path

from culture_probe.models.tiny import train_tokenizer

REPO = Path(__file__).resolve().parents[2]
CORPUS = [
    "the capital of france is paris",
    "the capital of peru is lima",
    "people in japan eat sushi and rice",
    "people in korea eat kimchi and rice",
    "the capital of japan is tokyo",
    "koshari is eaten in egypt",
    "ceviche is eaten in peru",
    "sushi rice sushi rice",
    "paris lima tokyo cairo seoul",
] * 3

SCRIPT = """
import json, sys
from culture_probe.models.tiny import train_tokenizer
texts = json.loads(sys.argv[1]) + ["مطبخ عربي تقليدي", "東京の料理は美味しい", "김치찌개 맛있다",
                                   "Crème brûlée, s'il vous plaît!"]
print(json.dumps({f"{kind}/{model_kind}": train_tokenizer(texts, kind, vocab_size=90, model_kind=model_kind)
                  .backend_tokenizer.to_str() for kind in ("bpe", "wordpiece", "metaspace")
                  for model_kind in ("causal", "masked", "seq2seq")}))
"""


def test_every_tokenizer_kind_is_the_same_in_processes_with_different_hash_seeds():
    """huggingface/tokenizers#1794: the library's WordPiece trainer gave a different vocabulary per
    process.
    """
    runs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, json.dumps(CORPUS)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=600,
        )
        runs.append(json.loads(done.stdout.splitlines()[-1]))
    assert len(runs[0]) == 9
    for name, serialised in runs[0].items():
        assert serialised == runs[1][name], f"{name} differs between processes"


def reference_wordpiece(words: list[str], specials: list[str], vocab_size: int) -> list[str]:
    """Slow BPE with a "##" continuation prefix: recount every pair after every merge; the most
    frequent pair wins, ties go to the smaller pair.
    """
    counts = Counter(words)
    split = {w: [w[0], *(f"##{c}" for c in w[1:])] for w in counts}
    vocab = specials + sorted({p for pieces in split.values() for p in pieces})
    while len(vocab) < vocab_size:
        pairs = Counter()
        for w, pieces in split.items():
            for pair in pairwise(pieces):
                pairs[pair] += counts[w]
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merged = best[0] + best[1].removeprefix("##")
        for w, pieces in split.items():
            out, i = [], 0
            while i < len(pieces):
                if tuple(pieces[i : i + 2]) == best:
                    out.append(merged)
                    i += 2
                else:
                    out.append(pieces[i])
                    i += 1
            split[w] = out
        if merged not in vocab:
            vocab.append(merged)
    return vocab


def test_wordpiece_vocabulary_equals_slow_reference_merges():
    tok = train_tokenizer(CORPUS, "wordpiece", vocab_size=80, model_kind="masked")
    got = sorted(tok.get_vocab(), key=tok.get_vocab().get)
    words = [w for text in CORPUS for w in text.split()]
    assert got == reference_wordpiece(words, ["[CLS]", "[PAD]", "[SEP]", "[UNK]", "[MASK]"], 80)


def test_wordpiece_tokenizes_like_bert():
    tok = train_tokenizer(CORPUS, "wordpiece", vocab_size=120, model_kind="masked")
    assert tok.tokenize("the capital") == ["the", "capital"]  # frequent words became whole tokens
    pieces = tok.tokenize("sushirice")
    assert len(pieces) > 1 and all(p.startswith("##") for p in pieces[1:])
    assert (
        tok.decode(tok("people in peru eat rice")["input_ids"], skip_special_tokens=True)
        == "people in peru eat rice"
    )
    assert tok.convert_ids_to_tokens(tok("rice")["input_ids"])[::2] == ["[CLS]", "[SEP]"]
    # "z" never seen: the whole word is unknown, as in BERT
    assert tok.tokenize("zebra") == ["[UNK]"]
