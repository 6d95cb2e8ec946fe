"""config.json: what a run was (the benchmark's card, the rows' and resources' fingerprints, the
model's identity, the settings, the options and deviations, the versions and hardware), so that it
can be repeated or resumed.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from culture_probe import rundir
from culture_probe.engine.loading import ModelSpec
from culture_probe.record import RunRecord
from culture_probe.runner.planning import Plan
from culture_probe.runner.stage_models import StageModel
from culture_probe.settings import RunSettings
from culture_probe.sharing import redacted
from culture_probe.tasks import Task
from culture_probe.tasks.options import json_ready, options_dict
from culture_probe.tasks.probes import (
    Probe,
)


class Described(Protocol):
    """What config.json records of the run's model: its kind and identity. A loaded scorer
    (`ScorerProtocol`), or a dry run's stand-in that knows them without weights
    (`dryrun.Previewed`).
    """

    @property
    def kind(self) -> str:
        """The model's kind."""
        ...

    @property
    def identity(self) -> Any:
        """What names the model (its path or Hub id, revision, ...)."""
        ...


def describe_plan(
    model: ModelSpec,
    scorer: Described,
    ahead: Plan,
    settings: RunSettings,
    number: int | None,
    first: Sequence[Probe],
    *,
    rows: bool,
    folder: bool,
) -> RunRecord:
    """config.json of the run `ahead` plans, asking the first stage's probes `first`
    (`first_probes`: `number` units under `settings.limit`) of `scorer`; `rows`: on custom rows,
    saved in the run's folder when it has one (`folder`). The run writes it, and a dry run compares
    it with a run it would resume.
    """
    task = ahead.task
    return describe_run(
        model,
        scorer,
        task,
        replace(settings, limit=number),  # config.json's run.limit: the number the run probed
        ahead.data,
        ahead.side.provenance,
        subset=subset_of(task, ahead.probes, first, settings.limit) if number is not None else None,
        custom_rows=rows,
        rows_file=rundir.ROWS_FILE if rows and folder else None,
        planned={"stage": task.stage_names[0], "probes": len(first)},
        models=ahead.models,
    )


def describe_run(
    model: ModelSpec,
    scorer: Described,
    task: Task,
    settings: RunSettings,
    rows: Sequence[Mapping[str, Any]],
    resources: Mapping[str, Any],
    *,
    subset: dict | None = None,
    custom_rows: bool = False,
    rows_file: str | None = None,
    planned: dict[str, Any] | None = None,
    models: Mapping[str, StageModel] | None = None,
) -> RunRecord:
    """config.json: versions, the benchmark's card, the rows' and resources' fingerprints, model
    identity, seeds, options, and the deviations that apply to this run.

    `custom_rows` (rows given to `run`) and a model given as an object are recorded; custom rows
    saved in the run directory (`rows_file`) can be repeated with `--rows`, a model object cannot,
    and the report says so. `planned` (the first stage and its probe count) lets a report of an
    interrupted run say how far it got. `stage_options` names the options that change each stage's
    records (what `--resume` compares, stage by stage) and `stage_models` each stage's own model
    (`models`: an LLM judge, with the memory its weights take).
    """
    benchmark, info = task.benchmark, task.benchmark.info
    # credentials in a URL (--base-url, a resource's source) are used, never recorded
    document = redacted(
        json_ready(
            {
                "config": benchmark.name,
                "benchmark": {
                    "name": info.name,
                    "version": info.version,
                    "title": info.title,
                    "description": benchmark.config.description or "",
                    "languages": list(benchmark.languages),
                    "corrections": [c.__dict__ for c in info.corrections],
                    "rows": len(rows),
                    "rows_sha256": rows_digest(rows),
                    "custom_rows": custom_rows,
                    "rows_file": rows_file,
                },
                "resources": dict(resources),
                "model": {
                    "spec": model.name or type(model.scorer).__name__,
                    "loaded_object": model.name is None,
                    "kind": scorer.kind,
                    "identity": _identity(scorer),
                    **planted_of(model),
                },
                "task": type(task).__name__,
                "options": options_dict(task.options),
                "stage_options": {
                    stage: list(task.stage_options(stage)) for stage in task.stage_names
                },
                "stage_models": {stage: other.to_json() for stage, other in (models or {}).items()},
                "run": settings.recorded(),
                "model_args": settings.model_args.given(),
                # a --limit subset is drawn with the seed
                "seed_used": task.seeded or subset is not None,
                "subset": subset,
                "planned": planned,
                "protocol": task.describe(),
                "deviations": task.applied_deviations(),
                "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "hardware": hardware(scorer, settings),
                "versions": versions(),
            }
        )
    )
    # typed as its readers type it, so a field of the wrong type fails here, not in a report of the
    # run
    return RunRecord.from_json(document, "the run's config.json")


