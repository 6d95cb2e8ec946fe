"""`make demo`: X-FaKT factual recall on a planted model, end to end; the report shows the
cross-lingual gap.

Offline, on the mirror's X-FaKT data, in two parts, both written into one run directory:

1. The main job. `planted:xfakt_factual_recall` is a tiny GPT-2 trained (in under two minutes, then
   cached) on the first 5 entities of each of the 13 countries, each fact stated **only in its
   country's own language**. The demo asks those 65 entities in all 13 languages through
   `culture_probe.run`, with the paper's generation protocol (chat template, greedy) and the offline
   string-matching judge, and writes the run directory (`config.json`, `items.jsonl`,
   `metrics.json`, `report.md`, `plots/`): recall is high in the associated language and low in the
   other twelve, so the Knowledge Transferability Score (KTS) is low, as the planting predicts.
2. A ranking self-test, written beside the run as `self_test.md` (the run's own `report.md` stays
   what `culture-probe report` re-renders). For each architecture (GPT-2 causal, BERT masked), a
   tiny model is trained for seconds on the English facts of some *planted* countries only; the
   engine ranks the 13 countries as answers to every sampled question. A probe that works ranks the
   gold first for planted facts, and no better than chance for the others.

    python -m culture_probe.demo --out runs/demo
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from culture_probe import rundir
from culture_probe.engine.scorer import ScorerProtocol
from culture_probe.engine.types import ScoreRequest
from culture_probe.models.planted import (
    PlantedFact,
    PlantedSpec,
    TrainingRecord,
    probe_texts_of,
    read_record,
    train_planted,
)
from culture_probe.models.tiny import Arch, TokenizerKind

SELF_TEST_FILE = "self_test.md"  # the demo's own file beside the run directory's files
CONFIG = "xfakt_factual_recall"
PLANTED_COUNTRIES = ("United States", "France", "Russia", "Ukraine", "Greece", "Turkey")
ARCH_TOKENIZER: dict[str, TokenizerKind] = {"gpt2": "bpe", "bert": "wordpiece"}
COLUMNS = ("facts", "group", "n", "mean rank", "P@1")
MODEL = f"planted:{CONFIG}"
# entities per country the planted model saw (culture_probe.models.planted_benchmarks.xfakt_spec)
PER_COUNTRY = 5


def probed_rows() -> list[dict[str, Any]]:
    """The planted model's entities, asked in all 13 languages (13 x 65 = 845 questions)."""
    from culture_probe.benchmarks.xfakt.planted import planted_entities
    from culture_probe.data.registry import load_benchmark

    rows = list(load_benchmark(CONFIG)["test"])
    chosen = planted_entities(rows, PER_COUNTRY)
    return [row for row in rows if row["entity_idx"] in chosen]


def run_xfakt(out: Path) -> Any:
    """Part 1: the X-FaKT protocol on the planted model, written to `out` (a second call resumes and
    re-reports).
    """
    import culture_probe

    resume = (out / rundir.CONFIG_FILE).is_file()
    return culture_probe.run(
        CONFIG, MODEL, rows=probed_rows(), judge="string", out=out, resume=resume, progress=False
    )


def xfakt_summary(metrics: Mapping[str, Any]) -> str:
    """The cross-lingual gap in a few lines for the terminal."""
    return "\n".join(
        [
            f"X-FaKT factual recall on {MODEL} ({metrics['n_items']} questions):",
            f"  error in the associated language {100 * metrics['mu_assoc']:5.1f} %, in the other 12 "
            f"{100 * metrics['mu_non']:5.1f} %",
            f"  FRS {metrics['frs']:.3f}  KTS {metrics['kts']:.3f}  X-FaKT {metrics['xfakt']:.3f}  (low KTS: the facts "
            "do not transfer across languages, as planted)",
        ]
    )


@dataclass(frozen=True)
class Probe:
    """One question, its 13 candidate countries, the gold one, and whether the fact was planted."""

    request: ScoreRequest
    gold: str
    planted: bool


@dataclass(frozen=True)
class ModelResult:
    """What one planted model did: the rows of its table and how its training went."""

    arch: str
    path: Path
    record: TrainingRecord
    rows: tuple[tuple[Any, ...], ...]


