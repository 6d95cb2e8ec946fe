"""A pinned upstream file: from a local copy of the repository (`data_dir`) or through `fetch`
(mirror rule).

CAMeL and X-FaKT both accept `data_dir=` pointing at a checkout of the upstream repository at the
pinned commit, so an offline user without the mirror can still build them. Either way the file must
match the pinned digest unless the caller turns verification off (`verify_checksums=False`: test
fixtures or a deliberately edited copy).
"""

from __future__ import annotations

import os
from pathlib import Path

from culture_probe.data.sources import fetch, verify_sha256
from culture_probe.errors import MissingDataError

ACCEPT_MODIFIED = (
    "So this is not the pinned release: replace the file, or pass verify_checksums=False to build "
    "from a modified copy."
)


def verify_pinned(path: str | os.PathLike, sha256: str) -> None:
    """Raise when the file's sha256 does not start with the pinned prefix, saying how to accept a
    modified copy.
    """
    verify_sha256(path, sha256, fix=ACCEPT_MODIFIED)


def pinned_file(
    base_url: str,
    relpath: str,
    sha256: str,
    *,
    data_dir: str | os.PathLike | None = None,
    verify: bool = True,
) -> Path:
    """The local path of `base_url + relpath` (or `data_dir/relpath`), checked against its pinned
    sha256 prefix.
    """
    if data_dir:
        path = Path(data_dir) / relpath
        if not path.is_file():
            raise MissingDataError(
                f"data_dir={str(data_dir)!r} has no {relpath}: expected the file {path}. data_dir must be a copy "
                f"of the upstream repository at the pinned commit ({base_url}); or omit data_dir to download it."
            )
    else:
        path = fetch(base_url + relpath)
    if verify:
        verify_pinned(path, sha256)
    return path
