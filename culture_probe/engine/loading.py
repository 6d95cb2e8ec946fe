"""`ModelSpec`: a model as a run names it, read once; `load(model, model_args, options)`: the
engine's front door.

A name is one of three forms, told apart here and nowhere else:
- `openai:<name>`: a model asked through an OpenAI-compatible server (`ServedScorer`;
  `LoadOptions.base_url`);
- `<prefix><name>` for a prefix of `LoadOptions.sources`: a model a layer above builds
  (`ModelSource`), such as `planted:<config>`, the built-in planted model of a benchmark config
  (`culture_probe.models.planted_benchmarks`, which the run layer hands down), so that the engine
  imports nothing that knows a benchmark;
- anything else: a Hub id or a local folder (`Scorer.from_pretrained`).

A run asks of a named model before its weights load (its kind, its tokenizer and config, the memory
its weights take), so that a model that cannot serve fails before any folder is made; those
questions are answered here too, from configs and tokenizers only. Light at import (no torch): the
backends load when a model does.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Union, cast

from culture_probe.data.sources import cache_root
from culture_probe.engine.types import (
    MAX_RETRIES,
    MODEL_KINDS,
    REQUEST_TIMEOUT,
    SERVED,
    ModelArgs,
    ModelKind,
)
from culture_probe.errors import InvalidValueError, MissingDataError, UnknownNameError

if TYPE_CHECKING:
    from culture_probe.engine.scorer import ScorerProtocol


class ModelSource(Protocol):
    """Models named `<prefix><name>` that a layer above the engine builds (the benchmarks' planted
    models), handed to the engine in `LoadOptions.sources`: where the model's folder is (built on
    first use), its kind, its tokenizer and config without its weights, and what it was built to
    show.
    """

    def model_dir(self, name: str, data_dir: str | os.PathLike | None) -> str:
        """The model's local folder, built from `data_dir` on first use."""
        ...

    def kind(self, name: str) -> ModelKind:
        """The model's kind, known without building it."""
        ...

    def parts(self, name: str, data_dir: str | os.PathLike | None) -> tuple[Any, Any]:
        """Its tokenizer and transformers config, without weights."""
        ...

    def description(self, name: str, data_dir: str | os.PathLike | None) -> str:
        """What the model was built to show."""
        ...

    def known_items(self, name: str, data_dir: str | os.PathLike | None) -> frozenset[str]:
        """The benchmark items (row ids) the model was built to know; empty where it knows no items
        as such.
        """
        ...


@dataclass(frozen=True)
class LoadOptions:
    """How the engine loads and asks a model given by name, beside `ModelArgs` (how transformers
    loads its weights: dtype, revision, ...). The kind is checked when they are made, the others
    where they are used (a run checks them all before it starts: `RunSettings`).
    """

    kind: str = "auto"  # "auto" (from the model's config) or one of MODEL_KINDS
    device: str | None = None  # default: the process's accelerator, else the CPU
    # tokens per forward pass; default: the automatic budget, halved on OOM
    batch_tokens: int | None = None
    # the folder of the per-model score caches; None: no cache
    cache_dir: str | os.PathLike | None = None
    data_dir: str | os.PathLike | None = None  # the benchmark data a planted model is trained on
    base_url: str | None = None  # the OpenAI-compatible server of an `openai:<name>` model
    concurrency: int = 8  # requests in flight to that server
    served_tokenizer: str | None = None  # that model's tokenizer (Hub id or folder); None: its name
    request_timeout: float = REQUEST_TIMEOUT  # seconds one request to that server may take, per try
    # tries after the first, on a timeout, a dropped connection, 408/409/429, 5xx
    max_retries: int = MAX_RETRIES
    # prefix -> the source of `<prefix><name>`
    sources: Mapping[str, ModelSource] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in ("auto", *MODEL_KINDS):
            raise UnknownNameError("model kind", self.kind, ("auto", *MODEL_KINDS))

    def source(self, name: str) -> tuple[ModelSource, str] | None:
        """The source of `name` and the name it knows (the prefix cut), or None for a served, Hub or
        local model. A name with another `word:` prefix that is no folder here is an error naming
        the prefixes there are.
        """
        for prefix, source in self.sources.items():
            if name.startswith(prefix):
                return source, name[len(prefix) :]
        found = re.match(r"[A-Za-z]+:", name)
        if found and found.group() != SERVED and not Path(name).exists():
            raise UnknownNameError(
                "model source",
                found.group(),
                (SERVED, *self.sources),
                fix="Load it through culture_probe.run, whose load options name the model sources, or give a Hub id "
                "or a local folder.",
            )
        return None


