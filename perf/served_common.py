"""What perf/bench_served.py and perf/gpu_check.py share (issue 38): a vLLM OpenAI-compatible server
started and stopped, an FmLAMA workload as a served run plans it, and the measurements of scoring
that workload through the server (culture_probe's `openai:` scorer, lm-evaluation-harness's
`local-completions`) and in process.

The server is vLLM's own (`python -m vllm.entrypoints.openai.api_server`, from the Python given:
`.venv-vllm/` on the CPU machine, a GPU machine's vLLM there), on 127.0.0.1, in its own process
group, stopped with it. On the CPU it runs with the served tests' settings
(tests/served/conftest.py): 1 GiB of KV cache, no OpenMP binding, blocks of 32.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
import urllib.request
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# the vLLM server the served tests start (tests/served_helpers.py), started here the same way
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from served_helpers import VllmServer, server_metrics  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
VLLM_VENV_PYTHON = REPO / ".venv-vllm" / "bin" / "python"
MAX_DIFF = 1e-4
# the server's Prometheus counters read before and after each run (summed over their labels unless
# one is given)
COUNTERS = {
    "prompt tokens": ("vllm:prompt_tokens_total", {}),
    "computed": ("vllm:prompt_tokens_by_source_total", {"source": "local_compute"}),
    "cache hits": ("vllm:prefix_cache_hits_total", {}),
    "cache queries": ("vllm:prefix_cache_queries_total", {}),
    "engine requests": ("vllm:request_success_total", {}),
    "engine steps": ("vllm:iteration_tokens_total_count", {}),
}


def counted(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """What the server counted between two `metrics` readings, for each of COUNTERS."""
    out = {}
    for label, (name, wanted) in COUNTERS.items():
        total = 0.0
        for key, value in after.items():
            base, _, labels = key.partition("{")
            if base == name and all(f'{k}="{v}"' in labels for k, v in wanted.items()):
                total += value - before.get(key, 0.0)
        out[label] = total
    return out


def served_model_name(base_url: str) -> str:
    """The first model a running server lists (the name it answers to)."""
    import json

    with urllib.request.urlopen(f"{base_url}/models", timeout=10) as reply:
        return str(json.load(reply)["data"][0]["id"])


# ------------------------------------------------------------------------------------------------
# the workload


@dataclass
class Workload:
    """The first stage of `config` under `--limit dishes`, as a served run plans it: its scoring
    requests grouped by their options (FmLAMA scores a right context in some templates), in probe
    order.
    """

    config: str
    dishes: int
    groups: list[tuple[Any, list[Any]]]  # (ScoreOptions, [ScoreRequest, ...])
    skipped: int

    @property
    def probes(self) -> int:
        return sum(len(requests) for _, requests in self.groups)

    @property
    def prompts(self) -> int:
        return sum(len(r.candidates) for _, requests in self.groups for r in requests)

    def pairs(self) -> list[tuple[str, str]]:
        """(context, continuation) of every candidate, as the served scorer sends them (the left
        text, then the separator, the candidate and, where scored, the right text), in score order.
        """
        from culture_probe.engine.tokenizer import separator

        return [
            (r.left, separator(r.left, r.sep) + c + (r.right if options.score_right else ""))
            for options, requests in self.groups
            for r in requests
            for c in r.candidates
        ]

    def texts(self) -> list[str]:
        """Every prompt's text, for a tokenizer trained on the workload."""
        return [left + rest for left, rest in self.pairs()]


def fmlama_workload(config: str, dishes: int, model: str, base_url: str) -> Workload:
    """The scoring requests a served run of `config --limit dishes` sends to `model` at `base_url`
    (planned as `culture-probe run` plans it; nothing is sent). Probes the protocol skips (e.g. a
    template that needs a country name the language lacks) are counted, not scored.
    """
    from culture_probe.runner.planning import SmallLimitWarning, first_asked, plan
    from culture_probe.runner.stage_models import model_spec
    from culture_probe.settings import RunSettings
    from culture_probe.tasks.probes import ScoreProbe

    settings = RunSettings(limit=dishes, base_url=base_url)
    served = model_spec(f"openai:{model}", settings)
    with warnings.catch_warnings():
        # a limit below the smoke limit lacks per-group intervals: not what is measured here
        warnings.simplefilter("ignore", SmallLimitWarning)
        planned = plan(config, served, settings, {})
        _, part = first_asked(planned.task, planned.probes, settings, served)
    groups: dict[Any, dict[Any, None]] = {}
    for probe in part.probes:
        if isinstance(probe, ScoreProbe):
            # a request asked twice is scored once, by both scorers
            groups.setdefault(probe.options, {})[probe.request] = None
    scored = [p for p in part.probes if isinstance(p, ScoreProbe)]
    return Workload(
        config,
        dishes,
        [(options, list(requests)) for options, requests in groups.items()],
        len(part.probes) - len(scored),
    )


