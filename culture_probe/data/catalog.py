"""What `culture-probe list` shows, read from `catalog.json` beside this module, so that listing imports neither
`datasets` nor a benchmark's module (about 0.2 s instead of 2 s).

The file is derived data, never a second source of truth: it carries a digest of the modules that define the
configs (every benchmark's module, the private modules beside them and the card). When they changed since it was
written, or a benchmark of the user's own extends the package path (docs/adding-a-benchmark.md), the table is read
live from the builders instead, so the list is never stale. `python -m culture_probe.data.catalog` rewrites the
file; tests/data/test_catalog.py checks it equals the live table.
"""

from __future__ import annotations

import hashlib
import json
import pkgutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

import culture_probe.data as package

HERE = Path(__file__).parent
CATALOG = HERE / "catalog.json"


def _defining_files(modules: list[str]) -> list[Path]:
    """The files the config table is read from: the benchmarks' modules, the private ones and the card."""
    return sorted({*(HERE / f"{m}.py" for m in modules), *HERE.glob("_*.py"), HERE / "card.py"})


def digest(modules: list[str]) -> str:
    """A digest of the files that define the configs of `modules` (names and contents)."""
    hashed = hashlib.sha256()
    for path in _defining_files(modules):
        hashed.update(
            f"{path.name}\0".encode() + (path.read_bytes() if path.exists() else b"missing")
        )
    return hashed.hexdigest()[:16]


def live() -> dict[str, Any]:
    """The table as the builders give it (imports `datasets` and every benchmark module)."""
    from culture_probe.data.registry import benchmark_modules, groups, list_benchmarks

    benchmarks = sorted(benchmark_modules())
    return {
        "digest": digest(benchmarks),
        "benchmarks": benchmarks,
        "modules": sorted(
            m.name for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_")
        ),
        "groups": {name: list(configs) for name, configs in groups().items()},
        "configs": [{**asdict(e), "languages": list(e.languages)} for e in list_benchmarks()],
    }


def table() -> dict[str, Any]:
    """The stored table when it is current for the modules present, else the live one."""
    try:
        stored = json.loads(CATALOG.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return live()
    present = sorted(
        m.name for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_")
    )
    if present != stored.get("modules") or digest(stored.get("benchmarks", [])) != stored.get(
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
