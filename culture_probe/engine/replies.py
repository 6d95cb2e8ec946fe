"""What a served model's reply must be before it is used: no larger than its request can call for (a
30 MB answer to a two-token generation is refused while it is read, never parsed or stored), and,
for the echoed prompt log-probs that score candidates, offsets and counts that fit the prompt that
was sent.

vLLM's completions API with `echo=True` lists, for each prompt, its tokens and then the generated
ones, each with a text offset: 0 for the first, then the running length of the tokens' decoded texts
(`_create_completion_logprobs`). So the offsets never go back, and the generated token of an ASCII
prompt starts at or after the prompt's end (a BOS counts its text, e.g. Llama 3's
`<|begin_of_text|>`, so they may run somewhat past it; byte-level pieces of other characters decode
to U+FFFD, so there the offsets may fall short of the characters or run past them). A prompt has at
most one token a byte besides the few special tokens a tokenizer adds. Its `usage` counts the prompt
tokens and the generated ones, which the echoed log-probs must add up to. A reply that breaks any of
these was not computed on the prompt that was sent, or drops a token, and is refused: never scored
by guessing which of its tokens is the generated one.
"""

from __future__ import annotations

import functools
import importlib
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

FIXED_BYTES = 64 * 1024  # headers, ids, usage, an error's text
PER_REQUEST_BYTE = (
    128  # the echo: per byte of the prompt at most a token, its text, log-prob, offset, alternative
)
PER_TOKEN_BYTES = (
    256  # a generated token: its text JSON-escaped (up to 6 bytes a character), its log-prob
)
SPECIAL_TOKENS = 16  # tokens a tokenizer may add to a prompt (a BOS, a prefix space)
SPECIAL_TEXT = 64  # characters their decoded text may add to the offsets


class ReplyRefused(Exception):
    """A reply refused while it is read (`what` it is); the served scorer says so in one line naming
    its server.
    """

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


def reply_limit(body: Mapping[str, Any]) -> int:
    """The most bytes a reply to the request `body` may hold: a fixed allowance, PER_REQUEST_BYTE
    for each byte of the request (its prompts, echoed with their log-probs) and PER_TOKEN_BYTES for
    each token it may generate.
    """
    prompt = body.get("prompt")
    prompts = len(prompt) if isinstance(prompt, list) else 1
    sent = len(json.dumps(body, default=str).encode())
    generated = prompts * int(body.get("max_tokens") or 0)
    return FIXED_BYTES + PER_REQUEST_BYTE * sent + PER_TOKEN_BYTES * generated


def limit_words(limit: int) -> str:
    """A reply limit in words, for an error."""
    return (
        f"{limit:,} bytes, the most this request can call for ({FIXED_BYTES // 1024} KiB, {PER_REQUEST_BYTE} bytes "
        f"a byte of the request and {PER_TOKEN_BYTES} a token it may generate)"
    )


class ReplyLimit:
    """The reply size limit of the request each thread is sending, kept as the reply is read (an
    HTTP client's response hook, so the `openai` client reads no more): a larger Content-Length is
    refused before the body is read, and a body without one is counted and cut off at the limit. A
    compressed body is refused (the client asks for none): its size once decoded cannot be bounded
    as it is read.
    """

    headers = {"Accept-Encoding": "identity"}  # what the requests of a client with this hook send

    def __init__(self) -> None:
        self._local = threading.local()

    @contextmanager
    def applied(self, limit: int) -> Iterator[None]:
        """Replies read in this thread inside the block hold at most `limit` bytes."""
        self._local.limit = limit
        try:
            yield
        finally:
            self._local.limit = None

    def check(self, response: Any) -> None:
        """An HTTP client's response hook: its headers are in, its body not yet read."""
        limit: int | None = getattr(self._local, "limit", None)
        if limit is None:
            return
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding != "identity":
            raise ReplyRefused(
                f"a compressed reply (Content-Encoding: {encoding}) where none was asked for, whose size once "
                "decoded cannot be bounded as it is read"
            )
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:
            raise ReplyRefused(f"a reply of {int(length):,} bytes, over {limit_words(limit)}")
        response.stream = _counting(_library(response).SyncByteStream)(response.stream, limit)


