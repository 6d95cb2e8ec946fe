"""The results board: a static site built from run directories alone (`culture-probe board
RUN_OR_SUITE... --out DIR`), with a leaderboard across models, a page per run, an item browser over
its records and paired comparisons; it opens from disk with no server and no network, and
`culture-probe push-board` publishes it as a static Space. Beside `report`, never imported by the
runner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from culture_probe.board.site import Site, build_board

__all__ = ["Site", "build_board"]


def __getattr__(name: str) -> Any:
    """The site's names, loaded on use: the command line builds this package's parsers at every
    start.
    """
    if name in __all__:
        from culture_probe.board import site

        return getattr(site, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
