"""A run's config.json, typed: `RunRecord.from_json` reads it (also as earlier versions wrote it)
into the fields that reports, suites, the board and `--resume` read, so that no reader digs through
nested dicts with `.get(...) or {}`; `to_json` gives back the dict as written, so config.json stays
the file of record.

The parts every reader uses are typed (the model, the run settings, the benchmark card, versions,
the `--limit` subset); the benchmark's own parts (options, its protocol description, deviations,
resources, stage models) stay mappings, as each benchmark's report module reads them.

Both files a run writes for its readers are checked when read: every field of config.json the record
holds, and the parts of metrics.json that the reports, the board, `compare`, `consistency` and suite
summaries read (`read_metrics`: the results block, the skipped probes, the truncation and
consistency records), each against its type, numbers finite, every count (a whole number: `n`,
`n_probes`, `planned.probes`) 0 or more, every interval holding its value (ci_low <= value <=
ci_high) and the headline metric's estimate present; neither nested deeper than `MAX_DEPTH`. A value
of another type or range (a string `model`, a NaN estimate, `n: -5`, an interval [90, 10] around 75)
is one line naming the file and the field, not a traceback in a reader, nor a number shown, or a run
left off, without a word. The bytes are never changed.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict, Union, cast

from culture_probe.errors import SourceFormatError
from culture_probe.util.typecheck import check_document, read_dataclass

# what a damaged file's one-line error says to do
CONFIG_FIX = (
    "the run folder is damaged: restore the file, or run the config again into a new --out."
)
METRICS_FIX = (
    "the run folder is damaged: restore the file, or delete it and repeat the run's command with --resume, which "
    "recomputes it from items.jsonl."
)
RECORD_FIX = (
    "the run folder is damaged: restore the file, or delete that line and resume the run (--resume), which asks its "
    "probe again."
)

# run settings a config.json written before issue 27 kept in `run`, and now in `model_args`
# (`upgraded`)
MOVED_TO_MODEL_ARGS = ("dtype", "revision")
# deeper than any document a run writes (metrics.json: 6 levels), and well within what its readers'
# recursion (copy.deepcopy, json, the report modules) goes to: a deeper one is damage, refused
# before any of them reads it
MAX_DEPTH = 64


def upgraded(config: Mapping[str, Any]) -> dict[str, Any]:
    """A config.json as this version writes it, from one an earlier version wrote: the model's
    `dtype` and `revision`, kept in `run` before `model_args` became their only home
    (`MOVED_TO_MODEL_ARGS`), move there, so that `report`, `compare` and `--resume` read older runs
    as they read new ones.
    """
    config = dict(config)
    run = config.get("run")
    kept = config.get("model_args") or {}
    if (
        not isinstance(run, dict)
        or not isinstance(kept, dict)
        or not any(key in run for key in MOVED_TO_MODEL_ARGS)
    ):
        return config  # nothing to move (or a damaged block, which `RunRecord.from_json` names)
    moved = {key: run[key] for key in MOVED_TO_MODEL_ARGS if run.get(key) is not None}
    return {
        **config,
        "run": {key: value for key, value in run.items() if key not in MOVED_TO_MODEL_ARGS},
        "model_args": {**moved, **kept},
    }


class _AppliedDeviation(TypedDict):
    id: str
    description: str


class AppliedDeviation(_AppliedDeviation, total=False):
    """One entry of config.json's `deviations`: a difference from the upstream code that concerns
    the run, with the side that applied (`tasks.deviations.Deviation.record` writes it).
    """

    when: str
    side: str
    upstream: str


class _Subset(TypedDict):
    sampled: int


class Subset(_Subset, total=False):
    """config.json's `subset`: what a --limit run drew (`runner.subset_of` writes it)."""

    unit: str
    strata: list[str]
    items: int
    seed: int | None
    limit: int | float | str | None
    smoke_limit: int
    parallel: dict[str, Any]


class Planned(TypedDict, total=False):
    """config.json's `planned`: the first stage and the probes it planned (what INCOMPLETE k/N
    counts against).
    """

    stage: str
    probes: int


@dataclass(frozen=True)
class ModelRecord:
    """config.json's `model`: the name it was given, its kind, its identity (what `--resume`
    compares), and what a planted model was trained on.
    """

    spec: str = ""
    # None: a run record that does not say (the reports then assume the benchmark's own)
    kind: str | None = None
    identity: Any = None
    planted: str | None = None
    loaded_object: bool = False

    @classmethod
    def from_json(cls, data: Any, source: str = "config.json") -> ModelRecord:
        """The block as written (keys missing in partial or older records take their defaults), read
        from `source`.
        """
        return read_dataclass(cls, data, source, "model", CONFIG_FIX)


