"""Article sizes: the MediaWiki API provider (against a local fake API) and the offline store
provider.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from culture_probe.curation import HttpPolicy, MediaWikiSizes, StoreSizes
from culture_probe.curation.sizes import article_title
from culture_probe.errors import EndpointError

PAGES = {
    "en.wikipedia.org": {"Egypt": 250000, "New York City": 260000, "Al-Qahira & Co": 17},
    "ar.wikipedia.org": {"مصر": 180000},
}


class FakeMediaWiki:
    """`/<host>/w/api.php?action=query&prop=revisions&rvprop=size&titles=...` as MediaWiki answers
    it.
    """

    def __init__(self, fail_first: int = 0, broken: bool = False):
        self.calls: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                url = urllib.parse.urlsplit(self.path)
                params = urllib.parse.parse_qs(url.query)
                fake.calls.append(
                    {
                        "host": url.path.split("/")[1],
                        "params": params,
                        "agent": self.headers.get("User-Agent"),
                    }
                )
                if len(fake.calls) <= fail_first:
                    self.send_response(503)
                    self.send_header("Retry-After", "0")
                    self.end_headers()
                    return
                payload = (
                    b"<html>maintenance</html>"
                    if broken
                    else json.dumps(
                        fake.answer(url.path.split("/")[1], params["titles"][0].split("|"))
                    ).encode()
                )
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.api = f"http://127.0.0.1:{self.server.server_address[1]}/{{host}}/w/api.php"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @staticmethod
    def answer(host: str, titles: list[str]) -> dict:
        normalized = [
            {"from": t, "to": t[0].upper() + t[1:]} for t in titles if t[0] != t[0].upper()
        ]
        pages = []
        for title in titles:
            title = title[0].upper() + title[1:]
            size = PAGES.get(host, {}).get(title)
            pages.append(
                {"title": title, "missing": True}
                if size is None
                else {"title": title, "revisions": [{"size": size}]}
            )
        return {"batchcomplete": True, "query": {"normalized": normalized, "pages": pages}}

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def policy():
    return HttpPolicy(min_interval=0, timeout=5, retries=2, backoff=0.001, max_wait=0.01)


def test_mediawiki_sizes_by_wiki_with_title_normalisation(policy):
    api = FakeMediaWiki()
    try:
        articles = [
            "https://en.wikipedia.org/wiki/Egypt",
            "https://en.wikipedia.org/wiki/new_York_City",
            "https://en.wikipedia.org/wiki/Al-Qahira_%26_Co",
            "https://en.wikipedia.org/wiki/Nowhere",
            "https://ar.wikipedia.org/wiki/%D9%85%D8%B5%D8%B1",
        ]
        sizes = MediaWikiSizes(policy, api_url=api.api).sizes(articles)
    finally:
        api.close()
    assert sizes == {articles[0]: 250000, articles[1]: 260000, articles[2]: 17, articles[4]: 180000}
    assert sorted(c["host"] for c in api.calls) == ["ar.wikipedia.org", "en.wikipedia.org"]
    assert all(c["agent"].startswith("culture_probe/") for c in api.calls)
    assert api.calls[0]["params"]["rvprop"] == ["size"] and api.calls[0]["params"][
        "formatversion"
    ] == ["2"]


def test_mediawiki_batches_of_fifty_and_retries(policy):
    api = FakeMediaWiki(fail_first=1)
    try:
        articles = [f"https://en.wikipedia.org/wiki/Page_{i}" for i in range(120)]
        assert MediaWikiSizes(policy, api_url=api.api).sizes(articles) == {}
    finally:
        api.close()
    # first try: 503
    assert [len(c["params"]["titles"][0].split("|")) for c in api.calls] == [50, 50, 50, 20]


def test_mediawiki_garbage_ends_in_an_error_naming_the_api(policy):
    api = FakeMediaWiki(broken=True)
    try:
        with pytest.raises(
            EndpointError,
            match=r"MediaWiki API http://127\.0\.0\.1:\d+/\{host\}/w/api\.php failed "
            r"after 3 attempts; last error: malformed JSON",
        ):
            MediaWikiSizes(policy, api_url=api.api).sizes(["https://en.wikipedia.org/wiki/Egypt"])
    finally:
        api.close()


def test_store_sizes_read_schema_content_size(store):
    egypt = [
        "https://en.wikipedia.org/wiki/Egypt",
        "https://ar.wikipedia.org/wiki/%D9%85%D8%B5%D8%B1",
        "https://de.wikipedia.org/wiki/Nowhere",
    ]
    assert StoreSizes(store).sizes(egypt) == {egypt[0]: 250000, egypt[1]: 180000}


def test_article_title():
    assert article_title("https://en.wikipedia.org/wiki/Washington,_D.C.") == (
        "en.wikipedia.org",
        "Washington, D.C.",
    )
    assert article_title("https://ar.wikipedia.org/wiki/%D9%85%D8%B5%D8%B1") == (
        "ar.wikipedia.org",
        "مصر",
    )
