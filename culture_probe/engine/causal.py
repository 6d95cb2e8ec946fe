"""Causal backend: log P(candidate | left) by teacher forcing, fast for large candidate sets.

The candidates of a request form a token trie. The first token's log-prob comes from the context's last position;
every inner trie node runs once; leaves never run (nothing is predicted from them); the log-softmax is taken in
float32 only at positions that predict candidate tokens. Two ways to run the trie:
- packed (models that take position ids and a 4D mask): the context and the inner nodes form one sequence with a
  tree attention mask (a node sees the context and its own ancestors), positions = context length + depth - 1;
- cached (others, e.g. ALiBi models such as BLOOM): the contexts run once with their KV cache kept, then the inner
  nodes run level by level, one token per row, on a copy of their parent's cache.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from culture_probe.engine.backend import Backend, iter_chunks, logprobs_at
from culture_probe.engine.types import ScoreOptions, ScoreRequest

if TYPE_CHECKING:
    import torch
    from transformers import DynamicCache


@dataclass(frozen=True)
class Trie:
    """Candidate token sequences merged on shared prefixes. Node n has `tokens[n]` and `parents[n]` (-1 at the
    top); `paths[c]` lists the nodes of candidate c.
    """

    tokens: tuple[int, ...]
    parents: tuple[int, ...]
    children: tuple[tuple[int, ...], ...]
    paths: tuple[tuple[int, ...], ...]

    @classmethod
    def build(cls, sequences: list[tuple[int, ...]]) -> Trie:
        """Merge `sequences` into a trie."""
        index: dict[tuple[int, int], int] = {}
        tokens: list[int] = []
        parents: list[int] = []
        children: list[list[int]] = []
        paths = []
        for seq in sequences:
            parent, path = -1, []
            for token in seq:
                node = index.get((parent, token))
                if node is None:
                    node = index[(parent, token)] = len(tokens)
                    tokens.append(token)
                    parents.append(parent)
                    children.append([])
                    if parent >= 0:
                        children[parent].append(node)
                path.append(node)
                parent = node
            paths.append(tuple(path))
        return cls(tuple(tokens), tuple(parents), tuple(map(tuple, children)), tuple(paths))

    @property
    def inner(self) -> int:
        """Number of nodes with children (the ones that run through the model)."""
        return sum(1 for c in self.children if c)


@dataclass(frozen=True)
class CausalItem:
    """A request ready to score: context ids and the trie of its continuations."""

    context: tuple[int, ...]
    trie: Trie


@functools.lru_cache(maxsize=64)
def _trie(sequences: tuple[tuple[int, ...], ...]) -> Trie:
    """The trie of `sequences`, built once for requests that share their candidate ids (a benchmark asks every
    subject about the same candidate set).
    """
    return Trie.build(list(sequences))


class CausalScorer(Backend):
    """Decoder-only models: GPT-2, Llama/Qwen/Mistral-style, BLOOM, ..."""

    kind = "causal"
    auto_class = "AutoModelForCausalLM"

    def _prepare(self, request: ScoreRequest, options: ScoreOptions) -> CausalItem:
        enc = self.encoder.encode(request, with_right=options.score_right)
        sequences = [c + r for c, r in zip(enc.candidates, enc.rights, strict=True)]
        longest = max(range(len(sequences)), key=lambda c: len(sequences[c]))
        context = self.encoder.fit(
            enc.context,
            {"candidate": len(enc.candidates[longest]), "right text": len(enc.rights[longest])},
            request.max_tokens,
        )
        return CausalItem(context, _trie(tuple(sequences)))

    def _cost(self, item: CausalItem) -> int:
        return len(item.context) + item.trie.inner

    def _score_batch(
        self, items: list[CausalItem], options: ScoreOptions, budget: int
    ) -> list[list[np.ndarray]]:
        import torch

        run = _PackedRun if _can_pack(self.model) else _CachedRun
        with torch.inference_mode():
            return run(self.model, items, budget, self.tokenizer.pad_token_id).run()


class _CachedRun:
    """One batch of causal items: the context pass, then the trie descent on copies of the KV cache."""

    def __init__(
        self, model: Any, items: list[CausalItem], budget: int, pad_id: int | None
    ) -> None:
        import torch

        self.model, self.items, self.budget = model, items, budget
        params = inspect.signature(model.forward).parameters
        self.pass_positions = "position_ids" in params
        self.keep_last = "logits_to_keep" in params
        device = next(model.parameters()).device
        self.device = device
        # Flatten every item's trie into one node table; offsets map local node ids to global ones.
        sizes = [len(it.trie.tokens) for it in items]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.tokens = torch.tensor(
            [t for it in items for t in it.trie.tokens], dtype=torch.long, device=device
        )
        self.item_of = np.repeat(np.arange(len(items)), sizes)
        self.logp = torch.zeros(int(self.offsets[-1]), dtype=torch.float32, device=device)
        lengths = [len(it.context) for it in items]
        self.T = max(lengths)
        ids = torch.full(
            (len(items), self.T), pad_id if pad_id is not None else 0, dtype=torch.long
        )
        mask = torch.zeros((len(items), self.T), dtype=torch.long)
        for row, it in enumerate(items):  # left padding: every context ends at position T-1
            ids[row, self.T - len(it.context) :] = torch.tensor(it.context)
            mask[row, self.T - len(it.context) :] = 1
        self.ids, self.mask = ids.to(device), mask.to(device)
        self.lengths = torch.tensor(lengths, device=device)

    def _children(self, node: int) -> tuple[int, ...]:
        item = int(self.item_of[node])
        base = int(self.offsets[item])
        return tuple(base + c for c in self.items[item].trie.children[node - base])

    def _forward(
        self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, cache: Any
    ) -> Any:
        kwargs: dict[str, Any] = {"position_ids": positions} if self.pass_positions else {}
        if self.keep_last:
            kwargs["logits_to_keep"] = 1
        return self.model(
            input_ids=ids, attention_mask=mask, past_key_values=cache, use_cache=True, **kwargs
        )

    def _record(self, logits: torch.Tensor, kids_per_row: list[tuple[int, ...]]) -> None:
        """Store the log-probs of the nodes each row predicts."""
        import torch

        kids = [k for row in kids_per_row for k in row]
        owner = [r for r, row in enumerate(kids_per_row) for _ in row]
        kids_t = torch.tensor(kids, dtype=torch.long, device=self.device)
        owner_t = torch.tensor(owner, dtype=torch.long, device=self.device)
        self.logp[kids_t] = logprobs_at(logits, owner_t, self.tokens[kids_t])

    def run(self) -> list[list[np.ndarray]]:
        """Score every candidate of every item."""
        positions = (self.mask.cumsum(-1) - 1).clamp(min=0)
        out = self._forward(self.ids, self.mask, positions, None)
        firsts = [
            tuple(int(self.offsets[i]) + n for n, p in enumerate(it.trie.parents) if p < 0)
            for i, it in enumerate(self.items)
        ]
        self._record(out.logits[:, -1], firsts)
        top = [n for row in firsts for n in row if self._children(n)]
        self._descend(out.past_key_values, top, [int(self.item_of[n]) for n in top], depth=1)
        logp = self.logp.double().cpu().numpy()
        return [
            [logp[self.offsets[i] + np.asarray(path, dtype=np.int64)] for path in it.trie.paths]
            for i, it in enumerate(self.items)
        ]

    def _descend(self, cache: Any, nodes: list[int], rows: list[int], depth: int) -> None:
        """Run the inner `nodes` at `depth` (one token each) on their parents' cache rows, then their children."""
        import torch

        for part in iter_chunks(len(nodes), self.budget // (self.T + depth)):
            chunk, parent_rows = nodes[part], rows[part]
            owners = torch.tensor(self.item_of[chunk], dtype=torch.long, device=self.device)
            mask = torch.cat([self.mask[owners], self.mask.new_ones((len(chunk), depth))], dim=1)
            positions = (self.lengths[owners] + depth - 1)[:, None]
            ids = self.tokens[torch.tensor(chunk, device=self.device)][:, None]
            sub = _select(cache, torch.tensor(parent_rows, dtype=torch.long, device=self.device))
            out = self._forward(ids, mask, positions, sub)
            self._record(out.logits[:, -1], [self._children(n) for n in chunk])
            inner = [
                (kid, row)
                for row, node in enumerate(chunk)
                for kid in self._children(node)
                if self._children(kid)
            ]
            if inner:
                self._descend(
                    out.past_key_values, [k for k, _ in inner], [r for _, r in inner], depth + 1
                )


def _select(
    cache: Any, rows: torch.Tensor
) -> DynamicCache | tuple[tuple[torch.Tensor, torch.Tensor], ...]:
    """A new cache holding only batch `rows` of `cache` (the original stays intact for sibling chunks)."""
    from transformers import DynamicCache

    if hasattr(cache, "layers"):
        return DynamicCache(
            ddp_cache_data=[(layer.keys[rows], layer.values[rows]) for layer in cache.layers]
        )
    return tuple((k[rows], v[rows]) for k, v in cache)


# packed row length: the (quadratic) attention over a row stays small next to its linear layers
ROW_TOKENS = 256


def _can_pack(model: Any) -> bool:
    """Whether the model takes explicit positions and a 4D mask (ALiBi models derive positions from the mask;
    flash-attention kernels take no arbitrary mask).
    """
    config = model.config
    if config.model_type in ("bloom", "mpt") or getattr(config, "alibi", False):
        return False
    if "flash" in str(getattr(config, "_attn_implementation", "")):
        return False
    return "position_ids" in inspect.signature(model.forward).parameters


def _pack(trie: Trie, room: int) -> list[tuple[list[int], list[bool]]]:
    """Split the inner nodes (depth-first order) into rows of at most `room` nodes; a row repeats the ancestors
    it needs (marked not owned, so their outputs are read once).
    """
    rows: list[tuple[list[int], list[bool]]] = []
    nodes: list[int] = []
    owned: list[bool] = []
    present: set[int] = set()
    stack = [n for n in reversed(range(len(trie.tokens))) if trie.parents[n] < 0]
    while stack:
        node = stack.pop()
        if not trie.children[node]:
            continue
        chain = [node]
        while trie.parents[chain[-1]] >= 0 and trie.parents[chain[-1]] not in present:
            chain.append(trie.parents[chain[-1]])
        if nodes and len(nodes) + len(chain) > room:
            rows.append((nodes, owned))
            nodes, owned, present = [], [], set()
            chain = [node]
            while trie.parents[chain[-1]] >= 0:
                chain.append(trie.parents[chain[-1]])
        for n in reversed(chain):
            nodes.append(n)
            owned.append(n == node)
            present.add(n)
        stack.extend(reversed(trie.children[node]))
    if nodes or not rows:
        rows.append((nodes, owned))
    return rows


class _PackedRun:
    """One batch of causal items as packed rows: context + inner trie nodes, with a tree attention mask."""

    def __init__(
        self, model: Any, items: list[CausalItem], budget: int, pad_id: int | None
    ) -> None:
        self.model, self.items, self.budget = model, items, budget
        self.pad = pad_id if pad_id is not None else 0
        self.device = next(model.parameters()).device
        self.rows = [
            (i, nodes, owned, first == 0)
            for i, it in enumerate(items)
            for first, (nodes, owned) in enumerate(_pack(it.trie, self._room(it)))
        ]
        self.logp = [np.zeros(len(it.trie.tokens)) for it in items]

    def _room(self, item: CausalItem) -> int:
        """Inner nodes per row: the row (context included) stays within the row length and the token budget (a
        context longer than half a row gets as many nodes as it has tokens, so it runs at most twice per node), and
        the item's rows come out about equally long.
        """
        n_ctx = len(item.context)
        room = max(min(max(ROW_TOKENS - n_ctx, n_ctx), self.budget - n_ctx), 4)
        rows = -(-item.trie.inner // room)
        # even rows: they batch with little padding
        return max(-(-item.trie.inner // max(rows, 1)), 4)

    def run(self) -> list[list[np.ndarray]]:
        """Score every candidate of every item."""
        rows = sorted(self.rows, key=lambda r: -(len(self.items[r[0]].context) + len(r[1])))
        start = 0
        while start < len(rows):
            width = len(self.items[rows[start][0]].context) + len(rows[start][1])
            take = max(1, self.budget // width)
            self._forward(rows[start : start + take], width)
            start += take
        return [
            [logp[list(path)] for path in it.trie.paths]
            for it, logp in zip(self.items, self.logp, strict=True)
        ]

    def _layout(
        self, row: tuple[int, list[int], list[bool], bool], width: int
    ) -> tuple[list[int], np.ndarray, np.ndarray, list[tuple[int, int, tuple[int, ...]]]]:
        """Ids, positions, additive mask and reads (position, item, predicted nodes) of one packed row."""
        item, nodes, owned, first = row
        it = self.items[item]
        trie, n_ctx = it.trie, len(it.context)
        local = {n: k for k, n in enumerate(nodes)}
        ids = list(it.context) + [trie.tokens[n] for n in nodes]
        depth = np.zeros(len(nodes), dtype=np.int64)
        allowed = np.zeros((width, width), dtype=bool)
        allowed[:n_ctx, :n_ctx] = np.tril(np.ones((n_ctx, n_ctx), dtype=bool))
        for k, n in enumerate(nodes):
            q = n_ctx + k
            parent = trie.parents[n]
            if parent >= 0:
                allowed[q] = allowed[n_ctx + local[parent]]
                depth[k] = depth[local[parent]] + 1
            else:
                allowed[q, :n_ctx] = True
            allowed[q, q] = True
        # padding sees itself only (no NaN rows)
        allowed[len(ids) :, :] = np.eye(width, dtype=bool)[len(ids) :]
        positions = np.concatenate(
            [np.arange(n_ctx), n_ctx + depth, np.zeros(width - len(ids), dtype=np.int64)]
        )
        reads = [(n_ctx + k, item, trie.children[n]) for k, n in enumerate(nodes) if owned[k]]
        if first:
            reads.append((n_ctx - 1, item, tuple(n for n, p in enumerate(trie.parents) if p < 0)))
        return ids + [self.pad] * (width - len(ids)), positions, allowed, reads

    def _forward(self, rows: list[tuple[int, list[int], list[bool], bool]], width: int) -> None:
        import torch

        layouts = [self._layout(row, width) for row in rows]
        ids = torch.tensor([lay[0] for lay in layouts], device=self.device)
        positions = torch.tensor(np.stack([lay[1] for lay in layouts]), device=self.device)
        allowed = torch.tensor(np.stack([lay[2] for lay in layouts]), device=self.device)[:, None]
        dtype = next(self.model.parameters()).dtype
        mask = torch.zeros(allowed.shape, dtype=dtype, device=self.device)
        mask.masked_fill_(~allowed, torch.finfo(dtype).min)
        reads = [
            (b, pos, item, kids) for b, lay in enumerate(layouts) for pos, item, kids in lay[3]
        ]
        b_idx = torch.tensor([r[0] for r in reads], device=self.device)
        p_idx = torch.tensor([r[1] for r in reads], device=self.device)
        logits = _logits_at(self.model, ids, mask, positions, b_idx, p_idx)
        owner = [k for k, r in enumerate(reads) for _ in r[3]]
        tokens = [self.items[r[2]].trie.tokens[n] for r in reads for n in r[3]]
        values: torch.Tensor | np.ndarray  # the log-probs, then their numpy copy
        values = logprobs_at(
            logits,
            torch.tensor(owner, device=self.device),
            torch.tensor(tokens, device=self.device),
        )
        values = values.double().cpu().numpy()
        at = 0
        for _, _, item, kids in reads:
            self.logp[item][list(kids)] = values[at : at + len(kids)]
            at += len(kids)


def _logits_at(
    model: Any,
    ids: torch.Tensor,
    mask: torch.Tensor,
    positions: torch.Tensor,
    b_idx: torch.Tensor,
    p_idx: torch.Tensor,
) -> torch.Tensor:
    """Logits at (b_idx, p_idx) only: the LM head runs on the selected hidden states, so [B, L, vocab] is never
    built. Models that post-process logits (soft-capping, scaling) take the plain forward.
    """
    logits: torch.Tensor
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
        return logits
    hidden = model.base_model(
        input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=False
    )[0]
    logits = head(hidden[b_idx, p_idx])
    return logits
