"""Seq2seq backend (T5/mT5): the slot becomes the first sentinel; the target is `<sentinel0> cand <sentinel1>`;
only the candidate's tokens are scored (no sentinels, no EOS). `seq2seq_style="plain"` instead encodes the left
text alone and scores the candidate as the whole target (from the decoder start; the right text is not used).
Each request's encoder runs once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from culture_probe.engine.backend import Backend, iter_chunks
from culture_probe.engine.encoding import separator
from culture_probe.engine.types import ScoreOptions, ScoreRequest
from culture_probe.errors import EmptyCandidateError, UnsupportedModelError

if TYPE_CHECKING:
    import torch

SENTINELS = ("<extra_id_0>", "<extra_id_1>")


@dataclass(frozen=True)
class Seq2SeqItem:
    """Encoder ids and, per candidate, its token ids as they appear between the sentinels."""

    encoder: tuple[int, ...]
    candidates: tuple[tuple[int, ...], ...]


class Seq2SeqScorer(Backend):
    """Encoder-decoder models with T5-style sentinels."""

    kind = "seq2seq"
    auto_class = "AutoModelForSeq2SeqLM"

    def _check_model(self) -> None:
        """Find the sentinels once, so that a model without them fails here rather than at its first request."""
        tok = self.tokenizer
        ids = [tok.convert_tokens_to_ids(t) for t in SENTINELS]
        if any(i is None or i == tok.unk_token_id for i in ids):
            raise UnsupportedModelError(
                f"Model {self.identity['name_or_path'] or self.identity['architecture']!r} has no T5-style sentinel "
                f"tokens {' and '.join(SENTINELS)}; the seq2seq backend scores the slot as the first sentinel, so it "
                "supports T5/mT5-style models only. Use a T5/mT5 checkpoint, or score with a causal or masked model."
            )
        self.sentinel_ids = tuple(ids)

    def _prepare(self, request: ScoreRequest, options: ScoreOptions) -> Seq2SeqItem:
        if not request.candidates:
            self.encoder.encode(request, with_right=False)  # raises the shared EmptyCandidateError
        if options.seq2seq_style == "plain":
            return self._prepare_plain(request)
        s0, s1 = SENTINELS
        ids0, ids1 = self.sentinel_ids
        source = tuple(
            self.tokenizer(
                request.left + separator(request.left, request.sep) + s0 + request.right
            )["input_ids"]
        )
        cands = []
        for cand in request.candidates:
            target = self.encoder.ids(f"{s0} {cand} {s1}")
            inner = target[target.index(ids0) + 1 : target.index(ids1)]
            if not inner or not cand.strip():
                raise EmptyCandidateError(
                    f"Candidate {cand!r} tokenizes to nothing; drop it or give a non-empty candidate."
                )
            cands.append(inner)
        # The slot and what follows it stay whole; only the left-hand text is cut.
        slot = source.index(ids0)
        tail = source[slot:]
        right = len(tail) - 1 - len(self.encoder.suffix)
        head = self.encoder.fit(
            source[:slot],
            {
                "right text": right,
                "sentinel": 1,
                "closing special tokens": len(self.encoder.suffix),
            },
            request.max_tokens,
        )
        return Seq2SeqItem(head + tail, tuple(cands))

    def _prepare_plain(self, request: ScoreRequest) -> Seq2SeqItem:
        """Encoder = the left text (with the tokenizer's special tokens); target = the candidate's own ids."""
        cands = self.encoder.batch_ids(list(request.candidates))
        for cand, ids in zip(request.candidates, cands, strict=True):
            if not ids or not cand.strip():
                raise EmptyCandidateError(
                    f"Candidate {cand!r} tokenizes to nothing; drop it or give a non-empty candidate."
                )
        suffix = self.encoder.suffix
        source = tuple(self.tokenizer(request.left)["input_ids"])
        body = (
            source[: len(source) - len(suffix)]
            if suffix and source[-len(suffix) :] == suffix
            else source
        )
        head = self.encoder.fit(
            body, {"closing special tokens": len(source) - len(body)}, request.max_tokens
        )
        return Seq2SeqItem(head + source[len(body) :], tuple(cands))

    def _cost(self, item: Seq2SeqItem) -> int:
        return len(item.encoder) + sum(len(c) + 1 for c in item.candidates)

    def decoder_lead(self, options: ScoreOptions) -> tuple[int, ...]:
        """The decoder ids before a candidate's: the decoder start, then (sentinel style) the first sentinel."""
        start = self.model.config.decoder_start_token_id
        return (start,) if options.seq2seq_style == "plain" else (start, self.sentinel_ids[0])

    def _score_batch(
        self, items: list[Seq2SeqItem], options: ScoreOptions, budget: int
    ) -> list[list[np.ndarray]]:
        import torch

        device = self.device
        pad = self.tokenizer.pad_token_id or 0
        lead = self.decoder_lead(options)
        with torch.inference_mode():
            src, src_mask = _pad([it.encoder for it in items], pad, device)
            memory = self.model.get_encoder()(input_ids=src, attention_mask=src_mask)[0]
            rows = [(i, c) for i, it in enumerate(items) for c in range(len(it.candidates))]
            out = [[np.zeros(0)] * len(it.candidates) for it in items]
            width = src.shape[1] + max(len(c) for it in items for c in it.candidates) + 1
            for part in iter_chunks(len(rows), budget // width):
                chunk = rows[part]
                cands = [items[i].candidates[c] for i, c in chunk]
                dec, dec_mask = _pad([lead + cand[:-1] for cand in cands], pad, device)
                owner = torch.tensor([i for i, _ in chunk], device=device)
                logits = self.model(
                    encoder_outputs=(memory[owner],),
                    attention_mask=src_mask[owner],
                    decoder_input_ids=dec,
                    decoder_attention_mask=dec_mask,
                ).logits
                for row, ((i, c), cand) in enumerate(zip(chunk, cands, strict=True)):
                    lsm = torch.log_softmax(
                        logits[row, len(lead) - 1 : len(lead) - 1 + len(cand)].float(), dim=-1
                    )
                    picked = lsm.gather(1, torch.tensor(cand, device=device)[:, None])[:, 0]
                    out[i][c] = picked.double().cpu().numpy()
        return out


def _pad(
    seqs: list[tuple[int, ...]], pad: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids and attention mask."""
    import torch

    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, seq in enumerate(seqs):
        ids[row, : len(seq)] = torch.tensor(seq)
        mask[row, : len(seq)] = 1
    return ids.to(device), mask.to(device)
