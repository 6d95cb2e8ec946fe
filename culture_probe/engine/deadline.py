"""Each try of a request to a served model bounded as a whole. The HTTP client's own timeouts bound
one operation each (connecting, one send, one read), so a server that sends a byte every half
second, or its headers and half a body, never trips them and holds a run forever. Here every socket
operation of a try waits at most until that try's deadline, set when the try is sent: a try ends
within its timeout whatever the server does, and the retry policy (which errors are asked again, the
backoff, `Retry-After`: engine.retries) stays apart.

The classes wrap whichever of httpcore/httpcore2 the installed `openai` client uses (they share one
interface), so they are duck-typed rather than subclasses of either.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any


class Deadline:
    """The deadline of the try that each thread is sending: the HTTP client sends a try and reads
    its reply in the thread that asked, so a thread-local deadline is that try's, on whichever
    pooled connection it goes.
    """

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._local = threading.local()

    def start(self, request: Any) -> None:
        """An HTTP client's request hook: a try (the first, a retry or a redirect) is sent now."""
        self._local.at = time.monotonic() + self.seconds

    def clip(self, timeout: float | None, expired: type[Exception]) -> float | None:
        """A socket operation's own timeout, cut to what is left of its try; `expired` (the HTTP
        library's timeout of that operation) once nothing is left, so that a server sending faster
        than any wait cannot go on.
        """
        at: float | None = getattr(self._local, "at", None)
        if at is None:
            return timeout
        left = at - time.monotonic()
        if left <= 0:
            raise expired(f"the try's {self.seconds:g} s ran out")
        return left if timeout is None else min(timeout, left)


def _errors(wrapped: Any) -> Any:
    """The HTTP library (httpcore or httpcore2) whose object `wrapped` is: its timeout exceptions
    are the ones its callers map and retry.
    """
    return importlib.import_module(type(wrapped).__module__.split(".")[0])


def bounded_http_client(
    seconds: float,
    *,
    response_hooks: Sequence[Callable[[Any], None]] = (),
    headers: Mapping[str, str] | None = None,
) -> Any:
    """The `openai` client's default HTTP client (its limits, redirects and the environment's
    proxies) in which each try ends within `seconds`: connecting, sending, waiting and a reply that
    trickles in, all together. Each reply's headers go to `response_hooks` before its body is read,
    and `headers` are sent with every request.
    """
    from openai import DefaultHttpxClient

    deadline = Deadline(seconds)
    client = DefaultHttpxClient(
        timeout=seconds,
        event_hooks={"request": [deadline.start], "response": list(response_hooks)},
        headers=dict(headers or {}),
    )
    # httpx takes no network backend, so the one of each connection pool (direct, and each proxy's)
    # is wrapped.
    for transport in (client._transport, *client._mounts.values()):
        pool = getattr(transport, "_pool", None)
        if pool is not None:
            pool._network_backend = _Backend(pool._network_backend, deadline)
    return client


class _Backend:
    """A network backend whose connections wait no longer than their try's deadline."""

    def __init__(self, backend: Any, deadline: Deadline):
        self._backend, self._deadline = backend, deadline
        self._expired = _errors(backend).ConnectTimeout

    def connect_tcp(
        self, host: str, port: int, timeout: float | None = None, **options: Any
    ) -> _Stream:
        stream = self._backend.connect_tcp(
            host, port, self._deadline.clip(timeout, self._expired), **options
        )
        return _Stream(stream, self._deadline)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, **options: Any
    ) -> _Stream:
        timeout = self._deadline.clip(timeout, self._expired)
        return _Stream(self._backend.connect_unix_socket(path, timeout, **options), self._deadline)

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


class _Stream:
    """A connection whose every read and write waits no longer than the deadline of the try using
    it.
    """

    def __init__(self, stream: Any, deadline: Deadline):
        self._stream, self._deadline, self._library = stream, deadline, _errors(stream)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data: bytes = self._stream.read(
            max_bytes, self._deadline.clip(timeout, self._library.ReadTimeout)
        )
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, self._deadline.clip(timeout, self._library.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> _Stream:
        stream = self._stream.start_tls(
            ssl_context, server_hostname, self._deadline.clip(timeout, self._library.ConnectTimeout)
        )
        return _Stream(stream, self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)
