"""A run's settings, declared once. Each `RunSettings` field carries its help, and its bounds where
it has some, in its metadata; the command line's run flags (`add_arguments`: `--batch-tokens` for
`batch_tokens`), `run(...)`'s keywords and a suite's settings are all made from the fields, and
checked in one place (`RunSettings.__post_init__`). How the model loads is `ModelArgs`'
(`--model-args`); its fields marked `shorthand` (`dtype`, `revision`) also have a flag and a keyword
of their own, which write into it. Adding a run option is one field here plus its use.

Light on purpose (no torch, no datasets at import): the command line builds its parser from this
module.
"""

from __future__ import annotations

import argparse
import os
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import Field, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from culture_probe.engine.types import MAX_RETRIES, MODEL_KINDS, REQUEST_TIMEOUT, ModelArgs
from culture_probe.errors import InvalidValueError, UnknownNameError
from culture_probe.util.arguments import (
    MergePairs,
    decimal,
    is_decimal,
    is_whole,
    quoted,
    whole_number,
)
from culture_probe.util.typecheck import check_types

SMOKE = "smoke"  # the `limit` that asks for the benchmark's smoke limit (`Task.smoke_limit`)
# the two protocol profiles (`--protocol`): the library's, and the released code's
PROTOCOLS = ("default", "upstream")


def limit_value(text: str) -> int | float | str:
    """`--limit`: a whole number or a fraction in the digits 0-9 (both checked by `RunSettings`,
    which names a bad value), or "smoke".
    """
    if text == SMOKE:
        return text
    if is_whole(text):
        return int(text)
    if is_decimal(text):
        return float(text)
    raise argparse.ArgumentTypeError(
        f"invalid value: {quoted(text)} (give a whole number, a fraction such as 0.1, or smoke)"
    )


# `--shard K/N`: ASCII digits, bounded (no run has a billion units), so that nothing grows with a
# huge N
SHARD_DIGITS = 9
SHARD_FORM = re.compile(rf"([0-9]{{1,{SHARD_DIGITS}}})/([0-9]{{1,{SHARD_DIGITS}}})")


@dataclass(frozen=True, order=True)
class Shard:
    """`--shard K/N`: the K-th (1-based `index`) of N (`count`) slices of a run
    (`culture_probe.shards`).
    """

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """`K/N` with 1 <= K <= N in ASCII digits (`int` also reads "²" and other scripts' digits),
        at most `SHARD_DIGITS` each; anything else is an error naming the flag and the form.
        """
        text = str(text)
        found = SHARD_FORM.fullmatch(text.strip())
        if found is None or not 1 <= int(found[1]) <= int(found[2]):
            raise InvalidValueError(
                f"--shard takes K/N, the K-th of N slices with 1 <= K <= N (e.g. 2/4), got {quoted(text)}."
            )
        return cls(int(found[1]), int(found[2]))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


# lm-evaluation-harness's `--batch_size N` counts sequences; the engine packs its batches by tokens,
# so N becomes a budget of N sequences of this many tokens (a FmLAMA or DLAMA prompt with its
# candidate is 10-40).
TOKENS_PER_SEQUENCE = 256


def batch_size(text: str) -> int | str:
    """`--batch_size` (lm-evaluation-harness's spelling): "auto" (the engine's own budget), or N
    sequences (a token budget of N x TOKENS_PER_SEQUENCE: `run_command.batch_tokens_of`).
    """
    if text == "auto":
        return text
    if is_whole(text) and int(text) > 0:
        return int(text)
    raise argparse.ArgumentTypeError(
        f"invalid value: {quoted(text)} (give a whole number of sequences, or auto)"
    )


def setting(
    default: Any,
    help: str,
    *,
    low: int | None = None,
    metavar: str | None = None,
    choices: tuple[str, ...] | None = None,
    parse: Callable[[str], Any] | None = None,
    alias: str | None = None,
    flag: bool = True,
) -> Any:
    """A `RunSettings` field: its default, the help of its flag (`--name-with-dashes`), the least
    value it takes (`low`), and how the command line shows and reads it (`metavar`, `choices`,
    `parse`: else by its annotation; `alias`: lm-evaluation-harness's spelling of the same flag,
    shown after the native one; `flag=False`: a flag the `run` parser declares itself).
    """
    meta = {
        "help": help,
        "low": low,
        "metavar": metavar,
        "choices": choices,
        "parse": parse,
        "alias": alias,
        "flag": None if flag else False,
    }
    metadata = {k: v for k, v in meta.items() if v is not None}
    if isinstance(default, dict):  # a mapping: each settings object gets its own copy
        return field(default_factory=lambda: dict(default), metadata=metadata)
    return field(default=default, metadata=metadata)


