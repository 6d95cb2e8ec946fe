"""A real Oxigraph server on 127.0.0.1 gives the embedded store's output; faults are retried, then
reported.
"""

from __future__ import annotations

import json
import re
import urllib.parse

import pytest
from curation_helpers import FIXTURE, FaultProxy, tree

from culture_probe.benchmarks.dlama.curation import DlamaCuration, curate_dlama
from culture_probe.curation import (
    Checkpoints,
    EmbeddedStore,
    HttpEndpoint,
    HttpPolicy,
    oxigraph_server,
    resolve_region,
)
from culture_probe.curation.endpoints import (
    PoliteCaller,
    RetryableError,
    retry_after_seconds,
    retry_delay,
)
from culture_probe.curation.queries import labels_query
from culture_probe.errors import EndpointError

CONFIG = DlamaCuration(
    resolve_region("arab"),
    resolve_region("west"),
    ("ar", "en"),
    ("P19", "P27", "P37"),
    chunk_size=3,
)
LABELS = labels_query(["Q79"], ["ar", "en"])
# A timeout with room for an answer on a busy machine (0.3 s let a loaded 2-core machine time out a
# passing request, which then retried, counted one request more or ended in "timed out" instead of
# its fault), and a slow fault that still outlasts it
TIMEOUT = 2.0
SLOW = ("slow", 2 * TIMEOUT)
EGYPT = [
    {"item": "Q79", "lang": "ar", "label": "مصر"},
    {"item": "Q79", "lang": "en", "label": "Egypt"},
]


def sleeps_recorder():
    recorded = []
    return recorded, recorded.append


def test_server_and_embedded_store_give_identical_output(store, server_url, fast, tmp_path):
    embedded = curate_dlama(CONFIG, store, tmp_path / "embedded")
    with FaultProxy(server_url) as proxy:
        served = curate_dlama(CONFIG, HttpEndpoint(proxy.url, fast), tmp_path / "server")
    assert tree(served.pair_dir) == tree(embedded.pair_dir)
    assert sum(len(r) for r in tree(embedded.pair_dir).values()) > 0
    agents = {r["headers"].get("User-Agent") for r in proxy.requests}
    assert len(agents) == 1 and agents.pop().startswith("culture_probe/")
    # every VALUES list of entities is cut into chunks of at most chunk_size (3); ?site lists the
    # region's wikis
    sizes = [
        len(block.split())
        for query in proxy.queries
        for var, block in re.findall(r"VALUES \?(\w+) \{ ([^}]*) \}", query)
        if var != "site"
    ]
    assert sizes and max(sizes) == 3
    assert len(proxy.requests) > 50


def test_429_with_retry_after_is_honoured(server_url, fast):
    plan = {0: ("status", 429, {"Retry-After": "7"}), 1: ("status", 503, {})}
    sleeps, sleep = sleeps_recorder()
    with FaultProxy(server_url, lambda n: plan.get(n, "pass")) as proxy:
        policy = HttpPolicy(min_interval=0, timeout=5, retries=3, backoff=0.001, max_wait=60)
        rows = HttpEndpoint(proxy.url, policy, sleep=sleep).select(LABELS)
    assert rows == EGYPT
    assert len(proxy.requests) == 3
    assert sleeps == [7.0, 0.002]  # Retry-After: 7 s; then exponential backoff 0.001 * 2


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (("status", 429, {"Retry-After": "0"}), "HTTP 429"),
        (("status", 503, {}), "HTTP 503"),
        ("badjson", "malformed JSON"),
        ("drop", "RemoteDisconnected|Connection"),
        (SLOW, "timed out"),
    ],
)
def test_persistent_faults_end_in_an_error_naming_the_endpoint(server_url, action, message):
    policy = HttpPolicy(min_interval=0, timeout=TIMEOUT, retries=2, backoff=0.001, max_wait=0.01)
    with FaultProxy(server_url, lambda n: action) as proxy:
        with pytest.raises(
            EndpointError,
            match=rf"SPARQL endpoint {re.escape(proxy.url)} failed after 3 "
            rf"attempts; last error: .*({message})",
        ):
            HttpEndpoint(proxy.url, policy).select(LABELS)
    assert len(proxy.requests) == 3


