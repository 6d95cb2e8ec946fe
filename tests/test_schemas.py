"""metrics.json's JSON Schema is made from the types its readers check (`culture_probe.record`), so
the two cannot drift: every key a type names is in the schema, no other key passes, and the
`by_<stratum>` blocks are typed as `Strata`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import typing

import jsonschema
import pytest

from culture_probe import record
from culture_probe.engine.types import Cuts, Truncation
from culture_probe.errors import CultureProbeError
from culture_probe.metrics.results import UnitTable, summarize
from culture_probe.schemas import metrics_schema, validate_metrics

PARTS = (
    record.Results,
    record.Estimate,
    record.Chance,
    record.Intervals,
    record.DesignJson,
    record.TruncationJson,
    record.CutsJson,
    record.LanguagePair,
    record.PairDifference,
)


def _metrics() -> dict:
    table = UnitTable("p1", ("a", "b", "c"), [100.0, 0.0, 100.0], {"language": ["en", "en", "ar"]})
    results = summarize([table.with_scale(100.0, binary=True)], unit="facts")
    return {"results": results, "n_probes": 3, "n_skipped": 0, "skipped": {}}


def test_every_part_of_the_schema_has_the_keys_of_its_type_and_is_a_valid_schema():
    schema = metrics_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    for part in PARTS:
        made = schema["$defs"][part.__name__]
        assert set(made["properties"]) == set(typing.get_type_hints(part)), part.__name__
        assert made["additionalProperties"] is False, part.__name__
    # the benchmark's own detail beside `results` is let be
    assert "additionalProperties" not in schema


def test_a_key_no_type_names_and_a_stratum_of_another_shape_are_refused():
    metrics = _metrics()
    validate_metrics(metrics)
    assert "en" in metrics["results"]["by_language"]
    metrics["results"]["overall"]["p1"]["valeu"] = 1.0
    with pytest.raises(CultureProbeError, match="results/overall/p1: Additional properties"):
        validate_metrics(metrics)
    metrics = _metrics()
    metrics["results"]["by_language"]["en"]["p1"] = {"value": "high"}
    with pytest.raises(CultureProbeError, match="results/by_language/en/p1"):
        validate_metrics(metrics)


def test_the_module_prints_the_schema_for_tools_outside_python():
    printed = subprocess.run(
        [sys.executable, "-m", "culture_probe.schemas"], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(printed) == metrics_schema()


@pytest.mark.parametrize(
    ("written", "form"),
    [
        (
            record.SamplingDesign("fact", ("prompt language",), None, "answers", "a note"),
            record.DesignJson,
        ),
        (Cuts(4, 1, 7, 7), record.CutsJson),
        (Truncation(Cuts(4, 1, 7, 7), Cuts(2, 0, 0, 0)), record.TruncationJson),
    ],
)
def test_a_document_part_is_one_class_and_its_json_form_both_ways(written, form):
    """The class a writer fills and the JSON form its readers check name the same fields (the form
    may add provenance beside them: the processes a truncation record sums over), and what one
    writes the other reads back.
    """
    import dataclasses

    names = {f.name for f in dataclasses.fields(written)}
    assert names <= set(typing.get_type_hints(form))
    assert form.__required_keys__ <= names
    as_json = written.to_json()
    assert set(as_json) <= set(typing.get_type_hints(form))
    assert type(written).from_json(json.loads(json.dumps(as_json))) == written