@dataclass(frozen=True)
class TrieCount:
    """Token positions of a workload as the in-process engine builds it (its `_prepare`: context ids
    and the trie of the candidates' ids, with the right text's where it is scored).
    """

    contexts: int  # context tokens, each request's once
    nodes: int  # distinct candidate-trie tokens: shared prefixes once
    inner: int  # trie nodes with children: the engine runs only these (nothing is predicted from a leaf)
    continuations: int  # every candidate's own tokens, nothing shared
    requests: int
    candidates: int

    @property
    def minimal(self) -> int:
        """The distinct token positions: each context once, each trie node once."""
        return self.contexts + self.nodes

    @property
    def engine(self) -> int:
        """What the engine puts through the model: each context once, each inner node once."""
        return self.contexts + self.inner

    def prefix_cached(self) -> int:
        """The best a per-prompt server could do with a perfect prefix cache: each context once,
        every candidate's own tokens in each prompt.
        """
        return self.contexts + self.continuations


def trie_count(scorer: Any, workload: Workload) -> tuple[TrieCount, int]:
    """The engine's own token sets for `workload` (`scorer`: the in-process causal backend), and the
    tokens of the prompts whole (context + continuation per candidate, as a server without a prefix
    cache computes them).
    """
    contexts = nodes = inner = continuations = whole = requests = candidates = 0
    for options, batch in workload.groups:
        checked = scorer._check_options(options)
        for request in batch:
            item = scorer._prepare(request, checked)
            own = sum(len(path) for path in item.trie.paths)
            contexts += len(item.context)
            nodes += len(item.trie.tokens)
            inner += item.trie.inner
            continuations += own
            whole += len(item.context) * len(item.trie.paths) + own
            requests += 1
            candidates += len(item.trie.paths)
    return TrieCount(contexts, nodes, inner, continuations, requests, candidates), whole


# ------------------------------------------------------------------------------------------------
# measurements


def scores_of(results: list[list[Any]]) -> np.ndarray:
    """Every candidate's summed log-prob, in workload order (`results`: per group, the scorer's
    CandidateScores).
    """
    return np.concatenate([s.sum_logprob for group in results for s in group])


def score_all(scorer: Any, workload: Workload) -> tuple[float, np.ndarray]:
    """(seconds, scores) of `scorer.score` on every group of the workload."""
    start = time.perf_counter()
    results = [scorer.score(requests, options) for options, requests in workload.groups]
    return time.perf_counter() - start, scores_of(results)


def warm_up(scorer: Any, workload: Workload) -> None:
    """One small request outside the timings (allocator, kernels, the server's first request), with
    a context of its own, so that no block of the workload is in the prefix cache before it is
    timed.
    """
    from dataclasses import replace

    options, requests = workload.groups[0]
    first = requests[0]
    scorer.score(
        [replace(first, left="Warm up. " + first.left, candidates=first.candidates[:8])], options
    )


@dataclass
class RequestTimes:
    """The served scorer's HTTP requests, each: prompts, and when it was asked (`called`), sent,
    answered (the reply's headers: the server has finished it) and read (the reply parsed by the
    `openai` client).
    """

    rows: list[tuple[int, float, float, float, float]] = field(default_factory=list)

    @property
    def prompts(self) -> int:
        return sum(r[0] for r in self.rows)

    def at_server(self) -> float:
        """Seconds during which the server held at least one of the requests (from sending to the
        reply's headers).
        """
        spans = sorted((r[2], r[3]) for r in self.rows)
        total, end = 0.0, float("-inf")
        for start, stop in spans:
            if stop > end:
                total += stop - max(start, end)
                end = stop
        return total

    def reading(self) -> float:
        """Seconds the client spent reading and parsing replies (summed over requests)."""
        return sum(r[4] - r[3] for r in self.rows)


