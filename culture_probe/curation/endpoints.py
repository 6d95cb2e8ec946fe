"""Where SPARQL queries go: an HTTP endpoint through SPARQLWrapper, or an embedded pyoxigraph store.

Both return rows as `{variable: value}` dicts of strings, Wikidata entity IRIs shortened to QIDs,
parsed from the same SPARQL JSON results format, so an embedded store and a server holding the same
triples give identical rows. HTTP calls are polite (`HttpPolicy`): a descriptive User-Agent, a
minimum interval between requests, and retries with exponential backoff on 429, 5xx, timeouts,
dropped connections and malformed JSON, honouring Retry-After (the retry loop is tenacity's).
"""

from __future__ import annotations

import hashlib
import http.client
import ipaddress
import json
import socket
import sys
import time
import urllib.error
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeVar, cast

from culture_probe.curation.queries import WD
from culture_probe.errors import CultureProbeError, EndpointError, SourceFormatError
from culture_probe.util.extras import require
from culture_probe.util.waits import retry_after_seconds
from culture_probe.version import __version__

if TYPE_CHECKING:
    from tenacity import RetryCallState

WIKIDATA_URL = "https://query.wikidata.org/sparql"
# Wikimedia's User-Agent policy asks for a way to reach the operator: add it with --user-agent /
# HttpPolicy.
USER_AGENT = (
    f"culture_probe/{__version__} (research data curation of DLAMA/FmLAMA-style fact sets from Wikidata; "
    "rate-limited, retries with backoff) SPARQLWrapper"
)
T = TypeVar("T")
Row = dict[str, str]


@dataclass(frozen=True)
class HttpPolicy:
    """HTTP politeness: who we are, how often we ask, how long we wait and how often we retry.

    Delays grow as `backoff * 2**attempt`, capped at `max_wait`; a Retry-After header raises the
    delay to what the server asked for. A server that asks for longer than `max_retry_after`
    (default two minutes) ends the step with an error saying so (rerun later: the checkpoints keep
    what was fetched), never a silent hour of sleep.
    """

    user_agent: str = USER_AGENT
    min_interval: float = 1.0
    timeout: float = 60.0
    retries: int = 5
    backoff: float = 2.0
    max_wait: float = 120.0
    max_retry_after: float = 120.0


