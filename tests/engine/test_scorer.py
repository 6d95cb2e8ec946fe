"""Scorer behaviour users rely on: kinds, invariance, order, bad input, truncation, out-of-memory
retry.
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import torch
from engine_reference import corpus as engine_corpus
from engine_reference import reference_score, reference_tokens, tiny

from culture_probe.engine import Scorer, ScoreRequest
from culture_probe.engine.tokenizer import separator
from culture_probe.errors import EmptyCandidateError, UnknownNameError, UnsupportedModelError
from culture_probe.models import save_tiny, train_tokenizer
from culture_probe.models.tiny import ARCH_KIND

REQUESTS = [
    ScoreRequest(
        "The ingredients of pizza include", ["cheese", "tomato", "olive oil", "garlic", "rice"]
    ),
    ScoreRequest("日本の首都は", ["東京", "北京", "東京です"], right="。"),
    ScoreRequest("عاصمة مصر", ["أفريقيا", "آسيا", "زيت الزيتون"]),
    ScoreRequest("한국의 수도는", ["서울", "김치", "비빔밥 재료"]),
    ScoreRequest("Egypt is located in", ["Africa", "Afric", "Africana", "Asia"], right="."),
]
SETUPS = [
    ("gpt2", "bpe"),
    ("llama", "metaspace"),
    ("bloom", "wordpiece"),
    ("bert", "wordpiece"),
    ("xlm-roberta", "metaspace"),
    ("t5", "metaspace"),
]


def _close(a, b, tol):
    for x, y in zip(a, b, strict=True):
        assert x.candidates == y.candidates
        np.testing.assert_array_equal(x.n_tokens, y.n_tokens)
        np.testing.assert_allclose(x.sum_logprob, y.sum_logprob, atol=tol, rtol=0)


@pytest.mark.parametrize("arch,kind", SETUPS)
def test_scores_do_not_depend_on_batch_size_or_token_budget(arch, kind):
    model, tok = tiny(arch, kind)
    runs = [Scorer(model, tok, batch_tokens=budget).score(REQUESTS) for budget in (8, 40, 100_000)]
    _close(runs[0], runs[1], 1e-5)
    _close(runs[0], runs[2], 1e-5)


@pytest.mark.parametrize("arch,kind", [("gpt2", "bpe"), ("bert", "wordpiece")])
def test_results_come_back_in_request_order(arch, kind):
    model, tok = tiny(arch, kind)
    scorer = Scorer(model, tok, batch_tokens=32)
    forward = scorer.score(REQUESTS + REQUESTS[:1])
    backward = scorer.score(list(reversed(REQUESTS)))
    _close(forward[:-1], list(reversed(backward)), 1e-5)
    _close(forward[:1], forward[-1:], 1e-5)  # a repeated request gets the same scores


def test_mean_and_ranking_follow_the_design():
    model, tok = tiny("gpt2", "bpe")
    out = Scorer(model, tok).score(REQUESTS[:1], keep_tokens=True)[0]
    np.testing.assert_allclose(out.mean_logprob, out.sum_logprob / out.n_tokens)
    assert [len(t) for t in out.token_logprobs] == list(out.n_tokens)
    assert Scorer(model, tok).score(REQUESTS[:1])[0].token_logprobs is None
    assert out.best() == out.candidates[int(np.argmax(out.mean_logprob))]


@pytest.mark.parametrize("arch", ["gpt2", "llama", "bloom", "bert", "xlm-roberta", "t5"])
def test_kind_comes_from_the_saved_config(tmp_path, arch):
    _, tok = tiny(arch, "metaspace")
    path = save_tiny(tmp_path / "m", arch, tok, layers=1, hidden=32, heads=4)
    scorer = Scorer.from_pretrained(path)
    assert scorer.kind == ARCH_KIND[arch]
    assert scorer.identity["name_or_path"] == str(path.resolve())
    assert len(scorer.identity["tokenizer_sha256"]) == 64


def test_kind_override_and_unknown_kind(tmp_path):
    _, tok = tiny("gpt2", "bpe")
    path = save_tiny(tmp_path / "m", "gpt2", tok, layers=1, hidden=32, heads=4)
    assert Scorer.from_pretrained(path, kind="causal").kind == "causal"
    with pytest.raises(
        UnknownNameError, match="Unknown model kind 'causel'.*Did you mean 'causal'"
    ):
        Scorer.from_pretrained(path, kind="causel")


def test_model_of_no_supported_kind_is_refused(tmp_path):
    from transformers import BertConfig, BertForSequenceClassification

    _, tok = tiny("bert", "wordpiece")
    model = BertForSequenceClassification(
        BertConfig(
            vocab_size=len(tok),
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=4,
            intermediate_size=64,
        )
    )
    model.save_pretrained(tmp_path / "cls")
    tok.save_pretrained(tmp_path / "cls")
    with pytest.raises(
        UnsupportedModelError, match="BertForSequenceClassification.*causal, masked, seq2seq"
    ):
        Scorer.from_pretrained(tmp_path / "cls")
    with pytest.raises(UnsupportedModelError, match="causal, masked, seq2seq"):
        Scorer(model, tok)


@pytest.mark.parametrize("arch,kind", [("gpt2", "bpe"), ("bert", "wordpiece"), ("t5", "metaspace")])
def test_bad_candidates_are_clear_errors(arch, kind):
    scorer = Scorer(*tiny(arch, kind))
    with pytest.raises(EmptyCandidateError, match="has no candidates"):
        scorer.score([ScoreRequest("Egypt is in", [])])
    with pytest.raises(EmptyCandidateError, match="Candidate '' tokenizes to nothing"):
        scorer.score([ScoreRequest("Egypt is in", ["Africa", ""])])


def test_unknown_masked_method():
    with pytest.raises(UnknownNameError, match="masked_method 'left'"):
        Scorer(*tiny("bert", "wordpiece")).score(REQUESTS[:1], masked_method="left")
    with pytest.raises(
        UnsupportedModelError, match="masked_method='l2r'.*needs a masked model; this one is causal"
    ):
        Scorer(*tiny("gpt2", "bpe")).score(REQUESTS[:1], masked_method="l2r")


def test_separator_rule():
    assert separator("Egypt is in", None) == " "
    assert separator("Egypt is in ", None) == ""
    assert separator("日本の首都は", None) == ""
    assert separator("한국의 수도는", None) == " "
    assert separator("", None) == ""
    assert separator("Egypt is in", "") == ""


def test_causal_candidate_ids_are_the_in_context_tokens():
    model, tok = tiny("gpt2", "bpe")
    ctx, cand, _, _ = reference_tokens(tok, "Egypt is located in", "Africa", "", None)
    # GPT-2 style: the space is in the token
    assert cand == tok(" Africa", add_special_tokens=False)["input_ids"]
    # Trailing whitespace of the context moves onto the candidate, so both spellings score the same.
    scorer = Scorer(model, tok)
    a, b = scorer.score(
        [
            ScoreRequest("Egypt is located in", ["Africa"]),
            ScoreRequest("Egypt is located in ", ["Africa"]),
        ]
    )
    np.testing.assert_allclose(a.sum_logprob, b.sum_logprob, atol=1e-6)


def test_empty_context_starts_from_bos_or_eos():
    # GPT-2 style: no BOS added, so the empty context is <|endoftext|>
    model, tok = tiny("gpt2", "bpe")
    out = Scorer(model, tok).score([ScoreRequest("", ["Egypt"])], keep_tokens=True)[0]
    ids = tok("Egypt", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        lp = torch.log_softmax(
            model(torch.tensor([[tok.eos_token_id] + ids])).logits[0].double(), -1
        )
    want = [lp[j, t].item() for j, t in enumerate(ids)]
    np.testing.assert_allclose(out.token_logprobs[0], want, atol=1e-5)


def test_add_bos_overrides_the_tokenizer_default():
    model, tok = tiny("llama", "metaspace")
    req = [ScoreRequest("Egypt is located in", ["Africa", "Asia"])]
    with_bos = Scorer(model, tok).score(req)[0]
    without = Scorer(model, tok, add_bos=False).score(req)[0]
    assert not np.allclose(with_bos.sum_logprob, without.sum_logprob)
    np.testing.assert_allclose(
        with_bos.sum_logprob, Scorer(model, tok, add_bos=True).score(req)[0].sum_logprob
    )


def test_long_context_is_cut_on_the_left_with_one_warning():
    tok = train_tokenizer(["Egypt is located in Africa and Asia"] * 20, "bpe")
    from culture_probe.models import tiny_model

    model = tiny_model("gpt2", tok, layers=1, hidden=32, heads=4)
    # pretend the model is short; the position table is larger, so the check is real
    model.config.n_positions = 24
    scorer = Scorer(model, tok)
    left = " ".join(["Egypt is located in"] * 20)
    requests = [
        ScoreRequest(left, ["Africa", "Africa and Asia"]),
        ScoreRequest(left + " Asia", ["Africa"]),
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = scorer.score(requests, keep_tokens=True)
    assert sum("cut on the left" in str(w.message) for w in caught) == 1
    ctx, cand, _, _ = reference_tokens(tok, left, "Africa and Asia", "", None)
    keep = ctx[len(ctx) - (24 - len(cand)) :]
    with torch.no_grad():
        lp = torch.log_softmax(model(torch.tensor([keep + cand])).logits[0].double(), -1)
    want = [lp[len(keep) - 1 + j, t].item() for j, t in enumerate(cand)]
    np.testing.assert_allclose(out[0].token_logprobs[1], want, atol=1e-5)


def test_out_of_memory_halves_the_automatic_budget(monkeypatch):
    model, tok = tiny("gpt2", "bpe")
    scorer = Scorer(model, tok)
    expected = scorer.score(REQUESTS)
    original = type(scorer)._score_batch
    budgets = []

    def flaky(self, items, options, budget):
        budgets.append(budget)
        if budget > 1500:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return original(self, items, options, budget)

    monkeypatch.setattr(type(scorer), "_score_batch", flaky)
    _close(scorer.score(REQUESTS), expected, 1e-5)
    assert budgets[:3] == [4096, 2048, 1024] and set(budgets[2:]) == {1024}
    budgets.clear()  # the next call starts from the budget that fit, instead of failing twice again
    _close(scorer.score(REQUESTS[::-1]), expected[::-1], 1e-5)
    assert budgets and set(budgets) == {1024}
    with pytest.raises(torch.cuda.OutOfMemoryError):
        # a budget the user chose is not changed
        Scorer(model, tok, batch_tokens=4096).score(REQUESTS)


@pytest.mark.parametrize("arch,kind", SETUPS[:3])
def test_engine_equals_reference_on_fixed_requests(arch, kind):
    model, tok = tiny(arch, kind)
    out = Scorer(model, tok).score(REQUESTS, keep_tokens=True)
    for req, got in zip(REQUESTS, out, strict=True):
        for i, cand in enumerate(req.candidates):
            want = reference_score(model, tok, req.left, cand, req.right)
            np.testing.assert_allclose(got.token_logprobs[i], want, atol=1e-4)


@pytest.mark.parametrize("arch,kind", [("gpt2", "bpe"), ("llama", "metaspace")])
def test_packed_and_cached_trie_paths_agree(monkeypatch, arch, kind):
    from culture_probe.engine import causal

    model, tok = tiny(arch, kind)
    packed = Scorer(model, tok, batch_tokens=48).score(REQUESTS, score_right=True)
    monkeypatch.setattr(causal, "_can_pack", lambda model: False)
    cached = Scorer(model, tok, batch_tokens=48).score(REQUESTS, score_right=True)
    _close(packed, cached, 1e-5)


def test_padding_and_truncation_left_on_the_tokenizer_never_reach_the_scores():
    # generate() pads its batch (which switches padding on in the shared Rust tokenizer), and a user
    # may set truncation there too: the engine tokenizes through its own copy, so scoring stays what
    # it was.
    model, _ = tiny("gpt2", "bpe")
    tok = train_tokenizer(engine_corpus(), "bpe", model_kind="causal", vocab_size=300)
    scorer = Scorer(model, tok)
    before = scorer.score(REQUESTS)
    scorer.generate(["a", "The ingredients of pizza include cheese and"], max_new_tokens=2)
    tok.backend_tokenizer.enable_truncation(max_length=2)
    _close(before, scorer.score(REQUESTS), 0)
    _close(before, Scorer(model, tok).score(REQUESTS), 0)


def test_tokenizers_that_encode_in_python_keep_their_own_encoding():
    # Some tokenizer classes (CPM's word segmentation, Code Llama's infilling) change the text in
    # Python before their Rust tokenizer sees it; the engine must go through them, not around them.
    model, base = tiny("gpt2", "bpe")

    class Shouting(type(base)):
        def _encode_plus(self, text, *args, **kwargs):
            upper = [t.upper() for t in text] if isinstance(text, list) else text.upper()
            return super()._encode_plus(upper, *args, **kwargs)

    tok = copy.deepcopy(base)
    tok.__class__ = Shouting
    request = ScoreRequest("the ingredients of pizza include", ["cheese", "olive oil"])
    ids = tok(request.left + " cheese", add_special_tokens=False)["input_ids"]
    assert ids == base(request.left.upper() + " CHEESE", add_special_tokens=False)["input_ids"]
    got = Scorer(model, tok).score([request], keep_tokens=True)[0]
    assert got.n_tokens[0] == len(ids) - len(
        tok(request.left, add_special_tokens=False)["input_ids"]
    )
    shouted = Scorer(model, base).score(
        [ScoreRequest(request.left.upper(), ["CHEESE", "OLIVE OIL"])]
    )[0]
    np.testing.assert_array_equal(got.n_tokens, shouted.n_tokens)
    np.testing.assert_allclose(got.sum_logprob, shouted.sum_logprob, atol=1e-6, rtol=0)


def test_candidate_scores_compare_by_value_and_are_unhashable():
    from culture_probe.engine import CandidateScores

    def make(sums, counts=(1, 2), tokens=None):
        return CandidateScores(("a", "b"), np.array(sums), np.array(counts), tokens)

    assert make([-1.0, -2.5]) == make(
        [-1.0, -2.5], tokens=(np.array([-1.0]), np.array([-1.0, -1.5]))
    )
    assert make([-1.0, -2.5]) != make([-1.0, -2.0])
    assert make([-1.0, -2.5]) != make([-1.0, -2.5], counts=(1, 3))
    assert make([-1.0, -2.5]) != CandidateScores(
        ("a", "c"), np.array([-1.0, -2.5]), np.array([1, 2])
    )
    assert make([-1.0]) != make([-1.0, -2.5])  # different lengths: unequal, not an error
    assert make([-1.0, -2.5]) != "scores"
    with pytest.raises(TypeError, match="unhashable"):
        hash(make([-1.0, -2.5]))


def test_unknown_score_kind_lists_the_valid_ones():
    out = Scorer(*tiny("gpt2", "bpe")).score(REQUESTS[:1])[0]
    with pytest.raises(
        UnknownNameError, match="Unknown score kind 'men'.*Did you mean 'mean'.*mean, sum"
    ):
        out.ranking(by="men")


def test_seq2seq_plain_style_scores_the_candidate_as_the_whole_target():
    # CAMeL's seq2seq_style="plain" (spec 4.3): encoder = the prefix, target = the entity, from the
    # decoder start.
    model, tok = tiny("t5", "metaspace")
    request = ScoreRequest("The capital of Egypt is", ["Cairo", "olive oil", "東京"])
    got = Scorer(model, tok, batch_tokens=24).score([request], seq2seq_style="plain")[0]
    source = torch.tensor([tok(request.left)["input_ids"]])
    for cand, total, count in zip(request.candidates, got.sum_logprob, got.n_tokens, strict=True):
        ids = tok(cand, add_special_tokens=False)["input_ids"]
        decoder = torch.tensor([[model.config.decoder_start_token_id, *ids[:-1]]])
        with torch.no_grad():
            lp = torch.log_softmax(
                model(input_ids=source, decoder_input_ids=decoder).logits[0].double(), -1
            )
        assert count == len(ids)
        assert total == pytest.approx(sum(float(lp[i, t]) for i, t in enumerate(ids)), abs=1e-5)
    sentinel = Scorer(model, tok).score([request])[0]
    assert not np.allclose(sentinel.sum_logprob, got.sum_logprob)
    with pytest.raises(UnsupportedModelError, match="seq2seq_style='plain'.*needs a seq2seq model"):
        Scorer(*tiny("gpt2", "bpe")).score([request], seq2seq_style="plain")
    with pytest.raises(UnknownNameError, match="seq2seq_style"):
        Scorer(model, tok).score([request], seq2seq_style="plan")
