"""Built-in planted models: `--model planted:<config>` trains a tiny LM on part of that benchmark's own data.

Each benchmark plants knowledge that its protocol should find, so a run on the planted model is a self-test of
the probing setup (and an offline stand-in for a real checkpoint):

- X-FaKT factual recall: some entities per country, each fact stated **only in its country's own language**
  (the associated language), as a chat turn answered with the gold name. Probed in all 13 languages, the model
  answers in the associated language and fails elsewhere: a low KTS, the paper's cross-lingual gap, by design.
- CAMeL: prompts filled with the entities of **one** culture (Western by default) that the protocol will sample;
  the CBS moves towards the planted culture.
- MAPS: the first `n_planted` proverbs of the config: their reasoning prompts answered with the right letter and
  their five memorisation prompts completed with the missing word; the other proverbs stay unplanted.
- DLAMA / FmLAMA: a tiny BERT trained on the protocol's own probes of one culture (DLAMA: the non-Western one) or
  country group (FmLAMA: the largest), one fact per gold answer, the first 400 in probe order (DLAMA Arab-West:
  94 Arabic P17 facts); those items should be ranked right, the others at chance.

Each spec says in words what it planted and the pattern to expect (`PlantedSpec.what`): a run's config.json
(`model.planted`) and report show it. Training is `culture_probe.models.planted.train_planted` (cached by the hash
of everything that changes the weights, capped at `max_seconds`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from culture_probe.data.sources import mirror_root
from culture_probe.engine.types import ModelKind
from culture_probe.errors import CultureProbeError, MissingDataError, UnknownNameError
from culture_probe.models.planted import PlantedFact, PlantedSpec, train_planted
from culture_probe.models.tiny import Arch, TokenizerKind

# A minimal chat format for planted models: the question as the user turn, the answer right after "A:".
CHAT_TEMPLATE = (
    "{% for message in messages %}Q: {{ message['content'] }}\n{% endfor %}{% if add_generation_prompt %}A:{% endif %}"
)
EOS = "<|endoftext|>"  # the GPT-2 style byte-level BPE tokenizer's end of text (planted models use it)
MAX_SECONDS = 100.0  # the whole build stays under two minutes
ARCH_NAMES = {"gpt2": "GPT-2", "bert": "BERT"}  # as a planted model's description names its architecture


def chat_prompt(question: str) -> str:
    """`question` rendered with `CHAT_TEMPLATE` and a generation prompt (what the engine feeds the model)."""
    return f"Q: {question}\nA:"


# ---------------------------------------------------------------- X-FaKT


def xfakt_spec(rows: Sequence[Mapping[str, Any]], *, per_country: int = 5, seed: int = 0) -> PlantedSpec:
    """Plant the first `per_country` entities of every country, each asked only in its associated language."""
    if per_country < 1:
        raise CultureProbeError(f"per_country must be at least 1, got {per_country}.")
    chosen = planted_entities(rows, per_country)
    facts = [
        PlantedFact(chat_prompt(r["question"]), r["answer"], right=EOS, sep=" ")
        for r in rows
        if r["entity_idx"] in chosen and r["is_associated"]
    ]
    texts = sorted({r["question"] for r in rows} | {name for r in rows for name in r["country_names"]})
    countries = len({r["country"] for r in rows if r["entity_idx"] in chosen})
    what = (
        f"a tiny GPT-2 trained on {len(chosen)} entities ({per_country} of each of {countries} countries), each "
        "fact stated only in its country's own language: expect right answers about them when asked in that "
        "language (the associated cells) and wrong ones in the other languages, i.e. a low associated error, a "
        "high non-associated one and a low KTS; the other entities are not planted"
    )
    return PlantedSpec(
        tuple(facts),
        arch="gpt2",
        tokenizer="bpe",
        probe_texts=tuple(texts),
        vocab_size=2000,
        layers=2,
        hidden=64,
        steps=800,
        batch_size=16,
        target_loss=0.05,
        max_seconds=MAX_SECONDS,
        seed=seed,
        what=what,
    )


def planted_entities(rows: Sequence[Mapping[str, Any]], per_country: int) -> set[int]:
    """entity_idx of the first `per_country` entities of each country (in entity order)."""
    by_country: dict[str, list[int]] = {}
    for row in rows:
        ids = by_country.setdefault(row["country"], [])
        if row["entity_idx"] not in ids:
            ids.append(row["entity_idx"])
    return {idx for ids in by_country.values() for idx in sorted(ids)[:per_country]}


# ---------------------------------------------------------------- CAMeL


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
    """Plant the prompts filled with one culture's entities, those the protocol samples (same seeds)."""
    from culture_probe.tasks.camel import CULTURES, entity_pools, masked_parts, normalise, sample, type_name

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
    toward = "above 50 (Western fillers preferred)" if culture == "western" else "below 50 (Arab fillers preferred)"
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


# ---------------------------------------------------------------- MAPS