@dataclass(frozen=True)
class SettingsRecord:
    """config.json's `run`: the run settings (`RunSettings.recorded`); `values` holds every one of
    them, as the Reproduce command spells them back.
    """

    limit: int | float | str | None = None
    seed: int | None = None
    language: str | None = None
    protocol: str = "default"  # runs made before the profiles ran the library's protocol
    data_dir: str | None = None
    corrected: bool = False
    # `--shard K/N`: the slice of the run this folder holds (None: all of it)
    shard: str | None = None
    values: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, data: Any, source: str = "config.json") -> SettingsRecord:
        """The block as written (keys missing in partial or older records take their defaults), read
        from `source`.
        """
        return read_dataclass(cls, data, source, "run", CONFIG_FIX, values=data)


@dataclass(frozen=True)
class BenchmarkRecord:
    """config.json's `benchmark`: the card of the benchmark and the fingerprint of the rows the run
    probed.
    """

    name: str | None = None
    title: str = ""
    version: str = ""
    description: str = ""
    languages: tuple[str, ...] = ()
    rows: int | None = None
    rows_sha256: str | None = None
    custom_rows: bool = False
    rows_file: str | None = None  # the run directory's copy of custom rows, when saved

    @classmethod
    def from_json(cls, data: Any, source: str = "config.json") -> BenchmarkRecord:
        """The block as written (keys missing in partial or older records take their defaults), read
        from `source`.
        """
        return read_dataclass(cls, data, source, "benchmark", CONFIG_FIX)

    @property
    def saved_rows(self) -> str | None:
        """The run directory's file of custom rows, when the run saved one (what `--rows`
        repeats).
        """
        return self.rows_file if self.custom_rows else None


@dataclass(frozen=True)
class RunRecord:
    """A run's config.json, typed, both ways: the runner builds it (`runner.describe_run`) and the
    run folder writes `to_json()`; readers get it from `RunRecord.from_json`. `to_json()` is the
    dict it was made from (upgraded to this version's shape), unknown keys included, so a record
    read and written back leaves the file as it was.
    """

    config: str  # the benchmark config the run probed
    model: ModelRecord = ModelRecord()
    run: SettingsRecord = SettingsRecord()
    benchmark: BenchmarkRecord = BenchmarkRecord()
    model_args: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)  # the protocol options, by name
    # the options that change each stage's records (None: a run made before they were recorded)
    stage_options: Mapping[str, Sequence[str]] | None = None
    # whether the seed can change a number (a protocol that draws, or a --limit subset)
    seed_used: bool = True
    # the task's description of its protocol
    protocol: Mapping[str, Any] = field(default_factory=dict)
    deviations: tuple[AppliedDeviation, ...] = ()
    subset: Subset | None = None  # what a --limit run probed (None: every item)
    planned: Planned = field(default_factory=Planned)  # the first stage and its probe count
    versions: Mapping[str, Any] = field(default_factory=dict)
    # the side data the run read (templates, word vectors, ...): each one's source and sha256
    resources: Mapping[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0
    data: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = "config.json") -> RunRecord:
        """A config.json's contents (read from `source`), as this version or an earlier one wrote
        them (`upgraded`); a part a partial or older record lacks takes its default, as every reader
        took it before; a part of another type is the damaged file's one-line error, naming the
        field.
        """
        check_document(data, Mapping[str, Any], source, CONFIG_FIX, "the document")
        check_depth(data, source, CONFIG_FIX)
        data = upgraded(copy.deepcopy(dict(data)))
        config, subset = data.get("config", ""), data.get("subset") or None
        check_document(config, str, source, CONFIG_FIX, "config")
        check_document(subset, Subset | None, source, CONFIG_FIX, "subset")
        record = read_dataclass(
            cls,
            data,
            source,
            "",
            CONFIG_FIX,
            config=config,
            model=ModelRecord.from_json(data.get("model") or {}, source),
            run=SettingsRecord.from_json(data.get("run") or {}, source),
            benchmark=BenchmarkRecord.from_json(data.get("benchmark") or {}, source),
            subset=subset,
            data=data,
        )
        _check_counts(record, RunRecord, source, CONFIG_FIX)
        if record.duration_s < 0:
            raise SourceFormatError(
                f"`duration_s` should be 0 or more, got {record.duration_s!r}; {CONFIG_FIX}",
                path=source,
            )
        return record

    def to_json(self) -> dict[str, Any]:
        """config.json's contents: a copy of the dict this record was read from."""
        return copy.deepcopy(dict(self.data))

    def updated(self, changes: Mapping[str, Any]) -> RunRecord:
        """The record with config.json's top-level keys in `changes` set (a finished run's
        provenance), checked.
        """
        return RunRecord.from_json({**self.data, **changes})

    @property
    def repeats_the_paper(self) -> bool:
        """Whether the run can be set against the paper's numbers: the released data (not custom
        rows, not the corrected variant) and all of it (no --limit subset). Reference lines of the
        paper's values only then.
        """
        return not (self.subset or self.benchmark.custom_rows or self.run.corrected)


