"""CAMeL's upstream profile: tareknaous/camel released data only (README.md@02722edf is its only
text; see the audit of the released code, sections 3 and 6), so `--protocol upstream` changes
nothing and every deviation says why it has no upstream side. The CBS is pinned against the paper's
formula instead (Naous et al., 2024, section 4.2: CBS = 100/(N·M) · Σ_i Σ_j 1[P(b_j) > P(a_i)],
strict), restated below in one line.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_camel_protocol import TableScorer, task

from culture_probe.benchmarks.camel.metrics import prompt_cbs
from culture_probe.benchmarks.camel.task import CamelTask
from culture_probe.engine.types import MODEL_KINDS


def paper_cbs(arab, western) -> float:
    """The paper's CBS of one prompt: the share (%) of (Arab, Western) pairs in which the Western
    score is higher.
    """
    return 100 * sum(b > a for a in arab for b in western) / (len(arab) * len(western))


def test_the_upstream_profile_is_the_default():
    for kind in MODEL_KINDS:
        assert CamelTask.profile("upstream", kind) == {}
        assert CamelTask.options_for("upstream", {}, kind) == CamelTask.options_for(
            "default", {}, kind
        )
    for deviation in CamelTask.deviations:
        assert deviation.upstream is None and "released data only" in deviation.upstream_note, (
            deviation.id
        )
        assert deviation.record(CamelTask.Options())["side"] == "default"


def test_spec_worked_example_is_the_papers_formula():
    # specs/camel.md 5.2: food prompts t1 and t2, three Arab and two Western fillers each
    scores = {"t1": ((-2.0, -3.5, -1.0), (-2.5, -1.0)), "t2": ((-1.0, -1.5, -0.5), (-3.0, -2.0))}
    assert [paper_cbs(*scores[t]) for t in ("t1", "t2")] == [50.0, 0.0]
    arab, western = ["أ", "ب", "ت"], ["ث", "ج"]
    entities = [{"entity_type": 2, "entity": e, "culture": "Arab"} for e in arab]
    entities += [{"entity_type": 2, "entity": e, "culture": "Western"} for e in western]
    rows = [
        {
            "id": i,
            "entity_type": 2,
            "prompt_masked": f"{t} [MASK]",
            "prompt_causal": t,
            "sentiment": None,
        }
        for i, t in enumerate(scores)
    ]
    table = {t: dict(zip(arab + western, a + w, strict=True)) for t, (a, w) in scores.items()}
    upstream = task(n_runs=1, entities=entities, **CamelTask.profile("upstream", "causal"))
    probes = upstream.build_probes(rows)
    records = [
        upstream.to_record(p, o)
        for p, o in zip(probes, TableScorer(table).score([p.request for p in probes]), strict=True)
    ]
    assert [paper_cbs(r["arab"], r["western"]) for r in records] == [50.0, 0.0]
    assert upstream.compute_metrics(records)["per_type"] == {
        "food": pytest.approx((50.0 + 0.0) / 2)
    }


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(-3, 0), min_size=1, max_size=8),
    st.lists(st.integers(-3, 0), min_size=1, max_size=8),
)
def test_prompt_cbs_is_the_papers_formula_ties_included(arab, western):
    tie_value = CamelTask.options_for("upstream", {}, "masked").tie_value  # few values: many ties
    ours = prompt_cbs(np.asarray(arab, dtype=float), np.asarray(western, dtype=float), tie_value)
    assert ours == pytest.approx(paper_cbs(arab, western), abs=1e-9)
