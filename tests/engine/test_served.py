"""A model behind an OpenAI-compatible server (`openai:<name>`): a real `transformers serve` on
127.0.0.1 gives the in-process engine's greedy texts, plain and chat, stop strings included; answers
are cached; an unreachable server, a missing URL and a server without prompt log-probs are clear
errors; 429 with Retry-After is waited out.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from served_helpers import CHAT_TEMPLATE, transformers_serve

from culture_probe.engine import Scorer, ScoreRequest
from culture_probe.engine.served import ServedScorer
from culture_probe.errors import EndpointError, InvalidValueError, UnsupportedModelError
from culture_probe.models import save_tiny, train_tokenizer

PROMPTS = ["Egypt is located in", "The capital of France is", "hello", "Egypt is located in"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(model folder, base URL of a transformers serve process that serves it)."""
    root = tmp_path_factory.mktemp("served")
    tok = train_tokenizer(
        ["Egypt is located in Africa.", "The capital of France is Paris.", "hello world"] * 3,
        "bpe",
        model_kind="causal",
        vocab_size=300,
    )
    tok.chat_template = CHAT_TEMPLATE
    model = save_tiny(root / "model", "gpt2", tok, layers=1, hidden=32, heads=2)
    with transformers_serve(root / "serve.log") as url:
        yield model, url


@pytest.mark.slow
def test_served_greedy_texts_equal_the_in_process_engine(served, tmp_path):
    model, url = served
    local = Scorer.from_pretrained(model)
    remote = ServedScorer(str(model), base_url=url, concurrency=3, cache=tmp_path / "c.sqlite")
    for options in (
        {"max_new_tokens": 6},
        {"max_new_tokens": 6, "chat": True},
        {"max_new_tokens": 6, "chat": True, "system": "Answer briefly."},
    ):
        assert remote.generate(PROMPTS, **options) == local.generate(PROMPTS, **options), options
    full = local.generate(PROMPTS[:1], max_new_tokens=8)[0]
    stop = full.strip()[:2]
    assert remote.generate(PROMPTS[:1], max_new_tokens=8, stop=[stop]) == local.generate(
        PROMPTS[:1], max_new_tokens=8, stop=[stop]
    )


@pytest.mark.slow
def test_every_answer_is_cached_and_an_interrupted_run_asks_only_the_rest(
    served, tmp_path, monkeypatch
):
    model, url = served
    asked: list[str] = []
    remote = ServedScorer(str(model), base_url=url, cache=tmp_path / "c.sqlite")
    complete = ServedScorer._complete
    monkeypatch.setattr(
        ServedScorer, "_complete", lambda self, p, o: asked.append(p) or complete(self, p, o)
    )
    first = remote.generate(PROMPTS[:2], max_new_tokens=4)
    assert asked == PROMPTS[:2]
    assert remote.generate(PROMPTS, max_new_tokens=4)[:2] == first
    assert asked == PROMPTS[:3]  # only the new prompt went out (the repeated one once)
    remote.generate(PROMPTS, max_new_tokens=5)  # other options: asked again
    assert len(asked) == 6


@pytest.mark.slow
def test_a_server_without_prompt_logprobs_cannot_score(served):
    model, url = served
    with pytest.raises((UnsupportedModelError, EndpointError), match="prompt log-probs|answered 4"):
        ServedScorer(str(model), base_url=url).score(
            [ScoreRequest("Egypt is located in", ["Africa", "Asia"])]
        )


def test_an_unreachable_server_and_a_missing_url_are_named():
    remote = ServedScorer("m", base_url="http://127.0.0.1:9/v1", retries=0, timeout=2)
    with pytest.raises(
        EndpointError, match=r"http://127.0.0.1:9/v1 could not be reached.*--base-url"
    ):
        remote.generate(["x"], max_new_tokens=1)
    with pytest.raises(InvalidValueError, match="needs the server's base URL"):
        ServedScorer("m", base_url="")


def test_an_unreachable_server_is_named_when_the_token_route_is_sought():
    # with a tokenizer here, the first scoring asks the server for its token route first
    from culture_probe.models import train_tokenizer

    tokenizer = train_tokenizer(
        ["Egypt is located in Africa"] * 4, "bpe", model_kind="causal", vocab_size=60
    )
    remote = ServedScorer(
        "m", base_url="http://127.0.0.1:9/v1", retries=0, timeout=2, tokenizer=tokenizer
    )
    with pytest.raises(EndpointError, match=r"http://127.0.0.1:9/v1 could not be reached"):
        remote.score([ScoreRequest("Egypt is located in", ["Africa", "Asia"])])


class Busy(http.server.BaseHTTPRequestHandler):
    """Answers 429 with `Retry-After: 1` once, then a completion."""

    calls: list[float] = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers["Content-Length"]))
        Busy.calls.append(time.monotonic())
        if len(Busy.calls) == 1:
            self.send_response(429)
            self.send_header("Retry-After", "1")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")
            return
        send_json(
            self,
            {
                "id": "x",
                "object": "text_completion",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "text": " Africa", "finish_reason": "stop"}],
            },
        )

    def log_message(self, *args):
        pass


