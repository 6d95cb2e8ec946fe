"""Engine speed versus a harness-style baseline, on FmLAMA English (issue 2).

20 dishes x every ingredient of the English pool (>= 1,000 candidates), template
"The ingredients of {dish} include {ingredient}", with a 6-layer random-weight GPT-2 and a 6-layer BERT whose
tokenizers are trained on the FmLAMA text. Baselines:
- causal: what lm-evaluation-harness does: one padded forward per context+candidate pair, length-sorted batches
  of 64, full log_softmax over every position;
- masked: per-candidate typed querying: one forward per (dish, candidate) with k masks, batches of 64.
The baselines tokenize on their own, as tests/engine/engine_reference.py does (tokenizer(left + " " + candidate),
split after the context's ids), so the comparison covers the engine's tokenization too. Prints both times, their
ratio, the largest score difference, and PASS/FAIL for each target of issue 2 (a pool of >= 1,000 candidates,
>= 10x faster, scores within 1e-4); exits with status 1 if any fails. Needs CULTURE_PROBE_MIRROR (or the network).

    python benchmarks/bench_engine.py [--dishes 20] [--candidates N] [--hidden 768] [--heads 12] [--threads 2]
                                      [--repeat 1]

The models have the width of GPT-2 small and BERT-base (768, 12 heads) and six layers, the shape of distilgpt2 and
DistilBERT; `--hidden 256 --heads 4` runs four times faster, with the engine's fixed costs (tokenization) a larger
share. `--repeat N` times each side N times and keeps the best time, as `timeit` does: on a shared machine the
shortest run is the one least disturbed by other work.

`--candidates N` keeps every (len(pool) // N)-th ingredient, for a quick check that the script works (the pool
target then fails, by design).
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
from pathlib import Path

import numpy as np
import torch

from culture_probe.data.sources import fetch, read_jsonl
from culture_probe.engine import Scorer, ScoreRequest
from culture_probe.models import tiny_model, train_tokenizer

DISHES_URL = ("https://raw.githubusercontent.com/lizhou21/FmLAMA-master/16c41230d03e53cc5315217f7b9e210cd7dcc7fc/"
              "data/data_lang/en/en_dishes.jsonl")
LEFT = "The ingredients of {dish} include"
MIN_CANDIDATES, MIN_SPEEDUP, MAX_DIFF = 1000, 10.0, 1e-4  # the targets of issue 2


def reference_inputs(tok, requests: list[ScoreRequest]) -> list[tuple[list[int], list[int], list[int]]]:
    """(context ids with the tokenizer's specials, candidate ids, suffix ids) per (request, candidate), built
    without the engine by the tests' slow reference (tests/engine/engine_reference.py: one rule, one copy).
    """
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "engine"))
    from engine_reference import reference_tokens

    out = []
    for request in requests:
        for candidate in request.candidates:
            context, ids, right, suffix = reference_tokens(tok, request.left, candidate, request.right, request.sep)
            out.append((context, ids, right + suffix))
    return out


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


def best_time(fn, repeat: int):
    """The shortest of `repeat` timed calls of `fn` (the least disturbed by other work on the machine) and the
    result of the last call.
    """
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def run(arch: str, kind: str, dishes: list[str], pool: list[str], shape: tuple[int, int], repeat: int) -> bool:
    """Time the engine and the baseline for one model, print the comparison; True when every target passes."""
    texts = [LEFT.format(dish=d) + " " + ", ".join(pool[i::50]) for i, d in enumerate(dishes * 3)] + pool
    tok = train_tokenizer(texts, kind, vocab_size=8000, model_kind="causal" if arch == "gpt2" else "masked")
    hidden, heads = shape
    model = tiny_model(arch, tok, layers=6, hidden=hidden, heads=heads, seed=0)
    scorer = Scorer(model, tok)
    requests = [ScoreRequest(LEFT.format(dish=d), pool) for d in dishes]

    # Warm both paths up first (allocator, kernels, caches), so neither pays start-up costs inside its timing.
    warm = [ScoreRequest(LEFT.format(dish="bread"), pool[:64])]
    scorer.score(warm)
    warm_items = reference_inputs(tok, warm)
    if arch == "gpt2":
        harness_causal(model, [(ctx, cand) for ctx, cand, _ in warm_items], tok.pad_token_id)
    else:
        per_candidate_masked(model, warm_items, tok)

    engine_time, scores = best_time(lambda: scorer.score(requests), repeat)
    engine = np.concatenate([s.sum_logprob for s in scores])
    engine_tokens = np.concatenate([s.n_tokens for s in scores])

    # Both timings include tokenization: the engine's own, and the baseline's per-pair tokenization (the harness
    # tokenizes every context+continuation too).
    def baseline_run():
        items = reference_inputs(tok, requests)
        if arch == "gpt2":
            return items, np.array(harness_causal(model, [(ctx, cand) for ctx, cand, _ in items], tok.pad_token_id))
        return items, np.array(per_candidate_masked(model, items, tok))

    base_time, (items, baseline) = best_time(baseline_run, repeat)
    lengths = np.array([len(cand) for _, cand, _ in items])
    speedup, diff = base_time / engine_time, float(np.abs(engine - baseline).max())
    print(f"{arch:5s} ({kind}, 6 layers, hidden {hidden}, vocab {len(tok)}): {len(dishes)} dishes x {len(pool)} "
          f"candidates ({lengths.mean():.2f} tokens each; token counts differ for "
          f"{int((engine_tokens != lengths).sum())})\n"
          f"  engine {engine_time:8.2f} s   baseline {base_time:8.2f} s   speed-up {speedup:6.1f}x   "
          f"max |diff| {diff:.2e}")
    targets = {f"pool >= {MIN_CANDIDATES:,} candidates ({len(pool):,})": len(pool) >= MIN_CANDIDATES,
               f"speed-up >= {MIN_SPEEDUP:.0f}x ({speedup:.1f}x)": speedup >= MIN_SPEEDUP,
               f"max |diff| <= {MAX_DIFF:.0e} ({diff:.1e})": diff <= MAX_DIFF}
    for target, passed in targets.items():
        print(f"  {'PASS' if passed else 'FAIL'}  {target}")
    return all(targets.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dishes", type=int, default=20)
    parser.add_argument("--candidates", type=int, default=None, help="a subset of the pool, for a quick check")
    parser.add_argument("--hidden", type=int, default=768, help="model width (GPT-2 small's and BERT-base's)")
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1, help="time each side this many times, keep the best")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    dishes, pool = load(args.dishes)
    if len(pool) < MIN_CANDIDATES:
        raise SystemExit(f"the FmLAMA English pool has {len(pool)} candidates, fewer than the {MIN_CANDIDATES:,} "
                         "the benchmark needs: is the mirror's en_dishes.jsonl complete?")
    if args.candidates:
        pool = pool[:: max(1, len(pool) // args.candidates)][: args.candidates]
    passed = [run(arch, kind, dishes, pool, (args.hidden, args.heads), args.repeat)
              for arch, kind in (("gpt2", "bpe"), ("bert", "wordpiece"))]
    sys.exit(0 if all(passed) else 1)


if __name__ == "__main__":
    main()
