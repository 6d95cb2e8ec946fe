"""`culture-probe board` and `push-board`: their parsers live beside the board's command glue
(culture_probe.board.command, light: the site's modules load on use); this module names their
handlers.
"""

from __future__ import annotations

from culture_probe.board.command import add_board_parsers as add_parsers

__all__ = ["HANDLERS", "add_parsers"]

HANDLERS = {
    "board": "culture_probe.board.command:board_main",
    "push-board": "culture_probe.board.command:push_board_main",
}
