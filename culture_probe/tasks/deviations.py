"""Where a protocol differs from the released code (`Deviation`), with both behaviours as options:
the table each task module ends with, the side a run applied (config.json's `deviations`), and the
two profiles (`--protocol`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from culture_probe.engine.types import MODEL_KINDS, ModelKind
from culture_probe.record import AppliedDeviation


def _always(task: Any) -> bool:
    return True


# the two protocol profiles (`--protocol`): the library's, and the released code's
PROTOCOLS = ("default", "upstream")


@dataclass(frozen=True)
class Scope:
    """A part of a protocol's runs that several of its deviations concern, in words (what
    `Deviation.when` says) and as a test of the task (what `Deviation.applies` asks): DLAMA's
    ranking is `Scope("ranking", ranks)`.
    """

    words: str
    test: Callable[[Any], bool] = field(compare=False, repr=False)


@dataclass(frozen=True)
class Deviation:
    """One place where the library's protocol differs from the upstream code, with both behaviours.

    `applies(task)` says whether the difference concerns a run at all (its config, model kind,
    mode); `when` says the same in words. `upstream` holds the option values that give upstream's
    behaviour, so each deviation is implemented once, as options, and the run's table shows which
    side applied; the upstream profile sets them for the model kinds whose upstream code path
    behaved so (`upstream_kinds`). A deviation without them has no upstream side here, and
    `upstream_note` says why (upstream's code cannot run it, or it changes no number).
    """

    id: str
    description: str
    when: str = "every run"
    applies: Callable[[Any], bool] = field(default=_always, compare=False, repr=False)
    upstream: Mapping[str, Any] | None = None
    upstream_note: str = ""
    upstream_kinds: tuple[str, ...] = MODEL_KINDS
    #: upstream's side needs the model in process (token-level control, e.g. a second BOS): never
    #: for served models
    in_process: bool = False

    @classmethod
    def for_kind(
        cls,
        id: str,
        description: str,
        kind: ModelKind,
        scope: Scope | None = None,
        *,
        upstream: Mapping[str, Any] | None = None,
        upstream_note: str = "",
    ) -> Deviation:
        """A deviation of one model kind's code path, in all runs or in those of `scope` (DLAMA's
        ranking). The kind and the scope are each named once, for `applies`, for `when` ("masked
        models, ranking") and for `upstream_kinds` (where it has an upstream side), so that the
        three cannot drift apart.
        """
        test = scope.test if scope is not None else _always

        def applies(task: Any) -> bool:
            return bool(task.kind == kind and test(task))

        when = f"{kind} models, {scope.words}" if scope is not None else f"{kind} models"
        kinds = (kind,) if upstream is not None else MODEL_KINDS
        return cls(id, description, when, applies, upstream, upstream_note, kinds)

    @classmethod
    def kept_scores(cls, id: str, kept: str, size: str, scope: Scope) -> Deviation:
        """The storage note of a ranking protocol with a `keep_scores` option: items.jsonl keeps
        `kept` of each ranking rather than every candidate's scores, which would multiply its size
        by the `size` (the candidate count). It changes no number, so it has no upstream side; a run
        of `scope` without keep_scores shows it.
        """
        return cls(
            id,
            f"items.jsonl keeps {kept}, not the sum, token count and mean of every candidate, which would "
            f"multiply its size by the {size}; --option keep_scores=true records them all.",
            f"{scope.words} without keep_scores",
            lambda task: scope.test(task) and not task.options.keep_scores,
            upstream_note="changes no number: it is what items.jsonl stores (keep_scores=true stores a "
            "superset of the released result.pkl)",
        )

    def reproducible(self, kind: str | None, served: bool = False) -> bool:
        """Whether the upstream profile sets this deviation's values for a model of `kind` (None:
        any kind).
        """
        return (
            self.upstream is not None
            and (kind is None or kind in self.upstream_kinds)
            and not (served and self.in_process)
        )

    def side(self, options: Any) -> str:
        """The side the run took: "upstream" when the run's options are all upstream's for this
        deviation, "default" when none of those that upstream sets otherwise than the library is,
        else "partial" (a user's own option overrode some).
        """
        if self.upstream is None:
            return "default"
        if all(getattr(options, k) == v for k, v in self.upstream.items()):
            return "upstream"
        defaults = type(options)()
        switches = [k for k, v in self.upstream.items() if getattr(defaults, k) != v]
        return (
            "partial"
            if any(getattr(options, k) == self.upstream[k] for k in switches)
            else "default"
        )

    def record(self, options: Any, kind: str | None = None) -> AppliedDeviation:
        """What config.json and the report show: the difference, when it applies, the side, and how
        to switch (or why there is no upstream side, for this model kind or at all).
        """
        if self.upstream is None:
            how = f"no upstream side: {self.upstream_note}"
        elif kind is not None and kind not in self.upstream_kinds:
            how = f"no upstream side for {kind} models (upstream's code ran it on {', '.join(self.upstream_kinds)})"
        else:
            how = ", ".join(f"{k}={v!r}" for k, v in self.upstream.items())
        return {
            "id": self.id,
            "description": self.description,
            "when": self.when,
            "side": self.side(options),
            "upstream": how,
        }
