"""A run's config.json, typed: `RunRecord.from_json` reads it (also as earlier versions wrote it) into the fields
that reports, suites, the board and `--resume` read, so that no reader digs through nested dicts with
`.get(...) or {}`; `to_json` gives back the dict as written, so config.json stays the file of record.

The parts every reader uses are typed (the model, the run settings, the benchmark card, versions, the `--limit`
subset); the benchmark's own parts (options, its protocol description, deviations, resources, stage models) stay
mappings, as each benchmark's report module reads them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# run settings a config.json written before issue 27 kept in `run`, and now in `model_args` (`upgraded`)
MOVED_TO_MODEL_ARGS = ("dtype", "revision")


def upgraded(config: Mapping[str, Any]) -> dict[str, Any]:
    """A config.json as this version writes it, from one an earlier version wrote: the model's `dtype` and `revision`,
    kept in `run` before `model_args` became their only home (`MOVED_TO_MODEL_ARGS`), move there, so that `report`,
    `compare` and `--resume` read older runs as they read new ones.
    """
    config = dict(config)
    run = config.get("run")
    if not isinstance(run, dict) or not any(key in run for key in MOVED_TO_MODEL_ARGS):
        return config
    moved = {key: run[key] for key in MOVED_TO_MODEL_ARGS if run.get(key) is not None}
    return {
        **config,
        "run": {key: value for key, value in run.items() if key not in MOVED_TO_MODEL_ARGS},
        "model_args": {**moved, **(config.get("model_args") or {})},
    }


@dataclass(frozen=True)
class ModelRecord:
    """config.json's `model`: the name it was given, its kind, its identity (what `--resume` compares), and what a
    planted model was trained on.
    """

    spec: str = ""
    kind: str | None = None  # None: a run record that does not say (the reports then assume the benchmark's own)
    identity: Any = None
    planted: str | None = None
    loaded_object: bool = False

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelRecord:
        """The block as written (keys missing in partial or older records take their defaults)."""
        return cls(
            spec=str(data.get("spec", "")),
            kind=data.get("kind"),
            identity=data.get("identity"),
            planted=data.get("planted"),
            loaded_object=bool(data.get("loaded_object")),
        )


@dataclass(frozen=True)
class SettingsRecord:
    """config.json's `run`: the run settings (`RunSettings.recorded`); `values` holds every one of them, as the
    Reproduce command spells them back.
    """

    limit: Any = None
    seed: int | None = None
    language: str | None = None
    protocol: str = "default"  # runs made before the profiles ran the library's protocol
    data_dir: str | None = None
    corrected: bool = False
    values: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SettingsRecord:
        """The block as written (keys missing in partial or older records take their defaults)."""
        return cls(
            limit=data.get("limit"),
            seed=data.get("seed"),
            language=data.get("language"),
            protocol=data.get("protocol") or "default",
            data_dir=data.get("data_dir"),
            corrected=bool(data.get("corrected")),
            values=data,
        )


@dataclass(frozen=True)
class BenchmarkRecord:
    """config.json's `benchmark`: the card of the benchmark and the fingerprint of the rows the run probed."""

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
    def from_json(cls, data: Mapping[str, Any]) -> BenchmarkRecord:
        """The block as written (keys missing in partial or older records take their defaults)."""
        return cls(
            name=data.get("name"),
            title=str(data.get("title", "")),
            version=str(data.get("version", "")),
            description=str(data.get("description") or ""),
            languages=tuple(data.get("languages") or ()),
            rows=data.get("rows"),
            rows_sha256=data.get("rows_sha256"),
            custom_rows=bool(data.get("custom_rows")),
            rows_file=data.get("rows_file"),
        )

    @property
    def saved_rows(self) -> str | None:
        """The run directory's file of custom rows, when the run saved one (what `--rows` repeats)."""
        return self.rows_file if self.custom_rows else None


@dataclass(frozen=True)
class RunRecord:
    """A run's config.json, typed. `to_json()` is the dict it was read from (upgraded to this version's shape),
    unknown keys included, so a record read and written back leaves the file as it was.
    """

    config: str  # the benchmark config the run probed
    model: ModelRecord = ModelRecord()
    run: SettingsRecord = SettingsRecord()
    benchmark: BenchmarkRecord = BenchmarkRecord()
    model_args: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)  # the protocol options, by name
    # the options that change each stage's records (None: a run made before they were recorded)
    stage_options: Mapping[str, Sequence[str]] | None = None
    seed_used: bool = True  # whether the seed can change a number (a protocol that draws, or a --limit subset)
    protocol: Mapping[str, Any] = field(default_factory=dict)  # the task's description of its protocol
    deviations: tuple[Mapping[str, Any], ...] = ()
    subset: Mapping[str, Any] | None = None  # what a --limit run probed (None: every item)
    planned: Mapping[str, Any] = field(default_factory=dict)  # the first stage and its probe count
    versions: Mapping[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0
    data: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunRecord:
        """A config.json's contents, as this version or an earlier one wrote them (`upgraded`); a part a partial or
        older record lacks takes its default, as every reader took it before.
        """
        data = upgraded(copy.deepcopy(dict(data)))
        return cls(
            config=str(data.get("config", "")),
            model=ModelRecord.from_json(data.get("model") or {}),
            run=SettingsRecord.from_json(data.get("run") or {}),
            benchmark=BenchmarkRecord.from_json(data.get("benchmark") or {}),
            model_args=data.get("model_args") or {},
            options=data.get("options") or {},
            stage_options=data.get("stage_options"),
            seed_used=bool(data.get("seed_used", True)),
            protocol=data.get("protocol") or {},
            deviations=tuple(data.get("deviations") or ()),
            subset=data.get("subset") or None,
            planned=data.get("planned") or {},
            versions=data.get("versions") or {},
            duration_s=float(data.get("duration_s") or 0.0),
            data=data,
        )

    @classmethod
    def of(cls, config: RunRecord | Mapping[str, Any]) -> RunRecord:
        """`config` as a record: the entry points of the reports take either (notebooks pass `RunResult.config`)."""
        return config if isinstance(config, RunRecord) else cls.from_json(config)

    def to_json(self) -> dict[str, Any]:
        """config.json's contents: a copy of the dict this record was read from."""
        return copy.deepcopy(dict(self.data))

    @property
    def repeats_the_paper(self) -> bool:
        """Whether the run can be set against the paper's numbers: the released data (not custom rows, not the
        corrected variant) and all of it (no --limit subset). Reference lines of the paper's values only then.
        """
        return not (self.subset or self.benchmark.custom_rows or self.run.corrected)
