"""Generation: batched, left-padded greedy decoding (deterministic whatever the checkpoint's
generation config says), or seeded temperature sampling that gives each prompt the same text
whatever the batch or process count. Prompts are shared out between processes like scoring requests.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from culture_probe.engine import parallel
from culture_probe.engine.cache import cached_texts
from culture_probe.engine.tokenizer import chat_prompt
from culture_probe.engine.types import GenerateOptions
from culture_probe.errors import UnsupportedModelError

if TYPE_CHECKING:
    from transformers import GenerationConfig, PreTrainedModel


def _decoding_config(
    model: PreTrainedModel, pad_id: int | None, options: GenerateOptions
) -> GenerationConfig:
    # A checkpoint may ship do_sample=True, beams or top-k/top-p: probing needs either the plain
    # argmax continuation or plain temperature sampling over the whole vocabulary. Unset values
    # would be refilled from the checkpoint and transformers' defaults (top_k=50), so the sampling
    # filters are set to their no-op values.
    config: GenerationConfig = copy.deepcopy(model.generation_config)
    config.num_beams, config.max_new_tokens = 1, options.max_new_tokens
    temperature = options.temperature
    if temperature is None:
        config.do_sample = False
        config.temperature = config.top_p = config.top_k = None
    else:
        config.do_sample, config.temperature = True, temperature
        config.top_k, config.top_p, config.typical_p, config.min_p = 0, 1.0, 1.0, None
        config.epsilon_cutoff = config.eta_cutoff = 0.0
    if pad_id is not None:
        config.pad_token_id = pad_id
    return config


def prompt_seed(seed: int, text: str) -> int:
    """The sampling seed of one prompt: a hash of the run's `seed` and the prompt's text, so a
    prompt draws the same sample whatever batch, position or process it lands in.
    """
    digest = hashlib.sha256(f"{seed}\0{text}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1  # torch seeds must fit a signed 64-bit integer


def prompt_texts(
    scorer: Any, prompts: list[str], options: GenerateOptions
) -> tuple[list[str], bool]:
    """The texts to encode and whether the tokenizer should add its special tokens: by default yes
    for plain prompts and no for chat prompts (the template already holds them);
    `options.add_special_tokens` overrides.
    """
    if not options.chat:
        return prompts, True if options.add_special_tokens is None else options.add_special_tokens
    name = scorer.identity.get("name_or_path", "")
    texts = [chat_prompt(scorer.tokenizer, p, options.system, name=name) for p in prompts]
    return texts, False if options.add_special_tokens is None else options.add_special_tokens


def generate(scorer: Any, prompts: list[str], options: GenerateOptions) -> list[str]:
    """Continuations of `prompts` (new text only, special tokens dropped), batched by token budget
    (halved on out-of-memory, as scoring is): greedy, or sampled at `options.temperature`, one
    prompt per call from a generator seeded by `prompt_seed(options.seed, text)`. Texts are cached
    as a served model's are (`cached_texts`: keyed by the model, the prompt as the model reads it,
    chat template applied, and every option). With several processes, each generates its share of
    what the cache lacks and every process gets all texts.
    """
    if scorer.kind == "masked":
        raise UnsupportedModelError(
            "generate() needs a causal or seq2seq model; this one is a masked LM."
        )
    if not prompts:
        return []
    texts, specials = prompt_texts(scorer, prompts, options)
    distinct = list(dict.fromkeys(texts))
    # Every process tokenizes (and fits) every prompt, cached or not: the truncation record counts
    # them all. (Not while requests are prepared ahead in the background: the tokenizer is shared.)
    with scorer.preparing:
        ids = prompt_ids(scorer, distinct, specials, options.max_new_tokens)
    rank, size = parallel.world()
    local: dict[int, str] = {}  # what this process generated, by position in `distinct`

    def run(batch: list[int], _budget: int) -> list[str]:
        # one prompt per call: its generator is seeded for that prompt alone
        if options.temperature is not None:
            assert options.seed is not None  # GenerateOptions requires a seed with a temperature
            return [
                _decode(scorer, [ids[i]], options, prompt_seed(options.seed, distinct[i]))[0]
                for i in batch
            ]
        return _decode(scorer, [ids[i] for i in batch], options)

    def produce(todo: list[str]) -> Iterator[dict[str, str]]:
        # every process has read the cache before any writes to it: same shards
        parallel.barrier(size)
        at = {text: i for i, text in enumerate(distinct)}
        costs = {at[t]: len(ids[at[t]]) + options.max_new_tokens for t in todo[rank::size]}
        for batch, decoded in scorer.batches(costs, run, kind="generate"):
            local.update(zip(batch, decoded, strict=True))
            yield {distinct[i]: text for i, text in zip(batch, decoded, strict=True)}

    done = cached_texts(
        scorer.cache_path,
        model=scorer.model_digest(),
        options=options,
        prompts=distinct,
        produce=produce,
    )
    done.update({distinct[i]: text for i, text in parallel.gather(local, size).items()})
    return [done[t] for t in texts]


def _decode(
    scorer: Any, ids: list[tuple[int, ...]], options: GenerateOptions, seed: int | None = None
) -> list[str]:
    import torch

    tok, model = scorer.tokenizer, scorer.model
    pad_id = pad_token_id(tok)
    batch = left_padded(scorer, ids, pad_id)
    config = _decoding_config(model, pad_id, options)
    device = torch.device(scorer.device)
    # Sampling draws from the global generator (transformers takes no generator argument): fork it
    # so the caller's random state is left untouched, and seed it for this prompt alone.
    with (
        torch.random.fork_rng(devices=[device] if device.type == "cuda" else []),
        torch.inference_mode(),
    ):
        if seed is not None:
            torch.manual_seed(seed)
        start = 0 if scorer.kind == "seq2seq" else batch["input_ids"].shape[1]
        stopping = [StopAt(tok, options.stop, start)] if options.stop else None
        out = model.generate(**batch, generation_config=config, stopping_criteria=stopping)
    new = out[:, start:]
    return [
        cut_at_stop(text, options.stop) for text in tok.batch_decode(new, skip_special_tokens=True)
    ]


def pad_token_id(tokenizer: Any) -> int:
    """The id that fills the left padding: the tokenizer's pad token, else EOS, else UNK (GPT-2 and
    Llama checkpoints ship without a pad token); the attention mask hides it whichever it is.
    """
    ids = (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id)
    return next((i for i in ids if i is not None), 0)


def prompt_ids(
    scorer: Any, texts: list[str], specials: bool, max_new_tokens: int
) -> list[tuple[int, ...]]:
    """The token ids of each prompt (tokenized once); a prompt too long for the model's positions is
    cut on the left (its leading special tokens kept, warned once, as scoring does) to leave room
    for the new tokens of a decoder-only model.
    """
    if not texts:
        return []
    room = {"new tokens": max_new_tokens} if scorer.kind == "causal" else {}
    encoded = scorer.tokenizer(texts, add_special_tokens=specials)["input_ids"]
    return [scorer.encoder.fit(tuple(x), room, kind="prompts") for x in encoded]


def left_padded(scorer: Any, ids: list[tuple[int, ...]], pad_id: int) -> dict[str, Any]:
    """Prompt ids as left-padded input ids and attention mask on the model's device."""
    import torch

    width = max(map(len, ids))
    input_ids = torch.tensor([[pad_id] * (width - len(x)) + list(x) for x in ids])
    mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in ids])
    return {"input_ids": input_ids.to(scorer.device), "attention_mask": mask.to(scorer.device)}


class StopAt:
    """A stopping criterion: a sequence is done once its new text holds one of the stop strings.
    (transformers' own `stop_strings` reads the vocabulary and fails on some tokenizers, e.g.
    Metaspace ones; this decodes.)
    """

    def __init__(self, tokenizer: Any, stop: tuple[str, ...], start: int):
        self.tokenizer, self.stop, self.start = tokenizer, stop, start

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        """One flag per sequence: True once it has said a stop string."""
        import torch

        texts = self.tokenizer.batch_decode(input_ids[:, self.start :], skip_special_tokens=True)
        return torch.tensor(
            [any(s in t for s in self.stop) for t in texts], device=input_ids.device
        )


def cut_at_stop(text: str, stop: tuple[str, ...]) -> str:
    """`text` up to the first of the `stop` strings (the model stopped there; what it added after is
    dropped).
    """
    ends = [i for i in (text.find(s) for s in stop) if i >= 0]
    return text[: min(ends)] if ends else text