@contextmanager
def timed_requests(scorer: Any) -> Iterator[RequestTimes]:
    """Times every request of a `ServedScorer` (its `openai` client's `completions.create`, and
    `post` for the token route, and the request and response hooks of the HTTP client under it)
    inside the block.
    """
    times, local = RequestTimes(), threading.local()
    completions = scorer.client.completions
    create, post = completions.create, scorer.client.post
    http = (
        scorer.client._client
    )  # the httpx client the openai client sends with (engine.deadline's)
    hooks = http.event_hooks

    def sent(request: Any) -> None:
        local.sent = time.perf_counter()

    def answered(response: Any) -> None:
        local.answered = time.perf_counter()

    def timed(**body: Any) -> Any:
        called = time.perf_counter()
        reply = create(**body)
        prompt = body.get("prompt")
        count = len(prompt) if isinstance(prompt, list) else 1
        times.rows.append((count, called, local.sent, local.answered, time.perf_counter()))
        return reply

    def posted(*args: Any, **kwargs: Any) -> Any:
        called = time.perf_counter()
        reply = post(*args, **kwargs)
        times.rows.append((1, called, local.sent, local.answered, time.perf_counter()))
        return reply

    http.event_hooks = {
        "request": [*hooks["request"], sent],
        "response": [*hooks["response"], answered],
    }
    completions.create, scorer.client.post = timed, posted
    try:
        yield times
    finally:
        del completions.create, scorer.client.post
        http.event_hooks = hooks


@dataclass
class ServedRun:
    """One served scoring of a workload: its wall time, scores, HTTP requests, what the server
    counted, and CPU seconds (the server's processes where it was started here, and this client's).
    """

    seconds: float
    scores: np.ndarray
    requests: RequestTimes
    counted: dict[str, float]
    server_cpu: dict[str, float]
    client_cpu: float


def score_served(scorer: Any, workload: Workload, server: VllmServer | None) -> ServedRun:
    """The workload through a `ServedScorer`, timed, with the server's counters before and after."""
    base_url = scorer.base_url
    cpu_before = server.cpu_seconds() if server else {}
    before, client = server_metrics(base_url), time.process_time()
    with timed_requests(scorer) as requests:
        seconds, scores = score_all(scorer, workload)
    client = time.process_time() - client
    after = server_metrics(base_url)
    cpu_after = server.cpu_seconds() if server else {}
    cpu = {k: cpu_after[k] - cpu_before.get(k, 0.0) for k in cpu_after}
    return ServedRun(seconds, scores, requests, counted(before, after), cpu, client)


def in_process_scorer(folder: Path, device: str) -> Any:
    """The in-process engine on the served model's own folder."""
    from culture_probe.engine import Scorer

    return Scorer.from_pretrained(folder, device=device)


def served_scorer(name: str, base_url: str, concurrency: int) -> Any:
    """culture_probe's `openai:NAME` scorer (no score cache), as `culture-probe run --model
    openai:NAME` makes it.
    """
    from culture_probe.engine.served import ServedScorer

    return ServedScorer(name, base_url=base_url, concurrency=concurrency)


def harness_scores(
    base_url: str,
    name: str,
    tokenizer: str,
    workload: Workload,
    *,
    batch: int,
    concurrent: int,
    warm: bool = False,
) -> tuple[float, np.ndarray, dict[str, float]]:
    """lm-evaluation-harness's `local-completions` model (the harness's own OpenAI-compatible
    client) on the same (context, continuation) pairs through `loglikelihood`: (seconds, summed
    log-probs, what the server counted). It tokenizes with the model's tokenizer and sends token
    ids, `batch` prompts a request, `concurrent` in flight, echo with the top-1 log-prob at every
    position (its payload).
    """
    from lm_eval.api.instance import Instance
    from lm_eval.api.registry import get_model

    lm = get_model("local-completions")(
        model=name,
        base_url=f"{base_url}/completions",
        tokenizer=tokenizer,
        tokenizer_backend="huggingface",
        batch_size=batch,
        num_concurrent=concurrent,
        max_length=512,
    )
    pairs = workload.pairs()
    if warm:
        pairs = pairs[:8]
    instances = [Instance("loglikelihood", {}, pair, i) for i, pair in enumerate(pairs)]
    before = server_metrics(base_url)
    start = time.perf_counter()
    answers = lm.loglikelihood(instances, disable_tqdm=True)
    seconds = time.perf_counter() - start
    return (
        seconds,
        np.array([logprob for logprob, _ in answers]),
        counted(before, server_metrics(base_url)),
    )


