"""Asking the model: each stage's probes not answered yet, in chunks (the unit of progress, writing
and resuming), one engine call per kind and options; only rank 0 writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Protocol, TypeGuard

from culture_probe import rundir
from culture_probe.engine.scorer import ScorerProtocol
from culture_probe.engine.types import GenerateOptions, ScoreOptions, ScoreRequest, Truncation
from culture_probe.errors import (
    CultureProbeError,
)
from culture_probe.provenance import ProcessLog
from culture_probe.runner import stage_models
from culture_probe.settings import RunSettings
from culture_probe.tasks import Task
from culture_probe.tasks.probes import (
    FillMaskProbe,
    GenerateProbe,
    Probe,
    Record,
    ScoreProbe,
    Skipped,
)

CHUNK = 64  # probes per engine call: the unit of progress, of incremental writing and of resumption
# one engine call of a stage: (its chunk, the probe kind, the options, the chunk's probes it asks)
Call = tuple[int, type, Any, list[int]]


def barrier() -> None:
    """Wait until every process of the run is here (a no-op in a single process)."""
    from culture_probe.engine import parallel

    parallel.barrier(parallel.world()[1])


def is_main_process() -> bool:
    """Rank 0 (or a single process): the only writer of run files."""
    from culture_probe.engine import parallel

    return parallel.world()[0] == 0


def execute(
    task: Task,
    rows: Sequence[Mapping[str, Any]],
    first: list[Probe],
    scorer: ScorerProtocol,
    settings: RunSettings,
    done: list[Record],
    writer: rundir.RecordWriter,
    progress: bool,
    log: ProcessLog,
) -> list[Record]:
    """Run every stage's probes that are not done yet (`first`: the first stage's, already built);
    returns all records in probe order. Each chunk's records are written, then noted in `log` with
    what the engine has cut to fit the model in the stage so far.
    """
    done_by_key = {(r.stage, r.key): r for r in done}
    records: list[Record] = []
    for stage in task.stage_names:
        probes = (
            first
            if stage == task.stage_names[0]
            else task.build_probes(rows, stage=stage, previous=records)
        )
        # later stages ask only the first's items
        if settings.limit is not None or settings.shard is not None:
            sampled = {p.item_id for p in first}
            probes = [p for p in probes if p.item_id in sampled]
        pending = [p for p in probes if (stage, p.key) not in done_by_key]
        # load a stage's own model only then
        needs_model = any(not isinstance(p, Skipped) for p in pending)
        stage_scorer = _scorer_for(task, stage, scorer, settings) if needs_model else None
        refuse_ahead(stage_scorer, pending)
        fresh = {}
        with _counting_cuts(stage_scorer, task.config):
            for chunk in _answers(pending, stage_scorer, progress, f"{task.config} {stage}"):
                for probe, output in chunk:
                    record = task.to_record(probe, output, stage=stage)
                    writer.append(record)
                    fresh[probe.key] = record
                log.answered(stage, len(chunk), cut_so_far(stage_scorer))
        records += [fresh.get(p.key) or done_by_key[stage, p.key] for p in probes]
    return records


class ChecksAhead(Protocol):
    """A model that can say, before any request, what it cannot answer (a served model:
    `ServedScorer`).
    """

    def check_scoring(self, requests: Sequence[ScoreRequest], options: ScoreOptions) -> None:
        """Raise for requests it cannot score with `options`."""
        ...

    def check_generation(self, options: GenerateOptions) -> None:
        """Raise for generation options it cannot take."""
        ...


def checks_ahead(scorer: object) -> TypeGuard[ChecksAhead]:
    """Whether `scorer` says ahead what it cannot answer (`ChecksAhead`)."""
    return getattr(scorer, "check_scoring", None) is not None


def refuse_ahead(scorer: ScorerProtocol | None, probes: Sequence[Probe]) -> None:
    """A stage its model cannot answer (a served model asked for what a server cannot serve) is
    refused before the stage's first request, not after the requests before the first such probe.
    """
    if not checks_ahead(scorer):
        return
    scoring: dict[ScoreOptions, list[ScoreRequest]] = {}
    for probe in probes:
        if isinstance(probe, ScoreProbe):
            scoring.setdefault(probe.options, []).append(probe.request)
    for options, requests in scoring.items():
        scorer.check_scoring(requests, options)
    for generating in {p.options for p in probes if isinstance(p, GenerateProbe)}:
        scorer.check_generation(generating)


class CountsCuts(Protocol):
    """A scorer that counts what it cuts to fit its input limit: a backend (`Backend.recording`),
    not a served model.
    """

    truncation: Truncation

    def recording(self, config: str) -> AbstractContextManager[None]:
        """Count afresh inside the block."""
        ...


def counts_cuts(scorer: object) -> TypeGuard[CountsCuts]:
    """Whether `scorer` counts what it cuts to fit its input limit (`Scorer.recording`; not a served
    model).
    """
    return getattr(scorer, "recording", None) is not None


def cut_so_far(scorer: ScorerProtocol | None) -> Truncation | None:
    """What `scorer` has cut since its count began (`_counting_cuts`); None for a scorer that does
    not count.
    """
    return scorer.truncation if counts_cuts(scorer) else None


@contextmanager
def _counting_cuts(scorer: ScorerProtocol | None, config: str) -> Iterator[None]:
    """Count what `scorer` cuts to fit its input limit afresh inside the block (its warning names
    `config`; read `scorer.truncation` in it); a scorer that does not count (served, or a stand-in)
    is asked as it is.
    """
    if not counts_cuts(scorer):
        yield
        return
    with scorer.recording(config):
        yield


def _scorer_for(
    task: Task, stage: str, scorer: ScorerProtocol, settings: RunSettings
) -> ScorerProtocol:
    """The run's scorer, or the stage's own model (an LLM judge), loaded with `stage_settings`."""
    other = task.stage(stage).model
    if other is None:
        return scorer
    return stage_models.model_spec(other, stage_models.stage_settings(settings)).load()


def _answers(
    probes: list[Probe], scorer: ScorerProtocol | None, progress: bool, label: str
) -> Iterator[list[tuple[Probe, Any]]]:
    """(probe, output) pairs in probe order, a chunk at a time, computed under a progress bar with
    an ETA, labelled with the config and stage (`fmlama_en main`), so that a suite's bars say which
    config is at 21%. The bar moves as the engine finishes each batch (`reporting`, where the scorer
    reports), not only at each chunk's end; the next engine call's requests are prepared while the
    model runs the current one (`prefetch`, where it can).
    """
    from tqdm.auto import tqdm

    bar = tqdm(
        total=len(probes), desc=label, unit="probe", disable=not progress or not is_main_process()
    )
    chunks = [probes[start : start + CHUNK] for start in range(0, len(probes), CHUNK)]
    calls: list[Call] = [
        (c, kind, options, indices)
        for c, chunk in enumerate(chunks)
        for (kind, options), indices in _groups(chunk)
    ]
    moved = [0]

    def advance(n: int) -> None:
        moved[0] += n
        bar.update(n)

    reporting = getattr(scorer, "reporting", None)
    try:  # closed on an error too, so that the error's line starts on a line of its own
        with reporting(advance) if reporting is not None else nullcontext():
            at = 0
            for c, chunk in enumerate(chunks):
                outputs: list[Any] = [None] * len(chunk)
                while at < len(calls) and calls[at][0] == c:
                    _prefetch(scorer, calls[at + 1] if at + 1 < len(calls) else None, chunks)
                    _, kind, options, indices = calls[at]
                    asked = ASK[kind](scorer, [chunk[i] for i in indices], options)
                    for i, result in zip(indices, asked, strict=True):
                        outputs[i] = result
                    at += 1
                yield list(zip(chunk, outputs, strict=True))
                # what the engine did not report: skipped probes, repeats, answers from the cache, a
                # served model
                if len(chunk) > moved[0]:
                    bar.update(len(chunk) - moved[0])
                moved[0] = 0
    finally:
        bar.close()


#: how each probe kind is asked: the engine call over a group of probes that share one options
#: object
ASK: dict[type, Callable[[Any, list[Any], Any], list[Any]]] = {
    ScoreProbe: lambda scorer, probes, options: scorer.score([p.request for p in probes], options),
    GenerateProbe: lambda scorer, probes, options: scorer.generate(
        [p.prompt for p in probes], options
    ),
    FillMaskProbe: lambda scorer, probes, options: [
        best[0][0] for best in scorer.fill_mask([p.left for p in probes], options)
    ],
}


def _groups(chunk: list[Probe]) -> list[tuple[tuple[type, Any], list[int]]]:
    """The engine calls of one chunk: its probes grouped by kind and options (one call each), in
    order of first appearance; a skipped probe asks nothing (its record says why).
    """
    groups: dict[tuple[type, Any], list[int]] = {}
    for i, probe in enumerate(chunk):
        if isinstance(probe, Skipped):
            continue
        if type(probe) not in ASK:
            raise CultureProbeError(f"Not a probe: {probe!r}")
        groups.setdefault((type(probe), probe.options), []).append(i)
    return list(groups.items())


def _prefetch(scorer: ScorerProtocol | None, call: Call | None, chunks: list[list[Probe]]) -> None:
    """Have the scorer prepare the next scoring call's requests in the background, where it can
    (`Backend.prefetch`).
    """
    prefetch = getattr(scorer, "prefetch", None)
    if prefetch is None or call is None or call[1] is not ScoreProbe:
        return
    c, _, options, indices = call
    prefetch(
        [p.request for p in (chunks[c][i] for i in indices) if isinstance(p, ScoreProbe)], options
    )
