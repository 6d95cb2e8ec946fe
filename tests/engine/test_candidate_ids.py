"""`ScoreRequest.candidate_ids`: candidates scored by their ids as tokenized alone (the original
DLAMA/FmLAMA probes) or as one named vocabulary piece (MAPS's XLM-R letters), against the default
in-context ids.
"""

from __future__ import annotations

import numpy as np
import pytest

from culture_probe.engine import Scorer, ScoreRequest
from culture_probe.engine.encoding import Encoder
from culture_probe.errors import EmptyCandidateError
from culture_probe.models import tiny_model, train_tokenizer

CORPUS = ["the answer is a", "the answer is b", "a b ab ba", "capital of egypt is cairo ."] * 30


@pytest.fixture(scope="module", params=["bpe", "metaspace"])
def tokenizer(request):
    return request.param, train_tokenizer(
        CORPUS, request.param, model_kind="masked", vocab_size=200
    )


def test_alone_and_piece_ids_are_what_the_upstream_calls_give(tokenizer):
    kind, tok = tokenizer
    encoder = Encoder(tok)
    left = "the answer is"
    in_context = encoder.encode(
        ScoreRequest(left, ("a", "b")), with_right=False
    ).candidates.tuples()
    alone = encoder.encode(
        ScoreRequest(left, ("a", "b"), candidate_ids="alone"), with_right=False
    ).candidates.tuples()
    piece = encoder.encode(
        ScoreRequest(left, ("a", "b"), candidate_ids="piece"), with_right=False
    ).candidates.tuples()
    assert alone == tuple(tuple(tok(c, add_special_tokens=False)["input_ids"]) for c in ("a", "b"))
    assert piece == tuple((tok.convert_tokens_to_ids(c),) for c in ("a", "b"))
    marker = "Ġ" if kind == "bpe" else "▁"
    # after a space: word-initial
    assert tok.convert_ids_to_tokens(list(in_context[0]))[0].startswith(marker)
    assert tok.convert_ids_to_tokens(list(piece[0])) == ["a"]  # the bare piece, as named
    assert piece != in_context


def test_piece_scores_equal_the_mask_logits_of_the_named_pieces(tokenizer):
    import torch

    _, tok = tokenizer
    model = tiny_model("bert", tok, layers=1, hidden=32, heads=4, seed=3)
    got = Scorer(model, tok).score(
        [ScoreRequest("the answer is", ("a", "b"), candidate_ids="piece")]
    )[0]
    # the context's ids, then one mask
    ids = tok("the answer is" + tok.mask_token, return_tensors="pt")
    with torch.no_grad():
        logits = model(**ids).logits[0]
    position = int((ids["input_ids"][0] == tok.mask_token_id).nonzero()[0, 0])
    expected = torch.log_softmax(logits[position], -1)[
        tok.convert_tokens_to_ids(["a", "b"])
    ].numpy()
    np.testing.assert_allclose(got.sum_logprob, expected, atol=1e-5)


def test_an_unknown_piece_is_named(tokenizer):
    _, tok = tokenizer
    with pytest.raises(EmptyCandidateError, match="'zq' is no piece of this vocabulary"):
        Encoder(tok).encode(ScoreRequest("x", ("zq",), candidate_ids="piece"), with_right=False)


def test_the_cache_key_changes_only_when_asked():
    plain = ScoreRequest("x", ("a",))
    assert plain.key() == ScoreRequest("x", ("a",), candidate_ids="in_context").key()
    assert plain.key() != ScoreRequest("x", ("a",), candidate_ids="piece").key()


def test_seq2seq_models_refuse_them_instead_of_ignoring_them():
    tok = train_tokenizer(CORPUS, "metaspace", model_kind="seq2seq", vocab_size=200)
    scorer = Scorer(tiny_model("t5", tok, layers=1, hidden=32), tok)
    with pytest.raises(Exception, match="Leave candidate_ids at 'in_context' for this model"):
        scorer.score([ScoreRequest("the answer is", ("a", "b"), candidate_ids="alone")])
