"""Engine errors are library errors (culture_probe.errors) that say what is wrong and how to fix it,
raised as early as possible: at construction for a model the backend cannot use, before any forward
for a bad request.
"""

from __future__ import annotations

import copy

import pytest
from engine_reference import tiny

from culture_probe.engine import Scorer, ScoreRequest, parallel
from culture_probe.errors import EmptyCandidateError, UnsupportedModelError

GOOD = [
    ScoreRequest("Egypt is located in", ["Africa", "Asia"]),
    ScoreRequest("Japan is in", ["Asia", "Europe"]),
]
BAD = ScoreRequest("Korea is in", ["Asia", " "])


def test_seq2seq_model_without_sentinels_is_refused_at_construction():
    from transformers import BartConfig, BartForConditionalGeneration

    _, tok = tiny("bert", "wordpiece")  # a tokenizer without <extra_id_N>, as BART's
    config = BartConfig(
        vocab_size=len(tok),
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=64,
    )
    model = BartForConditionalGeneration(config).eval()
    with pytest.raises(
        UnsupportedModelError,
        match="no T5-style sentinel tokens <extra_id_0> and <extra_id_1>.*Use a T5/mT5 checkpoint",
    ):
        Scorer(model, tok)


def test_masked_tokenizer_without_mask_token_is_refused_at_construction():
    model, tok = tiny("bert", "wordpiece")
    unmasked = copy.deepcopy(tok)
    unmasked.mask_token = None
    assert unmasked.mask_token_id is None
    with pytest.raises(UnsupportedModelError, match="has no mask token.*set tokenizer.mask_token"):
        Scorer(model, unmasked)


def test_add_bos_without_a_bos_token():
    with pytest.raises(
        UnsupportedModelError,
        match="add_bos=True, but the tokenizer .* has no BOS token.*Pass add_bos=None",
    ):
        Scorer(*tiny("t5", "metaspace"), add_bos=True)  # T5 tokenizers have no BOS


@pytest.mark.parametrize("arch,kind", [("bert", "wordpiece"), ("t5", "metaspace")])
def test_score_right_is_refused_where_it_cannot_be_honoured(arch, kind):
    with pytest.raises(
        UnsupportedModelError,
        match=f"score_right=True .* needs a causal model; this one is {'masked' if arch == 'bert' else 'seq2seq'}",
    ):
        Scorer(*tiny(arch, kind)).score(GOOD, score_right=True)


@pytest.fixture
def forwards(monkeypatch):
    """Count the batches that reach a backend's model."""
    from culture_probe.engine.causal import CausalScorer

    original, calls = CausalScorer._score_batch, []
    monkeypatch.setattr(
        CausalScorer,
        "_score_batch",
        lambda self, items, *a: calls.append(len(items)) or original(self, items, *a),
    )
    return calls


def test_every_request_is_validated_before_any_scoring(forwards):
    with pytest.raises(EmptyCandidateError, match="Candidate ' ' tokenizes to nothing"):
        # the bad request comes last
        Scorer(*tiny("gpt2", "bpe"), batch_tokens=8).score(GOOD + [BAD])
    assert forwards == []


def test_a_bad_request_in_another_process_share_raises_on_this_one(forwards, monkeypatch):
    """Rank 0 of 2 prepares requests 0 and 2 only; rank 1 meets the bad request 1 in its share and
    says so in the gather every process joins before scoring: rank 0 raises the same error instead
    of waiting, having run nothing.
    """
    import torch.distributed as dist

    monkeypatch.setattr(parallel, "world", lambda: (0, 2))
    monkeypatch.setattr(parallel, "barrier", lambda size: None)
    heard = []

    def all_gather_object(parts, mine):
        heard.append(mine)
        parts[:] = [mine, (EmptyCandidateError, "Candidate ' ' tokenizes to nothing (rank 1)")]

    monkeypatch.setattr(dist, "all_gather_object", all_gather_object)
    with pytest.raises(EmptyCandidateError, match=r"Candidate ' ' tokenizes to nothing \(rank 1\)"):
        Scorer(*tiny("gpt2", "bpe")).score([GOOD[0], BAD, GOOD[1]])
    assert heard == [None]  # rank 0's own share was fine
    assert forwards == []