def default_cache_dir() -> Path:
    """Where the per-model score caches live unless told otherwise: `scores/` in the library's cache
    folder.
    """
    return cache_root() / "scores"


# what a user may give as a model: a name (Hub id, local folder, `planted:<config>`,
# `openai:<name>`) or a scorer
ModelInput = Union[str, "os.PathLike[str]", "ScorerProtocol"]


@dataclass(frozen=True)
class ModelSpec:
    """A model as a run names it, read once from what the user gave and how it loads: `name` (a Hub
    id, a local folder, a source's `planted:<config>`, a served `openai:<name>`; None for a scorer
    given loaded) and `scorer` (the model already loaded: given so, or loaded once by a suite for
    all its configs). Every question a run asks of its model before the weights load (kind,
    tokenizer and config, what a planted model knows) is a method here, from configs and tokenizers
    only; `load()` loads it.
    """

    name: str | None
    scorer: ScorerProtocol | None = field(default=None, repr=False, compare=False)
    args: ModelArgs = ModelArgs()
    options: LoadOptions = LoadOptions()

    @classmethod
    def of(
        cls,
        model: ModelInput,
        args: ModelArgs | None = None,
        options: LoadOptions = LoadOptions(),
        scorer: ScorerProtocol | None = None,
    ) -> ModelSpec:
        """The spec of `model`; `scorer` is that model already loaded (the spec names it as `model`
        does). Anything that is no name and no scorer is refused, naming what a model can be.
        """
        args = args or ModelArgs()
        if isinstance(model, (str, os.PathLike)):
            return cls(str(model), scorer, args, options)
        if not hasattr(scorer or model, "kind"):
            raise InvalidValueError(
                "A model is a Hub id or local folder, 'planted:<config>', 'openai:<name>' or a loaded Scorer; "
                f"got {model!r}."
            )
        return cls(None, scorer or model, args, options)

    @property
    def served(self) -> bool:
        """Whether the model is behind an OpenAI-compatible server (`openai:<name>`): its server
        holds the weights, tokenizes and applies the chat template. The one place that reads the
        prefix.
        """
        return self.name is not None and self.name.startswith(SERVED)

    @property
    def served_name(self) -> str:
        """The server's name of a served model (`openai:<name>` -> `<name>`)."""
        return (self.name or "")[len(SERVED) :]

    @property
    def label(self) -> str:
        """How an error and the terminal name the model: as given, else the loaded scorer's path,
        else its class.
        """
        if self.name is not None:
            return self.name
        identity = getattr(self.scorer, "identity", None)
        return (
            str(identity.get("name_or_path"))
            if isinstance(identity, dict)
            else type(self.scorer).__name__
        )

    @functools.cached_property
    def source(self) -> tuple[ModelSource, str] | None:
        """The source of a source's model and the name it knows (`LoadOptions.source`), read once;
        None for any other.
        """
        return None if self.name is None or self.served else self.options.source(self.name)

    def kind(self) -> ModelKind:
        """The model's kind without loading its weights (from its config, or the planted model's
        architecture); a served model needs its server's URL and is causal.
        """
        if self.scorer is not None:
            return cast(ModelKind, self.scorer.kind)  # one of MODEL_KINDS (`ScorerProtocol.kind`)
        name, options = self._name(), self.options
        if self.served:
            if not options.base_url:
                raise InvalidValueError(
                    f"{name} is a served model: pass the server's --base-url (e.g. http://127.0.0.1:8000/v1)."
                )
            if options.kind not in ("auto", "causal"):
                raise UnknownNameError("kind of a served model", options.kind, ("auto", "causal"))
            return "causal"
        if (found := self.source) is not None:
            # a kind other than "auto" is one of MODEL_KINDS: LoadOptions checks it when made
            return (
                found[0].kind(found[1]) if options.kind == "auto" else cast(ModelKind, options.kind)
            )
        from culture_probe.engine.scorer import config_kind

        args = self.args
        return config_kind(
            name,
            kind=options.kind,
            revision=args.revision,
            trust_remote_code=args.trust_remote_code,
        )

    def parts(self) -> tuple[Any, Any]:
        """The model's tokenizer and transformers config, read without its weights: a planted
        model's built from its spec (nothing trained), a Hub or local model's at its revision (a
        file the Hub cannot give is one line).
        """
        name = self._name()
        if (found := self.source) is not None:
            return found[0].parts(found[1], self.options.data_dir)
        hub = {"revision": self.args.revision, "trust_remote_code": self.args.trust_remote_code}
        tokenizer = _hub_call(lambda: _auto("AutoTokenizer").from_pretrained(name, **hub))
        return tokenizer, _hub_call(lambda: _auto("AutoConfig").from_pretrained(name, **hub))

    def tokenizer(self) -> Any:
        """The model's tokenizer, without its weights; None for a served model (its server holds the
        chat template).
        """
        if self.scorer is not None:
            return getattr(self.scorer, "tokenizer", None)
        return None if self.served else self.parts()[0]

    def description(self) -> str | None:
        """What a source's model was built to show (a planted model: what it was trained on and the
        pattern to expect, which config.json and the report show); None for any other model.
        """
        found = self.source
        return None if found is None else found[0].description(found[1], self.options.data_dir)

    def known_items(self) -> frozenset[str]:
        """The benchmark items a source's model was built to know (a planted model's planted items),
        so that a limited run draws some of them; empty for any other model.
        """
        found = self.source
        return (
            frozenset() if found is None else found[0].known_items(found[1], self.options.data_dir)
        )

    def resolved(self) -> str:
        """A source's model (`planted:<config>`) -> its local folder (built once, then cached); any
        other name as is.
        """
        found = self.source
        return (
            self._name() if found is None else found[0].model_dir(found[1], self.options.data_dir)
        )

    def load(self) -> ScorerProtocol:
        """The scorer: the one given or loaded already, else the model loaded (`ServedScorer` for a
        served model, `Scorer.from_pretrained` for any other), its scores cached in
        `options.cache_dir`.
        """
        if self.scorer is not None:
            return self.scorer
        options = self.options
        cache: dict[str, Any] = (
            {} if options.cache_dir is None else {"cache_dir": options.cache_dir}
        )
        if self.served:
            from culture_probe.engine.served import ServedScorer

            self.kind()  # a served model needs its URL
            return ServedScorer(
                self.served_name,
                base_url=options.base_url or "",
                concurrency=options.concurrency,
                tokenizer=options.served_tokenizer,
                timeout=options.request_timeout,
                retries=options.max_retries,
                **cache,
            )
        from culture_probe.engine.scorer import Scorer

        kwargs: dict[str, Any] = {"kind": options.kind}
        if self.args != ModelArgs():
            kwargs["model_args"] = self.args
        if options.batch_tokens is not None:
            kwargs["batch_tokens"] = options.batch_tokens
        kwargs.update(cache)
        if options.device is not None:
            kwargs["device"] = options.device
        return Scorer.from_pretrained(self.resolved(), **kwargs)

    def _name(self) -> str:
        if (
            self.name is None
        ):  # only a loaded scorer has no name, and its questions are answered above
            raise InvalidValueError(
                "A loaded scorer has no name to read a config or a tokenizer from."
            )
        return self.name


