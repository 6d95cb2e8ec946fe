"""What `culture-probe list` shows, read from `catalog.json` beside this module, so that listing
imports neither `datasets` nor a benchmark's module (about 0.2 s instead of 2 s).

The file is derived data, never a second source of truth: it carries a digest of the modules that
define the configs (every benchmark's data module and source layout, the data layer's private
modules and the card). When they changed since it was written, or another benchmark is installed
(docs/adding-a-benchmark.md), the table is read live from the builders instead, so the list is never
stale. `python -m culture_probe.data.catalog` rewrites the file; tests/data/test_catalog.py checks
it equals the live table.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from culture_probe.benchmarks import declarations

HERE = Path(__file__).parent
CATALOG = HERE / "catalog.json"


def _data_modules() -> dict[str, str]:
    """{benchmark: its data module's name}, from the declarations alone (no data module
    imported).
    """
    return {name: str(d.module_name("data")) for name, d in declarations().items()}


def _defining_files(modules: list[str]) -> list[Path]:
    """The files the config table is read from: each benchmark's data module and source layout, the
    private modules of the data layer and the card.
    """
    found = {*HERE.glob("_*.py"), HERE / "card.py"}
    for module in modules:
        spec = importlib.util.find_spec(module)
        origin = Path(spec.origin) if spec and spec.origin else HERE / f"{module}.py"
        found |= {origin, *origin.parent.glob("layout*.py")}
    return sorted(found)


def digest(modules: list[str]) -> str:
    """A digest of the files that define the configs of data modules `modules` (names and
    contents).
    """
    hashed = hashlib.sha256()
    for path in _defining_files(modules):
        hashed.update(
            f"{path.name}\0".encode() + (path.read_bytes() if path.exists() else b"missing")
        )
    return hashed.hexdigest()[:16]


def live() -> dict[str, Any]:
    """The table as the builders give it (imports `datasets` and every benchmark module)."""
    from culture_probe.data.registry import groups, list_benchmarks

    modules = _data_modules()
    return {
        "digest": digest(sorted(modules.values())),
        "benchmarks": modules,
        "groups": {name: list(configs) for name, configs in groups().items()},
        "configs": [{**asdict(e), "languages": list(e.languages)} for e in list_benchmarks()],
    }


def table() -> dict[str, Any]:
    """The stored table when it is current for the benchmarks installed, else the live one."""
    try:
        stored = json.loads(CATALOG.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return live()
    modules = _data_modules()
    if modules != stored.get("benchmarks") or digest(sorted(modules.values())) != stored.get(
        "digest"
    ):
        return live()
    return stored


def write() -> None:
    """Rewrite catalog.json from the builders."""
    CATALOG.write_text(json.dumps(live(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    write()
    print(f"wrote {CATALOG}")