class RetryableError(Exception):
    """A failure worth retrying, with the server's requested delay when it sent one."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class PoliteCaller:
    """Runs one request function at a bounded rate, retrying retryable failures (tenacity drives the
    loop: stop, wait, sleep); raises EndpointError at the end. `sleep` is injectable so tests record
    waits instead of waiting.
    """

    def __init__(
        self,
        name: str,
        policy: HttpPolicy,
        sleep: Callable[[float], None] = time.sleep,
        notify: Callable[[str], None] | None = None,
    ):
        self.name, self.policy, self.sleep = name, policy, sleep
        self.notify = notify or (lambda text: print(text, file=sys.stderr, flush=True))
        self._last = float("-inf")

    def __call__(self, request: Callable[[], T]) -> T:
        """`request()` with rate limiting and retries."""
        tenacity = require("tenacity")
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(RetryableError),
            stop=tenacity.stop_any(
                tenacity.stop_after_attempt(self.policy.retries + 1), self._refused
            ),
            wait=self._delay,
            sleep=self.sleep,
            before=self._pace,
            before_sleep=self._announce,
            retry_error_callback=self._give_up,
        )
        result: T = retrying(request)
        return result

    def _pace(self, state: RetryCallState) -> None:
        """Before each attempt: keep `min_interval` seconds between the starts of two requests."""
        wait = self._last + self.policy.min_interval - time.monotonic()
        if wait > 0:
            self.sleep(wait)
        self._last = time.monotonic()

    def _delay(self, state: RetryCallState) -> float:
        return retry_delay(self.policy, state.attempt_number - 1, _failure(state).retry_after)

    def _refused(self, state: RetryCallState) -> bool:
        """Whether the server asked to wait longer than `max_retry_after`: the step then ends at
        once.
        """
        retry_after = _failure(state).retry_after
        return retry_after is not None and retry_after > self.policy.max_retry_after

    def _announce(self, state: RetryCallState) -> None:
        """Every wait is visible: what failed, how long we wait, which retry comes."""
        delay = state.next_action.sleep if state.next_action else 0.0
        self.notify(
            f"culture-probe: {self.name}: {_failure(state)}; waiting {delay:.0f} s before retry "
            f"{state.attempt_number} of {self.policy.retries}"
        )

    def _give_up(self, state: RetryCallState) -> NoReturn:
        error = _failure(state)
        if self._refused(state):
            raise EndpointError(
                f"{self.name} asks to wait {error.retry_after:.0f} s before the next request (Retry-After), "
                f"more than --max-retry-after {self.policy.max_retry_after:.0f} s; last error: {error}. "
                "What was fetched is kept in the checkpoints: rerun the same command later, or raise "
                "--max-retry-after to wait."
            )
        raise EndpointError(
            f"{self.name} failed after {state.attempt_number} attempts; last error: {error}. "
            "Everything fetched so far is kept in the checkpoints: rerun the same command to resume "
            "(raise HttpPolicy.retries or lower the chunk size if the endpoint keeps failing)."
        )


def _failure(state: RetryCallState) -> RetryableError:
    """The failure of the attempt just made (only RetryableError is retried, so only it reaches the
    hooks).
    """
    return cast(RetryableError, state.outcome and state.outcome.exception())


def retry_delay(policy: HttpPolicy, attempt: int, retry_after: float | None) -> float:
    """Seconds to wait before retry `attempt + 1`: the capped backoff, or the server's Retry-After
    when longer (only Retry-After's own cap, `max_retry_after`, limits it: waiting less than asked
    gets another 429; the caller refuses a Retry-After above the cap before asking).
    """
    delay = min(policy.backoff * 2**attempt, policy.max_wait)
    if retry_after is None:
        return delay
    return max(delay, min(retry_after, policy.max_retry_after))


TRANSIENT = (
    urllib.error.URLError,
    socket.timeout,
    TimeoutError,
    ConnectionError,
    http.client.HTTPException,
)


def classify_http_error(error: BaseException) -> RetryableError | None:
    """The RetryableError for transient failures (429, 5xx, timeouts, dropped connections); None
    otherwise.
    """
    if isinstance(error, urllib.error.HTTPError):
        if error.code == 429 or error.code >= 500:
            wait = retry_after_seconds(error.headers.get("Retry-After"))
            return RetryableError(f"HTTP {error.code} {error.reason}", wait)
        return None
    if isinstance(error, TRANSIENT):
        return RetryableError(f"{type(error).__name__}: {getattr(error, 'reason', error)}")
    return None


def parse_results(data: Any, source: str) -> list[Row]:
    """SPARQL JSON results -> rows of strings; raises RetryableError when the document is not SPARQL
    JSON.
    """
    try:
        bindings = data["results"]["bindings"]
        rows = []
        for binding in bindings:
            row = {}
            for var, term in binding.items():
                value = term["value"]
                if term["type"] == "uri" and value.startswith(WD):
                    value = value[len(WD) :]
                row[var] = value
            rows.append(row)
        return rows
    except (KeyError, TypeError) as error:
        raise RetryableError(f"malformed SPARQL JSON from {source} (missing {error})") from error


class SparqlEndpoint(Protocol):
    """Anything that answers SELECT queries with rows of strings."""

    name: str

    def select(self, query: str) -> list[Row]:
        """Run one SELECT query."""
        ...


class HttpEndpoint:
    """A SPARQL endpoint over HTTP (Wikidata's, an Oxigraph server, any URL), queried through
    SPARQLWrapper.
    """

    def __init__(
        self,
        url: str = WIKIDATA_URL,
        policy: HttpPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.url = url
        self.name = f"SPARQL endpoint {url}"
        self.identity = url_identity(url)
        self.policy = policy or HttpPolicy()
        self.caller = PoliteCaller(self.name, self.policy, sleep)

    def select(self, query: str) -> list[Row]:
        """Run one SELECT query (POST, JSON results), politely."""
        return self.caller(lambda: self._once(query))

    def _once(self, query: str) -> list[Row]:
        sparql = require("SPARQLWrapper")
        failures = require("SPARQLWrapper.SPARQLExceptions")
        wrapper = sparql.SPARQLWrapper(self.url, agent=self.policy.user_agent)
        wrapper.setMethod(sparql.POST)  # long VALUES lists do not fit in a URL
        wrapper.setReturnFormat(sparql.JSON)
        wrapper.setQuery(query)
        # setTimeout() would truncate sub-second timeouts to 0 (= none)
        wrapper.timeout = self.policy.timeout
        try:
            data = wrapper.query().convert()
        except failures.EndPointInternalError as error:
            raise RetryableError(f"HTTP 500: {str(error)[:300]}") from error
        # 400 bad query, 404, 401, 414: retrying cannot help
        except failures.SPARQLWrapperException as error:
            raise EndpointError(f"{self.name} rejected the query: {str(error)[:500]}") from error
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise RetryableError(f"malformed JSON from {self.url}: {error}") from error
        except Exception as error:
            retry = classify_http_error(error)
            if retry is None:
                raise EndpointError(
                    f"{self.name} failed: {type(error).__name__}: {error}"
                ) from error
            raise retry from error
        if not isinstance(data, dict):
            raise RetryableError(f"malformed JSON from {self.url}: not a JSON object")
        return parse_results(data, self.url)


class EmbeddedStore:
    """An in-process pyoxigraph store loaded from N-Triples/Turtle dumps: the offline default."""

    FORMATS = {".nt": "N_TRIPLES", ".ttl": "TURTLE"}

    def __init__(self, paths: Sequence[str | Path] = ()):
        pyoxigraph = require("pyoxigraph")

        self.store = pyoxigraph.Store()
        self.paths = [Path(p) for p in paths]
        for path in self.paths:
            self.load(path)
        self.name = f"embedded store ({', '.join(p.name for p in self.paths) or 'empty'})"
        self.identity = {"dumps": [file_identity(p) for p in self.paths]}

    def load(self, path: str | Path) -> None:
        """Add the triples of one .nt or .ttl file."""
        pyoxigraph = require("pyoxigraph")

        path = Path(path)
        if path.suffix not in self.FORMATS:
            raise CultureProbeError(
                f"Cannot load {path}: the embedded store reads {', '.join(self.FORMATS)} dumps. "
                "Convert other formats with `oxigraph convert`."
            )
        if not path.is_file():
            raise CultureProbeError(f"No such RDF dump: {path}")
        with path.open("rb") as handle:
            try:
                self.store.load(
                    input=handle, format=getattr(pyoxigraph.RdfFormat, self.FORMATS[path.suffix])
                )
            except SyntaxError as error:  # pyoxigraph's parse errors name the line and column
                raise SourceFormatError(
                    f"not valid {self.FORMATS[path.suffix]} ({error.msg}); fix or re-export the dump",
                    path=str(path),
                ) from None

    def select(self, query: str) -> list[Row]:
        """Run one SELECT query in process."""
        pyoxigraph = require("pyoxigraph")

        try:
            solutions = self.store.query(query)
        except SyntaxError as error:
            raise EndpointError(f"{self.name} rejected the query: {error}") from error
        payload = solutions.serialize(format=pyoxigraph.QueryResultsFormat.JSON)
        return parse_results(json.loads(payload), self.name)


def url_identity(url: str) -> dict[str, str]:
    """What checkpoints remember of an HTTP endpoint: its URL; for a server on this machine
    (loopback) without the port, so a local server restarted on another port resumes the same run.
    """
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    try:
        local = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        local = False
    if local:
        return {
            "url": urllib.parse.urlunsplit(
                (parts.scheme, "localhost:*", parts.path, parts.query, "")
            )
        }
    return {"url": url}


def file_identity(path: Path) -> dict[str, Any]:
    """Name, size and sha256 of a dump file."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return {"name": path.name, "size": path.stat().st_size, "sha256": digest.hexdigest()}


def endpoint_identity(endpoint: Any) -> dict[str, Any] | None:
    """An endpoint's `identity` (URL, or its dumps' names, sizes and hashes); None for a custom
    endpoint object that declares none (its checkpoints are then not tied to it).
    """
    identity = getattr(endpoint, "identity", None)
    return dict(identity) if isinstance(identity, dict) else None


def open_endpoint(
    spec: str | Path | SparqlEndpoint, policy: HttpPolicy | None = None
) -> SparqlEndpoint:
    """`wikidata`, an http(s) SPARQL URL, or one or more comma-separated .nt/.ttl dumps (embedded
    store).
    """
    if not isinstance(spec, str | Path):
        return spec
    text = str(spec)
    if text == "wikidata":
        return HttpEndpoint(WIKIDATA_URL, policy)
    if text.startswith(("http://", "https://")):
        return HttpEndpoint(text, policy)
    return EmbeddedStore([p for p in text.split(",") if p])
