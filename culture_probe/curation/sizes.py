"""Article sizes (step 2's ranking key) through a pluggable provider.

- `MediaWikiSizes`: the live MediaWiki API of each Wikipedia (`prop=revisions&rvprop=size`), with
  the same HTTP politeness as the SPARQL endpoints.
- `StoreSizes`: sizes stored in the SPARQL store itself under `schema:contentSize` on the article
  IRI (the offline default; see `queries.ARTICLE_SIZE`).
"""

from __future__ import annotations

import functools
import json
import math
import time
import urllib.parse
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Protocol

from culture_probe.curation.endpoints import (
    HttpPolicy,
    PoliteCaller,
    RetryableError,
    SparqlEndpoint,
    classify_http_error,
)
from culture_probe.curation.queries import article_sizes_query
from culture_probe.errors import EndpointError, SourceFormatError

MEDIAWIKI_BATCH = 50  # the API's limit on titles per request for ordinary clients


class SizeProvider(Protocol):
    """Byte sizes of Wikipedia articles given by IRI (`https://en.wikipedia.org/wiki/Cairo`)."""

    name: str

    def sizes(self, articles: Sequence[str]) -> dict[str, int]:
        """{article IRI: size in bytes}; articles without a known size are left out (they count as
        0).
        """
        ...


class StoreSizes:
    """Sizes stored in the SPARQL store (`<article> schema:contentSize 12345`)."""

    def __init__(self, endpoint: SparqlEndpoint):
        self.endpoint = endpoint
        self.name = f"schema:contentSize in {endpoint.name}"

    def sizes(self, articles: Sequence[str]) -> dict[str, int]:
        """One SPARQL query for the whole chunk."""
        rows = self.endpoint.select(article_sizes_query(articles))
        return {
            row["article"]: article_size(row["size"], row["article"], self.name) for row in rows
        }


def article_size(value: str, article: str, source: str) -> int:
    """An article size in bytes: a whole, non-negative number; anything else (NaN, -1, "big") is an
    error naming the article and where it came from, never a silent rank.
    """
    try:
        size = float(value)
    except ValueError:
        size = float("nan")
    if not (math.isfinite(size) and size >= 0 and size.is_integer()):
        raise SourceFormatError(
            f"the size of {article} is {value!r}, not a whole number of bytes; fix the dump",
            path=source,
        )
    return int(size)


def article_title(iri: str) -> tuple[str, str]:
    """(host, title) of an article IRI, e.g. (`en.wikipedia.org`, `New York City`) for
    `.../wiki/New_York_City`.
    """
    parts = urllib.parse.urlsplit(iri)
    title = urllib.parse.unquote(parts.path.split("/wiki/", 1)[-1]).replace("_", " ")
    return parts.netloc, title


class MediaWikiSizes:
    """Sizes from the MediaWiki API of each article's wiki, 50 titles per request."""

    def __init__(
        self,
        policy: HttpPolicy | None = None,
        *,
        api_url: str = "https://{host}/w/api.php",
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.policy = policy or HttpPolicy()
        self.api_url = api_url
        self.name = f"MediaWiki API {api_url}"
        self.caller = PoliteCaller(self.name, self.policy, sleep)

    def sizes(self, articles: Sequence[str]) -> dict[str, int]:
        """Group by wiki, then ask each wiki for its titles' latest revision sizes."""
        by_host: dict[str, dict[str, str]] = defaultdict(dict)
        for iri in articles:
            host, title = article_title(iri)
            by_host[host][title] = iri
        found: dict[str, int] = {}
        for host, titles in sorted(by_host.items()):
            names = sorted(titles)
            for start in range(0, len(names), MEDIAWIKI_BATCH):
                batch = names[start : start + MEDIAWIKI_BATCH]
                for title, size in self.caller(functools.partial(self._once, host, batch)).items():
                    if title in titles:
                        found[titles[title]] = size
        return found

    def _once(self, host: str, titles: list[str]) -> dict[str, int]:
        query = urllib.parse.urlencode(
            {
                "action": "query",
                "format": "json",
                "formatversion": "2",
                "prop": "revisions",
                "rvprop": "size",
                "titles": "|".join(titles),
            }
        )
        url = self.api_url.format(host=host) + "?" + query
        request = urllib.request.Request(url, headers={"User-Agent": self.policy.user_agent})
        try:
            with urllib.request.urlopen(request, timeout=self.policy.timeout) as response:
                data = json.loads(response.read().decode("utf-8"))
        except json.JSONDecodeError as error:
            raise RetryableError(f"malformed JSON from {url}: {error}") from error
        except Exception as error:
            retry = classify_http_error(error)
            if retry is None:
                raise EndpointError(
                    f"{self.name} failed for {host}: {type(error).__name__}: {error}"
                ) from error
            raise retry from error
        return _revision_sizes(data, url)


def _revision_sizes(data: object, url: str) -> dict[str, int]:
    """{requested title: size} from a `formatversion=2` answer, following the API's title
    normalisation.
    """
    try:
        query = data["query"]  # type: ignore[index]
        renamed = {item["to"]: item["from"] for item in query.get("normalized", [])}
        sizes = {}
        for page in query.get("pages", []):
            if page.get("missing") or page.get("invalid") or not page.get("revisions"):
                continue
            sizes[renamed.get(page["title"], page["title"])] = int(page["revisions"][0]["size"])
        return sizes
    except (KeyError, TypeError, AttributeError) as error:
        raise RetryableError(f"malformed MediaWiki answer from {url} (missing {error})") from error
