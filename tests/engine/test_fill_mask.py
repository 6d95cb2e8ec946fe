"""`Scorer.fill_mask`: the argmax over the vocabulary at one mask, checked against a slow reference
(the text `left + sep + mask + right` tokenized whole, one full forward, full log_softmax, special
tokens excluded).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from engine_reference import tiny

from culture_probe.engine import Scorer
from culture_probe.errors import CultureProbeError, UnsupportedModelError

LEFTS = (
    "the ingredients of pizza include",
    "Egypt is located in",
    "olive oil garlic tomato",
    "مصر تقع في",
    "日本の首都は",
    "한국 의 수도 는",
)


def reference_fill(
    model, tok, left: str, sep: str, right: str = "", top_k: int = 3
) -> list[tuple[str, float]]:
    ids = tok(left + sep + tok.mask_token + right, return_tensors="pt")["input_ids"]
    pos = ids[0].tolist().index(tok.mask_token_id)
    with torch.no_grad():
        lsm = torch.log_softmax(model(input_ids=ids).logits[0, pos].double(), dim=-1)
    lsm[tok.all_special_ids] = float("-inf")
    order = np.argsort(-lsm.numpy(), kind="stable")[:top_k]
    return [(tok.decode([int(t)], skip_special_tokens=True), float(lsm[t])) for t in order]


def _sep(left: str) -> str:
    return "" if left.endswith("は") else " "


@pytest.mark.parametrize("arch,kind", [("bert", "wordpiece"), ("xlm-roberta", "metaspace")])
def test_fill_mask_equals_the_slow_reference_whatever_the_batch(arch, kind):
    model, tok = tiny(arch, kind)
    expected = [reference_fill(model, tok, left, _sep(left)) for left in LEFTS]
    for budget in (None, 8):  # one batch, and one input per forward
        scorer = Scorer(model, tok, batch_tokens=budget)
        got = scorer.fill_mask(LEFTS, top_k=3)
        for want, have in zip(expected, got, strict=True):
            assert [text for text, _ in have] == [text for text, _ in want]
            assert [lp for _, lp in have] == pytest.approx([lp for _, lp in want], abs=1e-5)
    # the right-hand text is seen; the prediction is never a special token
    right = reference_fill(model, tok, "Egypt is", " ", right=" in Africa", top_k=1)
    assert Scorer(model, tok).fill_mask(["Egypt is"], rights=[" in Africa"])[0][0][0] == right[0][0]
    top = Scorer(model, tok).fill_mask(LEFTS[:1], top_k=len(tok))[0]
    assert len(top) == len(tok) - len(set(tok.all_special_ids)) and all(
        np.isfinite([lp for _, lp in top])
    )


def test_fill_mask_rejects_bad_input_and_other_model_kinds():
    model, tok = tiny("bert", "wordpiece")
    scorer = Scorer(model, tok)
    with pytest.raises(CultureProbeError, match="needs top_k >= 1"):
        scorer.fill_mask(["Egypt is"], top_k=0)
    with pytest.raises(CultureProbeError, match="2 left texts but 1 right texts"):
        scorer.fill_mask(["a", "b"], rights=["c"])
    for arch, family in (("gpt2", "bpe"), ("t5", "metaspace")):
        other = Scorer(*tiny(arch, family))
        with pytest.raises(
            UnsupportedModelError, match=f"needs a masked model; this one is {other.kind}"
        ):
            other.fill_mask(["Egypt is"])
