"""The typed run record: config.json read into `RunRecord` and written back unchanged, also as older versions
wrote it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from culture_probe import rundir
from culture_probe.record import RunRecord

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tasks"))
from dlama_fixture import TableScorer, spec_table, write_dlama  # noqa: E402 - a fixture module of tests/tasks


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
    # written before model_args held dtype and revision, and before the protocol profiles, subsets and plans
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


def test_a_record_read_as_the_dict_it_replaced_still_answers_and_says_it_is_going():
    # RunResult.config was config.json's dict until it became the record: `result.config["deviations"]` in a
    # notebook keeps working for one release, warning, and gives what the field gives
    deviation = {"id": "M1", "description": "why", "side": "default"}
    record = RunRecord.from_json({"config": "maps_en", "deviations": [deviation]})
    with pytest.warns(DeprecationWarning, match=r"config\.deviations"):
        assert record["deviations"] == [deviation] == list(record.deviations)
