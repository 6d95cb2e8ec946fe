"""The served model's engine API against a real vLLM server: candidate sums and per-token log-probs
(a right context included) within 1e-4 of the in-process engine on the same folder, with the same
rankings; greedy texts, plain and chat, stop strings included, identical.
"""

from __future__ import annotations

import numpy as np
import pytest
from vllm_compare import FIGURES, Comparison

from culture_probe.engine import ScoreRequest
from culture_probe.engine.served import ServedScorer
from culture_probe.errors import UnsupportedModelError

pytestmark = [pytest.mark.slow, pytest.mark.served]

REQUESTS = [
    ScoreRequest("Egypt is located in", ("Africa", "Asia", "Europe", "France")),
    ScoreRequest("The capital of Japan is", ("Tokyo", "Paris", "Kenya", "a proverb")),
    ScoreRequest("Antoine Griezmann is from", ("France", "Saudi Arabia", "United States")),
    # the slot before a right context (FmLAMA's dish-after-slot templates)
    ScoreRequest("The capital of", ("France", "Japan", "Greece"), right=" is Paris."),
    # a left text that ends in whitespace keeps its candidate
    ScoreRequest("Where there is ", ("smoke", "fire", "a worm")),
    # scripts without word spaces, and a forced separator
    ScoreRequest("日本の首都は", ("東京", "北京")),
    ScoreRequest("مصر تقع في", ("أفريقيا", "فرنسا", "روسيا"), sep=" "),
    ScoreRequest("Answer:", ("a", "b"), sep=""),
]
PROMPTS = [
    "The capital of",
    "Egypt is",
    "Where there is",
    "مصر",
    "Antoine Griezmann is from which country?",
    "日本の首都は",
]


def served(vllm, **settings) -> ServedScorer:
    return ServedScorer(vllm.name, base_url=vllm.base_url, concurrency=4, **settings)


@pytest.mark.parametrize("score_right", [False, True], ids=["left", "right"])
def test_candidate_scores_equal_the_in_process_engine(vllm, local, score_right):
    options = {"score_right": score_right, "keep_tokens": True}
    here = local.score(REQUESTS, **options)
    there = served(vllm).score(REQUESTS, **options)
    comparison = Comparison()
    for request, a, b in zip(REQUESTS, here, there, strict=True):
        assert a.candidates == b.candidates == request.candidates
        assert a.n_tokens.tolist() == b.n_tokens.tolist(), request
        # the sums, then every token's log-prob; both as lists, so that the candidates' order is
        # compared too
        comparison.check(a.sum_logprob.tolist(), b.sum_logprob.tolist(), request.left)
        for i, (x, y) in enumerate(zip(a.token_logprobs, b.token_logprobs, strict=True)):
            comparison.check(x.tolist(), y.tolist(), f"{request.left}[{i}]")
        assert int(np.argmax(a.sum_logprob)) == int(np.argmax(b.sum_logprob)), request
    comparison.assert_equal()
    assert comparison.rankings >= len(REQUESTS) and comparison.max_diff > 0
    FIGURES[f"ServedScorer.score, score_right={score_right}"] = comparison.summary()


@pytest.mark.parametrize(
    "options",
    [
        {"max_new_tokens": 12},
        {"max_new_tokens": 12, "chat": True},
        {"max_new_tokens": 12, "chat": True, "system": "Answer briefly."},
        {"max_new_tokens": 12, "stop": ["is"]},
    ],
    ids=["plain", "chat", "chat-system", "stop"],
)
def test_greedy_texts_equal_the_in_process_engine(vllm, local, options):
    here = local.generate(PROMPTS, **options)
    there = served(vllm).generate(PROMPTS, **options)
    assert there == here
    # words, not one token over and over: the texts say something about the two engines agreeing
    assert len({text for text in here if text.strip()}) >= 3, here
    FIGURES[f"ServedScorer.generate {options}"] = f"{len(here)} of {len(here)} texts identical"


