"""The `culture-probe` command line.

Each command's module in this package adds its own sub-parsers and names its handler,
"module:function", which is imported on use: the handlers import torch or datasets (seconds), the
parser modules nothing heavy, so `culture-probe list` and `--help` start without torch.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import sys
import warnings
from collections.abc import Iterator
from typing import Any, Protocol

from culture_probe.cli import board, curate, export, listing, merge, publish, reports, run
from culture_probe.cli.shared import EXAMPLES, Parser, Subparsers

__all__ = ["EXAMPLES", "HANDLERS", "build_parser", "expected_failure", "main"]


class Command(Protocol):
    """A command's parser module: the sub-parsers it adds, and the handler of each command it
    adds.
    """

    HANDLERS: dict[str, str]

    def add_parsers(self, subparsers: Subparsers) -> None: ...


# in the order `culture-probe --help` lists their commands
COMMANDS: tuple[Command, ...] = (listing, run, reports, export, publish, board, merge, curate)
# subcommand -> "module:function" that takes the parsed arguments and returns an exit code.
HANDLERS = {name: handler for command in COMMANDS for name, handler in command.HANDLERS.items()}


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser: the program's own flags, then each command module's sub-parsers."""
    parser = Parser(
        prog="culture-probe",
        description="Probe what language models know about cultures.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument("--debug", action="store_true", help="show the full traceback of any error")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parsers(subparsers)
    return parser


def _version() -> str:
    from culture_probe.version import __version__

    return __version__


@contextlib.contextmanager
def _library_lines() -> Iterator[None]:
    """The library's own warnings (a smoke limit, a cut context) as one line each on the terminal,
    as its errors are, and its information as plain lines: the notices it logs at INFO on the
    `culture_probe` logger (what a run will cost), and its warnings of a `...Notice` class (a
    resume's changes, a judge's memory), which say what happens, not that something is wrong. Other
    packages' warnings keep Python's format, with the place that raised them.
    """
    plain = warnings.formatwarning

    def formatted(
        message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any
    ) -> str:
        if not category.__module__.startswith("culture_probe"):
            return plain(message, category, *args, **kwargs)
        kind = "" if category.__name__.endswith("Notice") else "warning: "
        return f"culture-probe: {kind}{message}\n"

    library = logging.getLogger("culture_probe")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("culture-probe: %(message)s"))
    # the notices (their records carry the notice), not every INFO record: a curation's per-step
    # counts stay quiet
    handler.addFilter(lambda record: hasattr(record, "notice"))
    level = library.level
    warnings.formatwarning = formatted
    library.addHandler(handler)
    library.setLevel(logging.INFO)
    try:
        yield
    finally:
        warnings.formatwarning = plain
        library.removeHandler(handler)
        library.setLevel(level)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `culture-probe` console script: an expected failure (bad input, a missing
    or damaged file, a closed pipe) is one line naming what and how to fix it, exit code 2; anything
    else keeps its traceback and says where to report it. `--debug` shows the traceback of every
    error.
    """
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # an lm-evaluation-harness flag without a counterpart: what to do instead, not argparse's
        # bare refusal
        pointers = map(run.harness_pointer, unknown) if args.command == "run" else ()
        pointer = next(filter(None, pointers), None)
        if pointer is None:
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        print(f"culture-probe: error: {pointer}", file=sys.stderr)
        return 2
    module_name, function = HANDLERS[args.command].split(":")
    try:
        handler = getattr(importlib.import_module(module_name), function)
        with _library_lines():
            return int(handler(args) or 0)
    except BrokenPipeError:  # `culture-probe list | head -1`: the reader left; nothing to say
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        print(
            "culture-probe: interrupted; a run continues with the same command and --resume",
            file=sys.stderr,
        )
        return 130
    except Exception as error:  # noqa: BLE001 - every error ends here, as one line or with its traceback
        message = expected_failure(error)
        if args.debug or message is None:
            import traceback

            traceback.print_exc()
            if message is None:
                print(
                    f"culture-probe {_version()}: unexpected error, a bug. Please report it to the maintainers with "
                    "the command and this traceback.",
                    file=sys.stderr,
                )
                return 1
        print(f"culture-probe: error: {message}", file=sys.stderr)
        return 2


def expected_failure(error: BaseException) -> str | None:
    """The one line that explains an expected failure, or None for an unexpected one (a bug)."""
    import errno
    import json
    import pickle
    import sqlite3

    from culture_probe.errors import CultureProbeError

    if isinstance(error, CultureProbeError):
        return str(error)
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        where = error.filename or "the files it was writing (--debug shows which)"
        needed = getattr(error, "needed", None)
        more = (
            f"; the rest of the run's records need about {needed / 1e6:,.1f} MB more"
            if needed
            else ""
        )
        after = getattr(error, "then", None) or "a run continues with --resume"
        return (
            f"no space left on the device holding {where} ({_free_space(error.filename)}{more}): free some space "
            f"there, or write elsewhere (another --out or --cache-dir); {after}"
        )
    if isinstance(error, OSError) and error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        where = error.filename or "a file it was writing (--debug shows which)"
        unreadable = "" if error.errno == errno.EROFS else " or not readable for this user"
        return (
            f"{where} is read-only{unreadable} ({error.strerror}): change its permissions, or pass another folder "
            "(--out, --cache-dir)"
        )
    if isinstance(
        error,
        (
            FileNotFoundError,
            IsADirectoryError,
            NotADirectoryError,
            PermissionError,
            FileExistsError,
        ),
    ):
        return f"{error.strerror}: {error.filename} (check the path)"
    if isinstance(error, UnicodeDecodeError):
        return f"a file is not UTF-8 text ({error.reason}); save it as UTF-8"
    if isinstance(error, json.JSONDecodeError):
        return f"invalid JSON ({error.msg}, line {error.lineno}); the file is damaged"
    if isinstance(error, sqlite3.DatabaseError):
        return f"a database file is damaged or locked ({error}); delete the score cache (--cache-dir) or retry"
    # torch's is a RuntimeError
    if isinstance(error, MemoryError) or type(error).__name__ == "OutOfMemoryError":
        return "out of memory: lower --batch-tokens, or use a smaller dtype (--dtype bfloat16)"
    # torch's weights_only load refused code in a weights file
    if isinstance(error, pickle.UnpicklingError):
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return (
            f"a weights file is a pickle that torch will not load safely ({first}); nothing in it was run: use a "
            "safetensors checkpoint of the model"
        )
    return None


def _free_space(path: str | None) -> str:
    """What is left on the device holding `path` (its nearest existing folder), for a full-disk
    error.
    """
    import shutil
    from pathlib import Path

    place = Path(path or "").absolute()
    folder = next((p for p in (place, *place.parents) if p.is_dir()), None) if path else None
    if folder is None:
        return "its free space unknown"
    return f"{shutil.disk_usage(folder).free / 1e6:,.1f} MB free"


def _silence_stdout() -> None:
    """After a closed pipe, point stdout at /dev/null so that the interpreter's final flush does not
    fail too.
    """
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
