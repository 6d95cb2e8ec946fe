"""How a request to a served model is asked again, within one bound for the whole request: `timeout`
x (`retries` + 1) plus the backoff (0.5 s, 1 s, 2 s, ... up to 8 s, less up to 25% jitter: the
`openai` client's own schedule).

The `openai` client waits out a `Retry-After` of up to 120 s before each retry, outside any timeout:
a 429 with `Retry-After: 20` held `--request-timeout 2 --max-retries 1` for about 42 s. Here the
client asks once (max_retries=0) and this loop retries what it would (timeouts, dropped connections,
408/409/429 and 5xx); a server's `Retry-After` is honoured when the wait and one more try fit in
what is left of the bound, and otherwise ends the request at once, saying how long the server asked
for and how to allow it.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from culture_probe.util.waits import retry_after_seconds

T = TypeVar("T")
RETRIED = (408, 409, 429)  # the statuses asked again (and 5xx), as the `openai` client does
FIRST_BACKOFF, LAST_BACKOFF = 0.5, 8.0


class WaitRefused(Exception):
    """A server asked to wait longer than a request's bound leaves (the served scorer says so naming
    its server).
    """

    def __init__(self, status: int, asked: float, left: float, needed: int):
        super().__init__(status, asked, left, needed)
        self.status, self.asked, self.left, self.needed = status, asked, left, needed


def retried(status: int) -> bool:
    """Whether an error status is asked again."""
    return status in RETRIED or status >= 500


def backoff(retry: int) -> float:
    """The longest wait before retry number `retry` (0: the first)."""
    return min(FIRST_BACKOFF * 2.0**retry, LAST_BACKOFF)


def jittered(seconds: float) -> float:
    """A backoff less up to 25%, so that requests that failed together are not all asked again
    together.
    """
    return seconds * (1 - 0.25 * random.random())


def retry_after(headers: Mapping[str, str]) -> float | None:
    """The seconds a reply's headers ask to wait (`retry-after-ms`, then `Retry-After` in seconds or
    as an HTTP date), or None when they ask nothing readable.
    """
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        seconds = retry_after_seconds(headers.get(name), scale=scale)
        if seconds is not None:
            return seconds
    return None


@dataclass(frozen=True)
class Retries:
    """`retries` retries of tries of at most `timeout` s each, the whole request within `bound`."""

    timeout: float
    retries: int

    @property
    def bound(self) -> float:
        """The longest a request may take, every try and wait included."""
        return self.timeout * (self.retries + 1) + sum(map(backoff, range(self.retries)))

    def run(self, send: Callable[[], T]) -> T:
        """`send()`'s result, asked again on the errors the `openai` client retries; its last error
        is raised.
        """
        import openai

        started, retry = time.monotonic(), 0
        while True:
            try:
                return send()
            except openai.APIStatusError as error:
                if retry == self.retries or not retried(error.status_code):
                    raise
                wait = self._wait(retry, error, started)
            except openai.APIConnectionError:  # timeouts too
                if retry == self.retries:
                    raise
                wait = jittered(backoff(retry))
            time.sleep(wait)
            retry += 1

    def _wait(self, retry: int, error: object, started: float) -> float:
        """The wait before `retry` after an error status: what the server asked, when the wait and
        one more try fit in what is left of the bound (`WaitRefused` otherwise), else the backoff.
        """
        response = getattr(error, "response", None)
        asked = retry_after(getattr(response, "headers", None) or {})
        if asked is None or asked <= 0:
            return jittered(backoff(retry))
        spent = time.monotonic() - started
        left = self.bound - spent - self.timeout
        if asked > left:
            # a timeout at which the same wait would fit: the bound grows by `retries` x the timeout
            needed = math.ceil((asked + spent) / self.retries)
            raise WaitRefused(getattr(error, "status_code", 0), asked, max(left, 0.0), needed)
        return asked
