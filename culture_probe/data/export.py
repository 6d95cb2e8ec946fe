"""Publication in the Hub layout: Parquet per config and split, and a README whose YAML `configs:` declares them.

`datasets` 4+ no longer runs loading scripts, so this folder is how the benchmarks are shared:
`datasets.load_dataset(DIR, "dlama_arab_west")` reads it locally, and the same folder pushed to the Hub works as
`load_dataset("org/culture_probe", "dlama_arab_west")`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from culture_probe.data.card import BenchmarkInfo
from culture_probe.data.registry import benchmark_modules, list_benchmarks, load_benchmark
from culture_probe.errors import CultureProbeError, MissingDataError, UnknownNameError


class UsageError(CultureProbeError, ValueError):
    """A command-line value in the wrong form."""


@dataclass(frozen=True)
class ExportedConfig:
    """One config written to the folder: its benchmark, languages and rows per split."""

    name: str
    benchmark: str
    languages: tuple[str, ...]
    description: str
    splits: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class ExportResult:
    """What `export` wrote, and which configs it skipped (data that must be obtained by hand) and why."""

    out_dir: Path
    configs: tuple[ExportedConfig, ...]
    skipped: tuple[tuple[str, str], ...]


def export(
    out_dir: str | os.PathLike,
    *,
    configs: Sequence[str] | None = None,
    data_dirs: Mapping[str, str | os.PathLike] | None = None,
) -> ExportResult:
    """Write `out_dir/<config>/<split>-00000-of-00001.parquet` and `out_dir/README.md` (YAML + dataset card).

    `data_dirs` maps a benchmark to its local data (`{"maps": ".../manual/maps", "dlama": "dlama-v1.tar.gz"}`).
    With `configs=None` every config that loads is written; configs whose data is not available (MAPS without
    its folder, DLAMA without its tarball) are skipped and reported. Configs named explicitly must load.
    """
    out = Path(out_dir)
    entries = {e.name: e for e in list_benchmarks()}
    names = list(dict.fromkeys(configs)) if configs else list(entries)  # a config named twice is written once
    for name in names:
        if name not in entries:
            raise UnknownNameError("benchmark config", name, entries, fix="See `culture-probe list`.")
    previous = check_export_folder(out)
    for name in previous:  # an earlier export is replaced whole: no stale config folder left to be uploaded
        if (out / name).is_dir():
            shutil.rmtree(out / name)
        else:
            (out / name).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    data_dirs = dict(data_dirs or {})
    written, skipped = [], []
    for name in names:
        benchmark = entries[name].benchmark if name in entries else None
        try:
            dataset = load_benchmark(name, data_dir=data_dirs.get(benchmark))
        except MissingDataError as error:
            if configs:
                raise
            skipped.append((name, str(error)))
            continue
        splits = []
        for split, table in dataset.items():
            (out / name).mkdir(exist_ok=True)
            table.to_parquet(out / name / f"{split}-00000-of-00001.parquet")
            splits.append((split, table.num_rows))
        entry = entries[name]
        written.append(ExportedConfig(name, entry.benchmark, entry.languages, entry.description, tuple(splits)))
    (out / "README.md").write_text(render_readme(written), encoding="utf-8")
    (out / EXPORT_MARKER).write_text(json.dumps(["README.md", *(c.name for c in written)]) + "\n", encoding="utf-8")
    return ExportResult(out, tuple(written), tuple(skipped))


EXPORT_MARKER = ".culture_probe_export"  # lists what an export wrote, so that the next one replaces exactly that


def check_export_folder(out: Path) -> list[str]:
    """What an earlier export in `out` wrote (to be replaced), after refusing a folder that must not be written:
    a file, a non-empty folder that is no export, or one named like the package (it would shadow
    `import culture_probe` when Python runs from beside it).
    """
    blocking = next((p for p in (out, *out.parents) if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        raise CultureProbeError(f"Cannot export into {out}: {blocking} is a file. Pass a folder (new, empty, or an "
                                "earlier export).")
    if out.name == "culture_probe":
        raise CultureProbeError(f"Cannot export into {out}: a folder named culture_probe shadows the package for "
                                "Python started beside it (import culture_probe would find the data). Pick another "
                                "name, e.g. hub/.")
    if not out.is_dir() or not any(out.iterdir()):
        return []
    if not (out / EXPORT_MARKER).is_file():
        raise CultureProbeError(f"Cannot export into {out}: it is not empty and holds no earlier export "
                                f"({EXPORT_MARKER}); nothing was written. Pass a new or empty folder.")
    written = json.loads((out / EXPORT_MARKER).read_text(encoding="utf-8"))
    if not isinstance(written, list) or not all(isinstance(n, str) and n and "/" not in n and "\\" not in n
                                                and not n.startswith(".") for n in written):
        raise CultureProbeError(f"{out / EXPORT_MARKER} is damaged (it must list the export's top-level files); "
                                "nothing was written. Delete the folder's export, or pass a new folder.")
    return written


def render_readme(configs: Sequence[ExportedConfig]) -> str:
    """README.md: YAML front matter (`configs:` with one Parquet file per split) and the dataset card."""
    languages = sorted({lang for c in configs for lang in c.languages})
    header = {
        "pretty_name": "culture_probe benchmarks",
        "license": "other",
        "language": languages,
        "tags": ["cultural-knowledge", "probing", "multilingual"],
        "configs": [
            {
                "config_name": c.name,
                "data_files": [{"split": s, "path": f"{c.name}/{s}-00000-of-00001.parquet"} for s, _ in c.splits],
            }
            for c in configs
        ],
    }
    front = yaml.safe_dump(header, allow_unicode=True, sort_keys=False)
    return f"---\n{front}---\n\n{render_card(configs)}"


def render_card(configs: Sequence[ExportedConfig]) -> str:
    """The dataset card: per benchmark what it measures, sources, licence, citation, known errors, configs."""
    infos = {module.INFO.name: module.INFO for module in benchmark_modules().values()}
    lines = [
        "# culture_probe benchmarks",
        "",
        "Published cultural-knowledge probing benchmarks in one place, exported by `culture-probe export` "
        "from the `culture_probe` builders. Load one config with "
        '`datasets.load_dataset(<this repo or folder>, "<config>")`. Default configs are faithful to the '
        "upstream release; `<config>_corrected` twins fix the known data errors listed per benchmark.",
    ]
    for benchmark in sorted({c.benchmark for c in configs}):
        lines += _benchmark_section(infos[benchmark], [c for c in configs if c.benchmark == benchmark])
    return "\n".join(lines) + "\n"


def _benchmark_section(info: BenchmarkInfo, configs: list[ExportedConfig]) -> list[str]:
    lines = ["", f"## {info.title}", "", info.description, "", f"- Homepage: {info.homepage}",
             f"- Licence: {info.license}", f"- Version: {info.version}"]
    lines += [f"- Source: `{source}`" for source in info.sources]
    lines += ["", "| config | languages | rows | description |", "|---|---|---|---|"]
    for c in configs:
        rows = ", ".join(f"{split} {n}" for split, n in c.splits)
        description = c.description.replace("|", "\\|")
        lines.append(f"| `{c.name}` | {', '.join(c.languages)} | {rows} | {description} |")
    if info.corrections:
        lines += ["", "Known data errors (fixed only in the `_corrected` configs):", ""]
        lines += [f"- **{c.id}**: {c.description}" for c in info.corrections]
    lines += ["", "How models are probed on these data, and where that differs from the original code, is the "
              f"protocol's part: see culture_probe's documentation page of {info.name} (each run's config.json "
              "lists the deviations that applied to it)."]
    lines += ["", "```bibtex", info.citation.strip(), "```"]
    return lines


def push_to_hub(
    repo_id: str,
    configs: Sequence[str] | None = None,
    token: str | None = None,
    private: bool = False,
    *,
    data_dirs: Mapping[str, str | os.PathLike] | None = None,
) -> str:
    """Export to a temporary folder and upload it as the dataset repo `repo_id`; returns the commit URL."""
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    with tempfile.TemporaryDirectory(prefix="culture_probe_export_") as folder:
        result = export(folder, configs=configs, data_dirs=data_dirs)
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        commit = api.upload_folder(
            repo_id=repo_id,
            repo_type="dataset",
            folder_path=folder,
            ignore_patterns=[EXPORT_MARKER],  # local bookkeeping, not part of the dataset
            commit_message=f"culture_probe export: {len(result.configs)} configs",
        )
    return str(getattr(commit, "commit_url", commit))


def parse_data_dirs(text: str | None) -> dict[str, str]:
    """`"maps=DIR,dlama=FILE"` -> {"maps": "DIR", "dlama": "FILE"} (the CLI's `--data-dir`)."""
    benchmarks = sorted(module.INFO.name for module in benchmark_modules().values())
    found = {}
    for item in filter(None, (text or "").split(",")):
        benchmark, sep, path = item.partition("=")
        if not sep or not path:
            raise UsageError(
                f"--data-dir takes BENCHMARK=PATH items separated by commas, got {item!r}; "
                f"benchmarks: {', '.join(benchmarks)}. Example: --data-dir maps=mirror/manual/maps"
            )
        if benchmark not in benchmarks:
            raise UnknownNameError("benchmark", benchmark, benchmarks)
        found[benchmark] = path
    return found


def main(args: Any) -> int:
    """`culture-probe export DIR [--configs ...] [--data-dir maps=DIR,...]`: write the folder, print its contents."""
    data_dirs = parse_data_dirs(getattr(args, "data_dir", None))
    result = export(args.out_dir, configs=args.configs, data_dirs=data_dirs)
    for config in result.configs:
        rows = ", ".join(f"{split} {n}" for split, n in config.splits)
        print(f"wrote   {config.name}: {rows}")
    for name, reason in result.skipped:
        print(f"skipped {name}: {reason}")
    print(f"{len(result.configs)} configs in {result.out_dir} (README.md declares them)")
    return 0