@pytest.mark.parametrize("action", ["badjson", SLOW, "drop", ("status", 500, {})])
def test_transient_faults_are_retried(server_url, action):
    policy = HttpPolicy(min_interval=0, timeout=TIMEOUT, retries=2, backoff=0.001, max_wait=0.01)
    with FaultProxy(server_url, lambda n: action if n == 0 else "pass") as proxy:
        assert HttpEndpoint(proxy.url, policy).select(LABELS) == EGYPT
    assert len(proxy.requests) == 2


def test_bad_query_is_not_retried(server_url, fast):
    with FaultProxy(server_url) as proxy:
        with pytest.raises(EndpointError, match=rf"{re.escape(proxy.url)} rejected the query"):
            HttpEndpoint(proxy.url, fast).select("SELECT ?x WHERE { ?x ?y }")
    assert len(proxy.requests) == 1


class Counting:
    """An endpoint wrapper that counts queries and, optionally, stops a server before query number
    `stop_at`.
    """

    def __init__(self, inner, server=None, stop_at=None):
        self.inner, self.server, self.stop_at, self.calls = inner, server, stop_at, 0
        self.name, self.identity = inner.name, inner.identity

    def select(self, query):
        if self.calls == self.stop_at:
            self.server.stop()
        self.calls += 1
        return self.inner.select(query)


def test_server_stopped_mid_run_keeps_checkpoints_and_a_rerun_resumes(store, fast, tmp_path):
    out, stop_at = tmp_path / "run", 25
    with oxigraph_server([FIXTURE], max_lifetime=120) as server:
        fresh = Counting(HttpEndpoint(server.url, fast))
        curate_dlama(CONFIG, fresh, tmp_path / "fresh")
    with oxigraph_server([FIXTURE], max_lifetime=120) as server:
        doomed = Counting(HttpEndpoint(server.url, fast), server, stop_at)
        with pytest.raises(
            EndpointError, match=rf"SPARQL endpoint {re.escape(server.url)} failed .*Connection"
        ):
            curate_dlama(CONFIG, doomed, out)
    saved = Checkpoints(out / ".checkpoints")
    for key in saved.keys():
        json.loads(saved.path(key).read_text())  # every checkpoint is whole
    assert not list((out / ".checkpoints").rglob("*.tmp"))
    with oxigraph_server([FIXTURE], max_lifetime=120) as server:  # back up, on another port
        resumed = Counting(HttpEndpoint(server.url, fast))
        result = curate_dlama(CONFIG, resumed, out)
    # nothing fetched before the stop is fetched again
    assert resumed.calls == fresh.calls - stop_at
    assert tree(result.pair_dir) == tree(
        curate_dlama(CONFIG, store, tmp_path / "embedded").pair_dir
    )


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (("status", 429, {"Retry-After": "0"}), "HTTP 429"),
        (SLOW, "timed out"),
        ("badjson", "malformed JSON"),
    ],
)
def test_run_hit_by_a_persistent_fault_resumes_from_its_checkpoints(
    store, server_url, tmp_path, fault, message
):
    config = DlamaCuration(
        resolve_region("arab"), resolve_region("west"), ("ar", "en"), ("P37",), chunk_size=3
    )
    policy = HttpPolicy(min_interval=0, timeout=TIMEOUT, retries=2, backoff=0.001, max_wait=0.01)
    with FaultProxy(server_url) as clean:
        curate_dlama(config, HttpEndpoint(clean.url, policy), tmp_path / "fresh")
    total, stop, out = len(clean.requests), len(clean.requests) // 2, tmp_path / "run"
    with FaultProxy(server_url, lambda n: fault if n >= stop else "pass") as faulty:
        with pytest.raises(
            EndpointError,
            match=rf"{re.escape(faulty.url)} failed after 3 attempts; last error: "
            rf".*{message}",
        ):
            curate_dlama(config, HttpEndpoint(faulty.url, policy), out)
    assert len(request_checkpoints(out / ".checkpoints")) == stop
    with FaultProxy(server_url) as resumed:
        result = curate_dlama(config, HttpEndpoint(resumed.url, policy), out)
    assert len(resumed.requests) == total - stop
    assert tree(result.pair_dir) == tree(
        curate_dlama(config, store, tmp_path / "embedded").pair_dir
    )


