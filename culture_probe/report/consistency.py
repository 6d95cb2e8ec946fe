"""The report's view of cross-lingual consistency (docs/consistency.md): per pair of languages, the
per-fact agreement table with the paired P@1 difference, RankC where the protocol ranks aligned
candidates, and a language x language heatmap, every number with its n.

It reads what the metrics wrote (`results.by_language_pair`, `consistency`), for any benchmark whose
task aligns its languages; a run with one language has no such section. A run that ranked nothing
(generation mode: no RankC) gets the heatmap of facts right in both languages and one summary line
instead of a table of near-identical rows with an empty RankC column; metrics.json keeps every
pair's table. `culture-probe consistency RUN_A RUN_B` pairs two runs of one language each the same
way.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from culture_probe import rundir
from culture_probe.errors import CultureProbeError
from culture_probe.metrics.consistency import PAIR_METRICS, consistency_detail, language_consistency
from culture_probe.metrics.display import (
    SMALL_N_MARK,
    SMALL_N_NOTE,
    format_number,
    format_p,
    interval_text,
    marked,
    p_clause,
)
from culture_probe.record import (
    RECORD_FIX,
    Consistency,
    Estimate,
    LanguagePair,
    Metrics,
    ResultsTable,
    read_metrics,
)
from culture_probe.report.compare import LoadedRun, incomplete_note, load_for_comparison
from culture_probe.report.markdown import figure_link, slug, table_markdown
from culture_probe.report.views import Heatmap, Section, Table
from culture_probe.rundir import PLOTS_DIR
from culture_probe.tasks import Record, task_from_config
from culture_probe.tasks.options import json_ready
from culture_probe.util import outfolder
from culture_probe.util.extras import available
from culture_probe.util.typecheck import check_document

TITLE = "Consistency across languages"
COLUMNS = (
    "languages (A/B)",
    "facts in both",
    "both right",
    "right in A only",
    "right in B only",
    "both wrong",
    "P@1 A - B (95% interval; p)",
    "p (Holm)",
    "RankC % (95% interval)",
    "n (RankC)",
    "not paired",
)


def consistency_sections(metrics: Metrics) -> list[Section]:
    """The consistency section of a run whose languages were aligned; for a run of an aligned
    benchmark that could not pair its languages (`results.omitted` names RankC or per-fact
    agreement), the section saying why; else nothing (a benchmark whose languages are not aligned).
    """
    detail: Consistency = metrics.get("consistency") or {}
    results = ResultsTable.of(metrics)
    estimates = results.by("language_pair")
    left_out = [
        f"- **{name}** is not reported: {why}."
        for name, why in results.omitted.items()
        # "rankc", or "rankc (ar/en)" for one pair of languages
        if name.split(" (")[0] in PAIR_METRICS
    ]
    if not detail.get("pairs") or not estimates:
        return [Section(TITLE, text="\n".join(left_out))] if left_out else []
    figure = _heatmap(detail["pairs"], estimates)
    figures = (figure,) if figure else ()
    # nothing ranked: agreement alone, said in one line
    if not any("rankc" in e for e in estimates.values()):
        lines = (
            _agreement_text(detail),
            _multiplicity(detail),
            _summary_line(detail["pairs"], estimates),
            "\n".join(left_out_lines(detail["pairs"])),
            "\n".join(left_out),
        )
        return [Section(TITLE, text="\n\n".join(filter(None, lines)), figures=figures)]
    rows = tuple(
        _row(name, detail["pairs"][name], estimates.get(name) or {}) for name in detail["pairs"]
    )
    left = ("\n".join(left_out_lines(detail["pairs"])), "\n".join(left_out))
    text = "\n\n".join(filter(None, (_text(detail), *left)))
    return [Section(TITLE, text=text, tables=(Table(COLUMNS, rows),), figures=figures)]


def _row(name: str, pair: LanguagePair, estimates: Mapping[str, Estimate]) -> tuple[Any, ...]:
    difference, rankc = pair["difference"], estimates.get("rankc")
    n = pair["n"]
    p = p_clause(difference.get("p_value"))
    shift = (
        f"{format_number(difference['difference'], '%')} {interval_text(_as_estimate(difference), '%')}"
        + (f"; {p}" if p else "")
        if difference.get("difference") is not None
        else ""
    )
    return (
        name,
        n,
        marked(_share(pair["both_right"], n), n),
        _share(pair["right_only_a"], n),
        _share(pair["right_only_b"], n),
        _share(pair["both_wrong"], n),
        marked(shift, n),
        format_p(difference.get("p_holm")) if difference.get("p_holm") is not None else "",
        marked(f"{format_number(rankc['value'], '%')} {interval_text(rankc, '%')}", rankc["n"])
        if rankc
        else "",
        rankc["n"] if rankc else 0,
        "; ".join(not_paired(pair)),
    )


def not_paired(pair: LanguagePair) -> list[str]:
    """What a pair of languages could not pair, each count with why: facts asked in one language
    only (in no number), and facts in both that RankC leaves out (agreement keeps them).
    """
    left = pair["unpaired"]["only_a"] + pair["unpaired"]["only_b"]
    found = [f"{left} facts in one language only"] if left else []
    return found + [
        f"{count} left out of RankC: {why}" for why, count in rankc_left_out(pair).items() if count
    ]


def rankc_left_out(pair: LanguagePair) -> dict[str, int]:
    """{why: facts in both languages that RankC left out} (`metrics.consistency._pair`; {} in
    records made before).
    """
    found = cast(Mapping[str, Any], pair).get("rankc_left_out") or {}
    return {
        str(why): count
        for why, count in dict(found).items()
        if isinstance(count, int) and count > 0
    }


def left_out_lines(pairs: Mapping[str, LanguagePair]) -> list[str]:
    """One line per pair whose RankC leaves facts out: how many of the facts in both, and why."""
    lines = []
    for name, pair in pairs.items():
        left = rankc_left_out(pair)
        if left:
            why = "; ".join(
                f"{count} {REASONS.get(reason, reason)}" for reason, count in left.items()
            )
            lines.append(
                f"- **{name}**: RankC covers {pair['n'] - sum(left.values())} of the {pair['n']} facts in both "
                f"languages; it leaves out {why}. Agreement counts them all."
            )
    return lines


# why RankC leaves a fact out, as the report says it (`metrics.consistency._pair`'s keys)
REASONS = {
    "candidate sets differ": "whose rankings are over candidate sets that differ between the two languages "
    "(RankC compares rankings of one candidate set)",
    "not ranked": "answered without a ranking in a language (a generation)",
}


def _share(count: int, n: int) -> str:
    return f"{count} ({format_number(100.0 * count / n, '%')}%)" if n else str(count)


def _as_estimate(difference: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "value": difference["difference"],
        "ci_low": difference["ci_low"],
        "ci_high": difference["ci_high"],
    }


def _heatmap(
    pairs: Mapping[str, LanguagePair], estimates: Mapping[str, Mapping[str, Estimate]]
) -> Heatmap | None:
    """RankC (or, where nothing is ranked, the share right in both) for every pair, both ways round;
    n in each cell.
    """
    metric = "rankc" if any("rankc" in e for e in estimates.values()) else "both_right"
    languages = _languages(pairs)
    if len(languages) < 2:
        return None
    index = {lang: i for i, lang in enumerate(languages)}
    values: list[list[float | None]] = [[None] * len(languages) for _ in languages]
    counts: list[list[int | None]] = [[None] * len(languages) for _ in languages]
    for name, by_metric in estimates.items():
        a, b = name.split("/", 1)
        found = by_metric.get(metric)
        for i, j in ((index[a], index[b]), (index[b], index[a])):
            values[i][j], counts[i][j] = (found["value"], found["n"]) if found else (None, None)
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


def _text(detail: Consistency) -> str:
    lines: Sequence[str] = (
        "Whether the facts the model gets right in one language are those it gets right in another (per-fact "
        "agreement of P@1 on the facts probed in both, with the paired difference: Tango's interval and McNemar's "
        "test, both with continuity correction), and how far its rankings of the same candidates agree whatever "
        "their accuracy (RankC, Qi et al. 2023, softmax weights, in percent; the bounded mean's interval over "
        "facts).",
        _multiplicity(detail),
        f"Alignment: {detail['alignment']}" if detail.get("alignment") else "",
        f"RankC is computed from each record's first {detail.get('depth')} aligned candidates: the depths beyond "
        "weigh less than 2.1e-9 together, which bounds its difference from RankC of the whole rankings.",
        "docs/consistency.md says how to read the table and the heatmap.",
    )
    return "\n\n".join(line for line in lines if line)


def _agreement_text(detail: Consistency) -> str:
    """What the section of a run that ranked nothing shows: agreement only, no claim about RankC."""
    lines = (
        "Whether the facts the model gets right in one language are those it gets right in another: per pair of "
        "languages, the share of facts right in both (the heatmap, each cell with its n) and the paired P@1 "
        "difference on the facts probed in both (Tango's interval and McNemar's test, both with continuity "
        "correction). RankC needs the same candidates ranked in both languages and is not reported; each pair's "
        "agreement table is in metrics.json (`consistency.pairs`).",
        f"Alignment: {detail['alignment']}" if detail.get("alignment") else "",
    )
    return "\n\n".join(line for line in lines if line)


def _summary_line(
    pairs: Mapping[str, LanguagePair], estimates: Mapping[str, Mapping[str, Estimate]]
) -> str:
    """One line for every pair of a run that ranked nothing: one pair's agreement and paired
    difference; for several, the range and median of the share right in both and how many paired
    differences exclude 0 after Holm.
    """
    if len(pairs) == 1:
        ((name, pair),) = pairs.items()
        a, b = name.split("/", 1)
        n, difference = pair["n"], pair["difference"]
        shift = (
            f"; P@1 {a} - {b} {format_number(difference['difference'], '%')} "
            f"{interval_text(_as_estimate(difference), '%')}"
            + (f", {p}" if (p := p_clause(difference.get("p_value"))) else "")
            if difference.get("difference") is not None
            else ""
        )
        return (
            f"**{name}**: {marked(str(n), n)} facts in both; right in both {_share(pair['both_right'], n)}, in {a} "
            f"only {_share(pair['right_only_a'], n)}, in {b} only {_share(pair['right_only_b'], n)}, both wrong "
            f"{_share(pair['both_wrong'], n)}{shift}."
        )
    shares = sorted(
        (found["value"], name)
        for name, e in estimates.items()
        if (found := e.get("both_right")) and found["value"] is not None
    )
    counts = [pair["n"] for pair in pairs.values()]
    adjusted = {name: pair["difference"].get("p_holm") for name, pair in pairs.items()}
    excluded = [name for name, p in adjusted.items() if p is not None and p < 0.05]
    facts = f"{min(counts)}" if min(counts) == max(counts) else f"{min(counts)} to {max(counts)}"
    spread = (
        f"right in both from {format_number(shares[0][0], '%')}% ({shares[0][1]}) to "
        f"{format_number(shares[-1][0], '%')}% ({shares[-1][1]}), median "
        f"{format_number(float(np.median([v for v, _ in shares])), '%')}%; "
        if shares
        else ""
    )
    named = (
        f" ({', '.join(excluded[:5])}{', ...' if len(excluded) > 5 else ''})" if excluded else ""
    )
    return (
        f"**{len(pairs)} pairs of {len(_languages(pairs))} languages**, {facts} facts in both per pair: {spread}"
        f"the paired P@1 difference has p (Holm) < 0.05 in {len(excluded)} of {len(pairs)} pairs{named}."
    )


def _multiplicity(detail: Consistency) -> str:
    """How many paired tests the table holds, and how they are adjusted (none to say for a single
    pair).
    """
    pairs = detail.get("pairs") or {}
    tests = max((pair["difference"].get("n_tests") or 0 for pair in pairs.values()), default=0)
    if tests < 2:
        return ""
    return (
        f"The paired P@1 differences are {tests} tests, one per pair of languages: `p (Holm)` adjusts them by Holm's "
        "step-down procedure, which keeps the chance of any false positive among them at 5% when read against 0.05; "
        "the 95% intervals are per pair, not adjusted."
    )


@dataclass(frozen=True)
class RunsConsistency:
    """`culture-probe consistency RUN_A RUN_B`: two runs of one model and benchmark, one language
    each, paired fact by fact as within a run; `incomplete` marks those that did not finish ({run:
    `INCOMPLETE k/N`}).
    """

    runs: tuple[str, str]
    # `results.by_language_pair` and `consistency`, as a run's metrics.json holds them
    metrics: Metrics
    incomplete: Mapping[str, str] = field(default_factory=dict)
    config: str = ""  # the benchmark config both runs probed

    @property
    def how_to_get_all(self) -> str:
        """How to get RankC on every fact when the two runs' candidate sets differ: one run of both
        languages.
        """
        pairs = (self.metrics.get("consistency") or {}).get("pairs") or {}
        if not any(rankc_left_out(pair).get("candidate sets differ") for pair in pairs.values()):
            return ""
        return (
            "Each run aligned its candidates over its own language's labels only, so where one language names two "
            "candidates alike the two runs rank different sets. For RankC on every fact, probe both languages in one "
            f"run (`culture-probe run {self.config or 'CONFIG'} ...` without `--language`): its candidates are "
            "aligned over both languages' labels, and its report has this section."
        )

    def markdown(self, out: Path | None = None) -> str:
        """The consistency section as markdown, after a note on each run that did not finish; its
        figure is drawn into `out/plots/` when given.
        """
        (section,) = consistency_sections(self.metrics)
        notes = "\n".join(
            f"- **note**: {incomplete_note(run, status)}" for run, status in self.incomplete.items()
        )
        parts = [
            f"# Consistency of {self.runs[0]} and {self.runs[1]}",
            *([notes] if notes else []),
            section.text,
        ]
        parts += [table_markdown(table) for table in section.tables]
        parts += [self.how_to_get_all] if self.how_to_get_all else []
        cells = [
            section.text,
            *(cell for table in section.tables for row in table.rows for cell in row),
        ]
        if any(SMALL_N_MARK in str(cell) for cell in cells):
            parts.append(SMALL_N_NOTE)
        if out is not None and available("matplotlib"):
            (out / PLOTS_DIR).mkdir(parents=True, exist_ok=True)
            # said in the image
            note = "; ".join(f"{run}: {status}" for run, status in self.incomplete.items())
            parts += [
                figure_link(f, out / PLOTS_DIR / slug(f.title), f.title, note)
                for f in section.figures
            ]
        return "\n\n".join(parts) + "\n"

    def to_json(self) -> dict[str, Any]:
        """consistency.json: the runs, those that did not finish, and the metrics."""
        return json_ready(
            {
                "runs": list(self.runs),
                "incomplete": dict(self.incomplete),
                **({"how_to_get_all": self.how_to_get_all} if self.how_to_get_all else {}),
                **self.metrics,
            }
        )


def consistency_of_runs(run_a: str | Path, run_b: str | Path) -> RunsConsistency:
    """Consistency between two runs that probed different languages of one benchmark with one model
    and protocol options: refused (naming the difference) otherwise, or when the benchmark's data do
    not align its languages.
    """
    runs = [load_for_comparison(path, Path(path).name) for path in (run_a, run_b)]
    _check_same_probe(*runs)
    tasks = [task_from_config(run.config.to_json()) for run in runs]
    if tasks[0].alignment is None:
        raise CultureProbeError(
            f"culture_probe aligns no facts across the languages of {runs[0].config.config} (docs/consistency.md, "
            "'Alignment per benchmark', says why): no consistency can be computed for its runs."
        )
    answered = [[r for r in run.records if not r.skipped] for run in runs]
    for path, run, task in zip((run_a, run_b), runs, tasks, strict=True):
        _check_aligned_fields(Path(path) / rundir.ITEMS_FILE, run.records, task.aligned_fields)
    scores = [task.scores(found) for task, found in zip(tasks, answered, strict=True)]
    answers = [list(s.aligned) for s in scores]
    for run, task, found, score in zip(runs, tasks, answered, scores, strict=True):
        if not score.aligned:
            raise CultureProbeError(
                f"{run.name} has no answer to pair with another run's: {task.unaligned(found, score)}."
            )
    languages = [sorted({a.language for a in found}) for found in answers]
    if set(languages[0]) & set(languages[1]):
        raise CultureProbeError(
            f"{runs[0].name} and {runs[1].name} both probed {', '.join(sorted(set(languages[0]) & set(languages[1])))}"
            ": pass runs of different languages (a run of several languages reports its own consistency)."
        )
    across = language_consistency([*answers[0], *answers[1]], [*languages[0], *languages[1]])
    if not across:
        raise CultureProbeError(
            f"{runs[0].name} and {runs[1].name} share no fact: they probed different items."
        )
    metrics = read_metrics(
        json_ready(
            {
                "results": {
                    "by_language_pair": across["by_language_pair"],
                    "ci": {"methods": across["methods"]},
                },
                "consistency": {"alignment": tasks[0].alignment, **consistency_detail(across)},
            }
        ),
        f"the consistency of {runs[0].name} and {runs[1].name}",
    )
    incomplete = {run.name: run.status for run in runs if run.status}
    return RunsConsistency((runs[0].name, runs[1].name), metrics, incomplete, runs[0].config.config)


def _check_aligned_fields(
    items: Path, records: Sequence[Record], fields: Mapping[str, Any]
) -> None:
    """Refuse a record whose fields that the alignment reads (`Task.aligned_fields`) are of another
    type, naming its line of items.jsonl (every record is one line, in order), rather than failing
    in the metrics.
    """
    for line, record in enumerate(records, 1):
        for name, hint in fields.items():
            if name in record:
                check_document(record[name], hint, str(items), RECORD_FIX, name, line=line)


def _check_same_probe(a: LoadedRun, b: LoadedRun) -> None:
    """One model, one benchmark and the same protocol options, as `compare` requires to pair
    runs.
    """
    checks = (
        ("model", a.config.model.identity, b.config.model.identity),
        ("benchmark", a.config.benchmark.name, b.config.benchmark.name),
        ("protocol options", a.config.options, b.config.options),
    )
    for what, first, second in checks:
        if first != second:
            raise CultureProbeError(
                f"Cannot pair {a.name} with {b.name}: their {what} differ ({first!r:.120} vs {second!r:.120}). "
                "Consistency compares one model's answers under one protocol in two languages."
            )


CONSISTENCY = outfolder.Output(
    "consistency report",
    ".culture_probe_consistency",
    shared=True,
    locked=True,
    taken=rundir.folder_kind,
)  # `consistency --out`: a folder of the user's, whose other files stay; never a run's


def write_consistency(result: RunsConsistency, out: str | os.PathLike) -> list[Path]:
    """consistency.md (with its figure) and consistency.json in `out`, built beside it and swapped
    in when complete (`culture_probe.util.outfolder`); the paths written.
    """
    with outfolder.rebuilding(out, CONSISTENCY) as build:
        rundir.write_text(build.folder / "consistency.md", result.markdown(build.folder))
        body = json.dumps(result.to_json(), ensure_ascii=False, indent=2)
        rundir.write_text(build.folder / "consistency.json", body + "\n")
    return [Path(out) / name for name in build.files]
