"""Causal backend: log P(candidate | left) by teacher forcing, fast for large candidate sets.

The candidates of a request form a token trie (`culture_probe.engine.trie`), built once per
candidate set. The first token's log-prob comes from the context's last position; every inner trie
node runs once; leaves never run (nothing is predicted from them); the log-softmax is taken in
float32 only at positions that predict candidate tokens. Two ways to run the trie:
- packed (models that take position ids and a 4D mask): the context and the inner nodes form one
  sequence with a tree attention mask (a node sees the context and its own ancestors), positions =
  context length + depth - 1;
- cached (others, e.g. ALiBi models such as BLOOM): the contexts run once with their KV cache kept,
  then the inner nodes run level by level, one token per row, on a copy of their parent's cache.
Batches are laid out from the trie's arrays, so no step loops over candidates in Python.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from culture_probe.engine.backend import Backend, iter_chunks, logprobs_at
from culture_probe.engine.encoding import Encoded
from culture_probe.engine.tokens import TokenRows, owners, spread
from culture_probe.engine.trie import PackedRow, Trie
from culture_probe.engine.types import ScoreOptions, ScoreRequest

if TYPE_CHECKING:
    import torch
    from transformers import DynamicCache, PreTrainedModel


@dataclass(frozen=True)
class CausalItem:
    """A request ready to score: context ids, the trie of its continuations and the token of each
    node (the trie's own, or this request's in a trie shared by the requests whose continuations
    differ only in their tokens).
    """

    context: tuple[int, ...]
    trie: Trie
    tokens: np.ndarray


@dataclass(frozen=True, eq=False)
class Chained:
    """The trie of a candidate set each followed by the same L right-hand tokens, with placeholders
    (`base`, `base` + 1, ...) for those: its shape is every such request's, where no first
    right-hand token equals a candidate token it would then merge with (`meets`, the tokens of the
    candidates that go on after one ends).
    """

    trie: Trie
    base: int
    meets: frozenset[int]

    @classmethod
    def of(cls, rows: TokenRows, length: int) -> Chained:
        """The chained trie of `rows`, each followed by `length` placeholders."""
        base = int(rows.ids.max()) + 1
        trie = Trie.build(rows.then(TokenRows.repeat(range(base, base + length), len(rows))))
        kids, parent = trie.children, np.repeat(np.arange(len(trie)), trie.children.lengths)
        ends = set(parent[trie.tokens[kids.ids] == base].tolist())
        meets = {
            int(trie.tokens[k])
            for k, p in zip(kids.ids.tolist(), parent.tolist(), strict=True)
            if p in ends
        }
        return cls(trie, base, frozenset(meets - {base}))

    def tokens(self, right: tuple[int, ...]) -> np.ndarray:
        """The node tokens of the request whose right-hand ids are `right`."""
        tokens: np.ndarray = self.trie.tokens.copy()
        chain = tokens >= self.base
        tokens[chain] = np.asarray(right, dtype=np.int64)[tokens[chain] - self.base]
        return tokens


class CausalScorer(Backend):
    """Decoder-only models: GPT-2, Llama/Qwen/Mistral-style, BLOOM, ..."""

    kind = "causal"
    auto_class = "AutoModelForCausalLM"

    def _prepare_all(
        self, requests: Sequence[ScoreRequest], options: ScoreOptions
    ) -> list[CausalItem]:
        items = []
        for request, enc in zip(
            requests, self.encoder.encode_all(requests, with_right=options.score_right), strict=True
        ):
            if options.score_right and request.right:
                trie, tokens = _continued(enc)
                longest = int(np.argmax(enc.candidates.lengths + enc.rights.lengths))
            else:
                trie = enc.candidates.derive("trie", Trie.build)
                tokens = trie.tokens
                longest = enc.candidates.derive(
                    "longest", lambda rows: int(np.argmax(rows.lengths))
                )
            context = self.encoder.fit(
                enc.context,
                {
                    "candidate": int(enc.candidates.lengths[longest]),
                    "right text": int(enc.rights.lengths[longest]),
                },
                request.max_tokens,
            )
            items.append(CausalItem(context, trie, tokens))
        return items

    def _cost(self, item: CausalItem) -> int:
        return len(item.context) + item.trie.inner

    def _reads(self, item: CausalItem) -> int:
        # the context's last position and each inner node predict the tokens after them
        return item.trie.inner + 1

    def _scored(self, item: CausalItem) -> TokenRows:
        return item.trie.paths

    def _score_batch(
        self, items: list[CausalItem], options: ScoreOptions, budget: int
    ) -> list[np.ndarray]:
        import torch

        run = _PackedRun if _can_pack(self.model) else _CachedRun
        with torch.inference_mode():
            logp = run(self.model, items, budget, self.tokenizer.pad_token_id).run()
        return [logp[i][it.trie.paths.ids] for i, it in enumerate(items)]


def _continued(enc: Encoded) -> tuple[Trie, np.ndarray]:
    """The trie and node tokens of candidates each followed by its right-hand text: the candidate
    set's chained trie where every candidate is followed by the same ids (built once per set and
    length), else a trie of its own.
    """
    if enc.right is not None:
        chained = enc.candidates.derive(
            ("chained", len(enc.right)), lambda rows: Chained.of(rows, len(enc.right or ()))
        )
        if enc.right[0] not in chained.meets:
            return chained.trie, chained.tokens(enc.right)
    trie = Trie.build(enc.candidates.then(enc.rights))
    return trie, trie.tokens


class _Nodes:
    """The nodes of a batch's tries in one table: item i's node n is node `base[i] + n`."""

    def __init__(self, items: list[CausalItem]):
        sizes = np.array([len(it.trie) for it in items], dtype=np.int64)
        self.base = np.zeros(len(items) + 1, dtype=np.int64)
        np.cumsum(sizes, out=self.base[1:])
        self.item = owners(sizes)
        self.tokens = (
            np.concatenate([it.tokens for it in items]) if items else np.zeros(0, np.int64)
        )
        kids = [it.trie.children for it in items]
        self.kid_starts = np.concatenate(
            [k.starts[:-1] + off for k, off in zip(kids, self._kid_offsets(kids), strict=True)]
            + [np.array([sum(len(k.ids) for k in kids)])]
        )
        self.kids = np.concatenate([k.ids + b for k, b in zip(kids, self.base[:-1], strict=True)])
        self.has_kids = np.diff(self.kid_starts) > 0

    @staticmethod
    def _kid_offsets(kids: list[TokenRows]) -> np.ndarray:
        offsets = np.zeros(len(kids), dtype=np.int64)
        np.cumsum([len(k.ids) for k in kids[:-1]], out=offsets[1:])
        return offsets

    def children(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The children of `nodes` (global ids), concatenated in order, and which of `nodes` each
        belongs to.
        """
        lengths = self.kid_starts[nodes + 1] - self.kid_starts[nodes]
        return self.kids[spread(self.kid_starts[nodes], lengths)], owners(lengths)

    def split(self, logp: np.ndarray) -> list[np.ndarray]:
        """One table's node values as each item's own."""
        return [logp[a:b] for a, b in zip(self.base[:-1], self.base[1:], strict=True)]


