"""Find benchmark configs by name and load them: `load_benchmark("dlama_arab_west")`.

A benchmark's data module (named by its declaration, `culture_probe.benchmarks`) defines `BUILDER`
(a `datasets.GeneratorBasedBuilder` subclass whose `BUILDER_CONFIGS` carry the config names) and
`INFO` (a `BenchmarkInfo`). Data modules never import torch, so this stays fast.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import typing
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import datasets

from culture_probe.benchmarks import Declaration, declarations
from culture_probe.data.card import CORRECTED_SUFFIX, BenchmarkInfo
from culture_probe.data.sources import mirror_root
from culture_probe.errors import CultureProbeError, UnknownNameError
from culture_probe.util.fromtext import from_text
from culture_probe.util.typecheck import checked
from culture_probe.version import __version__


@dataclass(frozen=True)
class BenchmarkEntry:
    """One loadable config, as `list_benchmarks()` shows it."""

    name: str
    benchmark: str
    languages: tuple[str, ...]
    rows: int | None
    description: str


@cache
def benchmark_modules() -> dict[str, Any]:
    """{benchmark name: its data module} for every benchmark installed
    (`culture_probe.benchmarks`).
    """
    found = {}
    for name, declared in declarations().items():
        module = declared.part("data")
        if not (
            hasattr(module, "BUILDER") and isinstance(getattr(module, "INFO", None), BenchmarkInfo)
        ):
            raise CultureProbeError(
                f"Benchmark {name!r}: its data module {declared.module_name('data')} defines no BUILDER and INFO "
                "(a datasets builder and its BenchmarkInfo card; docs/adding-a-benchmark.md)."
            )
        found[name] = module
    return found


@cache
def _benchmark_names() -> dict[str, str]:
    """{data module name: benchmark name}."""
    return {module.__name__: name for name, module in benchmark_modules().items()}


@cache
def _configs() -> dict[str, tuple[Any, Any]]:
    """{config name: (module, BuilderConfig)} over every benchmark."""
    table = {}
    for module in benchmark_modules().values():
        for config in module.BUILDER.BUILDER_CONFIGS:
            table[config.name] = (module, config)
    return table


@dataclass(frozen=True)
class Benchmark:
    """One benchmark config, resolved once (`resolve`) and handed down, so that no stage looks its
    name up again: its data module (`BUILDER`, `INFO`), its `datasets` builder config, and whether
    it is a corrected variant.
    """

    name: str  # the config name, e.g. dlama_arab_west_corrected
    module: Any = field(repr=False)  # the data module, culture_probe/data/<benchmark>.py
    config: Any = field(repr=False)  # its BuilderConfig of this name
    # the corrected variant (the library's fixes to known data errors) of `base`
    corrected: bool = False

    @property
    def benchmark(self) -> str:
        """The benchmark's name (dlama): its folder's declaration names its protocol and report
        too.
        """
        return _benchmark_names()[self.module.__name__]

    @property
    def declaration(self) -> Declaration:
        """The benchmark's declaration: where its protocol, report, planted model and curation
        are.
        """
        return declarations()[self.benchmark]

    @property
    def info(self) -> BenchmarkInfo:
        """The benchmark's card."""
        return self.module.INFO

    @property
    def base(self) -> str:
        """The faithful config's name (the name itself unless it is a corrected variant)."""
        return self.name.removesuffix(CORRECTED_SUFFIX) if self.corrected else self.name

    @property
    def languages(self) -> tuple[str, ...]:
        """The languages the config holds (empty: the benchmark does not say)."""
        return tuple(getattr(self.config, "languages", ()) or ())

    @property
    def features(self) -> Any:
        """The config's `datasets` features: its columns and their types."""
        return self.module.BUILDER(config_name=self.config.name).info.features


def resolve(name: str | Benchmark, *, corrected: bool = False) -> Benchmark:
    """The `Benchmark` of config `name` (a `Benchmark` is returned as it is); `corrected=True` picks
    the `<name>_corrected` twin.
    """
    if isinstance(name, Benchmark):
        return name if not corrected or name.corrected else resolve(name.name, corrected=True)
    table = _configs()
    if name not in table:  # checked first, so the error names what the user typed
        raise UnknownNameError(
            "benchmark config",
            name,
            table,
            fix="See culture_probe.list_benchmarks() or `culture-probe list`.",
        )
    if corrected and not name.endswith(CORRECTED_SUFFIX):
        if name + CORRECTED_SUFFIX not in table:
            raise UnknownNameError(
                "corrected config",
                name + CORRECTED_SUFFIX,
                [n for n in table if n.endswith(CORRECTED_SUFFIX)],
                fix=f"{name!r} has no known data errors to correct; load it with corrected=False.",
            )
        name += CORRECTED_SUFFIX
    module, config = table[name]
    return Benchmark(name, module, config, corrected=name.endswith(CORRECTED_SUFFIX))


