"""Chat scoring: a candidate scored as the start of the assistant reply to a chat-templated prompt
equals the slow reference (which builds the prompt with the tokenizer's own apply_chat_template),
keeps one BOS, and leaves the cache keys of plain requests as they were.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from engine_reference import CHAT_TEMPLATE, WORDS, reference_chat_score, tiny
from hypothesis import given, settings
from hypothesis import strategies as st

from culture_probe.engine import Scorer, ScoreRequest
from culture_probe.errors import InvalidValueError, UnsupportedModelError

CAUSAL = [("gpt2", "bpe"), ("llama", "metaspace"), ("bloom", "wordpiece")]


class chat_template:
    """Sets a chat template on a shared tiny tokenizer for the duration of a block."""

    def __init__(self, tok, template: str = CHAT_TEMPLATE):
        self.tok, self.template = tok, template

    def __enter__(self):
        self.tok.chat_template = self.template
        return self.tok

    def __exit__(self, *exc):
        self.tok.chat_template = None


@st.composite
def chat_requests(draw):
    """A user turn in one script, an optional system turn, candidates sharing prefixes, an optional
    right side.
    """
    script = draw(st.sampled_from(list(WORDS)))
    joiner = "" if script == "cjk" else " "
    user = joiner.join(draw(st.lists(st.sampled_from(WORDS[script]), min_size=1, max_size=5)))
    system = draw(st.one_of(st.none(), st.sampled_from(["Be brief", "Egypt of Asia", "日本 首都"])))
    stems = draw(st.lists(st.sampled_from(WORDS[script]), min_size=1, max_size=3))
    cands = set(stems) | {" ".join(stems)} | {s[:1] for s in stems}
    right = draw(st.sampled_from(["", ".", " is here"]))
    return ScoreRequest(user, sorted(cands), right=right, chat=True, system=system)


def _check(arch, kind, request, score_right=False):
    model, tok = tiny(arch, kind)
    with chat_template(tok):
        got = Scorer(model, tok, batch_tokens=64).score(
            [request], keep_tokens=True, score_right=score_right
        )[0]
        for i, cand in enumerate(request.candidates):
            want = reference_chat_score(
                model,
                tok,
                request.left,
                cand,
                request.right,
                system=request.system,
                score_right=score_right,
            )
            assert got.n_tokens[i] == len(want)
            np.testing.assert_allclose(got.token_logprobs[i], want, atol=1e-4, err_msg=cand)


@pytest.mark.parametrize("arch,kind", CAUSAL)
@settings(max_examples=12, deadline=None, derandomize=True)
@given(request=chat_requests())
def test_chat_scores_equal_the_reference(arch, kind, request):
    _check(arch, kind, request)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(request=chat_requests())
def test_chat_scores_with_the_right_side_equal_the_reference(request):
    _check("llama", "metaspace", request, score_right=True)


def test_the_template_carries_the_one_bos_and_the_reply_has_no_separator():
    model, tok = tiny("llama", "metaspace")
    scorer = Scorer(model, tok)
    request = ScoreRequest("Egypt is located in", ["Africa"], chat=True)
    with chat_template(tok):
        context = scorer.encoder.encode(request, with_right=False).context
        rendered = tok.apply_chat_template(
            [{"role": "user", "content": "Egypt is located in"}],
            tokenize=False,
            add_generation_prompt=True,
        )
        chat = scorer.score([request])[0].sum_logprob[0]
    assert rendered == "<s>the Egypt is located in . of "
    assert context.count(tok.bos_token_id) == 1 and context[0] == tok.bos_token_id
    assert context == tuple(tok(rendered, add_special_tokens=False)["input_ids"])
    plain = scorer.score([ScoreRequest("Egypt is located in", ["Africa"])])[0].sum_logprob[0]
    assert chat != pytest.approx(plain, abs=1e-6)  # the template changes the context


def test_a_system_message_changes_the_context():
    model, tok = tiny("gpt2", "bpe")
    scorer = Scorer(model, tok)
    with chat_template(tok):
        plain, system = scorer.score(
            [
                ScoreRequest("Egypt is in", ["Africa", "Asia"], chat=True),
                ScoreRequest("Egypt is in", ["Africa", "Asia"], chat=True, system="Be brief"),
            ]
        )
    assert not np.allclose(plain.sum_logprob, system.sum_logprob)


def test_a_tokenizer_without_chat_template_is_refused_naming_the_model():
    model, tok = tiny("gpt2", "bpe")
    scorer = Scorer(model, tok, identity={"name_or_path": "my-base-model"})
    with pytest.raises(
        UnsupportedModelError,
        match=r"tokenizer of 'my-base-model' has no chat template.*chat_template.*chat=False",
    ):
        scorer.score([ScoreRequest("Egypt is in", ["Africa"], chat=True)])


@pytest.mark.parametrize("arch,kind", [("bert", "wordpiece"), ("t5", "metaspace")])
def test_masked_and_seq2seq_models_refuse_chat_scoring(arch, kind):
    scorer = Scorer(*tiny(arch, kind))
    with pytest.raises(UnsupportedModelError, match="needs a causal model.*Use chat=False"):
        scorer.score([ScoreRequest("Egypt is in", ["Africa"], chat=True)])


def test_a_system_message_needs_chat():
    with pytest.raises(InvalidValueError, match="needs chat=True"):
        ScoreRequest("Egypt is in", ["Africa"], system="Be brief")


def test_plain_request_keys_are_unchanged():
    """Caches written before chat scoring existed stay valid: the key is the sha256 of the old
    payload.
    """
    request = ScoreRequest("日本の首都は", ["東京", "北京"], right="。", sep="")
    old_payload = json.dumps(["日本の首都は", ["東京", "北京"], "。", ""], ensure_ascii=False)
    assert request.key() == hashlib.sha256(old_payload.encode("utf-8")).hexdigest()
    assert ScoreRequest("a", ["b"]).key() == hashlib.sha256(b'["a", ["b"], "", null]').hexdigest()
    chat = ScoreRequest("日本の首都は", ["東京", "北京"], right="。", sep="", chat=True)
    assert chat.key() != request.key()
    assert (
        ScoreRequest(chat.left, chat.candidates, chat.right, chat.sep, True, "Be brief").key()
        != chat.key()
    )


texts = st.sampled_from(["", "a, b", 'q"x', "é, ", "\\n", ", ", "[1]", "日本", "tab\there", "x"])


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    left=texts,
    candidates=st.lists(texts, min_size=1, max_size=4),
    right=texts,
    sep=st.sampled_from([None, "", " "]),
    chat=st.booleans(),
    max_tokens=st.sampled_from([None, 5]),
    candidate_ids=st.sampled_from(["in_context", "alone", "piece"]),
)
def test_every_request_key_is_the_sha256_of_its_json_list(
    left, candidates, right, sep, chat, max_tokens, candidate_ids
):
    """The key writes the candidates' JSON once per candidate set; it is still the digest of the one
    JSON list.
    """
    request = ScoreRequest(
        left, candidates, right, sep, chat, "s, t" if chat else None, max_tokens, candidate_ids
    )
    fields = [left, candidates, right, sep]
    if chat:
        fields.append({"chat": True, "system": "s, t"})
    if max_tokens is not None:
        fields.append({"max_tokens": max_tokens})
    if candidate_ids != "in_context":
        fields.append({"candidate_ids": candidate_ids})
    payload = json.dumps(fields, ensure_ascii=False).encode("utf-8")
    assert request.key() == hashlib.sha256(payload).hexdigest()


def test_cached_chat_scores_follow_the_chat_template(tmp_path):
    """A chat template is not part of the tokenizer hash, so the cache must not serve one template's
    scores for another.
    """
    model, tok = tiny("gpt2", "bpe")
    scorer = Scorer(model, tok, cache=tmp_path / "cache.sqlite")
    request = ScoreRequest("Egypt is in", ["Africa", "Asia"], chat=True)
    other = CHAT_TEMPLATE.replace("of {% endif %}", "of of {% endif %}")
    for template in (CHAT_TEMPLATE, other, CHAT_TEMPLATE):
        with chat_template(tok, template):
            got = scorer.score([request])[0].sum_logprob
            want = [
                reference_chat_score(model, tok, request.left, c).sum() for c in request.candidates
            ]
        np.testing.assert_allclose(got, want, atol=1e-4)