LIMIT_HELP = (
    "smoke runs: probe N items drawn with --seed in turn from each language, culture, predicate or type (items: "
    "DLAMA facts and X-FaKT factual-recall entities, each asked in every language of the config; FmLAMA dishes, "
    "CAMeL prompts, other X-FaKT questions, MAPS proverbs); a fraction 0 < x < 1: that share of each of them, "
    "rounded up; smoke: the fewest that give every headline number (e.g. X-FaKT factual recall 13 entities, one "
    "of each country asked in 13 languages: a question per language x country cell); a smaller N says what it will "
    "lack"
)


@dataclass(frozen=True)
class RunSettings:
    """The runner's own switches, checked when made; those that change a number are recorded in
    config.json.
    """

    language: str | None = setting(
        None, "restrict to one language where the benchmark has several", metavar="L"
    )
    limit: int | float | str | None = setting(
        None, LIMIT_HELP, low=1, metavar="N|FRACTION|smoke", parse=limit_value
    )
    batch_tokens: int | None = setting(None, "token budget per forward batch", low=1, metavar="T")
    seed: int = setting(
        0, "seed of every random draw (a --limit sample, a protocol's random samples)", metavar="S"
    )
    kind: str = setting(
        "auto", "the model's kind, when its config does not say it", choices=("auto", *MODEL_KINDS)
    )
    device: str | None = setting(None, "torch device, e.g. cuda:0", metavar="D")
    data_dir: str | None = setting(
        None,
        "local data (MAPS, DLAMA): a folder, or per benchmark in a suite, e.g. dlama=dlama-v1/,maps=maps/",
        metavar="DIR",
    )
    corrected: bool = setting(False, "use the corrected variant of the data")
    # `--data-option KEY=VALUE` (repeatable, declared by the run parser): load_benchmark's keywords
    data_options: Mapping[str, Any] = setting(
        {},
        "options of the benchmark's data, as load_benchmark takes them (DLAMA: pair, region, contrast, languages, "
        "verify_counts); a key may name a config or benchmark before a dot, as --option's do",
        flag=False,
    )
    cache_dir: str | None = setting(
        None,
        "folder of the per-model score caches, shared by every run (default: scores/ in $CULTURE_PROBE_CACHE or "
        "~/.cache/culture_probe)",
        metavar="DIR",
    )
    no_cache: bool = setting(False, "score without reading or writing the score cache")
    base_url: str | None = setting(
        None,
        "OpenAI-compatible server of an openai:NAME model (vLLM, TGI, transformers serve), e.g. "
        "http://127.0.0.1:8000/v1",
        metavar="URL",
    )
    concurrency: int = setting(8, "requests in flight to that server", low=1, metavar="N")
    served_tokenizer: str | None = setting(
        None,
        "the Hub id or folder of an openai:NAME model's tokenizer, where NAME is not one (e.g. vLLM's "
        "--served-model-name): candidates are then sent as the in-process engine's token ids, through vLLM's prefix "
        "cache where it offers the token route (default: NAME)",
        metavar="NAME_OR_DIR",
    )
    request_timeout: float = setting(
        REQUEST_TIMEOUT,
        "seconds each try of a request to that server may take in all: connecting, sending, waiting and a reply "
        "that trickles in",
        metavar="SECONDS",
    )
    max_retries: int = setting(
        MAX_RETRIES,
        "retries of a request that timed out or failed (5xx, 429, a dropped connection); a server that stalls or "
        "trickles fails after at most SECONDS x (N + 1) plus the backoff (0.5 s, 1 s, 2 s, ... up to 8 s)",
        low=0,
        metavar="N",
    )
    model_args: ModelArgs = setting(
        ModelArgs(),
        "how the model is loaded, the harness's way: key=value,... with pretrained=NAME (in place of --model), "
        "dtype, revision, trust_remote_code, device_map, attn_implementation, load_in_8bit, load_in_4bit, "
        "peft=ADAPTER_DIR (recorded in config.json)",
        metavar="KEY=VALUE,...",
        parse=str,
        alias="--model_args",
    )
    protocol: str = setting(
        "default",
        "default: the library's protocol; upstream: what each benchmark's released code did, wherever it runs (the "
        "report's deviation table shows which side each difference took)",
        choices=PROTOCOLS,
    )
    shard: str | None = setting(
        None,
        "run the K-th of N disjoint slices of the run's items (whole --limit units, balanced by cost) into its own "
        "--out; `culture-probe merge` joins the N folders into the one-process run (docs/sharding.md)",
        metavar="K/N",
    )

    def __post_init__(self) -> None:
        for spec in fields(self):
            value, low = getattr(self, spec.name), spec.metadata.get("low")
            if low is None or value is None or spec.name == "limit" and _share_or_smoke(value):
                continue  # a float in (0, 1) is a share of each stratum's items
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                smoke = (
                    f' (or "{SMOKE}": the fewest items that give every headline number, or a fraction 0 < x < 1 of '
                    "each stratum's items)"
                    if spec.name == "limit"
                    else ""
                )
                raise InvalidValueError(
                    f"{spec.name} must be a whole number >= {low}, got {value!r}{smoke}."
                )
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise InvalidValueError(f"seed must be a whole number, got {self.seed!r}.")
        timeout = self.request_timeout
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not 0 < timeout < float("inf")
        ):
            raise InvalidValueError(
                f"request_timeout must be a number of seconds > 0, got {timeout!r}."
            )
        if self.kind not in ("auto", *MODEL_KINDS):
            raise UnknownNameError("model kind", self.kind, ("auto", *MODEL_KINDS))
        if self.protocol not in PROTOCOLS:
            raise UnknownNameError("protocol", self.protocol, PROTOCOLS)
        if not isinstance(self.model_args, ModelArgs):
            raise InvalidValueError(
                f"model_args must be a ModelArgs, got {self.model_args!r} (RunSettings.of: text)."
            )
        if not isinstance(self.data_options, Mapping) or not all(
            isinstance(key, str) for key in self.data_options
        ):
            raise InvalidValueError(
                f"data_options must map option names to values, got {self.data_options!r:.80} (on the command line "
                "--data-option KEY=VALUE)."
            )
        object.__setattr__(self, "data_options", dict(self.data_options))
        # a folder given as a Path (a suite's data_dir) is its path's text
        for spec in fields(self):
            if isinstance(getattr(self, spec.name), os.PathLike):
                object.__setattr__(self, spec.name, os.fspath(getattr(self, spec.name)))
        # run(data_dir=123) as --data-dir 123
        check_types(self, flag=lambda name: f"--{name.replace('_', '-')}")
        if self.shard is not None:  # K/N checked, and kept as K/N, before anything loads
            object.__setattr__(self, "shard", str(Shard.parse(self.shard)))
        check_device(self.device)
        if (
            self.cache_dir is not None
            and Path(self.cache_dir).exists()
            and not Path(self.cache_dir).is_dir()
        ):
            raise InvalidValueError(
                f"--cache-dir {self.cache_dir} is a file: pass a folder for the score caches (or --no-cache)."
            )

    @classmethod
    def of(cls, base: RunSettings | None = None, **keywords: Any) -> RunSettings:
        """Settings from `run`'s keywords over `base` (default: the defaults): the fields, with
        `model_args` as text, a mapping or a `ModelArgs`, and its shorthands (`dtype=`, `revision=`)
        written into it; a shorthand that disagrees with `model_args` is an error. Paths may be
        `os.PathLike`.
        """
        shorthands = {name: keywords.pop(name) for name in SHORTHANDS if name in keywords}
        unknown = set(keywords) - set(NAMES)
        if unknown:
            raise UnknownNameError("run setting", sorted(unknown)[0], NAMES)
        values = {k: os.fspath(v) if isinstance(v, os.PathLike) else v for k, v in keywords.items()}
        settings = replace(base or cls(), **{k: v for k, v in values.items() if k != "model_args"})
        model_args = (
            as_model_args(values["model_args"]) if "model_args" in values else settings.model_args
        )
        return replace(settings, model_args=with_shorthands(model_args, shorthands))

    @classmethod
    def split(
        cls, keywords: Mapping[str, Any], base: RunSettings | None = None
    ) -> tuple[RunSettings, dict[str, Any]]:
        """`run`'s keywords split into the settings (over `base`) and the protocol's options (all
        others).
        """
        own = {k: v for k, v in keywords.items() if k in NAMES or k in SHORTHANDS}
        return cls.of(base, **own), {k: v for k, v in keywords.items() if k not in own}

    def recorded(self) -> dict[str, Any]:
        """config.json's `run` block: every setting but `model_args` (recorded as its own block)."""
        return {name: getattr(self, name) for name in NAMES if name != "model_args"}


