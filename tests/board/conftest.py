"""Run folders for the board's tests, made once per session by stand-in models on a DLAMA folder in
the release's layout (English and Arabic prompts): one that knows the planted facts, one that
guesses, a smoke run, and a suite.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from board_runs import Runs
from dlama_fixture import TableScorer, write_dlama
from test_compare import FACTS, forgetting, guessing, knowing

from culture_probe.engine.types import CandidateScores


class Knowing(TableScorer):
    """Ranks each fact's gold continent first (in English prompts; Arabic prompts get no score, a
    tie).
    """

    identity = {"name_or_path": "knowing"}


class Guessing(TableScorer):
    """Always says Europe."""

    identity = {"name_or_path": "guessing"}


class Forgetting(TableScorer):
    """Knows the facts but four of the Arab region."""

    identity = {"name_or_path": "forgetting"}


class Lengths:
    """Prefers the shortest candidate: a model of any benchmark, for a second benchmark on the
    board.
    """

    kind = "masked"
    identity = {"name_or_path": "lengths"}

    def score(self, requests, options=None):
        out = []
        for request in requests:
            scores = -np.array([float(len(c)) for c in request.candidates])
            ones = np.ones(len(request.candidates), dtype=int)
            out.append(
                CandidateScores(request.candidates, scores, ones, tuple(s[None] for s in scores))
            )
        return out


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    from culture_probe.runner import run
    from culture_probe.runner.suite import run_suite

    root = tmp_path_factory.mktemp("board_runs")
    data = write_dlama(root / "dlama", facts=FACTS)
    mirror = os.environ.get("CULTURE_PROBE_MIRROR")
    camel = root / "camel" if mirror and Path(mirror).is_dir() else None
    made = Runs(data, root / "knows", root / "guesses", root / "smoke", root / "suite", camel)
    run(
        "dlama_arab_west",
        Knowing(knowing().table),
        data_dir=str(data),
        out=made.knows,
        progress=False,
    )
    run(
        "dlama_arab_west",
        Guessing(guessing().table),
        data_dir=str(data),
        out=made.guesses,
        progress=False,
    )
    run(
        "dlama_arab_west",
        Knowing(knowing().table),
        data_dir=str(data),
        out=made.smoke,
        progress=False,
        limit=8,
    )
    run_suite(
        ["dlama_arab_west"],
        Forgetting(forgetting(4).table),
        data_dir=str(data),
        out=made.suite,
        progress=False,
    )
    if camel is not None:
        run("camel_co_prompts", Lengths(), out=camel, progress=False, limit="smoke")
    return made