@checked()
def load_benchmark(
    name: str | Benchmark,
    *,
    data_dir: str | os.PathLike | None = None,
    corrected: bool = False,
    **kwargs: Any,
) -> datasets.DatasetDict:
    """Load one benchmark config as a `datasets.DatasetDict` (split `test`; MAPS also `few_shot`).

    Sources are fetched once (mirror rule in `culture_probe.data.sources`) and prepared into the
    `datasets` cache, so a second load reads Arrow files and does not parse the sources again. Extra
    keyword arguments go to the builder (`cache_dir`, and benchmark-specific options such as DLAMA's
    `data_files` or `languages`).
    """
    builder = make_builder(name, data_dir=data_dir, corrected=corrected, **kwargs)
    builder.download_and_prepare()
    return builder.as_dataset()


BUILDER_OPTIONS = ("cache_dir", "data_files", "writer_batch_size")
# the builder config's fields that the registry sets itself: not options of a load
FIXED_FIELDS = ("name", "version", "description", "data_dir", "data_files", "rows", "variant")


def make_builder(
    name: str | Benchmark,
    *,
    data_dir: str | os.PathLike | None = None,
    corrected: bool = False,
    **kwargs: Any,
) -> datasets.DatasetBuilder:
    """The `datasets` builder of one config, with a cache key that changes with the code and the
    local data.

    Local paths are made absolute and fingerprinted (names, sizes, mtimes), so the cache is reused
    for the same files from any working directory and rebuilt when the files or the builder code
    change.
    """
    benchmark = resolve(name, corrected=corrected)
    module, config = benchmark.module, benchmark.config
    _check_options(config, kwargs)
    if data_dir is not None:
        data_dir = os.path.abspath(os.fspath(data_dir))
    if isinstance(kwargs.get("data_files"), (str, os.PathLike)):
        kwargs["data_files"] = os.path.abspath(os.fspath(kwargs["data_files"]))
    cache_hash = _cache_hash(module, data_dir, kwargs.get("data_files"))
    return module.BUILDER(config_name=config.name, data_dir=data_dir, hash=cache_hash, **kwargs)


def _check_options(config: Any, kwargs: dict[str, Any]) -> None:
    """Unknown keyword arguments fail here with the valid options, not deep inside `datasets`."""
    valid = [f.name for f in dataclasses.fields(config) if f.name not in FIXED_FIELDS] + list(
        BUILDER_OPTIONS
    )
    for key in kwargs:
        if key not in valid:
            raise UnknownNameError(
                f"option of {config.name}",
                key,
                valid,
                fix="Pass corrected=True for the corrected variant.",
            )


def _cache_hash(module: Any, data_dir: str | None, data_files: Any) -> str:
    """Hash of the builder code, the library version, the mirror its downloads are read from (a
    mirror without a release file falls back to another source) and the local data the builder
    reads.
    """
    digest = hashlib.sha256(__version__.encode())
    digest.update(f"mirror={mirror_root()}".encode())
    here, folder = Path(__file__).parent, Path(module.__file__).parent
    for source in (
        Path(module.__file__),
        *sorted(folder.glob("layout*.py")),
        here / "_builder.py",
        here / "sources.py",
        *sorted(folder.glob("vendored/*")),
    ):
        digest.update(source.read_bytes())
    paths = [data_dir] if data_dir else []
    if isinstance(data_files, str):
        paths.append(data_files)
    elif data_files is not None:
        digest.update(repr(data_files).encode())
    for path in paths:
        digest.update(_fingerprint(Path(path)).encode())
    return digest.hexdigest()[:16]


def _fingerprint(path: Path) -> str:
    """Names, sizes and modification times of a file or of every file under a folder (no content
    read).
    """
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    parts = [str(path)]
    for file in files:
        stat = file.stat() if file.exists() else None
        parts.append(f"{file}:{stat.st_size}:{stat.st_mtime_ns}" if stat else f"{file}:missing")
    return "\n".join(parts)


