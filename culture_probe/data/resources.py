"""Side data that a protocol declares (templates, entity pools, few-shot examples, literals), loaded
from the same place as the rows (`data_dir`, the mirror, or the pinned URL) and fingerprinted.

A task names what it needs as `Need`s; each benchmark's data module lists what it can provide in
`RESOURCES` (a `SplitResource` or `FileResource` by name). `load_resources` turns the needs into
values for the protocol and a provenance record per resource (its sources and sha256) for the run's
config.json.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from culture_probe.data.card import FileResource, SplitResource
from culture_probe.data.registry import benchmark_modules, load_benchmark
from culture_probe.data.sources import sha256_of
from culture_probe.errors import UnknownNameError


@dataclass(frozen=True)
class Need:
    """Resource `name` of benchmark `benchmark` (a data module), faithful or corrected; `params` are
    the loader's keyword arguments (e.g. a user's template file), as (name, value) pairs so that a
    need stays hashable.
    """

    benchmark: str
    name: str
    corrected: bool = False
    params: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class Loaded:
    """A loaded resource: the value the protocol reads, and where it came from."""

    value: Any
    sources: tuple[str, ...]
    sha256: str

    def provenance(self, need: Need) -> dict[str, Any]:
        """What config.json records of it."""
        return {
            "benchmark": need.benchmark,
            "name": need.name,
            "corrected": need.corrected,
            "params": {k: v for k, v in need.params},
            "sources": list(self.sources),
            "sha256": self.sha256,
        }


def load_resources(
    needs: Mapping[str, Need], *, data_dir: str | os.PathLike | None = None
) -> dict[str, Loaded]:
    """{resource key: Loaded} for every need, from `data_dir` (or the mirror, or the pinned URL)."""
    return {key: load(need, data_dir=data_dir) for key, need in needs.items()}


def load(need: Need, *, data_dir: str | os.PathLike | None = None) -> Loaded:
    """One resource; an unknown benchmark or resource name lists the valid ones."""
    modules = benchmark_modules()
    if need.benchmark not in modules:
        raise UnknownNameError("benchmark with resources", need.benchmark, modules)
    provided: Mapping[str, Any] = getattr(modules[need.benchmark], "RESOURCES", {})
    if need.name not in provided:
        raise UnknownNameError(f"resource of {need.benchmark}", need.name, provided)
    resource = provided[need.name]
    root = os.fspath(data_dir) if data_dir is not None else None
    params = dict(need.params)
    if isinstance(resource, SplitResource):
        split = load_benchmark(resource.config, data_dir=root, corrected=need.corrected)[
            resource.split
        ]
        value, files = [dict(row) for row in split], resource.files(root)
    elif isinstance(resource, FileResource):
        value, files = resource.read(data_dir=root, corrected=need.corrected, **params)
    else:
        raise TypeError(
            f"{need.benchmark}.RESOURCES[{need.name!r}] is neither a SplitResource nor a FileResource."
        )
    return Loaded(value, tuple(str(f) for f in files), files_digest(files))


# files above 1 GiB (a 7 GB fastText model) are fingerprinted by their size, start and end
LARGE = 1 << 30
EDGE = 64 << 20


def files_digest(files: list[Path]) -> str:
    """One sha256 over the files' own digests, in order (`file_digest`)."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(file_digest(Path(path)).encode())
    return digest.hexdigest()


def file_digest(path: Path) -> str:
    """The file's sha256; above `LARGE` bytes, the sha256 of its size, first and last 64 MiB (marked
    "partial:"), so that a multi-gigabyte model is fingerprinted in a second, not minutes.
    """
    size = path.stat().st_size
    if size <= LARGE:
        return sha256_of(path)
    digest = hashlib.sha256(str(size).encode())
    with open(path, "rb") as handle:
        digest.update(handle.read(EDGE))
        handle.seek(size - EDGE)
        digest.update(handle.read(EDGE))
    return "partial:" + digest.hexdigest()
