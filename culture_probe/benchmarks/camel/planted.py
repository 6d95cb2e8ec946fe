"""CAMeL: prompts filled with the entities of **one** culture (Western by default) that the protocol
will sample; the CBS moves towards the planted culture.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from culture_probe.errors import CultureProbeError, UnknownNameError
from culture_probe.models.planted import (
    ARCH_NAMES,
    MAX_SECONDS,
    PlantedFact,
    PlantedSpec,
    benchmark_rows,
)
from culture_probe.models.tiny import Arch, TokenizerKind


def camel_spec(
    rows: Sequence[Mapping[str, Any]],
    entity_rows: Sequence[Mapping[str, Any]],
    *,
    culture: str = "western",
    arch: Arch = "gpt2",
    n_runs: int = 5,
    sample_size: int = 50,
    seed: int = 0,
) -> PlantedSpec:
    """Plant the prompts filled with one culture's entities, those the protocol samples (same
    seeds).
    """
    from culture_probe.benchmarks.camel.task import (
        CULTURES,
        entity_pools,
        masked_parts,
        normalise,
        sample,
        type_name,
    )

    if culture not in CULTURES:
        raise UnknownNameError("culture", culture, CULTURES)
    pools = entity_pools(entity_rows)
    facts, texts = [], []
    by_type: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_type.setdefault(type_name(row["entity_type"]), []).append(row)
    for etype, prompts in by_type.items():
        chosen: dict[str, None] = {}
        for run in range(n_runs):
            drawn = sample(pools, etype, run, seed=seed, size=sample_size)
            chosen.update(dict.fromkeys(getattr(drawn, culture)))
            texts += [*drawn.arab, *drawn.western]
        for i, entity in enumerate(chosen):
            row = prompts[i % len(prompts)]
            left, right = masked_parts(row["prompt_masked"])
            if arch == "gpt2":
                left = normalise(row["prompt_causal"])
            facts.append(PlantedFact(left, entity, right=f" {right}" if right else ""))
        texts += [normalise(r["prompt_masked"]) for r in prompts]
    tokenizer: TokenizerKind = "bpe" if arch == "gpt2" else "wordpiece"
    toward = (
        "above 50 (Western fillers preferred)"
        if culture == "western"
        else "below 50 (Arab fillers preferred)"
    )
    what = (
        f"a tiny {ARCH_NAMES.get(arch, arch)} trained on the prompts filled with the {culture} entities the "
        f"protocol samples (seed {seed}, {n_runs} runs of up to {sample_size} per culture and type): expect a CBS "
        f"{toward}; a run with another --seed samples other entities"
    )
    return PlantedSpec(
        tuple(facts),
        arch=arch,
        tokenizer=tokenizer,
        probe_texts=tuple(dict.fromkeys(texts)),
        vocab_size=2000,
        layers=2,
        hidden=64,
        steps=300,
        batch_size=64,
        target_loss=0.01,
        max_seconds=MAX_SECONDS,
        seed=seed,
        what=what,
    )


def build(config: str, data_dir: Any, options: Mapping[str, Any]) -> PlantedSpec:
    """The spec of `planted:<config>`: the prompt configs only, with the entities they are filled
    with.
    """
    if "prompts" not in config:
        raise CultureProbeError(
            f"planted:{config} is not available; use planted:camel_co_prompts or planted:camel_ag_prompts."
        )
    return camel_spec(
        benchmark_rows(config, data_dir), benchmark_rows("camel_entities", data_dir), **options
    )
