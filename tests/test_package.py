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


@pytest.mark.parametrize("module", ["culture_probe", "culture_probe.engine", "culture_probe.tasks",
                                    "culture_probe.report", "culture_probe.metrics", "culture_probe.curation",
                                    "culture_probe.models"])
def test_public_api_names_resolve(module):
    import importlib

    package = importlib.import_module(module)
    assert package.__all__ and len(set(package.__all__)) == len(package.__all__)
    for name in package.__all__:  # every promised name resolves, lazy ones included
        assert getattr(package, name) is not None, f"{module}.{name}"
    assert isinstance(culture_probe.Scorer, type) and callable(culture_probe.run)
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
