"""Encode once: a candidate set is tokenized once per boundary (the context's last word) and shared
by every request that asks it, and what each request gets is what the slow per-candidate rule gives
(engine_reference), for every tokenizer family and the pre-tokenizers real checkpoints use (a prefix
space, Llama-3's split, SentencePiece's "first" scheme, no pre-tokenizer at all).
"""

from __future__ import annotations

import functools

import pytest
from engine_reference import WORDS, corpus, reference_tokens
from hypothesis import given, settings
from hypothesis import strategies as st

from culture_probe.engine import ScoreRequest
from culture_probe.engine.encoding import Encoder
from culture_probe.models import train_tokenizer

# Llama-3's pre-tokenizer split (tokenizer.json of meta-llama/Meta-Llama-3-8B)
LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


PUNCTUATION = ["", ",", ".", "(", "'s", "。", "、", "،"]


def _variant(name: str):
    """A tiny tokenizer whose normalizer or pre-tokenizer is set as one family of real checkpoints
    sets it.
    """
    from tokenizers import Regex, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    family = {"roberta_prefix": "bpe", "llama3": "bpe", "bert": "wordpiece"}.get(name, "metaspace")
    base = train_tokenizer(glued_corpus(), family, model_kind="causal", vocab_size=3000)
    backend = base.backend_tokenizer
    if name == "roberta_prefix":
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    elif name == "llama3":
        backend.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    elif name == "sentencepiece_first":
        backend.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first", split=True)
    elif name == "sentencepiece_unsplit":
        backend.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first", split=False)
    elif (
        name == "llama2"
    ):  # no pre-tokenizer: the normalizer marks the spaces, BPE runs over the whole text
        backend.normalizer = normalizers.Sequence(
            [normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]
        )
        backend.pre_tokenizer = None
    elif name == "xlmr":
        backend.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace(prepend_scheme="always")]
        )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )


@functools.cache
def glued_corpus() -> tuple[str, ...]:
    """The engine tests' corpus, and every word glued to punctuation and to every other word of its
    script, so that the vocabularies hold pieces across the places a candidate meets its context.
    """
    lines = list(corpus())
    for words in WORDS.values():
        for a in words:
            for b in words:
                lines += [
                    f"{a}{b} {a} {b}",
                    f" {a}{b}",
                    *(f"{p}{a}{b} {p}{b}" for p in PUNCTUATION),
                ]
    return tuple(lines)


VARIANTS = (
    "bert",
    "roberta_prefix",
    "llama3",
    "sentencepiece_first",
    "sentencepiece_unsplit",
    "llama2",
    "xlmr",
)
tokenizer = functools.cache(_variant)


@st.composite
def lefts(draw):
    """A context in one script whose last word may be glued to punctuation or to the word before
    it.
    """
    script = draw(st.sampled_from(list(WORDS)))
    words = draw(st.lists(st.sampled_from(WORDS[script]), min_size=1, max_size=5))
    glue = st.sampled_from([" ", " ", "  ", "", "\n", *PUNCTUATION[1:]])
    joiners = draw(st.lists(glue, min_size=len(words), max_size=len(words)))
    text = "".join(w + j for w, j in zip(words, joiners, strict=True)).rstrip()
    return text + draw(st.sampled_from(PUNCTUATION)) + draw(st.sampled_from(["", " ", "  "]))


candidate_sets = st.lists(
    st.builds(
        lambda a, b, glue: a + glue + b,
        st.sampled_from([w for ws in WORDS.values() for w in ws]),
        st.sampled_from(["", *[w for ws in WORDS.values() for w in ws]]),
        st.sampled_from(["", " ", "-"]),
    ),
    min_size=1,
    max_size=8,
    unique=True,
)


@pytest.mark.parametrize("name", VARIANTS)
@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    contexts=st.lists(lefts(), min_size=2, max_size=6),
    candidates=candidate_sets,
    sep=st.sampled_from([None, "", " "]),
    right=st.sampled_from(["", " .", ".", "。", " is here"]),
)
def test_shared_candidate_ids_are_what_each_request_would_get_alone(
    name, contexts, candidates, sep, right
):
    tok = tokenizer(name)
    encoder = Encoder(tok)
    requests = [ScoreRequest(left, tuple(candidates), right=right, sep=sep) for left in contexts]
    encoded = encoder.encode_all(requests, with_right=True)
    for request, enc in zip(requests, encoded, strict=True):
        for c, cand in enumerate(request.candidates):
            _, ids, right_ids, _ = reference_tokens(tok, request.left, cand, request.right, sep)
            assert enc.candidates[c] == tuple(ids), (request.left, cand)
            assert enc.rights[c] == tuple(right_ids), (request.left, cand)


