"""The protocol base class: how a benchmark's rows become engine probes, records and metrics.

Adding a task
-------------
1. Write the data module `culture_probe/data/<bench>.py` (builder + `INFO`); its configs are the run names.
2. Write `culture_probe/tasks/<bench>.py` (same module name) defining a `Task` subclass and
   `TASK = ThatClass`. The registry (`culture_probe.tasks.task_for`) finds it by that convention: no registration call.
3. In the subclass:
   - `Options`: a frozen dataclass whose fields are every switch that changes a number (defaults = the paper's
     protocol, compat flags for upstream bugs). Users pass them as `run(config, model, with_country=True)` or
     `--option with_country=true`; they land in the run's `config.json`.
   - `deviations`: the protocol's deviation log (`Deviation(id, description)`), recorded in every run.
   - three hooks:
     - `_probes(rows, stage, previous)`: yield `ScoreProbe`/`GenerateProbe`s, each tied to an item id (one item
       may have several probes: templates, runs; `tag` tells them apart). `self.kind` ("causal", "masked",
       "seq2seq") tells which prompt form the model needs; `self.options`, `self.seed`, `self.config` are set.
     - `_record(probe, output)`: one JSON-able dict for `items.jsonl` from the probe and its engine output
       (`CandidateScores` for a score probe, the generated `str` for a generate probe). Records must carry
       what the metrics need (gold, prediction, groups): metrics are recomputed from records alone, which is what
       makes `--resume` and `culture-probe report` work.
     - `_metrics(records)`: the metrics dict (`metrics.json`), computed with `culture_probe.metrics`.
   - optionally `sections(records, metrics)`: the report's views (tables, bar charts with bootstrap intervals,
     heatmaps, language x country grids) as plain data that `culture_probe.report` renders.
   - optionally `stages` (e.g. `("answer", "judge")`) and `stage_model(stage)`: a later stage's probes are
     built from the earlier stages' records (`previous`), and may run on another model (an LLM judge).
4. Test it: prompts as exact strings against the paper, end to end on a few rows with a tiny model.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Union

from culture_probe.data.card import Deviation
from culture_probe.engine.types import CandidateScores, ScoreRequest
from culture_probe.errors import CultureProbeError, TemplateError, UnknownNameError, UnsupportedModelError

Kind = Literal["causal", "masked", "seq2seq"]
Record = dict[str, Any]


# ---------------------------------------------------------------- probes: what the engine is asked


@dataclass(frozen=True)
class ScoreProbe:
    """Score the candidates of `request` for item `item_id`; `tag` tells apart several probes of one item.

    `meta` (JSON-able: gold, groups, template id) is copied into the probe's record as is.
    """

    item_id: str
    request: ScoreRequest
    tag: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False)
    masked_method: Literal["typed", "l2r"] = "typed"
    score_right: bool = False
    keep_tokens: bool = False
    seq2seq_style: Literal["sentinel", "plain"] = "sentinel"

    @property
    def key(self) -> str:
        """Unique within a run: the resume key in items.jsonl."""
        return f"{self.item_id}#{self.tag}" if self.tag else self.item_id


@dataclass(frozen=True)
class GenerateProbe:
    """Generate greedily from `prompt` for item `item_id` (`chat=True` applies the model's chat template, after a
    `system` turn when one is given); with `temperature` (and `seed`), sample as `Scorer.generate` does.
    """

    item_id: str
    prompt: str
    max_new_tokens: int
    tag: str = ""
    chat: bool = False
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False)
    system: str | None = None
    temperature: float | None = None
    seed: int | None = None
    add_special_tokens: bool | None = None  # None: the engine's rule (plain prompts yes, chat prompts no)

    @property
    def key(self) -> str:
        """Unique within a run: the resume key in items.jsonl."""
        return f"{self.item_id}#{self.tag}" if self.tag else self.item_id


@dataclass(frozen=True)
class FillMaskProbe:
    """Predict the vocabulary piece at one mask put after `left` (separator rule `sep`) for item `item_id`;
    masked models only (`Scorer.fill_mask`). The output is the best piece's text.
    """

    item_id: str
    left: str
    tag: str = ""
    sep: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def key(self) -> str:
        """Unique within a run: the resume key in items.jsonl."""
        return f"{self.item_id}#{self.tag}" if self.tag else self.item_id


@dataclass(frozen=True)
class Skipped:
    """An item (or one of its probes) the protocol cannot ask, with the reason: recorded, counted, not run."""

    item_id: str
    reason: str
    tag: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def key(self) -> str:
        """Unique within a run: the resume key in items.jsonl."""
        return f"{self.item_id}#{self.tag}" if self.tag else self.item_id


Probe = ScoreProbe | GenerateProbe | FillMaskProbe | Skipped
Output = CandidateScores | str | None


# ---------------------------------------------------------------- views: what the report shows


@dataclass(frozen=True)
class Table:
    """A markdown table: `rows` are sequences aligned with `columns`."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]


