"""CAMeL (Naous et al., ACL 2024): Arab vs Western entities in Arabic prompts (CBS, fairness,
sentiment).

Everything of the benchmark is in this folder: `data` (its builder and configs), `task` (the
protocol and its deviations), `metrics` (its formulas), `report` (its section of a run's report),
`planted` (its planted model's spec) — declared here, found by `culture_probe.benchmarks`.
"""

from culture_probe.benchmarks import Declaration

BENCHMARK = Declaration(__name__, report="report", planted="planted", planted_kind="causal")
