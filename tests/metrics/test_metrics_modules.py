"""Every `evaluate` module: loads from the repository root and from anywhere, runs its docstring
example, and returns exactly what its pure function returns for the same inputs.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import io
import math
from pathlib import Path

import evaluate
import pytest

import culture_probe
import culture_probe.metrics as metrics
from culture_probe.data.registry import benchmark_modules
from culture_probe.errors import MetricInputError, UnknownNameError

REPO_ROOT = Path(__file__).resolve().parents[2]
NAMES = sorted(p.name for p in (REPO_ROOT / "metrics").iterdir() if (p / f"{p.name}.py").is_file())
ISSUE_NAMES = {
    "rankc",
    "precision_at_k",
    "object_entropy",
    "mean_average_precision",
    "mws",
    "cbs",
    "odds_ratio",
    "fairness_gap",
    "xfakt",
    "maps",
    "compare_groups",
}


#: the benchmark whose paper each metric implements (rankc and compare_groups come from no
#: benchmark)
BENCHMARK_OF = {
    "precision_at_k": "dlama",
    "object_entropy": "dlama",
    "mean_average_precision": "fmlama",
    "mws": "fmlama",
    "cbs": "camel",
    "odds_ratio": "camel",
    "fairness_gap": "camel",
    "xfakt": "xfakt",
    "maps": "maps",
}

#: parameters a module adds to its pure function to read inputs from files (through
#: culture_probe.data)
FILE_PARAMETERS = {"mws": ("vectors", "language")}


def same(a, b) -> bool:
    """Equality that treats NaN as equal to NaN, through nested dicts and lists."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


def test_repo_root_metrics_is_the_package_folder_not_a_copy():
    assert (REPO_ROOT / "metrics").resolve() == metrics.MODULES_DIR.resolve()
    assert set(NAMES) == ISSUE_NAMES == set(metrics.list_metrics())


@pytest.mark.parametrize("name", NAMES)
def test_module_example_runs_and_agrees_with_the_pure_function(name, monkeypatch, tmp_path):
    calls = []
    original = evaluate.EvaluationModule.compute

    def recording(self, **kwargs):
        """compute, recording inputs and result (evaluate appends to this docstring, so it must
        exist).
        """
        result = original(self, **kwargs)
        calls.append((kwargs, result))
        return result

    monkeypatch.setattr(evaluate.EvaluationModule, "compute", recording)
    monkeypatch.chdir(tmp_path)  # load_metric must not depend on the working directory
    module = culture_probe.load_metric(name)
    docstring = inspect.getmodule(type(module)).__doc__
    test = doctest.DocTestParser().get_doctest(docstring, {}, name, None, 0)
    assert test.examples, f"{name}: the module docstring has no example"
    out = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test, out=out.write)
    assert runner.failures == 0, out.getvalue()
    assert calls, f"{name}: the example never calls compute"
    home = (
        f"culture_probe.benchmarks.{BENCHMARK_OF[name]}.metrics"
        if name in BENCHMARK_OF
        else "culture_probe.metrics"
    )
    pure = getattr(importlib.import_module(home), name)  # a benchmark's formula is in its folder
    for kwargs, result in calls:
        assert same(result, pure(**kwargs))
    # without self
    parameters = list(inspect.signature(type(module)._compute).parameters.values())[1:]
    assert all(p.kind is not inspect.Parameter.VAR_KEYWORD for p in parameters)
    # Same names and defaults as the pure function: the module cannot drift from the source of
    # truth. A module may only add, last, what reads files for the pure function (the data layer's
    # job, e.g. mWS's vectors file).
    pure_parameters = inspect.signature(pure).parameters.values()
    own = [p for p in parameters if p.name not in FILE_PARAMETERS.get(name, ())]
    assert [(p.name, p.default) for p in own] == [(p.name, p.default) for p in pure_parameters]
    assert [p.name for p in parameters[len(own) :]] == list(FILE_PARAMETERS.get(name, ()))
    assert module.citation and module.description


@pytest.mark.parametrize("name", sorted(BENCHMARK_OF))
def test_a_benchmarks_metric_cites_the_paper_its_dataset_card_cites(name):
    card = benchmark_modules()[BENCHMARK_OF[name]].INFO
    assert culture_probe.load_metric(name).citation == card.citation


def test_rankc_cites_its_own_paper():
    assert "@inproceedings{qi-etal-2023-cross" in culture_probe.load_metric("rankc").citation


@pytest.mark.parametrize("name", NAMES)
def test_evaluate_load_from_the_repository_root(name, monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    module = evaluate.load(f"metrics/{name}")
    assert type(module).__name__ == type(culture_probe.load_metric(name)).__name__


def test_precision_at_k_module_also_takes_top1_labels():
    module = culture_probe.load_metric("precision_at_k")
    result = module.compute(
        predictions=["Africa", "Europe"], references=[["Africa", "Asia"], ["Africa"]]
    )
    assert result["precision"] == 50.0


def test_unknown_metric_name_suggests_the_right_one():
    with pytest.raises(UnknownNameError, match="Did you mean 'cbs'"):
        culture_probe.load_metric("cbss")


def test_module_reports_bad_input_naming_the_argument():
    module = culture_probe.load_metric("cbs")
    with pytest.raises(MetricInputError, match="`score` has nan at index 1"):
        module.compute(prompt_id=["t", "t"], culture=["arab", "western"], score=[0.0, float("nan")])
    with pytest.raises(
        MetricInputError, match="Unknown label 'arabic' in `culture`.*Did you mean 'arab'"
    ):
        module.compute(prompt_id=["t", "t"], culture=["arabic", "western"], score=[0.0, 1.0])
    # lengths that differ: the formula's check, before evaluate's batching
    with pytest.raises(MetricInputError, match="`culture` has 1 items but `prompt_id` has 2"):
        module.compute(prompt_id=["t", "t"], culture=["arab"], score=[0.0, 1.0])
