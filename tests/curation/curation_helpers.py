"""Test helpers: a fault-injecting HTTP proxy on 127.0.0.1, and a slow reference curation written
with rdflib.

The reference implementation walks the fixture's triples with plain Python loops (no SPARQL, no
pyoxigraph), so the curation's output is checked against an independent reading of the same data.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import rdflib

FIXTURE = Path(__file__).parent / "fixtures" / "wikidata_mini.ttl"
WD = "http://www.wikidata.org/entity/"
WDT = "http://www.wikidata.org/prop/direct/"
SCHEMA = "http://schema.org/"
RDFS_LABEL = rdflib.RDFS.label


# ---- the proxy
# -----------------------------------------------------------------------------------------------


class FaultProxy:
    """Forwards requests to `upstream`, except where `plan(n)` (n = 0-based request number) says
    otherwise.

    Actions: "pass"; ("status", code, headers); ("slow", seconds) then pass; "badjson" (200 with
    broken JSON); "drop" (close the connection without an answer). Every request is recorded
    (headers and form body).
    """

    def __init__(self, upstream: str, plan: Callable[[int], object] = lambda n: "pass"):
        self.upstream, self.plan = upstream, plan
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                proxy.handle(self, body)

            def do_GET(self):
                proxy.handle(self, b"")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/query"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FaultProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def queries(self) -> list[str]:
        """The SPARQL text of every request received."""
        return [urllib.parse.parse_qs(r["body"]).get("query", [""])[0] for r in self.requests]

    def handle(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        with self.lock:
            number = len(self.requests)
            self.requests.append(
                {"headers": dict(handler.headers), "body": body.decode(), "path": handler.path}
            )
        action = self.plan(number)
        if action == "drop":
            handler.close_connection = True
            handler.connection.shutdown(2)
            return
        if action == "badjson":
            return self._answer(
                handler, 200, {"Content-Type": "application/sparql-results+json"}, b'{"head": {"va'
            )
        if isinstance(action, tuple) and action[0] == "status":
            return self._answer(handler, action[1], action[2], b"busy")
        if isinstance(action, tuple) and action[0] == "slow":
            time.sleep(action[1])
        self._forward(handler, body)

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        request = urllib.request.Request(
            self.upstream,
            data=body or None,
            method=handler.command,
            headers={
                "Content-Type": handler.headers.get(
                    "Content-Type", "application/x-www-form-urlencoded"
                ),
                "Accept": handler.headers.get("Accept", "*/*"),
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                self._answer(
                    handler,
                    response.status,
                    {"Content-Type": response.headers["Content-Type"]},
                    response.read(),
                )
        except urllib.error.HTTPError as error:
            self._answer(handler, error.code, {"Content-Type": "text/plain"}, error.read())
        except OSError:
            self._answer(
                handler, 502, {"Content-Type": "text/plain"}, b"bad gateway: upstream is down"
            )

    @staticmethod
    def _answer(handler: BaseHTTPRequestHandler, code: int, headers: dict, payload: bytes) -> None:
        try:
            handler.send_response(code)
            for key, value in headers.items():
                handler.send_header(key, value)
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
            pass


# ---- the reference implementation
# -----------------------------------------------------------------------------


class Reference:
    """DLAMA curation for predicates whose subject is a country, computed from raw triples."""

    def __init__(self, path: Path = FIXTURE):
        self.graph = rdflib.Graph()
        self.graph.parse(path, format="turtle")

    def values(self, qid: str, pid: str) -> set[str]:
        return {
            str(o)[len(WD) :]
            for o in self.graph.objects(rdflib.URIRef(WD + qid), rdflib.URIRef(WDT + pid))
        }

    def is_a(self, qid: str, cls: str) -> bool:
        return cls in self.values(qid, "P31")

    def label(self, qid: str, lang: str) -> str | None:
        found = [
            str(o)
            for o in self.graph.objects(rdflib.URIRef(WD + qid), RDFS_LABEL)
            if o.language == lang
        ]
        return min(found) if found else None

    def size(self, qid: str, sites: set[str]) -> int:
        best = 0
        for article in self.graph.subjects(
            rdflib.URIRef(SCHEMA + "about"), rdflib.URIRef(WD + qid)
        ):
            site = str(next(self.graph.objects(article, rdflib.URIRef(SCHEMA + "isPartOf"))))
            if site in sites:
                best = max(
                    best,
                    int(next(self.graph.objects(article, rdflib.URIRef(SCHEMA + "contentSize")))),
                )
        return best

    def superclasses(self, qid: str) -> set[str]:
        seen, queue = set(), deque([qid])
        while queue:
            for parent in self.values(queue.popleft(), "P279"):
                if parent not in seen:
                    seen.add(parent)
                    queue.append(parent)
        return seen

    def object_ok(self, obj: str, kind: str, object_filters: bool) -> bool:
        """Every object passes, as upstream's step 3 asks for all of them; culture_probe's optional
        filters drop non-sovereign or historical countries, lost or sovereign cities and sign
        languages.
        """
        if not object_filters:
            return True
        if kind == "country":
            return self.is_a(obj, "Q3624078") and not self.is_a(obj, "Q3024240")
        if kind == "city":
            return not any(
                self.is_a(obj, c) for c in ("Q2974842", "Q3624078", "Q3024240", "Q3336843")
            )
        if kind == "language":
            return not self.is_a(obj, "Q34228")
        return True

    def pair(
        self,
        pid: str,
        kind: str,
        regions: list,
        languages: tuple[str, ...],
        top: int,
        object_filters: bool = False,
    ) -> dict:
        """{(token, lang): [v1 records]} for a country-subject predicate over list-defined
        regions.
        """
        kept = {}
        for region in regions:
            rows = []
            for country in region.countries:
                if not self.is_a(country, "Q3624078") or not self.values(country, pid):
                    continue
                sites = {f"https://{s}.wikipedia.org/" for s in region.sites_for(country)}
                size = self.size(country, sites)
                objects = sorted(
                    o
                    for o in self.values(country, pid)
                    if self.object_ok(o, kind, object_filters)
                    and all(self.label(o, lang) for lang in languages)
                )
                if size and objects and all(self.label(country, lang) for lang in languages):
                    rows.append((country, size, objects))
            rows.sort(key=lambda r: (-r[1], int(r[0][1:])))
            kept[region.token] = rows[:top]
        all_objects = {o for rows in kept.values() for _, _, objs in rows for o in objs}
        out = {}
        for region in regions:
            for lang in languages:
                records = []
                for rank, (country, size, objs) in enumerate(kept[region.token]):
                    grown = sorted(
                        {a for o in objs for a in {o} | (self.superclasses(o) & all_objects)}
                    )
                    records.append(
                        {
                            "sub_uri": country,
                            "obj_uri": grown,
                            "sub_label": self.label(country, lang),
                            "obj_label": [self.label(o, lang) for o in grown],
                            "country": [country],
                            "size": size,
                            "uuid": f"{pid}_general_{region.token}_{rank}",
                        }
                    )
                out[(region.token, lang)] = records
        return out


def read_records(path: Path) -> list[dict]:
    """The JSON lines of one output file."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def tree(root: Path) -> dict[str, bytes]:
    """{relative path: bytes} of every .jsonl under `root` (the curated output, without
    checkpoints).
    """
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.jsonl"))}
