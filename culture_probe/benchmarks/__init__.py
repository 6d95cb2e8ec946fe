"""The benchmarks, one folder each, and the one registry that finds them.

A benchmark is a package (`culture_probe/benchmarks/dlama/`, or a package of your own) whose
`__init__.py` holds one `Declaration` naming its parts: the data module (`BUILDER`, `INFO`), the
protocol (`TASK`), and where it has them its report section, planted model and curation. Each is
registered under the entry-point group `culture_probe.benchmarks` (setup.cfg for the five built in;
your package's metadata for yours), the ecosystem's plugin convention, so a benchmark installed from
another package is found exactly as the built-in ones are (docs/adding-a-benchmark.md). Reading a
declaration imports nothing of the benchmark but its `__init__.py`, so listing stays fast; each part
is imported when a stage first asks for it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points
from types import ModuleType
from typing import Literal

from culture_probe.errors import CultureProbeError, UnknownNameError

GROUP = "culture_probe.benchmarks"

Role = Literal["data", "task", "report", "planted", "curation"]


@dataclass(frozen=True)
class Declaration:
    """One benchmark's parts, by module name relative to its package (`package`, usually
    `__name__`).

    `planted_kind` is the kind of model its planted model trains ("masked" or "causal"), known
    without importing the planted module; `None` where the benchmark has no planted model.
    """

    package: str
    data: str = "data"
    task: str = "task"
    report: str | None = None
    planted: str | None = None
    planted_kind: Literal["masked", "causal"] | None = None
    curation: str | None = None

    def __post_init__(self) -> None:
        if (self.planted is None) != (self.planted_kind is None):
            raise CultureProbeError(
                f"Benchmark {self.package!r} declares planted={self.planted!r} with planted_kind="
                f"{self.planted_kind!r}: give both (the module and the kind of model it trains) or neither."
            )

    def module_name(self, role: Role) -> str | None:
        """The full module name of part `role`, or None where the benchmark has none."""
        part = getattr(self, role)
        return None if part is None else f"{self.package}.{part}"

    def part(self, role: Role) -> ModuleType | None:
        """The module of part `role`, imported now, or None where the benchmark declares none."""
        name = self.module_name(role)
        return None if name is None else importlib.import_module(name)


@cache
def declarations() -> dict[str, Declaration]:
    """{benchmark name: its declaration} for every benchmark installed, sorted by name."""
    found: dict[str, Declaration] = {}
    for point in entry_points(group=GROUP):
        if point.name in found:
            continue  # the same benchmark seen twice on the path (an editable install beside a wheel)
        declared = point.load()
        if not isinstance(declared, Declaration):
            raise CultureProbeError(
                f"Entry point {point.name} = {point.value} of group {GROUP!r} is a {type(declared).__name__}, "
                "not a culture_probe.benchmarks.Declaration (docs/adding-a-benchmark.md)."
            )
        found[point.name] = declared
    if not found:
        raise CultureProbeError(
            f"No benchmark is registered under the entry-point group {GROUP!r}: culture_probe is not installed "
            "(its metadata declares the five built in). Install it: pip install -e . (or make install)."
        )
    return dict(sorted(found.items()))


def declaration(name: str) -> Declaration:
    """The declaration of benchmark `name`; an unknown name lists the installed ones."""
    table = declarations()
    if name not in table:
        raise UnknownNameError("benchmark", name, table, fix="See `culture-probe list`.")
    return table[name]


def with_part(role: Role) -> dict[str, Declaration]:
    """The benchmarks that declare part `role` (e.g. "curation"), by name."""
    return {name: d for name, d in declarations().items() if getattr(d, role) is not None}