def _share_or_smoke(value: Any) -> bool:
    return value == SMOKE or isinstance(value, float) and 0 < value < 1


NAMES: tuple[str, ...] = tuple(f.name for f in fields(RunSettings))
#: ModelArgs fields with a flag and a run keyword of their own (`--dtype`), written into
#: `model_args`
SHORTHANDS: tuple[str, ...] = tuple(
    f.name for f in fields(ModelArgs) if f.metadata.get("shorthand")
)


def as_model_args(value: str | Mapping[str, Any] | ModelArgs | None) -> ModelArgs:
    """`--model-args` text, a mapping of Python values or a `ModelArgs` -> `ModelArgs` (checked
    before anything loads).
    """
    if value is None:
        return ModelArgs()
    if isinstance(value, ModelArgs):
        return value
    if isinstance(value, str):
        return ModelArgs.parse(value)
    names = [f.name for f in fields(ModelArgs)]
    unknown = sorted(set(value) - set(names))
    if unknown:
        raise UnknownNameError("model argument", unknown[0], names)
    return ModelArgs(**value)  # Python values, type-checked as they are (not read as text)


def with_shorthands(model_args: ModelArgs, given: Mapping[str, Any]) -> ModelArgs:
    """`model_args` with the shorthands given (`--dtype`, `--revision`); one that disagrees with it
    is an error.
    """
    given = {k: v for k, v in given.items() if v is not None}
    for name, value in given.items():
        other = getattr(model_args, name)
        if other is not None and value != other:
            raise InvalidValueError(
                f"--{name} {value} and --model-args {name}={other} disagree: give it once."
            )
    return replace(model_args, **given)


