"""`Backend`: what every model backend shares (batching by token budget with out-of-memory halving,
ordering, caching, progress, data parallelism), so that a backend (causal, masked, seq2seq) only
writes `_prepare`, `_cost` and `_score_batch`. Backends are found through the registry in
`culture_probe.engine.scorer`, which this module does not know.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from culture_probe.engine import parallel
from culture_probe.engine.cache import ScoreCache, cache_path, identity_digest
from culture_probe.engine.encoding import Encoder, Tally
from culture_probe.engine.spending import Spending
from culture_probe.engine.tokenizer import model_max_length
from culture_probe.engine.tokens import TokenRows, row_sums
from culture_probe.engine.types import (
    CandidateScores,
    FillMaskOptions,
    GenerateOptions,
    ModelKind,
    ScoreOptions,
    ScoreRequest,
    Truncation,
    check_prompts,
    make_options,
)
from culture_probe.errors import UnsupportedModelError

if TYPE_CHECKING:
    import torch
    from tqdm.auto import tqdm
    from transformers import PreTrainedModel

CPU_BUDGET = 4096  # tokens per forward pass on CPU
CUDA_BUDGET = 1 << 16  # first try on CUDA; halved on out-of-memory until it fits


class Backend:
    """Scores candidate fillers with one kind of model, and generates (greedy, or seeded sampling).

    Made by `Scorer(model, tokenizer)` or `Scorer.from_pretrained(name_or_path)`, which pick the
    backend class for the model's kind (`culture_probe.engine.scorer`).
    """

    kind: ModelKind
    # the transformers Auto class that loads this kind of model (`Scorer.from_pretrained`)
    auto_class: str

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: Any,
        *,
        batch_tokens: int | None = None,
        cache: str | Path | None = None,
        cache_dir: str | Path | None = None,
        add_bos: bool | None = None,
        identity: dict[str, Any] | None = None,
        ahead: bool | None = None,
    ):
        self.model, self.tokenizer = model, tokenizer
        # prepare the next call's requests while the model runs (`prefetch`); None: where the model
        # is not on a CPU
        self.ahead = ahead
        self.identity = dict(
            identity or _identity(model, tokenizer, name=getattr(model, "name_or_path", "") or "")
        )
        self.encoder = Encoder(
            tokenizer,
            add_bos=add_bos,
            max_length=model_max_length(model, tokenizer),
            name=self.identity["name_or_path"],
        )
        self.batch_tokens = batch_tokens
        # the automatic budget, once out-of-memory errors have lowered it
        self.auto_budget: int | None = None
        # what the model has run so far, scoring and generation apart: what a run's rate counts
        self.spending = Spending()
        self.identity["kind"] = self.kind
        self.identity["add_bos"] = add_bos
        self.cache_path = cache_path(cache, cache_dir, self.identity)
        # requests prepared ahead (`prefetch`): their keys, options and the preparation under way
        self._ahead: (
            tuple[tuple[str, ...], ScoreOptions, Future[tuple[list[Any], Tally]]] | None
        ) = None
        self._worker: ThreadPoolExecutor | None = None
        # one preparation at a time (ahead or not): the encoder's memo and the tokenizer are shared
        self.preparing = threading.RLock()
        # called with the number of requests (or prompts) each batch completes (`reporting`)
        self._report: Callable[[int], None] | None = None
        self._check_model()

    # ---- the hooks a backend writes
    # -------------------------------------------------------------------------
    def _check_model(self) -> None:
        """Refuse, at construction, a model or tokenizer the backend cannot score with."""

    def _prepare_all(self, requests: Sequence[ScoreRequest], options: ScoreOptions) -> list[Any]:
        """Turn requests into the backend's work items (token ids, already fitted to the model), in
        order.
        """
        raise NotImplementedError

    def _prepare(self, request: ScoreRequest, options: ScoreOptions) -> Any:
        """The work item of one request (`_prepare_all`)."""
        return self._prepare_all([request], options)[0]

    def _cost(self, item: Any) -> int:
        """Tokens a work item puts through the model (for batching by token budget)."""
        raise NotImplementedError

    def _reads(self, item: Any) -> int:
        """Positions of a work item at which the LM head runs (what a time estimate counts its FLOPs
        at).
        """
        raise NotImplementedError

    def _scored(self, item: Any) -> TokenRows:
        """The token rows whose log-probs `_score_batch` returns for a work item, one row per
        candidate.
        """
        raise NotImplementedError

    def _score_batch(
        self, items: list[Any], options: ScoreOptions, budget: int
    ) -> list[np.ndarray]:
        """Per item, the log-prob of each scored token (float64), laid out as `_scored(item)`."""
        raise NotImplementedError

    # ---- shared machinery
    # -----------------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        """The device inputs go to (the first parameter's)."""
        device: torch.device = next(self.model.parameters()).device
        return device

    def score(
        self,
        requests: Sequence[ScoreRequest],
        options: ScoreOptions | None = None,
        *,
        progress: bool = False,
        **fields: Any,
    ) -> list[CandidateScores]:
        """Score every request's candidates; one `CandidateScores` per request, in request order.

        `options` (a `ScoreOptions`), or its fields as keywords (`masked_method="l2r"`,
        `keep_tokens=True`, ...). With several processes (accelerate/torchrun), each scores a shard
        and every process gets all results.
        """
        with self.spending.timing("score"):
            return self._score(
                list(requests), make_options(ScoreOptions, options, fields), progress
            )

    def _score(
        self, requests: list[ScoreRequest], options: ScoreOptions, progress: bool
    ) -> list[CandidateScores]:
        options = self._check_options(options)
        self._check_requests(requests)
        keys = [self._key(r) for r in requests]
        rank, size = parallel.world()
        cache = self._open_cache(options)
        done = (
            cache.get(
                {key: r.candidates for key, r in zip(keys, requests, strict=True)},
                with_tokens=options.keep_tokens,
            )
            if cache is not None
            else {}
        )
        # every process has read the cache before any writes to it: same shards
        parallel.barrier(size)
        # Each process prepares its share of the distinct requests only, those the cache holds too
        # (so that the truncation record counts every context whatever the cache held), and scores
        # what of it the cache lacks. A bad request is raised by every process alike, not only by
        # the one that met it while the others wait.
        mine = _distinct(keys)[rank::size]
        before = self.encoder.truncation
        try:
            prepared = dict(
                zip(mine, self._prepared([requests[i] for i in mine], options), strict=True)
            )
            error = None
        except Exception as raised:  # noqa: BLE001 - every process must hear of it
            error = raised
        parallel.raise_together(error, size)
        self.encoder.truncation = parallel.sum_truncation(before, self.encoder.truncation, size)
        items = {i: item for i, item in prepared.items() if keys[i] not in done}
        with fused_activations(self.model):
            local = self._score_items(requests, items, options, cache, progress and rank == 0)
        done.update({keys[i]: value for i, value in parallel.gather(local, size).items()})
        if cache is not None:
            cache.close()
        return [_view(done[key], options.keep_tokens) for key in keys]

    def _check_requests(self, requests: Sequence[ScoreRequest]) -> None:
        """Refuse requests this model's kind cannot score, before any is prepared."""
        if self.kind != "causal" and any(r.chat for r in requests):
            raise UnsupportedModelError(
                f"ScoreRequest(chat=True) scores a candidate as the reply to a chat prompt, which needs a causal "
                f"model; this one is {self.kind}. Use chat=False (the plain left/right slot) for this model."
            )
        if self.kind == "seq2seq" and any(r.candidate_ids != "in_context" for r in requests):
            raise UnsupportedModelError(
                "ScoreRequest(candidate_ids='alone'/'piece') reproduces masked and causal probes; a seq2seq model "
                "scores its candidates inside sentinel spans. Leave candidate_ids at 'in_context' for this model."
            )

    def prefetch(
        self, requests: Sequence[ScoreRequest], options: ScoreOptions | None = None, **fields: Any
    ) -> None:
        """Prepare, in the background, this process's share of the requests of the next `score` call
        (tokenizing, fitting, laying out), while the model runs the current one on its accelerator:
        that call then finds them prepared. One call ahead at most; a call that asks something else
        prepares its own, and what was prepared ahead is dropped uncounted (cuts are counted when
        prepared items are used, `Encoder.apart`). Nothing on a CPU unless the scorer was made with
        `ahead=True`: the model's threads use the cores a preparation would take (measured: a 12%
        slower stage on 2 cores).
        """
        if not (self.ahead if self.ahead is not None else self.device.type != "cpu"):
            return
        options = self._check_options(make_options(ScoreOptions, options, fields))
        requests = list(requests)
        self._check_requests(requests)
        keys = [self._key(r) for r in requests]
        rank, size = parallel.world()
        mine = [requests[i] for i in _distinct(keys)[rank::size]]
        if self._ahead is not None:
            self._ahead[2].cancel()
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="culture-probe-prepare")
        future = self._worker.submit(self._prepare_apart, mine, options)
        self._ahead = (tuple(self._key(r) for r in mine), options, future)

    def _prepare_apart(
        self, requests: list[ScoreRequest], options: ScoreOptions
    ) -> tuple[list[Any], Tally]:
        """`_prepare_all` of requests prepared ahead, with what the encoder cut counted apart."""
        with self.preparing, self.encoder.apart() as tally:
            return self._prepare_all(requests, options), tally

    def _prepared(self, requests: list[ScoreRequest], options: ScoreOptions) -> list[Any]:
        """The work items of `requests`: prepared ahead (`prefetch`) when they were, else now."""
        ahead, self._ahead = self._ahead, None
        if (
            ahead is not None
            and ahead[0] == tuple(self._key(r) for r in requests)
            and ahead[1] == options
        ):
            items, tally = ahead[2].result()
            self.encoder.absorb(tally)
            return items
        if ahead is not None:
            ahead[2].cancel()
        with self.preparing:
            return self._prepare_all(requests, options)

    def _check_options(self, options: ScoreOptions) -> ScoreOptions:
        """A rule this model's kind cannot follow is an error (never silently ignored: it would also
        split the cache keys of equal scores).
        """
        rules = (  # (asked for, the kind it needs, what it does)
            (
                "masked_method='l2r'",
                options.masked_method == "l2r",
                "masked",
                "predicts each subword at a mask",
            ),
            (
                "seq2seq_style='plain'",
                options.seq2seq_style == "plain",
                "seq2seq",
                "scores the candidate as the whole decoder target",
            ),
            (
                "score_right=True",
                options.score_right,
                "causal",
                "scores the right-hand text as a continuation",
            ),
        )
        for option, asked, kind, what in rules:
            if asked and self.kind != kind:
                raise UnsupportedModelError(
                    f"{option} {what}, which needs a {kind} model; this one is {self.kind}. "
                    f"Leave {option.split('=')[0]} at its default."
                )
        return options

    def _key(self, request: ScoreRequest) -> str:
        """The request's cache key; a chat request's also covers the chat template, which the
        tokenizer hash (its vocabulary and rules) does not.
        """
        if not request.chat:
            return request.key()
        template = str(getattr(self.tokenizer, "chat_template", None))
        return hashlib.sha256(f"{request.key()}\n{template}".encode()).hexdigest()

    def model_digest(self) -> str:
        """A digest of the model identity: the cache's model key and the name of its file in a cache
        folder.
        """
        return identity_digest(self.identity)

    @property
    def truncation(self) -> Truncation:
        """What was cut on the left to fit the model's input limit (contexts, generation prompts)
        since the scorer was made or `recording` last began.
        """
        return self.encoder.truncation

    def recording(self, label: str | None = None) -> AbstractContextManager[None]:
        """`with scorer.recording("dlama_ar_west"):` counts cuts afresh for one run (read
        `truncation` after the block) and warns afresh, once per kind of input, naming `label`.
        """
        return self.encoder.recording(label)

    def _open_cache(self, options: ScoreOptions) -> ScoreCache | None:
        if self.cache_path is None:
            return None
        return ScoreCache(self.cache_path, model=self.model_digest(), options=options.digest())

    def _score_items(
        self,
        requests: list[ScoreRequest],
        items: dict[int, Any],
        options: ScoreOptions,
        cache: ScoreCache | None,
        progress: bool,
    ) -> dict[int, CandidateScores]:
        results: dict[int, CandidateScores] = {}
        bar = _progress(len(items), progress)

        def run(batch: list[int], budget: int) -> list[np.ndarray]:
            return self._score_batch([items[i] for i in batch], options, budget)

        for batch, scored in self.batches({i: self._cost(item) for i, item in items.items()}, run):
            new = {
                i: _assemble(
                    requests[i].candidates,
                    values,
                    self._scored(items[i]),
                    options.keep_tokens,
                )
                for i, values in zip(batch, scored, strict=True)
            }
            results.update(new)
            if cache is not None:
                cache.put(
                    {self._key(requests[i]): value for i, value in new.items()},
                    with_tokens=options.keep_tokens,
                )
            bar.update(len(batch))
        bar.close()
        return results

    @property
    def tokens_run(self) -> int:
        """Tokens put through the model so far (its batches' costs), scoring and generation
        together.
        """
        return self.spending.tokens

    def batches(
        self,
        costs: dict[int, int],
        run: Callable[[list[int], int], list[Any]],
        kind: str = "score",
    ) -> Iterator[tuple[list[int], list[Any]]]:
        """(batch, `run(batch, budget)`) for batches of the keys of `costs` (tokens each puts
        through the model), longest first so that an out-of-memory error happens at once rather than
        hours in, each within the token budget. With the automatic budget, an out-of-memory error
        halves it (remembered for later calls) and the same items run again; a budget the user chose
        (`batch_tokens`) is never changed. Each batch's tokens count as `kind`'s (`spending`:
        "score" or "generate").
        """
        order = sorted(costs, key=lambda i: -costs[i])
        budget = self.budget()
        while order:
            batch = _take_batch(order, costs, budget)
            try:
                out = run(batch, budget)
            except Exception as error:
                if self.batch_tokens is not None or not _is_oom(error) or budget <= 16:
                    raise
                budget //= 2
                self.auto_budget = budget
                _free_memory()
                continue
            self.spending.ran(kind, sum(costs[i] for i in batch))
            yield batch, out
            if self._report is not None:
                self._report(len(batch))
            order = order[len(batch) :]

    @contextmanager
    def reporting(self, callback: Callable[[int], None]) -> Iterator[None]:
        """Within the block, call `callback(n)` as each batch completes `n` requests (or generation
        prompts) of the call in flight: what a progress bar moves by between the calls.
        """
        self._report = callback
        try:
            yield
        finally:
            self._report = None

    def generate(
        self, prompts: Sequence[str], options: GenerateOptions | None = None, **fields: Any
    ) -> list[str]:
        """Continuations of `prompts` (new text only): greedy, batched by token budget, or sampled
        with a per-prompt seed so that the same seed gives the same texts whatever the batch size or
        process count.

        `options` (a `GenerateOptions`), or its fields as keywords: `generate(prompts,
        max_new_tokens=4)`.
        """
        from culture_probe.engine.generation import generate

        options = make_options(GenerateOptions, options, fields)
        prompts = list(prompts)
        check_prompts(prompts, options)
        with self.spending.timing("generate"):
            return generate(self, prompts, options)

    def fill_mask(
        self,
        lefts: Sequence[str],
        options: FillMaskOptions | None = None,
        *,
        rights: Sequence[str] | None = None,
        **fields: Any,
    ) -> list[list[tuple[str, float]]]:
        """The `top_k` vocabulary pieces (decoded text, log-prob) at one mask put after each left
        text; masked models only (see `MaskedScorer.fill_mask`).
        """
        raise UnsupportedModelError(
            f"fill_mask predicts the vocabulary piece at a mask token, which needs a masked model; this one is "
            f"{self.kind}. Use generate() for causal and seq2seq models."
        )

    def budget(self) -> int:
        """Tokens per forward pass: the user's `batch_tokens`, else the automatic budget for the
        device.
        """
        return (
            self.batch_tokens
            or self.auto_budget
            or (CUDA_BUDGET if self.device.type == "cuda" else CPU_BUDGET)
        )


