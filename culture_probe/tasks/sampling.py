"""What a benchmark draws at random, and how a `--limit` subset draws from it: the sampling design
its intervals follow (`SamplingDesign`), the units shared across languages (`Parallel`), what a
smoke run needs (`Smoke`), and the stratified draws themselves (`stratified_items`,
`stratified_share`), seeded and in probe order.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass
from fractions import Fraction
from itertools import zip_longest
from typing import Any

from culture_probe.errors import CultureProbeError
from culture_probe.tasks.probes import Probe


@dataclass(frozen=True)
class Smoke:
    """What a benchmark's headline numbers need of a `--limit` subset: `per_cell` items in every
    cell of its strata (each cell that has them), and in words which numbers need them (`needs`),
    for the notice of a smaller limit.

    The limit sampler (`stratified_items`) gives every cell one item per round, so `per_cell` full
    rounds are the smallest limit that guarantees it whatever the seed: the benchmark's smoke limit
    (`Task.smoke_limit`). Where the task draws parallel units (`Parallel`), the rounds are over its
    cells without the language, and the smoke limit counts those units.
    """

    per_cell: int = 1
    needs: str = "every number per stratum needs an item in each cell"
    #: the probe tags a smoke run asks of each item (None: all), where asking every one costs much
    #: and a few give every headline number (FmLAMA: two templates of each family, for a mean and a
    #: std over templates)
    tags: tuple[str, ...] | None = None
    #: what a smoke run leaves out in words (the dry run says it), beside the items it does not draw
    omits: str = ""

    def asked(self, probes: Sequence[Probe]) -> list[Probe]:
        """The probes of a smoke run's drawn items that it asks: those with one of `tags`, or
        all.
        """
        return list(probes) if self.tags is None else [p for p in probes if p.tag in self.tags]


@dataclass(frozen=True)
class Parallel:
    """How one item of a benchmark is named across its languages, so that a `--limit` subset draws
    that item in all of them: the probe meta `fields` whose values name it (DLAMA: the release's
    `uuid`; X-FaKT factual recall: the country and entity index), what `--limit` then counts
    (`unit`: "facts", "entities"), and the stratum that varies within one unit (`across`: the prompt
    language).

    A subset draws units stratified by the task's other strata and probes each in every language it
    has, so that consistency across languages and paired language comparisons exist at any limit;
    items drawn per language separately would share almost no fact at smoke size.
    """

    fields: tuple[str, ...]
    unit: str
    across: str = "language"

    def name(self, fields: Any) -> str | None:
        """The unit that a probe's meta or a record (anything with `.get`) names by its `fields`;
        None when it lacks one (an older record, a probe of no parallel unit).
        """
        values = [fields.get(name) for name in self.fields]
        if any(value is None for value in values):
            return None
        return "=" + json.dumps(values, ensure_ascii=False, default=str)

    def key(self, probe: Probe) -> str:
        """The unit of `probe`: its `fields` values (a probe that lacks one is a unit of its own
        item).
        """
        return self.name(probe.meta) or f"#{probe.item_id}"


Unit = Callable[[Probe], str]  # the unit a probe is drawn with (default: its item)


def _item(probe: Probe) -> str:
    return probe.item_id


def stratified_items(
    probes: Sequence[Probe],
    limit: int,
    strata: Sequence[str],
    seed: int,
    *,
    unit: Unit | None = None,
    favoured: Set[str] = frozenset(),
) -> list[Probe]:
    """The probes (in probe order) of `limit` units (items, or what `unit` names, e.g. a fact in
    every language): the units are grouped by their first probe's `strata` meta values, each group
    shuffled with `seed`, and the groups, in a seeded order, give one unit each in turn. Where some
    units are `favoured` (a planted model's), each group gives favoured and other units by turns,
    every other group starting with a favoured one, so that any number of units holds both kinds in
    about equal parts, with the same units per group as without.
    """
    if limit < 1:
        raise CultureProbeError(f"limit must be at least 1, got {limit}.")
    key = unit or _item
    groups = strata_cells(probes, strata, unit=key)
    if sum(len(units) for units in groups.values()) <= limit:
        return list(probes)
    rng = random.Random(seed)
    keys = sorted(groups)
    rng.shuffle(keys)
    queues = [rng.sample(groups[k], len(groups[k])) for k in keys]
    if favoured:
        queues = [_by_turns(queue, favoured, i % 2 == 0) for i, queue in enumerate(queues)]
    chosen: set[str] = set()
    while len(chosen) < limit:
        for queue in queues:
            if queue and len(chosen) < limit:
                chosen.add(queue.pop())
    return [p for p in probes if key(p) in chosen]


def _by_turns(queue: list[str], favoured: Set[str], favoured_first: bool) -> list[str]:
    """`queue` (drawn from its end) reordered so that favoured and other units come by turns, each
    kind in its shuffled order.
    """
    known, other = [u for u in queue if u in favoured], [u for u in queue if u not in favoured]
    first, second = (known[::-1], other[::-1]) if favoured_first else (other[::-1], known[::-1])
    turns = [u for pair in zip_longest(first, second) for u in pair if u is not None]
    return turns[::-1]


def stratified_share(
    probes: Sequence[Probe],
    share: float,
    strata: Sequence[str],
    seed: int,
    *,
    unit: Unit | None = None,
) -> list[Probe]:
    """The probes (in probe order) of `share` of each stratum's units (items, or what `unit` names),
    rounded up (so at least one per stratum), each stratum's drawn with `seed`: `--limit 0.1`, as
    lm-evaluation-harness reads a fractional limit, but per stratum.
    """
    # in floats 0.1 * 30 is 3.0000000000000004, which would round up to 4
    exact = Fraction(repr(share))
    rng = random.Random(seed)
    key = unit or _item
    groups = strata_cells(probes, strata, unit=key)
    chosen = {
        item
        for k in sorted(groups)
        for item in rng.sample(groups[k], math.ceil(exact * len(groups[k])))
    }
    return [p for p in probes if key(p) in chosen]


def strata_cells(
    probes: Sequence[Probe], strata: Sequence[str], *, unit: Unit | None = None
) -> dict[tuple[str, ...], list[str]]:
    """{cell: its units, in probe order}: each unit (an item, or what `unit` names) in the cell of
    its first probe's `strata` values.
    """
    key = unit or _item
    first: dict[str, Probe] = {}
    for probe in probes:
        first.setdefault(key(probe), probe)
    cells: dict[tuple[str, ...], list[str]] = {}
    for name, probe in first.items():
        cells.setdefault(tuple(str(probe.meta.get(k)) for k in strata), []).append(name)
    return cells