@dataclass(frozen=True)
class Bars:
    """Per-group bars of the mean of per-item values, with bootstrap 95% intervals (e.g. P@1 per culture)."""

    values: Mapping[str, Sequence[float]]
    ylabel: str
    scale: float = 1.0  # 100 turns 0/1 hits into percentages
    title: str = ""  # default: the section's title


@dataclass(frozen=True)
class Heatmap:
    """A matrix of values (rows x columns), e.g. P@1 per predicate x culture; None cells are blank."""

    row_labels: tuple[str, ...]
    col_labels: tuple[str, ...]
    values: tuple[tuple[float | None, ...], ...]
    label: str
    # cells to outline, e.g. X-FaKT's associated (language, country) pairs
    highlight: tuple[tuple[int, int], ...] = ()
    title: str = ""  # default: the section's title


@dataclass(frozen=True)
class Section:
    """One part of report.md: a heading, text, tables and figures (each figure becomes a PNG)."""

    title: str
    text: str = ""
    tables: tuple[Table, ...] = ()
    figures: tuple[Bars | Heatmap, ...] = ()


# ---------------------------------------------------------------- the base class


@dataclass(frozen=True)
class NoOptions:
    """A task without protocol switches."""


class Task:
    """One benchmark's protocol. Subclasses set `Options`, `deviations` and write the three hooks."""

    Options: ClassVar[type] = NoOptions
    deviations: ClassVar[tuple[Deviation, ...]] = ()
    stages: ClassVar[tuple[str, ...]] = ("main",)
    #: kinds of model the protocol supports (an UnsupportedModelError names them otherwise)
    kinds: ClassVar[tuple[str, ...]] = ("causal", "masked", "seq2seq")
    #: whether `self.seed` changes a number (random sampling); only then must a resumed run keep its seed
    seeded: ClassVar[bool] = False

    def __init__(self, config: str, options: Any = None, *, kind: Kind, seed: int = 0):
        self.config = config
        self.options = options if options is not None else self.Options()
        self.kind = kind
        self.seed = seed
        if kind not in self.kinds:
            raise UnsupportedModelError(
                f"{type(self).__name__} cannot probe a {kind!r} model; it supports {', '.join(self.kinds)}. "
                "Pick a model of a supported kind, or force one with kind=."
            )

    # ------------------------------------------------------------ public API (used by the runner and report)

    def build_probes(
        self, rows: Sequence[Mapping[str, Any]], *, stage: str | None = None,
        previous: Sequence[Record] = (), limit: int | None = None,
    ) -> list[Probe]:
        """Every probe of `stage` (default: the first); `limit` keeps the probes of the first N items."""
        probes = list(self._probes(rows, stage or self.stages[0], previous))
        keys = [p.key for p in probes]
        if len(set(keys)) != len(keys):
            raise CultureProbeError(
                f"{type(self).__name__} built two probes with one key; give them distinct tags."
            )
        return probes if limit is None else first_items(probes, limit)

    def to_record(self, probe: Probe, output: Output, *, stage: str | None = None) -> Record:
        """The items.jsonl line of one answered probe: id, key, tag, stage, the probe's meta, then `_record`'s
        fields (a `Skipped` probe gets `skipped: reason` instead).
        """
        record = {"id": probe.item_id, "key": probe.key, "tag": probe.tag, "stage": stage or self.stages[0],
                  **probe.meta}
        if isinstance(probe, Skipped):
            record["skipped"] = probe.reason
        else:
            record.update(self._record(probe, output))
        return record

    def compute_metrics(self, records: Sequence[Record]) -> dict[str, Any]:
        """Metrics from records alone (so a resumed run and `culture-probe report` give the same numbers)."""
        return self._metrics(list(records))

    def sections(self, records: Sequence[Record], metrics: Mapping[str, Any]) -> list[Section]:
        """The report's views; the default shows the scalar metrics as one table."""
        rows = tuple((k, v) for k, v in flatten(metrics).items() if isinstance(v, (int, float)))
        return [Section("Metrics", tables=(Table(("metric", "value"), rows),))]

    def describe(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Protocol facts worth recording in config.json (e.g. candidate-set sizes and hashes)."""
        return {}

    def stage_model(self, stage: str) -> str | None:
        """The model that answers `stage` (None = the run's model); e.g. an LLM judge for X-FaKT."""
        return None

    def select_language(self, rows: Sequence[Mapping[str, Any]], language: str) -> list[Mapping[str, Any]]:
        """Rows asked in `language` (column `language` or `lang`); an unknown language is an error."""
        column = next((c for c in ("language", "lang", "prompt_lang") if rows and c in rows[0]), None)
        if column is None:
            raise CultureProbeError(f"Config {self.config!r} has one language; drop --language {language!r}.")
        present = {r[column] for r in rows}
        if language not in present:
            raise UnknownNameError("language", language, present, fix=f"Config {self.config!r} has these.")
        return [r for r in rows if r[column] == language]

    def describe_deviations(self) -> list[dict[str, str]]:
        """The deviation log as recorded in config.json."""
        return [dataclasses.asdict(d) for d in self.deviations]

    # ------------------------------------------------------------ hooks

    def _probes(
        self, rows: Sequence[Mapping[str, Any]], stage: str, previous: Sequence[Record]
    ) -> Iterable[Probe]:
        raise NotImplementedError

    def _record(self, probe: Probe, output: Output) -> Record:
        raise NotImplementedError

    def _metrics(self, records: list[Record]) -> dict[str, Any]:
        raise NotImplementedError


# ---------------------------------------------------------------- helpers shared by tasks


def first_items(probes: Sequence[Probe], limit: int) -> list[Probe]:
    """The probes of the first `limit` distinct items, in probe order."""
    if limit < 1:
        raise CultureProbeError(f"limit must be at least 1, got {limit}.")
    kept: set[str] = set()
    out = []
    for probe in probes:
        if probe.item_id not in kept and len(kept) >= limit:
            continue
        kept.add(probe.item_id)
        out.append(probe)
    return out


def split_slot(template: str, slot: str) -> tuple[str, str]:
    """(left, right) of the one `slot` in a filled template; a missing or repeated slot is a TemplateError."""
    parts = template.split(slot)
    if len(parts) != 2:
        raise TemplateError(
            f"Template {template!r} must contain the slot {slot!r} exactly once, found {len(parts) - 1}."
        )
    return parts[0], parts[1]


def ranked_candidates(scores: CandidateScores, by: Literal["mean", "sum"] = "mean") -> list[str]:
    """Candidates best first; ties go to fewer tokens, then code-point order (DLAMA/FmLAMA rule)."""
    values = scores.scores(by)
    order = sorted(range(len(scores.candidates)),
                   key=lambda i: (-float(values[i]), int(scores.n_tokens[i]), scores.candidates[i]))
    return [scores.candidates[i] for i in order]


def all_scores(output: CandidateScores) -> dict[str, list[Any]]:
    """Every candidate's summed log-prob, token count and (when kept) per-token log-probs, in the request's
    candidate order: what any other normalisation needs later (spec convention; large, so opt-in).
    """
    scores: dict[str, list[Any]] = {"sum_logprob": output.sum_logprob.tolist(), "n_tokens": output.n_tokens.tolist()}
    if output.token_logprobs is not None:
        scores["token_logprobs"] = [t.tolist() for t in output.token_logprobs]
    return scores


def parse_options(options_type: type, values: Mapping[str, Any]) -> Any:
    """An `Options` instance from keyword values; strings (`--option k=v`) are converted by field type."""
    fields = {f.name: f for f in dataclasses.fields(options_type)}
    hints = typing.get_type_hints(options_type)
    converted = {}
    for name, value in values.items():
        if name not in fields:
            raise UnknownNameError(
                "option", name, fields, fix=f"These are the options of {options_type.__qualname__}."
            )
        converted[name] = _convert(name, value, hints[name]) if isinstance(value, str) else value
    return options_type(**converted)


def _convert(name: str, text: str, hint: Any) -> Any:
    """Convert a command-line string to the field's type (bool, int, float, str, Literal, Optional, tuple)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    origin = typing.get_origin(hint)
    if origin is Literal:
        if text not in [str(a) for a in args]:
            raise UnknownNameError(f"value of option {name}", text, [str(a) for a in args])
        return next(a for a in args if str(a) == text)
    if origin in (Union, types.UnionType):
        if text.lower() in ("none", "null"):
            return None
        return _convert(name, text, args[0])
    if origin in (dict, Mapping) or hint is dict:
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            raise CultureProbeError(f"Option {name} takes a JSON object, got {text!r}.") from None
    if origin is tuple:
        return tuple(_convert(name, part, args[0]) for part in text.split(",") if part)
    if hint is bool:
        if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise CultureProbeError(f"Option {name} takes true or false, got {text!r}.")
        return text.lower() in ("true", "1", "yes")
    if hint in (int, float):
        try:
            return hint(text)
        except ValueError:
            raise CultureProbeError(f"Option {name} takes a {hint.__name__}, got {text!r}.") from None
    return text


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}: how nested metrics are shown in tables and compared across runs."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def iter_groups(records: Iterable[Record], *keys: str) -> Iterator[tuple[tuple[Any, ...], list[Record]]]:
    """Records grouped by the values of `keys`, groups in sorted order."""
    groups: dict[tuple[Any, ...], list[Record]] = {}
    for record in records:
        groups.setdefault(tuple(record[k] for k in keys), []).append(record)
    for group_key in sorted(groups, key=lambda k: tuple(map(str, k))):
        yield group_key, groups[group_key]


def options_dict(options: Any) -> dict[str, Any]:
    """A JSON-able dict of an Options instance (tuples become lists)."""
    return json_ready(dataclasses.asdict(options))


def json_ready(value: Any) -> Any:
    """Tuples -> lists, numpy scalars -> Python numbers, recursively."""
    if isinstance(value, Mapping):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    return value

