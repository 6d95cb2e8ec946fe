"""What a model costs per token, from its config alone, and how fast this machine's device runs it: the estimate a
first run of a model gets before any run of it has measured a rate.

A token through a transformer costs about 2 floating-point operations per parameter it passes (its non-embedding
parameters), and the LM head 2 per head parameter at each position it runs at (`Workload.reads`). The device's
speed is measured once per machine and device (`measure_speed`: a few forward passes of two random-weight BERT
shapes and two LM heads at the engine's batch shape, and a short generation of a tiny GPT-2, about 2 s on a CPU),
as FLOP rates, the times that do not shrink with the model (memory traffic, kernel launches) and a time per
generation step.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from culture_probe.throughput import store

# keys of a config that name or date it and do not change what it computes
UNSHAPED = {
    "_name_or_path",
    "name_or_path",
    "_commit_hash",
    "transformers_version",
    "dtype",
    "torch_dtype",
}
# the shapes counted so far, by config and kind (a suite asks once per config)
SHAPES: dict[tuple[str, str], ModelShape] = {}
LOADERS = {
    "causal": "AutoModelForCausalLM",
    "masked": "AutoModelForMaskedLM",
    "seq2seq": "AutoModelForSeq2SeqLM",
}


@dataclass(frozen=True)
class ModelShape:
    """A model's cost: `body`, the parameters each token passes (embeddings aside), `head`, the LM head's (run at
    the read positions only), and `key`, a digest of its config without names and dates: what its speed depends
    on, so a copy of the same weights, or a fine-tune of the same shape, shares the rates a run measured.
    """

    body: int
    head: int
    vocab: int
    key: str

    @property
    def parameters(self) -> int:
        """Body and head."""
        return self.body + self.head


def shape_of(config: Any, kind: str) -> ModelShape:
    """The shape of a `kind` model of `config` (a transformers config), counted on an instance on the meta device
    (no memory, no weights).
    """
    text = config.to_json_string(use_diff=False)
    if (text, kind) not in SHAPES:
        SHAPES[text, kind] = _shape(config, text, kind)
    return SHAPES[text, kind]


def _shape(config: Any, text: str, kind: str) -> ModelShape:
    import torch
    import transformers

    fields = {k: v for k, v in json.loads(text).items() if k not in UNSHAPED}
    key = hashlib.sha256(json.dumps([kind, fields], sort_keys=True).encode()).hexdigest()[:16]
    with torch.device("meta"):
        model = getattr(transformers, LOADERS[kind]).from_config(config)
    seen: dict[int, int] = {id(p): p.numel() for p in model.parameters()}
    embedded = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    out = model.get_output_embeddings()
    head = out.weight.numel() if out is not None else 0
    vocab = out.weight.shape[0] if out is not None else 0
    untied = {id(out.weight)} - embedded if out is not None else set()
    body = sum(n for i, n in seen.items() if i not in embedded and i not in untied)
    return ModelShape(body, head, vocab, key)


def device_name(device: Any) -> str:
    """The device as rates are kept for it: a CPU with its thread count (the rate depends on it), a GPU by name."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return f"{device.type} ({torch.get_num_threads()} threads)"


def speed_for(device: Any, *, keep: bool = True) -> store.DeviceSpeed:
    """The speed of `device` on this machine: read where a run measured it, else measured now and kept (`keep`;
    a dry run writes nothing, so measures it again until a run has kept it).
    """
    known = store.speed_of(device_name(device))
    if known is None:
        known = measure_speed(device)
        if keep:
            store.keep_speed(known)
    return known


