"""Engine speed versus a harness-style baseline, on FmLAMA English (issue 2).

20 dishes x every ingredient of the English pool (>= 1,000 candidates), template
"The ingredients of {dish} include {ingredient}", with a 6-layer random-weight GPT-2 and a 6-layer BERT whose
tokenizers are trained on the FmLAMA text. Baselines:
- causal: what lm-evaluation-harness does: one padded forward per context+candidate pair, length-sorted batches
  of 64, full log_softmax over every position;
- masked: per-candidate typed querying: one forward per (dish, candidate) with k masks, batches of 64.
Prints both times, their ratio and the largest score difference. Needs CULTURE_PROBE_MIRROR (or the network).

    python benchmarks/bench_engine.py [--dishes 20] [--hidden 256] [--threads 2]
"""

from __future__ import annotations

import argparse
import ast
import time

import numpy as np
import torch

from culture_probe.data.sources import fetch, read_jsonl
from culture_probe.engine import Scorer, ScoreRequest
from culture_probe.models import tiny_model, train_tokenizer

DISHES_URL = ("https://raw.githubusercontent.com/lizhou21/FmLAMA-master/16c41230d03e53cc5315217f7b9e210cd7dcc7fc/"
              "data/data_lang/en/en_dishes.jsonl")
LEFT = "The ingredients of {dish} include"


def load(n_dishes: int) -> tuple[list[str], list[str]]:
    """The first `n_dishes` dishes and the whole ingredient pool (gold lists are one comma-joined string)."""
    dishes, pool = [], {}
    for _, row in read_jsonl(fetch(DISHES_URL)):
        dishes.append(row["sub_label"])
        for joined in ast.literal_eval(row["obj_label"]):
            pool.update(dict.fromkeys(part.strip() for part in joined.split(", ") if part.strip()))
    return list(dict.fromkeys(dishes))[:n_dishes], sorted(pool)


def _padded(seqs: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), pad)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, seq in enumerate(seqs):
        ids[row, : len(seq)], mask[row, : len(seq)] = torch.tensor(seq), 1
    return ids, mask


@torch.inference_mode()
def harness_causal(model, pairs: list[tuple[list[int], list[int]]], pad: int) -> list[float]:
    """One forward per (context, candidate), length-sorted batches of 64, full log_softmax."""
    order = sorted(range(len(pairs)), key=lambda i: -len(pairs[i][0]) - len(pairs[i][1]))
    out = [0.0] * len(pairs)
    for start in range(0, len(order), 64):
        batch = order[start: start + 64]
        ids, mask = _padded([pairs[i][0] + pairs[i][1] for i in batch], pad)
        logp = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits.float(), dim=-1)
        for row, i in enumerate(batch):
            ctx, cand = pairs[i]
            pos = torch.arange(len(ctx) - 1, len(ctx) - 1 + len(cand))
            out[i] = logp[row, pos, torch.tensor(cand)].sum().item()
    return out


@torch.inference_mode()
def per_candidate_masked(model, items: list[tuple[list[int], list[int], list[int]]], tok) -> list[float]:
    """Typed querying, one forward per (context, candidate) with k masks, batches of 64, full log_softmax."""
    out = [0.0] * len(items)
    for start in range(0, len(items), 64):
        batch = items[start: start + 64]
        seqs = [ctx + [tok.mask_token_id] * len(cand) + suffix for ctx, cand, suffix in batch]
        ids, mask = _padded(seqs, tok.pad_token_id)
        logp = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits.float(), dim=-1)
        for row, (ctx, cand, _) in enumerate(batch):
            pos = torch.arange(len(ctx), len(ctx) + len(cand))
            out[start + row] = logp[row, pos, torch.tensor(cand)].sum().item()
    return out


def run(arch: str, kind: str, dishes: list[str], pool: list[str], hidden: int) -> None:
    """Time the engine and the baseline for one model and print the comparison."""
    texts = [LEFT.format(dish=d) + " " + ", ".join(pool[i::50]) for i, d in enumerate(dishes * 3)] + pool
    tok = train_tokenizer(texts, kind, vocab_size=8000, model_kind="causal" if arch == "gpt2" else "masked")
    model = tiny_model(arch, tok, layers=6, hidden=hidden, heads=4, seed=0)
    scorer = Scorer(model, tok)
    requests = [ScoreRequest(LEFT.format(dish=d), pool) for d in dishes]

    start = time.perf_counter()
    engine = np.concatenate([s.sum_logprob for s in scorer.score(requests)])
    engine_time = time.perf_counter() - start

    encoded = [scorer.encoder.encode(r, with_right=True) for r in requests]
    start = time.perf_counter()
    if arch == "gpt2":
        pairs = [(list(e.context), list(c)) for e in encoded for c in e.candidates]
        baseline = np.array(harness_causal(model, pairs, tok.pad_token_id))
    else:
        items = [(list(e.context), list(c), list(e.suffix)) for e in encoded for c in e.candidates]
        baseline = np.array(per_candidate_masked(model, items, tok))
    base_time = time.perf_counter() - start
    n_tok = sum(len(c) for e in encoded for c in e.candidates) / len(engine)
    print(f"{arch:5s} ({kind}, 6 layers, hidden {hidden}, vocab {len(tok)}): {len(dishes)} dishes x {len(pool)} "
          f"candidates ({n_tok:.2f} tokens each)\n"
          f"  engine {engine_time:8.2f} s   baseline {base_time:8.2f} s   speed-up {base_time / engine_time:6.1f}x   "
          f"max |diff| {np.abs(engine - baseline).max():.2e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dishes", type=int, default=20)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    dishes, pool = load(args.dishes)
    run("gpt2", "bpe", dishes, pool, args.hidden)
    run("bert", "wordpiece", dishes, pool, args.hidden)


if __name__ == "__main__":
    main()
