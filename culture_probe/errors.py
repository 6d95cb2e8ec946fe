"""The error hierarchy: every error says what is wrong, the offending value, the valid options and
the fix.
"""

from __future__ import annotations

import difflib
import errno
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager


class CultureProbeError(Exception):
    """Base class of every error this library raises on purpose."""


class UnknownNameError(CultureProbeError, KeyError):
    """A name (benchmark config, metric, model kind, ...) that is not one of the valid options."""

    def __init__(
        self, what: str, name: str, valid: Iterable[str], fix: str = "", *, list_valid: bool = True
    ):
        """`list_valid=False` leaves out the list of valid names (dozens of configs), keeping the
        close matches and `fix`, which then says where the list is.
        """
        valid = sorted(valid)
        close = difflib.get_close_matches(name, valid, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        message = f"Unknown {what} {name!r}.{hint}" + (
            f" Valid {what}s: {', '.join(valid)}." if list_valid else ""
        )
        if fix:
            message += f" {fix}"
        super().__init__(message)
        self.name, self.valid, self.close = name, valid, close

    def __str__(self) -> str:  # KeyError would otherwise print the message in quotes
        return str(self.args[0])


class SourceFormatError(CultureProbeError, ValueError):
    """A source file that does not have the expected format; names the file and, when known, the
    line.
    """

    def __init__(self, message: str, *, path: str, line: int | None = None):
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")
        self.path, self.line = str(path), line


class MissingDataError(CultureProbeError, FileNotFoundError):
    """Data that must be obtained by hand (or from the mirror) is not where it should be. A suite
    skips a config whose data raises it, saying why (`culture-probe run --strict` stops instead);
    other errors stop a suite.
    """


class TemplateError(CultureProbeError, ValueError):
    """A prompt template without its slot, or with a slot it cannot fill."""


class EmptyCandidateError(CultureProbeError, ValueError):
    """A request without candidates, or a candidate that tokenizes to nothing."""


class UnsupportedModelError(CultureProbeError, ValueError):
    """A model whose architecture is none of the kinds the engine scores (causal, masked,
    seq2seq).
    """


class EndpointError(CultureProbeError, ConnectionError):
    """A SPARQL or HTTP endpoint that failed after every retry."""


class MetricInputError(CultureProbeError, ValueError):
    """Metric inputs that cannot be scored (empty, mismatched lengths, NaN, unknown labels); names
    the argument.
    """


class InvalidValueError(CultureProbeError, ValueError):
    """A value that makes no sense: out of range, of the wrong type, or inconsistent with another
    value.
    """


class InputTooLongError(CultureProbeError, ValueError):
    """A candidate, right-hand text or set of special tokens that leaves no room for any context in
    the model.
    """


class PublishError(CultureProbeError):
    """A push that cannot go ahead (licence, token, network, the Hub's answer, a metric that cannot
    stand alone): one line that says what to do.
    """


class NoSpaceError(OSError):
    """A full disk (or quota) under `filename`, with the bytes the rest of the write needs where
    they can be told (`needed`; None when they cannot), and what the user can do after making room
    (`then`; None: resume the run).
    """

    def __init__(
        self,
        code: int,
        message: str,
        folder: str,
        needed: int | None = None,
        then: str | None = None,
    ):
        super().__init__(code, message, folder)
        self.needed, self.then = needed, then


@contextmanager
def naming_folder(
    folder: str | os.PathLike,
    needed: Callable[[], int | None] | None = None,
    *,
    then: str | None = None,
    within: str | None = None,
) -> Iterator[None]:
    """A full disk or a read-only folder met inside the block names `folder` (the OS names no file
    when a write fails midway), so that the one-line error says where to make room; `needed`
    estimates how much, `then` what is left after the failure. A full disk under a path beginning
    with `within` (a temporary folder, gone after the failure) names `folder` too.
    """
    try:
        yield
    except OSError as error:
        unnamed = error.filename is None or (
            within is not None and str(error.filename).startswith(within)
        )
        if unnamed and error.errno in (errno.ENOSPC, errno.EDQUOT):
            message = error.strerror or os.strerror(error.errno)
            raise NoSpaceError(
                error.errno, message, str(folder), needed() if needed else None, then
            ) from error
        if error.filename is None and error.errno in (errno.EROFS, errno.EACCES):
            raise OSError(
                error.errno, error.strerror or os.strerror(error.errno), str(folder)
            ) from error
        raise
