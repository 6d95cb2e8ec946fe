"""A served model (`openai:<name>`) ends in bounded, stated time and never scores a bad reply: a
server on 127.0.0.1 that stalls fails within --request-timeout x (--max-retries + 1) with one line
naming the URL and both flags; one that answers 500 stops generation and scoring after one request's
retries (queued requests are cancelled); a reply without choices, with a null text, an HTML or
broken JSON body, log-probs and offsets that do not pair up, or a NaN, infinite or positive log-prob
is one error naming the server and what was wrong.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator

import pytest
from dlama_fixture import write_dlama
from served_helpers import Behaviour, fake_server

from culture_probe.cli import main
from culture_probe.engine import ScoreRequest
from culture_probe.engine.served import ServedScorer
from culture_probe.errors import EndpointError, InvalidValueError, UnsupportedModelError
from culture_probe.runner import RunSettings, run
from culture_probe.runner.execution import CHUNK, refuse_ahead
from culture_probe.runner.stage_models import model_spec
from culture_probe.tasks.probes import ScoreProbe

LEFT, CANDIDATE = "Egypt is in", "Africa"
PROMPT = f"{LEFT} {CANDIDATE}"  # what scoring CANDIDATE after LEFT sends


@pytest.fixture
def server() -> Iterator[tuple[str, Behaviour]]:
    """(base URL, behaviour) of the fake server (tests/served_helpers.py)."""
    with fake_server() as (url, behaviour):
        yield url, behaviour


def ask(scorer: ServedScorer, what: str) -> object:
    """One generation (plain or chat) or one candidate scored, the served model's three kinds of
    request.
    """
    if what == "score":
        return scorer.score([ScoreRequest(LEFT, [CANDIDATE])])
    return scorer.generate([LEFT], max_new_tokens=2, chat=what == "chat")


@pytest.mark.parametrize("what", ["generate", "chat", "score"])
def test_a_stalled_server_fails_within_timeout_times_tries_naming_the_url_and_both_flags(
    server, what
):
    url, behaviour = server
    behaviour.stall = True
    scorer = ServedScorer("m", base_url=url, timeout=0.2, retries=1)
    if what == "score":  # found once, before the first request: not a request's time
        with pytest.warns(UserWarning, match="did not load"):
            assert not scorer.route.tokens
    started = time.monotonic()
    with pytest.raises(EndpointError) as caught:
        ask(scorer, what)
    elapsed = time.monotonic() - started
    message = str(caught.value)
    assert url in message and "--request-timeout 0.2" in message and "--max-retries 1" in message
    assert "\n" not in message
    assert len(behaviour.calls) == 2  # the first try and one retry
    # two timeouts, one backoff (at most 0.5 s), and a busy machine's slack; a timeout not kept
    # waits 60 s
    assert elapsed < 0.2 * 2 + 0.5 + 3.0


@pytest.mark.parametrize("what", ["generate", "score"])
def test_a_failing_server_stops_the_queue_after_one_requests_retries(server, what):
    url, behaviour = server
    behaviour.status, behaviour.body = 500, b'{"error": "the model died"}'
    scorer = ServedScorer("m", base_url=url, concurrency=2, timeout=5, retries=1)
    prompts = [f"prompt {i}" for i in range(30)]
    with pytest.raises(EndpointError, match=rf"{url} answered 500 \(after --max-retries 1\)"):
        if what == "score":
            scorer.score([ScoreRequest(LEFT, prompts)])
        else:
            scorer.generate(prompts, max_new_tokens=2)
    # two tries of the failed request, of the one beside it, and of the (at most two) that their
    # threads took next; without the cancelling, every one of the 30 is tried twice
    assert len(behaviour.calls) <= 8


def completion(choice: dict) -> bytes:
    return json.dumps(
        {"id": "x", "object": "text_completion", "created": 0, "model": "m", "choices": [choice]}
    ).encode()


def echoed(values: list, offsets: list | None = None) -> bytes:
    """A vLLM completion echoing `LEFT + " " + CANDIDATE` with these log-probs (the last is the
    generated token).
    """
    start = len(LEFT)
    offsets = offsets if offsets is not None else [0, 6, 9, start, start + 7][-len(values) :]
    logprobs = {
        "tokens": ["t"] * len(values),
        "token_logprobs": values,
        "text_offset": offsets,
        "top_logprobs": None,
    }
    return completion(
        {"index": 0, "text": PROMPT + "x", "finish_reason": "length", "logprobs": logprobs}
    )


BAD_REPLIES = {
    # case: (request, body, content type, what the error says)
    "no-choices": (
        "generate",
        b'{"id": "x", "object": "text_completion"}',
        "application/json",
        "no choices",
    ),
    "empty-choices": ("score", b'{"id": "x", "choices": []}', "application/json", "no choices"),
    "text-null": (
        "generate",
        completion({"index": 0, "text": None}),
        "application/json",
        "text is None",
    ),
    "chat-without-message": ("chat", completion({"index": 0}), "application/json", "no message"),
    "html": (
        "generate",
        b"<html><body>502 Bad Gateway</body></html>",
        "text/html",
        "not a completion.*<html>",
    ),
    "html-scoring": ("score", b"<html>proxy login</html>", "text/html", "not a completion"),
    "broken-json": (
        "generate",
        b'{"choices": [{"text": "Afr',
        "application/json",
        "not valid JSON",
    ),
    "lengths-differ": (
        "score",
        echoed([None, -1.0, -2.0, -0.5, -0.1], [0, 6, 9]),
        "application/json",
        "pair up",
    ),
    "nan": ("score", echoed([None, -1.0, -2.0, math.nan, -0.1]), "application/json", "include nan"),
    "inf": (
        "score",
        echoed([None, -1.0, -2.0, -math.inf, -0.1]),
        "application/json",
        "include -inf",
    ),
    "positive": ("score", echoed([None, -1.0, -2.0, 0.7, -0.1]), "application/json", "include 0.7"),
    "offset-not-a-number": (
        "score",
        echoed([None, -1.0, -0.5, -0.1], [0, "six", 11, 18]),
        "application/json",
        "whole numbers",
    ),
}


@pytest.mark.parametrize("case", BAD_REPLIES)
def test_a_malformed_reply_is_one_error_naming_the_server_and_the_fault_never_a_score(server, case):
    url, behaviour = server
    what, behaviour.body, behaviour.content_type, fault = BAD_REPLIES[case]
    with pytest.raises(EndpointError, match=fault) as caught:
        ask(ServedScorer("m", base_url=url, retries=0), what)
    message = str(caught.value)
    assert message.startswith(f"The server at {url} sent a malformed reply") and "\n" not in message


def test_a_well_formed_reply_still_scores(server):
    url, behaviour = server
    behaviour.body = echoed([None, -1.0, -2.0, -0.25, -0.1])
    (scores,) = ServedScorer("m", base_url=url, retries=0).score([ScoreRequest(LEFT, [CANDIDATE])])
    assert list(scores.sum_logprob) == [-0.25] and list(scores.n_tokens) == [1]


@pytest.mark.parametrize(
    "setting", [{"request_timeout": 0}, {"request_timeout": -1.0}, {"request_timeout": math.nan},
                {"request_timeout": math.inf}, {"request_timeout": "10"}, {"request_timeout": True},
                {"max_retries": -1}, {"max_retries": 1.5}, {"max_retries": True}]
)  # fmt: skip
def test_bad_timeouts_and_retries_are_refused_when_the_settings_are_made(setting):
    ((name, value),) = setting.items()
    with pytest.raises(InvalidValueError, match=rf"{name} must be .*got {value!r}"):
        RunSettings(**setting)


def test_the_run_settings_reach_the_served_model(server):
    url, behaviour = server
    behaviour.stall = True
    settings = RunSettings(base_url=url, request_timeout=0.3, max_retries=0, no_cache=True)
    scorer = model_spec("openai:m", settings).load()
    with pytest.raises(EndpointError, match=r"--request-timeout 0.3, --max-retries 0"):
        scorer.generate([LEFT], max_new_tokens=2)
    assert len(behaviour.calls) == 1


def test_the_cli_ends_a_run_on_a_stalled_server_in_one_line_and_records_the_settings(
    server, tmp_path, capsys
):
    url, behaviour = server
    behaviour.stall = True
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
        "0.2",
        "--max-retries",
        "0",
        "--no-cache",
        "--out",
        str(tmp_path / "run"),
    ]
    assert main(argv) == 2
    # from the first request's arrival (the imports and the data loading before it take seconds on a
    # busy machine): its try, and those in flight beside it
    assert time.monotonic() - behaviour.calls[0] < 0.2 * 2 + 5
    err = capsys.readouterr().err.strip()
    # after the data loader's and the run's progress bars
    message = err.split("culture-probe: error: ")[-1]
    assert (
        message.startswith(f"The server at {url} did not answer: 1 try of 0.2 s timed out")
        and "\n" not in message
    )
    assert "(--request-timeout 0.2, --max-retries 0)" in message
    run = json.loads((tmp_path / "run" / "config.json").read_text())["run"]
    assert (run["request_timeout"], run["max_retries"]) == (0.2, 0)


@pytest.mark.parametrize(("flag", "value"), [("--request-timeout", "0"), ("--max-retries", "-1")])
def test_the_cli_refuses_a_bad_timeout_or_retry_count_before_anything_loads(
    tmp_path, capsys, flag, value
):
    argv = ["run", "dlama_arab_west", "--model", "openai:m", "--base-url", "http://127.0.0.1:9/v1"]
    assert main([*argv, "--data-dir", str(tmp_path / "absent"), flag, value]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith(
        f"culture-probe: error: {flag[2:].replace('-', '_')} must be"
    )


def test_a_run_a_server_cannot_serve_is_refused_before_its_first_request(server, tmp_path):
    # DLAMA's upstream profile scores candidates by their ids tokenized alone, which a server (it
    # tokenizes) cannot take: the whole stage is checked before the first request, not refused after
    # the probes before it
    url, behaviour = server
    data = write_dlama(tmp_path / "dlama")
    with pytest.raises(UnsupportedModelError, match=r"candidate_ids='alone'/'piece'"):
        run(
            "dlama_arab_west",
            "openai:m",
            base_url=url,
            data_dir=str(data),
            candidate_tokenization="alone",
            no_cache=True,
            progress=False,
        )
    assert behaviour.calls == []
    # a stage whose unservable probe comes after a whole chunk of servable ones is refused as early
    plain = ScoreProbe("a", ScoreRequest(LEFT, [CANDIDATE]))
    chat = ScoreProbe("b", ScoreRequest(LEFT, [CANDIDATE], chat=True))
    with pytest.raises(UnsupportedModelError, match=r"chat=True"):
        refuse_ahead(ServedScorer("m", base_url=url), [plain] * CHUNK + [chat])
    # a slot with no left context (FmLAMA's "[Y] is part of the food [X].") needs the BOS a server
    # does not take
    first = ScoreProbe("c", ScoreRequest("", [CANDIDATE], right=" is part of the food."))
    with pytest.raises(UnsupportedModelError, match=r"no left context"):
        refuse_ahead(ServedScorer("m", base_url=url), [plain, first])
    assert behaviour.calls == []
