"""Masked backend: candidates scored at [MASK] positions, with only their ids gathered, on the device.

Two rules (docs/engine.md): "typed" querying (mLAMA/DLAMA/FmLAMA): a k-subword candidate fills k masks and every
candidate of the same k shares one forward; "l2r" (CAMeL): subword i is predicted by one mask with subwords
0..i-1 filled in, and candidates sharing those subwords share the forward.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

from culture_probe.engine.backend import Backend, logprobs_at
from culture_probe.engine.encoding import Encoded
from culture_probe.engine.types import FillMaskOptions, ScoreOptions, ScoreRequest, make_options
from culture_probe.errors import InvalidValueError, UnsupportedModelError

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Query:
    """One model input and what to read from it: `reads[j] = (position, candidate, subword, token id)`."""

    ids: tuple[int, ...]
    reads: tuple[tuple[int, int, int, int], ...]


@dataclass(frozen=True)
class MaskedItem:
    """A request as the distinct inputs it needs, plus each candidate's subword count."""

    queries: tuple[Query, ...]
    lengths: tuple[int, ...]


class MaskedScorer(Backend):
    """Encoder-only masked LMs: BERT, RoBERTa/XLM-R, ..."""

    kind = "masked"
    auto_class = "AutoModelForMaskedLM"

    def _check_model(self) -> None:
        if self.tokenizer.mask_token_id is None:
            raise UnsupportedModelError(
                f"The tokenizer of {self.identity['name_or_path'] or type(self.tokenizer).__name__!r} has no mask "
                "token (mask_token is None), which masked scoring needs. Use the masked LM's own tokenizer, or "
                "set tokenizer.mask_token to the model's mask token."
            )

    def _prepare(self, request: ScoreRequest, options: ScoreOptions) -> MaskedItem:
        enc = self.encoder.encode(request, with_right=True, right_after_mask=True)
        self._refuse_mask_in(
            left=enc.context, candidates=chain(*enc.candidates), right=chain(*enc.rights)
        )
        build = _typed if options.masked_method == "typed" else _l2r
        longest = max(
            range(len(enc.candidates)), key=lambda c: len(enc.candidates[c]) + len(enc.rights[c])
        )
        context = self.encoder.fit(
            enc.context,
            {
                "candidate": len(enc.candidates[longest]),
                "right text": len(enc.rights[longest]),
                "closing special tokens": len(enc.suffix),
            },
            request.max_tokens,
        )
        return MaskedItem(
            tuple(build(enc, context, self.tokenizer.mask_token_id)),
            tuple(map(len, enc.candidates)),
        )

    def _refuse_mask_in(self, **texts: Iterable[int]) -> None:
        """A literal mask token in a request's text would be read as a second slot: refused, naming the text."""
        mask = self.tokenizer.mask_token_id
        for name, ids in texts.items():
            if mask in ids:
                raise InvalidValueError(
                    f"The request's {name} text holds the mask token {self.tokenizer.mask_token!r}, which this masked "
                    "model would read as a second slot: remove or rewrite it (the slot is marked by left/right)."
                )

    def _cost(self, item: MaskedItem) -> int:
        return sum(len(q.ids) for q in item.queries)

    def _score_batch(
        self, items: list[MaskedItem], options: ScoreOptions, budget: int
    ) -> list[list[np.ndarray]]:
        import torch

        # Shortest first, in chunks padded to their own longest input: a request's queries range from k = 1 to its
        # longest candidate's k masks, and padding them all to the longest wasted more than half the tokens.
        queries = sorted(
            ((i, q) for i, item in enumerate(items) for q in item.queries),
            key=lambda iq: len(iq[1].ids),
        )
        out = [[np.zeros(n) for n in item.lengths] for item in items]
        with torch.inference_mode():
            for chunk in _length_chunks(queries, budget):
                values = self._read([q for _, q in chunk])
                for (i, query), vals in zip(chunk, values, strict=True):
                    for (_, cand, sub, _), value in zip(query.reads, vals, strict=True):
                        out[i][cand][sub] = value
        return out

    def _read(self, queries: list[Query]) -> list[np.ndarray]:
        """Per query, the log-prob of each read, computed at the read positions only."""
        import torch

        device = self.device
        ids, attn = self._padded([q.ids for q in queries])
        # Many candidates read the same mask position: run the head once per distinct position.
        where = {(r, p): None for r, q in enumerate(queries) for p, _, _, _ in q.reads}
        slot = {key: k for k, key in enumerate(where)}
        rows = torch.tensor([r for r, _ in slot], device=device)
        pos = torch.tensor([p for _, p in slot], device=device)
        logits = _logits_at(self.model, ids.to(device), attn.to(device), rows, pos)
        at = torch.tensor(
            [slot[(r, p)] for r, q in enumerate(queries) for p, _, _, _ in q.reads], device=device
        )
        tok = torch.tensor([t for q in queries for _, _, _, t in q.reads], device=device)
        values = logprobs_at(logits, at, tok)
        flat = values.double().cpu().numpy()
        bounds = np.cumsum([0] + [len(q.reads) for q in queries])
        return [flat[bounds[r] : bounds[r + 1]] for r in range(len(queries))]

    def _padded(self, rows: list[tuple[int, ...]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-padded input ids and attention mask (CPU tensors)."""
        import torch

        ids = torch.full(
            (len(rows), max(map(len, rows))), self.tokenizer.pad_token_id or 0, dtype=torch.long
        )
        attn = torch.zeros_like(ids)
        for row, seq in enumerate(rows):
            ids[row, : len(seq)] = torch.tensor(seq)
            attn[row, : len(seq)] = 1
        return ids, attn

    # ---- fill-mask: the argmax over the vocabulary (MAPS memorisation) ------------------------------------
    def fill_mask(
        self,
        lefts: Sequence[str],
        options: FillMaskOptions | None = None,
        *,
        rights: Sequence[str] | None = None,
        **fields: Any,
    ) -> list[list[tuple[str, float]]]:
        """Per left text, the `top_k` vocabulary pieces at one mask after it, best first, as (text decoded with
        `skip_special_tokens=True`, log-prob over the whole vocabulary); special tokens are never predicted.

        The input is what `score` feeds a one-token candidate: `left`, the separator rule (`sep`), the mask token,
        the right text, the special tokens, the context cut on the left if too long. Batched by token budget
        (halved on out-of-memory, as `score` is), in input order.
        """
        options = make_options(FillMaskOptions, options, fields)
        lefts = list(lefts)
        rights = [""] * len(lefts) if rights is None else list(rights)
        if len(rights) != len(lefts):
            raise InvalidValueError(
                f"fill_mask got {len(lefts)} left texts but {len(rights)} right texts; give "
                "one right text per left text (or none)."
            )
        inputs = [
            self._mask_input(left, right, options.sep)
            for left, right in zip(lefts, rights, strict=True)
        ]
        found: dict[int, list[tuple[str, float]]] = {}

        def run(batch: list[int], _budget: int) -> list[list[tuple[str, float]]]:
            return self._top_pieces([inputs[i] for i in batch], options.top_k)

        for batch, pieces in self.batches({i: len(ids) for i, (ids, _) in enumerate(inputs)}, run):
            found.update(zip(batch, pieces, strict=True))
        return [found[i] for i in range(len(inputs))]

    def _mask_input(self, left: str, right: str, sep: str | None) -> tuple[tuple[int, ...], int]:
        """(input ids, mask position): the mask token encoded as the request's only candidate."""
        mask = self.tokenizer.mask_token_id
        enc = self.encoder.encode(
            ScoreRequest(left, (self.tokenizer.mask_token,), right=right, sep=sep),
            with_right=True,
            right_after_mask=True,
        )
        slot, after = enc.candidates[0], enc.rights[0]
        self._refuse_mask_in(left=enc.context, right=after)
        if slot.count(mask) != 1:
            raise UnsupportedModelError(
                f"The mask token {self.tokenizer.mask_token!r} after {left[-30:]!r} does not "
                f"encode to one mask id ({list(slot)}); fill_mask needs it to."
            )
        context = self.encoder.fit(
            enc.context,
            {
                "mask": len(slot),
                "right text": len(after),
                "closing special tokens": len(enc.suffix),
            },
        )
        return context + slot + after + enc.suffix, len(context) + slot.index(mask)

    def _top_pieces(
        self, inputs: list[tuple[tuple[int, ...], int]], top_k: int
    ) -> list[list[tuple[str, float]]]:
        import torch

        device = self.device
        ids, attn = self._padded([seq for seq, _ in inputs])
        rows = torch.arange(len(inputs), device=device)
        pos = torch.tensor([p for _, p in inputs], device=device)
        with torch.inference_mode():
            logits = _logits_at(self.model, ids.to(device), attn.to(device), rows, pos)
        lsm = torch.log_softmax(logits.float(), dim=-1)
        special = sorted({i for i in self.tokenizer.all_special_ids if i < lsm.shape[-1]})
        lsm[:, special] = float("-inf")
        values, tokens = lsm.topk(min(top_k, lsm.shape[-1] - len(special)), dim=-1)
        decode = self.tokenizer.decode
        return [
            [(decode([t], skip_special_tokens=True), v) for t, v in zip(toks, vals, strict=True)]
            for toks, vals in zip(tokens.tolist(), values.double().tolist(), strict=True)
        ]


def _logits_at(
    model: Any, ids: torch.Tensor, attn: torch.Tensor, rows: torch.Tensor, pos: torch.Tensor
) -> torch.Tensor:
    """Logits at (rows, pos) only: run the encoder, then the LM head on the selected hidden states, so the
    [batch, length, vocab] tensor is never built. Falls back to the full forward for unusual heads.
    """
    logits: torch.Tensor
    heads = [m for name, m in model.named_children() if name != model.base_model_prefix]
    if len(heads) == 1:
        hidden = model.base_model(input_ids=ids, attention_mask=attn)[0]
        logits = heads[0](hidden[rows, pos])
        return logits
    logits = model(input_ids=ids, attention_mask=attn).logits[rows, pos]
    return logits


def _typed(enc: Encoded, context: tuple[int, ...], mask: int) -> list[Query]:
    """One input per distinct (k, right-hand ids): context, k masks, right, closing special tokens."""
    groups: dict[tuple[int, tuple[int, ...]], list[int]] = {}
    for c, (cand, right) in enumerate(zip(enc.candidates, enc.rights, strict=True)):
        groups.setdefault((len(cand), right), []).append(c)
    queries = []
    for (k, right), members in groups.items():
        start = len(context)
        reads = tuple((start + j, c, j, enc.candidates[c][j]) for c in members for j in range(k))
        queries.append(Query(context + (mask,) * k + right + enc.suffix, reads))
    return queries


def _l2r(enc: Encoded, context: tuple[int, ...], mask: int) -> list[Query]:
    """One input per distinct (filled subwords, right-hand ids): context, subwords 0..i-1, one mask, right."""
    groups: dict[tuple[tuple[int, ...], tuple[int, ...]], list[tuple[int, int, int, int]]] = {}
    for c, (cand, right) in enumerate(zip(enc.candidates, enc.rights, strict=True)):
        for i, token in enumerate(cand):
            groups.setdefault((cand[:i], right), []).append((len(context) + i, c, i, token))
    return [
        Query(context + filled + (mask,) + right + enc.suffix, tuple(reads))
        for (filled, right), reads in groups.items()
    ]


# the share of a chunk's input that may be padding before a longer query starts a new chunk
PADDING = 0.1


def _length_chunks(
    queries: list[tuple[int, Query]], budget: int
) -> Iterator[list[tuple[int, Query]]]:
    """Consecutive chunks of `queries` (sorted by length) whose padded size (count x longest) fits `budget` and
    holds at most `PADDING` of padding.
    """
    chunk: list[tuple[int, Query]] = []
    real = 0
    for query in queries:
        length = len(query[1].ids)
        padded = (len(chunk) + 1) * length
        if chunk and (padded > budget or padded > (1 + PADDING) * (real + length)):
            yield chunk
            chunk, real = [], 0
        chunk.append(query)
        real += length
    if chunk:
        yield chunk
