"""Contexts longer than the model: cut on the left, special tokens, slot, candidates and right-hand text kept
whole, one warning per scorer; when even an empty context does not fit, an error naming what is too long.

The models pretend to be short (config limit 24) while their position tables are larger, so a wrong cut would
run instead of crashing; the expected inputs are built from the DESIGN.md tokenization rule.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from engine_reference import reference_tokens, tiny

from culture_probe.engine import Scorer, ScoreRequest
from culture_probe.errors import InputTooLongError
from culture_probe.models import tiny_model

LIMIT = 24
LEFT = " ".join(["Egypt is located in"] * 12)


def short_model(arch: str, kind: str):
    """A fresh tiny model (the shared ones must not be changed) whose config allows LIMIT positions."""
    _, tok = tiny(arch, kind)
    model = tiny_model(arch, tok, layers=1, hidden=32, heads=4)
    model.config.update({"max_position_embeddings" if arch == "bert" else "n_positions": LIMIT})
    return model, tok


def scored(scorer, requests, **options):
    """Scores, the ids each forward received (padding dropped) and the warnings raised."""
    inputs = []
    module = scorer.model.get_encoder() if scorer.kind == "seq2seq" else scorer.model.get_input_embeddings()
    pad = scorer.tokenizer.pad_token_id

    def hook(_module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        inputs.extend([t for t in row if t != pad] for row in ids.tolist())

    handle = module.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = scorer.score(requests, keep_tokens=True, **options)
    finally:
        handle.remove()
    return out, inputs, [str(w.message) for w in caught if "cut on the left" in str(w.message)]


def test_masked_keeps_cls_masks_right_and_sep_and_cuts_the_left():
    model, tok = short_model("bert", "wordpiece")
    requests = [
        ScoreRequest(LEFT, ["Africa", "Afrasia"], right=" and Asia ."),
        ScoreRequest(LEFT + " Asia", ["Africa"], right="."),
    ]
    out, inputs, warned = scored(Scorer(model, tok), requests)
    assert len(warned) == 1
    ctx, cand, right, suffix = reference_tokens(tok, LEFT, "Afrasia", " and Asia .", None)
    assert len(cand) > 1 and suffix == [tok.sep_token_id]
    keep = LIMIT - 1 - len(cand) - len(right) - len(suffix)  # [CLS] + kept context + masks + right + [SEP]
    want = ctx[:1] + ctx[len(ctx) - keep :] + [tok.mask_token_id] * len(cand) + right + suffix
    assert ctx[0] == tok.cls_token_id and want in inputs and max(map(len, inputs)) == LIMIT
    for row in inputs:
        assert row[0] == tok.cls_token_id and row[-1] == tok.sep_token_id and len(row) <= LIMIT
    with torch.no_grad():
        lp = torch.log_softmax(model(torch.tensor([want])).logits[0].double(), -1)
    start = 1 + keep
    np.testing.assert_allclose(
        out[0].token_logprobs[1], [lp[start + j, t].item() for j, t in enumerate(cand)], atol=1e-5
    )


def test_seq2seq_keeps_slot_right_and_eos_and_cuts_the_left():
    model, tok = short_model("t5", "metaspace")
    requests = [
        ScoreRequest(LEFT, ["Africa", "Afrasia"], right=" and Asia."),
        ScoreRequest(LEFT + " Asia", ["Africa"], right="."),
    ]
    out, inputs, warned = scored(Scorer(model, tok), requests)
    assert len(warned) == 1
    s0, s1 = tok.convert_tokens_to_ids(["<extra_id_0>", "<extra_id_1>"])
    full = tok(LEFT + " <extra_id_0> and Asia.")["input_ids"]
    slot = full.index(s0)
    want = full[slot - (LIMIT - (len(full) - slot)) : slot] + full[slot:]
    assert full[-1] == tok.eos_token_id and len(want) == LIMIT and want in inputs
    assert all(len(row) <= LIMIT and s0 in row and row[-1] == tok.eos_token_id for row in inputs)
    target = tok("<extra_id_0> Afrasia <extra_id_1>", add_special_tokens=False)["input_ids"]
    cand = target[target.index(s0) + 1 : target.index(s1)]
    decoder = [model.config.decoder_start_token_id, s0] + cand[:-1]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([want]), decoder_input_ids=torch.tensor([decoder])).logits[0]
    lp = torch.log_softmax(logits.double(), -1)
    np.testing.assert_allclose(out[0].token_logprobs[1], [lp[1 + j, t].item() for j, t in enumerate(cand)], atol=1e-5)


@pytest.mark.parametrize(
    "arch,kind,what,request_,options",
    [
        ("gpt2", "bpe", "candidate", ScoreRequest("Egypt", [" ".join(["Africa"] * 30)]), {}),
        ("gpt2", "bpe", "right text", ScoreRequest("Egypt", ["Africa"], right=" Asia" * 30), {"score_right": True}),
        ("bert", "wordpiece", "candidate", ScoreRequest("Egypt", [" ".join(["Africa"] * 30)]), {}),
        ("bert", "wordpiece", "right text", ScoreRequest("Egypt", ["Africa"], right=" Asia" * 30), {}),
        ("t5", "metaspace", "right text", ScoreRequest("Egypt", ["Africa"], right=" Asia" * 30), {}),
    ],
)
def test_input_that_leaves_no_room_for_a_context_names_the_culprit(arch, kind, what, request_, options):
    model, tok = short_model(arch, kind)
    with pytest.raises(
        InputTooLongError, match=f"The {what} is too long: .*model's {LIMIT} positions. Shorten the {what}"
    ):
        Scorer(model, tok).score([request_], **options)