def test_rate_limit_spaces_requests():
    sleeps, sleep = sleeps_recorder()
    caller = PoliteCaller("test endpoint", HttpPolicy(min_interval=30.0), sleep)
    for _ in range(3):
        caller(lambda: None)
    assert len(sleeps) == 2 and all(29.0 < s <= 30.0 for s in sleeps)


def test_retry_after_forms():
    assert retry_after_seconds("12") == 12.0
    assert retry_after_seconds(None) is None
    assert retry_after_seconds("soon") is None
    import email.utils
    import time

    assert 25 < retry_after_seconds(email.utils.formatdate(time.time() + 30, usegmt=True)) <= 30
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past: go now
    caller = PoliteCaller(
        "x", HttpPolicy(min_interval=0, retries=1, backoff=1, max_wait=5), lambda s: None
    )
    with pytest.raises(
        EndpointError, match="x failed after 2 attempts; last error: boom.*rerun the same command"
    ):
        caller(lambda: (_ for _ in ()).throw(RetryableError("boom")))


def test_embedded_store_errors(tmp_path):
    with pytest.raises(Exception, match=r"reads \.nt, \.ttl dumps"):
        EmbeddedStore([tmp_path / "dump.rdf"])
    with pytest.raises(Exception, match="No such RDF dump"):
        EmbeddedStore([tmp_path / "missing.nt"])
    with pytest.raises(EndpointError, match=r"embedded store \(empty\) rejected the query"):
        EmbeddedStore().select("SELECT ?x WHERE { ?x ?y }")


def test_post_form_carries_the_query(server_url, fast):
    with FaultProxy(server_url) as proxy:
        HttpEndpoint(proxy.url, fast).select(LABELS)
    form = urllib.parse.parse_qs(proxy.requests[0]["body"])
    assert form["query"] == [LABELS]


def request_checkpoints(root):
    """Checkpoints of single queries (`step/name/chunk...`), not the step aggregates
    (`step/name`).
    """
    return [k for k in Checkpoints(root).keys() if k.count("/") >= 2]


@pytest.mark.slow
def test_killed_process_loses_nothing_it_fetched(store, server_url, fast, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    args = [
        "--region",
        "arab",
        "--languages",
        "ar,en",
        "--predicates",
        "P19,P27,P37",
        "--chunk-size",
        "3",
        "--min-interval",
        "0",
        "--retries",
        "0",
        "--sizes",
        "store",
    ]
    with FaultProxy(server_url) as counting:
        curate_dlama(CONFIG, HttpEndpoint(counting.url, fast), tmp_path / "fresh")
    total = len(counting.requests)
    out = tmp_path / "killed"
    repo = Path(__file__).resolve().parents[2]
    with FaultProxy(server_url, lambda n: ("slow", 0.05)) as slow:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "culture_probe",
                "curate",
                "dlama",
                *args,
                "--endpoint",
                slow.url,
                "--out",
                str(out),
            ],
            cwd=repo,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # a hang guard: a busy machine takes a while to start Python and its imports
        deadline = time.monotonic() + 600
        while len(request_checkpoints(out / ".checkpoints")) < 15 and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    saved = request_checkpoints(out / ".checkpoints")
    assert 15 <= len(saved) < total
    for key in Checkpoints(out / ".checkpoints").keys():
        json.loads(Checkpoints(out / ".checkpoints").path(key).read_text())
    with FaultProxy(server_url) as resumed:
        result = curate_dlama(CONFIG, HttpEndpoint(resumed.url, fast), out)
    assert len(resumed.requests) == total - len(saved)
    assert tree(result.pair_dir) == tree(
        curate_dlama(CONFIG, store, tmp_path / "embedded").pair_dir
    )