class _CachedRun:
    """One batch of causal items: the context pass, then the trie descent on copies of the KV
    cache.
    """

    def __init__(
        self, model: PreTrainedModel, items: list[CausalItem], budget: int, pad_id: int | None
    ) -> None:
        import torch

        self.model, self.items, self.budget = model, items, budget
        params = inspect.signature(model.forward).parameters
        self.pass_positions = "position_ids" in params
        self.keep_last = "logits_to_keep" in params
        device = next(model.parameters()).device
        self.device = device
        self.nodes = _Nodes(items)
        self.tokens = torch.from_numpy(self.nodes.tokens).to(device)
        self.logp = torch.zeros(len(self.nodes.tokens), dtype=torch.float32, device=device)
        lengths = np.array([len(it.context) for it in items], dtype=np.int64)
        self.T = int(lengths.max())
        # left padding: every context ends at position T-1
        ids = np.full((len(items), self.T), pad_id if pad_id is not None else 0, dtype=np.int64)
        ids[owners(lengths), spread(self.T - lengths, lengths)] = np.concatenate(
            [it.context for it in items]
        )
        mask = (np.arange(self.T)[None, :] >= (self.T - lengths)[:, None]).astype(np.int64)
        self.ids, self.mask = torch.from_numpy(ids).to(device), torch.from_numpy(mask).to(device)
        self.lengths = torch.from_numpy(lengths).to(device)

    def _forward(
        self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, cache: Any
    ) -> Any:
        kwargs: dict[str, Any] = {"position_ids": positions} if self.pass_positions else {}
        if self.keep_last:
            kwargs["logits_to_keep"] = 1
        return self.model(
            input_ids=ids, attention_mask=mask, past_key_values=cache, use_cache=True, **kwargs
        )

    def _record(self, logits: torch.Tensor, rows_of: np.ndarray) -> np.ndarray:
        """Store the log-probs of the children of the nodes that rows `rows_of` of `logits` ran
        (global node ids, one per row) and return those children with the row each came from.
        """
        import torch

        kids, row = self.nodes.children(rows_of)
        kids_t = torch.from_numpy(kids).to(self.device)
        self.logp[kids_t] = logprobs_at(
            logits, torch.from_numpy(row).to(self.device), self.tokens[kids_t]
        )
        return np.stack([kids, row])

    def run(self) -> list[np.ndarray]:
        """Every node's log-prob, per item."""
        positions = (self.mask.cumsum(-1) - 1).clamp(min=0)
        out = self._forward(self.ids, self.mask, positions, None)
        # the top nodes, predicted from each context's last position
        roots = np.concatenate(
            [it.trie.roots + b for it, b in zip(self.items, self.nodes.base[:-1], strict=True)]
        )
        row = self.nodes.item[roots]
        roots_t = torch_tensor(roots, self.device)
        self.logp[roots_t] = logprobs_at(
            out.logits[:, -1], torch_tensor(row, self.device), self.tokens[roots_t]
        )
        top = self.nodes.has_kids[roots]
        self._descend(out.past_key_values, roots[top], row[top], depth=1)
        return self.nodes.split(self.logp.double().cpu().numpy())

    def _descend(self, cache: Any, nodes: np.ndarray, rows: np.ndarray, depth: int) -> None:
        """Run the inner `nodes` at `depth` (one token each) on their parents' cache rows, then
        their children.
        """
        import torch

        for part in iter_chunks(len(nodes), self.budget // (self.T + depth)):
            chunk, parent_rows = nodes[part], rows[part]
            owners_t = torch_tensor(self.nodes.item[chunk], self.device)
            mask = torch.cat([self.mask[owners_t], self.mask.new_ones((len(chunk), depth))], dim=1)
            positions = (self.lengths[owners_t] + depth - 1)[:, None]
            ids = self.tokens[torch_tensor(chunk, self.device)][:, None]
            sub = _select(cache, torch_tensor(parent_rows, self.device))
            out = self._forward(ids, mask, positions, sub)
            kids, row = self._record(out.logits[:, -1], chunk)
            inner = self.nodes.has_kids[kids]
            if inner.any():
                self._descend(out.past_key_values, kids[inner], row[inner], depth + 1)


def torch_tensor(values: np.ndarray, device: Any) -> torch.Tensor:
    """An int64 index array as a tensor on `device`."""
    import torch

    return torch.from_numpy(np.ascontiguousarray(values, dtype=np.int64)).to(device)


def _select(
    cache: Any, rows: torch.Tensor
) -> DynamicCache | tuple[tuple[torch.Tensor, torch.Tensor], ...]:
    """A new cache holding only batch `rows` of `cache` (the original stays intact for sibling
    chunks).
    """
    from transformers import DynamicCache

    if hasattr(cache, "layers"):
        return DynamicCache(
            ddp_cache_data=[(layer.keys[rows], layer.values[rows]) for layer in cache.layers]
        )
    return tuple((k[rows], v[rows]) for k, v in cache)


# packed row length: the (quadratic) attention over a row stays small next to its linear layers
ROW_TOKENS = 256


def _can_pack(model: PreTrainedModel) -> bool:
    """Whether the model takes explicit positions and a 4D mask (ALiBi models derive positions from
    the mask; flash-attention kernels take no arbitrary mask).
    """
    config = model.config
    if config.model_type in ("bloom", "mpt") or getattr(config, "alibi", False):
        return False
    if "flash" in str(getattr(config, "_attn_implementation", "")):
        return False
    return "position_ids" in inspect.signature(model.forward).parameters


class _PackedRun:
    """One batch of causal items as packed rows: context + inner trie nodes, with a tree attention
    mask.
    """

    def __init__(
        self, model: PreTrainedModel, items: list[CausalItem], budget: int, pad_id: int | None
    ) -> None:
        self.model, self.items, self.budget = model, items, budget
        self.pad = pad_id if pad_id is not None else 0
        self.device = next(model.parameters()).device
        self.nodes = _Nodes(items)
        self.rows = [
            (i, row) for i, it in enumerate(items) for row in it.trie.packed(self._room(it))
        ]
        self.logp = np.zeros(len(self.nodes.tokens))

    def _room(self, item: CausalItem) -> int:
        """Inner nodes per row: the row (context included) stays within the row length and the token
        budget (a context longer than half a row gets as many nodes as it has tokens, so it runs at
        most twice per node), and the item's rows come out about equally long.
        """
        n_ctx = len(item.context)
        room = max(min(max(ROW_TOKENS - n_ctx, n_ctx), self.budget - n_ctx), 4)
        rows = -(-item.trie.inner // room)
        # even rows: they batch with little padding
        return max(-(-item.trie.inner // max(rows, 1)), 4)

    def run(self) -> list[np.ndarray]:
        """Every node's log-prob, per item."""
        rows = sorted(self.rows, key=lambda r: -(len(self.items[r[0]].context) + len(r[1].nodes)))
        start = 0
        while start < len(rows):
            width = len(self.items[rows[start][0]].context) + len(rows[start][1].nodes)
            take = max(1, self.budget // width)
            self._forward(rows[start : start + take], width)
            start += take
        return self.nodes.split(self.logp)

    def _forward(self, rows: list[tuple[int, PackedRow]], width: int) -> None:
        import torch

        n = len(rows)
        ids = np.full((n, width), self.pad, dtype=np.int64)
        positions = np.zeros((n, width), dtype=np.int64)
        allowed = np.zeros((n, width, width), dtype=bool)
        allowed[:, np.arange(width), np.arange(width)] = (
            True  # padding sees itself only (no NaN rows)
        )
        b_idx, p_idx, kid_parts = [], [], []
        for b, (item, row) in enumerate(rows):
            it = self.items[item]
            n_ctx, m = len(it.context), len(row.nodes)
            ids[b, :n_ctx] = it.context
            ids[b, n_ctx : n_ctx + m] = it.tokens[row.nodes]
            positions[b, :n_ctx] = np.arange(n_ctx)
            positions[b, n_ctx : n_ctx + m] = n_ctx + row.depth
            allowed[b, :n_ctx, :n_ctx] = np.tri(n_ctx, dtype=bool)
            allowed[b, n_ctx : n_ctx + m, :n_ctx] = True
            allowed[b, n_ctx : n_ctx + m, n_ctx : n_ctx + m] = row.sees
            b_idx.append(np.full(len(row.read_at), b, dtype=np.int64))
            p_idx.append(n_ctx + row.read_at)
            kid_parts.append(row.reads.ids + self.nodes.base[item])
        dtype = next(self.model.parameters()).dtype
        allowed_t = torch.from_numpy(allowed).to(self.device)[:, None]
        mask = torch.zeros(allowed_t.shape, dtype=dtype, device=self.device)
        mask.masked_fill_(~allowed_t, torch.finfo(dtype).min)
        reads_per_row = [r.reads.lengths for _, r in rows]
        kids = np.concatenate(kid_parts)
        owner = owners(np.concatenate(reads_per_row))
        self.logp[kids] = _scores_at(
            self.model,
            torch_tensor(ids, self.device),
            mask,
            torch_tensor(positions, self.device),
            torch_tensor(np.concatenate(b_idx), self.device),
            torch_tensor(np.concatenate(p_idx), self.device),
            torch_tensor(owner, self.device),
            torch_tensor(self.nodes.tokens[kids], self.device),
        )


def _scores_at(
    model: PreTrainedModel,
    ids: torch.Tensor,
    mask: torch.Tensor,
    positions: torch.Tensor,
    b_idx: torch.Tensor,
    p_idx: torch.Tensor,
    owner: torch.Tensor,
    tokens: torch.Tensor,
) -> np.ndarray:
    """What a batch runs on the device: the forward pass, the LM head at the read positions (b_idx,
    p_idx) only (so [B, L, vocab] is never built), the log-prob of each of `tokens` there (read
    `owner[j]`), as float64 on the host; the [reads, vocabulary] logits are freed before it returns.
    Models that post-process logits (soft-capping, scaling) take the plain forward.
    """
    config = model.config
    head = model.get_output_embeddings()
    if (
        head is None
        or getattr(config, "final_logit_softcapping", None)
        or getattr(config, "logit_scale", None)
    ):
        logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits[
            b_idx, p_idx
        ]
    else:
        hidden = model.base_model(
            input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=False
        )[0]
        logits = head(hidden[b_idx, p_idx])
    values = logprobs_at(logits, owner, tokens)
    del logits
    out: np.ndarray = values.double().cpu().numpy()
    return out