def load(
    model: ModelInput, model_args: ModelArgs | None = None, options: LoadOptions = LoadOptions()
) -> ScorerProtocol:
    """A scorer for `model` (a Hub id, a local folder, `planted:<config>` or `openai:<name>`); a
    scorer already loaded is returned as is. The front door for a model outside a run:
    `ModelSpec.of(...).load()`.
    """
    return ModelSpec.of(model, model_args, options).load()


def parameter_count(config: Any, kind: str) -> int:
    """The number of parameters of a model built from `config` on the meta device: no memory, no
    weights read (tied weights, e.g. an input embedding shared with the output layer, count once, as
    they load).
    """
    import torch

    from culture_probe.engine.scorer import backend_for

    with torch.device("meta"):
        empty = _auto(backend_for(kind).auto_class).from_config(config)
    return sum(p.numel() for p in empty.parameters())


def load_dtype(config: Any, model_args: ModelArgs | None = None) -> str:
    """The dtype a model loads in: `model_args.dtype`, else its config's own (transformers loads
    "auto"), else float32.
    """
    given = (model_args or ModelArgs()).dtype
    if given not in (None, "auto"):
        return str(given)
    own = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    return str(own).removeprefix("torch.") if own is not None else "float32"


def _auto(name: str) -> Any:
    import transformers

    return getattr(transformers, name)


def _hub_call(load: Callable[[], Any]) -> Any:
    """A transformers loader whose file errors (missing, offline without a cache) become one-line
    library errors.
    """
    try:
        return load()
    except (OSError, ValueError) as error:
        raise MissingDataError(" ".join(str(error).split())) from None