# ---------------------------------------------------------------- metrics.json, as its readers read
# it


class _IntervalFields(TypedDict):
    stderr: float | None
    ci_low: float | None
    ci_high: float | None


class IntervalFields(_IntervalFields, total=False):
    """An interval as the results schema writes it (`metrics.Interval.fields`): standard error and
    bounds (None where undefined), and `no_interval`, why there is none.
    """

    no_interval: str


class _Estimate(TypedDict):
    value: float | None
    n: int


class Estimate(_Estimate, IntervalFields, total=False):
    """One number of metrics.json's results block (`metrics.results.estimate` writes it): its value,
    its interval (`IntervalFields`), and the units it averages (`n_observations`: the answers they
    hold, where a unit holds several).
    """

    n_observations: int


#: a results block's `by_<stratum>` value (`STRATUM_KEY`): stratum label (a language, culture,
#: predicate, entity type...) -> {metric: Estimate}. A TypedDict of Python 3.11 cannot name such
#: keys (PEP 728's `extra_items` is not in `typing` before 3.15, and mypy 2.4 does not read it),
#: so this one alias types them wherever they are written (`with_strata`), checked
#: (`read_metrics`), read (`ResultsTable.strata`) and declared in the JSON Schema
#: (`culture_probe.schemas`).
Strata = dict[str, dict[str, Estimate]]
#: the keys of a results block that hold `Strata`: `by_` and the stratum's name
STRATUM_KEY = r"^by_[a-z_]+$"


class Chance(TypedDict, total=False):
    """A metric's chance level, how it was computed, and where a score is no mean the range random
    models fall in.
    """

    value: float
    low: float
    high: float
    method: str


class Intervals(TypedDict, total=False):
    """How the results block's intervals were computed: one method, or one per metric."""

    method: str
    methods: dict[str, str]
    confidence: float
    n_resamples: int | None
    seed: int | None


class DesignJson(TypedDict, total=False):
    """`results.design` as metrics.json holds it: a `SamplingDesign`'s JSON form."""

    unit: str
    repeated: list[str]
    crossed: str | None
    observations: str | None
    note: str


@dataclass(frozen=True)
class SamplingDesign:
    """What a benchmark draws at random, which its intervals and paired tests follow
    (docs/results.md, "Sampling designs"): the `unit` drawn from a population (`n` counts these),
    the factors `repeated` on one unit (answers that share a unit are not independent: a fact asked
    in two languages, a dish under several templates), a random factor `crossed` with the units
    (drawn once and shared by every unit of a stratum, as CAMeL's entity samples fill every prompt
    of a type, so that its spread joins the interval), what `n_observations` counts where a unit
    holds several rows, and a `note` a reader needs. A protocol declares it; metrics.json's
    `results.design` holds it (`to_json`), and `ResultsTable` reads it back (`from_json`).
    """

    unit: str
    repeated: tuple[str, ...] = ()
    crossed: str | None = None
    observations: str | None = None
    note: str = ""

    def to_json(self) -> DesignJson:
        """The design as metrics.json's `results.design` gives it."""
        out: DesignJson = {
            "unit": self.unit,
            "repeated": list(self.repeated),
            "crossed": self.crossed,
            "observations": self.observations,
        }
        if self.note:
            out["note"] = self.note
        return out

    @classmethod
    def from_json(cls, value: DesignJson) -> SamplingDesign:
        """The design `to_json` wrote."""
        return cls(
            value["unit"],
            tuple(value.get("repeated", ())),
            value.get("crossed"),
            value.get("observations"),
            value.get("note", ""),
        )


