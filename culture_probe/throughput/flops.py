"""What a model costs per token, from its config alone, and how fast this machine's device runs it:
the estimate a first run of a model gets before any run of it has measured a rate.

A token through a transformer costs about 2 floating-point operations per parameter it passes (its
non-embedding parameters), and the LM head 2 per head parameter at each position it runs at
(`Workload.reads`), with its log-softmax over the vocabulary there. The device's speed is measured
once per machine and device (`measure_speed`: an LM head at two widths, the engine itself scoring
synthetic requests on a small and a wider random-weight BERT, and a short generation of a tiny
GPT-2, about 2 s on a CPU), as FLOP rates, the times that do not shrink with the model (memory
traffic, kernel launches, the engine's own work per token and per candidate) and a time per
generation step.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from culture_probe.engine import parallel
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
    """A model's cost: `body`, the parameters each token passes (embeddings aside), `head`, the LM
    head's (run at the read positions only), and `key`, a digest of its config without names and
    dates: what its speed depends on, so a copy of the same weights, or a fine-tune of the same
    shape, shares the rates a run measured.
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
    """The shape of a `kind` model of `config` (a transformers config), counted on an instance on
    the meta device (no memory, no weights).
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
    """The device as rates are kept for it: a CPU with its thread count (the rate depends on it), a
    GPU by name.
    """
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return f"{device.type} ({torch.get_num_threads()} threads)"


def speed_for(device: Any, *, keep: bool = True) -> store.DeviceSpeed:
    """The speed of `device` on this machine: read where a run measured it, else measured now and
    kept (`keep`; a dry run writes nothing, so measures it again until a run has kept it).
    """
    known = store.speed_of(device_name(device))
    if known is None:
        known = measure_speed(device)
        if keep:
            store.keep_speed(known)
    return known


def measure_speed(device: Any) -> store.DeviceSpeed:
    """Time the LM head with its log-softmax at read positions for a small and a wider shape (a time
    per vocabulary entry read and the head's FLOP rate: a tiny model's head is bound by memory, not
    FLOPs), then the engine itself scoring synthetic requests on a small and a wider random-weight
    BERT (`_engine_point`: the line through both, the head's share taken out, gives the body's time
    per token that does not shrink with the model, the engine's own work and its many small forward
    passes included, and its FLOP rate), and a short greedy generation of a tiny GPT-2 (the time per
    step).
    """
    import torch

    device = torch.device(device)
    gpu = device.type == "cuda"
    reads = 1024 if gpu else 256
    wide, wide_head = ((1024, 8), (1024, 32_000)) if gpu else ((256, 4), (256, 32_000))

    def head(hidden: int, vocab: int) -> tuple[float, float]:
        linear = torch.nn.Linear(hidden, vocab).to(device)
        states = torch.randn(reads, hidden, device=device)
        seconds = _seconds(lambda: torch.logsumexp(linear(states), dim=-1), device)
        return seconds / (reads * vocab), 2.0 * hidden

    head_rate, per_entry = _line(head(64, 8000), head(*wide_head))
    # (seconds, tokens, candidates, FLOPs per token) of three engine runs: a small model on a pool
    # of 300 and one of 30 candidates (what grows with the tokens and what with the candidates), a
    # wider one on the 300 in a process of a multi-process run, alone: the synthetic requests are no
    # part of the run's shared work
    with parallel.alone():
        (t1, n1, c1, f1), (t2, n2, c2, _), (t3, n3, c3, f3) = (
            _engine_point(device, 64, 2, 300, head_rate, per_entry),
            _engine_point(device, 64, 2, 30, head_rate, per_entry),
            _engine_point(device, *wide, 300, head_rate, per_entry),
        )
    determinant = n1 * c2 - n2 * c1
    per_small = max((t1 * c2 - t2 * c1) / determinant, 0.0)
    per_candidate = max((n1 * t2 - n2 * t1) / determinant, 0.0)
    wider = max(t3 - n3 * per_small - c3 * per_candidate, 1e-9)
    rate = (f3 - f1) * n3 / wider
    per_token = max(per_small - f1 / rate, 0.0)
    step = _step_seconds(device, per_token, rate)
    today = datetime.now(timezone.utc).date().isoformat()
    return store.DeviceSpeed(
        device_name(device), rate, per_token, per_candidate, head_rate, per_entry, step, today
    )


CALIBRATION_VOCAB = 2000


def _engine_point(
    device: Any, hidden: int, layers: int, pool: int, head_rate: float, per_entry: float
) -> tuple[float, int, int, float]:
    """(seconds, tokens, candidates, body FLOPs per token) of the engine scoring synthetic requests
    (contexts of 10 words ending in the same one, a pool of `pool` candidates of 1-3 words, a token
    budget's worth) on a random BERT of `hidden` x `layers`: the whole `score` call, less its
    LM-head reads at (`head_rate`, `per_entry`).
    """
    import random

    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    from culture_probe.engine.scorer import backend_for
    from culture_probe.engine.types import ScoreOptions, ScoreRequest

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    words = [f"w{i}" for i in range(CALIBRATION_VOCAB - len(specials))]
    vocab = {t: i for i, t in enumerate([*specials, *words])}
    rust = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    rust.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    rust.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=rust,
        **dict(
            zip(
                ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token"),
                specials,
                strict=True,
            )
        ),
    )
    config = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=max(hidden // 64, 1),
        intermediate_size=4 * hidden,
    )
    model = transformers.BertForMaskedLM(config).to(device).eval()
    scorer = backend_for("masked")(model, tokenizer, identity={"name_or_path": "calibration"})
    rng = random.Random(0)
    candidates = {" ".join(rng.choices(words, k=rng.randint(1, 3))) for _ in range(pool)}
    # contexts ending in the same word, as a benchmark's template does: the pool is encoded once, as
    # in a run
    asked = [
        ScoreRequest(" ".join([*rng.choices(words, k=9), words[0]]), tuple(sorted(candidates)))
        for _ in range(2 + scorer.budget() // 20)
    ]
    scorer.score(asked[:2])  # the first call's set-up (the pool's encoding is shared, as in a run)
    before = scorer.spending.snapshot()["score"]
    scorer.score(asked[2:])
    spent = scorer.spending.snapshot()["score"] - before
    reads = sum(scorer._reads(item) for item in scorer._prepare_all(asked[2:], ScoreOptions()))
    head = reads * (len(vocab) * per_entry + 2.0 * hidden * len(vocab) / head_rate)
    body = 2.0 * sum(p.numel() for p in model.bert.encoder.parameters())
    scored = sum(len(r.candidates) for r in asked[2:])
    return max(spent.seconds - head, 0.0), spent.tokens, scored, body


def _line(small: tuple[float, float], wide: tuple[float, float]) -> tuple[float, float]:
    """(FLOP rate, time that does not shrink) of the line through two (time, FLOPs) points of one
    unit (a token, a vocabulary entry read); a wide shape measured no slower than the small one (a
    busy machine) leaves the wide one's FLOP rate alone and the small one's time as what does not
    shrink.
    """
    (small_t, small_f), (wide_t, wide_f) = small, wide
    if wide_t > small_t * 1.05:
        rate = (wide_f - small_f) / (wide_t - small_t)
        return rate, max(small_t - small_f / rate, 0.0)
    return wide_f / wide_t, small_t


def _step_seconds(device: Any, per_token: float, rate: float) -> float:
    """The time a generation step takes beyond its tokens' (8 rows of 8 prompt tokens, 8 new tokens
    each).
    """
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
