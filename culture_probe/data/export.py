"""Publication in the Hub layout: Parquet per config and split, and a README whose YAML `configs:`
declares them.

`datasets` 4+ no longer runs loading scripts, so this folder is how the benchmarks are shared:
`datasets.load_dataset(DIR, "dlama_arab_west")` reads it locally, and the same folder pushed to the
Hub works as `load_dataset("org/culture_probe", "dlama_arab_west")`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from culture_probe.data.card import is_corrected
from culture_probe.data.hub_card import ExportedConfig, render_readme
from culture_probe.data.registry import (
    benchmark_modules,
    list_benchmarks,
    make_builder,
    quiet_progress,
)
from culture_probe.errors import CultureProbeError, MissingDataError, UnknownNameError
from culture_probe.util import outfolder
from culture_probe.util.keyvalue import parse_pairs


@dataclass(frozen=True)
class ExportResult:
    """What `export` wrote, which configs it skipped (data that must be obtained by hand) and why,
    and the files found in the folder that no export wrote, which it kept as they were.
    """

    out_dir: Path
    configs: tuple[ExportedConfig, ...]
    skipped: tuple[tuple[str, str], ...]
    # what the export wrote (paths under out_dir), which is what `push` uploads
    files: tuple[str, ...]
    kept: tuple[str, ...]


def export(
    out_dir: str | os.PathLike,
    *,
    configs: Sequence[str] | None = None,
    data_dirs: Mapping[str, str | os.PathLike] | None = None,
    permission: bool = False,
) -> ExportResult:
    """Write `out_dir/<config>/<split>-00000-of-00001.parquet` and `out_dir/README.md` (YAML +
    dataset card).

    `data_dirs` maps a benchmark to its local data (`{"maps": ".../manual/maps", "dlama":
    "dlama-v1.tar.gz"}`). With `configs=None` every config that loads is written; configs whose data
    is not available (MAPS without its folder, DLAMA without its tarball) are skipped and reported.
    Configs named explicitly must load. `permission`: the user states they may redistribute data
    released on request (the card says so).

    The export is built in a temporary folder beside `out_dir` and swapped in only when complete, so
    a failure (missing data, a full disk) leaves an earlier export as it was; files in `out_dir`
    that no export wrote are kept, and one the new export would overwrite is refused, naming it.
    """
    out = Path(out_dir)
    entries = {e.name: e for e in list_benchmarks()}
    # a config named twice is written once
    names = list(dict.fromkeys(configs)) if configs else list(entries)
    for name in names:
        if name not in entries:
            raise UnknownNameError(
                "benchmark config", name, entries, fix="See `culture-probe list`."
            )
    check_export_folder(out)
    with outfolder.rebuilding(out, EXPORT) as build:
        written, skipped = _build(
            build.folder, names, entries, configs, dict(data_dirs or {}), permission
        )
    return ExportResult(out, tuple(written), tuple(skipped), build.files, build.kept)


def _build(
    build: Path,
    names: list[str],
    entries: Mapping[str, Any],
    configs: Sequence[str] | None,
    data_dirs: Mapping[str, str | os.PathLike],
    permission: bool,
) -> tuple[list[ExportedConfig], list[tuple[str, str]]]:
    """Every config's files and the README in `build`; the configs written, and those skipped with
    the reason.
    """
    written, skipped = [], []
    for name in names:
        benchmark = entries[name].benchmark
        try:
            builder = make_builder(name, data_dir=data_dirs.get(benchmark))
            builder.download_and_prepare()
        except MissingDataError as error:
            if configs:
                raise
            skipped.append((name, str(error)))
            continue
        written.append(_write_config(build, name, entries[name], builder))
    clash = next((c.name for c in written if [w.name for w in written].count(c.name) > 1), None)
    if clash:
        raise CultureProbeError(
            f"Two configs would be published as {clash}; export them into separate folders."
        )
    infos = [module.INFO for module in benchmark_modules().values()]
    (build / "README.md").write_text(
        render_readme(written, infos, permission=permission), encoding="utf-8"
    )
    return written, skipped


def _write_config(out: Path, name: str, entry: Any, builder: Any) -> ExportedConfig:
    """One config's Parquet files (and the files its publication ships beside them) under its
    published name.
    """
    publication = builder.publication()
    folder = out / publication.name
    folder.mkdir(exist_ok=True)
    splits = []
    for split, table in builder.as_dataset().items():
        with quiet_progress():  # the command prints one line per config; a bar per file is noise
            table.to_parquet(folder / f"{split}-00000-of-00001.parquet")
        splits.append((split, table.num_rows))
    for file_name, content in publication.files:
        (folder / file_name).write_bytes(content)
    return ExportedConfig(
        publication.name,
        entry.benchmark,
        publication.languages or entry.languages,
        entry.description,
        tuple(splits),
        is_corrected(name),
        publication.about,
        tuple(file_name for file_name, _ in publication.files),
    )


# lists the files an export wrote: the next one replaces exactly those
EXPORT_MARKER = ".culture_probe_export"
EXPORT = outfolder.Output("export", EXPORT_MARKER)


def check_export_folder(out: Path) -> list[str]:
    """The files an earlier export in `out` wrote (to be replaced), after refusing a folder that
    must not be written: a file, a non-empty folder that is no export, a damaged marker, or one
    named like the package (it would shadow `import culture_probe` when Python runs from beside it).
    """
    if out.name == "culture_probe":
        raise CultureProbeError(
            f"Cannot export into {out}: a folder named culture_probe shadows the package for "
            "Python started beside it (import culture_probe would find the data). Pick another "
            "name, e.g. hub/."
        )
    return outfolder.written_before(outfolder.check(out, EXPORT), EXPORT)


def parse_data_dirs(text: str | None) -> dict[str, str]:
    """`"maps=DIR,dlama=FILE"` -> {"maps": "DIR", "dlama": "FILE"} (the CLI's `--data-dir`)."""
    benchmarks = sorted(module.INFO.name for module in benchmark_modules().values())
    found = parse_pairs(
        text, what="--data-dir", example="maps=manual/maps,dlama=dlama-v1", shape="BENCHMARK=PATH"
    )
    for benchmark in found:
        if benchmark not in benchmarks:
            raise UnknownNameError("benchmark", benchmark, benchmarks)
    return found


def main(args: Any) -> int:
    """`culture-probe export DIR [--configs ...] [--data-dir maps=DIR,...]`: write the folder, print
    its contents.
    """
    data_dirs = parse_data_dirs(getattr(args, "data_dir", None))
    result = export(args.out_dir, configs=args.configs, data_dirs=data_dirs)
    for config in result.configs:
        rows = ", ".join(f"{split} {n}" for split, n in config.splits)
        print(f"wrote   {config.name}: {rows}")
    for name, reason in result.skipped:
        print(f"skipped {name}: {reason}")
    for file in result.kept:
        print(f"kept    {file}: no export wrote it, so it was left as it was")
    print(f"{len(result.configs)} configs in {result.out_dir} (README.md declares them)")
    return 0
