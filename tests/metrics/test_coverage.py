"""The intervals mean what they say under each benchmark's sampling design: every printed 95%
interval covers a known truth at least 93% of the time, in every simulated cell, down to the
smallest n at which one is printed.

Proportions get their exact coverage (every outcome 0..n weighted by its binomial probability,
averaged over the true p in a band, with the band's worst p alongside); the other designs are
simulated with a fixed seed from a known truth, each through the library's own functions:
- DLAMA: facts, each asked in two languages whose answers agree with correlation 0 to 0.9 (clustered
  proportions);
- MAPS few-shot: proverbs answered under three demonstration sets (replicated proportions), few of
  them included;
- FmLAMA and RankC: bounded skewed means (AP with many zeros, AP with rare hits, bimodal per-fact
  RankC);
- CAMeL: prompts crossed with entity samples (runs), macro-averaged over entity types;
- X-FaKT: questions in language x country cells, with low error rates and 1 to 5 questions per cell.

`python tests/metrics/test_coverage.py` prints the table that docs/results.md shows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pytest
from scipy import stats

from culture_probe.benchmarks.xfakt.metrics import (
    ASSOCIATIONS,
    GradedAnswer,
    answers_summary,
    transfer_estimates,
)
from culture_probe.metrics.results import UnitTable, estimate

NOMINAL_FLOOR = 0.93  # the bar: a 95% interval that covers less than this is not honest
# per simulated cell: a coverage of 0.95 is measured to about ±0.009 (one standard error)
SIMULATIONS = 600
BANDS = {
    "p near 0": (0.005, 0.05),
    "p low": (0.05, 0.2),
    "p mid": (0.2, 0.8),
    "p near 1": (0.95, 0.995),
}
SIZES = (5, 10, 20, 50, 100, 200)


@dataclass(frozen=True)
class Coverage:
    """One cell's measured coverage (for exact coverage over a band, the band's worst point too),
    the share of samples that got an interval at all, and the intervals' mean width (on the metric's
    0-1 or 0-100 scale).
    """

    design: str
    method: str
    coverage: float
    worst: float | None = None
    printed: float = 1.0
    width: float | None = None


def _ids(n: int) -> tuple[str, ...]:
    return tuple(f"u{i}" for i in range(n))


def _covers(result: dict, truth: float) -> bool:
    return result["ci_low"] - 1e-9 <= truth <= result["ci_high"] + 1e-9


def _simulated(design: str, method: str, results: Iterator[tuple[dict, float]]) -> Coverage:
    """Coverage among the samples that printed an interval (the others say why they have none)."""
    shown = [(r, truth) for r, truth in results if r["ci_low"] is not None]
    covered = [_covers(r, truth) for r, truth in shown]
    printed = len(shown) / SIMULATIONS
    width = float(np.mean([r["ci_high"] - r["ci_low"] for r, _ in shown])) if shown else None
    return Coverage(
        design, method, float(np.mean(covered)) if covered else 1.0, None, printed, width
    )


def _beta_propensities(rng: np.random.Generator, mean: float, rho: float, n: int) -> np.ndarray:
    """Units' success propensities with mean `mean` and intra-class correlation `rho` of their
    answers.
    """
    if rho == 0:
        return np.full(n, mean)
    return rng.beta(mean * (1 - rho) / rho, (1 - mean) * (1 - rho) / rho, n)


# ---------------------------------------------------------------- proportions: exact coverage


def proportion_coverage(n: int, band: str, points: int = 60) -> Coverage:
    """Exact coverage of the pooled binary interval (DLAMA P@1 in one language, X-FaKT error rate,
    MAPS zero-shot accuracy) for true p spread evenly over a band of `BANDS`: mean and worst over
    the band.
    """
    covered = {}
    for k in range(n + 1):
        result = estimate(
            UnitTable("p1", _ids(n), np.r_[np.full(k, 100.0), np.zeros(n - k)]).with_scale(
                100, binary=True
            )
        )
        covered[k] = (result["ci_low"] / 100, result["ci_high"] / 100)
    outcomes = np.arange(n + 1)
    low, high = (np.array([covered[k][i] for k in outcomes]) for i in (0, 1))
    truths = np.linspace(*BANDS[band], points)
    per_p = [float(stats.binom.pmf(outcomes, n, p)[(low <= p) & (p <= high)].sum()) for p in truths]
    return Coverage(
        f"proportion, n = {n}, {band} ({BANDS[band][0]}-{BANDS[band][1]})",
        "Wilson",
        float(np.mean(per_p)),
        min(per_p),
    )


# ---------------------------------------------------------------- simulated designs


def facts_in_two_languages(n: int, mean: float, rho: float) -> Coverage:
    """DLAMA's pooled P@1: n facts, each asked in two languages, the two answers correlated (`rho`);
    the truth is `mean`. Rows are fact-language answers clustered by fact.
    """
    rng = np.random.default_rng(1000 * n + int(100 * mean) + int(10 * rho))
    clusters = tuple(f"f{i // 2}" for i in range(2 * n))

    def results() -> Iterator[tuple[dict, float]]:
        for _ in range(SIMULATIONS):
            right = rng.random((n, 2)) < _beta_propensities(rng, mean, rho, n)[:, None]
            table = UnitTable("p1", _ids(2 * n), 100.0 * right.reshape(-1), clusters=clusters)
            yield estimate(table.with_scale(100, binary=True)), 100 * mean

    design = f"facts in 2 languages, n = {n} facts, p = {mean}, correlation {rho}"
    return _simulated(design, "Wilson (effective n)", results())


def demonstration_sets(n: int, mean: float, rho: float, replicates: int = 3) -> Coverage:
    """MAPS few-shot: each proverb answered once per demonstration set, its answers correlated
    (`rho`); the truth is `mean`.
    """
    rng = np.random.default_rng(2000 * n + int(100 * mean) + int(10 * rho))

    def results() -> Iterator[tuple[dict, float]]:
        for _ in range(SIMULATIONS):
            right = rng.random((n, replicates)) < _beta_propensities(rng, mean, rho, n)[:, None]
            yield (
                estimate(
                    UnitTable("accuracy", _ids(n), 100.0 * right).with_scale(100, binary=True)
                ),
                100 * mean,
            )

    design = f"{n} proverbs x {replicates} demonstration sets, p = {mean}, correlation {rho}"
    return _simulated(design, "Wilson (effective n)", results())


#: bounded skewed scores per unit (0-1), each drawn by a function of (rng, n) with its true mean
FAMILIES: dict[str, tuple[Callable[[np.random.Generator, int], np.ndarray], float]] = {
    "AP-like, Beta(0.5, 2), 3 templates": (
        lambda rng, n: _templates(rng, np.clip(rng.beta(0.5, 2.0, n), 1e-3, 0.999)),
        0.2,
    ),
    "AP with half zeros": (
        lambda rng, n: np.where(rng.random(n) < 0.5, 0.0, rng.beta(1.0, 3.0, n)),
        0.125,
    ),
    "rare-hit AP (10% of dishes)": (
        lambda rng, n: np.where(rng.random(n) < 0.1, rng.uniform(0.05, 1.0, n), 0.0),
        0.1 * 0.525,
    ),
    "rare-hit AP (5% of dishes)": (
        lambda rng, n: np.where(rng.random(n) < 0.05, rng.uniform(0.05, 1.0, n), 0.0),
        0.05 * 0.525,
    ),
    "bimodal RankC (70% agree)": (
        lambda rng, n: np.where(rng.random(n) < 0.7, rng.beta(40, 2, n), rng.beta(2, 18, n)),
        0.7 * 40 / 42 + 0.3 * 0.1,
    ),
    "bimodal RankC (10% agree)": (
        lambda rng, n: np.where(rng.random(n) < 0.1, rng.beta(40, 2, n), rng.beta(2, 18, n)),
        0.1 * 40 / 42 + 0.9 * 0.1,
    ),
}


def _templates(rng: np.random.Generator, dish_means: np.ndarray, templates: int = 3) -> np.ndarray:
    """Each dish's AP under `templates` templates, scattered around its own mean (Beta with
    precision 5).
    """
    means = dish_means[:, None]
    return rng.beta(5 * means, 5 * (1 - means), (dish_means.size, templates))


def skewed_mean(family: str, n: int) -> Coverage:
    """A bounded skewed mean over n units (FmLAMA's mAP over dishes, RankC over facts), on 0-100."""
    draw, truth = FAMILIES[family]
    rng = np.random.default_rng(n + 7 * list(FAMILIES).index(family))

    def results() -> Iterator[tuple[dict, float]]:
        for _ in range(SIMULATIONS):
            yield (
                estimate(UnitTable("map", _ids(n), 100 * draw(rng, n)).with_scale(100)),
                100 * truth,
            )

    return _simulated(f"{family}, n = {n}", "t (Hall) / Wilson bound", results())


def camel_design(
    types: int, prompts: int, runs: int, spreads: tuple[float, float, float]
) -> Coverage:
    """CAMeL's CBS: per entity type, prompts crossed with runs (each run a fresh entity sample
    shared by every prompt of the type): prompt, entity-sample and residual effects with standard
    deviations `spreads` (points) around the type's mean; the truth is the mean over types of the
    type means, over prompts and entity samples.
    """
    rng = np.random.default_rng(100 * types + 10 * prompts + runs + int(spreads[1]))
    means = rng.uniform(40, 60, types)
    labels = [f"t{g}" for g in range(types) for _ in range(prompts)]
    prompt_sd, sample_sd, residual_sd = spreads

    def results() -> Iterator[tuple[dict, float]]:
        for _ in range(SIMULATIONS):
            blocks = [
                means[g]
                + rng.normal(0, prompt_sd, (prompts, 1))
                + rng.normal(0, sample_sd, (1, runs))
                + rng.normal(0, residual_sd, (prompts, runs))
                for g in range(types)
            ]
            values = np.clip(np.concatenate(blocks), 0, 100)
            table = UnitTable(
                "cbs",
                _ids(types * prompts),
                values,
                {"type": labels},
                macro="type",
                crossed="entity samples",
            )
            yield estimate(table.with_scale(100)), float(means.mean())

    design = (
        f"CAMeL: {types} types x {prompts} prompts x {runs} entity samples, sd {prompt_sd:g}/{sample_sd:g}/"
        f"{residual_sd:g} (prompt/sample/residual)"
    )
    return _simulated(design, "t (variance components)", results())


def macro_groups(sizes: tuple[int, ...], binary: bool) -> Coverage:
    """A metric averaged over groups with equal weight (a user's own strata), groups of `sizes`
    units, true means 0.2 and 0.3 alternating: proportions, or bounded skewed scores (half zeros);
    the truth is the mean of the means.
    """
    rng = np.random.default_rng(sum(sizes) + int(binary))
    means = np.resize([0.2, 0.3], len(sizes))
    labels = [f"g{g}" for g, size in enumerate(sizes) for _ in range(size)]
    truth = 100 * float(means.mean())

    def draw(mean: float, size: int) -> np.ndarray:
        if binary:
            return (rng.random(size) < mean).astype(float)
        return np.where(rng.random(size) < 0.5, 0.0, rng.beta(2 * mean, 1 - 2 * mean, size) * 1.0)

    def results() -> Iterator[tuple[dict, float]]:
        for _ in range(SIMULATIONS):
            values = 100 * np.concatenate(
                [draw(m, size) for m, size in zip(means, sizes, strict=True)]
            )
            table = UnitTable("m", _ids(len(labels)), values, {"g": labels}, macro="g").with_scale(
                100, binary=binary
            )
            yield estimate(table), truth

    kind = "proportions" if binary else "bounded scores (half zeros)"
    return _simulated(
        f"macro groups of {' + '.join(map(str, sizes))} units, {kind}", "per table", results()
    )


def xfakt_design(
    entities: int, rates: tuple[float, float], rho: float, languages: int = 5
) -> list[Coverage]:
    """X-FaKT's FRS, KTS and X-FaKT over `languages` x their countries: each country's `entities`
    asked in every language, an entity's answers correlated across languages (`rho`, the latent
    correlation of a Gaussian copula: an entity known in one language tends to be known in the
    others), cell error rates scattered around `rates` (associated, other); the truth is each score
    of the true cell rates (the cells fixed, the entities drawn).
    """
    rng = np.random.default_rng(entities + int(100 * rates[0]) + int(10 * rho))
    codes = list(ASSOCIATIONS)[:languages]
    countries = [ASSOCIATIONS[c] for c in codes]
    associated = np.eye(languages, dtype=bool)
    draws: dict[str, list[tuple[dict, float]]] = {name: [] for name in ("frs", "kts", "xfakt")}
    for _ in range(SIMULATIONS):
        spread = rng.normal(0, max(rates) / 3, associated.shape)
        cell_rates = np.clip(np.where(associated, rates[0], rates[1]) + spread, 0.005, 0.98)
        truth = _transfer_truth(cell_rates[associated].mean(), cell_rates[~associated].mean())
        # per (country, entity), the same in every language
        shared = rng.normal(size=(1, languages, entities))
        latent = np.sqrt(rho) * shared + np.sqrt(1 - rho) * rng.normal(
            size=(languages, languages, entities)
        )
        wrong = latent < stats.norm.ppf(cell_rates)[..., None]  # [language, country, entity]
        answers = [
            GradedAnswer(codes[i], not wrong[i, j, e], "", countries[j], f"{countries[j]}|{e}")
            for i in range(languages)
            for j in range(languages)
            for e in range(entities)
        ]
        summary = answers_summary(answers, transfer=True, round_cells=False)
        for name, result in transfer_estimates(answers, summary).items():
            draws[name].append((result, truth[name]))
    design = (
        f"X-FaKT: {languages} x {languages} cells, {entities} entities per country in every language, "
        f"correlation {rho}, error rates {rates[0]}/{rates[1]}"
    )
    return [
        _simulated(f"{design}, {name}", "MOVER-Wilson, mapped", iter(v))
        for name, v in draws.items()
    ]


def _transfer_truth(mu_assoc: float, mu_non: float) -> dict[str, float]:
    frs = 1.5 * (1 / (1 + mu_assoc + mu_non) - 1 / 3)
    kts = 2 * (1 / (1 + abs(mu_assoc - mu_non)) - 1 / 2)
    return {"frs": frs, "kts": kts, "xfakt": 2 * frs * kts / (frs + kts)}


# ---------------------------------------------------------------- the designs, as tested and as
# documented

DESIGNS: dict[str, Callable[[], list[Coverage]]] = {
    "proportions": lambda: [proportion_coverage(n, band) for n in SIZES for band in BANDS],
    "facts in two languages": lambda: [
        facts_in_two_languages(n, p, rho)
        for n in (5, 10, 30, 100)
        for p in (0.05, 0.5)
        for rho in (0, 0.3, 0.6, 0.9)
    ],
    "demonstration sets": lambda: [
        demonstration_sets(n, p, rho)
        for n in (5, 20, 50)
        for p in (0.05, 0.5)
        for rho in (0.3, 0.9)
    ],
    "skewed means": lambda: [
        skewed_mean(f, n) for f in FAMILIES for n in (3, 5, 10, 20, 30, 50, 100)
    ],
    "camel": lambda: [
        camel_design(types, prompts, runs, spreads)
        for types in (1, 8)
        for prompts in (2, 5, 20)
        for runs in (2, 5)
        for spreads in ((5.0, 2.0, 3.0), (2.0, 4.0, 2.0))
    ],
    "macro groups": lambda: [
        macro_groups(sizes, binary)
        for sizes in ((3, 100), (5, 50), (10, 40), (40, 60))
        for binary in (True, False)
    ],
    "xfakt": lambda: [
        c
        for k in (1, 2, 5)
        for rates in ((0.02, 0.05), (0.05, 0.1), (0.3, 0.5))
        for rho in (0.0, 0.5, 0.9)
        for c in xfakt_design(k, rates, rho)
    ],
}


# the simulated designs take 3-30 s each: marked slow, so `make test-fast` skips them and `make
# test` (CI) runs them
SIMULATED = [
    pytest.param(name, marks=pytest.mark.slow) if name != "proportions" else name
    for name in DESIGNS
]


@pytest.mark.parametrize("name", SIMULATED)
def test_every_printed_95_interval_covers_the_truth_at_least_93_percent_of_the_time(name):
    measured = DESIGNS[name]()
    short = [c for c in measured if c.coverage < NOMINAL_FLOOR]
    assert not short, short
    assert all(c.printed == 1.0 for c in measured if name != "proportions"), (
        "a design left samples without one"
    )


def test_wilsons_worst_point_next_to_0_and_1_stays_near_nominal():
    # plain Wilson dips to 84% at p = 0.0087 with n = 20; the exact Poisson limit for 1-3 successes
    # lifts it
    worst = min(proportion_coverage(n, band).worst or 1.0 for n in (5, 20, 100) for band in BANDS)
    assert worst > 0.91


def test_five_proverbs_under_three_demonstration_sets_are_not_needlessly_wide():
    """5 proverbs x 3 demonstration sets at p = 0.05 gave intervals 0.65 wide on average (0-1
    scale).
    """
    assert demonstration_sets(5, 0.05, 0.3).width / 100 < 0.5


def coverage_table() -> str:
    """The markdown tables of docs/results.md: proportions (n x band: mean, worst), then every
    simulated design's cells, and each design's worst cell.
    """
    lines = [
        "| Wilson, n | "
        + " | ".join(f"{band} ({low}-{high})" for band, (low, high) in BANDS.items())
        + " |"
    ]
    lines.append("|---" * (len(BANDS) + 1) + "|")
    for n in SIZES:
        cells = (proportion_coverage(n, band) for band in BANDS)
        lines.append(
            f"| {n} | " + " | ".join(f"{c.coverage:.3f} ({c.worst:.3f})" for c in cells) + " |"
        )
    worst = ["", "| design | method | cells | worst cell | its coverage |", "|---|---|---|---|---|"]
    every = ["", "| cell | method | coverage | mean width |", "|---|---|---|---|"]
    for name, run in DESIGNS.items():
        if name == "proportions":
            continue
        measured = run()
        low = min(measured, key=lambda c: c.coverage)
        worst.append(
            f"| {name} | {low.method} | {len(measured)} | {low.design} | {low.coverage:.3f} |"
        )
        every += [
            f"| {c.design} | {c.method} | {c.coverage:.3f} | {c.width:.2f} |" for c in measured
        ]
    return "\n".join(lines + worst + every)


if __name__ == "__main__":
    print(coverage_table())