def test_retry_after_beyond_the_backoff_cap_is_honoured_up_to_its_own_maximum():
    policy = HttpPolicy(backoff=1.0, max_wait=120.0, max_retry_after=3600.0)
    assert retry_delay(policy, 10, None) == 120.0  # computed backoff: capped
    # the server asked for 10 minutes: wait 10 minutes
    assert retry_delay(policy, 0, 600.0) == 600.0
    assert retry_delay(policy, 0, 7200.0) == 3600.0  # beyond the documented maximum
    assert retry_delay(HttpPolicy(max_retry_after=30.0), 0, 600.0) == 30.0
    sleeps, sleep = sleeps_recorder()

    def busy_once():
        if not sleeps:
            raise RetryableError("HTTP 429", retry_after=300.0)
        return "ok"

    said: list[str] = []
    patient = HttpPolicy(min_interval=0, retries=1, backoff=1, max_wait=5, max_retry_after=600)
    assert PoliteCaller("x", patient, sleep, said.append)(busy_once) == "ok" and sleeps == [300.0]
    # every wait is visible
    assert said == ["culture-probe: x: HTTP 429; waiting 300 s before retry 1 of 1"]


# 0: the refused wait is also the last attempt; still said so
@pytest.mark.parametrize("retries", [5, 0])
def test_a_retry_after_beyond_the_cap_ends_the_step_at_once_with_the_fix(retries):
    from culture_probe.errors import EndpointError

    sleeps, sleep = sleeps_recorder()

    def busy():
        raise RetryableError("HTTP 429", retry_after=3600.0)

    caller = PoliteCaller(
        "Wikidata", HttpPolicy(min_interval=0, retries=retries), sleep, lambda text: None
    )
    with pytest.raises(
        EndpointError, match=r"asks to wait 3600 s .* more than --max-retry-after 120 s.*rerun"
    ):
        caller(busy)
    assert sleeps == []  # no hour of silent sleep


def test_checkpoints_refuse_to_resume_against_another_endpoint(store, tmp_path):
    from culture_probe.curation.endpoints import endpoint_identity, url_identity
    from culture_probe.errors import CultureProbeError

    config = DlamaCuration(
        resolve_region("arab"), resolve_region("west"), ("ar", "en"), ("P37",), chunk_size=3
    )
    curate_dlama(config, store, tmp_path / "run")
    manifest = json.loads((tmp_path / "run" / ".checkpoints" / "manifest.json").read_text())
    [dump] = manifest["endpoint"]["dumps"]
    assert (dump["name"], dump["size"]) == (FIXTURE.name, FIXTURE.stat().st_size) and len(
        dump["sha256"]
    ) == 64
    curate_dlama(config, EmbeddedStore([FIXTURE]), tmp_path / "run")  # the same dump: resumes
    with pytest.raises(
        CultureProbeError,
        match=r"fetched from .*wikidata_mini.*not from .*query\.wikidata\.org.*"
        r"another --out",
    ):
        curate_dlama(config, HttpEndpoint("https://query.wikidata.org/sparql"), tmp_path / "run")
    other = tmp_path / "other.ttl"
    other.write_bytes(FIXTURE.read_bytes() + b"\n# edited\n")
    with pytest.raises(CultureProbeError, match="mix two sources"):
        curate_dlama(config, EmbeddedStore([other]), tmp_path / "run")
    # a local server restarted on another port is the same endpoint; another host is not
    assert url_identity("http://127.0.0.1:5001/query") == url_identity(
        "http://localhost:6002/query"
    )
    assert url_identity("https://example.org/sparql") != url_identity("https://example.com/sparql")
    # declares no identity
    assert endpoint_identity(type("Custom", (), {"name": "my endpoint"})()) is None
