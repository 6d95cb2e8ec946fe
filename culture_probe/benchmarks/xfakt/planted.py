"""X-FaKT factual recall: some entities per country, each fact stated **only in its country's own
language** (the associated language), as a chat turn answered with the gold name. Probed in all 13
languages, the model answers in the associated language and fails elsewhere: a low KTS, the paper's
cross-lingual gap, by design.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from culture_probe.errors import CultureProbeError
from culture_probe.models.planted import (
    EOS,
    PlantedFact,
    PlantedSpec,
    benchmark_rows,
    chat_gpt2_spec,
    chat_prompt,
)


def xfakt_spec(
    rows: Sequence[Mapping[str, Any]], *, per_country: int = 5, seed: int = 0
) -> PlantedSpec:
    """Plant the first `per_country` entities of every country, each asked only in its associated
    language.
    """
    if per_country < 1:
        raise CultureProbeError(f"per_country must be at least 1, got {per_country}.")
    chosen = planted_entities(rows, per_country)
    facts = [
        PlantedFact(chat_prompt(r["question"]), r["answer"], right=EOS, sep=" ")
        for r in rows
        if r["entity_idx"] in chosen and r["is_associated"]
    ]
    texts = sorted(
        {r["question"] for r in rows} | {name for r in rows for name in r["country_names"]}
    )
    countries = len({r["country"] for r in rows if r["entity_idx"] in chosen})
    what = (
        f"a tiny GPT-2 trained on {len(chosen)} entities ({per_country} of each of {countries} countries), each "
        "fact stated only in its country's own language: expect right answers about them when asked in that "
        "language (the associated cells) and wrong ones in the other languages, i.e. a low associated error, a "
        "high non-associated one and a low KTS; the other entities are not planted"
    )
    # each entity in every language
    items = tuple(str(r["id"]) for r in rows if r["entity_idx"] in chosen)
    return chat_gpt2_spec(facts, texts, what=what, seed=seed, batch_size=16, items=items)


def planted_entities(rows: Sequence[Mapping[str, Any]], per_country: int) -> set[int]:
    """entity_idx of the first `per_country` entities of each country (in entity order)."""
    by_country: dict[str, list[int]] = {}
    for row in rows:
        ids = by_country.setdefault(row["country"], [])
        if row["entity_idx"] not in ids:
            ids.append(row["entity_idx"])
    return {idx for ids in by_country.values() for idx in sorted(ids)[:per_country]}


def build(config: str, data_dir: Any, options: Mapping[str, Any]) -> PlantedSpec:
    """The spec of `planted:<config>`: factual recall only."""
    if not config.startswith("xfakt_factual_recall"):
        raise CultureProbeError(
            f"planted:{config} is not available: X-FaKT planted models are trained on factual "
            "recall; use planted:xfakt_factual_recall."
        )
    return xfakt_spec(benchmark_rows(config, data_dir), **options)
