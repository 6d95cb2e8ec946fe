"""Engine speed against the real lm-evaluation-harness and other baselines, measured in one run
(issue 13).

FmLAMA English: 20 dishes x every ingredient of the English pool (>= 1,000 candidates), context "The
ingredients of {dish} include", random-weight 6-layer models whose tokenizers are trained on the
FmLAMA text.
- causal, GPT-2 with n_positions 256 and 1024: the engine against lm-eval's `HFLM.loglikelihood`
  (batch 64, the harness users would pick instead, from PyPI: `pip install lm-eval`) on the same
  (context, " " + ingredient) requests, scores within 1e-4; and the engine against its FLOP bound, 2
  x parameters x the tokens the engine put through the model, at the float32 matmul rate measured on
  this machine in the same run;
- masked, BERT: the engine's typed querying against per-candidate typed querying (one forward per
  candidate with k masks, batches of 64), scores within 1e-4;
- generation: the engine's batched greedy `generate` against a per-prompt `model.generate` loop on
  32 prompts, identical texts;
- start-up: `culture-probe --help` and `culture-probe list` as subprocesses.
Prints each time, each ratio and PASS/FAIL for each target; exits with status 1 if any fails. Needs
CULTURE_PROBE_MIRROR (or the network).

    python perf/bench_engine.py [--dishes 20] [--candidates N] [--hidden 768] [--heads 12]
        [--threads 2] [--repeat 1] [--device cpu]

The models have the width of GPT-2 small and BERT-base (768, 12 heads) and six layers, the shape of
distilgpt2 and DistilBERT; `--hidden 256 --heads 4` runs four times faster, with the engine's fixed
costs (tokenization) a larger share. `--repeat N` times each side N times and keeps the best time,
as `timeit` does: on a shared machine the shortest run is the one least disturbed by other work.

`--device cuda` runs every model, both sides of each comparison and the FLOP-rate matmul on the GPU
(perf/gpu_check.py does that on a GPU machine); the targets were set for this project's 2-core CPU
machine.

`--candidates N` keeps every (len(pool) // N)-th ingredient, for a quick check that the script works
(the pool target then fails, by design).
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from culture_probe.data.sources import fetch, read_jsonl
from culture_probe.engine import Scorer, ScoreRequest
from culture_probe.models import tiny_model, train_tokenizer

DISHES_URL = (
    "https://raw.githubusercontent.com/lizhou21/FmLAMA-master/16c41230d03e53cc5315217f7b9e210cd7dcc7fc/"
    "data/data_lang/en/en_dishes.jsonl"
)
LEFT = "The ingredients of {dish} include"
MIN_CANDIDATES, MAX_DIFF = 1000, 1e-4
HARNESS_SPEEDUP, FLOP_BOUND, MASKED_SPEEDUP = 10.0, 2.0, 50.0  # the targets of issue 13
GENERATE_SPEEDUP, N_PROMPTS, NEW_TOKENS, STARTUP_SECONDS = 5.0, 32, 16, 1.0
POSITIONS = (256, 1024)


def reference_inputs(
    tok, requests: list[ScoreRequest]
) -> list[tuple[list[int], list[int], list[int]]]:
    """(context ids with the tokenizer's specials, candidate ids, suffix ids) per (request,
    candidate), built without the engine by the tests' slow reference
    (tests/engine/engine_reference.py: one rule, one copy).
    """
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "engine"))
    from engine_reference import reference_tokens

    out = []
    for request in requests:
        for candidate in request.candidates:
            context, ids, right, suffix = reference_tokens(
                tok, request.left, candidate, request.right, request.sep
            )
            out.append((context, ids, right + suffix))
    return out


def load(n_dishes: int) -> tuple[list[str], list[str]]:
    """The first `n_dishes` dishes and the whole ingredient pool (gold lists are one comma-joined
    string).
    """
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


def harness_loglikelihood(model, tok, requests: list[ScoreRequest]) -> np.ndarray:
    """lm-eval's `HFLM.loglikelihood` (batch 64) on every (context, " " + candidate): the summed
    log-prob.
    """
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=model, tokenizer=tok, batch_size=64, device=str(model.device))
    pairs = [(r.left, " " + c) for r in requests for c in r.candidates]
    instances = [Instance("loglikelihood", {}, pair, i) for i, pair in enumerate(pairs)]
    return np.array([logprob for logprob, _ in lm.loglikelihood(instances, disable_tqdm=True)])


@torch.inference_mode()
def per_candidate_masked(
    model, items: list[tuple[list[int], list[int], list[int]]], tok
) -> list[float]:
    """Typed querying, one forward per (context, candidate) with k masks, batches of 64, full
    log_softmax.
    """
    out = [0.0] * len(items)
    for start in range(0, len(items), 64):
        batch = items[start : start + 64]
        seqs = [ctx + [tok.mask_token_id] * len(cand) + suffix for ctx, cand, suffix in batch]
        ids, mask = (t.to(model.device) for t in _padded(seqs, tok.pad_token_id))
        logp = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits.float(), dim=-1)
        for row, (ctx, cand, _) in enumerate(batch):
            pos = torch.arange(len(ctx), len(ctx) + len(cand), device=model.device)
            out[start + row] = logp[row, pos, torch.tensor(cand, device=model.device)].sum().item()
    return out


def best_time(fn, repeat: int):
    """The shortest of `repeat` timed calls of `fn` (the least disturbed by other work on the
    machine) and the result of the last call.
    """
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def report(targets: dict[str, bool]) -> bool:
    """Print one case's targets as PASS/FAIL lines; True when all pass."""
    for target, passed in targets.items():
        print(f"  {'PASS' if passed else 'FAIL'}  {target}")
    return all(targets.values())