class Results(TypedDict, total=False):
    """metrics.json's `results`, the one schema of every benchmark (its `by_<stratum>` keys hold
    `Strata`, each label -> `{metric: Estimate}`).
    """

    schema_version: int
    headline: str | None
    unit: str | None
    ci: Intervals
    higher_is_better: dict[str, bool | None]
    overall: dict[str, Estimate]
    omitted: dict[str, str]
    warnings: dict[str, str]
    design: DesignJson
    chance: dict[str, Chance]


class CutsJson(TypedDict):
    """Inputs of one kind encoded, and those cut on the left to fit the model: an
    `engine.types.Cuts`'s JSON form.
    """

    encoded: int
    cut: int
    tokens_cut: int
    max_cut: int


class _TruncationJson(TypedDict):
    contexts: CutsJson
    prompts: CutsJson


class TruncationJson(_TruncationJson, total=False):
    """metrics.json's `truncation` (`engine.types.Truncation.to_json`) summed over the processes
    that made the run (`provenance.ProcessLog.truncation`: how many, and those whose counts were not
    kept); a run made before `processes` counted from its last resume (`resumed`).
    """

    resumed: bool
    processes: int
    uncounted: int


class _PairDifference(TypedDict):
    ci_low: float | None
    ci_high: float | None


class PairDifference(_PairDifference, total=False):
    """The paired P@1 difference of two languages on the facts both answered (`n`; `of` says which
    minus which), with its interval (`method`; `stderr`, or why there is none) and its test (Holm-
    adjusted over the run's `n_tests` pairs).
    """

    difference: float | None
    n: int
    of: str
    method: str
    stderr: float | None
    no_interval: str
    p_value: float | None
    p_holm: float | None
    n_tests: int | None


class Unpaired(TypedDict):
    """Facts one language of a pair answered and the other did not."""

    only_a: int
    only_b: int


class _LanguagePair(TypedDict):
    n: int
    both_right: int
    right_only_a: int
    right_only_b: int
    both_wrong: int
    difference: PairDifference
    unpaired: Unpaired


class LanguagePair(_LanguagePair, total=False):
    """Per-fact agreement of two languages (`metrics.consistency.consistency_detail`): the agreement
    table, each language's P@1 on the shared facts (%), the paired difference, what was not paired,
    and the facts RankC compared and those it left out, by why.
    """

    accuracy_a: float
    accuracy_b: float
    rankc_facts: int
    rankc_left_out: dict[str, int]


class Consistency(TypedDict, total=False):
    """metrics.json's `consistency`: how the languages were aligned, RankC's depth, and each pair's
    agreement.
    """

    alignment: str | None
    weight: str
    depth: int
    pairs: dict[str, LanguagePair]


class PlantedPart(TypedDict, total=False):
    """A planted model's headline numbers on one side (its planted items, or the others), or why
    there are none.
    """

    overall: dict[str, Estimate]
    reason: str


class Metrics(TypedDict, total=False):
    """The parts of metrics.json that reports, the board, `compare`, `consistency` and suite
    summaries read; the benchmark's own detail (read by its report module alone, whose failure costs
    its views, not the report) is let be.
    """

    results: Results
    n_probes: int
    n_skipped: int
    skipped: dict[str, int]
    truncation: TruncationJson
    consistency: Consistency
    planted: dict[str, PlantedPart]