@contextmanager
def quiet_progress() -> Iterator[None]:
    """`datasets` progress bars off for a while (and back on only if they were on): its bar per
    split and file is noise where the command prints its own progress (a run, a dry run, an export).
    """
    from datasets.utils import (
        are_progress_bars_disabled,
        disable_progress_bars,
        enable_progress_bars,
    )

    was_disabled = are_progress_bars_disabled()
    disable_progress_bars()
    try:
        yield
    finally:
        if not was_disabled:
            enable_progress_bars()


def list_benchmarks() -> list[BenchmarkEntry]:
    """Every config: name, benchmark, language(s), expected rows, one-line description."""
    entries = []
    for name, (module, config) in sorted(_configs().items()):
        entries.append(
            BenchmarkEntry(
                name=name,
                benchmark=module.INFO.name,
                languages=tuple(getattr(config, "languages", ()) or ()),
                rows=getattr(config, "rows", None),
                description=config.description or module.INFO.title,
            )
        )
    return entries


def groups() -> dict[str, tuple[str, ...]]:
    """{benchmark name: the configs of its paper's experiments}: what `culture-probe run
    <benchmark>` runs.
    """
    return {
        module.INFO.name: module.INFO.suite
        for module in benchmark_modules().values()
        if module.INFO.suite
    }


def expand(names: list[str] | tuple[str, ...]) -> list[str]:
    """Config and group names -> the configs they name, each once, in the order given; an unknown
    name is an error naming the closest configs and groups (the whole list, some ninety names, is
    `culture-probe list`).
    """
    table, named = _configs(), groups()
    out: list[str] = []
    for name in names:
        if name in named:
            out += named[name]
        elif name in table:
            out.append(name)
        else:
            raise UnknownNameError(
                "benchmark config or group",
                name,
                [*named, *table],
                fix="See `culture-probe list` (groups first, then configs).",
                list_valid=False,
            )
    return list(dict.fromkeys(out))


# ---------------------------------------------------------------- a run's data options
# (`--data-option KEY=VALUE`)


def data_option_names(benchmark: Benchmark) -> tuple[str, ...]:
    """The builder options a run may set for `benchmark` (`load_benchmark`'s keywords: DLAMA's
    `pair`, `verify_counts`, `languages`, ...): its config's fields but those the registry sets
    itself.
    """
    return tuple(f.name for f in dataclasses.fields(benchmark.config) if f.name not in FIXED_FIELDS)


def data_options_for(benchmark: Benchmark, given: Mapping[str, Any]) -> dict[str, Any]:
    """The data options of a run (or suite) that reach `benchmark`, as `load_benchmark` takes them:
    a plain key its builder has, or `CONFIG.key` / `BENCHMARK.key` naming it (as `--option` routes
    protocol options). Text values (the command line's) are read by the field's type: `false`,
    `ar,en` for a tuple, `none`.
    """
    names, hints = data_option_names(benchmark), typing.get_type_hints(type(benchmark.config))
    chosen: dict[str, Any] = {}
    for spelled, value in given.items():
        prefix, _, key = spelled.rpartition(".")
        if prefix and prefix not in (benchmark.name, benchmark.base, benchmark.benchmark):
            continue
        if key not in names:
            if prefix:  # a key that names this config must be one of its options
                raise UnknownNameError(f"data option of {benchmark.name}", key, names)
            continue
        chosen[key] = (
            from_text(value, hints[key], name=spelled, flag="--data-option")
            if isinstance(value, str)
            else value
        )
    return chosen


def check_data_options(configs: Sequence[Benchmark], given: Mapping[str, Any]) -> None:
    """Every data option reaches a config of the run, its value read, or the error names the options
    those configs take: a mistyped key (`verify_count`) is never dropped silently.
    """
    for spelled, value in given.items():
        prefix, _, key = spelled.rpartition(".")
        named = [b for b in configs if not prefix or prefix in (b.name, b.base, b.benchmark)]
        if not named:
            raise UnknownNameError(
                "data option prefix",
                prefix,
                [*dict.fromkeys(b.benchmark for b in configs), *(b.name for b in configs)],
                fix=f"Before the dot of {spelled}, name a benchmark or config of this run, or drop the prefix.",
            )
        takers = [b for b in named if key in data_option_names(b)]
        if not takers:
            raise UnknownNameError(
                "data option",
                key,
                {name for b in named for name in data_option_names(b)},
                fix="Data options are load_benchmark's keywords for these configs.",
            )
        for benchmark in takers:
            data_options_for(benchmark, {spelled: value})
