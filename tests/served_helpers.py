"""Servers for the tests of served models: a real OpenAI-compatible one (`transformers serve` on 127.0.0.1, serving
local tiny models), and a fake one that answers, fails, stalls, trickles or half-answers as a test tells it.
"""

from __future__ import annotations

import http
import http.server
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def transformers_serve(log: Path) -> Iterator[str]:
    """The base URL of a `transformers serve` process on 127.0.0.1 (stopped on exit); models are named by path."""
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    cli = Path(sys.executable).with_name("transformers")
    with open(log, "w") as out:
        server = subprocess.Popen(
            [str(cli), "serve", "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"transformers serve did not start: {log.read_text()[-2000:]}"
                    ) from None
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()


@dataclass
class Behaviour:
    """What the fake server does with every POST: send the reply (`status`, `body`) at once; or stall (send nothing
    until released); or send its first `cut_at` bytes (status line and headers included) and then the rest one byte
    every `trickle` seconds, or nothing more (a half answer) when `trickle` is None.
    """

    stall: bool = False
    status: int = 200
    body: bytes = b"{}"
    content_type: str = "application/json"
    cut_at: int | None = None
    trickle: float | None = None
    calls: list[float] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    def head(self) -> bytes:
        """The reply's status line and headers."""
        return (
            f"HTTP/1.1 {self.status} {http.HTTPStatus(self.status).phrase}\r\nContent-Type: {self.content_type}\r\n"
            f"Content-Length: {len(self.body)}\r\nConnection: close\r\n\r\n"
        ).encode()

    def send(self, out) -> None:
        """Writes the reply to `out` as told; returns when it is sent, or when the test ends."""
        reply = self.head() + self.body
        if self.stall:
            self.release.wait(60)
            return
        cut = len(reply) if self.cut_at is None and self.trickle is None else self.cut_at or 0
        out.write(reply[:cut])
        out.flush()
        if self.trickle is None:
            if cut < len(reply):
                self.release.wait(60)
            return
        for byte in reply[cut:]:
            if self.release.wait(self.trickle):
                return
            out.write(bytes([byte]))
            out.flush()


@contextmanager
def fake_server() -> Iterator[tuple[str, Behaviour]]:
    """(base URL, behaviour) of a threaded HTTP server on 127.0.0.1; stalled requests are released at the end."""
    behaviour = Behaviour()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            self.rfile.read(int(self.headers["Content-Length"]))
            behaviour.calls.append(time.monotonic())
            try:
                behaviour.send(self.wfile)
            except OSError:  # the client gave up: what the tests of timeouts expect
                pass

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", behaviour
    finally:
        behaviour.release.set()
        httpd.shutdown()
        httpd.server_close()