@dataclass(frozen=True)
class ResultsTable:
    """metrics.json's results block as its readers use it (`ResultsTable.of(metrics)`): every part
    present, empty where the run has none (no headline when every probe was skipped; no chance
    level, warning or omission where the protocol gave none; a file of an earlier version without
    `design`), and the interval settings (`ci`) and the design as fields, so that
    no reader asks the document `.get(...) or {}`.
    """

    headline: str | None = None
    unit: str | None = None
    overall: dict[str, Estimate] = field(default_factory=dict)
    # stratum -> label -> {metric: Estimate}: the block's `by_<stratum>` keys, which a TypedDict
    # cannot name
    strata: dict[str, Strata] = field(default_factory=dict)
    method: str = ""  # the intervals' methods, joined
    methods: dict[str, str] = field(default_factory=dict)  # each metric's
    confidence: float = 0.95  # a file without `ci.confidence` was written at 95%
    n_resamples: int | None = None
    seed: int | None = None
    higher_is_better: dict[str, bool | None] = field(default_factory=dict)
    omitted: dict[str, str] = field(default_factory=dict)
    warnings: dict[str, str] = field(default_factory=dict)
    chance: dict[str, Chance] = field(default_factory=dict)
    # what the run drew at random; None in a file of an earlier version
    design: SamplingDesign | None = None

    @classmethod
    def of(cls, metrics: Mapping[str, Any] | None) -> ResultsTable:
        """The results block of a metrics document (`Metrics`, as `read_metrics` checked it; None or
        no block: empty).
        """
        block: Mapping[str, Any] = (metrics or {}).get("results") or {}
        ci: Mapping[str, Any] = block.get("ci") or {}
        design = block.get("design")
        return cls(
            headline=block.get("headline"),
            unit=block.get("unit"),
            overall=dict(block.get("overall") or {}),
            strata={k.removeprefix("by_"): v for k, v in block.items() if k.startswith("by_")},
            method=ci.get("method", ""),
            methods=dict(ci.get("methods") or {}),
            confidence=ci.get("confidence", 0.95),
            n_resamples=ci.get("n_resamples"),
            seed=ci.get("seed"),
            higher_is_better=dict(block.get("higher_is_better") or {}),
            omitted=dict(block.get("omitted") or {}),
            warnings=dict(block.get("warnings") or {}),
            chance=dict(block.get("chance") or {}),
            design=SamplingDesign.from_json(design) if design else None,
        )

    @property
    def observations(self) -> str | None:
        """What a unit's answers are called (DLAMA: fact-language answers), where the design
        says.
        """
        return self.design.observations if self.design is not None else None

    def groups(self) -> list[tuple[str, dict[str, Estimate]]]:
        """(group, {metric: Estimate}), as pages list them: "overall", then `<stratum>=<label>`."""
        return [("overall", self.overall)] + [
            (f"{stratum}={label}", estimates)
            for stratum, labels in self.strata.items()
            for label, estimates in labels.items()
        ]

    def by(self, stratum: str) -> Strata:
        """One stratum's label -> {metric: Estimate} ("overall": the one label "all"); empty where
        it has none.
        """
        return {"all": self.overall} if stratum == "overall" else self.strata.get(stratum, {})

    def by_language(self) -> Strata:
        """The breakdown by the question's language, under either name a benchmark gives it (empty:
        none).
        """
        return next((self.strata[k] for k in ("language", "lang") if k in self.strata), {})

    def estimate(self, metric: str | None, label: str | None = None) -> Estimate | None:
        """`metric`'s estimate overall, or for one language (`label`); None where the run has no
        such number.
        """
        block = self.overall if label is None else self.by_language().get(label, {})
        return block.get(metric) if metric else None


def with_strata(results: Results, strata: Mapping[str, Strata]) -> Results:
    """`results` with a `by_<stratum>` key per stratum after its other keys: the one place the
    results block gets keys a TypedDict cannot name (`ResultsTable.strata` reads them back,
    `read_metrics` checks them).
    """
    block = {**results, **{f"by_{name}": labels for name, labels in strata.items()}}
    return cast(Results, block)


def read_metrics(data: Any, source: str = "metrics.json") -> Metrics:
    """metrics.json's contents (read from `source`), checked against what its readers read
    (`Metrics`, and every `results.by_<stratum>` block), every number finite, every count 0 or more,
    every interval around its value, the headline's estimate present, no deeper than `MAX_DEPTH`: a
    part of another type or range is the damaged file's one-line error naming the field, not a
    traceback in a reader nor a number shown as "nan", or with an interval it does not lie in. The
    contents are returned as they are.
    """
    check_depth(data, source, METRICS_FIX)
    check_document(data, Metrics, source, METRICS_FIX)
    results = data.get("results") or {}
    strata = {key: results[key] for key in results if key.startswith("by_")}
    for key, labels in strata.items():
        check_document(labels, Strata, source, METRICS_FIX, f"results.{key}")
    _check_counts(data, Metrics, source, METRICS_FIX)
    _check_counts(strata, dict[str, Strata], source, METRICS_FIX, "results")
    for where, low, value, high in _intervals(data):
        if not _ordered(low, value, high):
            raise SourceFormatError(
                f"`{where}` has the interval [{low!r}, {high!r}] around {value!r}, which does not hold it (an "
                f"interval runs from ci_low up to ci_high, its value between them); {METRICS_FIX}",
                path=source,
            )
    # a document without `overall` (an earlier version's, a run that estimated nothing) has no
    # estimate to lack
    headline = results.get("headline")
    if headline is not None and "overall" in results and headline not in (results["overall"] or {}):
        raise SourceFormatError(
            f"`results.overall` lacks the estimate of the headline metric {headline!r} (`results.headline`); "
            f"{METRICS_FIX}",
            path=source,
        )
    checked: Metrics = data
    return checked


