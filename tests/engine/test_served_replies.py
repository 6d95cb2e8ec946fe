"""A served model's reply is checked against its request before anything of it is used (a fake
server on 127.0.0.1): an echo whose offsets or token counts do not fit the prompt (no generated
token, offsets that go back, start late or run past the prompt, more tokens than the prompt has
bytes, another prompt's text, a usage that disagrees), a reply naming another model, and a reply
beyond its request's size bound (a 30 MB answer to a two-token generation, 2 M log-probs for a
600-character prompt) are each one line naming the server, nothing scored or stored; a `Retry-After`
beyond what is left of --request-timeout x (--max-retries + 1) ends the request at once, saying how
to allow it.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator

import pytest
from dlama_fixture import write_dlama
from served_helpers import Behaviour, fake_server

from culture_probe.cli import main
from culture_probe.engine import ScoreRequest
from culture_probe.engine.retries import retry_after
from culture_probe.engine.served import ServedScorer
from culture_probe.errors import EndpointError
from culture_probe.util.waits import LONGEST

LEFT, CANDIDATE = "Egypt is in", "North America"
PROMPT = f"{LEFT} {CANDIDATE}"  # 25 characters: Egypt| is| in| North| America at 0, 5, 8, 11, 17
OFFSETS = [0, 5, 8, 11, 17, 25]  # and the generated token at the prompt's end
VALUES = [None, -1.0, -2.0, -0.5, -0.25, -0.1]
HUGE = 30_000_000


@pytest.fixture
def server() -> Iterator[tuple[str, Behaviour]]:
    """(base URL, behaviour) of the fake server (tests/served_helpers.py)."""
    with fake_server() as (url, behaviour):
        yield url, behaviour


def reply(choice: dict, **fields: object) -> bytes:
    """A completion holding `choice`, answering for the model "m" unless `fields` say otherwise."""
    body = {"id": "x", "object": "text_completion", "created": 0, "model": "m", **fields}
    return json.dumps({**body, "choices": [choice]}).encode()


def echo(offsets=OFFSETS, values=VALUES, text=PROMPT + ".", **fields: object) -> bytes:
    """vLLM's echo of PROMPT with these offsets and log-probs (the generated token last)."""
    logprobs = {"tokens": ["t"] * len(values), "token_logprobs": values, "text_offset": offsets}
    return reply({"index": 0, "text": text, "logprobs": logprobs}, **fields)


def score(url: str, left: str = LEFT, candidate: str = CANDIDATE):
    return ServedScorer("m", base_url=url, retries=0).score([ScoreRequest(left, [candidate])])