def sample_rows(rows: Sequence[Mapping[str, Any]], per_country: int) -> list[Mapping[str, Any]]:
    """`per_country` entities of every country, spread evenly over its list (so every category is
    represented).
    """
    by_country: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_country.setdefault(row["country"], []).append(row)
    return [
        row
        for group in by_country.values()
        for row in group[:: max(1, len(group) // per_country)][:per_country]
    ]


def build_probes(
    rows: Sequence[Mapping[str, Any]], planted_countries: Sequence[str]
) -> list[Probe]:
    """The log-prob form of the question: the reply starts with one of the 13 country names."""
    return [
        Probe(
            ScoreRequest(row["question"], tuple(row["country_names"]), sep=" "),
            row["answer"],
            row["country"] in planted_countries,
        )
        for row in rows
    ]


def plant(probes: Sequence[Probe], arch: Arch, *, seed: int, cache_dir: Path) -> Path:
    """A tiny `arch` model trained on the planted probes' facts; its tokenizer also covers every
    other probe.
    """
    spec = PlantedSpec(
        tuple(PlantedFact.from_request(p.request, p.gold) for p in probes if p.planted), arch=arch,
        tokenizer=ARCH_TOKENIZER[arch], probe_texts=probe_texts_of(p.request for p in probes), batch_size=16,
        steps=2000, seed=seed)  # fmt: skip
    return train_planted(spec, cache_dir)


def gold_ranks(scorer: ScorerProtocol, probes: Sequence[Probe]) -> np.ndarray:
    """Rank of the gold in the engine's ranking by mean log-prob (1 = first)."""
    results = scorer.score([p.request for p in probes])
    return np.array(
        [
            1 + int(np.flatnonzero(out.ranking("mean") == p.request.candidates.index(p.gold))[0])
            for out, p in zip(results, probes, strict=True)
        ]
    )


def summarise(probes: Sequence[Probe], ranks: np.ndarray) -> tuple[tuple[Any, ...], ...]:
    """One row per group (planted, unplanted) and the chance row: count, mean rank, P@1."""
    planted = np.array([p.planted for p in probes])
    n_candidates = len(probes[0].request.candidates)
    rows: list[tuple[str, str, int | str, float, float]] = []  # the chance row has no count
    for label, mask in (("planted", planted), ("not planted", ~planted)):
        group = "the planted countries" if label == "planted" else "the other countries"
        rows.append(
            (
                label,
                group,
                int(mask.sum()),
                round(float(ranks[mask].mean()), 2),
                round(float((ranks[mask] == 1).mean()), 3),
            )
        )
    rows.append(
        (
            "(random ranking)",
            f"{n_candidates} candidates",
            "",
            round((n_candidates + 1) / 2, 2),
            round(1 / n_candidates, 3),
        )
    )
    return tuple(rows)


def run_model(probes: Sequence[Probe], arch: Arch, *, seed: int, cache_dir: Path) -> ModelResult:
    """Train (or reuse) the planted `arch` model and probe it through the engine."""
    from culture_probe.engine import Scorer

    path = plant(probes, arch, seed=seed, cache_dir=cache_dir)
    ranks = gold_ranks(Scorer.from_pretrained(path), probes)
    return ModelResult(arch, path, read_record(path), summarise(probes, ranks))


def render(results: Sequence[ModelResult], planted_countries: Sequence[str], n_probes: int) -> str:
    """self_test.md: what was planted, one table per model, and how to read it."""
    from culture_probe.report.markdown import table_markdown
    from culture_probe.report.views import Table

    lines = [
        "## Self-test: planted vs unplanted countries (ranking)",
        "",
        f"Data: `{CONFIG}`, English questions, {n_probes} entities (the same number per country). Each tiny model "
        f"was trained only on the facts of {', '.join(planted_countries)}; the engine then ranked the 13 countries "
        "as the answer to every question (mean log-prob of the country name after the question).",
        "",
        "A probe that works ranks the gold first for planted facts and no better than random ranking for the "
        "others (a model that never saw a fact prefers the countries it did see, so it can fall below chance).",
    ]
    for result in results:
        record = result.record
        lines += [
            "",
            f"### {result.arch} ({ARCH_TOKENIZER[result.arch]} tokenizer)",
            "",
            table_markdown(Table(COLUMNS, result.rows)),
            "",
            f"Training: {record.steps} steps, {record.seconds:.1f} s, final answer loss "
            f"{record.answer_loss:.4f} ({'converged' if record.converged else 'NOT converged'}, "
            f"stopped by {record.stopped_by}). Model: `{result.path.name}`.",
        ]
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The demo's options; the defaults are what `make demo` runs."""
    parser = argparse.ArgumentParser(
        prog="python -m culture_probe.demo", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--out",
        default="runs/demo",
        help="the run directory (config.json, items.jsonl, report.md, plots), with the self-test's "
        "self_test.md and models",
    )
    parser.add_argument(
        "--arch", nargs="+", default=list(ARCH_TOKENIZER), choices=list(ARCH_TOKENIZER)
    )
    parser.add_argument(
        "--per-country", type=_positive, default=20, help="entities probed per country"
    )
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Run both parts: the run directory `<out>` (with its report.md), and `<out>/self_test.md`,
    printed.
    """
    from culture_probe.data.registry import load_benchmark

    args = parse_args(argv)
    start, out = time.monotonic(), Path(args.out)
    print(
        f"Part 1: X-FaKT factual recall on {MODEL} (trains the planted model once, then cached) ...",
        flush=True,
    )
    result = run_xfakt(out)
    print("Part 2: ranking self-test ...", flush=True)
    rows = sample_rows(load_benchmark(CONFIG, languages=("en",))["test"], args.per_country)
    probes = build_probes(rows, PLANTED_COUNTRIES)
    results = [
        run_model(probes, arch, seed=args.seed, cache_dir=out / "models") for arch in args.arch
    ]
    self_test = render(results, PLANTED_COUNTRIES, len(probes))
    rundir.write_text(out / SELF_TEST_FILE, self_test)
    print(self_test)
    print(xfakt_summary(result.metrics))
    print(
        f"Wrote {out / rundir.REPORT_FILE} and {out / SELF_TEST_FILE} in {time.monotonic() - start:.0f} s."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