def check_depth(data: Any, source: str, fix: str) -> None:
    """Refuse a document (read from `source`) nested deeper than `MAX_DEPTH` (`fix`: what to do),
    looking level by level: recursion, which the readers after this check use, is what a deep
    document breaks.
    """
    level = [data]
    for _ in range(MAX_DEPTH):
        if not level:
            return
        level = [
            child
            for value in level
            if isinstance(value, (dict, list))
            for child in (value.values() if isinstance(value, dict) else value)
        ]
    if any(isinstance(value, (dict, list)) and value for value in level):
        raise SourceFormatError(
            f"nested deeper than {MAX_DEPTH} levels, which no run writes; {fix}", path=source
        )


# a TypedDict's or dataclass's fields, read once: a metrics.json holds hundreds of estimates
_hints = functools.cache(typing.get_type_hints)


def _counts(value: Any, hint: Any, where: str) -> Iterator[tuple[str, int]]:
    """Every whole number of `value` (a document part, or a dataclass read from one, checked against
    `hint`) that `hint` types as one, with its place, seeds aside: each is a count, never below 0.
    """
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    members = args if origin in (Union, types.UnionType) else (hint,)
    if isinstance(value, int) and not isinstance(value, bool) and int in members:
        yield where, value
    elif dataclasses.is_dataclass(value) or (
        typing.is_typeddict(hint) and isinstance(value, Mapping)
    ):
        for key, inner in _hints(hint).items():
            if key == "seed":  # the one whole number that counts nothing (any a --seed takes)
                continue
            part = getattr(value, key) if dataclasses.is_dataclass(value) else value.get(key)
            yield from _counts(part, inner, f"{where}.{key}" if where else key)
    elif origin in (dict, Mapping) and isinstance(value, Mapping):
        for key, item in value.items():
            yield from _counts(item, args[1], f"{where}.{key}" if where else str(key))
    elif len(members) > 1:
        kinds = [member for member in members if member is not type(None)]
        if len(kinds) == 1:
            yield from _counts(value, kinds[0], where)


def _check_counts(value: Any, hint: Any, source: str, fix: str, where: str = "") -> None:
    """Refuse a count below 0 in `value` (`_counts`), naming the file and the field."""
    for place, count in _counts(value, hint, where):
        if count < 0:
            raise SourceFormatError(
                f"`{place}` should be 0 or more, got {count!r}; {fix}", path=source
            )


def _intervals(data: Metrics) -> Iterator[tuple[str, Any, Any, Any]]:
    """Every interval of the document with its place and the value it is around: each estimate's
    (results overall and by stratum, a planted model's parts) and each language pair's difference.
    """
    results: Mapping[str, Any] = data.get("results") or {}
    blocks = [("results.overall", results.get("overall") or {})]
    blocks += [
        (f"results.{key}.{label}", estimates)
        for key, labels in results.items()
        if key.startswith("by_")
        for label, estimates in labels.items()
    ]
    blocks += [
        (f"planted.{side}.overall", part.get("overall") or {})
        for side, part in (data.get("planted") or {}).items()
    ]
    for where, estimates in blocks:
        for metric, estimate in estimates.items():
            low, value, high = (estimate.get(k) for k in ("ci_low", "value", "ci_high"))
            yield f"{where}.{metric}", low, value, high
    for pair, agreement in ((data.get("consistency") or {}).get("pairs") or {}).items():
        difference = agreement["difference"]
        low, value, high = (difference.get(k) for k in ("ci_low", "difference", "ci_high"))
        yield f"consistency.pairs.{pair}.difference", low, value, high


def _ordered(*numbers: float | None) -> bool:
    """Whether the numbers given (None: not given) rise from left to right, but for float noise
    (runs made before issue 34 could leave a value a rounding error outside its own interval).
    """
    given = [number for number in numbers if number is not None]
    noise = 1e-9 * max((abs(number) for number in given), default=1.0)
    return all(low <= high + noise for low, high in itertools.pairwise(given))
