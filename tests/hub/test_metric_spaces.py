"""Pushed metric Spaces are self-contained `evaluate` modules: in a Python that cannot import
culture_probe, `evaluate.load` of each dry-run Space folder runs its docstring example and gets the
library's numbers.
"""

from __future__ import annotations

import ast
import doctest
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from culture_probe.errors import PublishError
from culture_probe.hub.metric_spaces import FORMULAS, formulas_source
from culture_probe.hub.publish import push_metrics
from culture_probe.metrics import MODULES_DIR, list_metrics

# Runs in the clean Python: each metric's docstring example (already pointed at its Space folder),
# then prints {metric: {failures, report, result}} as JSON.
CLEAN_RUN = """
import doctest, json, sys
try:
    import culture_probe
except ImportError:
    pass
else:
    sys.exit("culture_probe is importable here: " + culture_probe.__file__)
out = {}
for name, doc in json.load(open(sys.argv[1], encoding="utf-8")).items():
    test = doctest.DocTestParser().get_doctest(doc, {}, name, None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    report = []
    runner.run(test, out=report.append, clear_globs=False)
    out[name] = {"failures": runner.failures, "report": "".join(report), "result": test.globs.get("result")}
print(json.dumps(out, default=lambda o: o.item() if hasattr(o, "item") else repr(o)))
"""


def example_result(doc: str, name: str) -> Any:
    """`result` after the docstring example of `doc` ran here (with the library), as JSON would give
    it.
    """
    test = doctest.DocTestParser().get_doctest(doc, {}, name, None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test, out=lambda _: None, clear_globs=False)
    assert runner.failures == 0 and "result" in test.globs, (
        f"{name}: the library's own example fails"
    )
    return json.loads(
        json.dumps(
            test.globs["result"], default=lambda o: o.item() if hasattr(o, "item") else repr(o)
        )
    )


def module_doc(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


@pytest.fixture(scope="module")
def spaces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("spaces")
    push_metrics("org", dry_run_dir=out)
    return out


def test_every_space_runs_without_culture_probe_and_gives_the_librarys_numbers(
    spaces: Path, tmp_path: Path
) -> None:
    names = list_metrics()
    docs = {}
    for name in names:
        doc = module_doc(spaces / name / f"{name}.py")
        load = f'evaluate.load("org/{name}")'
        assert doc.count(load) == 1, f"{name}: the Space's example must load the Space itself"
        docs[name] = doc.replace(load, f"evaluate.load({str(spaces / name)!r})")
    (tmp_path / "examples.json").write_text(json.dumps(docs), encoding="utf-8")
    # -S: no .pth, so no editable install
    clean = {**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    done = subprocess.run(
        [sys.executable, "-S", "-c", CLEAN_RUN, str(tmp_path / "examples.json")],
        cwd=tmp_path,
        env=clean,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    spaced = json.loads(done.stdout.splitlines()[-1])
    for name in names:
        assert spaced[name]["failures"] == 0, f"{name}:\n{spaced[name]['report']}"
        library = example_result(module_doc(MODULES_DIR / name / f"{name}.py"), name)
        assert json.dumps(spaced[name]["result"], sort_keys=True) == json.dumps(
            library, sort_keys=True
        ), name


def test_a_space_asks_an_index_only_for_what_its_files_import(spaces: Path) -> None:
    from importlib.metadata import requires

    declared = {line.split(";")[0] for line in requires("culture_probe") or [] if ";" not in line}
    for name in list_metrics():
        folder = spaces / name
        assert sorted(p.name for p in folder.iterdir()) == sorted(
            ["README.md", "app.py", "requirements.txt", f"{name}.py", f"{FORMULAS}.py"]
        )
        wanted = (folder / "requirements.txt").read_text(encoding="utf-8").split()
        # culture_probe's own ranges, nothing else
        assert {"evaluate>=0.4"} <= set(wanted) <= declared, name
        assert not any("culture_probe" in line for line in wanted)
        for file in (f"{name}.py", f"{FORMULAS}.py"):
            tree = ast.parse((folder / file).read_text(encoding="utf-8"))
            modules = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
            modules += [
                a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
            ]
            assert not [m for m in modules if m.split(".")[0] == "culture_probe"], f"{name}/{file}"
        assert f"from .{FORMULAS} import " in (folder / f"{name}.py").read_text(encoding="utf-8")


def test_formulas_refuse_what_one_module_cannot_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import culture_probe.hub.metric_spaces as spaces

    fake = tmp_path / "culture_probe"
    (fake / "one").mkdir(parents=True)
    (fake / "one" / "a.py").write_text(
        "def helper():\n    return 1\n\n\ndef f():\n    return helper()\n"
    )
    (fake / "one" / "b.py").write_text(
        "from culture_probe.one.a import f\n\n\ndef helper():\n    return 2\n\n\ndef g():\n    return f() + helper()\n"
    )
    (fake / "one" / "c.py").write_text(
        "def h():\n    from culture_probe.one.a import f\n\n    return f()\n"
    )
    monkeypatch.setattr(spaces, "LIBRARY", fake)
    spaces._library_module.cache_clear()
    try:
        with pytest.raises(PublishError, match="needs two things named 'helper'"):
            formulas_source([("culture_probe.one.b", "g")], used_by="m.py")
        with pytest.raises(
            PublishError, match=r"culture_probe.one.c.h, line 2: a Space has no culture_probe"
        ):
            formulas_source([("culture_probe.one.c", "h")], used_by="m.py")
        one = formulas_source([("culture_probe.one.a", "f")], used_by="m.py").text
    finally:
        spaces._library_module.cache_clear()
    namespace: dict[str, Any] = {}
    # what the Space's sibling module does when imported
    exec(compile(one, "formulas", "exec"), namespace)
    assert namespace["f"]() == 1
