"""The speed design, observed on the model itself: what goes through the embedding, the LM head and
the log-softmax normalizer (`torch.logsumexp`, one per row whose log-probs are read).

Causal: every request's context runs once, every inner node of its candidate trie once (shared
candidate prefixes once), leaves never; the normalizer and the LM head only at positions that
predict a candidate token. Masked (typed): one input per distinct candidate length k per request.
Expected counts come from the DESIGN.md tokenization rule (`reference_tokens`), not from the
engine's own trie.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import pytest
import torch
from engine_reference import reference_tokens, tiny

from culture_probe.engine import Scorer, ScoreRequest

REQUESTS = [
    ScoreRequest(
        "Egypt is located in",
        [
            "Africa",
            "Afric",
            "Africana",
            "Asia",
            "Asiana",
            "Afrasia",
            "olive oil",
            "olive oils",
            "Japanese",
            "Japans",
        ],
    ),
    ScoreRequest(
        "The ingredients of pizza include",
        ["cheese", "tomato", "olive oil", "olive", "garlic", "rice"],
    ),
]


@dataclass
class Traffic:
    """Tokens the model embeds (padding excluded), inputs it embeds, and rows given to the LM head
    and to the log-softmax normalizer.
    """

    pad: int
    tokens: int = 0
    inputs: list[tuple[int, ...]] = field(default_factory=list)
    head_rows: int = 0
    normalizer_rows: int = 0


@contextlib.contextmanager
def watch(model, tokenizer, monkeypatch):
    """Count the model's traffic while the block runs."""
    seen = Traffic(pad=tokenizer.pad_token_id)

    def on_embed(_module, args, _out):
        for row in args[0].reshape(-1, args[0].shape[-1]).tolist():
            seen.inputs.append(tuple(t for t in row if t != seen.pad))
            seen.tokens += len(seen.inputs[-1])

    def on_head(_module, args, _out):
        seen.head_rows += args[0].numel() // args[0].shape[-1]

    logsumexp = torch.logsumexp

    def counting(x, *args, **kwargs):
        seen.normalizer_rows += x.numel() // x.shape[-1]
        return logsumexp(x, *args, **kwargs)

    monkeypatch.setattr(torch, "logsumexp", counting)
    hooks = [
        model.get_input_embeddings().register_forward_hook(on_embed),
        model.get_output_embeddings().register_forward_hook(on_head),
    ]
    try:
        yield seen
    finally:
        for hook in hooks:
            hook.remove()


def trie_needs(tok, request: ScoreRequest) -> tuple[int, int, int]:
    """(context tokens, inner trie nodes, candidate tokens beyond the first) of a causal request."""
    encoded = [
        reference_tokens(tok, request.left, cand, request.right, request.sep)
        for cand in request.candidates
    ]
    context = encoded[0][0]
    seqs = [tuple(cand) for _, cand, _, _ in encoded]
    # prefixes some candidate continues
    inner = {seq[:j] for seq in seqs for j in range(1, len(seq))}
    return len(context), len(inner), sum(len(seq) - 1 for seq in seqs)


@pytest.mark.parametrize(
    "arch,kind", [("gpt2", "bpe"), ("llama", "metaspace"), ("bloom", "wordpiece")]
)
def test_causal_runs_each_context_and_each_inner_trie_node_once(arch, kind, monkeypatch):
    model, tok = tiny(arch, kind)
    needs = [trie_needs(tok, r) for r in REQUESTS]
    # the candidates really share prefixes
    assert sum(n[1] for n in needs) < sum(n[2] for n in needs)
    scorer = Scorer(model, tok)
    with watch(model, tok, monkeypatch) as seen:
        scorer.score(REQUESTS)
    assert seen.tokens == sum(ctx + inner for ctx, inner, _ in needs)
    # One predicting position per context (the first candidate token) and one per inner node,
    # nothing else.
    assert seen.normalizer_rows == sum(1 + inner for _, inner, _ in needs)
    # packed path: the LM head sees predicting positions only
    if scorer.model.config.model_type != "bloom":
        assert seen.head_rows == seen.normalizer_rows


def test_one_token_candidates_never_run_past_the_context(monkeypatch):
    model, tok = tiny("llama", "metaspace")
    request = ScoreRequest("Egypt is located in", ["Asia", "Africa", "Afric"])
    ctx, inner, extra = trie_needs(tok, request)
    assert inner == extra == 0  # every candidate is one token
    with watch(model, tok, monkeypatch) as seen:
        Scorer(model, tok).score([request])
    assert seen.tokens == ctx and seen.normalizer_rows == 1


@pytest.mark.parametrize("arch,kind", [("bert", "wordpiece"), ("xlm-roberta", "metaspace")])
def test_masked_typed_runs_one_input_per_distinct_length(arch, kind, monkeypatch):
    model, tok = tiny(arch, kind)
    requests = [
        ScoreRequest(
            "Egypt is located in", ["Africa", "Afric", "Africana", "Asia", "olive oil", "rice"]
        ),
        ScoreRequest(
            "The ingredients of pizza include",
            ["cheese", "tomato", "garlic", "olive oil"],
            right=".",
        ),
    ]
    groups = [
        {
            (len(c), tuple(r))
            for _, c, r, _ in (
                reference_tokens(tok, q.left, cand, q.right, q.sep) for cand in q.candidates
            )
        }
        for q in requests
    ]
    # several k, some shared
    assert len(groups[0]) > 1 and len(groups[0]) < len(requests[0].candidates)
    with watch(model, tok, monkeypatch) as seen:
        Scorer(model, tok).score(requests)
    assert len(seen.inputs) == sum(len(g) for g in groups)
    mask = tok.mask_token_id
    assert sorted(row.count(mask) for row in seen.inputs) == sorted(k for g in groups for k, _ in g)
    # The head and the normalizer run at the mask positions only: k rows per input.
    assert seen.head_rows == seen.normalizer_rows == sum(k for g in groups for k, _ in g)


def test_multi_pass_tanh_gelu_runs_fused_while_scoring_and_the_model_is_left_as_it_was():
    from transformers.activations import NewGELUActivation

    model, tok = tiny("gpt2", "bpe")
    gelus = [m for m in model.modules() if isinstance(m, NewGELUActivation)]
    assert gelus  # GPT-2's gelu_new: several elementwise passes in transformers
    fused: list[int] = []
    original = torch.nn.functional.gelu
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            torch.nn.functional, "gelu", lambda x, **kw: fused.append(1) or original(x, **kw)
        )
        got = Scorer(model, tok).score(REQUESTS)
    assert len(fused) >= len(gelus)  # every layer's activation went through torch's fused kernel
    assert all("forward" not in vars(m) for m in gelus)  # restored: the class's own forward again
    with torch.no_grad():  # and the scores equal those of the model's own activation
        plain = Scorer(model, tok)
        import culture_probe.engine.backend as backend

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(backend, "TANH_GELUS", ())
            want = plain.score(REQUESTS)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(
            torch.tensor(a.sum_logprob), torch.tensor(b.sum_logprob), atol=1e-5, rtol=0
        )
