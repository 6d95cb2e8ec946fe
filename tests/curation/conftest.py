"""Fixtures of the curation tests: the Wikidata-shaped dump, a local Oxigraph server, fast HTTP
politeness.
"""

from __future__ import annotations

import pytest
from curation_helpers import FIXTURE

from culture_probe.curation import EmbeddedStore, HttpPolicy, oxigraph_server


@pytest.fixture(scope="session")
def store() -> EmbeddedStore:
    """The fixture loaded into the embedded pyoxigraph store (read-only use)."""
    return EmbeddedStore([FIXTURE])


@pytest.fixture(scope="module")
def server_url():
    """A real Oxigraph server on 127.0.0.1 serving the fixture; killed when the module's tests
    end.
    """
    with oxigraph_server([FIXTURE], max_lifetime=300) as server:
        yield server.url


@pytest.fixture
def fast() -> HttpPolicy:
    """Politeness with tiny delays, so retries cost milliseconds in tests."""
    return HttpPolicy(min_interval=0.0, timeout=5.0, retries=2, backoff=0.001, max_wait=0.01)
