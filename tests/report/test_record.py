"""The typed run record: config.json read into `RunRecord` and written back unchanged, also as older
versions wrote it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from dlama_fixture import TableScorer, spec_table, write_dlama  # noqa: E402 - a fixture module of tests/tasks

from culture_probe import rundir
from culture_probe.errors import CultureProbeError
from culture_probe.metrics.results import UnitTable, summarize
from culture_probe.record import ResultsTable, RunRecord, read_metrics
from culture_probe.runner.api import run_metrics


def test_a_runs_config_json_reads_into_typed_fields_and_writes_back_byte_for_byte(tmp_path):
    from culture_probe.runner import run

    out = tmp_path / "run"
    data = write_dlama(tmp_path / "dlama")
    scorer = TableScorer(spec_table())
    result = run(
        "dlama_arab_west", scorer, data_dir=str(data), out=out, limit="smoke", progress=False
    )
    written = (out / rundir.CONFIG_FILE).read_text(encoding="utf-8")
    record = rundir.read_run(out).record
    assert (record.config, record.model.spec, record.model.kind) == (
        "dlama_arab_west",
        "TableScorer",
        "masked",
    )
    assert record.model.loaded_object and record.run.data_dir == str(data)
    assert record.subset is not None and record.run.limit == record.subset["smoke_limit"]
    assert record.benchmark.name == "dlama"
    assert record.benchmark.rows_sha256 == result.config.benchmark.rows_sha256
    assert record.subset["sampled"] == record.subset["smoke_limit"] and not record.repeats_the_paper
    rundir.write_json(tmp_path / "again.json", record.to_json())
    assert (tmp_path / "again.json").read_text(encoding="utf-8") == written
    # the run hands back the record it wrote: equal to the one read, and its document is the file's
    assert result.config == record and result.config.to_json() == json.loads(written)


def test_an_older_config_json_reads_with_its_model_settings_moved_and_its_missing_parts_defaulted():
    # written before model_args held dtype and revision, and before the protocol profiles, subsets
    # and plans
    older = {
        "config": "fmlama_en",
        "model": {"spec": "bert-base-cased", "kind": "masked"},
        "run": {"dtype": "float16"},
    }
    record = RunRecord.from_json(older)
    assert record.model_args == {"dtype": "float16"} and "dtype" not in record.run.values
    assert record.run.protocol == "default" and record.subset is None and record.planned == {}
    assert record.benchmark.languages == () and record.deviations == () and record.repeats_the_paper
    assert record.to_json()["model_args"] == {"dtype": "float16"}
    assert older["run"] == {"dtype": "float16"}  # the caller's dict is left as it was


def test_to_json_is_a_copy_that_a_caller_may_change():
    record = RunRecord.from_json({"config": "dlama_arab_west", "options": {"mode": "rank"}})
    record.to_json()["options"]["mode"] = "generate"
    assert record.options == {"mode": "rank"} and json.dumps(record.to_json()) == json.dumps(
        {"config": "dlama_arab_west", "options": {"mode": "rank"}}
    )


GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _golden_metrics() -> list[tuple[str, dict]]:
    return [
        (f"{path.stem}:{name}", case["metrics"])
        for path in sorted(GOLDEN.glob("*.json"))
        for name, case in json.loads(path.read_text(encoding="utf-8"))["runs"].items()
    ]


def test_every_golden_runs_results_read_into_the_table_its_readers_use():
    """Each part of the results block is where a reader looks for it, overall and per
    `by_<stratum>`, and the pages' groups are "overall" then every stratum's labels, in the file's
    order.
    """
    for name, metrics in _golden_metrics():
        block = metrics["results"]
        table = ResultsTable.of(read_metrics(metrics, name))
        assert (table.headline, table.unit, table.overall) == (
            block["headline"],
            block["unit"],
            block["overall"],
        ), name
        by = {k.removeprefix("by_"): v for k, v in block.items() if k.startswith("by_")}
        assert table.strata == by, name
        groups = [g for g, _ in table.groups()]
        assert groups == ["overall"] + [
            f"{s}={label}" for s, labels in by.items() for label in labels
        ]
        assert table.methods == block["ci"]["methods"], name
        assert table.chance == block.get("chance", {}), name
        assert table.estimate(table.headline) == block["overall"].get(block["headline"]), name


def test_a_results_block_without_its_optional_parts_reads_with_every_part_present():
    """A metrics.json of an earlier version (no design, chance, warnings or confidence), or a run
    whose every probe was skipped (no headline, no estimate), gives empty parts and the 95% it was
    written at, never a KeyError.
    """
    older = {"results": {"headline": "p_at_1", "unit": "facts", "ci": {"method": "Wilson"}}}
    table = ResultsTable.of(read_metrics(older))
    assert (table.confidence, table.observations, table.chance, table.warnings) == (
        0.95,
        None,
        {},
        {},
    )
    assert table.estimate("p_at_1") is None and table.by_language() == {}
    empty = ResultsTable.of(None)
    assert (empty.headline, empty.groups()) == (None, [("overall", {})])


def test_a_runs_metrics_are_checked_where_they_are_written():
    """metrics.json is checked as a reader checks it where the run writes it (`run_metrics`, for one
    process and for a merge of shards): a protocol whose estimate has a part of another type fails
    there, naming the config and the field, instead of writing a file that every reader then
    refuses.
    """
    table = UnitTable("p_at_1", ("a", "b", "c"), np.array([[1.0], [0.0], [1.0]]), scale=1.0)
    results = summarize([table], unit="facts")
    estimate = results["overall"]["p_at_1"]
    assert list(estimate) == ["value", "stderr", "ci_low", "ci_high", "n"]

    class Protocol:
        config = "fmlama_en"
        overall: dict = {}

        def compute_metrics(self, records):
            return {"results": {**results, "overall": self.overall}, "n_probes": len(records)}

    class Log:
        def truncation(self):
            return None

    protocol = Protocol()
    protocol.overall = results["overall"]
    assert run_metrics(protocol, [], None, Log())["results"] == results
    protocol.overall = {"p_at_1": {**estimate, "n": "3"}}
    with pytest.raises(CultureProbeError, match=r"fmlama_en computed.*results\.overall\.p_at_1\.n"):
        run_metrics(protocol, [], None, Log())