def fmlama_tokenizer(kind: str, arch: str, dishes: list[str], pool: list[str]):
    texts = [
        LEFT.format(dish=d) + " " + ", ".join(pool[i::50]) for i, d in enumerate(dishes * 3)
    ] + pool
    return train_tokenizer(
        texts, kind, vocab_size=8000, model_kind="causal" if arch == "gpt2" else "masked"
    )


def counted_tokens(model) -> list[int]:
    """A list that grows by the number of input tokens of every forward pass of `model`'s
    transformer body (the engine calls the body and then the LM head only where a candidate token is
    predicted).
    """
    seen: list[int] = []
    model.base_model.register_forward_pre_hook(
        lambda _, args, kwargs: seen.append(
            int(
                (
                    kwargs.get("input_ids") if kwargs.get("input_ids") is not None else args[0]
                ).numel()
            )
        ),
        with_kwargs=True,
    )
    return seen


def matmul_rate(device: torch.device) -> float:
    """Float32 FLOP/s of `device` on a GPT-2-sized matmul (best of five; on a GPU, 20 products per
    timing).
    """
    a, b = torch.randn(4096, 768, device=device), torch.randn(768, 3072, device=device)
    times = 20 if device.type == "cuda" else 1

    def products() -> None:
        for _ in range(times):
            torch.mm(a, b)
        if device.type == "cuda":
            torch.cuda.synchronize()

    products()
    seconds, _ = best_time(products, 5)
    return 2 * times * a.shape[0] * a.shape[1] * b.shape[1] / seconds