def _distinct(keys: list[str]) -> list[int]:
    """The index of the last request of each distinct key, in order."""
    return sorted({key: i for i, key in enumerate(keys)}.values())


def batch_sizes(costs: dict[int, int], budget: int) -> list[int]:
    """The sizes of the batches `Backend.batches` forms of `costs` within `budget` (no out-of-memory
    error met).
    """
    order, sizes = sorted(costs, key=lambda i: -costs[i]), []
    while order:
        sizes.append(len(_take_batch(order, costs, budget)))
        order = order[sizes[-1] :]
    return sizes


def _take_batch(order: list[int], costs: dict[int, int], budget: int) -> list[int]:
    """The longest prefix of `order` whose total cost fits `budget` (at least one item)."""
    total, n = 0, 0
    for i in order:
        if n and total + costs[i] > budget:
            break
        total, n = total + costs[i], n + 1
    return order[:n]


def _assemble(
    candidates: tuple[str, ...], values: np.ndarray, rows: TokenRows, keep_tokens: bool
) -> CandidateScores:
    """The scores of one request from the log-prob of each scored token, laid out as `rows` (one per
    candidate); the per-token arrays (views of one array) only when they are kept.
    """
    values = np.asarray(values, dtype=np.float64)
    return CandidateScores(
        candidates=candidates,
        sum_logprob=row_sums(values, rows),
        n_tokens=rows.lengths,
        token_logprobs=tuple(np.split(values, rows.starts[1:-1])) if keep_tokens else None,
    )


