"""Model stand-ins shared by tests in several folders (imported from the tests folder, as served_helpers is)."""

from __future__ import annotations

import numpy as np

from culture_probe.engine.types import CandidateScores


class NoIdeaScorer:
    """A causal model that scores every candidate alike and replies "no idea" to every prompt: nothing it answers is
    right (X-FaKT's string judge grades the replies wrong), and no training or weights are needed.
    """

    kind, identity = "causal", {"name_or_path": "no-idea"}

    def score(self, requests, options=None):
        return [
            CandidateScores(r.candidates, np.zeros(len(r.candidates)), np.ones(len(r.candidates)))
            for r in requests
        ]

    def generate(self, prompts, options):
        return ["no idea"] * len(prompts)


def patch_runner(monkeypatch, name, value):
    """Replace `name` wherever the run layer looks it up: each of the runner's modules that imports it by name (a
    test's seam, e.g. `load_scorer`, is read by the run's front door and by the execution of a judge stage alike).
    """
    from culture_probe.runner import api, config_json, execution, planning, stage_models

    modules = [m for m in (api, planning, stage_models, config_json, execution) if hasattr(m, name)]
    assert modules, f"no module of the runner reads {name}"
    for module in modules:
        monkeypatch.setattr(module, name, value)