def measure_speed(device: Any) -> store.DeviceSpeed:
    """Time, at the engine's batch shape (rows of 32 tokens, padded, filling its token budget), a small and a wider
    random-weight BERT body (the line through both: a time per token that does not shrink with the model and a FLOP
    rate), a small and a wider LM head with its log-softmax at read positions (a time per vocabulary entry read and
    the head's FLOP rate: a tiny model's head is bound by memory, not FLOPs), and a short greedy generation of a
    tiny GPT-2 (the time per step).
    """
    import torch
    import transformers

    device = torch.device(device)
    gpu = device.type == "cuda"
    rows, length, reads = (256, 128, 1024) if gpu else (64, 32, 256)
    wide, wide_head = ((1024, 8), (1024, 32_000)) if gpu else ((256, 4), (256, 32_000))

    def body(hidden: int, layers: int) -> tuple[float, float]:
        config = transformers.BertConfig(
            vocab_size=512,
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=max(hidden // 64, 1),
            intermediate_size=4 * hidden,
            max_position_embeddings=length,
        )
        model = transformers.BertModel(config).to(device).eval()
        ids = torch.randint(0, 512, (rows, length), device=device)
        mask = torch.ones_like(ids)
        mask[::2, -length // 4 :] = 0  # the engine pads each chunk to its longest input
        flops = 2.0 * sum(p.numel() for p in model.encoder.parameters())
        seconds = _seconds(lambda: model(input_ids=ids, attention_mask=mask), device)
        return seconds / (rows * length), flops

    def head(hidden: int, vocab: int) -> tuple[float, float]:
        linear = torch.nn.Linear(hidden, vocab).to(device)
        states = torch.randn(reads, hidden, device=device)
        seconds = _seconds(lambda: torch.logsumexp(linear(states), dim=-1), device)
        return seconds / (reads * vocab), 2.0 * hidden

    rate, per_token = _line(body(64, 2), body(*wide))
    head_rate, per_entry = _line(head(64, 8000), head(*wide_head))
    step = _step_seconds(device, per_token, rate)
    today = datetime.now(timezone.utc).date().isoformat()
    return store.DeviceSpeed(
        device_name(device), rate, per_token, head_rate, per_entry, step, today
    )


def _line(small: tuple[float, float], wide: tuple[float, float]) -> tuple[float, float]:
    """(FLOP rate, time that does not shrink) of the line through two (time, FLOPs) points of one unit (a token, a
    vocabulary entry read); a wide shape measured no slower than the small one (a busy machine) leaves the wide
    one's FLOP rate alone and the small one's time as what does not shrink.
    """
    (small_t, small_f), (wide_t, wide_f) = small, wide
    if wide_t > small_t * 1.05:
        rate = (wide_f - small_f) / (wide_t - small_t)
        return rate, max(small_t - small_f / rate, 0.0)
    return wide_f / wide_t, small_t


def _step_seconds(device: Any, per_token: float, rate: float) -> float:
    """The time a generation step takes beyond its tokens' (8 rows of 8 prompt tokens, 8 new tokens each)."""
    import torch
    import transformers

    config = transformers.GPT2Config(
        vocab_size=512,
        n_embd=64,
        n_layer=2,
        n_head=2,
        n_positions=64,
        bos_token_id=0,
        eos_token_id=0,
    )
    model = transformers.GPT2LMHeadModel(config).to(device).eval()
    ids = torch.randint(0, 512, (8, 8), device=device)
    new = 8

    def generate() -> Any:
        return model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=new,
            min_new_tokens=new,
            do_sample=False,
            pad_token_id=0,
        )

    seconds = _seconds(generate, device)
    body = sum(p.numel() for p in model.transformer.h.parameters())
    tokens = ids.numel() + ids.shape[0] * new
    flops = 2.0 * body * tokens + 2.0 * config.n_embd * config.vocab_size * ids.shape[0] * new
    return max((seconds - tokens * per_token - flops / rate) / new, 0.0)


def _seconds(call: Any, device: Any, repeats: int = 3) -> float:
    """The least wall time of `repeats` calls, after one to warm up."""
    import torch

    times = []
    with torch.inference_mode():
        for _ in range(repeats + 1):
            began = time.perf_counter()
            call()
            if torch.device(device).type == "cuda":
                torch.cuda.synchronize(device)
            times.append(time.perf_counter() - began)
    return min(times[1:])