def test_a_well_formed_echo_scores_every_token_of_the_candidate(server):
    url, behaviour = server
    behaviour.body = echo(usage={"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6})
    (scores,) = score(url)
    assert list(scores.sum_logprob) == [-0.75] and list(scores.n_tokens) == [2]


ECHOES = {
    # case: (reply, what the error says); the old scorer gave each of them a score
    "no-generated-token": (
        echo(OFFSETS[:-1], VALUES[:-1], PROMPT),
        r"last token starts at 17, inside the 25-character prompt .*no generated token",
    ),
    "offsets-go-back": (echo([0, 5, 11, 8, 17, 25]), r"goes back from 11 to 8 \(token 3\)"),
    "offsets-reversed": (
        echo([25, 17, 11, 8, 5, 0], [-0.1, -0.25, -0.5, -2.0, -1.0, -0.3]),
        r"starts at 25, not at the prompt's start \(0\)",
    ),
    "offsets-past-the-end": (
        echo([0, 5, 8, 11, 5000, 5001]),
        r"runs to 5001, past the end of the 25-character prompt",
    ),
    "more-tokens-than-bytes": (
        echo(list(range(200)), [None] + [-0.01] * 199),
        r"echoed 200 token\(s\) for the 25-character prompt .*1 to 41",
    ),
    "another-prompts-echo": (
        echo(text="Paris is in France, Europe."),
        r"echoed text 'Paris is in France, Europe.' does not start with the prompt 'Egypt is in North America'",
    ),
    "usage-disagrees": (
        echo(usage={"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}),
        r"echoed 6 log-probs for 1 prompt\(s\), where its usage counts 9 prompt tokens and 1 generated",
    ),
}


@pytest.mark.parametrize("case", ECHOES)
def test_an_echo_that_does_not_fit_the_prompt_is_refused_never_scored(server, case):
    url, behaviour = server
    behaviour.body, fault = ECHOES[case]
    with pytest.raises(EndpointError, match=fault) as caught:
        score(url)
    message = str(caught.value)
    assert message.startswith(f"The server at {url} sent a malformed reply for 'm': ")
    assert "\n" not in message


def ask(scorer: ServedScorer, what: str) -> object:
    """One generation (plain or chat) or one candidate scored."""
    if what == "score":
        return scorer.score([ScoreRequest(LEFT, [CANDIDATE])])
    return scorer.generate([LEFT], max_new_tokens=2, chat=what == "chat")


@pytest.mark.parametrize("what", ["generate", "chat", "score"])
def test_a_reply_naming_another_model_is_refused_naming_both(server, what):
    url, behaviour = server
    answer = {"index": 0, "text": " Africa", "message": {"role": "assistant", "content": " Africa"}}
    behaviour.body = (
        echo(model="other/model") if what == "score" else reply(answer, model="other/model")
    )
    with pytest.raises(EndpointError) as caught:
        ask(ServedScorer("m", base_url=url, retries=0), what)
    message = str(caught.value)
    assert message.startswith(
        f"The server at {url} answered as the model 'other/model', not 'm' that was asked for"
    )
    assert "--model openai:NAME" in message and "\n" not in message


@pytest.mark.parametrize(
    ("asked", "named", "same"),
    [
        ("org/model", "org/model", True),
        ("org/model", "org/model@main", True),  # transformers serve adds the revision
        ("gpt-4o", "gpt-4o-2024-08-06", True),  # OpenAI answers with the dated snapshot
        ("gpt-4o", "gpt-4o-mini", False),
        ("m", "other/model", False),
        ("org/model", "org/model-instruct", False),
    ],
)
def test_a_revision_or_dated_snapshot_of_the_asked_model_is_the_same_model(asked, named, same):
    from culture_probe.engine.served import same_model

    assert same_model(asked, named) is same


def huge_completion() -> bytes:
    """A 30 MB completion, made at once."""
    return b'{"id": "x", "model": "m", "choices": [{"index": 0, "text": "' + b"a" * HUGE + b'"}]}'


@pytest.mark.parametrize(
    ("headers", "fault"),
    [
        ({}, r"sent a reply of 30,000,0\d\d bytes, over \d[\d,]+ bytes, the most this request can call for"),
        # no Content-Length: counted as it is read, cut off at the bound
        ({"Content-Length": None}, r"sent a reply of over \d[\d,]+ bytes, the most this request can call for"),
        ({"Content-Encoding": "gzip"}, r"sent a compressed reply \(Content-Encoding: gzip\)"),
    ],
    ids=["with-length", "without-length", "compressed"],
)  # fmt: skip
def test_a_reply_beyond_its_requests_bound_is_refused_unparsed(server, headers, fault):
    url, behaviour = server
    behaviour.body, behaviour.headers = huge_completion(), headers
    started = time.monotonic()
    with pytest.raises(EndpointError, match=fault) as caught:
        ServedScorer("m", base_url=url, retries=0).generate([LEFT], max_new_tokens=2)
    message = str(caught.value)
    assert message.startswith(f"The server at {url} sent ") and "\n" not in message
    assert "refused unparsed, nothing of it stored" in message
    assert time.monotonic() - started < 10  # not read whole


def test_two_million_log_probs_for_a_600_character_prompt_are_refused(server):
    url, behaviour = server
    left = " ".join(["Egypt"] * 99) + " is in"  # 600 characters
    prompt = f"{left} Africa"
    n = 2_000_000
    logprobs = b'{"tokens": null, "token_logprobs": [null' + b", -0.1" * n + b'], "text_offset": [0'
    logprobs += b", 600" * n + b"]}"
    behaviour.body = (
        b'{"id": "x", "model": "m", "choices": [{"index": 0, "text": '
        + json.dumps(prompt + "x").encode()
        + b', "logprobs": '
        + logprobs
        + b"}]}"
    )
    with pytest.raises(EndpointError, match=r"sent a reply of [\d,]+ bytes, over") as caught:
        score(url, left, "Africa")
    assert "\n" not in str(caught.value)


def test_answers_before_a_refused_reply_stay_in_the_cache(server, tmp_path):
    url, behaviour = server
    behaviour.body = reply({"index": 0, "text": " Africa"})
    scorer = ServedScorer("m", base_url=url, retries=0, concurrency=1, cache=tmp_path / "c.sqlite")
    prompts = ["Egypt is in", "Morocco is in", "Oman is in"]
    assert scorer.generate(prompts[:2], max_new_tokens=2) == [" Africa"] * 2
    behaviour.body = huge_completion()
    with pytest.raises(EndpointError, match="sent a reply of"):
        scorer.generate(prompts, max_new_tokens=2)
    calls = len(behaviour.calls)
    assert scorer.generate(prompts[:2], max_new_tokens=2) == [" Africa"] * 2
    assert len(behaviour.calls) == calls  # from the cache; nothing of the refused reply was stored


def test_the_cli_refuses_a_huge_reply_in_one_line_and_writes_no_record(server, tmp_path, capsys):
    url, behaviour = server
    behaviour.body = huge_completion()
    data, out = write_dlama(tmp_path / "dlama"), tmp_path / "run"
    argv = ["run", "dlama_arab_west", "--model", "openai:m", "--base-url", url]
    argv += ["--data-dir", str(data), "--max-retries", "0", "--no-cache", "--out", str(out)]
    assert main(argv) == 2
    message = capsys.readouterr().err.strip().split("culture-probe: error: ")[-1]
    assert (
        message.startswith(f"The server at {url} sent a reply of 30,000,0") and "\n" not in message
    )
    items = out / "items.jsonl"
    assert not items.exists() or not items.read_text().strip()


def test_a_retry_after_beyond_the_requests_bound_ends_it_at_once_saying_how_to_allow_it(server):
    url, behaviour = server
    behaviour.status, behaviour.body = 429, b'{"error": "busy"}'
    behaviour.headers = {"Retry-After": "20"}
    scorer = ServedScorer("m", base_url=url, timeout=0.5, retries=1)
    started = time.monotonic()
    with pytest.raises(EndpointError) as caught:
        scorer.generate([LEFT], max_new_tokens=2)
    assert time.monotonic() - started < 3  # the openai client's own policy waited the 20 s
    message = str(caught.value)
    assert message.startswith(
        f"The server at {url} answered 429 and asked to wait 20 s (Retry-After)"
    )
    assert "--request-timeout 0.5 x (--max-retries 1 + 1)" in message
    assert re.search(r"allow the wait with --request-timeout 2\d or more", message)
    assert "\n" not in message
    assert len(behaviour.calls) == 1


def test_a_retry_after_within_the_bound_is_waited_out(server):
    url, behaviour = server
    behaviour.status, behaviour.body = 503, b'{"error": "loading"}'
    behaviour.headers = {"Retry-After": "0.3"}
    started = time.monotonic()
    with pytest.raises(EndpointError, match=r"answered 503 \(after --max-retries 1\)"):
        ServedScorer("m", base_url=url, timeout=2, retries=1).generate([LEFT], max_new_tokens=2)
    assert len(behaviour.calls) == 2 and behaviour.calls[1] - behaviour.calls[0] >= 0.29
    assert time.monotonic() - started < 2 * 2 + 0.5  # the documented bound


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "20"}, 20.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "20"}, 0.25),  # OpenAI's, first
        # a date long past: go now
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "inf"}, LONGEST),
        ({}, None),
    ],
)
def test_a_retry_after_is_read_as_seconds_an_http_date_or_milliseconds(headers, seconds):
    # the names in lower case: an HTTP client's headers give them whatever their case
    asked = retry_after(headers)
    assert asked == seconds


def test_a_non_ascii_prompts_offsets_may_fall_short_of_its_characters():
    """vLLM sums each token's own decoding, and byte-level pieces of Greek letters decode to U+FFFD:
    a real reply's last offset was 46 for a 48-character prompt. That is a well-formed echo; a
    missing generated token there is told by the usage (`usage_fault`), not by the offsets.
    """
    from types import SimpleNamespace

    from culture_probe.engine.replies import echo_fault, usage_fault

    prompt = "Το Αντουάν Γκριεζμάν είναι από ποια χώρα; Γαλλία"
    offsets = [0, 10, 20, 30, 40, len(prompt) - 2]
    assert echo_fault(prompt, prompt + " x", offsets) is None
    assert "last token starts at" in echo_fault("an ascii prompt", "an ascii prompt x", [0, 3, 9])
    # the same echo without its generated token: five prompt tokens and one generated were counted,
    # five echoed
    assert usage_fault(SimpleNamespace(prompt_tokens=5, completion_tokens=1), [5], 1) is not None
