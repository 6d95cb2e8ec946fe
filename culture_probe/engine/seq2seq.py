"""Seq2seq backend (T5/mT5): the slot becomes the first sentinel; the target is `<sentinel0> cand
<sentinel1>`; only the candidate's tokens are scored (no sentinels, no EOS). `seq2seq_style="plain"`
instead encodes the left text alone and scores the candidate as the whole target (from the decoder
start; the right text is not used). Each request's encoder runs once.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from culture_probe.engine.backend import Backend, iter_chunks
from culture_probe.engine.tokenizer import separator
from culture_probe.engine.tokens import TokenRows, owners, padded, spread
from culture_probe.engine.types import ScoreOptions, ScoreRequest
from culture_probe.errors import EmptyCandidateError, UnsupportedModelError

if TYPE_CHECKING:
    import torch

SENTINELS = ("<extra_id_0>", "<extra_id_1>")


@dataclass(frozen=True)
class Seq2SeqItem:
    """Encoder ids and, per candidate, its token ids as they appear between the sentinels (or as the
    whole target).
    """

    encoder: tuple[int, ...]
    candidates: TokenRows


# candidate sets kept encoded (they do not depend on the context here: a target holds the candidate
# alone)
ENCODED_SETS = 64


class Seq2SeqScorer(Backend):
    """Encoder-decoder models with T5-style sentinels."""

    kind = "seq2seq"
    auto_class = "AutoModelForSeq2SeqLM"

    def _check_model(self) -> None:
        """Find the sentinels once, so that a model without them fails here rather than at its first
        request.
        """
        tok = self.tokenizer
        ids = [tok.convert_tokens_to_ids(t) for t in SENTINELS]
        if any(i is None or i == tok.unk_token_id for i in ids):
            raise UnsupportedModelError(
                f"Model {self.identity['name_or_path'] or self.identity['architecture']!r} has no T5-style sentinel "
                f"tokens {' and '.join(SENTINELS)}; the seq2seq backend scores the slot as the first sentinel, so it "
                "supports T5/mT5-style models only. Use a T5/mT5 checkpoint, or score with a causal or masked model."
            )
        self.sentinel_ids = tuple(ids)
        self._targets: OrderedDict[tuple[tuple[str, ...], str], TokenRows] = OrderedDict()

    def _prepare_all(
        self, requests: Sequence[ScoreRequest], options: ScoreOptions
    ) -> list[Seq2SeqItem]:
        prepare = (
            self._prepare_plain if options.seq2seq_style == "plain" else self._prepare_sentinel
        )
        return [prepare(request) for request in requests]

    def _targets_of(self, candidates: tuple[str, ...], style: str) -> TokenRows:
        """The candidates' target ids, encoded once per candidate set and style; one with none is an
        error.
        """
        key = (candidates, style)
        rows = self._targets.get(key)
        if rows is not None:
            self._targets.move_to_end(key)
            return rows
        if not candidates:
            self.encoder.encode(
                ScoreRequest("", candidates), with_right=False
            )  # the shared EmptyCandidateError
        if style == "plain":
            found = self.encoder.batch_ids(list(candidates))
        else:
            s0, s1 = SENTINELS
            ids0, ids1 = self.sentinel_ids
            targets = self.encoder.batch_ids([f"{s0} {cand} {s1}" for cand in candidates])
            found = [t[t.index(ids0) + 1 : t.index(ids1)] for t in targets]
        for cand, inner in zip(candidates, found, strict=True):
            if not inner or not cand.strip():
                raise EmptyCandidateError(
                    f"Candidate {cand!r} tokenizes to nothing; drop it or give a non-empty candidate."
                )
        rows = self._targets[key] = TokenRows.of(found)
        if len(self._targets) > ENCODED_SETS:
            self._targets.popitem(last=False)
        return rows

    def _prepare_sentinel(self, request: ScoreRequest) -> Seq2SeqItem:
        """Encoder = the sentence with the first sentinel in the slot; each candidate between the
        sentinels.
        """
        cands = self._targets_of(request.candidates, "sentinel")
        ids0 = self.sentinel_ids[0]
        source = tuple(
            self.tokenizer(
                request.left + separator(request.left, request.sep) + SENTINELS[0] + request.right
            )["input_ids"]
        )
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
        return Seq2SeqItem(head + tail, cands)

    def _prepare_plain(self, request: ScoreRequest) -> Seq2SeqItem:
        """Encoder = the left text (with the tokenizer's special tokens); target = the candidate's
        own ids.
        """
        cands = self._targets_of(request.candidates, "plain")
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
        return Seq2SeqItem(head + source[len(body) :], cands)

    def _cost(self, item: Seq2SeqItem) -> int:
        return len(item.encoder) + len(item.candidates.ids) + len(item.candidates)

    def _reads(self, item: Seq2SeqItem) -> int:
        return len(item.candidates.ids)  # the decoder position before each candidate token

    def _scored(self, item: Seq2SeqItem) -> TokenRows:
        return item.candidates

    def decoder_lead(self, options: ScoreOptions) -> tuple[int, ...]:
        """The decoder ids before a candidate's: the decoder start, then (sentinel style) the first
        sentinel.
        """
        start = self.model.config.decoder_start_token_id
        return (start,) if options.seq2seq_style == "plain" else (start, self.sentinel_ids[0])

    def _score_batch(
        self, items: list[Seq2SeqItem], options: ScoreOptions, budget: int
    ) -> list[np.ndarray]:
        import torch

        device = self.device
        pad = self.tokenizer.pad_token_id or 0
        lead = np.asarray(self.decoder_lead(options), dtype=np.int64)
        # every candidate of the batch as one table: row r is candidate `cand_of[r]` of item
        # `item_of[r]`, its ids at `starts[r]` in `flat` (which is also where its log-probs go)
        counts = np.array([len(it.candidates) for it in items], dtype=np.int64)
        item_of = owners(counts)
        flat = np.concatenate([it.candidates.ids for it in items])
        sizes = np.array([len(it.candidates.ids) for it in items], dtype=np.int64)
        base = np.zeros(len(items) + 1, dtype=np.int64)
        np.cumsum(sizes, out=base[1:])
        starts = np.concatenate(
            [it.candidates.starts[:-1] + b for it, b in zip(items, base, strict=False)]
        )
        lengths = np.concatenate([it.candidates.lengths for it in items])
        out = np.zeros(int(base[-1]))
        with torch.inference_mode():
            src, src_mask = _pad([it.encoder for it in items], pad, device)
            memory = self.model.get_encoder()(input_ids=src, attention_mask=src_mask)[0]
            width = src.shape[1] + int(lengths.max()) + 1
            for part in iter_chunks(len(item_of), budget // width):
                rows = np.arange(len(item_of))[part]
                n = lengths[rows]
                # decoder input: the lead, then the candidate but its last token; read where each
                # token is predicted
                dec = np.full((len(rows), len(lead) + int(n.max()) - 1), pad, dtype=np.int64)
                dec[:, : len(lead)] = lead
                inner = np.maximum(n - 1, 0)
                dec[owners(inner), spread(np.full(len(rows), len(lead), np.int64), inner)] = flat[
                    spread(starts[rows], inner)
                ]
                dec_mask = (np.arange(dec.shape[1])[None, :] < (len(lead) + inner)[:, None]).astype(
                    np.int64
                )
                owner = torch.from_numpy(item_of[rows]).to(device)
                logits = self.model(
                    encoder_outputs=(memory[owner],),
                    attention_mask=src_mask[owner],
                    decoder_input_ids=torch.from_numpy(dec).to(device),
                    decoder_attention_mask=torch.from_numpy(dec_mask).to(device),
                ).logits
                at_row, at_pos = owners(n), spread(np.full(len(rows), len(lead) - 1, np.int64), n)
                places = spread(starts[rows], n)
                picked = torch.log_softmax(logits[at_row, at_pos].float(), dim=-1)
                values = picked.gather(1, torch.from_numpy(flat[places]).to(device)[:, None])[:, 0]
                out[places] = values.double().cpu().numpy()
        return [out[a:b] for a, b in zip(base[:-1], base[1:], strict=True)]


def _pad(
    seqs: Sequence[Sequence[int]], pad: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids and attention mask."""
    import torch

    lengths = np.array([len(s) for s in seqs], dtype=np.int64)
    width = int(lengths.max())
    ids = padded([np.asarray(s, dtype=np.int64) for s in seqs], width, pad)
    mask = (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64)
    return torch.from_numpy(ids).to(device), torch.from_numpy(mask).to(device)