def send_json(handler: http.server.BaseHTTPRequestHandler, reply: dict) -> None:
    """Answer 200 with `reply` as JSON."""
    data = json.dumps(reply).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def test_a_busy_server_is_waited_out_as_its_retry_after_says():
    server = http.server.HTTPServer(("127.0.0.1", 0), Busy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        assert ServedScorer("m", base_url=url, retries=2).generate(
            ["Egypt is in"], max_new_tokens=2
        ) == [" Africa"]
        # one retry, after Retry-After
        assert len(Busy.calls) == 2 and Busy.calls[1] - Busy.calls[0] >= 0.9
    finally:
        server.shutdown()


class EchoingServer(http.server.BaseHTTPRequestHandler):
    """vLLM's completions API at the HTTP boundary, with `echo=True, logprobs=0`: for each prompt of
    the request, its tokens, their character offsets and log-probs (None for the first), then one
    greedy token; computed by a real tiny model. Every request's prompts are kept (`asked`).
    """

    model = tokenizer = None
    asked: list[list[str]] = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert body["echo"] is True and body["logprobs"] == 0 and body["max_tokens"] == 1
        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        self.asked.append(prompts)
        choices = [self.choice(i, prompt) for i, prompt in enumerate(prompts)]
        reply = {"id": "x", "object": "text_completion", "created": 0, "model": body["model"]}
        send_json(self, {**reply, "choices": choices[::-1]})  # in any order: each names its index

    def choice(self, index: int, prompt: str) -> dict:
        import torch

        enc = self.tokenizer(prompt, return_offsets_mapping=True)
        ids = enc["input_ids"]
        with torch.no_grad():
            logp = torch.log_softmax(self.model(torch.tensor([ids])).logits[0].float(), dim=-1)
        values = (
            [None]
            + [float(logp[i - 1, ids[i]]) for i in range(1, len(ids))]
            + [float(logp[-1].max())]
        )
        offsets = [start for start, _ in enc["offset_mapping"]] + [len(prompt)]
        tokens = self.tokenizer.convert_ids_to_tokens(ids) + ["x"]
        logprobs = {"tokens": tokens, "token_logprobs": values, "text_offset": offsets}
        return {
            "index": index,
            "text": prompt + "x",
            "finish_reason": "length",
            "logprobs": {**logprobs, "top_logprobs": None},
        }

    def log_message(self, *args):
        pass


@pytest.fixture
def echoing() -> Iterator[tuple[str, Any, Any]]:
    """(base URL, model, tokenizer) of an `EchoingServer` on 127.0.0.1 that answers with a tiny
    GPT-2, its record of requests (`asked`) emptied; stopped after the test.
    """
    from engine_reference import tiny

    model, tok = tiny("gpt2", "bpe")
    EchoingServer.model, EchoingServer.tokenizer, EchoingServer.asked = model, tok, []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), EchoingServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", model, tok
    finally:
        server.shutdown()


def test_candidates_are_scored_from_echoed_prompt_logprobs_as_the_engine_scores_them(echoing):
    url, model, tok = echoing
    # a right context (FmLAMA's templates with the dish after the slot), and a left text ending in a
    # space (the space is the candidate's, as the engine splits it)
    requests = [
        ScoreRequest("Egypt is located in", ["Africa", "Asia", "olive oil"]),
        ScoreRequest("The capital of Japan is", ["Tokyo", "Kyoto"], right=", a big city."),
        ScoreRequest("The ingredients of pizza are ", ["cheese", "rice"], right=" and more"),
    ]
    scorer = ServedScorer("tiny", base_url=url, concurrency=4)
    served = {
        right: scorer.score(requests, keep_tokens=True, score_right=right)
        for right in (False, True)
    }
    # one request per probe, holding all its candidates, not one per candidate (with and without the
    # right text)
    assert sorted(map(len, EchoingServer.asked)) == sorted(
        [len(r.candidates) for r in requests] * 2
    )
    for right in (False, True):
        local = Scorer(model, tok).score(requests, keep_tokens=True, score_right=right)
        for got, want in zip(served[right], local, strict=True):
            assert list(got.n_tokens) == list(want.n_tokens)  # the same tokens are scored
            np.testing.assert_allclose(got.sum_logprob, want.sum_logprob, atol=1e-5)
    # the right text adds its tokens to every candidate of the requests that have one
    assert all(
        (with_right.n_tokens > alone.n_tokens).all() == bool(r.right)
        for r, alone, with_right in zip(requests, served[False], served[True], strict=True)
    )


def test_a_probe_with_more_candidates_than_a_request_may_hold_is_split(echoing, monkeypatch):
    # vLLM answers 400 beyond 1,024 prompts in one request (fmlama_en has 1,287 candidates a dish)
    from culture_probe.engine import served as module

    url, model, tok = echoing
    monkeypatch.setattr(module, "MAX_PROMPTS", 2)
    request = ScoreRequest("Egypt is located in", ["Africa", "Asia", "Europe", "olive oil", "rice"])
    (got,) = ServedScorer("tiny", base_url=url, concurrency=1).score([request])
    assert sorted(map(len, EchoingServer.asked)) == [1, 2, 2]
    (want,) = Scorer(model, tok).score([request])
    np.testing.assert_allclose(got.sum_logprob, want.sum_logprob, atol=1e-5)