def test_a_candidate_set_is_encoded_once_per_boundary(monkeypatch):
    tok = tokenizer("llama3")
    encoder = Encoder(tok)
    pool = ("rice", "olive oil", "garlic")
    dishes = ["pizza", "sushi", "kimchi", "Egypt"]
    requests = [ScoreRequest(f"The ingredients of {d} include", pool) for d in dishes]
    calls = []
    real = encoder._encode_candidates
    monkeypatch.setattr(encoder, "_encode_candidates", lambda *a: calls.append(a[1]) or real(*a))
    first = encoder.encode_all(requests, with_right=False)
    again = encoder.encode_all(
        [ScoreRequest("Where is it? It is in", pool), *requests[:1]], with_right=False
    )
    assert calls == [" include", " in"]  # one encoding per boundary, whatever the dish
    assert all(e.candidates is first[0].candidates for e in first + again[1:])


def test_a_context_glued_to_its_last_word_shares_nothing_it_should_not():
    # CJK without spaces: BPE merges the candidate into the context's last word, so that word is the
    # boundary, and requests whose last words differ get their own encodings
    tok = tokenizer("llama3")
    encoder = Encoder(tok)
    pool = ("米", "寿司")
    a, b = encoder.encode_all(
        [ScoreRequest("日本の首都は", pool, sep=""), ScoreRequest("中国は", pool, sep="")],
        with_right=False,
    )
    assert a.candidates is not b.candidates
    for left, enc in (("日本の首都は", a), ("中国は", b)):
        for c, cand in enumerate(pool):
            assert enc.candidates[c] == tuple(reference_tokens(tok, left, cand, "", "")[1])


def _handmade_bpe(add_prefix_space: bool):
    """A byte-level BPE whose merges make "ab" glued to "c" one token but " ab" and "c" two: so
    whether a candidate merges with the context's last word depends on what comes before that word.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    pieces = ["<s>", "a", "b", "c", "x", "Ġ", ",", "ab", "abc", "Ġc", "Ġx", "Ġab"]
    merges = [("a", "b"), ("Ġ", "ab"), ("ab", "c"), ("Ġ", "c"), ("Ġ", "x")]
    backend = Tokenizer(models.BPE({p: i for i, p in enumerate(pieces)}, merges))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<s>", eos_token="<s>", unk_token="<s>"
    )


@pytest.mark.parametrize("add_prefix_space", [True, False])
def test_a_last_word_glued_to_the_one_before_is_no_boundary_where_a_text_start_is_marked(
    add_prefix_space,
):
    # "x,ab" + "c": in the context "ab" and "c" merge, so the candidate is tokenized alone. With a
    # prefix space, "ab" alone would read " ab", which does not merge with "c": the boundary must
    # hold the glued words too.
    tok = _handmade_bpe(add_prefix_space)
    encoder = Encoder(tok)
    enc = encoder.encode(ScoreRequest("x,ab", ("c",), sep=""), with_right=False)
    assert enc.candidates[0] == tuple(reference_tokens(tok, "x,ab", "c", "", "")[1])
    core = encoder._backend.encode("x,ab", add_special_tokens=False)
    assert encoder.boundary("x,ab", core) == ("x,ab" if add_prefix_space else "ab")


def test_a_right_text_split_from_every_candidate_has_one_encoding_per_request():
    # FmLAMA's "[Y] is part of the food [X] .": the right text starts a new word after every
    # ingredient, so its ids are the same after each, tokenized once per request (and checked
    # against the per-candidate rule)
    tok = tokenizer("llama3")
    encoder = Encoder(tok)
    pool = ("rice", "olive oil", "garlic", "sushi")
    requests = [
        ScoreRequest("", pool, right=f" is part of the food {d} .") for d in ("pizza", "kimchi")
    ]
    for request, enc in zip(requests, encoder.encode_all(requests, with_right=True), strict=True):
        assert enc.right is not None
        for c, cand in enumerate(pool):
            assert enc.rights[c] == tuple(reference_tokens(tok, "", cand, request.right, None)[2])
    glued = encoder.encode(
        ScoreRequest("日本の首都は", ("米",), right="です", sep=""), with_right=True
    )
    assert glued.right is None  # no split before です: the candidate's own
    assert glued.rights[0] == tuple(reference_tokens(tok, "日本の首都は", "米", "です", "")[2])


def test_a_right_text_that_would_merge_into_a_longer_candidate_gets_a_trie_of_its_own():
    # "rice" then " is here" shares " is" with the candidate "rice is": one trie of this request's
    # own, as the reference scores it
    import numpy as np
    from engine_reference import reference_score, tiny

    from culture_probe.engine import Scorer

    model, tok = tiny("gpt2", "bpe")
    request = ScoreRequest("The food of Japan is", ("rice", "rice is", "sushi"), right=" is here")
    got = Scorer(model, tok).score([request], score_right=True, keep_tokens=True)[0]
    for c, cand in enumerate(request.candidates):
        want = reference_score(model, tok, request.left, cand, request.right, score_right=True)
        np.testing.assert_allclose(got.token_logprobs[c], want, atol=1e-4)
