"""`culture-probe list`: every config as a table, from the catalog (no torch, no `datasets`:
instant).
"""

from __future__ import annotations

from culture_probe.data.catalog import table


def main(args=None) -> int:
    """Print the groups (a benchmark's paper experiments, runnable by name), then name, benchmark,
    languages, rows and description of every config.
    """
    listed = table()
    print("group      configs (culture-probe run GROUP runs them all into one suite folder)")
    for name, configs in listed["groups"].items():
        print(f"{name:<9}  {' '.join(configs)}")
    print()
    entries = listed["configs"]
    width = max((len(e["name"]) for e in entries), default=4)
    print(f"{'name':<{width}}  {'benchmark':<9}  {'languages':<12}  {'rows':>7}  description")
    for e in entries:
        rows = "" if e["rows"] is None else str(e["rows"])
        languages = ",".join(e["languages"])
        print(
            f"{e['name']:<{width}}  {e['benchmark']:<9}  {languages:<12}  {rows:>7}  {e['description']}"
        )
    return 0
