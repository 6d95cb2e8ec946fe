"""The floors of the package, held by a test over every import (those inside functions too): a
module imports only its own floor and those below, so the pipeline data -> engine -> metrics ->
tasks -> report runs one way, with the run layer and the interfaces above; the engine knows no
benchmark, no generic module imports a benchmark's folder and no benchmark another's; no module
imports another that imports it back. docs/architecture.md draws the same floors.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "culture_probe"

# Bottom first. A module belongs to the floor of its subpackage (culture_probe/<name>/) or, at the
# top level, of its own name; `culture_probe` itself (the lazy front door) hands names on and
# belongs to no floor. A benchmark's folder (culture_probe/benchmarks/<bench>/) is not a floor: each
# file in it takes the floor of its role (ROLES), and the registry (`culture_probe.benchmarks`) and
# each folder's declaration (its __init__.py) are on the ground floor.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("errors", "util", "sharing", "schemas", "record", "version", "benchmarks"),
    ("data", "curation"),
    ("engine",),
    ("metrics",),
    ("tasks", "settings", "metrics_modules"),
    ("loading", "rundir", "throughput"),
    ("models", "provenance", "shards"),
    ("report",),
    ("runner", "hub"),
    ("board", "cli", "demo", "__main__"),
)
FLOOR = {name: level for level, names in enumerate(FLOORS) for name in names}
# the role of each file of a benchmark folder, by its name: the floor it stands on
ROLES = {
    "data": "data",
    "layout": "data",
    "curation": "curation",
    "metrics": "metrics",
    "chance": "metrics",
    "task": "tasks",
    "deviations": "tasks",
    "planted": "models",
    "report": "report",
}
# What the engine may read of the data layer: where files are cached. No benchmark module, no
# protocol.
ENGINE_READS = {"culture_probe.data.sources"}
# Modules outside the benchmark folders that may name a benchmark's module: evaluate's modules (each
# is one benchmark's formula, published as its own Space) and the demo (one benchmark's job, end to
# end).
NAMES_A_BENCHMARK = ("culture_probe.metrics_modules.", "culture_probe.demo")


def modules() -> dict[str, Path]:
    return {
        ".".join(("culture_probe", *p.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(
            ".__init__"
        ): p
        for p in PACKAGE.rglob("*.py")
    }


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that `path` imports anywhere in it (a name imported from a package
    counts as that package's module of that name when there is one).
    """
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            head = ".".join(base[: len(base) - node.level + 1]) if node.level else ""
            module = ".".join(part for part in (head, node.module or "") if part)
            targets = [
                f"{module}.{a.name}" if f"{module}.{a.name}" in known else module
                for a in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target.startswith("culture_probe.") and target != name:
                found.add(target)
    return found


def floor_of(module: str) -> int | None:
    parts = module.split(".")
    if parts[1:2] == ["benchmarks"] and len(parts) > 3:
        return FLOOR[ROLES[parts[3]]]
    return FLOOR[parts[1]] if len(parts) > 1 else None


def benchmark_of(module: str) -> str | None:
    """The benchmark whose folder holds `module` (None for the registry and every module outside the
    folders).
    """
    parts = module.split(".")
    return parts[2] if parts[1:2] == ["benchmarks"] and len(parts) > 2 else None


KNOWN = modules()
GRAPH = {name: imports(name, path, KNOWN) for name, path in KNOWN.items()}


def test_every_module_has_a_floor():
    assert sorted({m.split(".")[1] for m in GRAPH if "." in m} - set(FLOOR)) == []
    roles = {m.split(".")[3] for m in GRAPH if benchmark_of(m) and len(m.split(".")) > 3}
    assert sorted(roles - set(ROLES)) == []


def test_no_generic_module_names_a_benchmark():
    """The engine, the protocols' base, the metrics' core, the report's core, the runner, the board,
    the curation framework and the trainer find a benchmark's parts through its declaration, never
    by importing them.
    """
    naming = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        for target in targets
        if benchmark_of(module) is None
        and benchmark_of(target) is not None
        and not module.startswith(NAMES_A_BENCHMARK)
    )
    assert naming == []


def test_no_benchmark_imports_another():
    crossing = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        for target in targets
        if benchmark_of(module)
        and benchmark_of(target)
        and benchmark_of(module) != benchmark_of(target)
    )
    assert crossing == []


def test_no_import_runs_up_a_floor():
    upward = [
        f"{module} (floor {floor_of(module)}) imports {target} (floor {floor_of(target)})"
        for module, targets in GRAPH.items()
        for target in targets
        if floor_of(module) is not None
        and floor_of(target) is not None
        and floor_of(target) > floor_of(module)
    ]
    assert upward == []


def test_the_engine_knows_no_benchmark():
    reached = {t for m, ts in GRAPH.items() if m.startswith("culture_probe.engine") for t in ts}
    outside = {t for t in reached if floor_of(t) != FLOOR["engine"] and floor_of(t) != 0}
    assert outside <= ENGINE_READS


def test_no_module_imports_one_that_imports_it_back():
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in GRAPH.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in GRAPH:
        if node not in index:
            visit(node)
    assert circles == []
