"""The factories that several protocols build their deviation rows and probes with
(`culture_probe.tasks.base`): each derives what it is given once, so that two of a row's fields
cannot say different things.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from culture_probe.engine.types import MODEL_KINDS, ScoreOptions, ScoreRequest
from culture_probe.tasks.base import cloze_probe, missing_id
from culture_probe.tasks.deviations import Deviation, Scope
from culture_probe.tasks.probes import Record


@dataclass(frozen=True)
class Options:
    mode: str = "rank"
    cap: int | None = None


@dataclass(frozen=True)
class Run:
    """As much of a task as a deviation's `applies` reads."""

    kind: str
    options: Any = field(default_factory=Options)


RANKING = Scope("ranking", lambda task: task.options.mode == "rank")


def test_a_deviation_of_one_kind_names_it_once_for_when_applies_and_the_upstream_kinds() -> None:
    deviation = Deviation.for_kind("Z1", "No cap.", "masked", RANKING, upstream={"cap": 10})
    assert deviation.when == "masked models, ranking"
    assert deviation.upstream_kinds == ("masked",)
    assert deviation.applies(Run("masked"))
    assert not deviation.applies(Run("causal"))
    assert not deviation.applies(Run("masked", Options(mode="generate")))
    assert deviation.reproducible("masked") and not deviation.reproducible("causal")


def test_a_deviation_of_one_kind_without_a_scope_or_an_upstream_side() -> None:
    deviation = Deviation.for_kind("Z2", "Log-probs.", "causal", upstream_note="changes no number")
    assert deviation.when == "causal models"
    # no upstream side: the kinds stay the default, as a row written out in full has them
    assert deviation.upstream is None and deviation.upstream_kinds == MODEL_KINDS
    assert deviation.applies(Run("causal", Options(mode="generate")))
    assert not deviation.applies(Run("seq2seq"))
    assert (
        deviation.record(Options(), "causal")["upstream"] == "no upstream side: changes no number"
    )


@dataclass(frozen=True)
class Keeping:
    mode: str = "rank"
    keep_scores: bool = False


def test_the_storage_note_of_a_ranking_protocol_applies_to_its_rankings_without_keep_scores() -> (
    None
):
    deviation = Deviation.kept_scores("Z3", "the top 5", "pool size", RANKING)
    assert deviation.description == (
        "items.jsonl keeps the top 5, not the sum, token count and mean of every candidate, which would "
        "multiply its size by the pool size; --option keep_scores=true records them all."
    )
    assert deviation.when == "ranking without keep_scores" and deviation.upstream is None
    assert deviation.upstream_note.startswith("changes no number")
    assert deviation.applies(Run("masked", Keeping()))
    assert not deviation.applies(Run("masked", Keeping(keep_scores=True)))
    assert not deviation.applies(Run("causal", Keeping(mode="generate")))


def test_a_cloze_probe_keeps_the_templates_spacing_and_records_the_prompt_with_its_slot() -> None:
    meta = {"language": "en", "gold": ["Egypt"]}
    options = ScoreOptions(keep_tokens=True)
    probe = cloze_probe(
        "q1",
        "Cairo is the capital of ",
        " .",
        ("Egypt", "Peru"),
        options,
        meta,
        candidate_ids="alone",
    )
    # the space before the slot moves onto the candidate
    assert probe.request == ScoreRequest(
        "Cairo is the capital of", ("Egypt", "Peru"), " .", sep=" ", candidate_ids="alone"
    )
    assert probe.options == options and probe.tag == "" and probe.item_id == "q1"
    assert list(probe.meta.items()) == [
        ("language", "en"),
        ("gold", ["Egypt"]),
        ("prompt", "Cairo is the capital of [Y] ."),
    ]
    # the caller's meta is not written to
    assert "prompt" not in meta
    tagged = cloze_probe(
        "d1", "美食", "。", ("盐",), options, {}, candidate_ids="in_context", tag="t1"
    )
    assert (
        tagged.key == "d1#t1"
        and tagged.request.sep == ""
        and tagged.meta == {"prompt": "美食[Y]。"}
    )


def test_a_protocols_instance_settings_are_made_once_the_base_has_set_its_fields() -> None:
    from culture_probe.benchmarks.maps.task import MapsOptions, MapsTask

    assert MapsTask("maps_en", kind="causal").stage_names == ("reason", "memorise")
    assert MapsTask("maps_en", MapsOptions(memorisation=False), kind="causal").stage_names == (
        "reason",
    )


def test_records_without_their_alignment_id_say_so_and_others_fall_through() -> None:
    old = [Record("f1", "", "main", {"language": "en"}, kind="score")]
    assert missing_id(old, "uuid", "fact id", "fact") == (
        "its records carry no fact id (`uuid`: the run was made before consistency alignment; re-run it to get "
        "it), so no fact can be matched across languages"
    )
    kept = [*old, Record("f2", "", "main", {"uuid": "u2"}, kind="score")]
    assert missing_id(kept, "uuid", "fact id", "fact") is None
    assert missing_id([], "uuid", "fact id", "fact") is None


HOOKS = frozenset({"_configure", "_probes", "_read", "_metrics"})


def test_every_protocol_overrides_at_most_the_four_hooks() -> None:
    """A protocol writer learns four hooks; everything else a protocol says (stages and their
    models, smoke cells, parallel units, design, needs, facts) is a value it holds, so no protocol
    overrides another method of the base.
    """
    from culture_probe.benchmarks import declarations
    from culture_probe.tasks import Task

    for name, declared in declarations().items():
        task = declared.part("task").TASK
        overridden = {
            attribute
            for klass in task.__mro__[: task.__mro__.index(Task)]
            for attribute, value in vars(klass).items()
            if callable(getattr(Task, attribute, None))
            and not isinstance(value, type)
            and not attribute.startswith("__")
            and value is not getattr(Task, attribute)
        }
        assert overridden <= HOOKS, f"{name}: {sorted(overridden - HOOKS)} override the base"
