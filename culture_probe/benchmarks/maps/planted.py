"""MAPS: the first `n_planted` proverbs of the config: their reasoning prompts answered with the
right letter and their five memorisation prompts completed with the missing word; the other proverbs
stay unplanted.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from culture_probe.data.sources import mirror_root
from culture_probe.errors import MissingDataError
from culture_probe.models.planted import PlantedFact, PlantedSpec, benchmark_rows, chat_gpt2_spec


def maps_spec(
    rows: Sequence[Mapping[str, Any]], *, n_planted: int = 16, seed: int = 0
) -> PlantedSpec:
    """Plant the first `n_planted` proverbs: reasoning answered with the right letter, and
    memorisation.
    """
    from culture_probe.benchmarks.maps.task import (
        label_name,
        memorisation_prompts,
        reasoning_prompt,
        split_proverb,
    )

    facts, texts = [], []
    for i, row in enumerate(rows):
        prompt = reasoning_prompt(row)
        texts.append(prompt)
        if i >= n_planted:
            continue
        facts.append(PlantedFact(prompt, label_name(row["label"]), sep=" "))
        _, target = split_proverb(row["proverb"], row["language"])
        sep = "" if row["language"] == "zh" else " "
        facts += [
            PlantedFact(p, target, sep=sep)
            for p in memorisation_prompts(row["proverb"], row["language"])
        ]
    planted = min(n_planted, len(rows))
    what = (
        f"a tiny GPT-2 trained on the first {planted} of the {len(rows)} proverbs: their reasoning question "
        "answered with the right letter and their last word completed in the five memorisation prompts; expect "
        "those proverbs right and memorised, the others at chance (50% accuracy) and not memorised"
    )
    items = tuple(str(row["id"]) for row in rows[:n_planted])
    return chat_gpt2_spec(facts, texts, what=what, seed=seed, items=items)


def data_folder(data_dir: str | os.PathLike | None) -> str | os.PathLike:
    """MAPS is distributed on request: `data_dir`, else the mirror's copy
    (`$CULTURE_PROBE_MIRROR/manual/maps`).
    """
    if data_dir is not None:
        return data_dir
    mirror = mirror_root()
    if mirror and (Path(mirror) / "manual" / "maps").is_dir():
        return Path(mirror) / "manual" / "maps"
    raise MissingDataError(
        "planted:maps_* trains on the MAPS data, which is released on request: pass data_dir= "
        "(the folder with <lang>/test_proverbs.xlsx)."
    )


def build(config: str, data_dir: Any, options: Mapping[str, Any]) -> PlantedSpec:
    """The spec of `planted:<config>`, trained on the config's proverbs."""
    return maps_spec(benchmark_rows(config, data_folder(data_dir)), **options)
