"""Each config's share of a run's protocol options: a plain `key` goes to every config whose
protocol declares it, `CONFIG.key` or `BENCHMARK.key` to the configs it names, so that one suite can
give X-FaKT `mode=rank` while DLAMA, which has other options, runs as it is (docs/running.md,
"Options in a suite").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from culture_probe.data.registry import Benchmark, groups, resolve
from culture_probe.errors import InvalidValueError, UnknownNameError
from culture_probe.tasks import task_for
from culture_probe.tasks.options import options_dict


def options_per_config(
    configs: Sequence[str | Benchmark], options: Mapping[str, Any]
) -> dict[str, dict[str, Any]]:
    """{config: its options} out of a run's `options`: a plain `key` goes to every config whose
    protocol declares it (refused when none does, naming the configs that have it), `CONFIG.key` to
    that config and `BENCHMARK.key` to the run's configs of that benchmark (`xfakt.judge`; a prefix
    naming none is refused). A key that reaches one config twice with two values (`mode=rank` and
    `xfakt.mode=generate`) is refused naming both: neither spelling overrides the other. Names only:
    the values are checked by each protocol (`Task.options_for`).
    """
    # each name looked up once (a Benchmark is not again)
    resolved = {b.name: b for b in map(resolve, configs)}
    benchmarks = {name: benchmark.info.name for name, benchmark in resolved.items()}
    given: dict[str, dict[str, tuple[str, Any]]] = {name: {} for name in resolved}
    for spelled, value in options.items():
        prefix, _, key = spelled.rpartition(".")
        for config in _named(prefix, spelled, benchmarks) if prefix else _declaring(key, resolved):
            first, before = given[config].setdefault(key, (spelled, value))
            if not same(before, value):
                raise InvalidValueError(
                    f"Option {key} of {config} is given twice: {first}={before} and {spelled}={value}. Give one "
                    "value (neither spelling overrides the other)."
                )
    return {
        config: {key: value for key, (_, value) in keys.items()} for config, keys in given.items()
    }


def joined(options: Mapping[str, Any] | None, keywords: Mapping[str, Any]) -> dict[str, Any]:
    """`options=` (a mapping: it takes prefixed keys) and the protocol options given as keywords, as
    one mapping; a key in both with two values is refused naming both.
    """
    given = dict(options or {})
    for key, value in keywords.items():
        if not same(before := given.setdefault(key, value), value):
            raise InvalidValueError(
                f"Option {key} is given twice: {before!r} in options= and {value!r} as a keyword. Give it once."
            )
    return given


def same(one: Any, other: Any) -> bool:
    """Whether two spellings give one value (a value is itself, even NaN, which the protocol then
    refuses).
    """
    return one is other or one == other


def option_names(config: str | Benchmark) -> frozenset[str]:
    """The options that `config`'s protocol declares."""
    return frozenset(f.name for f in dataclasses.fields(task_for(config).Options))


def _named(prefix: str, spelled: str, benchmarks: Mapping[str, str]) -> list[str]:
    """The configs `prefix` names: a config of the run, or a benchmark with configs in it; none is
    an error.
    """
    named = [config for config, benchmark in benchmarks.items() if prefix in (config, benchmark)]
    if not named:
        valid = [*dict.fromkeys(benchmarks.values()), *benchmarks]
        raise UnknownNameError(
            "option prefix",
            prefix,
            valid,
            fix=f"Before the dot of {spelled}, name a benchmark or config of this run: {', '.join(valid)} (an option "
            "without a prefix goes to every config that has it).",
            list_valid=False,
        )
    return named


def _declaring(key: str, resolved: Mapping[str, Benchmark]) -> list[str]:
    """The configs whose protocol has option `key`. None is an error naming the benchmarks whose
    configs have it, or else the run's options closest to it.
    """
    configs = list(resolved)
    takers = [config for config, benchmark in resolved.items() if key in option_names(benchmark)]
    if takers:
        return takers
    elsewhere = {
        name: members for name, members in groups().items() if key in option_names(members[0])
    }
    if elsewhere:
        raise InvalidValueError(
            f"No config of this run ({_few(configs)}) has option {key}; "
            + "; ".join(
                f"{name}'s configs ({_few(members)}) have it" for name, members in elsewhere.items()
            )
            + f". Drop {key}=..., or run those configs."
        )
    classes = dict.fromkeys(
        task_for(benchmark).Options.__qualname__ for benchmark in resolved.values()
    )
    raise UnknownNameError(
        "option",
        key,
        {name for benchmark in resolved.values() for name in option_names(benchmark)},
        fix=f"These are the options of {', '.join(classes)}.",
    )


def _few(configs: Sequence[str], shown: int = 3) -> str:
    """A few config names, and how many more."""
    more = f" and {len(configs) - shown} more" if len(configs) > shown else ""
    return ", ".join(configs[:shown]) + more


def options_set(config: str, recorded: Mapping[str, Any]) -> dict[str, Any]:
    """The options a run of `config` got that differ from its protocol's defaults (`recorded`:
    config.json's `options`), as suite.json lists them per config.
    """
    defaults = options_dict(task_for(config).Options())
    return {
        key: value
        for key, value in recorded.items()
        if key not in defaults or defaults[key] != value
    }
