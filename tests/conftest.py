"""Shared test setup: every cache lives in a per-session temporary folder, nothing touches the
network.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Hypothesis times every example (a 200 ms deadline) and the drawing of the first ones (the too_slow
# health check): wall times that a busy machine stretches several times over, so neither may fail a
# test here.
settings.register_profile(
    "wall-time-free", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("wall-time-free")

# Set before `datasets`/`huggingface_hub` are imported anywhere: they read these at import time.
_SESSION_CACHE = Path(tempfile.mkdtemp(prefix="culture_probe_test_cache_"))
os.environ["HF_HOME"] = str(_SESSION_CACHE / "hf")
os.environ["HF_DATASETS_CACHE"] = str(_SESSION_CACHE / "datasets")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["CULTURE_PROBE_CACHE"] = str(_SESSION_CACHE / "culture_probe")
# The planted models, trained once a session: every xdist worker of one run (one test-run id) reads
# one folder (`train_planted` lets one process train a spec while the others wait for it).
if os.environ.get("PYTEST_XDIST_TESTRUNUID"):
    _PLANTED = (
        Path(tempfile.gettempdir())
        / f"culture_probe_test_planted_{os.environ['PYTEST_XDIST_TESTRUNUID']}"
    )
    _PLANTED.mkdir(exist_ok=True)
    (_SESSION_CACHE / "culture_probe").mkdir()
    (_SESSION_CACHE / "culture_probe" / "planted").symlink_to(_PLANTED, target_is_directory=True)
# Under pytest-xdist (make test, make test-fast) every core runs a worker: one torch thread each, or
# the workers' thread pools fight over the cores (a tiny model's forward pass then takes many times
# longer).
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO_ROOT = Path(__file__).resolve().parent.parent
_DEFAULT_MIRROR = REPO_ROOT.parent / "shared" / "mirror"
if not os.environ.get("CULTURE_PROBE_MIRROR") and _DEFAULT_MIRROR.is_dir():
    os.environ["CULTURE_PROBE_MIRROR"] = str(_DEFAULT_MIRROR)


@pytest.fixture
def mirror() -> Path:
    """The shared mirror of upstream files; skips (saying why) when it is absent."""
    root = os.environ.get("CULTURE_PROBE_MIRROR")
    if not root or not Path(root).is_dir():
        pytest.skip(
            "../shared/mirror is absent (set CULTURE_PROBE_MIRROR to run the data-count tests)"
        )
    return Path(root)


@pytest.fixture
def no_mirror(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset the mirror for one test."""
    monkeypatch.delenv("CULTURE_PROBE_MIRROR", raising=False)


@pytest.fixture(autouse=True)
def score_cache_per_test(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test gets its own score-cache folder, so that counting engine calls in one test never
    depends on what another test scored with the same model (planted models are still shared through
    CULTURE_PROBE_CACHE).
    """

    folder = tmp_path_factory.mktemp("scores")
    monkeypatch.setattr("culture_probe.runner.stage_models.default_cache_dir", lambda: folder)


@pytest.fixture(autouse=True)
def metrics_follow_the_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every metrics.json a run writes in any test is checked against the published JSON Schema
    first.
    """
    from culture_probe import rundir
    from culture_probe.schemas import validate_metrics

    write = rundir.write_json

    def checked(path: Path, value: object) -> None:
        if path.name == rundir.METRICS_FILE:
            validate_metrics(value)
        write(path, value)

    monkeypatch.setattr(rundir, "write_json", checked)


# The small upstream-layout releases of the benchmark and protocol tests (tests/releases.py), for
# every folder: they import the data layer, so only after the cache settings above.
from releases import (  # noqa: E402, F401
    _camel_files,
    _maps_files,
    _xfakt_files,
    camel_release,
    fmlama_release,
    maps_release,
    xfakt_release,
)