def _library(response: Any) -> Any:
    """The HTTP library (httpx or httpx2) whose response `response` is."""
    return importlib.import_module(type(response).__module__.split(".")[0])


@functools.cache
def _counting(base: type) -> type:
    """A byte stream of `base`'s library that stops at a limit."""

    class Counted(base):
        def __init__(self, stream: Any, limit: int):
            self._stream, self._limit = stream, limit

        def __iter__(self) -> Iterator[bytes]:
            read = 0
            for chunk in self._stream:
                read += len(chunk)
                if read > self._limit:
                    raise ReplyRefused(f"a reply of over {limit_words(self._limit)}")
                yield chunk

        def close(self) -> None:
            self._stream.close()

    return Counted


def echo_fault(prompt: str, text: Any, offsets: Sequence[int]) -> str | None:
    """What is wrong with the echo of `prompt` (its text, and its tokens' `offsets`, the generated
    one last), or None: the offsets start at 0, never go back, stay within the prompt's text (and
    what its special tokens add), and end with a generated token at or after the prompt's end; there
    are no more tokens than the prompt can have.
    """
    size = len(prompt.encode("utf-8"))
    most = size + SPECIAL_TOKENS + 1
    if not 2 <= len(offsets) <= most:
        return (
            f"it echoed {len(offsets):,} token(s) for the {len(prompt)}-character prompt {prompt[:40]!r}, where it "
            f"has 1 to {most - 1} (one a byte, and {SPECIAL_TOKENS} special ones) and then the 1 generated"
        )
    if not isinstance(text, str) or not text.startswith(prompt):
        return f"its echoed text {text!r:.60} does not start with the prompt {prompt[:40]!r}"
    if offsets[0] != 0:
        return f"its text_offset starts at {offsets[0]}, not at the prompt's start (0)"
    back = next((i for i in range(1, len(offsets)) if offsets[i] < offsets[i - 1]), None)
    if back is not None:
        return (
            f"its text_offset goes back from {offsets[back - 1]} to {offsets[back]} (token {back})"
        )
    if offsets[-1] > size + SPECIAL_TEXT:
        return f"its text_offset runs to {offsets[-1]}, past the end of the {len(prompt)}-character prompt"
    # only an ASCII prompt's offsets count its characters exactly: byte-level pieces of other
    # characters decode to U+FFFD each, a piece of two characters' bytes to fewer, so a real reply's
    # last offset may fall short of them (a Greek prompt of 48 characters, 46 against vLLM); there
    # the usage check tells a missing generated token
    if prompt.isascii() and offsets[-1] < len(prompt):
        return (
            f"its last token starts at {offsets[-1]}, inside the {len(prompt)}-character prompt {prompt[:40]!r}: "
            "the reply holds no generated token (1 was asked for), or its offsets do not count the prompt's "
            "characters"
        )
    return None


def usage_fault(usage: Any, echoed: Sequence[int], generated: int) -> str | None:
    """What is wrong with a reply's `usage` against the numbers of tokens its choices `echoed` (each
    prompt's and its `generated` ones), or None; a reply without usage says nothing.
    """
    prompt, completion = (
        getattr(usage, key, None) for key in ("prompt_tokens", "completion_tokens")
    )
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (prompt, completion)):
        return None
    want = generated * len(echoed)
    if completion == want and sum(echoed) == prompt + completion:
        return None
    return (
        f"it echoed {sum(echoed):,} log-probs for {len(echoed)} prompt(s), where its usage counts {prompt:,} prompt "
        f"tokens and {completion:,} generated ({want} asked for)"
    )
