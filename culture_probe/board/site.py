"""Write the board as a static site that opens from `file://`: one `index.html`, the script and
style in `assets/`, and the data as JavaScript files in `data/` that assign to a global (a browser
refuses `fetch()` of a local JSON file, but loads a local script). The leaderboard's data loads with
the page; a run's page loads its item index when opened, and the full records in pages of
`PAGE_SIZE` only when an item is opened, so a 49,000-record run opens as fast as a small one.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

from culture_probe import rundir
from culture_probe.board.build import (
    BoardRun,
    Outcomes,
    Pair,
    comparison,
    item_index,
    item_records,
    leaderboard,
    load_runs,
    outcomes,
    pairs,
    run_page,
)
from culture_probe.errors import CultureProbeError
from culture_probe.sharing import inside
from culture_probe.util import outfolder

PAGE_SIZE = 1000  # records per data file: one file is what opening an item loads
# lists the files a board wrote: the next board replaces exactly those
MARKER = ".culture_probe_board"
ASSETS = ("board.js", "board.css")  # written for this package: nothing vendored
BOARD = outfolder.Output(
    "board",
    MARKER,
    # what boards wrote before the marker listed their files
    before=("index.html", "assets", "data", "figures"),
    locked=True,
    taken=rundir.folder_kind,
)


@dataclass(frozen=True)
class Site:
    """A written board: its folder, the runs and comparisons it shows, its size in bytes, and its
    files.
    """

    folder: Path
    runs: tuple[str, ...]
    comparisons: tuple[str, ...]
    size: int
    withheld: tuple[str, ...] = ()  # benchmarks whose records were left out
    # what the board wrote (paths under folder), which is what push-board uploads
    files: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()  # files in the folder that no board wrote, left as they were

    def describe(self) -> str:
        """One line for the terminal."""
        return (
            f"board of {len(self.runs)} run(s) and {len(self.comparisons)} comparison(s) in {self.folder} "
            f"({self.size / 1e6:,.1f} MB); open {self.folder / 'index.html'}"
        )


def build_board(
    paths: Sequence[str | os.PathLike],
    out: str | os.PathLike,
    *,
    title: str = "culture_probe results",
    withhold: Mapping[str, str] | None = None,
    readme: Callable[[Site], str] | None = None,
) -> Site:
    """Write the board of the runs and suites in `paths` into `out` (new, empty, or an earlier
    board). Records of the benchmarks in `withhold` ({benchmark: why}) are left out: their numbers
    are shown, their items are not. `readme` gives a README.md written with the board (push-board's
    Space card).

    The board is built beside `out` and swapped in when complete (`culture_probe.util.outfolder`),
    under the folder's lock: a failure leaves an earlier board as it was, and files in `out` that no
    board wrote are kept.
    """
    with outfolder.rebuilding(out, BOARD) as build:
        runs = load_runs(paths)
        if not runs:
            raise CultureProbeError(
                "No run under the paths given has answered a probe yet: nothing to show."
            )
        withhold = dict(withhold or {})
        shown = write_site(build.folder, runs, title, withhold)
        left_out = tuple(dict.fromkeys(r.benchmark for r in runs if r.benchmark in withhold))
        site = Site(Path(out), tuple(r.id for r in runs), tuple(p.id for p in shown), 0, left_out)
        if readme is not None:
            rundir.write_text(build.folder / "README.md", readme(site))
    return replace(site, size=folder_size(site.folder), files=build.files, kept=build.kept)


def write_site(
    folder: Path, runs: Sequence[BoardRun], title: str, withhold: Mapping[str, str]
) -> list[Pair]:
    """Every file of the board of `runs` in `folder`; the comparisons shown."""
    (folder / "data").mkdir()
    judged = {run.id: outcomes(run) for run in runs}
    for run in runs:
        write_run(folder, run, judged[run.id], withhold.get(run.benchmark))
    shown = pairs(runs)
    for pair in shown:
        data = comparison(pair, judged, with_items=pair.base.benchmark not in withhold)
        write_data(folder / "data" / f"compare-{pair.id}.js", "compare", pair.id, data)
    board = {
        "title": title,
        "made": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "leaderboard": leaderboard(runs),
        "runs": [run_summary(run) for run in runs],
        "comparisons": [
            {"id": p.id, "config": p.base.name, "base": p.base.id, "other": p.other.id}
            for p in shown
        ],
    }
    write_data(folder / "data" / "board.js", "board", "", board)
    copy_assets(folder / "assets")
    rundir.write_text(folder / "index.html", index_html(title))
    return shown


def run_summary(run: BoardRun) -> dict[str, Any]:
    """A run's line in the board's list of runs."""
    return {
        "id": run.id,
        "config": run.name,
        "model": run.model,
        "protocol": run.protocol,
        "smoke": run.smoke,
        "shard": run.shard,
        "status": run.status,
        "records": len(run.run.records),
    }


def write_run(folder: Path, run: BoardRun, judged: Outcomes, withheld: str | None) -> None:
    """The run's page data, its figures, and (unless `withheld`) its item index, records and
    candidate lists.
    """
    figures = copy_figures(run, folder / "figures" / run.id)
    page = {"page": run_page(run, figures), "page_size": PAGE_SIZE, "withheld": withheld}
    data = folder / "data"
    if withheld is None:
        records = item_records(run, judged)
        page["index"] = item_index(run, judged)
        for number, start in enumerate(range(0, len(records), PAGE_SIZE)):
            chunk = records[start : start + PAGE_SIZE]
            write_data(data / f"items-{run.id}-{number}.js", "items", f"{run.id}/{number}", chunk)
        write_data(data / f"cands-{run.id}.js", "cands", run.id, run.prompts.candidate_sets)
    write_data(data / f"run-{run.id}.js", "run", run.id, page)


def copy_figures(run: BoardRun, target: Path) -> list[str]:
    """The run's PNG figures (report.md's), copied into the site; their paths relative to
    index.html.
    """
    plots = sorted(
        p for p in (run.run.path / rundir.PLOTS_DIR).glob("*.png") if not p.name.startswith(".")
    )
    if plots:
        target.mkdir(parents=True, exist_ok=True)
    # a link out of the run folder is refused, one inside is copied as the file it names
    for plot in plots:
        shutil.copyfile(inside(plot, run.run.path), target / plot.name)
    return [f"figures/{run.id}/{plot.name}" for plot in plots]


def write_data(path: Path, kind: str, key: str, value: Any) -> None:
    """One data file: a script that hands `value` to the board (`CP_DATA(kind, key, value)`)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    path.write_text(
        f"CP_DATA({json.dumps(kind)},{json.dumps(key, ensure_ascii=False)},{text});\n",
        encoding="utf-8",
    )


def copy_assets(target: Path) -> None:
    """The board's script, style and licence (the package's `board/assets`)."""
    target.mkdir(parents=True, exist_ok=True)
    source = resources.files("culture_probe.board") / "assets"
    for name in ASSETS:
        (target / name).write_bytes((source / name).read_bytes())


def index_html(title: str) -> str:
    """The one page of the board: the views are drawn by assets/board.js from the data files."""
    from html import escape

    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)}</title>
<link rel="stylesheet" href="assets/board.css">
<script src="assets/board.js"></script>
<script src="data/board.js"></script>
</head>
<body>
<header><a href="#" id="home">{escape(title)}</a></header>
<main id="main"><noscript>The board is drawn by JavaScript: allow scripts for this file.</noscript></main>
</body>
</html>
"""


def folder_size(folder: Path) -> int:
    """Bytes of every file in `folder`."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
