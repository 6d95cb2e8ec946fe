"""Masked backend: candidates scored at [MASK] positions, with only their ids gathered, on the
device.

Two rules (docs/engine.md): "typed" querying (mLAMA/DLAMA/FmLAMA): a k-subword candidate fills k
masks and every candidate of the same k shares one forward; "l2r" (CAMeL): subword i is predicted by
one mask with subwords 0..i-1 filled in, and candidates sharing those subwords share the forward.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from culture_probe.engine.backend import Backend, logprobs_at
from culture_probe.engine.tokens import TokenRows, owners, padded, spread
from culture_probe.engine.types import FillMaskOptions, ScoreOptions, ScoreRequest, make_options
from culture_probe.errors import InvalidValueError, UnsupportedModelError

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel


@dataclass(frozen=True)
class Query:
    """One model input and what to read from it: `reads[j] = (position, candidate, subword, token
    id)` (what a preview shows; scoring works on `MaskPlan`'s arrays).
    """

    ids: tuple[int, ...]
    reads: tuple[tuple[int, int, int, int], ...]


@dataclass(frozen=True, eq=False)
class MaskPlan:
    """What a candidate set asks of a masked model, whatever the context it is asked in: one input
    per query, the context then `fills` row q (typed querying: k masks; l2r: the subwords filled in
    so far and one mask) then the right text, and the reads of each query: the fill positions whose
    predictions it reads (`slots` row q, from the end of the context), and per read (`reads` row q,
    in order) which of the query's slots predicts it (`read_slot`), the token (`read_token`) and
    where its log-prob goes in the candidates' token layout (`read_place`). Built once per candidate
    set and rule (`TokenRows.derive`).
    """

    fills: TokenRows
    slots: TokenRows
    reads: TokenRows  # row q: the indices of query q's reads in the three flat arrays below
    read_slot: np.ndarray
    read_token: np.ndarray
    read_place: np.ndarray
    longest: int  # the candidate with the most subwords (the first of them)

    @classmethod
    def typed(cls, rows: TokenRows, mask: int) -> MaskPlan:
        """Typed querying: one query per distinct subword count k, in the order candidates first
        have it.
        """
        lengths = rows.lengths
        counts, first = np.unique(lengths, return_index=True)
        queries = []
        for k in counts[np.argsort(first, kind="stable")]:
            members = np.flatnonzero(lengths == k)
            places = rows.starts[members][:, None] + np.arange(k)
            queries.append(
                ([mask] * int(k), np.arange(k), np.tile(np.arange(k), len(members)), places.ravel())
            )
        return cls._of(queries, rows)

    @classmethod
    def l2r(cls, rows: TokenRows, mask: int) -> MaskPlan:
        """Left to right: one query per distinct (subwords filled in, then one mask), in the order
        first met.
        """
        groups: dict[tuple[int, ...], list[int]] = {}
        for c, cand in enumerate(rows.tuples()):
            for i in range(len(cand)):
                groups.setdefault(cand[:i], []).append(int(rows.starts[c]) + i)
        queries = [
            (
                [*filled, mask],
                np.array([len(filled)]),
                np.zeros(len(places), np.int64),
                np.array(places),
            )
            for filled, places in groups.items()
        ]
        return cls._of(queries, rows)

    @classmethod
    def _of(
        cls, queries: list[tuple[list[int], np.ndarray, np.ndarray, np.ndarray]], rows: TokenRows
    ) -> MaskPlan:
        places = np.concatenate([q[3] for q in queries]).astype(np.int64)
        counts = [len(q[3]) for q in queries]
        starts = np.zeros(len(queries) + 1, dtype=np.int64)
        np.cumsum(counts, out=starts[1:])
        return cls(
            fills=TokenRows.of([q[0] for q in queries]),
            slots=TokenRows.of([q[1] for q in queries]),
            reads=TokenRows(np.arange(int(starts[-1]), dtype=np.int64), starts),
            read_slot=np.concatenate([q[2] for q in queries]).astype(np.int64),
            read_token=rows.ids[places],
            read_place=places,
            longest=int(np.argmax(rows.lengths)),
        )

    @cached_property
    def fill_tokens(self) -> int:
        """The fill tokens of all queries together (a request's cost beside its context and right
        text).
        """
        return int(self.fills.lengths.sum())


@dataclass(frozen=True, eq=False)
class MaskedItem:
    """A request ready to score: its context (fitted to the model), what follows the slot (the right
    text and the closing special tokens), its candidates' token rows and the plan of inputs they
    need.
    """

    context: tuple[int, ...]
    tail: tuple[int, ...]
    candidates: TokenRows
    plan: MaskPlan

    def queries(self) -> list[Query]:
        """The inputs as `Query`s (what a preview shows)."""
        plan, n = self.plan, len(self.context)
        cand_of = np.searchsorted(self.candidates.starts, plan.read_place, side="right") - 1
        out = []
        for q in range(len(plan.fills)):
            slots = plan.slots[q]
            reads = tuple(
                (
                    n + slots[int(plan.read_slot[r])],
                    int(cand_of[r]),
                    int(plan.read_place[r] - self.candidates.starts[cand_of[r]]),
                    int(plan.read_token[r]),
                )
                for r in plan.reads[q]
            )
            out.append(Query(self.context + plan.fills[q] + self.tail, reads))
        return out


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

    def _prepare_all(
        self, requests: Sequence[ScoreRequest], options: ScoreOptions
    ) -> list[MaskedItem]:
        mask = self.tokenizer.mask_token_id
        build = MaskPlan.typed if options.masked_method == "typed" else MaskPlan.l2r
        items = []
        for request, enc in zip(
            requests,
            self.encoder.encode_all(requests, with_right=True, right_after_mask=True),
            strict=True,
        ):
            right = enc.rights[0]
            holds_mask = enc.candidates.derive(
                "holds mask", lambda rows: bool((rows.ids == mask).any())
            )
            self._refuse_mask_in(
                left=enc.context, candidates=(mask,) if holds_mask else (), right=right
            )
            plan = enc.candidates.derive(
                ("mask plan", options.masked_method), lambda rows: build(rows, mask)
            )
            context = self.encoder.fit(
                enc.context,
                {
                    "candidate": int(enc.candidates.lengths[plan.longest]),
                    "right text": len(right),
                    "closing special tokens": len(enc.suffix),
                },
                request.max_tokens,
            )
            items.append(MaskedItem(context, right + enc.suffix, enc.candidates, plan))
        return items

    def _refuse_mask_in(self, **texts: Iterable[int]) -> None:
        """A literal mask token in a request's text would be read as a second slot: refused, naming
        the text.
        """
        mask = self.tokenizer.mask_token_id
        for name, ids in texts.items():
            if mask in ids:
                raise InvalidValueError(
                    f"The request's {name} text holds the mask token {self.tokenizer.mask_token!r}, which this masked "
                    "model would read as a second slot: remove or rewrite it (the slot is marked by left/right)."
                )

    def _cost(self, item: MaskedItem) -> int:
        queries = len(item.plan.fills)
        return queries * (len(item.context) + len(item.tail)) + item.plan.fill_tokens

    def _reads(self, item: MaskedItem) -> int:
        return len(item.plan.slots.ids)  # every query's mask slots

    def _scored(self, item: MaskedItem) -> TokenRows:
        return item.candidates

    def _score_batch(
        self, items: list[MaskedItem], options: ScoreOptions, budget: int
    ) -> list[np.ndarray]:
        import torch

        batch = _Queries(items, self.tokenizer.pad_token_id or 0)
        out = np.zeros(int(batch.place_base[-1]))
        # Shortest first, in chunks padded to their own longest input: a request's queries range
        # from k = 1 to its longest candidate's k masks, and padding them all to the longest wasted
        # more than half the tokens. The inputs and reads of all of them are laid out at once, a
        # chunk being a run of rows and of reads.
        order = batch.order
        rows, positions, at, tokens, places = batch.reads(order)
        slot_at = _starts(batch.slots.lengths[order]).tolist()
        read_at = _starts(batch.reads_of.lengths[order]).tolist()
        lengths = batch.lengths[order]
        device = self.device
        # on the device once: each chunk is a slice of these
        ids_t, lengths_t, rows_t, positions_t, at_t, tokens_t = (
            torch.from_numpy(x).to(device)
            for x in (batch.inputs(order), lengths, rows, positions, at, tokens)
        )
        columns = torch.arange(int(lengths[-1]), device=device)
        with torch.inference_mode():
            for a, b in _length_chunks(lengths, budget):
                width = int(lengths[b - 1])
                s0, s1, r0, r1 = slot_at[a], slot_at[b], read_at[a], read_at[b]
                out[places[r0:r1]] = _scores_at(
                    self.model,
                    ids_t[a:b, :width].contiguous(),
                    (columns[:width] < lengths_t[a:b, None]).long(),
                    rows_t[s0:s1] - a,
                    positions_t[s0:s1],
                    at_t[r0:r1] - s0,
                    tokens_t[r0:r1],
                )
        return [out[a:b] for a, b in zip(batch.place_base[:-1], batch.place_base[1:], strict=True)]

    def _padded(self, rows: list[tuple[int, ...]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-padded input ids and attention mask (CPU tensors)."""
        import torch

        width = max(map(len, rows))
        ids = padded([np.asarray(r) for r in rows], width, self.tokenizer.pad_token_id or 0)
        lengths = np.array([len(r) for r in rows])
        attn = (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64)
        return torch.from_numpy(ids), torch.from_numpy(attn)

    # ---- fill-mask: the argmax over the vocabulary (MAPS memorisation)
    # ------------------------------------
    def fill_mask(
        self,
        lefts: Sequence[str],
        options: FillMaskOptions | None = None,
        *,
        rights: Sequence[str] | None = None,
        **fields: Any,
    ) -> list[list[tuple[str, float]]]:
        """Per left text, the `top_k` vocabulary pieces at one mask after it, best first, as (text
        decoded with `skip_special_tokens=True`, log-prob over the whole vocabulary); special tokens
        are never predicted.

        The input is what `score` feeds a one-token candidate: `left`, the separator rule (`sep`),
        the mask token, the right text, the special tokens, the context cut on the left if too long.
        Batched by token budget (halved on out-of-memory, as `score` is), in input order.
        """
        options = make_options(FillMaskOptions, options, fields)
        lefts = list(lefts)
        rights = [""] * len(lefts) if rights is None else list(rights)
        if len(rights) != len(lefts):
            raise InvalidValueError(
                f"fill_mask got {len(lefts)} left texts but {len(rights)} right texts; give "
                "one right text per left text (or none)."
            )
        with self.spending.timing("score"):
            return self._fill_masks(lefts, rights, options)

    def _fill_masks(
        self, lefts: list[str], rights: list[str], options: FillMaskOptions
    ) -> list[list[tuple[str, float]]]:
        with self.preparing:  # not while requests are prepared ahead: the encoder is shared
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


def _scores_at(
    model: PreTrainedModel,
    ids: torch.Tensor,
    attn: torch.Tensor,
    rows: torch.Tensor,
    positions: torch.Tensor,
    at: torch.Tensor,
    tokens: torch.Tensor,
) -> np.ndarray:
    """What a batch runs on the device: the encoder, the LM head at the mask positions (rows,
    positions), the log-prob of each of `tokens` at slot `at[j]`, as float64 on the host; the logits
    are freed before it returns.
    """
    logits = _logits_at(model, ids, attn, rows, positions)
    values = logprobs_at(logits, at, tokens)
    del logits
    out: np.ndarray = values.double().cpu().numpy()
    return out


def _logits_at(
    model: PreTrainedModel,
    ids: torch.Tensor,
    attn: torch.Tensor,
    rows: torch.Tensor,
    pos: torch.Tensor,
) -> torch.Tensor:
    """Logits at (rows, pos) only: run the encoder, then the LM head on the selected hidden states,
    so the [batch, length, vocab] tensor is never built. Falls back to the full forward for unusual
    heads.
    """
    logits: torch.Tensor
    heads = [m for name, m in model.named_children() if name != model.base_model_prefix]
    if len(heads) == 1:
        hidden = model.base_model(input_ids=ids, attention_mask=attn)[0]
        logits = heads[0](hidden[rows, pos])
        return logits
    logits = model(input_ids=ids, attention_mask=attn).logits[rows, pos]
    return logits


class _Queries:
    """Every query of a batch of items, as arrays: query j is query `query[j]` of item `item[j]`,
    `lengths[j]` tokens long; `order` sorts them by length (stable). The inputs and reads of any
    subset are laid out by array operations over the batch's contexts, tails and plans, each put in
    one flat array.
    """

    def __init__(self, items: list[MaskedItem], pad: int):
        self.pad = pad
        counts = np.array([len(it.plan.fills) for it in items], dtype=np.int64)
        self.item = owners(counts)
        self.query = spread(np.zeros(len(items), np.int64), counts)
        self.contexts = _flat([np.asarray(it.context, dtype=np.int64) for it in items])
        self.tails = _flat([np.asarray(it.tail, dtype=np.int64) for it in items])
        # the batch's distinct plans, each part of a plan in one flat array with each item's query
        # rows in it
        plans = list({id(it.plan): it.plan for it in items}.values())
        which = {id(p): k for k, p in enumerate(plans)}
        plan_of = np.array([which[id(it.plan)] for it in items], dtype=np.int64)[self.item]
        self.fills = _Part([p.fills for p in plans], plan_of, self.query)
        self.slots = _Part([p.slots for p in plans], plan_of, self.query)
        self.reads_of = _Part([p.reads for p in plans], plan_of, self.query)
        read_base = self.reads_of.base  # each plan's reads: their rows were numbered from 0
        self.read_slot = np.concatenate([p.read_slot for p in plans])
        self.read_token = np.concatenate([p.read_token for p in plans])
        self.read_place = np.concatenate([p.read_place for p in plans])
        self.reads_of.flat = self.reads_of.flat + np.repeat(
            read_base[:-1], [len(p.reads.ids) for p in plans]
        )
        self.n_context = self.contexts.lengths[self.item]
        self.n_tail = self.tails.lengths[self.item]
        self.lengths = self.n_context + self.fills.lengths + self.n_tail
        self.order = np.argsort(self.lengths, kind="stable")
        # where each item's candidate tokens start in the batch's one layout
        self.place_base = _flat([it.candidates.ids for it in items]).starts

    def inputs(self, queries: np.ndarray) -> np.ndarray:
        """The input ids of `queries`, right-padded: context, fill, right text and closing
        tokens.
        """
        a, b, c = self.n_context[queries], self.fills.lengths[queries], self.n_tail[queries]
        items = self.item[queries]
        width = int(self.lengths[queries].max())
        ids = np.full((len(queries), width), self.pad, dtype=np.int64)
        ids[owners(a), spread(np.zeros_like(a), a)] = self.contexts.gather(items)
        ids[owners(b), spread(a, b)] = self.fills.gather(queries)
        ids[owners(c), spread(a + b, c)] = self.tails.gather(items)
        return ids

    def reads(self, queries: np.ndarray) -> tuple[np.ndarray, ...]:
        """For `queries`: the (row, position) of each distinct slot, in order, then per read the
        index of its slot in that list, its token and its place in the batch's candidate-token
        layout.
        """
        n_slots = self.slots.lengths[queries]
        rows = owners(n_slots)
        positions = self.n_context[queries][rows] + self.slots.gather(queries)
        n_reads = self.reads_of.lengths[queries]
        owner = owners(n_reads)
        read = self.reads_of.gather(queries)
        slot_base = np.cumsum(n_slots) - n_slots
        at = slot_base[owner] + self.read_slot[read]
        places = self.place_base[self.item[queries]][owner] + self.read_place[read]
        return rows, positions, at, self.read_token[read], places


@dataclass
class _Flat:
    """Ragged rows in one flat array: row r is `flat[starts[r]:starts[r] + lengths[r]]`."""

    flat: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray

    def gather(self, rows: np.ndarray) -> np.ndarray:
        """Rows `rows`, concatenated."""
        out: np.ndarray = self.flat[spread(self.starts[rows], self.lengths[rows])]
        return out


def _flat(rows: list[np.ndarray]) -> _Flat:
    lengths = np.array([len(r) for r in rows], dtype=np.int64)
    starts = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    flat = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    return _Flat(flat, starts, lengths)


class _Part(_Flat):
    """One part of the batch's plans (their fills, slots or reads) as rows per query of the batch:
    plan k's rows at `base[k]` in one flat array, query j being row `query[j]` of plan `plan_of[j]`.
    """

    def __init__(self, parts: list[TokenRows], plan_of: np.ndarray, query: np.ndarray):
        self.base = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum([len(p.ids) for p in parts], out=self.base[1:])
        firsts = np.concatenate([p.starts[:-1] + b for p, b in zip(parts, self.base, strict=False)])
        row_base = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum([len(p) for p in parts], out=row_base[1:])
        row = row_base[plan_of] + query
        lengths = np.concatenate([p.lengths for p in parts])
        super().__init__(np.concatenate([p.ids for p in parts]), firsts[row], lengths[row])


# the share of a chunk's input that may be padding before a longer query starts a new chunk
PADDING = 0.1


def _length_chunks(lengths: np.ndarray, budget: int) -> Iterator[tuple[int, int]]:
    """Consecutive chunks [a, b) of `lengths` (sorted ascending) whose padded size (count x longest)
    fits `budget` and holds at most `PADDING` of padding.
    """
    begin, real = 0, 0
    for j, length in enumerate(lengths.tolist()):
        padded = (j - begin + 1) * length
        if j > begin and (padded > budget or padded > (1 + PADDING) * (real + length)):
            yield begin, j
            begin, real = j, 0
        real += length
    if begin < len(lengths):
        yield begin, len(lengths)


def _starts(counts: np.ndarray) -> np.ndarray:
    """Where each of consecutive runs of `counts` elements starts, and the end."""
    starts = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    return starts
