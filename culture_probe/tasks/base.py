"""The protocol base class: how a benchmark's rows (and declared resources) become engine probes,
records and typed metric inputs. A protocol is pure: it opens no file, reads no environment
variable, keeps no module-level cache and renders nothing; what it needs besides rows its options
declare (`Options.needs`), and the data layer loads it.

Adding a task: see docs/adding-a-benchmark.md. In short, the benchmark folder's `task.py` (its
declaration names it) defines a `Task` subclass and `TASK = ThatClass`. What a protocol declares
are values it holds:

- `Options`: a frozen dataclass whose fields are every switch that changes a number (defaults = the
  paper's protocol), and whose `needs(benchmark)` names the side data those options read
  (`culture_probe.data.resources.Need`). Users pass them as `run(config, model, judge="string")` or
  `--option judge=string`.
- `deviations`: where the protocol differs from the original code, each with when it applies and the
  option values that give the original code's behaviour (the `upstream` profile sets them all:
  `--protocol upstream`).
- `stages`: the `Stage`s probed in turn, each with the model that answers it (None: the run's; an
  LLM judge's name), what that model must be (`ModelNeed`: its kinds, a chat template, the options
  that ask without it, checked before any run folder is made) and the options that change its
  records (so that a resume may change the others).
- `smoke`: how many items of each stratum cell (`strata`) a run needs for its headline numbers, and
  which numbers need them: `--limit smoke` probes that many, and a smaller `--limit` says what it
  will lack before any model loads.
- `parallel` (optional): the probe meta fields that name one item across the config's languages
  (DLAMA: the fact's `uuid`), so that `--limit` draws those units and probes each in every language:
  consistency across languages and paired language comparisons then exist in any subset.
- `design`: what the benchmark draws at random (`SamplingDesign`); `seeded`: whether the seed
  changes a number; `facts`: what config.json records of the protocol.

and it implements four hooks:

- `_configure()` (optional): sets the declared values that follow from the config and the options
  (`stages`, `smoke`, `parallel`, `design`, `seeded`, `facts`), or refuses a config it cannot
  probe; called once, when the task is made.
- `_probes(rows, stage, previous)` yields probes (and may add facts of the rows, such as candidate
  sets, to `facts`);
- `_read(probe, output)` turns one engine output into the record's fields;
- `_metrics(records, skipped)` returns the run's `Scores`: the benchmark's metrics block, each
  headline metric's value per unit (`UnitTable`s, from which the results schema draws intervals),
  and where it has them chance tables, composite numbers, metrics left out with the reason, and
  each answer in the ids its languages share (for consistency across languages). The base counts
  the skipped records per reason; a protocol only looks at them when a metric depends on why
  something was not asked.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from culture_probe.data.registry import Benchmark, resolve
from culture_probe.data.resources import Need
from culture_probe.engine.types import MODEL_KINDS, CandidateScores, ModelKind, ScoreOptions
from culture_probe.errors import (
    CultureProbeError,
    TemplateError,
    UnknownNameError,
    UnsupportedModelError,
)
from culture_probe.metrics.chance import chance_value
from culture_probe.metrics.consistency import (
    PAIR_METRICS,
    AlignedAnswer,
    consistency_detail,
    language_consistency,
    with_language_pairs,
)
from culture_probe.metrics.results import UnitTable, summarize
from culture_probe.record import AppliedDeviation, Chance, Results, SamplingDesign
from culture_probe.tasks.deviations import PROTOCOLS, Deviation
from culture_probe.tasks.filling import slot_request
from culture_probe.tasks.options import NoOptions, parse_options
from culture_probe.tasks.probes import PROBE_KINDS, Output, Probe, Record, ScoreProbe, Skipped
from culture_probe.tasks.sampling import (
    Parallel,
    Smoke,
    strata_cells,
    stratified_items,
    stratified_share,
)

RecordFields = dict[str, Any]


@dataclass(frozen=True)
class ModelNeed:
    """What a stage asks of the model that answers it: one of `kinds`, and a chat template when
    `chat`.

    The task declares it (`Task.model_need`); the runner checks it on the model's config and
    tokenizer before any run folder is made or weights load. `why` says in words what asks for it,
    `instead` the command-line options under which the protocol asks no such thing (e.g. `--option
    mode=rank`), so that a refusal names what works.
    """

    kinds: tuple[str, ...] = MODEL_KINDS
    chat: bool = False
    why: str = ""
    instead: str = ""

    def check_kind(self, kind: str, who: str) -> None:
        """Refuse a model of a kind not in `kinds` (`who`: the protocol or stage asking)."""
        if kind in self.kinds:
            return
        fix = (
            f"Use {self.instead}, or pick a model of a supported kind."
            if self.instead
            else "Pick a model of a supported kind, or force one with --kind."
        )
        why = f" {self.why}." if self.why else ""
        raise UnsupportedModelError(
            f"{who} cannot probe a {kind!r} model; it supports {', '.join(self.kinds)}.{why} {fix}"
        )

    def check_chat(self, tokenizer: Any, model: str) -> None:
        """Refuse a tokenizer without a chat template when the stage asks through one (`model`: its
        name).
        """
        if not self.chat or getattr(tokenizer, "chat_template", None):
            return
        asks = self.why or "The protocol asks through the model's chat template"
        instead = (
            f"Use {self.instead}, or a chat (instruction-tuned) model."
            if self.instead
            else "Use a chat model."
        )
        raise UnsupportedModelError(
            f"{asks}, but the tokenizer of {model!r} has no chat template. {instead}"
        )


@dataclass(frozen=True)
class Stage:
    """One stage of a protocol, as it declares it: its `name`; the `model` that answers it (None:
    the run's model; a Hub id or folder: e.g. X-FaKT's LLM judge), which the runner loads and
    checks; what that model must be (`need`; None: one of the protocol's `kinds`); and the options
    that change its records (`options`; None: every option), which a resumed run compares stage by
    stage (an option of no stage changes only metrics, which every run recomputes).
    """

    name: str
    model: str | None = None
    need: ModelNeed | None = None
    options: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Scores:
    """What a protocol computes from its answered records (`Task._metrics`), typed.

    `detail` is the benchmark's own metrics block (metrics.json, beside `results`); `tables` each
    headline metric's value per unit, from which the results schema draws intervals and a paired
    comparison of two runs resamples; `chance` per metric with a chance level, the table of each
    unit's expected value under a random answer and how that is computed; `composites` the headline
    numbers that are no mean over units (with their own intervals); `omitted` the metrics left out
    of this run, with the reason; `references` reference points of composites computed beside
    them (X-FaKT's random answers), recorded with the chance levels; `warnings` one sentence per
    metric whose number says less than it seems; `aligned` each answer in ids that all the
    benchmark's languages share (the consistency across languages), with `unaligned` saying why
    there are none where that is not the generic reason.
    """

    detail: Mapping[str, Any]
    tables: Sequence[UnitTable]
    chance: Sequence[tuple[UnitTable, str]] = ()
    composites: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    omitted: Mapping[str, str] = dataclasses.field(default_factory=dict)
    references: Mapping[str, Chance] = dataclasses.field(default_factory=dict)
    warnings: Mapping[str, str] = dataclasses.field(default_factory=dict)
    aligned: Sequence[AlignedAnswer] = ()
    unaligned: str | None = None


class Task:
    """One benchmark's protocol. Subclasses declare `Options`, `deviations` and the values below,
    and write the hooks (`_configure`, `_probes`, `_read`, `_metrics`).
    """

    Options: ClassVar[type] = NoOptions
    deviations: ClassVar[tuple[Deviation, ...]] = ()
    #: the stages probed in turn (not a ClassVar: an instance may set its own, from its options)
    stages: tuple[Stage, ...] = (Stage("main"),)
    #: kinds of model the protocol supports (an UnsupportedModelError names them otherwise)
    kinds: ClassVar[tuple[str, ...]] = MODEL_KINDS
    #: whether `self.seed` changes a number (random sampling); only then must a resumed run keep its
    #: seed (an instance may set it, from its options)
    seeded: bool = False
    #: what one item is, as `--limit` counts it (facts, dishes, prompts, questions, proverbs)
    unit: ClassVar[str] = "items"
    #: probe meta fields whose combinations a `--limit` subset draws from in turn (language,
    #: culture, ...)
    strata: ClassVar[tuple[str, ...]] = ()
    #: items per cell of `strata` that the headline numbers need (not a ClassVar: an instance may
    #: set its own)
    smoke: Smoke = Smoke()
    #: string columns the protocol reads as text: custom rows with a null there are refused when
    #: read (a null in a label, number, bool or list column always is)
    text_columns: ClassVar[tuple[str, ...]] = ()
    #: how the facts (and ranked candidates) of the benchmark's languages are matched, by id
    #: (docs/consistency.md); None where its data do not align exactly, so no consistency across
    #: languages is computed
    alignment: ClassVar[str | None] = None
    #: the record fields `Scores.aligned` is read from, by type: checked where runs are read back to
    #: be paired (`culture-probe consistency`), so that a damaged record is named by its line
    aligned_fields: ClassVar[Mapping[str, Any]] = {}
    #: the probe meta fields that name one item in every language (`Parallel`): `--limit` then draws
    #: those units, each probed in every language; None draws items one by one (not a ClassVar: an
    #: instance may set its own)
    parallel: Parallel | None = None
    #: what the benchmark draws at random (`SamplingDesign`), which its unit tables follow and
    #: results.design states (not a ClassVar: an instance may set its own, as X-FaKT's parts do)
    design: SamplingDesign = SamplingDesign("item")
    #: protocol facts config.json records (candidate-set sizes and hashes, the judge, the decoding),
    #: set by `_configure` and, for facts of the rows, by `_probes`
    facts: dict[str, Any]

    def __init__(
        self,
        config: str | Benchmark,
        options: Any = None,
        *,
        kind: ModelKind,
        seed: int = 0,
        resources: Mapping[str, Any] | None = None,
    ):
        self.config = config.name if isinstance(config, Benchmark) else config
        # the runner hands the config down resolved, so that its name is looked up once
        self._benchmark = config if isinstance(config, Benchmark) else None
        self.options = options if options is not None else self.Options()
        self.kind = kind
        self.seed = seed
        self.resources = dict(resources or {})
        self.facts = {}
        self._configure()
        for stage in self.stages:
            # a stage's own model (a judge) is checked by the runner
            if stage.model is None:
                self.stage_need(stage.name).check_kind(kind, type(self).__name__)

    @property
    def stage_names(self) -> tuple[str, ...]:
        """The names of the stages, in the order they are probed."""
        return tuple(stage.name for stage in self.stages)

    def stage(self, name: str) -> Stage:
        """The stage called `name` (an unknown name lists the protocol's)."""
        found = next((s for s in self.stages if s.name == name), None)
        if found is None:
            raise UnknownNameError("stage", name, self.stage_names)
        return found

    def stage_need(self, name: str) -> ModelNeed:
        """What the model answering stage `name` must be: the stage's `need`, else one of the
        protocol's kinds.
        """
        return self.stage(name).need or ModelNeed(self.kinds)

    def stage_options(self, name: str) -> tuple[str, ...]:
        """The options that change stage `name`'s records (config.json's `stage_options`, which a
        resumed run compares): the stage's `options`, else every option.
        """
        declared = self.stage(name).options
        return (
            declared
            if declared is not None
            else tuple(f.name for f in dataclasses.fields(self.options))
        )

    @property
    def benchmark(self) -> Benchmark:
        """The config resolved: the data module, builder config, card, and whether it is a corrected
        variant (a task made from a name, as tests make them, looks it up here).
        """
        return self._benchmark if self._benchmark is not None else resolve(self.config)

    @classmethod
    def needs(cls, config: str | Benchmark, options: Any) -> dict[str, Need]:
        """The side data a run with `options` reads, by key, as its options declare it
        (`Options.needs(benchmark)`; none where they declare nothing): loaded by the data layer into
        `resources` before any model is touched.
        """
        declared = getattr(options, "needs", None)
        return declared(resolve(config)) if declared is not None else {}

    def resource(self, key: str) -> Any:
        """A declared resource's value."""
        if key not in self.resources:
            raise CultureProbeError(
                f"{type(self).__name__} needs the resource {key!r}, which was not given: build the task with "
                "culture_probe.loading.load_task (culture_probe.run does), or pass resources=."
            )
        return self.resources[key]

    # ------------------------------------------------------------ what the runner calls

    def build_probes(
        self,
        rows: Sequence[Mapping[str, Any]],
        *,
        stage: str | None = None,
        previous: Sequence[Record] = (),
    ) -> list[Probe]:
        """Every probe of `stage` (default: the first)."""
        probes = list(self._probes(rows, stage or self.stages[0].name, previous))
        keys = [p.key for p in probes]
        if len(set(keys)) != len(keys):
            raise CultureProbeError(
                f"{type(self).__name__} built two probes with one key; give them distinct tags."
            )
        return probes

    @property
    def limit_unit(self) -> str:
        """What `--limit` counts: the parallel unit where the task has one (DLAMA facts, each in
        every language), else one item (`unit`).
        """
        return self.parallel.unit if self.parallel is not None else self.unit

    @property
    def limit_strata(self) -> tuple[str, ...]:
        """The strata a `--limit` subset draws its units from in turn: `strata`, without the
        language where the units are parallel (a unit holds every language).
        """
        if self.parallel is None:
            return self.strata
        return tuple(name for name in self.strata if name != self.parallel.across)

    def limit_key(self, probe: Probe) -> str:
        """The unit `--limit` draws `probe` with: its parallel unit, else its item."""
        return self.parallel.key(probe) if self.parallel is not None else probe.item_id

    def limit_units(self, probes: Sequence[Probe]) -> int:
        """How many units `--limit` counts in `probes` (`limit_unit`)."""
        return len({self.limit_key(p) for p in probes})

    def parallel_values(self, probes: Sequence[Probe]) -> list[str]:
        """The languages (`Parallel.across` values) every drawn unit is probed in, sorted; none
        without units.
        """
        if self.parallel is None:
            return []
        return sorted({str(p.meta.get(self.parallel.across)) for p in probes})

    def sample(
        self, probes: Sequence[Probe], limit: int | float, known: Set[str] = frozenset()
    ) -> list[Probe]:
        """The probes of `limit` units (`limit_unit`), drawn with the run's seed in turn from each
        stratum (`limit_strata`), so that a smoke run sees every language, culture, predicate or
        type it can, not the first rows of one; a fraction (0 < limit < 1) takes that share of each
        stratum's units instead, keeping the strata's proportions. A parallel unit comes with its
        probes in every language. `known` items (a planted model's) and the others take turns in
        each stratum's draw, so that a number of units holds both.
        """
        unit = self.limit_key if self.parallel is not None else None
        if isinstance(limit, float):
            return stratified_share(probes, limit, self.limit_strata, self.seed, unit=unit)
        favoured = {self.limit_key(p) for p in probes if p.item_id in known}
        return stratified_items(
            probes, limit, self.limit_strata, self.seed, unit=unit, favoured=favoured
        )

    def smoke_limit(self, probes: Sequence[Probe]) -> int:
        """The smallest `--limit` whose subset has `smoke.per_cell` items in every cell of `strata`
        (all of a smaller cell), whatever the seed: `--limit smoke`, in `limit_unit`s.

        Parallel units are drawn a round at a time from each cell of `limit_strata`; a cell needs as
        many rounds as its units that lack some language, plus the units that language's items need,
        before every draw is sure to give each of its language cells enough (all of its units where
        every unit has every language).
        """
        if self.parallel is None:
            return sum(
                min(self.smoke.per_cell, len(items))
                for items in strata_cells(probes, self.strata).values()
            )
        units = strata_cells(probes, self.limit_strata, unit=self.limit_key)
        cell_of = {unit: cell for cell, members in units.items() for unit in members}
        # each item's first probe, which places it in a cell
        first = {p.item_id: p for p in reversed(probes)}
        rounds = 0
        for items in strata_cells(probes, self.strata).values():
            holders: dict[tuple[str, ...], set[str]] = {}
            for item in items:
                unit = self.limit_key(first[item])
                holders.setdefault(cell_of[unit], set()).add(unit)
            need = min(self.smoke.per_cell, len(items))
            for cell, having in holders.items():
                rounds = max(rounds, len(units[cell]) - len(having) + min(need, len(having)))
        return sum(min(rounds, len(members)) for members in units.values())

    def smoke_shortfall(self, probes: Sequence[Probe], sampled: Sequence[Probe]) -> str | None:
        """Why the subset `sampled` of `probes` lacks headline numbers (the cells it leaves short,
        and what needs them), or None when it has them all.
        """
        cells = strata_cells(probes, self.strata)
        have = strata_cells(sampled, self.strata)
        short = [
            k
            for k, items in cells.items()
            if len(have.get(k, ())) < min(self.smoke.per_cell, len(items))
        ]
        if not short:
            return None
        get = "no item" if self.smoke.per_cell == 1 else f"fewer than {self.smoke.per_cell} items"
        example = ", ".join("/".join(k) for k in sorted(short)[:3])
        drawn = ""
        if self.parallel is not None and self.limit_strata:
            units = strata_cells(probes, self.limit_strata, unit=self.limit_key)
            empty = len(
                units.keys() - strata_cells(sampled, self.limit_strata, unit=self.limit_key).keys()
            )
            if empty:
                drawn = (
                    f"the {self.limit_units(sampled)} {self.limit_unit} drawn leave {empty} of its {len(units)} "
                    f"{' x '.join(self.limit_strata)} cells without one, so "
                )
        return (
            f"{drawn}{len(short)} of its {len(cells)} {' x '.join(self.strata)} cells get {get} (e.g. {example}), "
            f"and {self.smoke.needs}"
        )

    def to_record(self, probe: Probe, output: Output, *, stage: str | None = None) -> Record:
        """The typed record of one answered (or skipped) probe: the probe's meta, then `_read`'s
        fields.
        """
        fields = dict(probe.meta)
        if isinstance(probe, Skipped):
            fields["skipped"] = probe.reason
        else:
            fields.update(self._read(probe, output))
        return Record(
            probe.item_id,
            probe.tag,
            stage or self.stages[0].name,
            fields,
            kind=PROBE_KINDS[type(probe)],
        )

    def scores(self, records: Sequence[Record]) -> Scores:
        """The protocol's `Scores` of the answered records among `records`: its metrics block, unit
        tables (what a paired comparison of two runs resamples), chance tables, composites and
        aligned answers.
        """
        return self._metrics(
            [r for r in records if not r.skipped], [r for r in records if r.skipped]
        )

    def compute_metrics(self, records: Sequence[Record]) -> dict[str, Any]:
        """Metrics from records alone (so a resumed run and `culture-probe report` give the same
        numbers): the protocol's metrics of the answered records, and how many probes were skipped,
        per reason.
        """
        answered = [r for r in records if not r.skipped]
        skipped = [r for r in records if r.skipped]
        reasons = Counter(r["skipped"] for r in skipped)
        scores = self._metrics(answered, skipped)
        metrics = dict(scores.detail)
        results = self.results(scores)
        aligned = scores.aligned
        across = language_consistency(aligned, self.benchmark.languages) if aligned else {}
        if across:  # two or more languages answered the same facts
            results = with_language_pairs(results, across)
            metrics["consistency"] = {"alignment": self.alignment, **consistency_detail(across)}
        left_out = self.consistency_omitted(answered, scores, across)
        # said in results.omitted, as the metrics a protocol leaves out are: never silently missing
        if left_out:
            results = {**results, "omitted": {**results.get("omitted", {}), **left_out}}
        return {
            **metrics,
            "results": results,
            "n_probes": len(records),
            "n_skipped": len(skipped),
            "skipped": dict(reasons),
        }

    def results(self, scores: Scores) -> Results:
        """The run's numbers in the one results schema (`culture_probe.metrics.results`): each
        headline number with its 95% interval over this benchmark's unit, overall and per stratum,
        what was left out, the design, the chance levels and reference points, and the warnings.
        """
        out = summarize(
            scores.tables,
            unit=self.limit_unit,
            extra=dict(scores.composites),
            omitted=dict(scores.omitted),
        )
        out["design"] = self.design.to_json()
        chance: dict[str, Chance] = {
            table.metric: {"value": value, "method": method}
            for table, method in scores.chance
            if (value := chance_value(table)) is not None
        }
        chance.update(scores.references)
        if chance:
            out["chance"] = chance
        return {**out, "warnings": dict(scores.warnings)} if scores.warnings else out

    def cluster_of(self, record: Record) -> str | None:
        """The sampled unit a record's answer belongs to where the design repeats a unit across the
        config's languages (its `parallel` fields: a DLAMA fact by its release id), else None: the
        record is its own unit.
        """
        return None if self.parallel is None else self.parallel.name(record)

    def consistency_omitted(
        self, answered: Sequence[Record], scores: Scores, across: Mapping[str, Any]
    ) -> dict[str, str]:
        """Why consistency across languages (RankC, and per-fact agreement `both_right` with its
        paired P@1 difference) is not reported, by metric, or by metric and pair of languages
        ("rankc (ar/en)") where only some pairs lack it; nothing for a benchmark whose languages are
        not aligned (`alignment` None).
        """
        if self.alignment is None:
            return {}
        aligned = scores.aligned
        if not aligned:
            return dict.fromkeys(PAIR_METRICS, self.unaligned(answered, scores))
        facts: dict[str, set[str]] = {}
        for answer in aligned:
            facts.setdefault(answer.language, set()).add(answer.fact)
        if len(facts) == 1:
            (language,) = facts
            why = (
                f"it compares two languages' answers to the same facts, and this run answered in {language} only "
                "(`culture-probe consistency RUN_A RUN_B` pairs runs of one language each)"
            )
            return dict.fromkeys(PAIR_METRICS, why)
        if not across:
            answered_in = ", ".join(
                f"{len(ids)} in {language}" for language, ids in sorted(facts.items())
            )
            why = f"its languages answered no fact in common ({answered_in}), and facts are paired by id only"
            return dict.fromkeys(PAIR_METRICS, why)
        out: dict[str, str] = {}
        given = [language for language in self.benchmark.languages if language in facts]
        # as `language_consistency` orders its pairs
        order = [*given, *sorted(set(facts) - set(given))]
        for i, a in enumerate(order):
            for b in order[i + 1 :]:
                if not facts[a] & facts[b]:
                    why = f"{a} and {b} answered no fact in common ({len(facts[a])} and {len(facts[b])} facts)"
                    out.update({f"{metric} ({a}/{b})": why for metric in PAIR_METRICS})
        for metric in PAIR_METRICS:
            lacking = {
                pair: _unpaired_reason(metric, across["pairs"][pair])
                for pair, estimates in across["by_language_pair"].items()
                if metric not in estimates
            }
            if len(lacking) == len(across["by_language_pair"]) and len(set(lacking.values())) == 1:
                out[metric] = next(iter(lacking.values()))
            else:
                out.update({f"{metric} ({pair})": why for pair, why in lacking.items()})
        return out

    def unaligned(self, answered: Sequence[Record], scores: Scores) -> str:
        """Why none of `answered` could be aligned across languages (`scores.aligned` is empty): the
        protocol's reason (`Scores.unaligned`: records without the id that matches a fact across
        languages, a part of the benchmark that is not aligned), else the generic one.
        """
        if scores.unaligned:
            return scores.unaligned
        if not answered:
            return "no probe was answered"
        return (
            "no answered record carries the id that matches its item across languages (the run was made before "
            "consistency alignment: re-run it to get it)"
        )

    def unit_tables(self, records: Sequence[Record]) -> list[UnitTable]:
        """Each headline metric's value per unit (and replicate) of the answered records: what the
        results schema's intervals and a paired comparison of two runs resample.
        """
        return list(self.scores(records).tables)

    def describe(self) -> dict[str, Any]:
        """Protocol facts worth recording in config.json (`facts`: e.g. candidate-set sizes and
        hashes, the judge), once the first stage's probes are built.
        """
        return dict(self.facts)

    def applied_deviations(self) -> list[AppliedDeviation]:
        """The deviations that concern this run (config, model kind, mode), each with the side that
        applied, as config.json records them.
        """
        return [d.record(self.options, self.kind) for d in self.deviations if d.applies(self)]

    @classmethod
    def profile(
        cls, protocol: str, kind: str | None = None, *, served: bool = False
    ) -> dict[str, Any]:
        """The option values of a protocol profile: none for "default"; for "upstream" the upstream
        values of every deviation whose upstream code path ran models of `kind` (all kinds when
        None, to check a suite's options before its model loads). Within one kind, no two deviations
        ask one option for different values (a test checks it).
        """
        if protocol not in PROTOCOLS:
            raise UnknownNameError("protocol", protocol, PROTOCOLS)
        if protocol == "default":
            return {}
        return {
            k: v
            for d in cls.deviations
            if d.reproducible(kind, served)
            for k, v in (d.upstream or {}).items()
        }

    @classmethod
    def options_for(
        cls,
        protocol: str,
        values: Mapping[str, Any],
        kind: ModelKind | None = None,
        *,
        config: str | Benchmark | None = None,
        served: bool = False,
    ) -> Any:
        """The run's `Options`: the user's `values` parsed and checked, then the profile's values
        for the options the user did not give (`with_profile`).
        """
        chosen = parse_options(cls.Options, values)
        return cls.with_profile(chosen, values, protocol, kind, config=config, served=served)

    @classmethod
    def with_profile(
        cls,
        chosen: Any,
        given: Collection[str],
        protocol: str,
        kind: ModelKind | None = None,
        *,
        config: str | Benchmark | None = None,
        served: bool = False,
    ) -> Any:
        """`chosen` (the user's options, parsed once) with the profile's values for the options not
        `given`: one pure step, taken once the model's kind is known. Given the config and the kind,
        the profile keeps only the deviations that concern the run (its mode, its templates), so no
        inert option is set.
        """
        profile = cls.profile(protocol, kind, served=served)
        if profile and config is not None and kind is not None:
            # no resources: `applies` reads the config, kind and options only
            probe = cls(config, chosen, kind=kind)
            profile = {
                k: v
                for d in cls.deviations
                if d.reproducible(kind, served) and d.applies(probe)
                for k, v in (d.upstream or {}).items()
            }
        unset = {k: v for k, v in profile.items() if k not in given}
        return dataclasses.replace(chosen, **unset) if unset else chosen

    def select_language(
        self, rows: Sequence[Mapping[str, Any]], language: str
    ) -> list[Mapping[str, Any]]:
        """Rows asked in `language` (column `language`, `lang` or `prompt_lang`); an unknown one is
        an error.
        """
        column = next(
            (c for c in ("language", "lang", "prompt_lang") if rows and c in rows[0]), None
        )
        if column is None:
            raise CultureProbeError(
                f"Config {self.config!r} has one language; drop --language {language!r}."
            )
        present = {r[column] for r in rows}
        if language not in present:
            raise UnknownNameError(
                "language", language, present, fix=f"Config {self.config!r} has these."
            )
        return [r for r in rows if r[column] == language]

    # ------------------------------------------------------------ hooks

    def _configure(self) -> None:
        """Set the declared values that follow from the config and the options (`stages`, `smoke`,
        `parallel`, `design`, `seeded`, `facts`), or refuse a config the protocol cannot probe:
        called once, when the task is made (before the model's kind is checked against its stages),
        so that a protocol does not restate the constructor to do it. Nothing by default.
        """

    def _probes(
        self, rows: Sequence[Mapping[str, Any]], stage: str, previous: Sequence[Record]
    ) -> Iterable[Probe]:
        raise NotImplementedError

    def _read(self, probe: Probe, output: Output) -> RecordFields:
        raise NotImplementedError

    def _metrics(self, records: list[Record], skipped: list[Record]) -> Scores:
        raise NotImplementedError


# ---------------------------------------------------------------- helpers shared by tasks


def _unpaired_reason(metric: str, pair: Mapping[str, Any]) -> str:
    """Why one pair of languages has no `metric` (`language_consistency` gives `both_right` to every
    pair that shares a fact, and RankC to those that ranked one over the same candidates in both
    languages).
    """
    if metric != "rankc":
        return f"no fact of the pair has {metric}"
    left_out = pair["rankc_left_out"]
    if left_out["not ranked"] == pair["n"]:
        return (
            "the answers rank no candidates (a generated reply is one answer, not a ranking), so RankC has no "
            "rankings to compare; per-fact agreement (both_right) is reported"
        )
    return (
        f"no fact was ranked over the same aligned candidates in both languages ({left_out['candidate sets differ']} "
        f"over candidate sets that differ, {left_out['not ranked']} not ranked)"
    )


def missing_id(answered: Sequence[Record], field: str, name: str, item: str) -> str | None:
    """Why `answered` cannot be matched across languages when no record carries the id `field` (a
    run made before the id was kept: `name` says what the id is, `item` what it names), for
    `Task.unaligned`; None when one does.
    """
    if not answered or any(field in r for r in answered):
        return None
    return (
        f"its records carry no {name} (`{field}`: the run was made before consistency alignment; re-run it to "
        f"get it), so no {item} can be matched across languages"
    )


def asked_in(languages: Sequence[str]) -> str:
    """How a parallel unit is asked, as a clause: ", each asked in ar and en" (", each asked in its
    13 languages" from three on); nothing for a unit in one language.
    """
    if len(languages) < 2:
        return ""
    if len(languages) == 2:
        return f", each asked in {languages[0]} and {languages[1]}"
    return f", each asked in its {len(languages)} languages"


def split_slot(template: str, slot: str) -> tuple[str, str]:
    """(left, right) of the one `slot` in a filled template; a missing or repeated slot is a
    TemplateError.
    """
    parts = template.split(slot)
    if len(parts) != 2:
        raise TemplateError(
            f"Template {template!r} must contain the slot {slot!r} exactly once, found {len(parts) - 1}."
        )
    return parts[0], parts[1]


def cloze_probe(
    item_id: str,
    left: str,
    right: str,
    candidates: Sequence[str],
    options: ScoreOptions,
    meta: Mapping[str, Any],
    *,
    candidate_ids: Literal["in_context", "alone"],
    tag: str = "",
) -> ScoreProbe:
    """The probe that ranks `candidates` in the slot between a filled template's `left` and `right`
    (DLAMA's and FmLAMA's cloze templates): the request keeps the template's spacing
    (`slot_request`), and the record's `meta` gains the `prompt` with the slot shown as `[Y]`, as
    both benchmarks' records write it.
    """
    request = slot_request(left, right, candidates, candidate_ids)
    return ScoreProbe(
        item_id, request, options, tag=tag, meta={**meta, "prompt": f"{left}[Y]{right}"}
    )


def ranked_candidates(scores: CandidateScores, by: Literal["mean", "sum"] = "mean") -> list[str]:
    """Candidates best first; ties go to fewer tokens, then code-point order (DLAMA/FmLAMA rule)."""
    return [scores.candidates[i] for i in scores.ranking(by, ties="fewer_tokens").tolist()]


def ranks_of(scores: CandidateScores, order: Any, texts: Sequence[str]) -> list[int | None]:
    """The rank (1 = first) in `order` (candidate indices, best first, maybe fewer than all) of each
    of `texts`, None where it is not ranked; a text given twice among the candidates has the rank of
    its later place, as a ranking read into a {candidate: rank} mapping gives it.
    """
    places = np.zeros(len(scores.candidates), dtype=np.int64)
    places[order] = np.arange(1, len(order) + 1)
    where = scores.positions()
    out = []
    for text in texts:
        found = [int(places[i]) for i in where.get(text, ()) if places[i]]
        out.append(max(found) if found else None)
    return out


def all_scores(output: CandidateScores) -> dict[str, list[Any]]:
    """Every candidate's summed log-prob, token count and (when kept) per-token log-probs, in the
    request's candidate order: what any other normalisation needs later (large, so opt-in).
    """
    scores: dict[str, list[Any]] = {
        "sum_logprob": output.sum_logprob.tolist(),
        "n_tokens": output.n_tokens.tolist(),
    }
    if output.token_logprobs is not None:
        scores["token_logprobs"] = [t.tolist() for t in output.token_logprobs]
    return scores