def check_device(name: str | None) -> None:
    """A device must exist on this machine, checked before any data or model loads."""
    if name is None:
        return
    import torch

    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise InvalidValueError(
            f"--device {name!r} is not a torch device (e.g. cpu, cuda, cuda:1, mps)."
        ) from None
    checks: dict[str, Callable[[], bool]] = {
        "cuda": torch.cuda.is_available,
        "mps": torch.backends.mps.is_available,
    }
    available = checks.get(device.type)
    if available is not None and not available():
        raise InvalidValueError(
            f"--device {name}: this machine's torch sees no {device.type} device. Use --device "
            "cpu, or install a torch build for that hardware."
        )
    if (
        device.type == "cuda"
        and device.index is not None
        and device.index >= torch.cuda.device_count()
    ):
        raise InvalidValueError(
            f"--device {name}: there are {torch.cuda.device_count()} CUDA device(s) here."
        )


# ---------------------------------------------------------------- the command line's run flags


def flag_fields() -> list[Field]:
    """Every field that has a run flag: RunSettings' own, then ModelArgs' shorthands."""
    own = (f for f in fields(RunSettings) if f.metadata.get("flag", True))
    return [*own, *(f for f in fields(ModelArgs) if f.name in SHORTHANDS)]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per `flag_fields()` field: `--name-with-dashes`, its help, its type (`parse`, else
    the annotation's), choices and default from the field; a bool field is a switch. Values are
    checked when the settings are made.
    """
    hints = {**typing.get_type_hints(ModelArgs), **typing.get_type_hints(RunSettings)}
    for spec in flag_fields():
        flag, meta, default = "--" + spec.name.replace("_", "-"), spec.metadata, spec.default
        if hints[spec.name] is bool:
            parser.add_argument(flag, action="store_true", help=meta["help"])
            continue
        shown = isinstance(default, (int, float)) and not isinstance(default, bool)
        parser.add_argument(
            *[flag, *filter(None, [meta.get("alias")])],
            type=meta.get("parse") or _scalar(hints[spec.name]),
            default=default if shown or isinstance(default, str) else None,
            metavar=meta.get("metavar"),
            choices=meta.get("choices"),
            # `--model-args` given twice, or in both spellings: the pairs of both
            action=MergePairs if hints[spec.name] is ModelArgs else "store",
            help=meta["help"] + (" (default %(default)s)" if shown else ""),
        )


def from_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The run flags' values as `RunSettings.of` takes them (`--model-args` text as given)."""
    return {spec.name: getattr(args, spec.name) for spec in flag_fields()}


def _scalar(hint: Any) -> Callable[[str], Any]:
    """The command-line type of an annotation: `int | None` -> a whole number, `float` -> a decimal
    one (each in the digits 0-9, bounded); a string otherwise.
    """
    options = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
    numbers: dict[Any, Callable[[str], Any]] = {int: whole_number, float: decimal}
    return next((numbers[t] for t in options if t in numbers), str)