def _view(scores: CandidateScores, keep_tokens: bool) -> CandidateScores:
    if keep_tokens:
        return scores
    return CandidateScores(scores.candidates, scores.sum_logprob, scores.n_tokens)


def _is_oom(error: Exception) -> bool:
    """Whether a smaller batch could run: torch's out-of-memory error (`torch.cuda.OutOfMemoryError`
    is the device-agnostic `torch.OutOfMemoryError` since torch 2.5; the floor is 2.4), or a
    RuntimeError that accelerate's `should_reduce_batch_size` recognises by its allocator's exact
    words (CPU and MPS allocators that raise no typed error, cuDNN's unsupported size). A
    RuntimeError that merely mentions memory is not one.
    """
    import torch
    from accelerate.utils.memory import should_reduce_batch_size

    return isinstance(error, torch.cuda.OutOfMemoryError) or should_reduce_batch_size(error)


def _free_memory() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _progress(total: int, show: bool) -> tqdm[Any]:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="scoring", unit="request", disable=not show)


def _identity(
    model: PreTrainedModel,
    tokenizer: Any,
    *,
    name: str,
    revision: str | None = None,
    hash_weights: bool = True,
) -> dict[str, Any]:
    """What makes scores reproducible: model id or path, revision, dtype, tokenizer hash; the Hub
    commit the files came from and, for a local folder, a fingerprint of its weight files (so a
    retrained folder or a moved Hub repo misses the cache); for a model built in memory (no file
    behind it) also a hash of its weights.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    text = (
        backend.to_str()
        if backend is not None
        else json.dumps(tokenizer.get_vocab(), sort_keys=True)
    )
    identity: dict[str, Any] = {
        "name_or_path": str(Path(name).resolve()) if name and Path(name).exists() else name,
        "revision": revision,
        "dtype": str(next(model.parameters()).dtype),
        "architecture": type(model).__name__,
        "tokenizer_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
    }
    commit = getattr(model.config, "_commit_hash", None)
    # only when known, so identities (and cache keys) of models built in memory stay as they were
    if commit:
        identity["commit"] = commit
    if name and Path(name).is_dir():
        identity["weight_files"] = weight_fingerprint(Path(name))
    # Hashing is cheap for the small models built in memory (tests, planted models); a large one is
    # named by its config and path only.
    if hash_weights and model.num_parameters() <= 200_000_000:
        digest = hashlib.sha256(model.config.to_json_string().encode())
        for tensor in model.state_dict().values():
            digest.update(tensor.detach().float().cpu().numpy().tobytes())
        identity["weights_sha256"] = digest.hexdigest()
    return identity


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".gguf")


def weight_fingerprint(folder: Path) -> list[tuple[str, int, int]]:
    """(name, size, modification time in ns) of each weight file in `folder`: cheap for any model
    size, and changed by rewriting the weights (retraining, re-saving, copying in other files).
    """
    files = sorted(f for f in folder.iterdir() if f.is_file() and f.name.endswith(WEIGHT_SUFFIXES))
    return [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files]


def logprobs_at(logits: torch.Tensor, rows: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """`log_softmax(logits)[rows, tokens]` in float32, without building the log-softmax of the whole
    vocabulary (one logsumexp per row of `logits`).
    """
    import torch

    logits = logits.float()
    return logits[rows, tokens] - torch.logsumexp(logits, dim=-1)[rows]


def iter_chunks(n: int, size: int) -> Iterator[slice]:
    """Slices covering range(n) in pieces of at most `size` (at least 1)."""
    size = max(1, size)
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))


#: activations that compute the tanh approximation of GELU in several elementwise passes (GPT-2's
#: `gelu_new`, `gelu_fast`); torch's fused kernel computes the same function in one (measured: 5.7x
#: faster, max |diff| 2.4e-7)
TANH_GELUS = ("NewGELUActivation", "FastGELUActivation")


@contextmanager
def fused_activations(model: PreTrainedModel) -> Iterator[None]:
    """While scoring, run the model's multi-pass tanh-GELU modules as torch's fused
    `gelu(approximate="tanh")` (a quarter of a GPT-2's CPU time went there); the model is left as it
    was afterwards.
    """
    import torch

    swapped = [m for m in model.modules() if type(m).__name__ in TANH_GELUS]
    for module in swapped:
        module.forward = lambda x: torch.nn.functional.gelu(x, approximate="tanh")
    try:
        yield
    finally:
        for module in swapped:
            del module.forward
