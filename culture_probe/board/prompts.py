"""The exact input of every probe of a run, rebuilt from its protocol: records keep what the
protocol read from the output, not always the text the model was given (X-FaKT keeps the question,
not the chat turn; a DLAMA record keeps its template, not its candidates). The task is rebuilt from
config.json with its resources and rows loaded again from where the run took them (`data_dir`, the
mirror, the pinned URL, or the run's rows.jsonl), so the board shows what the model saw, never a
guess from the record's strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from culture_probe import rundir
from culture_probe.errors import CultureProbeError
from culture_probe.loading import load_rows, task_of_run
from culture_probe.tasks import FillMaskProbe, GenerateProbe, Probe, Record, ScoreProbe, Skipped

PromptKey = tuple[str, str]  # (stage, probe key): a key is unique within one stage only


@dataclass(frozen=True)
class Prompts:
    """Each probe's input by (stage, key), candidate lists stored once (`candidate_sets`), or why
    none could be rebuilt (`missing`).
    """

    by_key: dict[PromptKey, dict[str, Any]] = field(default_factory=dict)
    candidate_sets: list[list[str]] = field(default_factory=list)
    missing: str | None = None


def rebuild(run: rundir.Run) -> Prompts:
    """The inputs of `run`'s probes, stage by stage (a later stage is built from the earlier stages'
    records, as the runner built it); a run whose data or resources cannot be loaded here gets the
    reason instead.
    """
    try:
        task = task_of_run(run.record)
        rows = run_rows(run)
        if run.record.run.language:
            rows = task.select_language(rows, run.record.run.language)
        probes: list[tuple[str, Probe]] = []
        for index, stage in enumerate(task.stage_names):
            earlier = [r for r in run.records if r.stage in task.stage_names[:index]]
            probes += [(stage, p) for p in task.build_probes(rows, stage=stage, previous=earlier)]
    except (CultureProbeError, OSError) as error:
        return Prompts(
            missing=f"the prompts could not be rebuilt ({type(error).__name__}: {error})"
        )
    sets: dict[tuple[str, ...], int] = {}
    by_key = {(stage, probe.key): probe_input(probe, sets) for stage, probe in probes}
    return Prompts(by_key, [list(candidates) for candidates in sets])


def run_rows(run: rundir.Run) -> list[Any]:
    """The rows the run probed: its saved custom rows, or the benchmark's rows from where the run
    read them.
    """
    bench, settings = run.record.benchmark, run.record.run
    if bench.custom_rows:
        saved = bench.saved_rows
        if saved is None:
            raise CultureProbeError("the run probed custom rows it did not save (no rows.jsonl)")
        return rundir.read_rows(run.path / saved)
    return load_rows(
        run.record.config,
        data_dir=settings.data_dir,
        corrected=settings.corrected,
        language=settings.language,
    )


def probe_input(probe: Probe, sets: dict[tuple[str, ...], int]) -> dict[str, Any]:
    """What the engine got for one probe, as the board shows it; candidates go into `sets` (index by
    first use).
    """
    if isinstance(probe, ScoreProbe):
        request = probe.request
        return {
            "kind": "score",
            "left": request.left,
            "right": request.right,
            "sep": request.sep,
            "chat": request.chat,
            "system": request.system,
            "candidates": sets.setdefault(request.candidates, len(sets)),
            "n_candidates": len(request.candidates),
        }
    if isinstance(probe, GenerateProbe):
        options = probe.options
        return {
            "kind": "generate",
            "text": probe.prompt,
            "chat": options.chat,
            "system": options.system,
            "max_new_tokens": options.max_new_tokens,
        }
    if isinstance(probe, FillMaskProbe):
        return {"kind": "fill_mask", "left": probe.left}
    assert isinstance(probe, Skipped)
    return {"kind": "skipped", "reason": probe.reason}


def prompt_of(prompts: Prompts, record: Record) -> dict[str, Any] | None:
    """The rebuilt input of one record's probe (None: not rebuilt, `prompts.missing` or a probe the
    rebuild lacks).
    """
    return prompts.by_key.get((record.stage, record.key))


def missing_reason(prompts: Prompts, records: Sequence[Record]) -> str | None:
    """Why some records show no prompt: the rebuild failed, or it built other probes than the run
    recorded.
    """
    if prompts.missing:
        return prompts.missing
    absent = sum(prompt_of(prompts, r) is None for r in records)
    if absent:
        return (
            f"{absent} of {len(records)} records have no probe in the protocol rebuilt from config.json (the data or "
            "library changed since the run)"
        )
    return None
