"""The package's front door: a light import, a small public API, errors that help."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


@pytest.mark.parametrize(
    "module",
    [
        "culture_probe",
        "culture_probe.engine",
        "culture_probe.tasks",
        "culture_probe.report",
        "culture_probe.metrics",
        "culture_probe.curation",
        "culture_probe.models",
    ],
)
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
    error = UnknownNameError(
        "benchmark config", "dlama_arab_wets", ["dlama_arab_west", "camel_entities"]
    )
    assert "Did you mean 'dlama_arab_west'?" in str(error)
    assert "camel_entities" in str(error)


def test_cli_help_shows_runnable_examples():
    result = subprocess.run(
        [sys.executable, "-m", "culture_probe", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "culture-probe run dlama_arab_west --model" in result.stdout


def _setup_cfg():
    import configparser
    from pathlib import Path

    parser = configparser.ConfigParser()
    parser.read(Path(__file__).resolve().parents[1] / "setup.cfg")
    return parser


def _names(block: str) -> set[str]:
    import re

    return {
        re.split(r"[<>=!\[ ]", line.strip())[0].lower()
        for line in block.splitlines()
        if line.strip() and not line.strip().startswith("#")
    }


def test_core_dependencies_and_extras_are_declared_as_the_docs_say():
    cfg = _setup_cfg()
    core = _names(cfg["options"]["install_requires"])
    assert {
        "torch",
        "transformers",
        "datasets",
        "evaluate",
        "accelerate",
        "huggingface_hub",
        "pyyaml",
    } <= core
    # extras: most users never curate or plot
    assert not {"sparqlwrapper", "pyoxigraph", "matplotlib"} & core
    extras = cfg["options.extras_require"]
    assert {"sparqlwrapper", "pyoxigraph"} <= _names(extras["curation"])
    assert {"matplotlib", "arabic-reshaper", "python-bidi"} <= _names(extras["plots"])


def test_a_missing_extra_is_one_line_naming_the_install(monkeypatch, tmp_path, capsys):
    from culture_probe.cli import main

    monkeypatch.setitem(sys.modules, "pyoxigraph", None)  # as if not installed
    dump = tmp_path / "d.ttl"
    dump.write_text("<http://a> <http://b> <http://c> .\n")
    code = main(
        [
            "curate",
            "dlama",
            "--region",
            "arab",
            "--languages",
            "en",
            "--endpoint",
            str(dump),
            "--out",
            str(tmp_path / "c"),
        ]
    )
    assert code == 2
    expected = (
        "culture-probe: error: pyoxigraph is not installed; it comes with culture_probe's 'curation' extra: "
        "pip install 'culture_probe[curation]'"
    )
    assert capsys.readouterr().err.strip() == expected


def test_reports_without_matplotlib_keep_every_number_and_say_how_to_get_figures(
    monkeypatch, tmp_path
):

    from dlama_fixture import TableScorer, spec_table, write_dlama

    from culture_probe.runner import run

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    result = run(
        "dlama_arab_west",
        TableScorer(spec_table()),
        data_dir=str(write_dlama(tmp_path / "d")),
        out=tmp_path / "run",
        progress=False,
    )
    report = (tmp_path / "run" / "report.md").read_text()
    assert (
        "Figures are left out: matplotlib is not installed (pip install 'culture_probe[plots]'"
        in report
    )
    assert "## Headline numbers" in report and not (tmp_path / "run" / "plots").exists()
    assert result.metrics["results"]["overall"]["p1"]["value"] is not None


@pytest.mark.slow
def test_the_wheel_installs_and_runs_in_a_clean_venv(tmp_path):
    """What `pip install culture_probe` gives: a wheel built from the checkout, installed into a new
    venv without the checkout on the path, runs `culture-probe list` and finds its data files
    (schemas, metric modules, vendored templates). The dependencies come from this venv's
    site-packages (PYTHONPATH; no network here), so the package itself is only what the wheel holds.
    """
    import sysconfig
    import zipfile
    from email.parser import Parser
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "--wheel-dir",
            str(tmp_path / "dist"),
            str(repo),
        ],
        check=True,
        cwd=tmp_path,
    )
    wheel = next((tmp_path / "dist").glob("culture_probe-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = Parser().parsestr(
            archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        )
    for data_file in (
        "culture_probe/metrics_modules/cbs/cbs.py",
        "culture_probe/benchmarks/dlama/vendored/dlama_templates.json",
        "culture_probe/py.typed",
    ):
        assert data_file in names
    requires = " ".join(metadata.get_all("Requires-Dist")).lower().replace("-", "_")
    for dependency in (
        "torch",
        "transformers",
        "datasets",
        "evaluate",
        "accelerate",
        "huggingface_hub",
        "pyyaml",
    ):
        assert dependency in requires
    assert 'extra == "curation"' in requires and 'extra == "plots"' in requires

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
        check=True,
    )
    # the dependencies, not the checkout
    env = {**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    where = subprocess.run(
        [str(python), "-c", "import culture_probe; print(culture_probe.__file__)"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(str(venv)), where
    listed = subprocess.run(
        [str(venv / "bin" / "culture-probe"), "list"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "dlama_arab_west" in listed and "maps_en" in listed
    version = subprocess.run(
        [str(venv / "bin" / "culture-probe"), "--version"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert version.strip() == f"culture-probe {culture_probe.__version__}"
    metric = subprocess.run(
        [str(python), "-c", "import culture_probe; print(culture_probe.load_metric('cbs').name)"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert metric.strip() == "cbs"


def test_every_public_name_is_typed_for_a_checker_and_loads_from_the_same_module():
    """`culture_probe.run` and the other front-door names load on first use (`_LAZY`); the
    TYPE_CHECKING imports give a type checker the same names from the same modules, so a user's
    checker sees their signatures.
    """
    import ast

    tree = ast.parse(Path(culture_probe.__file__).read_text(encoding="utf-8"))
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    )
    typed = {alias.name: node.module for node in block.body for alias in node.names}
    assert typed == culture_probe._LAZY
    assert set(typed) | {"__version__"} == set(culture_probe.__all__)


def test_a_moved_module_keeps_its_old_name_as_the_same_module_with_a_warning(tmp_path, monkeypatch):
    """util/moves.py, for modules that move after a release: the old name gives the new module
    itself (an import or a patch of either reaches one module), with a DeprecationWarning naming its
    new home and the removing release.
    """
    import importlib
    import sys

    (tmp_path / "old_place.py").write_text(
        "from culture_probe.util.moves import moved\n"
        'moved(__name__, "culture_probe.util.jsonl", removed_in="9.9.0")\n',
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "old_place", raising=False)
    with pytest.warns(
        DeprecationWarning,
        match=r"moved to culture_probe\.util\.jsonl.*removed in culture_probe 9\.9\.0",
    ):
        old = importlib.import_module("old_place")
    assert old is importlib.import_module("culture_probe.util.jsonl")
    monkeypatch.delitem(sys.modules, "old_place")


def test_the_package_top_level_holds_no_alias_module():
    """No release carried an older module name, so no top-level file only hands a module on."""
    package = Path(culture_probe.__file__).parent
    aliases = [
        p.name
        for p in package.glob("*.py")
        if "sys.modules[__name__]" in p.read_text(encoding="utf-8")
    ]
    assert aliases == []
