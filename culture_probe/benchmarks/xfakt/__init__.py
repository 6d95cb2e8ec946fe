"""X-FaKT (Aggarwal et al., 2025): country-related facts asked in 13 languages (FRS, KTS, X-FaKT).

Everything of the benchmark is in this folder: `data` (its builder and configs), `task` (the
protocol and its deviations), `metrics` (its formulas), `report` (its section of a run's report),
`planted` (its planted model's spec) — declared here, found by `culture_probe.benchmarks`.
"""

from culture_probe.benchmarks import Declaration

BENCHMARK = Declaration(__name__, report="report", planted="planted", planted_kind="causal")
