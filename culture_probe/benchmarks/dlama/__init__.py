"""DLAMA-v1 (Keleg and Magdy, 2023): Wikidata facts of contrasting cultures, probed in two languages
per pair.

Everything of the benchmark is in this folder: `data` (its builder and configs), `task` (the
protocol and its deviations), `metrics` (its formulas), `report` (its section of a run's report),
`planted` (its planted model's spec) and `curation` (new fact sets from Wikidata) — declared here,
found by `culture_probe.benchmarks`.
"""

from culture_probe.benchmarks import Declaration

BENCHMARK = Declaration(
    __name__, report="report", planted="planted", planted_kind="masked", curation="curation"
)
