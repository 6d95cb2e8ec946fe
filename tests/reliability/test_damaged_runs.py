"""A damaged run folder, a weights file torch refuses and a --cache-dir that is a file end in one
line (exit 2), not a traceback, and the last before any data or model loads.
"""

from __future__ import annotations

import json
import pickle

import pytest

from culture_probe.cli import expected_failure, main
from culture_probe.errors import InvalidValueError
from culture_probe.runner import RunSettings


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("culture-probe: error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0].removeprefix("culture-probe: error: ")


@pytest.mark.parametrize(
    ("command", "config"),
    [("report", [1, 2]), ("compare", {"model": {"spec": "m"}}), ("report", "a string")],
)
def test_a_config_json_that_is_no_run_configuration_is_one_line_naming_the_file(
    tmp_path, capsys, command, config
):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(config), encoding="utf-8")
    argv = [command, str(run)] + ([str(run)] if command == "compare" else [])
    assert main(argv) == 2
    line = _one_line(capsys.readouterr().err)
    assert (
        line.startswith(f"{run / 'config.json'}: not a run's configuration") and "damaged" in line
    )


def test_a_cache_dir_that_is_a_file_is_refused_when_the_settings_are_made(tmp_path):
    cache = tmp_path / "scores"
    cache.write_text("", encoding="utf-8")
    with pytest.raises(InvalidValueError, match=r"--cache-dir .*scores is a file: pass a folder"):
        RunSettings(cache_dir=str(cache))
    # a folder still to be made is fine
    assert RunSettings(cache_dir=str(tmp_path / "not_yet")).cache_dir


def test_a_weights_file_torch_refuses_to_unpickle_is_one_line_saying_nothing_ran():
    line = expected_failure(
        pickle.UnpicklingError("Weights only load failed.\nThis file can still be loaded ...")
    )
    assert line is not None and "\n" not in line
    assert line.startswith(
        "a weights file is a pickle that torch will not load safely (Weights only load failed.)"
    )
    assert "nothing in it was run" in line and "safetensors" in line