def causal_case(
    dishes, pool, shape, positions: int, repeat: int, rate: float, device: torch.device
) -> bool:
    """The engine against lm-eval's HFLM and against its FLOP bound, GPT-2 with `positions`
    positions.
    """
    tok = fmlama_tokenizer("bpe", "gpt2", dishes, pool)
    model = tiny_model(
        "gpt2", tok, layers=6, hidden=shape[0], heads=shape[1], seed=0, positions=positions
    )
    model.to(device)
    scorer = Scorer(model, tok)
    requests = [ScoreRequest(LEFT.format(dish=d), pool) for d in dishes]
    # allocator, kernels: outside the timings
    warm = [ScoreRequest(LEFT.format(dish="bread"), pool[:64])]
    scorer.score(warm)
    harness_loglikelihood(model, tok, warm)
    tokens = counted_tokens(model)
    engine_time, scores = best_time(lambda: scorer.score(requests), repeat)
    engine_tokens = sum(tokens) // repeat
    engine = np.concatenate([s.sum_logprob for s in scores])
    tokens.clear()
    harness_time, harness = best_time(lambda: harness_loglikelihood(model, tok, requests), repeat)
    harness_tokens = sum(tokens) // repeat
    speedup, diff = harness_time / engine_time, float(np.abs(engine - harness).max())
    bound = 2 * model.num_parameters() * engine_tokens / rate
    print(
        f"gpt2  (n_positions {positions}, 6 layers, hidden {shape[0]}, vocab {len(tok)}): {len(dishes)} dishes x "
        f"{len(pool)} candidates\n"
        f"  engine {engine_time:8.2f} s   lm-eval HFLM {harness_time:8.2f} s   speed-up {speedup:6.1f}x   "
        f"max |diff| {diff:.2e}\n"
        f"  FLOP bound {bound:8.2f} s ({engine_tokens:,} tokens through the model x 2 x "
        f"{model.num_parameters() / 1e6:.1f}M parameters at {rate / 1e9:.0f} GFLOP/s): engine at "
        f"{engine_time / bound:.1f}x the bound\n"
        f"  lm-eval put {harness_tokens:,} tokens through the model (padding included; it runs a context once for "
        f"all its one-token continuations): {harness_tokens / engine_tokens:.1f}x the engine's, the speed-up at "
        "equal cost per token"
    )
    return report(
        {
            f"pool >= {MIN_CANDIDATES:,} candidates ({len(pool):,})": len(pool) >= MIN_CANDIDATES,
            f"speed-up over lm-eval >= {HARNESS_SPEEDUP:.0f}x ({speedup:.1f}x)": speedup
            >= HARNESS_SPEEDUP,
            f"within {FLOP_BOUND:.0f}x of the FLOP bound ({engine_time / bound:.1f}x)": engine_time
            <= FLOP_BOUND * bound,
            f"max |diff| <= {MAX_DIFF:.0e} ({diff:.1e})": diff <= MAX_DIFF,
        }
    )


def masked_case(dishes, pool, shape, repeat: int, device: torch.device) -> bool:
    """The engine's typed querying against per-candidate typed querying, BERT."""
    tok = fmlama_tokenizer("wordpiece", "bert", dishes, pool)
    model = tiny_model("bert", tok, layers=6, hidden=shape[0], heads=shape[1], seed=0).to(device)
    scorer = Scorer(model, tok)
    requests = [ScoreRequest(LEFT.format(dish=d), pool) for d in dishes]
    warm = [ScoreRequest(LEFT.format(dish="bread"), pool[:64])]
    scorer.score(warm)
    per_candidate_masked(model, reference_inputs(tok, warm), tok)
    engine_time, scores = best_time(lambda: scorer.score(requests), repeat)
    engine = np.concatenate([s.sum_logprob for s in scores])

    def baseline_run():  # tokenizes on its own, as the engine does inside its timing
        return np.array(per_candidate_masked(model, reference_inputs(tok, requests), tok))

    base_time, baseline = best_time(baseline_run, repeat)
    speedup, diff = base_time / engine_time, float(np.abs(engine - baseline).max())
    print(
        f"bert  (6 layers, hidden {shape[0]}, vocab {len(tok)}): {len(dishes)} dishes x {len(pool)} candidates\n"
        f"  engine {engine_time:8.2f} s   per-candidate baseline {base_time:8.2f} s   speed-up {speedup:6.1f}x   "
        f"max |diff| {diff:.2e}"
    )
    return report(
        {
            f"pool >= {MIN_CANDIDATES:,} candidates ({len(pool):,})": len(pool) >= MIN_CANDIDATES,
            f"speed-up >= {MASKED_SPEEDUP:.0f}x ({speedup:.1f}x)": speedup >= MASKED_SPEEDUP,
            f"max |diff| <= {MAX_DIFF:.0e} ({diff:.1e})": diff <= MAX_DIFF,
        }
    )


@torch.inference_mode()
def generate_one_by_one(model, tok, prompts: list[str]) -> list[str]:
    """What a user without the engine writes: `model.generate` per prompt, greedy."""
    texts = []
    for prompt in prompts:
        ids = tok(prompt, return_tensors="pt").to(model.device)
        out = model.generate(
            **ids, max_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=tok.pad_token_id
        )
        texts.append(tok.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True))
    return texts


