"""Every notebook in notebooks/ runs top to bottom (one test per notebook) in a python3 kernel from this venv."""

from __future__ import annotations

import ast
import configparser
import os
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import nbclient  # test extras (setup.cfg): a missing one fails the suite instead of skipping every notebook
import nbformat
import pytest

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def declared_distributions() -> set[str]:
    """Normalised names in setup.cfg's install_requires and `test` extra (what a test environment installs)."""
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    lines = config["options"]["install_requires"].split() + config["options.extras_require"]["test"].split()
    return {normalised(re.split(r"[<>=!~\[;]", line)[0]) for line in lines if line}


def normalised(distribution: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", distribution).lower()


def imported_modules(path: Path) -> set[str]:
    """Top-level modules a notebook's code cells import (shell and magic lines left out)."""
    modules = set()
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "code":
            code = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
            for node in ast.walk(ast.parse(code)):
                if isinstance(node, ast.Import):
                    modules |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    modules.add(node.module.split(".")[0])
    return modules


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_imports_are_declared_dependencies(path: Path) -> None:
    # a notebook must not rely on a package that only happens to be installed (e.g. pulled in by another one)
    declared, owners = declared_distributions(), packages_distributions()
    third_party = imported_modules(path) - set(sys.stdlib_module_names) - {"culture_probe"}
    undeclared = {module: owners.get(module) for module in third_party
                  if not {normalised(d) for d in owners.get(module, [module])} & declared}
    assert not undeclared, f"{path.name} imports {undeclared}: add them to setup.cfg (install_requires or test extras)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the kernel inherits this environment: the repo on sys.path (also before `pip install -e .`), the session's
    # temporary caches and the mirror set by conftest.py
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()  # raises CellExecutionError naming the failing cell
    errors = [o for cell in notebook.cells for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
