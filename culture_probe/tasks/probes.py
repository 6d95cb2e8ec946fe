"""What a protocol asks the engine (probes) and what each answer becomes in `items.jsonl` (records).

A probe is tied to one benchmark item (`item_id`); one item may have several probes (templates,
runs), told apart by `tag`. Each probe kind carries the engine call's options as one typed object
(`ScoreOptions`, `GenerateOptions`, `FillMaskOptions`), so probes with equal options share an engine
call. A `Skipped` probe is an item the protocol cannot ask, with the reason: it becomes a record of
kind "skipped", counted per reason, never run.

Records are one type, `Record`, whose `kind` names the probe kind that asked it, serialised one way
(`Record.to_json` / `Record.from_json`): one flat JSON object per line, `id`, `key`, `tag`, `stage`,
`probe` (the kind), then the probe's meta and what the protocol read from the engine's output (a
skipped record has `skipped: reason` instead).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from culture_probe.engine.types import (
    CandidateScores,
    FillMaskOptions,
    GenerateOptions,
    ScoreOptions,
    ScoreRequest,
)
from culture_probe.errors import CultureProbeError


def probe_key(item_id: str, tag: str) -> str:
    """Unique within a run: the resume key in items.jsonl."""
    return f"{item_id}#{tag}" if tag else item_id


class Keyed:
    """What every probe and record has: the item it asks (`item_id`) and its `tag` among the item's
    probes, which make its resume key.
    """

    item_id: str
    tag: str

    @property
    def key(self) -> str:
        """The resume key."""
        return probe_key(self.item_id, self.tag)


@dataclass(frozen=True)
class ScoreProbe(Keyed):
    """Score the candidates of `request` for item `item_id`; `meta` (JSON-able) is copied into the
    record.
    """

    item_id: str
    request: ScoreRequest
    options: ScoreOptions = ScoreOptions()
    tag: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class GenerateProbe(Keyed):
    """Continue `prompt` for item `item_id` as `options` say (greedy or seeded sampling, chat
    template or not).
    """

    item_id: str
    prompt: str
    options: GenerateOptions
    tag: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class FillMaskProbe(Keyed):
    """The best vocabulary piece at one mask after `left` for item `item_id` (masked models
    only).
    """

    item_id: str
    left: str
    options: FillMaskOptions = FillMaskOptions()
    tag: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Skipped(Keyed):
    """An item (or one of its probes) the protocol cannot ask, with the reason: recorded, counted,
    not run.
    """

    item_id: str
    reason: str
    tag: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False)


Probe = ScoreProbe | GenerateProbe | FillMaskProbe | Skipped
Output = CandidateScores | str | None


# ---------------------------------------------------------------- records

RecordKind = Literal["score", "generate", "fill_mask", "skipped"]
RECORD_KINDS: tuple[RecordKind, ...] = ("score", "generate", "fill_mask", "skipped")
#: the record kind of each probe type (a record is read the same way whatever asked it)
PROBE_KINDS: dict[type, RecordKind] = {
    ScoreProbe: "score",
    GenerateProbe: "generate",
    FillMaskProbe: "fill_mask",
    Skipped: "skipped",
}
# the keys of a line that are not the record's fields
_IDENTITY = ("id", "key", "tag", "stage", "probe")


@dataclass(frozen=True)
class Record(Keyed):
    """One answered probe as `items.jsonl` holds it: identity, stage, `fields` (the probe's meta,
    then what the protocol read from the output) and `kind`, the probe kind that asked it (one of
    `RECORD_KINDS`). Read a field as `record["gold"]`.
    """

    item_id: str
    tag: str
    stage: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    kind: RecordKind = field(kw_only=True)

    def __post_init__(self) -> None:
        if self.kind not in RECORD_KINDS:
            raise CultureProbeError(
                f"Record kind {self.kind!r} is none of {', '.join(RECORD_KINDS)}."
            )

    @property
    def skipped(self) -> bool:
        """Whether the probe was skipped (not asked); its `fields["skipped"]` says why."""
        return self.kind == "skipped"

    def __getitem__(self, name: str) -> Any:
        if name == "id":
            return self.item_id
        if name in ("tag", "stage", "key"):
            return getattr(self, name)
        return self.fields[name]

    def __contains__(self, name: object) -> bool:
        return name in ("id", "tag", "stage", "key") or name in self.fields

    def get(self, name: str, default: Any = None) -> Any:
        """The field `name`, or `default`."""
        return self[name] if name in self else default

    def to_json(self) -> dict[str, Any]:
        """The record's one serialisation (a flat JSON object)."""
        return {
            "id": self.item_id,
            "key": self.key,
            "tag": self.tag,
            "stage": self.stage,
            "probe": self.kind,
            **self.fields,
        }

    @staticmethod
    def from_json(line: Mapping[str, Any]) -> Record:
        """The record a `to_json` object came from (every release wrote this same line)."""
        kind = line.get("probe")
        if kind not in RECORD_KINDS:
            raise CultureProbeError(
                f"Not a culture_probe record (probe kind {kind!r}, expected one of "
                f"{', '.join(RECORD_KINDS)}): {dict(line)!r:.200}"
            )
        fields = {k: v for k, v in line.items() if k not in _IDENTITY}
        return Record(line["id"], line["tag"], line["stage"], fields, kind=kind)
