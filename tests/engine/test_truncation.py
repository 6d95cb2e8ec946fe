"""Contexts longer than the model: cut on the left, special tokens, slot, candidates and right-hand
text kept whole, one warning per scorer; when even an empty context does not fit, an error naming
what is too long.

The models pretend to be short (config limit 24) while their position tables are larger, so a wrong
cut would run instead of crashing; the expected inputs are built from the DESIGN.md tokenization
rule.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch
from engine_reference import masked_right_ids, reference_tokens, tiny

from culture_probe.engine import Scorer, ScoreRequest
from culture_probe.engine.types import Cuts, Truncation
from culture_probe.errors import InputTooLongError
from culture_probe.models import tiny_model
from culture_probe.report.markdown import truncation_lines

LIMIT = 24
LEFT = " ".join(["Egypt is located in"] * 12)


def short_model(arch: str, kind: str):
    """A fresh tiny model (the shared ones must not be changed) whose config allows LIMIT
    positions.
    """
    _, tok = tiny(arch, kind)
    model = tiny_model(arch, tok, layers=1, hidden=32, heads=4)
    model.config.update({"max_position_embeddings" if arch == "bert" else "n_positions": LIMIT})
    return model, tok


def scored(scorer, requests, **options):
    """Scores, the ids each forward received (padding dropped) and the warnings raised."""
    inputs = []
    module = (
        scorer.model.get_encoder()
        if scorer.kind == "seq2seq"
        else scorer.model.get_input_embeddings()
    )
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
    # [CLS] + kept context + masks + right + [SEP]
    keep = LIMIT - 1 - len(cand) - len(right) - len(suffix)
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
        logits = model(
            input_ids=torch.tensor([want]), decoder_input_ids=torch.tensor([decoder])
        ).logits[0]
    lp = torch.log_softmax(logits.double(), -1)
    np.testing.assert_allclose(
        out[0].token_logprobs[1], [lp[1 + j, t].item() for j, t in enumerate(cand)], atol=1e-5
    )


@pytest.mark.parametrize(
    "arch,kind,what,request_,options",
    [
        ("gpt2", "bpe", "candidate", ScoreRequest("Egypt", [" ".join(["Africa"] * 30)]), {}),
        (
            "gpt2",
            "bpe",
            "right text",
            ScoreRequest("Egypt", ["Africa"], right=" Asia" * 30),
            {"score_right": True},
        ),
        ("bert", "wordpiece", "candidate", ScoreRequest("Egypt", [" ".join(["Africa"] * 30)]), {}),
        (
            "bert",
            "wordpiece",
            "right text",
            ScoreRequest("Egypt", ["Africa"], right=" Asia" * 30),
            {},
        ),
        (
            "t5",
            "metaspace",
            "right text",
            ScoreRequest("Egypt", ["Africa"], right=" Asia" * 30),
            {},
        ),
    ],
)
def test_input_that_leaves_no_room_for_a_context_names_the_culprit(
    arch, kind, what, request_, options
):
    model, tok = short_model(arch, kind)
    with pytest.raises(
        InputTooLongError,
        match=f"The {what} is too long: .*model's {LIMIT} positions. Shorten the {what}",
    ):
        Scorer(model, tok).score([request_], **options)


# ---------------------------------------------------------------- the truncation record


REQUESTS = [
    ScoreRequest(" ".join(["Egypt is located in"] * k), ["Africa", "Afrasia"], right=" and Asia .")
    for k in (1, 3, 5, 8, 12)
]
# a request's own limit (max_tokens) cuts too, below the model's
REQUESTS.append(
    ScoreRequest(
        " ".join(["Egypt is located in"] * 2), ["Africa"], right=" and Asia .", max_tokens=12
    )
)
KINDS = [("gpt2", "bpe"), ("bert", "wordpiece"), ("t5", "metaspace")]


def reference_cut(scorer, request: ScoreRequest) -> int:
    """Tokens a request's context loses, written out: how far its whole input (special tokens,
    context, longest candidate with its right-hand text, closing special tokens) runs over the
    limit.
    """
    tok, limit = scorer.tokenizer, min(LIMIT, request.max_tokens or LIMIT)
    if scorer.kind == "seq2seq":
        return max(0, len(tok(request.left + " <extra_id_0>" + request.right)["input_ids"]) - limit)
    longest = 0
    for cand in request.candidates:
        ctx, ids, _, suffix = reference_tokens(tok, request.left, cand, "", None)
        # the masks, then the right text as the original probes tokenize it
        if scorer.kind == "masked":
            ids = ids + masked_right_ids(tok, request.left, len(ids), request.right, None) + suffix
        longest = max(longest, len(ctx) + len(ids))
    return max(0, longest - limit)


def expected_cuts(cuts: list[int]) -> Cuts:
    return Cuts(
        encoded=len(cuts), cut=sum(c > 0 for c in cuts), tokens_cut=sum(cuts), max_cut=max(cuts)
    )


def forward_count(scorer) -> list[int]:
    """A list that grows by one per forward pass of the model."""
    calls: list[int] = []
    module = (
        scorer.model.get_encoder()
        if scorer.kind == "seq2seq"
        else scorer.model.get_input_embeddings()
    )
    module.register_forward_pre_hook(lambda *_: calls.append(1))
    return calls


@pytest.mark.parametrize("arch,kind", KINDS)
def test_truncation_counts_every_context_cut_and_by_how_much(arch, kind):
    scorer = Scorer(*short_model(arch, kind))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scorer.score(REQUESTS)
    want = expected_cuts([reference_cut(scorer, r) for r in REQUESTS])
    assert 0 < want.cut < want.encoded  # some contexts were cut, some kept whole
    assert scorer.truncation == Truncation(contexts=want)


@pytest.mark.parametrize("arch,kind", KINDS)
def test_the_record_is_the_same_when_the_scores_come_from_the_cache(arch, kind, tmp_path):
    model, tok = short_model(arch, kind)
    scorer = Scorer(model, tok, cache_dir=tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scorer.score(REQUESTS)
        cold = scorer.truncation
        calls = forward_count(scorer)
        with scorer.recording():
            scorer.score(REQUESTS)
        fresh = Scorer(model, tok, cache_dir=tmp_path)  # a new scorer, every score in the cache
        fresh.score(REQUESTS)
    assert calls == [] and cold.contexts.cut > 0
    assert scorer.truncation == fresh.truncation == cold


def test_each_recording_counts_afresh_and_warns_once_naming_its_label():
    scorer = Scorer(*short_model("gpt2", "bpe"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with scorer.recording("dlama_ar_west"):
            scorer.score(REQUESTS)
            scorer.score(REQUESTS)
        first = scorer.truncation
        with scorer.recording("fmlama_ar"):
            scorer.score(REQUESTS[-2:-1])
    warned = [str(w.message) for w in caught if "cut on the left" in str(w.message)]
    assert len(warned) == 2
    assert warned[0].startswith(
        f"dlama_ar_west: a context longer than the input limit ({LIMIT} tokens)"
    )
    assert warned[1].startswith("fmlama_ar: a context longer")
    assert first.contexts.encoded == 2 * len(REQUESTS)
    assert scorer.truncation.contexts == expected_cuts([reference_cut(scorer, REQUESTS[-2])])


@pytest.mark.parametrize("arch,kind", [("gpt2", "bpe"), ("t5", "metaspace")])
def test_generation_prompts_are_counted_cached_or_not(arch, kind, tmp_path):
    model, tok = short_model(arch, kind)
    scorer = Scorer(model, tok, cache_dir=tmp_path)
    prompts = [r.left for r in REQUESTS]
    room = 4 if scorer.kind == "causal" else 0  # a decoder-only model keeps room for its new tokens
    want = expected_cuts([max(0, len(tok(p)["input_ids"]) + room - LIMIT) for p in prompts])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        texts = scorer.generate(prompts, max_new_tokens=4)
        assert scorer.truncation == Truncation(prompts=want) and 0 < want.cut < want.encoded
        calls = forward_count(scorer)
        with scorer.recording("xfakt_factual_recall"):
            assert scorer.generate(prompts, max_new_tokens=4) == texts
    assert calls == [] and scorer.truncation == Truncation(prompts=want)
    assert any(str(w.message).startswith("xfakt_factual_recall: a prompt longer") for w in caught)


def test_the_report_header_names_what_was_cut_and_nothing_else():
    scorer = Scorer(*short_model("bert", "wordpiece"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scorer.score(REQUESTS)
    c = expected_cuts([reference_cut(scorer, r) for r in REQUESTS])
    stored = json.loads(json.dumps(scorer.truncation.to_json()))  # as metrics.json holds it
    assert truncation_lines(stored) == [
        f"- **inputs cut to fit the model**: {c.cut} of {c.encoded} contexts cut on the left, up to {c.max_cut} "
        f"tokens ({c.tokens_cut} in all); candidates and new tokens were kept whole (`truncation` in metrics.json)"
    ]
    assert (
        truncation_lines(Truncation(contexts=Cuts(encoded=5)).to_json())
        == truncation_lines(None)
        == []
    )
