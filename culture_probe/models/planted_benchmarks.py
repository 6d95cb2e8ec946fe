"""Planted models: `--model planted:<config>` trains a tiny LM on part of that benchmark's own data.

Each benchmark plants knowledge that its protocol should find, so a run on the planted model is a
self-test of the probing setup (and an offline stand-in for a real checkpoint). What each plants is
its own folder's (`culture_probe/benchmarks/<benchmark>/planted.py`, a `build(config, data_dir,
options)`), and the kind of model it trains is in its declaration (known without training it).

Each spec says in words what it planted and the pattern to expect (`PlantedSpec.what`): a run's
config.json (`model.planted`) and report show it. Training is
`culture_probe.models.planted.train_planted` (cached by the hash of everything that changes the
weights, capped at `max_seconds`).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from culture_probe.benchmarks import Declaration, with_part
from culture_probe.data.sources import mirror_root
from culture_probe.engine.types import ModelKind
from culture_probe.errors import UnknownNameError
from culture_probe.models.planted import CHAT_TEMPLATE, PlantedSpec, chat_prompt, train_planted

__all__ = [
    "CHAT_TEMPLATE",
    "PLANTED_SOURCES",
    "PlantedModels",
    "chat_prompt",
    "planted_kind",
    "planted_model_dir",
    "planted_parts",
    "planted_spec",
]


def planted_kind(config: str) -> ModelKind:
    """The kind of `planted:<config>` (known without training it)."""
    kind = _declaration(config).planted_kind
    assert (
        kind is not None
    )  # a declaration with a planted module names its kind (Declaration checks)
    return kind


def _declaration(config: str) -> Declaration:
    from culture_probe.data.registry import resolve

    bench = resolve(config).benchmark
    planted = with_part("planted")
    if bench not in planted:
        raise UnknownNameError(
            "benchmark with a planted model",
            bench,
            planted,
            fix="Build one with culture_probe.models.planted.train_planted(PlantedSpec(...)).",
        )
    return planted[bench]


def planted_spec(
    config: str, *, data_dir: str | os.PathLike | None = None, **options: Any
) -> PlantedSpec:
    """The `PlantedSpec` behind `planted:<config>`; `options` go to the benchmark's builder (e.g.
    culture=).

    Built once per process for the same arguments and mirror (the rows it plants are read from
    either): a run asks for it to train (or find) the model and again for what it planted
    (config.json's `model.planted`).
    """
    folder = None if data_dir is None else os.fspath(data_dir)
    return _built_spec(config, folder, tuple(sorted(options.items())), mirror_root())


@lru_cache(maxsize=8)
def _built_spec(
    config: str, data_dir: str | None, options: tuple[tuple[str, Any], ...], mirror: str | None
) -> PlantedSpec:
    module = _declaration(config).part("planted")
    spec: PlantedSpec = module.build(config, data_dir, dict(options))  # type: ignore[union-attr]
    return spec


def planted_model_dir(
    config: str,
    *,
    cache_dir: str | os.PathLike | None = None,
    data_dir: str | os.PathLike | None = None,
    **options: Any,
) -> Path:
    """The directory of the planted model of `config`, trained now (at most about two minutes) or
    cached.

    The model carries a minimal chat template, so `Scorer.generate(..., chat=True)` works on it.
    """
    path = train_planted(planted_spec(config, data_dir=data_dir, **options), cache_dir)
    _ensure_chat_template(path)
    return path


def planted_parts(config: str, *, data_dir: str | os.PathLike | None = None) -> tuple[Any, Any]:
    """The tokenizer (with its chat template) and the transformers config of `planted:<config>`,
    built from its spec without training or reading the model: what a run checks and a dry run shows
    before any weights exist.
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


class PlantedModels:
    """The `planted:<config>` models as an engine `ModelSource`: the run layer hands
    `PLANTED_SOURCES` to the engine in its load options, so that the engine, which knows no
    benchmark, never imports this module.
    """

    def model_dir(self, name: str, data_dir: str | os.PathLike | None) -> str:
        """`planted_model_dir`: trained on first use, then cached."""
        return str(planted_model_dir(name, data_dir=data_dir))

    def kind(self, name: str) -> ModelKind:
        """`planted_kind`: the benchmark's architecture."""
        return planted_kind(name)

    def parts(self, name: str, data_dir: str | os.PathLike | None) -> tuple[Any, Any]:
        """`planted_parts`: built from the spec, nothing trained."""
        return planted_parts(name, data_dir=data_dir)

    def description(self, name: str, data_dir: str | os.PathLike | None) -> str:
        """The spec's `what`: the facts planted and the pattern to expect."""
        return planted_spec(name, data_dir=data_dir).what

    def known_items(self, name: str, data_dir: str | os.PathLike | None) -> frozenset[str]:
        """The spec's `items`: the benchmark items whose facts were planted."""
        return frozenset(planted_spec(name, data_dir=data_dir).items)


#: the model sources the run layer gives the engine: `planted:<config>`
PLANTED_SOURCES = {"planted:": PlantedModels()}
