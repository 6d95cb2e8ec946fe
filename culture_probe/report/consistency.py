"""The report's view of cross-lingual consistency (docs/consistency.md): per pair of languages, the per-fact
agreement table with the paired P@1 difference, RankC where the protocol ranks aligned candidates, and a language x
language heatmap, every number with its n.

It reads what the metrics wrote (`results.by_language_pair`, `consistency`), for any benchmark whose task aligns its
languages; a run with one language has no such section.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from culture_probe.metrics.display import format_number, interval_text, marked
from culture_probe.report.views import Heatmap, Section, Table

TITLE = "Consistency across languages"
COLUMNS = (
    "languages (A/B)",
    "facts in both",
    "both right",
    "right in A only",
    "right in B only",
    "both wrong",
    "P@1 A - B (95% interval; p)",
    "RankC % (95% interval)",
    "n (RankC)",
    "not paired",
)


def consistency_sections(metrics: Mapping[str, Any]) -> list[Section]:
    """The consistency section of a run whose languages were aligned, else nothing."""
    detail = metrics.get("consistency") or {}
    estimates = (metrics.get("results") or {}).get("by_language_pair") or {}
    if not detail.get("pairs") or not estimates:
        return []
    rows = tuple(_row(name, detail["pairs"][name], estimates.get(name) or {}) for name in detail["pairs"])
    figure = _heatmap(detail["pairs"], estimates)
    return [Section(TITLE, text=_text(detail), tables=(Table(COLUMNS, rows),), figures=(figure,) if figure else ())]


def _row(name: str, pair: Mapping[str, Any], estimates: Mapping[str, Any]) -> tuple[Any, ...]:
    difference, rankc = pair["difference"], estimates.get("rankc") or {}
    n = pair["n"]
    shift = (
        f"{format_number(difference['difference'], '%')} {interval_text(_as_estimate(difference), '%')}; "
        f"p = {difference['p_value']:.3g}"
        if difference.get("difference") is not None
        else ""
    )
    left = pair["unpaired"]["only_a"] + pair["unpaired"]["only_b"]
    return (
        name,
        n,
        marked(_share(pair["both_right"], n), n),
        _share(pair["right_only_a"], n),
        _share(pair["right_only_b"], n),
        _share(pair["both_wrong"], n),
        marked(shift, n),
        marked(f"{format_number(rankc['value'], '%')} {interval_text(rankc, '%')}", rankc.get("n")) if rankc else "",
        rankc.get("n", 0) if rankc else 0,
        f"{left} facts in one language only" if left else "",
    )


def _share(count: int, n: int) -> str:
    return f"{count} ({format_number(100.0 * count / n, '%')}%)" if n else str(count)


def _as_estimate(difference: Mapping[str, Any]) -> dict[str, Any]:
    return {"value": difference["difference"], "ci_low": difference["ci_low"], "ci_high": difference["ci_high"]}


def _heatmap(pairs: Mapping[str, Any], estimates: Mapping[str, Any]) -> Heatmap | None:
    """RankC (or, where nothing is ranked, the share right in both) for every pair, both ways round; n in each cell."""
    metric = "rankc" if any("rankc" in e for e in estimates.values()) else "both_right"
    languages = _languages(pairs)
    if len(languages) < 2:
        return None
    index = {lang: i for i, lang in enumerate(languages)}
    values: list[list[float | None]] = [[None] * len(languages) for _ in languages]
    counts: list[list[int | None]] = [[None] * len(languages) for _ in languages]
    for name, by_metric in estimates.items():
        a, b = name.split("/", 1)
        found = by_metric.get(metric) or {}
        for i, j in ((index[a], index[b]), (index[b], index[a])):
            values[i][j], counts[i][j] = found.get("value"), found.get("n")
    label = "RankC (%)" if metric == "rankc" else "facts right in both languages (%)"
    return Heatmap(
        tuple(languages),
        tuple(languages),
        tuple(map(tuple, values)),
        label,
        title=f"{label} per pair of languages",
        scale="%",
        counts=tuple(map(tuple, counts)),
    )


def _languages(pairs: Mapping[str, Any]) -> list[str]:
    order: dict[str, None] = {}
    for name in pairs:
        for language in name.split("/", 1):
            order.setdefault(language, None)
    return list(order)


def _text(detail: Mapping[str, Any]) -> str:
    lines: Sequence[str] = (
        "Whether the facts the model gets right in one language are those it gets right in another (per-fact "
        "agreement of P@1 on the facts probed in both, with the paired difference: Tango's interval and McNemar's "
        "test), and how far its rankings of the same candidates agree whatever their accuracy (RankC, Qi et al. "
        "2023, softmax weights, in percent; a t interval over facts).",
        f"Alignment: {detail['alignment']}" if detail.get("alignment") else "",
        f"RankC is computed from each record's first {detail.get('depth')} aligned candidates: the depths beyond "
        "weigh less than 2.1e-9 together, which bounds its difference from RankC of the whole rankings.",
        "docs/consistency.md says how to read the table and the heatmap.",
    )
    return "\n\n".join(line for line in lines if line)
