"""The masked scorer of the released DLAMA and FmLAMA code, written from it for the tests (both
forked mLAMA's: AMR-KELEG/DLAMA mlama/scripts/eval_utils.py get_ranking and
run_prompting_experiment.py:227-238; lizhou21/FmLAMA-master access_LMs/eval_utils.py@f77d30d5 and
run_prompting_experiment.py:274-285), and a tiny model whose mask token absorbs the space before it,
as RoBERTa's and XLM-R's do.
"""

from __future__ import annotations

import numpy as np


def upstream_masked_ranking(
    model, tok, template: str, subject: str, candidates, max_pieces: int | None = None
) -> list[tuple[str, float]]:
    """One item: fill the stripped template with the stripped subject and the mask; group the
    candidates (sorted) by their number of bare pieces (`tokenizer.tokenize(obj)`), dropping those
    of more than `max_pieces` (FmLAMA v1: 10); for k = 1..K put k masks in the sentence
    (`<mask><mask>`; BERT's "][" fix does not apply), run the model once, and score each k-piece
    candidate by the float32 mean of its pieces' log-probs at the k masks; sort by score, best
    first, stably, so ties keep the grouping's order (fewer pieces, then code point).
    """
    import torch

    pieces = {c: tok.tokenize(c) for c in sorted(candidates)}
    longest = max(len(p) for p in pieces.values())
    longest = longest if max_pieces is None else min(longest, max_pieces)
    sentence = template.strip().replace("[X]", subject.strip()).replace("[Y]", tok.mask_token)
    scores: dict[str, float] = {}
    for k in range(1, longest + 1):
        encoded = tok(sentence.replace(tok.mask_token, tok.mask_token * k), return_tensors="pt")
        with torch.no_grad():
            log_probs = torch.log_softmax(model(**encoded).logits[0], -1)
        positions = (encoded["input_ids"][0] == tok.mask_token_id).nonzero()[:, 0].tolist()
        assert len(positions) == k
        for candidate in (c for c in pieces if len(pieces[c]) == k):
            ids = tok.convert_tokens_to_ids(pieces[candidate])
            scores[candidate] = float(
                np.mean([log_probs[p, i].numpy() for p, i in zip(positions, ids, strict=True)])
            )
    return sorted(scores.items(), key=lambda item: item[1], reverse=True)


def roberta_style(texts: list[str], *, vocab_size: int, seed: int):
    """(model, tokenizer): a tiny masked model on a byte-level BPE vocabulary trained on `texts`,
    whose `<mask>` absorbs the space before it.
    """
    from tokenizers import AddedToken

    from culture_probe.models import tiny_model, train_tokenizer

    tok = train_tokenizer(texts, "bpe", model_kind="masked", vocab_size=vocab_size)
    tok.add_special_tokens({"mask_token": AddedToken("<mask>", lstrip=True, special=True)})
    return tiny_model("bert", tok, layers=1, hidden=32, heads=4, seed=seed), tok