def test_a_slot_with_no_left_context_is_scored_after_the_start_token(vllm, local):
    # FmLAMA's '[Y] is part of the food [X].': in process the candidate's first token is scored
    # after the tokenizer's BOS (an empty context starts from BOS); the token route sends it as an
    # id
    requests = [ScoreRequest("", ("Egypt", "The capital"), right=" is located in Africa.")]
    here = local.score(requests, score_right=True, keep_tokens=True)
    there = served(vllm).score(requests, score_right=True, keep_tokens=True)
    comparison = Comparison()
    for a, b in zip(here, there, strict=True):
        assert a.n_tokens.tolist() == b.n_tokens.tolist()
        comparison.check(a.sum_logprob.tolist(), b.sum_logprob.tolist(), "no left context")
    comparison.assert_equal()


def test_without_the_token_route_a_slot_first_template_is_refused_before_any_request(vllm):
    # the echo route (a tokenizer that does not load here) cannot put a start token before it
    scorer = served(vllm, tokenizer=str(vllm.model) + "-absent")
    requests = [ScoreRequest("", ("Egypt", "The capital"), right=" is located in Africa.")]
    before = vllm.metrics()
    with pytest.warns(UserWarning, match="did not load"):
        with pytest.raises(UnsupportedModelError, match="no left context"):
            scorer.score(requests, score_right=True)
    assert vllm.metrics().get("vllm:request_success_total") == before.get(
        "vllm:request_success_total"
    )


@pytest.mark.parametrize("score_right", [False, True], ids=["left", "right"])
def test_the_echo_route_is_the_fallback_and_equals_the_token_route(vllm, score_right):
    options = {"score_right": score_right, "keep_tokens": True}
    tokens = served(vllm)
    assert tokens.route.cache and tokens.route.block_size == 32
    echo = served(vllm, tokenizer=str(vllm.model) + "-absent")
    with pytest.warns(UserWarning, match="scored through /v1/completions with echo"):
        assert echo.route.url is None
    comparison = Comparison()
    for a, b in zip(
        tokens.score(REQUESTS, **options), echo.score(REQUESTS, **options), strict=True
    ):
        assert a.n_tokens.tolist() == b.n_tokens.tolist()
        comparison.check(a.sum_logprob.tolist(), b.sum_logprob.tolist(), "echo")
    comparison.assert_equal()


@pytest.mark.parametrize("score_right", [False, True], ids=["left", "right"])
def test_without_the_token_route_token_ids_go_through_the_echo(vllm, local, score_right):
    # a server without /inference/v1/generate: the candidates as token-id prompts of one echo
    # request per probe, a slot with no left context after the start token
    from culture_probe.engine.served import Route

    scorer = served(vllm)
    assert scorer.route.cache
    scorer._route = Route(None, tokens=True, why="as if the server lacked it")
    requests = [
        *REQUESTS,
        ScoreRequest("", ("Egypt", "The capital"), right=" is located in Africa."),
    ]
    options = {"score_right": score_right}
    comparison = Comparison()
    for a, b in zip(
        local.score(requests, **options), scorer.score(requests, **options), strict=True
    ):
        assert a.n_tokens.tolist() == b.n_tokens.tolist()
        comparison.check(a.sum_logprob.tolist(), b.sum_logprob.tolist(), "echo of token ids")
    comparison.assert_equal()
    assert set(scorer.sent) == {"echo"}


