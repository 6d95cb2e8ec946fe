"""A local Oxigraph SPARQL server (the `oxigraph` PyPI package's binary) on 127.0.0.1, for tests and
notebooks.

`with oxigraph_server(["dump.nt"]) as server:` loads the dumps into a temporary database, serves it
read-only on a free port (`server.url` is the SPARQL query URL) and kills the process on exit;
`max_lifetime` bounds how long it may live even if the caller hangs, and `server.stop()` ends it
early (tests of a server going away mid-run).
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from culture_probe.errors import CultureProbeError


def oxigraph_binary() -> str:
    """Path of the `oxigraph` executable (next to the running Python first, then on PATH)."""
    local = Path(sys.executable).with_name("oxigraph")
    found = str(local) if local.is_file() else shutil.which("oxigraph")
    if not found:
        raise CultureProbeError(
            "The `oxigraph` server binary is not installed. Install it with `pip install oxigraph` "
            "(or use the embedded store: pass a .nt/.ttl dump as the endpoint)."
        )
    return found


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass(frozen=True)
class LocalServer:
    """A running server: its SPARQL query URL and its process."""

    url: str
    process: subprocess.Popen

    def stop(self) -> None:
        """Kill the server now (idempotent)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)


def _wait_until_up(url: str, process: subprocess.Popen, deadline: float) -> None:
    probe = url + "?query=" + urllib.parse.quote("ASK {}")
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise CultureProbeError(
                f"The oxigraph server exited at start-up with code {process.returncode}."
            )
        try:
            with urllib.request.urlopen(probe, timeout=1):
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.05)
    raise CultureProbeError(
        f"The oxigraph server did not answer at {url} within the start-up timeout."
    )


@contextlib.contextmanager
def oxigraph_server(
    dumps: Sequence[str | Path], *, max_lifetime: float = 600.0, startup_timeout: float = 30.0
) -> Iterator[LocalServer]:
    """Serve `dumps` on 127.0.0.1 and yield the running server; it is killed on exit."""
    binary = oxigraph_binary()
    with tempfile.TemporaryDirectory(prefix="culture_probe_oxigraph_") as location:
        for dump in dumps:
            subprocess.run(
                [binary, "load", "--location", location, "--file", str(dump)],
                check=True,
                capture_output=True,
                timeout=startup_timeout,
            )
        port = free_port()
        process = subprocess.Popen(
            [binary, "serve-read-only", "--location", location, "--bind", f"127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        watchdog = threading.Timer(max_lifetime, process.kill)
        watchdog.daemon = True
        watchdog.start()
        server = LocalServer(f"http://127.0.0.1:{port}/query", process)
        try:
            _wait_until_up(server.url, process, time.monotonic() + startup_timeout)
            yield server
        finally:
            watchdog.cancel()
            server.stop()