def planted_of(model: ModelSpec) -> dict[str, str]:
    """`{"planted": what it was trained on}` for a built-in planted model (`planted:<config>`), so
    that its report says which pattern to expect; {} for any other model.
    """
    what = model.description()
    return {} if what is None else {"planted": what}


def subset_of(
    task: Task, every: Sequence[Probe], first: Sequence[Probe], limit: int | float | str | None
) -> dict[str, Any]:
    """What a `--limit` run probed: how many of the units (`Task.limit_unit`), drawn across which
    strata; the limit as given (a number, a fraction or "smoke") and the benchmark's smoke limit for
    these items. A task that draws parallel units adds `parallel`: the probe fields that name a
    unit, and the languages each unit was asked in.
    """
    subset: dict[str, Any] = {
        "unit": task.limit_unit,
        "strata": list(task.limit_strata),
        "items": task.limit_units(every),
        "sampled": task.limit_units(first),
        "seed": task.seed,
        "limit": limit,
        "smoke_limit": task.smoke_limit(every),
    }
    if task.parallel is not None:
        subset["parallel"] = {
            "fields": list(task.parallel.fields),
            "across": task.parallel.across,
            "values": task.parallel_values(every),
        }
    return subset


def rows_digest(rows: Sequence[Mapping[str, Any]]) -> str:
    """A digest of the probed rows: two runs with equal digests saw the same data."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(
            json.dumps(json_ready(row), sort_keys=True, ensure_ascii=False, default=str).encode(
                "utf-8"
            )
        )
    return digest.hexdigest()


def _identity(scorer: Described) -> Any:
    identity = getattr(scorer, "identity", None)
    if identity is None or isinstance(identity, (str, int, float, dict, list)):
        return identity
    return getattr(identity, "__dict__", str(identity))


def versions() -> dict[str, str | None]:
    """Library versions that can change a number, and the git revision of culture_probe's
    checkout.
    """
    import importlib.metadata as md

    from culture_probe.version import __version__

    out: dict[str, str | None] = {
        "culture_probe": __version__,
        "culture_probe_git": git_revision(Path(__file__).parent),
        "python": platform.python_version(),
    }
    for name in ("torch", "transformers", "tokenizers", "datasets", "numpy", "scipy", "accelerate"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = "absent"
    return out


def git_revision(folder: Path) -> str | None:
    """The commit of the git checkout holding `folder` ("+dirty" with uncommitted changes); None for
    an installed package or where git is unavailable.
    """
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(folder), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()

    try:
        if not (Path(git("rev-parse", "--show-toplevel")) / "culture_probe").is_dir():
            # the folder sits in someone else's repository (e.g. a virtualenv inside a project)
            return None
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
        return git("rev-parse", "HEAD") + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def hardware(scorer: Described, settings: RunSettings) -> dict[str, Any]:
    """Where the numbers were computed: the model's device and dtype, the number of processes, the
    machine.
    """
    from culture_probe.engine import parallel

    device = getattr(scorer, "device", None)
    model = getattr(scorer, "model", None)
    dtype = getattr(model, "dtype", None) or settings.model_args.dtype
    out: dict[str, Any] = {
        "device": str(device) if device is not None else None,
        "dtype": str(dtype).removeprefix("torch.") if dtype is not None else None,
        "processes": parallel.world()[1],
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
    }
    if device is not None and getattr(device, "type", None) == "cuda":
        import torch

        out["accelerator"] = torch.cuda.get_device_name(device)
    return out
