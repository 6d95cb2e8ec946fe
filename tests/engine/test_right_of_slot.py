"""The text right of a masked model's slot is tokenized on its own, after the mask tokens, as the
original probes do (they tokenize the whole sentence with [MASK] as a special token) and as the
specs say: a particle glued to the slot (`[X]의 수도는 [Y]입니다.`) is a word of its own, not a `##`
continuation of the candidate (issue 17).

What the right side becomes, per tokenizer family the tests build:
- WordPiece: a new word: `입니다` even where the vocabulary knows `##입니다`;
- byte-level BPE: the text as it reads: a `Ġ` piece only where the right text starts with a space;
- SentencePiece-style (Metaspace): a new word: `▁` starts it, as it does after any special token.
"""

from __future__ import annotations

import numpy as np
import pytest
from engine_reference import masked_right_ids, reference_score

from culture_probe.engine import Scorer, ScoreRequest
from culture_probe.engine.encoding import Encoder
from culture_probe.models import tiny_model, train_tokenizer

# Glued templates of the three scripts, filled as DLAMA and FmLAMA fill them: (left, candidates,
# right).
TEMPLATES = {
    "ko": ("이집트의 수도는", ("카이로", "서울"), "입니다."),
    "ar": ("عاصمة مصر", ("القاهرة", "بيروت"), "هي المدينة."),
    "en": ("The capital of Egypt is", ("Cairo", "Seoul"), "s ."),
}
# The vocabulary knows the glued continuations (`카이로입니다` -> `카이로`, `##입니다`), so
# joint tokenization and upstream's differ.
CORPUS = [
    "이집트의 수도는 카이로 .",
    "한국의 수도는 서울 .",
    "부산입니다 대구입니다 입니다 수도는 카이로 서울",
    "عاصمة مصر القاهرةهي المدينة .",
    "هي المدينة عاصمة بيروت",
    "The capital of Egypt is Cairos .",
    "Seoul is the capital s .",
] * 30


@pytest.fixture(scope="module", params=["wordpiece", "bpe", "metaspace"])
def tokenizer(request):
    return request.param, train_tokenizer(
        CORPUS, request.param, model_kind="masked", vocab_size=260
    )


@pytest.mark.parametrize("language", sorted(TEMPLATES))
def test_the_right_side_is_what_upstream_tokenization_gives_after_the_mask(tokenizer, language):
    kind, tok = tokenizer
    left, candidates, right = TEMPLATES[language]
    encoder = Encoder(tok)
    for candidate in candidates:
        request = ScoreRequest(left, (candidate,), right=right)
        encoded = encoder.encode(request, with_right=True, right_after_mask=True)
        n_masks = len(encoded.candidates[0])
        assert list(encoded.rights[0]) == masked_right_ids(tok, left, n_masks, right, None)
    first = tok.convert_ids_to_tokens(list(encoder.after_special([right])[0]))[0]
    if kind == "wordpiece":
        assert not first.startswith("##")  # a word of its own
    elif kind == "bpe":
        assert first.startswith("Ġ") == right.startswith(" ")  # the text as it reads
    else:
        assert first.startswith("▁")  # a new word, as after any special token


def test_a_glued_particle_was_a_continuation_before_and_is_a_word_now():
    tok = train_tokenizer(CORPUS, "wordpiece", model_kind="masked", vocab_size=260)
    encoder = Encoder(tok)
    left, (candidate, _), right = TEMPLATES["ko"]
    joined = encoder.encode(ScoreRequest(left, (candidate,), right=right), with_right=True)
    alone = encoder.encode(
        ScoreRequest(left, (candidate,), right=right), with_right=True, right_after_mask=True
    )
    # what a causal continuation gets
    assert tok.convert_ids_to_tokens(list(joined.rights[0]))[0] == "##입니다"
    # what upstream's [MASK]입니다 gets
    assert tok.convert_ids_to_tokens(list(alone.rights[0]))[0] == "입니다"


@pytest.mark.parametrize("method", ["typed", "l2r"])
@pytest.mark.parametrize("language", sorted(TEMPLATES))
def test_masked_scores_equal_the_upstream_style_reference(tokenizer, language, method):
    kind, tok = tokenizer
    model = tiny_model("bert", tok, layers=2, hidden=32, heads=4, seed=1)
    scorer = Scorer(model, tok, batch_tokens=64)
    left, candidates, right = TEMPLATES[language]
    got = scorer.score(
        [ScoreRequest(left, candidates, right=right)], masked_method=method, keep_tokens=True
    )[0]
    for candidate, tokens in zip(candidates, got.token_logprobs, strict=True):
        expected = reference_score(model, tok, left, candidate, right, method=method)
        np.testing.assert_allclose(tokens, expected, atol=1e-5)
