"""`culture-probe list` reads the committed catalog, which must equal what the builders say; it
starts without `datasets` or torch, and falls back to the builders when the catalog is stale or a
benchmark of the user's own is on the package path.
"""

from __future__ import annotations

import json
import subprocess
import sys

from culture_probe.data import catalog


def test_the_committed_catalog_equals_the_builders():
    stored = json.loads(catalog.CATALOG.read_text(encoding="utf-8"))
    assert stored == catalog.live(), (
        "catalog.json is stale: run `python -m culture_probe.data.catalog`"
    )
    assert catalog.table() == stored  # current, so it is what `list` shows


def test_list_imports_neither_datasets_nor_torch():
    code = (
        "import sys, contextlib, io\n"
        "from culture_probe.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    assert main(['list']) == 0\n"
        "assert 'dlama_arab_west' in out.getvalue()\n"
        "print(sorted({'datasets', 'torch', 'pandas', 'pyarrow', 'numpy'} & set(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_a_stale_catalog_is_read_live(tmp_path, monkeypatch):
    stored = json.loads(catalog.CATALOG.read_text(encoding="utf-8"))
    stale = tmp_path / "catalog.json"
    stale.write_text(json.dumps({**stored, "digest": "0" * 16, "configs": []}), encoding="utf-8")
    monkeypatch.setattr(catalog, "CATALOG", stale)
    # the builders', not the stale file's empty list
    assert catalog.table()["configs"] == stored["configs"]
    stale.write_text("{not json", encoding="utf-8")
    assert catalog.table()["configs"] == stored["configs"]