def maps_spec(rows: Sequence[Mapping[str, Any]], *, n_planted: int = 16, seed: int = 0) -> PlantedSpec:
    """Plant the first `n_planted` proverbs: reasoning answered with the right letter, and memorisation."""
    from culture_probe.tasks.maps import label_name, memorisation_prompts, reasoning_prompt, split_proverb

    facts, texts = [], []
    for i, row in enumerate(rows):
        prompt = reasoning_prompt(row)
        texts.append(prompt)
        if i >= n_planted:
            continue
        facts.append(PlantedFact(prompt, label_name(row["label"]), sep=" "))
        _, target = split_proverb(row["proverb"], row["language"])
        sep = "" if row["language"] == "zh" else " "
        facts += [PlantedFact(p, target, sep=sep) for p in memorisation_prompts(row["proverb"], row["language"])]
    planted = min(n_planted, len(rows))
    what = (
        f"a tiny GPT-2 trained on the first {planted} of the {len(rows)} proverbs: their reasoning question "
        "answered with the right letter and their last word completed in the five memorisation prompts; expect "
        "those proverbs right and memorised, the others at chance (50% accuracy) and not memorised"
    )
    return PlantedSpec(
        tuple(facts),
        arch="gpt2",
        tokenizer="bpe",
        probe_texts=tuple(texts),
        vocab_size=2000,
        layers=2,
        hidden=64,
        steps=800,
        batch_size=32,
        target_loss=0.05,
        max_seconds=MAX_SECONDS,
        seed=seed,
        what=what,
    )


# ---------------------------------------------------------------- DLAMA and FmLAMA (ranking protocols)


def ranking_spec(
    config: str,
    rows: Sequence[Mapping[str, Any]],
    *,
    group_key: str,
    planted: str,
    metric: str = "P@1",
    max_facts: int = 400,
    seed: int = 0,
    data_dir: str | os.PathLike | None = None,
) -> PlantedSpec:
    """A tiny BERT (the papers' kind of model) trained on the protocol's own probes of one group's items.

    Every probe of an item whose `group_key` (DLAMA: culture; FmLAMA: country group) is `planted` becomes facts,
    one per gold answer, up to `max_facts` in probe order; the tokenizer covers every probe's context and
    candidates. `what` names the items planted (how many, in which of the other strata) and `metric`'s pattern.
    """
    from culture_probe.loading import load_task
    from culture_probe.models.planted import probe_texts_of
    from culture_probe.tasks import ScoreProbe

    task, _ = load_task(config, kind="masked", seed=seed, data_dir=data_dir)
    probes = [p for p in task.build_probes(rows) if isinstance(p, ScoreProbe)]
    group = [p for p in probes if p.meta.get(group_key) == planted]
    kept = [(p, gold) for p in group for gold in p.meta["gold"]][:max_facts]
    if not kept:
        present = sorted({str(p.meta.get(group_key)) for p in probes})
        raise UnknownNameError(f"{group_key} to plant", planted, present)
    facts = [PlantedFact.from_request(p.request, gold) for p, gold in kept]
    items = {p.item_id for p, _ in kept}
    where = "; ".join(f"{key} {_listed(p.meta.get(key) for p, _ in kept)}" for key in task.strata if key != group_key)
    what = (
        f"a tiny BERT trained on {len(items):,} of the {len({p.item_id for p in group}):,} {task.unit} whose "
        f"{group_key} is {planted} ({where}; one fact per gold answer, the first {max_facts} at most): expect "
        f"{metric} near 100% on those {task.unit} and chance level on the others"
    )
    return PlantedSpec(
        tuple(facts),
        arch="bert",
        tokenizer="wordpiece",
        probe_texts=probe_texts_of(p.request for p in probes),
        vocab_size=2000,
        steps=600,
        batch_size=32,
        target_loss=0.05,
        max_seconds=MAX_SECONDS,
        seed=seed,
        what=what,
    )


def _listed(values: Iterable[object], most: int = 5) -> str:
    """Distinct values in first-seen order, the first `most` of them, and how many more."""
    distinct = [str(v) for v in dict.fromkeys(values)]
    more = f" and {len(distinct) - most} more" if len(distinct) > most else ""
    return ", ".join(distinct[:most]) + more


def _dlama(config: str, data_dir: Any, options: Mapping[str, Any]) -> PlantedSpec:
    """DLAMA: plant the non-Western culture's facts (the pair's first culture), the first `max_facts` answers."""
    rows = _rows(config, data_dir)
    cultures = sorted({r["culture"] for r in rows} - {"west"})
    default = cultures[0] if cultures else ""
    return ranking_spec(config, rows, group_key="culture", data_dir=data_dir, **{"planted": default, **options})


def _fmlama(config: str, data_dir: Any, options: Mapping[str, Any]) -> PlantedSpec:
    """FmLAMA: plant the dishes of the country group with the most dishes."""
    rows = _rows(config, data_dir)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["group"]] = counts.get(row["group"], 0) + 1
    default = max(sorted(counts), key=counts.__getitem__) if counts else ""
    return ranking_spec(
        config, rows, group_key="group", metric="mAP", data_dir=data_dir, **{"planted": default, **options}
    )


