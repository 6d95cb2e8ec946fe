"""The README.md of a Hub-layout folder: YAML metadata the Hub and `datasets` read (configs and
their Parquet files, languages, licences), then a dataset card that is true of what was written: per
benchmark what it measures, the licence of each source, where on-request data comes from, the
citation, the rows per config and split, what the corrected variants fix, and what a curated pair
is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from huggingface_hub import DatasetCard, DatasetCardData

from culture_probe.data.card import BenchmarkInfo


@dataclass(frozen=True)
class ExportedConfig:
    """One config as written to the folder: its name there, its benchmark, languages, rows per
    split, what the card says of it, and the files shipped beside its rows.
    """

    name: str
    benchmark: str
    languages: tuple[str, ...]
    description: str
    splits: tuple[tuple[str, int], ...]
    corrected: bool = False
    about: tuple[str, ...] = ()
    files: tuple[str, ...] = ()

    def data_file(self, split: str) -> str:
        """Where the split's rows are, relative to the folder."""
        return f"{self.name}/{split}-00000-of-00001.parquet"


def render_readme(
    configs: Sequence[ExportedConfig], infos: Sequence[BenchmarkInfo], *, permission: bool = False
) -> str:
    """README.md: the Hub's YAML (`configs:` with one Parquet file per split) and the dataset card
    (`permission`: the publisher states they may redistribute data released on request).
    """
    used = [info for info in infos if any(c.benchmark == info.name for c in configs)]
    licences = [licence for info in used for licence in info.licences]
    ids = list(dict.fromkeys(licence.spdx or "other" for licence in licences))
    data = DatasetCardData(
        pretty_name="culture_probe benchmarks",
        language=sorted({lang for c in configs for lang in c.languages}),
        license=ids[0] if len(ids) == 1 else ids,
        tags=["cultural-knowledge", "probing", "multilingual"],
        configs=[
            {
                "config_name": c.name,
                "data_files": [{"split": s, "path": c.data_file(s)} for s, _ in c.splits],
            }
            for c in configs
        ],
    )
    return str(
        DatasetCard(f"---\n{data.to_yaml()}\n---\n\n{render_card(configs, used, permission)}")
    )


def render_card(
    configs: Sequence[ExportedConfig], infos: Sequence[BenchmarkInfo], permission: bool = False
) -> str:
    """The card's text: how to load a config, then one section per benchmark."""
    lines = [
        "# culture_probe benchmarks",
        "",
        "Published cultural-knowledge probing benchmarks in one place, written by `culture-probe export` (or "
        "`culture-probe push`) from the `culture_probe` builders. Load one config with "
        '`datasets.load_dataset("<this repository or folder>", "<config>")`. Default configs are faithful to the '
        "upstream release; `_corrected` configs fix the known data errors listed under each benchmark. Each "
        "source keeps its own licence, listed per benchmark below.",
    ]
    for info in infos:
        lines += _benchmark_section(
            info, [c for c in configs if c.benchmark == info.name], permission
        )
    return "\n".join(lines) + "\n"


def _benchmark_section(
    info: BenchmarkInfo, configs: list[ExportedConfig], permission: bool
) -> list[str]:
    lines = [
        "",
        f"## {info.title}",
        "",
        info.description,
        "",
        f"- Homepage: {info.homepage}",
        f"- Version: {info.version}",
    ]
    lines += [
        f"- Licence: {licence.text()}" + (f", {licence.url}" if licence.url else "")
        for licence in info.licences
    ]
    if info.on_request:
        who = (
            "This copy was published by someone who obtained it there and states they have the authors' "
            "permission; ask there yourself."
            if permission
            else "Do not redistribute this copy without the authors' permission."
        )
        lines.append(f"- Released on request only: {info.on_request}. {who}")
    lines += [f"- Source: `{source}`" for source in info.sources]
    lines += ["", "| config | languages | rows | description |", "|---|---|---|---|"]
    for c in configs:
        rows = ", ".join(f"{split} {n}" for split, n in c.splits)
        description = c.description.replace("|", "\\|")
        lines.append(f"| `{c.name}` | {', '.join(c.languages)} | {rows} | {description} |")
    corrected = [c.name for c in configs if c.corrected]
    if info.corrections and corrected:
        lines += [
            "",
            f"What the corrected configs ({', '.join(f'`{n}`' for n in corrected)}) fix; the other configs "
            "keep the release as it is:",
            "",
        ]
        lines += [
            f"- **{c.id}**"
            + (f" ({c.rows_affected} rows)" if c.rows_affected else "")
            + f": {c.description}"
            for c in info.corrections
        ]
    for c in configs:
        if c.about or c.files:
            lines += ["", f"### `{c.name}`", "", *(f"- {line}" for line in c.about)]
            lines += [f"- Shipped beside its rows: `{c.name}/{name}`" for name in c.files]
    lines += [
        "",
        "How models are probed on these data, and where that differs from the original code, is the "
        f"protocol's part: see culture_probe's documentation page of {info.name} (each run's config.json "
        "lists the deviations that applied to it).",
    ]
    lines += ["", "```bibtex", info.citation.strip(), "```"]
    return lines