def test_single_token_candidates_take_next_token_requests_in_chunks_of_the_servers_limit(
    vllm, local
):
    # more single-token candidates than one request may name (the server's --max-logprobs, 20)
    scorer = served(vllm)
    words = [w[1:] for w in local.tokenizer.get_vocab() if w.startswith("Ġ") and w[1:].isalpha()]
    single = sorted(w for w in words if len(local.tokenizer(" " + w)["input_ids"]) == 1)
    assert len(single) > scorer.route.ids_per_request
    requests = [ScoreRequest("The capital of France is", tuple(single))]
    before = vllm.metrics()
    there = scorer.score(requests)
    asked = vllm.metrics()["vllm:request_success_total"] - before["vllm:request_success_total"]
    here = local.score(requests)
    assert asked == -(-len(single) // scorer.route.ids_per_request)
    comparison = Comparison().check(here[0].sum_logprob.tolist(), there[0].sum_logprob.tolist())
    comparison.assert_equal()
    FIGURES["single-token candidates"] = (
        f"{len(single)} in {asked:.0f} requests, {comparison.summary()}"
    )


def test_scores_do_not_depend_on_the_order_or_on_another_run_beside(vllm, local):
    """vllm#42019: with the prefix cache read, rows of prompt log-probs at cached positions hold
    another request's values. The same probes in shuffled orders, each time beside another run on
    the same server, give the in-process scores.
    """
    import random
    import threading

    context = " ".join(["The capital of France is Paris."] * 3) + " Egypt is located in"
    probes = [
        ScoreRequest(context, ("Africa", "Asia", "Africa and Asia", "Afric")),
        ScoreRequest(context + " the", ("saffron and rice", "noodles and fish", "saffron")),
        ScoreRequest("The capital of", ("France", "Japan", "Greece"), right=" is Paris."),
        *REQUESTS,
    ]
    here = local.score(probes, score_right=True)
    others = [
        ScoreRequest(context + " " + w, ("noodles and fish", "saffron and rice")) for w in "abcdef"
    ]
    comparison = Comparison()
    for seed in range(3):
        order = list(range(len(probes)))
        random.Random(seed).shuffle(order)
        beside = threading.Thread(target=lambda: served(vllm).score(others, score_right=True))
        beside.start()
        there = served(vllm).score([probes[i] for i in order], score_right=True)
        beside.join()
        for j, i in enumerate(order):
            comparison.check(
                here[i].sum_logprob.tolist(), there[j].sum_logprob.tolist(), f"{seed}:{i}"
            )
    comparison.assert_equal()
    FIGURES["shuffled and interleaved"] = comparison.summary()


@pytest.mark.xfail(
    strict=True,
    reason="a text cut by max_new_tokens inside a character: the in-process engine decodes the last token's "
    "incomplete UTF-8 bytes as U+FFFD, vLLM's detokenizer holds them back and leaves them out",
)
def test_a_character_cut_by_max_new_tokens(vllm, local):
    # the tiny byte-level BPE spells 東 and 京 with more than one token each; the protocol runs
    # allow this one difference (vllm_compare.cut_character) and count it
    here = local.generate(["日本の"], max_new_tokens=12)
    there = served(vllm).generate(["日本の"], max_new_tokens=12)
    FIGURES["a character cut by max_new_tokens"] = f"{here[0]!r} in process, {there[0]!r} served"
    assert there == here


def test_echoed_prompt_logprob_requests_read_no_prefix_cache(vllm):
    """Why the token route: in vLLM 0.32.0 a request for the prompt's log-probs through completions
    with echo and logprobs never reads the prefix cache (SamplingParams sets
    skip_reading_prefix_cache for prompt_logprobs), so a context that a probe's candidates share is
    computed again for each of them, whatever their order. Generation requests read it. When this
    test fails, vLLM has changed that.
    """
    context = " ".join(["The capital of France is Paris."] * 12)  # several 32-token blocks
    before = vllm.metrics()
    with pytest.warns(UserWarning, match="echo"):
        echo = served(vllm, tokenizer=str(vllm.model) + "-absent")
        echo.score([ScoreRequest(context, ("France", "Japan", "Greece", "Kenya"))])
    scored = vllm.metrics()
    one_at_a_time = ServedScorer(vllm.name, base_url=vllm.base_url, concurrency=1)
    one_at_a_time.generate([context + " France", context + " Japan"], max_new_tokens=2)
    generated = vllm.metrics()

    def counted(name, start, end):
        return end.get(name, 0) - start.get(name, 0)

    assert counted("vllm:prefix_cache_queries_total", before, scored) == 0
    assert counted("vllm:prefix_cache_hits_total", scored, generated) >= 64
    FIGURES["prefix cache"] = (
        f"scoring 4 candidates after a {len(context)}-character context: "
        f"{counted('vllm:prompt_tokens_total', before, scored):.0f} prompt tokens computed, 0 read from the "
        f"cache; 2 generations after it: {counted('vllm:prefix_cache_hits_total', scored, generated):.0f} of "
        f"{counted('vllm:prompt_tokens_total', scored, generated):.0f} prompt tokens read from the cache"
    )
