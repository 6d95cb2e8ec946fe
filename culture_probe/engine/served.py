"""A model behind an OpenAI-compatible server (vLLM, TGI, `transformers serve`, ...): `openai:<name>` with a
base URL. The server holds the model, on as many GPUs as it likes; culture_probe drives the protocol.

Generation and chat go through `/v1/completions` and `/v1/chat/completions` (greedy: temperature 0; sampling: the
temperature and a per-prompt seed), several requests in flight at once, each with a timeout and bounded retries
with backoff on 429 (honouring `Retry-After`) and 5xx (the `openai` client's own policy). Every answer lands in the
model's cache as soon as it arrives, so an interrupted run asks only what is missing.

Candidate scoring needs the log-probs of the prompt's own tokens, which only some servers return: the completions
API with `echo=True` and `logprobs` (vLLM) gives them, and the candidate's score is the sum over the tokens that
start at or after the end of the left text (the engine's rule: the context's tokens, then the candidate's, a leading
space included). A server that returns none gets a clear error.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from culture_probe.engine.cache import cache_path, cached_texts, identity_digest
from culture_probe.engine.encoding import separator
from culture_probe.engine.generation import cut_at_stop, prompt_seed
from culture_probe.engine.types import (
    SERVED,
    CandidateScores,
    GenerateOptions,
    ScoreOptions,
    ScoreRequest,
    make_options,
)
from culture_probe.errors import EndpointError, InvalidValueError, UnsupportedModelError


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
        timeout: float = 120.0,
        retries: int = 5,
        cache: str | Path | None = None,
        cache_dir: str | Path | None = None,
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
            raise InvalidValueError(f"concurrency must be a whole number >= 1, got {concurrency!r}.")
        self.name, self.base_url, self.concurrency = name, base_url.rstrip("/"), concurrency
        self.client = OpenAI(
            base_url=self.base_url,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "none",
            timeout=timeout,
            max_retries=retries,
        )
        self.identity = {"name_or_path": SERVED + name, "base_url": self.base_url, "kind": self.kind, "served": True}
        self.cache_path = cache_path(cache, cache_dir, self.identity)

    def model_digest(self) -> str:
        """A digest of the model identity: the cache's model key and the name of its file in a cache folder."""
        return identity_digest(self.identity)

    # ------------------------------------------------------------ generation

    def generate(self, prompts: Sequence[str], options: GenerateOptions | None = None, **fields: Any) -> list[str]:
        """Continuations of `prompts`, as `Scorer.generate` gives them, asked of the server."""
        options = make_options(GenerateOptions, options, fields)
        if options.add_special_tokens is not None:
            raise UnsupportedModelError(
                "add_special_tokens= cannot be sent to a served model: the server tokenizes. Leave it unset."
            )
        prompts = list(prompts)

        def produce(todo: list[str]) -> Iterator[dict[str, str]]:
            with ThreadPoolExecutor(self.concurrency) as pool:
                asked = {pool.submit(self._complete, p, options): p for p in todo}
                for future in as_completed(asked):  # each answer is stored as soon as it arrives
                    yield {asked[future]: future.result()}

        done = cached_texts(
            self.cache_path, model=self.model_digest(), options=options, prompts=prompts, produce=produce
        )
        return [done[p] for p in prompts]

    def _complete(self, prompt: str, options: GenerateOptions) -> str:
        """One prompt's continuation (chat or plain), stop strings cut off as the in-process engine does."""
        sampling = (
            {"temperature": 0.0}
            if options.temperature is None
            else {"temperature": options.temperature, "seed": prompt_seed(options.seed or 0, prompt) % (2**31)}
        )
        common = {"model": self.name, "max_tokens": options.max_new_tokens, **sampling}
        if options.stop:
            common["stop"] = list(options.stop)
        # The ignores below: the client's overloads cannot match a dict of kwargs, which leaves unset options out
        # rather than passing the `omit` sentinel (not in every openai>=1.98); both endpoints take all of `common`.
        with _endpoint(self.base_url):
            if options.chat:
                messages = [{"role": "system", "content": options.system}] if options.system else []
                reply = self.client.chat.completions.create(  # type: ignore[call-overload]
                    messages=[*messages, {"role": "user", "content": prompt}], **common
                )
                text = reply.choices[0].message.content or ""
            else:
                completion = self.client.completions.create(prompt=prompt, **common)  # type: ignore[call-overload]
                text = completion.choices[0].text
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
        """Log P(candidate | left) for every candidate, from the prompt log-probs the server echoes."""
        options = make_options(ScoreOptions, options, fields)
        if options.masked_method != "typed" or options.seq2seq_style != "sentinel" or options.score_right:
            raise UnsupportedModelError(
                "A served model scores log P(candidate | left) only; leave masked_method, "
                "seq2seq_style and score_right at their defaults."
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
        pairs = [(r.left, r.left + separator(r.left, r.sep), c) for r in requests for c in r.candidates]
        with ThreadPoolExecutor(self.concurrency) as pool:
            scored = list(pool.map(lambda pair: self._prompt_logprobs(*pair), pairs))
        out, start = [], 0
        for request in requests:
            part = scored[start : start + len(request.candidates)]
            start += len(request.candidates)
            tokens = [np.asarray(values, dtype=np.float64) for values in part]
            out.append(
                CandidateScores(
                    request.candidates,
                    np.array([t.sum() for t in tokens]),
                    np.array([len(t) for t in tokens], dtype=np.int64),
                    tuple(tokens) if options.keep_tokens else None,
                )
            )
        return out

    def _prompt_logprobs(self, left: str, prefix: str, candidate: str) -> list[float]:
        """The log-probs of the candidate's tokens in `prefix + candidate`, as the server echoes them."""
        with _endpoint(self.base_url):
            reply = self.client.completions.create(
                model=self.name, prompt=prefix + candidate, max_tokens=1, temperature=0.0, echo=True, logprobs=1
            )
        logprobs = reply.choices[0].logprobs
        if logprobs is None or not logprobs.token_logprobs or not logprobs.text_offset:
            raise UnsupportedModelError(
                f"The server at {self.base_url} returned no prompt log-probs for {self.name!r} (completions with "
                "echo=True and logprobs), so it cannot score candidates. Serve the model with vLLM, or score it in "
                "process; generation and chat work with any OpenAI-compatible server."
            )
        boundary = len(left)  # the candidate's tokens follow the context's (a leading space is the candidate's)
        # The echoed prompt comes first; the one generated token is left out.
        n_prompt = len(logprobs.token_logprobs) - 1
        values = [
            v
            for offset, v in zip(logprobs.text_offset[:n_prompt], logprobs.token_logprobs[:n_prompt], strict=True)
            if offset >= boundary
        ]
        if not values or any(v is None for v in values):
            raise UnsupportedModelError(
                f"The server's prompt log-probs for {prefix + candidate!r} cover no token of "
                f"the candidate {candidate!r}."
            )
        return values

    def fill_mask(self, *args: Any, **kwargs: Any) -> Any:
        """A served model is causal: there is no mask to fill."""
        raise UnsupportedModelError("fill_mask needs a masked model; a served model is causal. Use generate().")


@contextmanager
def _endpoint(base_url: str) -> Iterator[None]:
    """Turns the `openai` client's connection and status errors into one clear line naming the server."""
    import openai

    try:
        yield
    except openai.APIConnectionError as error:
        raise EndpointError(
            f"The server at {base_url} could not be reached ({error}); start it, or check "
            "--base-url (e.g. http://127.0.0.1:8000/v1)."
        ) from None
    except openai.APIStatusError as error:
        raise EndpointError(f"The server at {base_url} answered {error.status_code}: {str(error)[:300]}") from None