def generation_case(dishes, pool, shape, repeat: int, device: torch.device) -> bool:
    """The engine's batched greedy generation against a per-prompt loop: same texts, and how much
    faster.
    """
    tok = fmlama_tokenizer("bpe", "gpt2", dishes, pool)
    model = tiny_model("gpt2", tok, layers=6, hidden=shape[0], heads=shape[1], seed=0).to(device)
    scorer = Scorer(model, tok)
    prompts = [LEFT.format(dish=d) for d in (dishes * N_PROMPTS)[:N_PROMPTS]]
    # unequal lengths: left padding
    prompts = [p if i % 2 else p + " rice and" for i, p in enumerate(prompts)]
    scorer.generate(prompts[:2], max_new_tokens=2)
    generate_one_by_one(model, tok, prompts[:2])
    engine_time, engine = best_time(
        lambda: scorer.generate(prompts, max_new_tokens=NEW_TOKENS), repeat
    )
    loop_time, loop = best_time(lambda: generate_one_by_one(model, tok, prompts), repeat)
    same = sum(a == b for a, b in zip(engine, loop, strict=True))
    speedup = loop_time / engine_time
    print(
        f"generate (gpt2, 6 layers, hidden {shape[0]}): {N_PROMPTS} prompts x {NEW_TOKENS} new tokens, greedy\n"
        f"  engine {engine_time:8.2f} s   per-prompt model.generate {loop_time:8.2f} s   speed-up {speedup:6.1f}x   "
        f"identical texts {same}/{N_PROMPTS}"
    )
    return report(
        {
            f"speed-up >= {GENERATE_SPEEDUP:.0f}x ({speedup:.1f}x)": speedup >= GENERATE_SPEEDUP,
            f"identical texts ({same}/{N_PROMPTS})": same == N_PROMPTS,
        }
    )


def startup_case() -> bool:
    """`culture-probe --help` and `culture-probe list` as a user starts them (best of three)."""
    times = {}
    for args in (["--help"], ["list"]):
        command = [sys.executable, "-m", "culture_probe.cli", *args]
        times[" ".join(args)], done = best_time(
            lambda c=command: subprocess.run(c, capture_output=True), 3
        )
        # e.g. a GPU image without the data libraries: a failed target, not a crash
        if done.returncode:
            last = (done.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
            print(f"start-up: culture-probe {' '.join(args)} failed: {last}")
            return report({f"culture-probe {' '.join(args)} runs": False})
    print("start-up: " + "   ".join(f"culture-probe {k} {v:.2f} s" for k, v in times.items()))
    return report(
        {
            f"culture-probe {k} < {STARTUP_SECONDS:.0f} s ({v:.2f} s)": v < STARTUP_SECONDS
            for k, v in times.items()
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dishes", type=int, default=20)
    parser.add_argument(
        "--candidates", type=int, default=None, help="a subset of the pool, for a quick check"
    )
    parser.add_argument(
        "--hidden", type=int, default=768, help="model width (GPT-2 small's and BERT-base's)"
    )
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--repeat", type=int, default=1, help="time each side this many times, keep the best"
    )
    parser.add_argument(
        "--device", default="cpu", help="where the models run: cpu, cuda, cuda:1, ..."
    )
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.set_num_threads(args.threads)
    dishes, pool = load(args.dishes)
    if len(pool) < MIN_CANDIDATES:
        raise SystemExit(
            f"the FmLAMA English pool has {len(pool)} candidates, fewer than the {MIN_CANDIDATES:,} "
            "the benchmark needs: is the mirror's en_dishes.jsonl complete?"
        )
    if args.candidates:
        pool = pool[:: max(1, len(pool) // args.candidates)][: args.candidates]
    shape, rate = (args.hidden, args.heads), matmul_rate(device)
    print(f"device: {torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}")
    passed = [
        causal_case(dishes, pool, shape, positions, args.repeat, rate, device)
        for positions in POSITIONS
    ]
    passed += [
        masked_case(dishes, pool, shape, args.repeat, device),
        generation_case(dishes, pool, shape, args.repeat, device),
        startup_case(),
    ]
    sys.exit(0 if all(passed) else 1)


if __name__ == "__main__":
    main()
