"""One way to find a benchmark (culture_probe/benchmarks/__init__.py): its folder's declaration,
registered under the `culture_probe.benchmarks` entry-point group; every stage reaches its parts
through it.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

import culture_probe.benchmarks as registry
from culture_probe.benchmarks import Declaration, declaration, declarations, with_part
from culture_probe.errors import CultureProbeError, UnknownNameError

BUILT_IN = ["camel", "dlama", "fmlama", "maps", "xfakt"]


def test_the_five_benchmarks_are_found_through_their_entry_points_with_every_part_they_declare():
    found = declarations()
    assert list(found) == BUILT_IN
    for name, declared in found.items():
        assert declared.package == f"culture_probe.benchmarks.{name}"
        data, task = declared.part("data"), declared.part("task")
        assert hasattr(data, "BUILDER") and data.INFO.name
        assert task.TASK.__module__ == f"culture_probe.benchmarks.{name}.task"
        assert declared.part("report") is not None and callable(declared.part("planted").build)
    assert sorted(with_part("curation")) == ["dlama", "fmlama"]
    assert (
        declaration("dlama").planted_kind == "masked"
        and declaration("xfakt").planted_kind == "causal"
    )


def test_each_stage_finds_a_config_s_parts_through_its_declaration():
    from culture_probe.data.registry import resolve
    from culture_probe.models.planted_benchmarks import planted_kind
    from culture_probe.report.views import views_module
    from culture_probe.tasks import task_for

    benchmark = resolve("fmlama_zh")
    assert benchmark.benchmark == "fmlama" and benchmark.declaration is declaration("fmlama")
    assert task_for("fmlama_zh") is declaration("fmlama").part("task").TASK
    assert views_module("fmlama") is declaration("fmlama").part("report")
    assert planted_kind("fmlama_zh") == "masked"


def test_an_unknown_benchmark_lists_the_installed_ones():
    with pytest.raises(UnknownNameError, match="dlama"):
        declaration("dlamma")


def test_a_planted_module_without_its_kind_is_refused_when_declared():
    with pytest.raises(CultureProbeError, match="planted_kind"):
        Declaration("toy", planted="planted")


@pytest.fixture
def entry_points(monkeypatch):
    """Replace the installed entry points with `points`, and forget the cached table before and
    after.
    """

    def install(*points: EntryPoint) -> None:
        monkeypatch.setattr(
            registry, "entry_points", lambda group: [p for p in points if p.group == group]
        )
        registry.declarations.cache_clear()

    yield install
    registry.declarations.cache_clear()


def test_an_entry_point_that_is_no_declaration_is_refused_naming_it(entry_points):
    entry_points(EntryPoint("toy", "culture_probe.errors:CultureProbeError", registry.GROUP))
    with pytest.raises(
        CultureProbeError, match=r"toy = culture_probe\.errors:CultureProbeError .* not a"
    ):
        declarations()


def test_no_benchmark_registered_says_how_to_install(entry_points):
    entry_points()
    with pytest.raises(CultureProbeError, match="pip install -e"):
        declarations()
