"""The engine equals the slow reference scorer for every backend and tokenizer family (property
tests).
"""

from __future__ import annotations

import numpy as np
import pytest
from engine_reference import ALL_WORDS, WORDS, reference_score, tiny
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from culture_probe.engine import Scorer, ScoreRequest

ARCHS = ["gpt2", "llama", "bloom", "bert", "xlm-roberta", "t5"]
TOKENIZERS = ["bpe", "wordpiece", "metaspace"]

word = st.sampled_from(ALL_WORDS)


@st.composite
def requests(draw):
    """A context in one script and candidates that share prefixes, with one-token and long ones."""
    script = draw(st.sampled_from(list(WORDS)))
    joiner = "" if script == "cjk" else " "
    left = joiner.join(draw(st.lists(st.sampled_from(WORDS[script]), min_size=0, max_size=5)))
    if draw(st.booleans()):
        left += " "
    stems = draw(st.lists(word, min_size=1, max_size=3))
    cands = set()
    for stem in stems:
        cands.add(stem)
        # long candidates sharing a prefix with `stem`
        tail = draw(st.lists(word, min_size=0, max_size=6))
        cands.add(" ".join([stem, *tail]))
        cands.add(stem[:1])  # often a single token
    right = draw(st.sampled_from(["", ".", " is here", "。", " ؟"]))
    sep = draw(st.sampled_from([None, None, "", " "]))
    return ScoreRequest(left=left, candidates=sorted(cands), right=right, sep=sep)


def _check(arch, kind, request, **options):
    model, tok = tiny(arch, kind)
    scorer = Scorer(model, tok, batch_tokens=64)
    got = scorer.score([request], keep_tokens=True, **options)[0]
    method = options.get("masked_method", "typed")
    for i, cand in enumerate(request.candidates):
        want = reference_score(
            model,
            tok,
            request.left,
            cand,
            request.right,
            request.sep,
            method=method,
            score_right=options.get("score_right", False),
        )
        assert got.n_tokens[i] == len(want)
        np.testing.assert_allclose(got.token_logprobs[i], want, atol=1e-4, err_msg=cand)
        assert got.sum_logprob[i] == pytest.approx(want.sum(), abs=1e-4)


@pytest.mark.parametrize("kind", TOKENIZERS)
@pytest.mark.parametrize("arch", ARCHS)
@settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(request=requests())
def test_engine_equals_reference(arch, kind, request):
    _check(arch, kind, request)


@pytest.mark.parametrize(
    "arch,kind", [("bert", "wordpiece"), ("xlm-roberta", "metaspace"), ("bert", "bpe")]
)
@settings(max_examples=15, deadline=None, derandomize=True)
@given(request=requests())
def test_masked_l2r_equals_reference(arch, kind, request):
    _check(arch, kind, request, masked_method="l2r")


@pytest.mark.parametrize("arch,kind", [("gpt2", "bpe"), ("llama", "metaspace")])
@settings(max_examples=15, deadline=None, derandomize=True)
@given(request=requests())
def test_causal_score_right_equals_reference(arch, kind, request):
    _check(arch, kind, request, score_right=True)