# ---------------------------------------------------------------- building


def _rows(config: str, data_dir: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    from culture_probe.data.registry import load_benchmark

    return list(load_benchmark(config, data_dir=data_dir)["test"])


def _maps_data_dir(data_dir: str | os.PathLike | None) -> str | os.PathLike:
    """MAPS is distributed on request: `data_dir`, else the mirror's copy (`$CULTURE_PROBE_MIRROR/manual/maps`)."""
    if data_dir is not None:
        return data_dir
    mirror = mirror_root()
    if mirror and (Path(mirror) / "manual" / "maps").is_dir():
        return Path(mirror) / "manual" / "maps"
    raise MissingDataError(
        "planted:maps_* trains on the MAPS data, which is released on request: pass data_dir= "
        "(the folder with <lang>/test_proverbs.xlsx)."
    )


def _xfakt(config: str, data_dir: Any, options: Mapping[str, Any]) -> PlantedSpec:
    if not config.startswith("xfakt_factual_recall"):
        raise CultureProbeError(
            f"planted:{config} is not available: X-FaKT planted models are trained on factual "
            "recall; use planted:xfakt_factual_recall."
        )
    return xfakt_spec(_rows(config, data_dir), **options)


def _camel(config: str, data_dir: Any, options: Mapping[str, Any]) -> PlantedSpec:
    if "prompts" not in config:
        raise CultureProbeError(
            f"planted:{config} is not available; use planted:camel_co_prompts or planted:camel_ag_prompts."
        )
    return camel_spec(_rows(config, data_dir), _rows("camel_entities", data_dir), **options)


def _maps(config: str, data_dir: Any, options: Mapping[str, Any]) -> PlantedSpec:
    return maps_spec(_rows(config, _maps_data_dir(data_dir)), **options)


SPEC_BUILDERS: dict[str, Callable[[str, Any, Mapping[str, Any]], PlantedSpec]] = {
    "xfakt": _xfakt,
    "camel": _camel,
    "maps": _maps,
    "dlama": _dlama,
    "fmlama": _fmlama,
}


#: the model kind of each benchmark's planted model (the architecture its spec builder trains by default)
PLANTED_KINDS: dict[str, ModelKind] = {
    "xfakt": "causal",
    "camel": "causal",
    "maps": "causal",
    "dlama": "masked",
    "fmlama": "masked",
}


def planted_kind(config: str) -> ModelKind:
    """The kind of `planted:<config>` (known without training it)."""
    return PLANTED_KINDS[_benchmark(config)]


def _benchmark(config: str) -> str:
    from culture_probe.data.registry import resolve

    module, _ = resolve(config)
    bench = module.__name__.rsplit(".", 1)[-1]
    if bench not in SPEC_BUILDERS:
        raise UnknownNameError(
            "benchmark with a planted model",
            bench,
            SPEC_BUILDERS,
            fix="Build one with culture_probe.models.planted.train_planted(PlantedSpec(...)).",
        )
    return bench


def planted_spec(config: str, *, data_dir: str | os.PathLike | None = None, **options: Any) -> PlantedSpec:
    """The `PlantedSpec` behind `planted:<config>`; `options` go to the benchmark's builder (e.g. culture=).

    Built once per process for the same arguments and mirror (the rows it plants are read from either): a run asks
    for it to train (or find) the model and again for what it planted (config.json's `model.planted`).
    """
    folder = None if data_dir is None else os.fspath(data_dir)
    return _built_spec(config, folder, tuple(sorted(options.items())), mirror_root())


@lru_cache(maxsize=8)
def _built_spec(
    config: str, data_dir: str | None, options: tuple[tuple[str, Any], ...], mirror: str | None
) -> PlantedSpec:
    return SPEC_BUILDERS[_benchmark(config)](config, data_dir, dict(options))


def planted_model_dir(
    config: str,
    *,
    cache_dir: str | os.PathLike | None = None,
    data_dir: str | os.PathLike | None = None,
    **options: Any,
) -> Path:
    """The directory of the planted model of `config`, trained now (at most about two minutes) or cached.

    The model carries a minimal chat template, so `Scorer.generate(..., chat=True)` works on it.
    """
    path = train_planted(planted_spec(config, data_dir=data_dir, **options), cache_dir)
    _ensure_chat_template(path)
    return path


def planted_parts(config: str, *, data_dir: str | os.PathLike | None = None) -> tuple[Any, Any]:
    """The tokenizer (with its chat template) and the transformers config of `planted:<config>`, built from its spec
    without training or reading the model: what a run checks and a dry run shows before any weights exist.
    """
    from culture_probe.models.planted import planted_tokenizer
    from culture_probe.models.tiny import tiny_config

    spec = planted_spec(config, data_dir=data_dir)
    tokenizer = planted_tokenizer(spec)
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer, tiny_config(spec.arch, tokenizer, spec.layers, spec.hidden, spec.heads)


def _ensure_chat_template(path: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.chat_template != CHAT_TEMPLATE:
        tokenizer.chat_template = CHAT_TEMPLATE
        tokenizer.save_pretrained(path)
