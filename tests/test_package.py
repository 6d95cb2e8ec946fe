"""The package's front door: a light import, a small public API, errors that help."""

from __future__ import annotations

import subprocess
import sys

import pytest

import culture_probe
from culture_probe.errors import UnknownNameError


def test_import_and_cli_help_do_not_load_torch():
    code = (
        "import sys, culture_probe, culture_probe.cli\n"
        "culture_probe.cli.build_parser()\n"
        "assert 'torch' not in sys.modules, 'import culture_probe pulled in torch'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_public_api_names_resolve():
    for name in ("ScoreRequest", "CandidateScores", "__version__"):
        assert getattr(culture_probe, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        culture_probe.nope  # noqa: B018


def test_unknown_name_error_suggests_close_names():
    error = UnknownNameError("benchmark config", "dlama_arab_wets", ["dlama_arab_west", "camel_entities"])
    assert "Did you mean 'dlama_arab_west'?" in str(error)
    assert "camel_entities" in str(error)


def test_cli_help_shows_runnable_examples():
    result = subprocess.run(
        [sys.executable, "-m", "culture_probe", "--help"], capture_output=True, text=True, check=True
    )
    assert "culture-probe run dlama_arab_west --model" in result.stdout
