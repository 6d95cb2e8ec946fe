"""A model behind an OpenAI-compatible server (vLLM, TGI, `transformers serve`, ...):
`openai:<name>` with a base URL. The server holds the model, on as many GPUs as it likes;
culture_probe drives the protocol.

Generation and chat go through `/v1/completions` and `/v1/chat/completions` (greedy: temperature 0;
sampling: the temperature and a per-prompt seed), several requests in flight at once, each try
bounded whole by the timeout (engine.deadline) and retried with backoff on timeouts, 408/409/429 and
5xx (engine.retries), so that a whole request, a server's `Retry-After` included, ends within
timeout x (retries + 1) plus the backoff; the first failure cancels the requests not yet sent. Every
answer lands in the model's cache as soon as it arrives, so an interrupted run asks only what is
missing. A reply is checked before it is used (engine.replies): read no further than its request can
call for, naming the model asked for, a choice with its text, and for scoring an echo of the prompt
whose offsets and token counts fit it, log-probs finite and not positive; a bad one is one line
naming the server, never a score, and nothing of it is stored.

Candidate scoring needs the log-probs of the prompt's own tokens, which only some servers return.
Where the server offers vLLM's token-in/token-out route (`/inference/v1/generate`: `vllm serve
--enable-scale-out`, with `--enable-prompt-tokens-details` for the cached-token counts) and the
model's tokenizer loads here, a probe is sent as the token ids the in-process engine scores, with
the prefix cache read, in the trie's order, and only the rows the server computed in each request
are used (engine.prefix_rows); a candidate set of single tokens takes one next-token request per
context. Elsewhere, the completions API with `echo=True` and `logprobs` gives them (recomputing
every prompt; said once, with why), and the candidate's score is
the sum over the tokens that start at or after the end of the left text (the engine's rule: the
context's tokens, then the candidate's, a leading space included), and with `score_right` over the
right text's tokens too, as they continue the candidate. A server that returns none gets a clear
error. What a server cannot serve (options of masked and seq2seq models, chat scoring, candidates
named by token ids, token-level generation options, a slot with no left context without the token
route) is refused before any request is sent: `check_scoring` and `check_generation`, which a run
asks of a whole stage before its first request.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import warnings
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, as_completed, wait
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import numpy as np

from culture_probe.engine.cache import cache_path, cached_texts, identity_digest
from culture_probe.engine.deadline import bounded_http_client
from culture_probe.engine.encoding import Encoder
from culture_probe.engine.generation import cut_at_stop, prompt_seed
from culture_probe.engine.prefix_rows import EchoJob, Job, NextJob, Probe, RowsJob
from culture_probe.engine.replies import (
    ReplyLimit,
    ReplyRefused,
    echo_fault,
    reply_limit,
    usage_fault,
)
from culture_probe.engine.retries import Retries, WaitRefused, retried
from culture_probe.engine.tokenizer import separator
from culture_probe.engine.types import (
    MAX_RETRIES,
    REQUEST_TIMEOUT,
    SERVED,
    CandidateScores,
    GenerateOptions,
    ScoreOptions,
    ScoreRequest,
    check_prompts,
    make_options,
)
from culture_probe.errors import EndpointError, InvalidValueError, UnsupportedModelError
from culture_probe.sharing import redact_url, redacted

# prompts per completions request: vLLM answers 400 beyond 1,024 (its VLLM_MAX_COMPLETION_PROMPTS)
MAX_PROMPTS = 1024
GENERATED = 1  # tokens generated after each echoed prompt: its log-probs are the prompt's
# vLLM's token-in/token-out route, beside /v1 (vllm#24261; `vllm serve --enable-scale-out`)
GENERATE_ROUTE = "/inference/v1/generate"
# the most ids one request may name for their log-probs (vLLM's MAX_LOGPROB_TOKEN_IDS); a server
# allows fewer where its --max-logprobs is lower (20 by default), which the route's probe reads
MAX_LOGPROB_IDS = 128
ECHO = "/v1/completions with echo"
# requests in flight through the token route for each of `concurrency`: one candidate a request
# there, where an echo request holds up to MAX_PROMPTS (measured: fmlama_he --limit 1 on the CPU
# build, 31.8 s with 8 in flight, 11.4 s with 64; perf/bench_served.py)
FANOUT = 8
T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Route:
    """How a server is asked for prompt log-probs: by token ids (`tokens`: the tokenizer loaded
    here) through `GENERATE_ROUTE` at `url`, with the prefix cache read where replies count their
    cached tokens and the server caches blocks of `block_size`, and through the completions API's
    echo (token-id prompts, else texts) where that cannot save anything; and why not, where not.
    """

    url: str | None
    tokens: bool = False
    ids_per_request: int = 0  # distinct ids one next-token request scores
    cached_counts: bool = False  # replies count their cached tokens
    block_size: int | None = None  # the server's prefix cache block (None: no prefix caching)
    why: str = ""

    @property
    def cache(self) -> bool:
        """Whether sequences are sent one by one with the prefix cache read."""
        return self.url is not None and self.cached_counts and self.block_size is not None

    def echo_size(self, context: int) -> int:
        """Sequences of one echo request for a context of `context` tokens (0: one by one, with the
        cache read): a context shorter than one block shares no cached block.
        """
        return 0 if self.cache and context >= (self.block_size or 0) else MAX_PROMPTS

    @property
    def name(self) -> str:
        """The route in words (what a run and the benchmarks report)."""
        if not self.tokens:
            return f"{ECHO} of texts"
        if self.url is None:
            return f"{ECHO} of token ids"
        if not self.cache:
            return f"{GENERATE_ROUTE} for single tokens, {ECHO} of token ids otherwise"
        return (
            f"{GENERATE_ROUTE} by token ids with the prefix cache read (blocks of {self.block_size}); "
            f"{ECHO} of token ids for contexts shorter than a block"
        )


class ServedScorer:
    """The engine's scoring and generation API over an OpenAI-compatible server."""

    kind = "causal"

    def __init__(
        self,
        name: str,
        *,
        base_url: str,
        api_key: str | None = None,
        concurrency: int = 8,
        timeout: float = REQUEST_TIMEOUT,
        retries: int = MAX_RETRIES,
        cache: str | Path | None = None,
        cache_dir: str | Path | None = None,
        tokenizer: Any = None,
    ):
        try:
            from openai import OpenAI
        except ImportError:
            raise UnsupportedModelError(
                f"{SERVED}{name} is asked through the `openai` client, which is not "
                "installed: pip install 'culture_probe[serve]'."
            ) from None
        if not base_url:
            raise InvalidValueError(
                f"{SERVED}{name} needs the server's base URL (--base-url http://HOST:PORT/v1, or base_url=)."
            )
        if concurrency < 1:
            raise InvalidValueError(
                f"concurrency must be a whole number >= 1, got {concurrency!r}."
            )
        self.name, self.base_url, self.concurrency = name, base_url.rstrip("/"), concurrency
        self.timeout, self.retries = timeout, retries
        self.policy, self.limit = Retries(timeout, retries), ReplyLimit()
        self.client = OpenAI(
            base_url=self.base_url,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "none",
            timeout=timeout,
            # retried here (`self.policy`), so that a server's Retry-After counts inside the
            # request's bound
            max_retries=0,
            http_client=self._http_client(),
        )
        # a password or key in the URL is sent, never shown or recorded
        self.shown_url = redact_url(self.base_url)
        self.identity = {
            "name_or_path": SERVED + name,
            "base_url": self.shown_url,
            "kind": self.kind,
            "served": True,
        }
        self.cache_path = cache_path(cache, cache_dir, self.identity)
        # the model's tokenizer (a loaded one, or the name or folder to load it from; default: the
        # served name), which the token route needs
        self.tokenizer_source = tokenizer
        self.encoder: Encoder | None = None
        self._route: Route | None = None
        self._route_lock = threading.Lock()
        # token route requests so far, by kind (rows, next-token, rows asked again with the cache
        # off): what a benchmark reports
        self.sent: Counter[str] = Counter()

    def _http_client(self) -> Any:
        """The HTTP client of the requests: each try bounded whole by the timeout, not each read
        (engine.deadline), and each reply read no further than its request's limit, uncompressed
        (engine.replies).
        """
        return bounded_http_client(
            self.timeout, response_hooks=[self.limit.check], headers=self.limit.headers
        )

    def model_digest(self) -> str:
        """A digest of the model identity: the cache's model key and the name of its file in a cache
        folder.
        """
        return identity_digest(self.identity)

    # ------------------------------------------------------------ generation

    def generate(
        self, prompts: Sequence[str], options: GenerateOptions | None = None, **fields: Any
    ) -> list[str]:
        """Continuations of `prompts`, as `Scorer.generate` gives them, asked of the server."""
        options = make_options(GenerateOptions, options, fields)
        self.check_generation(options)
        prompts = list(prompts)
        check_prompts(prompts, options)

        def produce(todo: list[str]) -> Iterator[dict[str, str]]:
            for prompt, text in self._answers(lambda p: self._complete(p, options), todo):
                yield {prompt: text}  # each answer is stored as soon as it arrives

        done = cached_texts(
            self.cache_path,
            model=self.model_digest(),
            options=options,
            prompts=prompts,
            produce=produce,
        )
        return [done[p] for p in prompts]

    def check_generation(self, options: GenerateOptions) -> None:
        """Refuse what a server cannot generate with, before any request is sent: token-level
        options (the server tokenizes).
        """
        if options.add_special_tokens is not None:
            raise UnsupportedModelError(
                "add_special_tokens= cannot be sent to a served model: the server tokenizes. Leave it unset."
            )

    def _complete(self, prompt: str, options: GenerateOptions) -> str:
        """One prompt's continuation (chat or plain), stop strings cut off as the in-process engine
        does.
        """
        sampling = (
            {"temperature": 0.0}
            if options.temperature is None
            else {
                "temperature": options.temperature,
                "seed": prompt_seed(options.seed or 0, prompt) % (2**31),
            }
        )
        common = {"model": self.name, "max_tokens": options.max_new_tokens, **sampling}
        if options.stop:
            common["stop"] = list(options.stop)
        # A dict of keywords leaves unset options out rather than passing the `omit` sentinel (not
        # in every openai>=1.98); both endpoints take all of `common`.
        if options.chat:
            messages = [{"role": "system", "content": options.system}] if options.system else []
            choice = self._ask(
                self.client.chat.completions.create,
                messages=[*messages, {"role": "user", "content": prompt}],
                **common,
            )
            message = getattr(choice, "message", None)
            # the chat schema allows a null content: no text
            text = getattr(message, "content", None) or ""
            if message is None or not isinstance(text, str):
                raise self._bad_reply(
                    f"its choice has no message with a text content ({choice!r:.100})"
                )
        else:
            text = getattr(
                self._ask(self.client.completions.create, prompt=prompt, **common), "text", None
            )
            if not isinstance(text, str):
                raise self._bad_reply(f"its choice's text is {text!r:.60}, not a string")
        return cut_at_stop(text, options.stop)

    # ------------------------------------------------------------ scoring

    def score(
        self,
        requests: Sequence[ScoreRequest],
        options: ScoreOptions | None = None,
        *,
        progress: bool = False,
        **fields: Any,
    ) -> list[CandidateScores]:
        """Log P(candidate | left) for every candidate (with `score_right`, of the candidate and the
        right text that follows it, as the in-process engine scores them), from the prompt log-probs
        the server computed: by token ids where the server offers the token route (`route`), else
        from the echoed prompts.
        """
        options = make_options(ScoreOptions, options, fields)
        self.check_scoring(requests, options)
        right = options.score_right
        values = (
            self._token_values(requests, right)
            if self.route.tokens
            else self._echo_values(requests, right)
        )
        out = []
        for request, per in zip(requests, values, strict=True):
            tokens = [np.asarray(v, dtype=np.float64) for v in per]
            out.append(
                CandidateScores(
                    request.candidates,
                    np.array([t.sum() for t in tokens]),
                    np.array([len(t) for t in tokens], dtype=np.int64),
                    tuple(tokens) if options.keep_tokens else None,
                )
            )
        return out

    def check_scoring(self, requests: Sequence[ScoreRequest], options: ScoreOptions) -> None:
        """Refuse what a server cannot score, before any request is sent (a run asks it of a whole
        stage before its first request): options of masked and seq2seq models, chat requests (the
        template is the server's), and candidates named by token ids (the server tokenizes).
        """
        if options.masked_method != "typed" or options.seq2seq_style != "sentinel":
            raise UnsupportedModelError(
                "A served model is causal: masked_method and seq2seq_style concern masked and seq2seq models "
                "scored in process; leave them at their defaults."
            )
        if any(r.chat for r in requests):
            raise UnsupportedModelError(
                "ScoreRequest(chat=True) needs the chat template applied before scoring, "
                "which a server does not expose; score it with the model in process."
            )
        if any(r.candidate_ids != "in_context" for r in requests):
            raise UnsupportedModelError(
                "ScoreRequest(candidate_ids='alone'/'piece') needs the model's token ids, "
                "which a server does not take; score it with the model in process."
            )
        empty = next((r for r in requests if not r.left.strip()), None)
        if empty is not None:
            self._check_start(empty)

    def _check_start(self, empty: ScoreRequest) -> None:
        """A slot with no left context is scored after the model's start token, as in process: sent
        by token ids through the token route; refused, naming why, where there is none.
        """
        where = f"A slot with no left context (candidates {list(empty.candidates)[:2]!r}, ... before {empty.right!r})"
        route = self.route
        if not route.tokens:
            raise UnsupportedModelError(
                f"{where} is scored after the model's BOS token in process; through {ECHO} of texts a server "
                "returns no log-prob for a prompt's first token and takes no BOS from the client, and token ids, "
                f"which would carry one, cannot be made here: {route.why} Score this config with the model in process."
            )
        encoder = self.encoder
        if (
            encoder is not None
            and not encoder.prefix
            and encoder.tokenizer.bos_token_id is None
            and encoder.tokenizer.eos_token_id is None
        ):
            raise UnsupportedModelError(
                f"{where} needs a start token before its first candidate token, and the tokenizer of {self.name!r} "
                "has neither a BOS nor an EOS token; no model scores it. Give the template a left context."
            )

    def _echo_values(
        self, requests: Sequence[ScoreRequest], right: bool
    ) -> list[list[list[float]]]:
        """Per request and candidate, the log-probs of its tokens from the echoed prompts."""
        answers = dict(self._answers(lambda r: self._probe_logprobs(r, right), requests))
        return [answers[request] for request in requests]

    def _probe_logprobs(self, request: ScoreRequest, right: bool) -> list[list[float]]:
        """Per candidate of one request, the log-probs of its tokens (and, with `right`, of the
        right text's): its candidates' prompts in as few requests as the server takes (`MAX_PROMPTS`
        each), not one request each.
        """
        lead = request.left + separator(request.left, request.sep)
        prompts = [lead + c + (request.right if right else "") for c in request.candidates]
        return [
            values
            for start in range(0, len(prompts), MAX_PROMPTS)
            for values in self._prompt_logprobs(request.left, prompts[start : start + MAX_PROMPTS])
        ]

    def _prompt_logprobs(self, left: str, prompts: list[str]) -> list[list[float]]:
        """For each of `prompts` (in one request), the log-probs of its tokens after the context
        `left`, as the server echoes them; only the prompt tokens' own log-probs are asked for
        (`logprobs=0`: no alternatives).
        """
        reply, choices = self._echoed(prompts)
        kept = [self._after_context(left, prompts[i], choices[i]) for i in range(len(prompts))]
        echoed = [len(choices[i].logprobs.token_logprobs) for i in range(len(prompts))]
        fault = usage_fault(getattr(reply, "usage", None), echoed, GENERATED)
        if fault:
            raise self._bad_reply(fault)
        return kept

    def _echoed(self, prompts: list[Any]) -> tuple[Any, dict[Any, Any]]:
        """The reply to one completions request echoing `prompts` (texts or token ids) with their
        tokens' log-probs, and its choices by index, one for each prompt (checked).
        """
        reply = self._reply(
            self.client.completions.create,
            model=self.name,
            prompt=prompts,
            max_tokens=GENERATED,
            temperature=0.0,
            echo=True,
            logprobs=0,
        )
        choices = {getattr(c, "index", None): c for c in reply.choices}
        if len(reply.choices) != len(prompts) or set(choices) != set(range(len(prompts))):
            raise self._bad_reply(
                f"it answered {len(prompts)} prompt(s) with the choices {list(choices)!r:.60}"
            )
        return reply, choices

    def _after_context(self, left: str, prompt: str, choice: Any) -> list[float]:
        """The echoed log-probs of `prompt`'s tokens after the context `left`, checked."""
        logprobs = getattr(choice, "logprobs", None)
        values, offsets = (
            getattr(logprobs, "token_logprobs", None),
            getattr(logprobs, "text_offset", None),
        )
        if not values or not offsets:
            raise UnsupportedModelError(
                f"The server at {self.shown_url} returned no prompt log-probs for {self.name!r} (completions with "
                "echo=True and logprobs), so it cannot score candidates. Serve the model with vLLM, or score it in "
                "process; generation and chat work with any OpenAI-compatible server."
            )
        if (
            not isinstance(values, list)
            or not isinstance(offsets, list)
            or len(values) != len(offsets)
        ):
            raise self._bad_reply(
                f"its token_logprobs ({_length(values)}) and text_offset ({_length(offsets)}) do not pair up"
            )
        if not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets):
            raise self._bad_reply(
                f"its text_offset holds more than whole numbers ({offsets!r:.60})"
            )
        fault = echo_fault(prompt, getattr(choice, "text", None), offsets)
        if fault:
            raise self._bad_reply(fault)
        # the candidate's tokens follow the context's: trailing whitespace of the left text and a
        # leading space are the candidate's, as the in-process engine splits them (Encoder.encode)
        boundary = len(left.rstrip())
        # The echoed prompt comes first (checked: the last token is a generated one), and is what is
        # scored.
        kept = [
            v for offset, v in zip(offsets[:-1], values[:-1], strict=True) if offset >= boundary
        ]
        if not kept or any(v is None for v in kept):
            raise UnsupportedModelError(
                f"The server's prompt log-probs for {prompt!r} cover no token after the context {left!r}."
            )
        bad = [v for v in kept if not _is_logprob(v)]
        if bad:
            raise self._bad_reply(
                f"the log-probs of {prompt[len(left) :]!r} include {bad[0]!r}; a log-probability is a finite "
                "number <= 0"
            )
        return kept

    # ------------------------------------------------------------ the token route

    @property
    def route(self) -> Route:
        """How candidates are scored here, found on first use (engine.prefix_rows): the token route
        where the server offers it and the tokenizer loads, else the echo, said once with why.
        """
        with self._route_lock:
            if self._route is None:
                self._route = self._find_route()
                if not self._route.cache:
                    warnings.warn(
                        f"{SERVED}{self.name} is scored through {self._route.name}, which computes every "
                        f"prompt whole (no prefix cache): {self._route.why}",
                        stacklevel=3,
                    )
        return self._route

    def _find_route(self) -> Route:
        """Load the tokenizer and ask the server for the token route: whether it answers, counts
        cached tokens, how many ids one request may name (its --max-logprobs) and the block its
        prefix cache keeps (its /metrics).
        """
        try:
            tokenizer = self._load_tokenizer()
        except Exception as error:  # whatever stops a tokenizer loading leaves the echo of texts
            return Route(
                None,
                why=f"the tokenizer of {self.name!r} did not load here ({type(error).__name__}: "
                f"{redacted(str(error))[:200]}); pass tokenizer= its Hub id or folder.",
            )
        self.encoder = Encoder(tokenizer, name=SERVED + self.name)
        root = self.base_url.removesuffix("/v1")
        if root == self.base_url:
            return Route(
                None,
                tokens=True,
                why=f"the base URL {self.shown_url} does not end in /v1, beside which {GENERATE_ROUTE} lies.",
            )
        start = next(
            (t for t in (tokenizer.bos_token_id, tokenizer.eos_token_id) if t is not None), 0
        )
        url = root + GENERATE_ROUTE
        first = self._probe_route(url, [start, start], {"prompt_logprobs": 0})
        if isinstance(first, str):
            return Route(None, tokens=True, why=first)
        usage = first.get("usage") or {}
        details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
        counted = isinstance(details, dict) and isinstance(details.get("cached_tokens"), int)
        ids = list(range(min(MAX_LOGPROB_IDS, len(tokenizer))))
        limit = self._probe_route(url, [start], {"logprobs": len(ids), "logprob_token_ids": ids})
        allowed = len(ids) if isinstance(limit, dict) else _allowed_logprobs(limit)
        if allowed is None or allowed < 2:
            return Route(
                None, tokens=True, why=f"{url} takes no log-probs of named tokens ({limit})."
            )
        block = _cache_block(root)
        if not counted:
            why = "the server does not count cached tokens (start it with --enable-prompt-tokens-details)."
        elif block is None:
            why = "the server reports no prefix caching in its /metrics (--enable-prefix-caching)."
        else:
            why = ""
        # one id fewer than allowed: a repeated id keeps the last one named from being cut off
        return Route(url, True, allowed - 1, counted, block, why)

    def _probe_route(
        self, url: str, tokens: list[int], sampling: dict[str, Any]
    ) -> dict[str, Any] | str:
        """The route's reply to one small request, or why it is not there (404) or refused it
        (400); any other failure is the server's, raised.
        """
        import openai

        body = self._generate_body(tokens, sampling)
        with self._endpoint():  # an unreachable server, a timeout, another status: one line
            try:
                with self.limit.applied(reply_limit(body)):
                    return self._checked(
                        self.policy.run(lambda: self.client.post(url, body=body, cast_to=object))
                    )
            except openai.APIStatusError as error:
                if error.status_code in (404, 405):
                    return (
                        f"the server answers {error.status_code} at {redact_url(url)} (vLLM serves it with "
                        "--enable-scale-out, and counts cached tokens with --enable-prompt-tokens-details)."
                    )
                if error.status_code == 400:
                    return redacted(str(error)[:300])
                raise

    def _load_tokenizer(self) -> Any:
        source = self.tokenizer_source
        if source is not None and not isinstance(source, (str, os.PathLike)):
            return source
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(source or self.name))

    def _token_values(
        self, requests: Sequence[ScoreRequest], right: bool
    ) -> list[list[list[float]]]:
        """Per request and candidate, the log-probs of its tokens (and the right text's), from the
        rows the server computed (engine.prefix_rows), `concurrency` x FANOUT requests in flight
        (each one candidate, or one echo of a probe's); a probe's
        follow-ups go before the next probe's first request, so that its cached blocks are still
        there.
        """
        assert self.encoder is not None  # set with the route
        route = self.route
        probes = [
            Probe(
                i,
                enc.context,
                [c + r for c, r in zip(enc.candidates.tuples(), enc.rights.tuples(), strict=True)],
                route.ids_per_request,
                route.echo_size(len(enc.context)),
            )
            for i, enc in enumerate(self.encoder.encode_all(requests, with_right=right))
        ]
        fresh, ready = iter(probes), deque[Job]()
        flying: dict[Future[Any], Job] = {}
        width = self.concurrency * FANOUT
        pool = ThreadPoolExecutor(width)
        try:
            while True:
                while len(flying) < width:
                    if not ready:
                        probe = next(fresh, None)
                        if probe is None:
                            break
                        ready.extend(probe.begin())
                        continue
                    job = ready.popleft()
                    flying[pool.submit(self._send_job, job, route)] = job
                if not flying:
                    break
                done, _ = wait(flying, return_when=FIRST_COMPLETED)
                for future in done:
                    job, answer = flying.pop(future), future.result()
                    probe = probes[job.probe]
                    if isinstance(job, RowsJob):
                        probe.take_rows(job.tokens, *answer)
                    elif isinstance(job, EchoJob):
                        for tokens, rows in zip(job.sequences, answer, strict=True):
                            probe.take_rows(tokens, 1, rows)
                    else:
                        probe.take_next(job.tokens, answer)
                    ready.extendleft(reversed(probe.done_one()))
        finally:
            pool.shutdown(cancel_futures=True)
        return [[p.values(i) for i in range(len(p.tails))] for p in probes]

    def _send_job(self, job: Job, route: Route) -> Any:
        """One request of a probe: a sequence's prompt log-probs with the rows it computed
        (`_rows_reply`), or the log-probs of the ids after a prefix (`_next_reply`).
        """
        if isinstance(job, EchoJob):
            self._count("echo")
            return self._echo_rows(job.sequences)
        assert route.url is not None
        if isinstance(job, RowsJob):
            sampling = {
                "prompt_logprobs": 0,
                # read the cache where the reply says what it read (vLLM skips it by default for
                # prompt log-probs)
                "skip_reading_prefix_cache": not route.cached_counts,
            }
            try:
                reply = self._generate(route.url, list(job.tokens), sampling, stale=True)
                self._count("rows")
                return self._rows_reply(job, reply, route.cached_counts)
            except _StaleRows:
                # asked again with the cache off: every row computed
                self._count("rows asked again, cache off")
                sampling["skip_reading_prefix_cache"] = True
                reply = self._generate(route.url, list(job.tokens), sampling)
                return self._rows_reply(job, reply, False)
        # vLLM lists the sampled token first and cuts the list at `logprobs`: one id named twice
        # keeps the last one named in it
        asked = [*job.ids, job.ids[0]]
        reply = self._generate(
            route.url, list(job.tokens), {"logprobs": len(asked), "logprob_token_ids": asked}
        )
        self._count("next-token")
        return self._next_reply(job, reply)

    def _count(self, kind: str) -> None:
        with self._route_lock:
            self.sent[kind] += 1

    def _rows_reply(
        self, job: RowsJob, reply: dict[str, Any], counted: bool
    ) -> tuple[int, list[float]]:
        """(the first row the server computed, each row's log-prob of its own token), checked
        where it is used: the rows before the first computed one are never read.
        """
        tokens, rows = job.tokens, reply.get("prompt_logprobs")
        usage: dict[str, Any] = reply["usage"] if isinstance(reply.get("usage"), dict) else {}
        if (
            not isinstance(rows, list)
            or len(rows) != len(tokens)
            or usage.get("prompt_tokens") != len(tokens)
        ):
            raise self._bad_reply(
                f"its prompt log-probs ({_length(rows)}) and prompt tokens ({usage.get('prompt_tokens')!r}) do not "
                f"match the {len(tokens)} token ids sent"
            )
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") if counted else 0
        if (
            not isinstance(cached, int)
            or isinstance(cached, bool)
            or not 0 <= cached <= len(tokens)
        ):
            raise self._bad_reply(
                f"its cached-token count {cached!r:.40} does not fit {len(tokens)} prompt tokens"
            )
        first = cached + 1
        values = [0.0] * len(tokens)
        for p in range(max(first, 1), len(tokens)):
            row = rows[p]
            entry = row.get(str(tokens[p])) if isinstance(row, dict) else None
            value = entry.get("logprob") if isinstance(entry, dict) else None
            if not _is_logprob(value):
                raise self._bad_reply(
                    f"its prompt log-prob row {p} holds {value!r:.40} for the token id {tokens[p]} sent there; a "
                    "log-probability is a finite number <= 0"
                )
            values[p] = float(value)  # type: ignore[arg-type]  # a number: checked above
        return first, values

    def _echo_rows(self, sequences: Sequence[tuple[int, ...]]) -> list[list[float]]:
        """Per sequence (token-id prompts of one completions request with echo), the log-prob of
        each of its tokens (row 0 unused), checked: one echoed log-prob a token and the generated
        one, as the reply's usage counts them.
        """
        reply, choices = self._echoed([list(tokens) for tokens in sequences])
        out = []
        for i, tokens in enumerate(sequences):
            values = getattr(getattr(choices[i], "logprobs", None), "token_logprobs", None)
            if not isinstance(values, list) or len(values) != len(tokens) + GENERATED:
                raise self._bad_reply(
                    f"it echoed {_length(values)} log-probs for a prompt of {len(tokens)} token ids and "
                    f"{GENERATED} generated"
                )
            bad = next((v for v in values[1 : len(tokens)] if not _is_logprob(v)), 0.0)
            if bad != 0.0:
                raise self._bad_reply(
                    f"its echoed log-probs include {bad!r}; a log-probability is a finite number <= 0"
                )
            out.append([0.0, *map(float, values[1 : len(tokens)])])
        fault = usage_fault(
            getattr(reply, "usage", None), [len(t) + GENERATED for t in sequences], GENERATED
        )
        if fault:
            raise self._bad_reply(fault)
        return out

    def _next_reply(self, job: NextJob, reply: dict[str, Any]) -> dict[int, float]:
        """The log-probs of the ids a next-token request named, checked: every id, each a
        log-probability.
        """
        try:
            listed = reply["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
            found = {int(e["token_id"]): e["logprob"] for e in listed}
        except (KeyError, IndexError, TypeError, ValueError):
            raise self._bad_reply("its choice holds no log-probs of the token ids named") from None
        lost = [t for t in job.ids if not _is_logprob(found.get(t))]
        if lost:
            raise self._bad_reply(
                f"it gives no log-probability for {len(lost)} of the {len(job.ids)} token ids named "
                f"({lost[:3]!r}: {[found.get(t) for t in lost[:3]]!r:.60})"
            )
        return {t: float(found[t]) for t in job.ids}

    def _generate_body(self, tokens: list[int], sampling: dict[str, Any]) -> dict[str, Any]:
        """A token route request: greedy, one token generated, nothing decoded to text."""
        return {
            "model": self.name,
            "token_ids": tokens,
            "sampling_params": {
                "max_tokens": 1,
                "temperature": 0.0,
                "detokenize": False,
                **sampling,
            },
        }

    def _generate(
        self, url: str, tokens: list[int], sampling: dict[str, Any], *, stale: bool = False
    ) -> dict[str, Any]:
        """The token route's reply to one request (retried, read within its limit, failures one
        line naming the server, as `_reply`). With `stale`, a reply the server could not write for
        a NaN or infinity is `_StaleRows`: vLLM clamps only -inf, and a row it did not compute may
        hold any bits.
        """
        import openai

        body = self._generate_body(tokens, sampling)
        with self._endpoint(), self.limit.applied(reply_limit(body)):
            try:
                reply = self.policy.run(lambda: self.client.post(url, body=body, cast_to=object))
            except openai.BadRequestError as error:
                if stale and "not JSON compliant" in str(error):
                    raise _StaleRows from None
                raise
            return self._checked(reply)

    def _checked(self, reply: Any) -> dict[str, Any]:
        """A token route reply: a JSON object naming the model asked for."""
        if not isinstance(reply, dict):
            raise self._bad_reply(f"it is not a JSON object but {reply!r:.100}")
        named = reply.get("model")
        if named is not None and not same_model(self.name, str(named)):
            raise EndpointError(
                f"The server at {self.shown_url} answered as the model {named!r:.80}, not {self.name!r} that was "
                "asked for: ask for the model by the name it answers with (--model openai:NAME), or check --base-url."
            )
        return reply

    def fill_mask(self, *args: Any, **kwargs: Any) -> NoReturn:
        """A served model is causal: there is no mask to fill."""
        raise UnsupportedModelError(
            "fill_mask needs a masked model; a served model is causal. Use generate()."
        )

    # ------------------------------------------------------------ the boundary

    def _answers(self, ask: Callable[[T], R], items: Sequence[T]) -> Iterator[tuple[T, R]]:
        """Each item with its answer, as the answers arrive, `concurrency` requests in flight. The
        first failure cancels the requests not yet sent (those in flight end within their timeout)
        and is raised, so that a dying server is reported after one request's retries, not after
        every queued request's.
        """
        pool = ThreadPoolExecutor(self.concurrency)
        try:
            asked = {pool.submit(ask, item): item for item in items}
            for future in as_completed(asked):
                yield asked[future], future.result()
        finally:
            pool.shutdown(cancel_futures=True)

    def _ask(self, create: Callable[..., Any], **body: Any) -> Any:
        """The first choice of the server's reply to one request (`_reply`)."""
        return self._reply(create, **body).choices[0]

    def _reply(self, create: Callable[..., Any], **body: Any) -> Any:
        """The server's reply to one request (retried by `self.policy`, read within its limit), with
        choices and naming the model asked for; a failed, oversized or malformed reply is one line
        naming the server (`EndpointError`).
        """
        with self._endpoint(), self.limit.applied(reply_limit(body)):
            reply = self.policy.run(lambda: create(**body))
        # the client hands back a body it could not read as a completion
        if not hasattr(reply, "choices"):
            raise self._bad_reply(f"it is not a completion but {reply!r:.100}")
        if not isinstance(reply.choices, list) or not reply.choices:
            raise self._bad_reply(f"it holds no choices (choices: {reply.choices!r:.60})")
        named = getattr(reply, "model", None)
        if named is not None and not same_model(self.name, named):
            raise EndpointError(
                f"The server at {self.shown_url} answered as the model {named!r:.80}, not {self.name!r} that was "
                "asked for: ask for the model by the name it answers with (--model openai:NAME), or check --base-url."
            )
        return reply

    def _bad_reply(self, what: str) -> EndpointError:
        """The error of a reply that is not what the OpenAI API returns."""
        return EndpointError(
            f"The server at {self.shown_url} sent a malformed reply for {self.name!r}: {what}. "
            "Check that --base-url is an OpenAI-compatible server (e.g. vLLM's http://127.0.0.1:8000/v1)."
        )

    @contextmanager
    def _endpoint(self) -> Iterator[None]:
        """Turns the `openai` client's timeout, connection, status and JSON errors into one line
        naming the server and, for a timeout, the settings that bound the wait.
        """
        import openai

        try:
            yield
        except openai.APITimeoutError:
            tries = "1 try" if self.retries == 0 else f"{self.retries + 1} tries"
            raise EndpointError(
                f"The server at {self.shown_url} did not answer: {tries} of {self.timeout:g} s timed out "
                f"(--request-timeout {self.timeout:g}, --max-retries {self.retries}); check that it is up and not "
                "overloaded, or raise --request-timeout."
            ) from None
        except openai.APIConnectionError as error:
            raise EndpointError(
                f"The server at {self.shown_url} could not be reached ({error}); start it, or check "
                "--base-url (e.g. http://127.0.0.1:8000/v1)."
            ) from None
        except openai.APIStatusError as error:
            after = f" (after --max-retries {self.retries})" if retried(error.status_code) else ""
            raise EndpointError(
                f"The server at {self.shown_url} answered {error.status_code}{after}: {redacted(str(error)[:300])}"
            ) from None
        except WaitRefused as wait:
            raise EndpointError(
                f"The server at {self.shown_url} answered {wait.status} and asked to wait {wait.asked:g} s "
                f"(Retry-After), more than the {wait.left:.1f} s left of this request's bound, --request-timeout "
                f"{self.timeout:g} x (--max-retries {self.retries} + 1) plus the backoff; allow the wait with "
                f"--request-timeout {wait.needed} or more, or ask again later."
            ) from None
        except ReplyRefused as refused:
            raise EndpointError(
                f"The server at {self.shown_url} sent {refused.what}: refused unparsed, nothing of it stored. "
                "Check that --base-url is the OpenAI-compatible server meant (e.g. vLLM's http://127.0.0.1:8000/v1)."
            ) from None
        except json.JSONDecodeError as error:
            raise self._bad_reply(
                f"its body is not valid JSON ({error.msg}, char {error.pos})"
            ) from None


def _length(values: Any) -> str:
    """How many values a reply's list holds, or what it holds instead of a list (for an error)."""
    return f"{len(values)} values" if isinstance(values, list) else repr(values)[:40]


def _cache_block(root: str) -> int | None:
    """The block a vLLM server's prefix cache keeps (its /metrics' `vllm:cache_config_info`), or
    None where it has no prefix caching or does not say.
    """
    import urllib.request

    try:
        with urllib.request.urlopen(root + "/metrics", timeout=30) as reply:
            text = reply.read(4 * 1024 * 1024).decode(errors="replace")
    except (OSError, ValueError):
        return None
    info = re.search(r"^vllm:cache_config_info\{([^}]*)\}", text, re.MULTILINE)
    if info is None or 'enable_prefix_caching="True"' not in info.group(1):
        return None
    block = re.search(r'(?:^|,)block_size="(\d+)"', info.group(1))
    return int(block.group(1)) if block else None


class _StaleRows(Exception):
    """A reply with the prefix cache read that its server could not write (engine.served
    `_generate`).
    """


def _allowed_logprobs(refusal: str) -> int | None:
    """The most log-probs a vLLM server allows per token, from its refusal of more."""
    found = re.search(r"max allowed: (\d+)", refusal)
    return int(found.group(1)) if found else None


def _is_logprob(value: Any) -> bool:
    """Whether a reply's value can be a log-probability: a finite number <= 0 (NaN, inf or a
    positive one says the server is broken, and would give a score that means nothing).
    """
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value <= 0
    )


def same_model(asked: str, named: str) -> bool:
    """Whether a reply naming the model `named` answers for `asked`: the same name, or the name with
    the revision or dated snapshot a server adds (`org/model@main` from `transformers serve`,
    `gpt-4o-2024-08-06` from OpenAI); `gpt-4o-mini` is another model.
    """
    return (
        re.fullmatch(re.escape(asked) + r"(?:@[\w./-]+|-\d{4}-\d{2}-\d{2}|-\d{4,8})?", named)
        is not None
    )