def stop_on_sigterm() -> None:
    """A SIGTERM to this script unwinds it (so a server it started is stopped), as Ctrl-C does."""

    def unwind(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, unwind)


# ------------------------------------------------------------------------------------------------
# SGLang, where it is installed (the GPU check): its native /generate reads its radix cache up to
# `logprob_start_len`


@dataclass
class SglangRun:
    """One scoring of a workload through SGLang's native `/generate`: wall time, scores, the
    prompt tokens it was sent and of them read from its cache, and requests.
    """

    seconds: float
    scores: np.ndarray
    prompt_tokens: int
    cached_tokens: int
    requests: int


@contextmanager
def sglang_server(folder: Path, log: Path, device: str) -> Iterator[str]:
    """The root URL of an SGLang server on 127.0.0.1 serving `folder` in float32 (stopped, with its
    process group, on exit).
    """
    import os
    import subprocess

    from served_helpers import free_port

    port = free_port()
    command = [
        sys.executable, "-m", "sglang.launch_server", "--model-path", str(folder),
        "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
        "--mem-fraction-static", "0.4", "--disable-cuda-graph", "--random-seed", "0",
        *(["--device", "cpu"] if device == "cpu" else []),
    ]  # fmt: skip
    with open(log, "ab") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    root = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 900
        while True:
            try:
                with urllib.request.urlopen(f"{root}/health", timeout=5) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"SGLang did not start; its log ends:\n{log.read_text()[-2000:]}"
                )
            time.sleep(2)
        yield root
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(timeout=60)


def score_sglang(root: str, local: Any, workload: Workload, concurrency: int = 8) -> SglangRun:
    """Every candidate of the workload as the in-process engine's token ids (its encoder: context,
    candidate, and the right text where scored), one `/generate` request each with
    `logprob_start_len` at the candidate's first token, `concurrency` in flight in probe order:
    its score is the sum of the input log-probs returned.
    """
    import json
    from concurrent.futures import ThreadPoolExecutor

    sequences = [
        (enc.context + c + r, len(enc.context))
        for options, requests in workload.groups
        for enc in local.encoder.encode_all(requests, with_right=options.score_right)
        for c, r in zip(enc.candidates.tuples(), enc.rights.tuples(), strict=True)
    ]

    def ask(item: tuple[tuple[int, ...], int]) -> tuple[float, int, int]:
        tokens, start = item
        body = {
            "input_ids": list(tokens),
            "sampling_params": {"max_new_tokens": 1, "temperature": 0.0},
            "return_logprob": True,
            "logprob_start_len": start,
        }
        request = urllib.request.Request(
            f"{root}/generate",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=300) as reply:
            meta = json.load(reply)["meta_info"]
        values = [e[0] for e in meta["input_token_logprobs"] if e[0] is not None]
        if len(values) != len(tokens) - start:
            raise RuntimeError(
                f"SGLang gave {len(values)} input log-probs for the {len(tokens) - start} tokens after "
                f"position {start}"
            )
        return float(sum(values)), int(meta["prompt_tokens"]), int(meta.get("cached_tokens", 0))

    begin = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        answers = list(pool.map(ask, sequences))
    seconds = time.perf_counter() - begin
    return SglangRun(
        seconds,
        np.array([a[0] for a in answers]),
        sum(a[1] for a in answers),
        sum(a[2] for a in answers),
        len(answers),
    )


def block_bound(local: Any, workload: Workload, block: int) -> int:
    """The fewest prompt tokens a server whose prefix cache keeps whole blocks of `block` tokens
    computes for the workload's sequences sent one by one (the engine's token ids): per probe, its
    first sequence whole, then each other's tokens after the context's last whole block. Sharing
    among the candidates' own tokens is left out, so a server can come in a little under it.
    """
    total = 0
    for options, requests in workload.groups:
        for enc in local.encoder.encode_all(requests, with_right=options.score_right):
            context = len(enc.context)
            kept = context // block * block
            tails = [
                len(c) + len(r)
                for c, r in zip(enc.candidates.tuples(), enc.rights.tuples(), strict=True)
            ]
            total += context + tails[0] + sum(context - kept + t for t in tails[1:])
    return total
