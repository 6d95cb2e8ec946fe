"""Model stand-ins shared by tests in several folders (imported from the tests folder, as
served_helpers is).
"""

from __future__ import annotations

import numpy as np

from culture_probe.engine.types import CandidateScores


class NoIdeaScorer:
    """A causal model that scores every candidate alike and replies "no idea" to every prompt:
    nothing it answers is right (X-FaKT's string judge grades the replies wrong), and no training or
    weights are needed.
    """

    kind, identity = "causal", {"name_or_path": "no-idea"}

    def score(self, requests, options=None):
        return [
            CandidateScores(r.candidates, np.zeros(len(r.candidates)), np.ones(len(r.candidates)))
            for r in requests
        ]

    def generate(self, prompts, options):
        return ["no idea"] * len(prompts)
