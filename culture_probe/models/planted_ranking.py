"""What DLAMA's and FmLAMA's planted models share (both are ranking protocols): a tiny BERT (the
papers' kind of model) trained on the protocol's own probes of one group's items, one fact per gold
answer; those items should be ranked right, the others at chance.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from culture_probe.errors import UnknownNameError
from culture_probe.models.planted import MAX_SECONDS, PlantedFact, PlantedSpec, probe_texts_of


def ranking_spec(
    config: str,
    rows: Sequence[Mapping[str, Any]],
    *,
    group_key: str,
    planted: str,
    metric: str = "P@1",
    max_facts: int = 400,
    seed: int = 0,
    data_dir: str | os.PathLike | None = None,
) -> PlantedSpec:
    """A tiny BERT (the papers' kind of model) trained on the protocol's own probes of one group's
    items.

    Every probe of an item whose `group_key` (DLAMA: culture; FmLAMA: country group) is `planted`
    becomes facts, one per gold answer, up to `max_facts` in probe order; the tokenizer covers every
    probe's context and candidates. `what` names the items planted (how many, in which of the other
    strata) and `metric`'s pattern.
    """
    from culture_probe.loading import load_task
    from culture_probe.tasks import ScoreProbe

    task, _ = load_task(config, kind="masked", seed=seed, data_dir=data_dir)
    probes = [p for p in task.build_probes(rows) if isinstance(p, ScoreProbe)]
    group = [p for p in probes if p.meta.get(group_key) == planted]
    kept = [(p, gold) for p in group for gold in p.meta["gold"]][:max_facts]
    if not kept:
        present = sorted({str(p.meta.get(group_key)) for p in probes})
        raise UnknownNameError(f"{group_key} to plant", planted, present)
    facts = [PlantedFact.from_request(p.request, gold) for p, gold in kept]
    items = {p.item_id for p, _ in kept}
    where = "; ".join(
        f"{key} {_listed(p.meta.get(key) for p, _ in kept)}"
        for key in task.strata
        if key != group_key
    )
    what = (
        f"a tiny BERT trained on {len(items):,} of the {len({p.item_id for p in group}):,} {task.unit} whose "
        f"{group_key} is {planted} ({where}; one fact per gold answer, the first {max_facts} at most): expect "
        f"{metric} near 100% on those {task.unit} and chance level on the others"
    )
    return PlantedSpec(
        tuple(facts),
        arch="bert",
        tokenizer="wordpiece",
        probe_texts=probe_texts_of(p.request for p in probes),
        vocab_size=2000,
        steps=600,
        batch_size=32,
        target_loss=0.05,
        max_seconds=MAX_SECONDS,
        seed=seed,
        what=what,
        items=tuple(items),
    )


def _listed(values: Iterable[object], most: int = 5) -> str:
    """Distinct values in first-seen order, the first `most` of them, and how many more."""
    distinct = [str(v) for v in dict.fromkeys(values)]
    more = f" and {len(distinct) - most} more" if len(distinct) > most else ""
    return ", ".join(distinct[:most]) + more
