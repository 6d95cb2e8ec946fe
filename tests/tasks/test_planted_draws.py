"""A planted model shows its plant at any limit: a limited draw takes the items it was trained on
and the others by turns in every stratum (each stratum still gives the units it gives without them,
so the smoke limit keeps every headline number), and its report splits the headline into planted and
not planted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from culture_probe.models.planted_benchmarks import PLANTED_SOURCES
from culture_probe.tasks.sampling import strata_cells, stratified_items

MAPS = "maps_en"


@dataclass(frozen=True)
class Unit:
    """The two things a draw reads of a probe."""

    item_id: str
    meta: dict = field(default_factory=dict)


@settings(max_examples=60, deadline=None)
@given(
    cells=st.lists(st.integers(1, 8), min_size=1, max_size=6),
    known_share=st.floats(0.1, 0.9),
    limit=st.integers(1, 30),
    seed=st.integers(0, 3),
)
def test_known_and_other_units_take_turns_in_every_stratum_without_moving_a_stratum_count(
    cells, known_share, limit, seed
):
    probes = [
        Unit(f"c{c}-{i}", {"cell": str(c)}) for c, size in enumerate(cells) for i in range(size)
    ]
    favoured = {p.item_id for i, p in enumerate(probes) if (i * known_share) % 1 < known_share}
    plain = stratified_items(probes, limit, ["cell"], seed)
    turns = stratified_items(probes, limit, ["cell"], seed, favoured=favoured)
    count = {k: len(v) for k, v in strata_cells(plain, ["cell"]).items()}
    # the smoke guarantee holds
    assert {k: len(v) for k, v in strata_cells(turns, ["cell"]).items()} == count
    every = strata_cells(probes, ["cell"])
    # within a stratum, the kinds take turns
    for cell, units in strata_cells(turns, ["cell"]).items():
        drawn, known = len(units), sum(u in favoured for u in units)
        have = sum(u in favoured for u in every[cell])
        other = len(every[cell]) - have
        by_turns = {min(have, max(half, drawn - other)) for half in (drawn // 2, (drawn + 1) // 2)}
        assert known in by_turns, (cell, drawn, known, have, other)


def test_the_maps_smoke_draw_of_its_planted_model_holds_planted_proverbs(mirror):
    from culture_probe.loading import load_rows, load_task
    from culture_probe.runner.planning import first_probes

    data = mirror / "manual" / "maps"
    known = PLANTED_SOURCES["planted:"].known_items(MAPS, data)
    task, _ = load_task(MAPS, kind="causal", seed=0, data_dir=data)
    probes = task.build_probes(load_rows(MAPS, data_dir=data))
    _, plain = first_probes(MAPS, task, probes, "smoke")
    number, drawn = first_probes(MAPS, task, probes, "smoke", known)
    # the case: the plain smoke draw misses every plant
    assert not {p.item_id for p in plain} & known
    items = {p.item_id for p in drawn}
    # planted and not, in one smoke run
    assert len(items) == number and 0 < len(items & known) < len(items)
    assert task.smoke_shortfall(probes, drawn) is None  # still every headline number


def planted_run(mirror, limit):
    """`planted:maps_en` on maps_en, `limit` items (the planted model is trained once a session)."""
    from culture_probe.runner import run

    data = str(mirror / "manual" / "maps")
    return run(MAPS, f"planted:{MAPS}", limit=limit, data_dir=data, progress=False)


def planted_apart(result):
    """The accuracy of the planted items and of the others, as the run's metrics split them."""
    split = result.metrics["planted"]
    assert set(split) == {"planted", "not planted"}
    return {side: split[side]["overall"]["accuracy"] for side in split}


@pytest.mark.slow
def test_a_planted_smoke_run_reports_its_planted_items_apart(mirror):
    """Only what chance cannot move: the smoke draw's 2 planted and 2 other proverbs are reported
    apart. (Whether the plant shows needs more items: the 2 others are each right by chance half the
    time, so `planted > not planted` on them fails whenever both are, a chance of 1 in 4; see the
    next test.)
    """
    from culture_probe.report import headline

    result = planted_run(mirror, "smoke")
    accuracy = planted_apart(result)
    assert accuracy["planted"]["n"] > 0 and accuracy["not planted"]["n"] > 0
    lines = headline(result.config, result.metrics)
    assert "planted: accuracy" in lines and "not planted: accuracy" in lines


@pytest.mark.slow
def test_a_planted_run_scores_its_planted_items_above_the_others(mirror):
    """The probe finds what was planted, on enough items that chance cannot hide it: 40 draw all 16
    planted proverbs (trained to their answers: all right) and 24 others, each right by chance with
    probability 1/2 (the spec's "at chance", a two-letter choice). The comparison fails only if all
    24 others are right: 2**-24, about 6e-8, under once in ten million runs.
    """
    accuracy = planted_apart(planted_run(mirror, 40))
    assert (accuracy["planted"]["n"], accuracy["not planted"]["n"]) == (16, 24)
    assert accuracy["planted"]["value"] > accuracy["not planted"]["value"]
