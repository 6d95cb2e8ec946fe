"""The Python API checks its arguments as the command line does: `ModelArgs(dtype="float17")` is
refused as `--dtype float17` is; `run_suite` takes one name or a list of names (a string is never
read letter by letter); and every public function, called with a value of the wrong kind (None, a
number, a string, a mapping, a list of None) in any argument, raises the library's own error naming
that argument, never a TypeError from deep inside.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import culture_probe
from culture_probe import metrics
from culture_probe.benchmarks import declarations
from culture_probe.engine.types import ModelArgs
from culture_probe.errors import CultureProbeError, InvalidValueError, MetricInputError
from culture_probe.report import load_run, write_report
from culture_probe.report.compare import compare_runs

# Valid arguments of each public metric function (docs/api/metrics.md): each call below returns.
VALID: dict[str, dict[str, Any]] = {
    "precision_at_k": {"predictions": [["a", "b"]], "references": [["a"]]},
    "hits_at_k": {"predictions": [["a", "b"]], "references": [["a"]]},
    "rank_candidates": {"candidates": ["a", "b"], "scores": [0.1, 0.2]},
    "object_entropy": {"objects": [["a"], ["b"]], "predicate": ["P1", "P1"], "culture": ["x", "x"]},
    "mean_average_precision": {"predictions": [["a", "b"]], "references": [["a"]]},
    "template_mean_std": {"values": [1.0, 2.0]},
    "map_mws_correlation": {"map_values": [1.0, 2.0, 3.0], "mws_values": [1.0, 2.0, 4.0]},
    "cbs": {"prompt_id": [1, 1], "culture": ["arab", "western"], "score": [0.1, 0.2]},
    "odds_ratio": {"word": ["a", "b"], "culture": ["arab", "western"]},
    "fairness_gap": {
        "predictions": ["x", "y"],
        "references": ["x", "y"],
        "culture": ["arab", "western"],
    },
    "xfakt_scores": {"mu_assoc": 0.5, "mu_non": 0.4},
    "maps": {"predictions": ["a"], "references": ["a"], "negative": [False]},
    "memorisation_rate": {"successes": [[True, False]]},
    "culture_gap": {"source": 1.0, "target": 0.5, "human_translated": 0.7},
    "delta_en": {"english": 1.0, "machine_translated": {"de": 0.5}},
    "compare_groups": {
        "scores": [1.0, 2.0, 3.0, 4.0],
        "groups": ["a", "a", "b", "b"],
        "n_resamples": 10,
    },
    "rankc": {"rankings_a": [["a", "b"]], "rankings_b": [["a", "b"]]},
    "agreement": {"correct_a": {"q": True}, "correct_b": {"q": False}},
    "format_score": {"value": 1.0},
}
CALLS = [(name, argument) for name, valid in VALID.items() for argument in valid]


def metric(name: str) -> Any:
    """The public metric function `name`: a generic one of culture_probe.metrics, or a benchmark's
    in its folder.
    """
    homes = [metrics] + [
        importlib.import_module(f"{d.package}.metrics") for d in declarations().values()
    ]
    return next(getattr(home, name) for home in homes if hasattr(home, name))


# Values of the wrong kind for most arguments (a few are right for some: the call may then return).
WRONG = st.one_of(
    st.none(),
    st.integers(-3, 3),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
    st.dictionaries(st.text(max_size=2), st.none(), max_size=2),
    st.lists(st.none(), min_size=1, max_size=3),
    st.lists(st.integers(), max_size=0),
    st.just(object()),
)


def test_every_valid_call_returns():
    for name, valid in VALID.items():
        metric(name)(**valid)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(call=st.sampled_from(CALLS), value=WRONG)
def test_a_metric_given_a_wrong_kind_of_value_names_the_argument(call, value):
    name, argument = call
    try:
        metric(name)(**{**VALID[name], argument: value})
    except CultureProbeError as error:
        assert argument in str(error), (name, argument, value, str(error))


TOP_LEVEL = {
    "run": lambda value: culture_probe.run(value, "planted:maps_en"),
    "run_suite": lambda value: culture_probe.run_suite(value, "planted:maps_en"),
    "dry_run": lambda value: culture_probe.dry_run(value, "planted:maps_en"),
    "load_benchmark": lambda value: culture_probe.load_benchmark(value),
    "load_metric": lambda value: culture_probe.load_metric(value),
    "push_to_hub": lambda value: culture_probe.push_to_hub(value),
    "compare_runs": lambda value: compare_runs(value),
}
ARGUMENT = {"run": "config", "run_suite": "names", "dry_run": "configs", "load_benchmark": "name"}
ARGUMENT |= {"load_metric": "name", "push_to_hub": "repo_id", "compare_runs": "run_dirs"}
NOT_A_NAME = st.one_of(
    st.none(), st.integers(), st.floats(), st.dictionaries(st.text(max_size=2), st.none(), max_size=2),
    st.lists(st.none(), min_size=1, max_size=2), st.just(object()),
)  # fmt: skip


@settings(max_examples=100, deadline=None)
@given(function=st.sampled_from(sorted(TOP_LEVEL)), value=NOT_A_NAME)
def test_a_top_level_function_given_no_name_names_the_argument(function, value):
    with pytest.raises(CultureProbeError) as caught:
        TOP_LEVEL[function](value)
    assert ARGUMENT[function] in str(caught.value), str(caught.value)


@pytest.mark.parametrize(
    "call,error,says",
    [
        (
            lambda: ModelArgs(dtype="float17"),
            InvalidValueError,
            r"dtype 'float17' is not a torch dtype",
        ),
        (
            lambda: culture_probe.run("maps_en", "planted:maps_en", data_dir=123),
            InvalidValueError,
            r"data_dir",
        ),
        (
            lambda: culture_probe.run_suite(["maps_en", None], "planted:maps_en"),
            InvalidValueError,
            r"item 1 is None",
        ),
        (
            lambda: culture_probe.run_suite([], "planted:maps_en"),
            InvalidValueError,
            r"names\) is an empty list",
        ),
        (lambda: compare_runs(None), InvalidValueError, r"`run_dirs` must be a list, got None"),
        (
            lambda: metric("precision_at_k")([["a"]], None),
            MetricInputError,
            r"`references` must be a list, got None",
        ),
        (
            lambda: metric("precision_at_k")([["a"]], [None]),
            MetricInputError,
            r"`references\[0\]` must be a list",
        ),
        (
            lambda: metric("precision_at_k")([None], [["a"]]),
            MetricInputError,
            r"`predictions\[0\]` must be a string",
        ),
        (lambda: metric("precision_at_k")([], []), MetricInputError, r"`predictions` is empty"),
    ],
)
def test_the_python_api_refuses_what_the_command_line_refuses_naming_the_argument(
    call, error, says
):
    with pytest.raises(error, match=says):
        call()


def test_run_suite_takes_one_name_as_one_name(tmp_path, mirror):
    """A single string is one config, not its characters (a stand-in model: no planted model is
    trained).
    """
    from stand_ins import NoIdeaScorer

    data = mirror / "manual" / "maps"
    result = culture_probe.run_suite(
        "maps_en", NoIdeaScorer(), limit=2, data_dir=data, progress=False
    )
    assert list(result.runs) == ["maps_en"]


@pytest.mark.parametrize(
    "call,says",
    [
        (lambda: culture_probe.dry_run("maps_en", None), r"dry_run: `model` must be a string"),
        (
            lambda: culture_probe.run("maps_en", "planted:maps_en", options=3),
            r"run\(options=\) takes a mapping of option names to values, got 3",
        ),
        (
            lambda: culture_probe.run("maps_en", "planted:maps_en", options=["judge=string"]),
            r"run\(options=\) takes a mapping",
        ),
        (
            lambda: culture_probe.run("maps_en", "planted:maps_en", out=3),
            r"run\(out=\) takes the run directory's path",
        ),
        (
            lambda: culture_probe.run_suite(["maps_en"], "planted:maps_en", out=["runs"]),
            r"run_suite: `out` must be a string or a PathLike or None",
        ),
        (
            lambda: culture_probe.run_suite("maps_en", "planted:maps_en", options="judge=string"),
            r"run_suite: `options` must be a mapping or None",
        ),
        (lambda: load_run(None), r"load_run: `run_dir` must be a string or a Path, got None"),
        (lambda: load_run(3), r"load_run: `run_dir` must be"),
        (
            lambda: write_report(None, config={}, records=[], metrics={}),
            r"write_report: `run_dir` must be",
        ),
        (
            lambda: write_report("x", config=3, records=[], metrics={}),
            r"write_report: `config` must be a RunRecord, got 3",
        ),
    ],
    ids=[
        "dry_run-model-None",
        "run-options-int",
        "run-options-list",
        "run-out-int",
        "run_suite-out-list",
        "run_suite-options-str",
        "load_run-None",
        "load_run-int",
        "write_report-None",
        "write_report-config-int",
    ],
)
def test_a_public_call_given_a_wrong_kind_is_one_line_not_a_raw_error(call, says):
    with pytest.raises(CultureProbeError, match=says) as caught:
        call()
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("name", metrics.list_metrics())
def test_every_metric_module_given_empty_inputs_says_so(name):
    """evaluate reads a batch's format from its first item: empty inputs reach the formula's own
    check instead of an IndexError inside evaluate (precision_at_k, whose module takes two formats).
    """
    module = culture_probe.load_metric(name)
    with pytest.raises(MetricInputError) as caught:
        module.compute(**{feature: [] for feature in module._feature_names()})
    # mWS first asks for its vectors, which it needs whatever the inputs
    assert "is empty" in str(caught.value) or name == "mws", str(caught.value)


@pytest.mark.parametrize(
    "inputs,says",
    [
        ({"predictions": None, "references": [["a"]]}, r"`predictions` must be a list, got None"),
        ({"predictions": "ab", "references": ["a", "b"]}, r"`predictions` must be a sequence"),
        ({"predictions": 3, "references": [["a"]]}, r"`predictions` must be a sequence"),
        ({"predictions": [["a"]], "references": [["a"], ["b"]]}, r"`references` has 2 items"),
        ({}, r"`predictions` must be a list, got None"),
    ],
    ids=["None", "str", "int", "lengths", "nothing"],
)
def test_a_metric_module_given_a_wrong_kind_names_the_argument(inputs, says):
    module = culture_probe.load_metric("precision_at_k")
    with pytest.raises(MetricInputError, match=says):
        module.compute(**inputs)
    # a batch added alone is checked as compute checks it
    with pytest.raises(MetricInputError, match=says):
        module.add_batch(**inputs)
