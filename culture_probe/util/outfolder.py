"""A folder that a command rebuilds (`export`, `board`, `push-board --dry-run`, `consistency --out`,
`compare --out`): built in a temporary folder beside it (inside it, under a hidden name, where
`--out` is a mount point or its parent is read-only) and swapped in only when complete, so that a
failure (bad input, a full disk) leaves the earlier output as it was and no half-built folder
behind. The folder's marker lists the files the command wrote: the next rebuild replaces exactly
those, keeps every other file, and refuses (naming it) to overwrite one.

A run directory is not such a folder: it grows in place and is resumed (`culture_probe.rundir`);
both share the lock.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from culture_probe.errors import CultureProbeError, naming_folder

LOCK_FILE = ".lock"  # held by the process writing the folder: a second writer fails at once
MARKER_PREFIX = ".culture_probe_"  # every marker's name begins so: none of them is a user's file
# what `tempfile` puts after a rebuild's prefix (`building_place`) in its temporary folder's name
TEMPORARY_NAME = re.compile(r"[a-z0-9_]{8}")


@dataclass(frozen=True)
class Output:
    """What one command writes into its folder, and which folders it writes into."""

    name: str  # as the messages name it: "export", "board", "consistency report", "comparison"
    marker: str  # the file listing what it wrote (a JSON list of paths inside the folder)
    # written into a folder holding others' files too (else: new, empty, or its own)
    shared: bool = False
    # what a marker of an earlier version (plain text) says it wrote
    before: tuple[str, ...] | None = None
    locked: bool = False  # a second writer of the folder is refused at once
    # what else a folder may be (a run's): never written
    taken: Callable[[Path], str | None] | None = None


@dataclass
class Build:
    """A rebuild under way: the temporary folder to write into; once swapped in, the files written
    there (which the marker lists) and the files of others kept in the output folder.
    """

    folder: Path
    files: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()


@contextmanager
def rebuilding(out: str | os.PathLike, output: Output) -> Iterator[Build]:
    """Write the block's output into `Build.folder`; when the block ends without error, swap it into
    `out`. Any failure leaves `out` as it was and removes the temporary folder; a full disk names
    `out`.
    """
    folder = check(out, output)
    with lock(folder, f"the {output.name}") if output.locked else nullcontext():
        previous = written_before(folder, output)
        where, prefix = building_place(folder)
        if (
            output.locked
        ):  # no live rebuild of the folder but this one: what others left is a killed one's
            remove_leftovers(where, prefix)
        then = f"the {output.name} was not written, and {folder} is as it was"
        with (
            naming_folder(folder, then=then, within=str(where / prefix)),
            tempfile.TemporaryDirectory(prefix=prefix, dir=where) as temporary,
        ):
            build = Build(Path(temporary))
            yield build
            build.files = files_in(build.folder)
            build.kept = _swap_in(build.folder, folder, output, previous, build.files)


def building_place(folder: Path) -> tuple[Path, str]:
    """Where the rebuild of `folder` is written, and the temporary folder's name prefix: beside it,
    so that a failure leaves `folder` untouched; inside it, under a hidden bookkeeping name, when
    beside cannot be: `folder` is a mount point or its parent is not writable (a file moved across
    file systems, or into a read-only parent, fails). Either way the files are moved in one by one
    at the end, within one file system.
    """
    beside = folder.resolve().parent
    if folder.is_dir() and (os.path.ismount(folder) or not os.access(beside, os.W_OK)):
        return folder, f"{MARKER_PREFIX}building-"
    beside.mkdir(parents=True, exist_ok=True)
    return beside, f".{folder.resolve().name}.building-"  # `--out .` too


def remove_leftovers(where: Path, prefix: str) -> None:
    """Remove the temporary folders that rebuilds of the same folder left in `where` when they were
    killed (SIGKILL, a power cut: no clean-up ran). Called under the folder's lock only, which every
    rebuild of it holds: none of them is a live rebuild's.
    """
    for path in where.iterdir():
        name = path.name
        if name.startswith(prefix) and TEMPORARY_NAME.fullmatch(name[len(prefix) :]):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)


def check(out: str | os.PathLike, output: Output) -> Path:
    """`out` as a path, after refusing a folder the command must not write: none named (`--out ""`
    would be the current folder), a file or a path under one, a folder of another kind (a run's, a
    suite's: `Output.taken`), or (unless `Output.shared`) a folder holding files but no output of
    this command. Reads nothing else.
    """
    if not os.fspath(out):
        raise CultureProbeError(
            f'The {output.name}\'s folder is empty text (--out ""): pass a folder path.'
        )
    folder = Path(out)
    blocking = next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        raise CultureProbeError(
            f"Cannot write the {output.name} into {folder}: {blocking} is a file. Pass a folder (new, empty, or an "
            f"earlier {output.name})."
        )
    taken = _taken(folder, output.taken) if output.taken is not None else None
    if taken is not None:
        where = (
            "it is"
            if taken[0] in (folder, folder.resolve())
            else f"it lies in {taken[0]}, which is"
        )
        raise CultureProbeError(
            f"Cannot write the {output.name} into {folder}: {where} a culture_probe {taken[1]} folder, which no "
            f"{output.name} is written into; nothing was written. Pass another folder (--out), e.g. one beside it."
        )
    if not output.shared and _holds_files(folder) and not (folder / output.marker).is_file():
        raise CultureProbeError(
            f"Cannot write the {output.name} into {folder}: it is not empty and holds no earlier {output.name} "
            f"({output.marker}); nothing was written. Pass a new or empty folder."
        )
    return folder


def _taken(folder: Path, taken: Callable[[Path], str | None]) -> tuple[Path, str] | None:
    """The folder of another kind that `folder` is or lies in, and its kind (`compare A B --out
    A/plots` would put a figure among the run's own); None when there is none.
    """
    for candidate in (folder, *folder.resolve().parents):
        kind = taken(candidate) if candidate.is_dir() else None
        if kind is not None:
            return candidate, kind
    return None


def _holds_files(folder: Path) -> bool:
    return folder.is_dir() and any(p.name != LOCK_FILE for p in folder.iterdir())


def written_before(folder: Path, output: Output) -> list[str]:
    """The files the command's earlier output in `folder` wrote (to be replaced), as its marker
    lists them.
    """
    path = folder / output.marker
    if not path.is_file():
        return []
    try:
        listed = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        # a marker from before the lists
        listed = None if output.before is None else list(output.before)
    if not isinstance(listed, list) or not all(isinstance(n, str) and _inside(n) for n in listed):
        raise CultureProbeError(
            f"{path} is damaged (it must list the files the {output.name} wrote, as paths inside it); nothing was "
            f"written. Delete the folder's {output.name}, or pass a new folder."
        )
    return listed


def _inside(path: str) -> bool:
    """A marker entry: a relative POSIX path inside the folder, through no hidden name (`..`, a
    marker, `.git`).
    """
    return (
        bool(path)
        and "\\" not in path
        and all(part and not part.startswith(".") for part in path.split("/"))
    )


def files_in(folder: Path) -> tuple[str, ...]:
    """Every file under `folder`, as sorted POSIX paths relative to it (folders are not followed
    through links).
    """
    return tuple(
        sorted(
            (Path(root) / name).relative_to(folder).as_posix()
            for root, dirs, names in os.walk(folder)
            for name in [*names, *(d for d in dirs if (Path(root) / d).is_symlink())]
        )
    )


def _swap_in(
    build: Path, out: Path, output: Output, previous: Sequence[str], files: Sequence[str]
) -> tuple[str, ...]:
    """Move the complete output from `build` into `out`, replacing the earlier output's files
    (`previous`) and keeping every other file there; the files kept. A file of someone else's where
    the output writes one is refused.

    The marker lists both outputs' files while they are swapped, so an interruption leaves nothing
    the next rebuild would take for someone else's.
    """
    present = [f for f in files_in(out) if not _bookkeeping(f)] if out.is_dir() else []
    kept = tuple(f for f in present if not _listed(f, previous))
    clashes = [
        f for f in files for k in kept if f == k or k.startswith(f + "/") or f.startswith(k + "/")
    ]
    if clashes:
        raise CultureProbeError(
            f"Cannot write the {output.name} into {out}: {', '.join(clashes)} would replace what no {output.name} "
            "wrote; nothing was changed. Move it elsewhere, or pass another folder."
        )
    stale = [f for f in present if f not in kept and f not in files]
    out.mkdir(exist_ok=True)
    _write_marker(out / output.marker, sorted({*previous, *files}))
    for file in files:
        (out / file).parent.mkdir(parents=True, exist_ok=True)
        os.replace(build / file, out / file)
    for file in stale:
        _remove_with_empty_folders(out, file)
    _write_marker(out / output.marker, files)
    return kept


def _bookkeeping(file: str) -> bool:
    """The lock, the markers (this command's and others') and a rebuild written inside the folder
    (`building_place`): no command's output, nobody's file to keep.
    """
    return file == LOCK_FILE or file.split("/")[0].startswith(MARKER_PREFIX)


def _listed(file: str, listed: Sequence[str]) -> bool:
    """Whether the command wrote `file`: the marker names it, or a folder above it (markers before
    files were listed one by one named the top-level folders).
    """
    return any(file == entry or file.startswith(entry + "/") for entry in listed)


def _remove_with_empty_folders(out: Path, file: str) -> None:
    """Remove an earlier output's `file` and the folders under `out` that this leaves empty."""
    (out / file).unlink(missing_ok=True)
    for folder in Path(file).parents:
        if folder != Path(".") and not any((out / folder).iterdir()):
            (out / folder).rmdir()


def _write_marker(path: Path, files: Sequence[str]) -> None:
    """Write the marker whole or not at all (beside it, then renamed): a marker cut short by a full
    disk or a kill would make the next rebuild take the user's files for the command's, or refuse
    the folder.
    """
    partial = path.with_name(f"{path.name}.partial")
    partial.write_text(json.dumps(list(files)) + "\n", encoding="utf-8")
    os.replace(partial, path)


@contextmanager
def lock(folder: Path, what: str) -> Iterator[None]:
    """Hold `folder`'s lock while writing `what` there; a second writer fails at once. A folder made
    here that holds nothing but the lock when it is released (the work was refused before writing)
    is removed again.
    """
    from filelock import FileLock, Timeout

    made = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(folder / LOCK_FILE, timeout=0):
            yield
    except Timeout:
        raise CultureProbeError(
            f"Another process is writing {what} in {folder} (it holds {folder / LOCK_FILE}). Wait for it to finish, "
            "or pass another --out."
        ) from None
    finally:
        # nothing written
        if made and folder.is_dir() and all(p.name == LOCK_FILE for p in folder.iterdir()):
            (folder / LOCK_FILE).unlink(missing_ok=True)
            folder.rmdir()
