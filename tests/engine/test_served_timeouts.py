"""`--request-timeout` bounds each try of a request whole, not each read: a server on 127.0.0.1 that
stalls, trickles its reply a byte at a time (from the status line, or once the headers are out) or
sends its headers and half a body and hangs ends the run within SECONDS x (retries + 1) plus the
backoff, with one line naming the URL and both flags; a reply that arrives whole within the time is
still used.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from dlama_fixture import write_dlama
from served_helpers import Behaviour, fake_server

from culture_probe.cli import main
from culture_probe.engine.served import ServedScorer
from culture_probe.errors import EndpointError

TIMEOUT, RETRIES = 1.0, 1
BACKOFF = 0.5  # the `openai` client's first backoff (0.5 s, less up to 25% jitter)
SLACK = 3.0  # a busy 2-core machine's start-up of the client and the threads
# A completion padded to a long body: trickled at 0.25 s a byte it would take minutes.
REPLY = json.dumps(
    {"id": "x", "object": "text_completion", "choices": [{"index": 0, "text": " Africa"}]}
).encode()
LONG_REPLY = REPLY[:-1] + b" " * 400 + b"}"


@pytest.fixture
def server() -> Iterator[tuple[str, Behaviour]]:
    """(base URL, behaviour) of the fake server (tests/served_helpers.py), sending a long valid
    completion.
    """
    with fake_server() as (url, behaviour):
        behaviour.body = LONG_REPLY
        yield url, behaviour


def misbehave(behaviour: Behaviour, how: str) -> None:
    """Make the server stall, trickle from its status line, trickle its body, or half-answer."""
    head = len(behaviour.head())
    behaviour.stall = how == "stall"
    behaviour.trickle = 0.25 if how.startswith("trickle") else None
    behaviour.cut_at = {"trickle-body": head, "half-answer": head + len(behaviour.body) // 2}.get(
        how
    )


BEHAVIOURS = ["stall", "trickle-headers", "trickle-body", "half-answer"]


@pytest.mark.parametrize("how", BEHAVIOURS)
def test_a_server_that_stalls_trickles_or_half_answers_fails_within_timeout_times_tries(
    server, how
):
    url, behaviour = server
    misbehave(behaviour, how)
    scorer = ServedScorer("m", base_url=url, timeout=TIMEOUT, retries=RETRIES)
    started = time.monotonic()
    with pytest.raises(EndpointError) as caught:
        scorer.generate(["Egypt is in"], max_new_tokens=2)
    elapsed = time.monotonic() - started
    message = str(caught.value)
    assert (
        message.startswith(f"The server at {url} did not answer: 2 tries of 1 s timed out")
        and "\n" not in message
    )
    assert "(--request-timeout 1, --max-retries 1)" in message
    assert len(behaviour.calls) == RETRIES + 1
    assert TIMEOUT * (RETRIES + 1) <= elapsed < TIMEOUT * (RETRIES + 1) + BACKOFF + SLACK, elapsed


def test_a_reply_that_arrives_whole_in_time_is_used(server):
    url, behaviour = server
    behaviour.body = REPLY
    # trickled fast, done well within the time
    behaviour.cut_at, behaviour.trickle = len(behaviour.head()), 0.001
    assert ServedScorer("m", base_url=url, timeout=5, retries=0).generate(
        ["Egypt is in"], max_new_tokens=2
    ) == [" Africa"]


def test_the_cli_ends_a_run_on_a_trickling_server_in_one_line(server, tmp_path, capsys):
    url, behaviour = server
    misbehave(behaviour, "trickle-body")
    data = write_dlama(tmp_path / "dlama")
    argv = [
        "run",
        "dlama_arab_west",
        "--model",
        "openai:m",
        "--base-url",
        url,
        "--data-dir",
        str(data),
    ]
    argv += [
        "--request-timeout",
        "1",
        "--max-retries",
        "0",
        "--no-cache",
        "--out",
        str(tmp_path / "run"),
    ]
    assert main(argv) == 2
    # from the first request's arrival (the imports and the data loading before it take seconds on a
    # busy machine): its try, and those in flight beside it
    assert time.monotonic() - behaviour.calls[0] < 1 * 2 + SLACK
    message = capsys.readouterr().err.strip().split("culture-probe: error: ")[-1]
    assert (
        message.startswith(f"The server at {url} did not answer: 1 try of 1 s timed out")
        and "\n" not in message
    )
    assert "(--request-timeout 1, --max-retries 0)" in message


def test_a_socket_operation_after_the_deadline_fails_however_fast_the_server_answers():
    """Once a try's time is spent, every further read, write or connect is the HTTP library's
    timeout at once, not a short wait that a server sending faster than it would always satisfy.
    """
    import httpcore2

    from culture_probe.engine.deadline import Deadline

    deadline = Deadline(0.05)
    # no try sent yet: the library's own timeout
    assert deadline.clip(7.0, httpcore2.ReadTimeout) == 7.0
    deadline.start(request=None)
    assert 0 < deadline.clip(None, httpcore2.ReadTimeout) <= 0.05
    time.sleep(0.06)
    with pytest.raises(httpcore2.ReadTimeout, match="0.05 s ran out"):
        deadline.clip(None, httpcore2.ReadTimeout)
