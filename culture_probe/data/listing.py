"""`culture-probe list`: every config as a table (instant: no torch, no data loading)."""

from __future__ import annotations

from culture_probe.data.registry import groups, list_benchmarks


def main(args=None) -> int:
    """Print the groups (a benchmark's paper experiments, runnable by name), then name, benchmark, languages, rows
    and description of every config.
    """
    print("group      configs (culture-probe run GROUP runs them all into one suite folder)")
    for name, configs in groups().items():
        print(f"{name:<9}  {' '.join(configs)}")
    print()
    entries = list_benchmarks()
    width = max((len(e.name) for e in entries), default=4)
    print(f"{'name':<{width}}  {'benchmark':<9}  {'languages':<12}  {'rows':>7}  description")
    for e in entries:
        rows = "" if e.rows is None else str(e.rows)
        print(f"{e.name:<{width}}  {e.benchmark:<9}  {','.join(e.languages):<12}  {rows:>7}  {e.description}")
    return 0
