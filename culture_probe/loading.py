"""What a run loads before any model: the benchmark's rows, and its protocol with the resources it declares.

The runner and the planted models both build their task here, so a protocol always gets its side data from the
same place as its rows (`data_dir`, the mirror, or the pinned URL), with the provenance config.json records.
"""

from __future__ import annotations

import os
from typing import Any

from culture_probe.data.registry import load_benchmark, resolve
from culture_probe.data.resources import load_resources
from culture_probe.tasks import Task, task_for


def load_rows(config: str, *, data_dir: str | os.PathLike | None = None, corrected: bool = False,
              language: str | None = None) -> list[dict[str, Any]]:
    """The `test` split of `config` as a list of dicts; with `language`, a builder that can build one language
    (DLAMA, X-FaKT) builds only that one (so a pair whose other language is missing still runs).
    """
    module, _ = resolve(config)
    only = {"languages": (language,)} if language is not None and module.BUILDER.LANGUAGE_FILTER else {}
    return [dict(row) for row in load_benchmark(config, data_dir=data_dir, corrected=corrected, **only)["test"]]


def load_task(config: str, options: Any = None, *, kind: str, seed: int = 0,
              data_dir: str | os.PathLike | None = None) -> tuple[Task, dict[str, Any]]:
    """The protocol of `config` with its declared resources loaded, and their provenance for config.json."""
    task_cls = task_for(config)
    options = options if options is not None else task_cls.Options()
    needs = task_cls.needs(config, options)
    loaded = load_resources(needs, data_dir=data_dir)
    task = task_cls(config, options, kind=kind, seed=seed, resources={k: v.value for k, v in loaded.items()})
    return task, {key: loaded[key].provenance(need) for key, need in needs.items()}
