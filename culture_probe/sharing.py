"""What may leave the machine. A run records and shows its settings with the credentials of every URL blanked
(`redact_url`, `redacted`): a password in `--base-url`, or a key in its query, is used for the requests and written
nowhere. Whatever `push`, `push-board` and `push-metrics` would upload is read first (`check_upload`): a file holding
the user's Hub token, the value of an environment secret, anything shaped like a key, or the home folder's path is
refused by name, and nothing is sent. A file copied out of a run folder never follows a link out of it (`inside`),
and front matter is written by a YAML library (`front_matter`), so no text given by a user adds keys to it.

What is written for others (the board, a Space) names nothing of this machine (`redacted(..., shared=True)`,
`shown_model`): a local model is its folder's name and digest, the mirror's folder `$CULTURE_PROBE_MIRROR`, the home
folder `~`.

Light on purpose (the standard library; yaml and huggingface_hub load on use): the engine names its server with it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

from culture_probe.errors import CultureProbeError, PublishError

BLANK = "***"  # what a credential is shown as
# query parameters (and fragment keys) whose value is a credential: named like one of these, in any case
SECRET_PARAMETER = re.compile(
    r"key|token|secret|passw|pwd|auth|credential|signature|^(sig|code|session)$", re.I
)
# environment variables whose value is a secret (of SECRET_LENGTH characters or more: shorter ones are flags)
SECRET_VARIABLE = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.I)
SECRET_LENGTH = 8
# text shaped like a key, whoever's it is (ASCII bytes: read in any file, text or binary)
KEY_SHAPES: dict[str, re.Pattern[bytes]] = {
    "a Hugging Face token (hf_...)": re.compile(rb"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,}"),
    "an API key (sk-...)": re.compile(rb"(?<![\w-])sk-(?=[\w-]*[0-9])[A-Za-z0-9_-]{20,}"),
    "an AWS access key (AKIA...)": re.compile(
        rb"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])"
    ),
    "a GitHub token (ghp_...)": re.compile(
        rb"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_\w{40,})"
    ),
    "a private key (-----BEGIN ... PRIVATE KEY-----)": re.compile(
        rb"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----"
    ),
}
URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>`]+")  # a URL inside other text
SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")  # a value that is a URL starts so
# what is left of a user and password after URL stopped at a quote, a space or a bracket in it (`u:p'x@host`)
USERINFO = re.compile(r"(?<=://)[^/?#\s]*@")
# the offline mirror's folder (culture_probe.data.sources reads it)
MIRROR_ENV = "CULTURE_PROBE_MIRROR"
DIGEST_LENGTH = 8  # hex digits of a local model's digest shown
T = TypeVar("T")


def redact_url(url: str) -> str:
    """`url` with its credentials blanked: the user and password (`user:pass@`), and the values of query parameters
    and fragment keys named like a key, token, secret, password or signature. A URL without any is returned as
    given, character for character (it may key a cache).
    """
    if "://" not in url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL after all (an unclosed IPv6 bracket): blank anything before an @
        return re.sub(r"(?<=://)[^/?#]*@", BLANK + "@", url)
    netloc = f"{BLANK}@{parts.netloc.rpartition('@')[2]}" if "@" in parts.netloc else parts.netloc
    blanked = parts._replace(
        netloc=netloc, query=_blanked(parts.query), fragment=_blanked(parts.fragment)
    )
    return url if blanked == parts else urlunsplit(blanked)


def _blanked(query: str) -> str:
    """`a=1&key=xyz` -> `a=1&key=***`; everything else kept as written."""
    if "=" not in query:
        return query
    pairs = (piece.partition("=") for piece in query.split("&"))
    return "&".join(
        f"{name}={BLANK}"
        if equals and SECRET_PARAMETER.search(unquote(name))
        else name + equals + value
        for name, equals, value in pairs
    )


def redacted(value: T, *, shared: bool = False) -> T:
    """`value` (a string, or JSON-like lists and mappings of them) with the credentials of every URL in it blanked
    (`redact_url`); with `shared` (what is published), the mirror's folder is also shown as `$CULTURE_PROBE_MIRROR`
    and the home folder as `~` (`local_folders`).
    """
    return _redacted(value, local_folders() if shared else [])


def _redacted(value: T, folders: list[tuple[re.Pattern[str], str]]) -> T:
    if isinstance(value, str):
        # a setting that is a URL (--base-url): its every character is it
        whole = SCHEME.match(value) is not None
        text = (
            redact_url(value) if whole else URL.sub(lambda found: redact_url(found.group()), value)
        )
        text = USERINFO.sub(BLANK + "@", text)
        for pattern, shown in folders:
            text = pattern.sub(shown, text)  # neither placeholder holds a backslash
        return text  # type: ignore[return-value]
    if isinstance(value, Mapping):
        return {key: _redacted(item, folders) for key, item in value.items()}  # type: ignore[return-value]
    if isinstance(value, (list, tuple)):
        return type(value)(_redacted(item, folders) for item in value)
    return value


def local_folders() -> list[tuple[re.Pattern[str], str]]:
    """The folders of this machine that shared text names by a placeholder, with it: the mirror's first (it may lie
    in the home folder), then the home folder's.
    """
    mirror, home = os.environ.get(MIRROR_ENV), home_pattern()
    found = (
        [(_folder_pattern(mirror), "$" + MIRROR_ENV)]
        if mirror and len(mirror.rstrip("/\\")) > 1
        else []
    )
    return found + ([(home, "~")] if home else [])


def home_pattern() -> re.Pattern[str] | None:
    """The home folder's path where it starts a path (`/home/ann`, `/home/ann/runs`, never `/home/anna` or
    `/x/home/ann`); None when the home folder is the root or cannot be told.
    """
    try:
        home = str(Path.home())
    except RuntimeError:
        return None
    return _folder_pattern(home) if len(home.rstrip("/\\")) > 1 else None


def _folder_pattern(folder: str) -> re.Pattern[str]:
    """`folder` (as given, or with its links resolved) where it starts a path, and not a longer name."""
    spellings = sorted({folder.rstrip("/\\"), str(Path(folder).resolve())}, key=len, reverse=True)
    return re.compile(r"(?<![\w.-])(?:" + "|".join(map(re.escape, spellings)) + r")(?![\w.-])")


def shown_model(spec: str, identity: Any) -> str:
    """A model as what is shared names it: a Hub id (or any name) as given; a local folder by its name and the
    digest of its recorded identity without the path (`my-model (sha256:ab12cd34)`), which tells two models of one
    folder name apart, where the folder's path would only say whose machine it was on.
    """
    name = local_model(spec, identity)
    return spec if name is None else f"{name} (sha256:{model_digest(identity)[:DIGEST_LENGTH]})"


def local_model(spec: str, identity: Any) -> str | None:
    """The folder name of a model loaded from a folder of this machine (its spec or recorded path is one); None
    for a Hub id or any other name.
    """
    path = identity.get("name_or_path") if isinstance(identity, Mapping) else None
    path = path if isinstance(path, str) and path else None
    if not Path(spec).expanduser().is_absolute() and not (path and Path(path).is_absolute()):
        return None
    return Path(path or spec).name or spec


def model_digest(identity: Any) -> str:
    """The sha256 of a model's recorded identity (its weights' digest or files, tokenizer, dtype, architecture and
    loading options) without the path it was loaded from, so that the path of the folder cannot change it.
    """
    fields = (
        {k: v for k, v in identity.items() if k != "name_or_path"}
        if isinstance(identity, Mapping)
        else identity
    )
    return hashlib.sha256(
        json.dumps(fields, sort_keys=True, default=str).encode("utf-8")
    ).hexdigest()


def front_matter(fields: Mapping[str, Any]) -> str:
    """A README's YAML front matter holding exactly `fields`, whatever their text (a colon, a newline)."""
    import yaml

    return "---\n" + yaml.safe_dump(dict(fields), sort_keys=False, allow_unicode=True) + "---\n"


def inside(path: Path, root: Path) -> Path:
    """`path` resolved, when it (and any link on its way) stays in the folder `root`; a link out of it is refused
    by name, so a run folder received from someone else cannot make its figures copy a file from this machine.
    """
    target, folder = path.resolve(), root.resolve()
    if not target.is_relative_to(folder):
        raise CultureProbeError(
            f"{path} is a link to {target}, outside the folder {root}: nothing is published from outside it. "
            "Put the file itself there, or remove the link."
        )
    return target


@dataclass(frozen=True)
class Secret:
    """A value that must not be uploaded, and how a refusal names it (never by its value)."""

    what: str
    value: str


def secrets(tokens: Iterable[str | None] = ()) -> list[Secret]:
    """The user's secrets on this machine now: `tokens` (the one a push uses), the stored or configured Hub token,
    and every environment variable named like a token, key, secret or password.
    """
    from huggingface_hub import get_token

    found = [Secret("the Hugging Face token this push uses", t) for t in tokens if t]
    stored = get_token()
    if stored:
        found.append(Secret("your Hugging Face token", stored))
    found += [
        Secret(f"the value of ${name}", value)
        for name, value in sorted(os.environ.items())
        if SECRET_VARIABLE.search(name) and len(value) >= SECRET_LENGTH
    ]
    return found


def check_upload(
    folder: Path, names: Sequence[str], *, to: str, tokens: Iterable[str | None] = ()
) -> None:
    """Read each file `names` (relative to `folder`) that would be uploaded `to` a repository before anything is
    sent: one holding a secret (`secrets`), text shaped like a key (`KEY_SHAPES`) or the home folder's path, or a
    link out of `folder`, is refused by name. Binary files (Parquet, PNG, PDF) are read as bytes alike.
    """
    known = [(s.what, variant) for s in secrets(tokens) for variant in _written(s.value)]
    home = home_pattern()
    home_bytes = re.compile(home.pattern.encode("utf-8")) if home else None
    for name in names:
        path = Path(folder) / name
        found = _found(path, folder, known, home_bytes)
        if found:
            raise PublishError(
                f"{name} (to be uploaded to {to}) holds {found}; nothing was uploaded. Take it out of the runs or "
                "data it came from and push again (--dry-run --out DIR writes the files to look at)."
            )


def _found(
    path: Path, folder: Path, known: list[tuple[str, bytes]], home: re.Pattern[bytes] | None
) -> str | None:
    """What of the secrets `path` holds (the first found), or None."""
    if path.is_symlink() and not path.resolve().is_relative_to(Path(folder).resolve()):
        return f"a link to {path.resolve()}, outside the folder uploaded"
    data = path.read_bytes()
    for what, value in known:
        if value in data:
            return what
    for what, shape in KEY_SHAPES.items():
        if shape.search(data):
            return f"text shaped like {what}"
    if home is not None and home.search(data):
        return f"the path of your home folder ({Path.home()})"
    return None


def _written(value: str) -> set[bytes]:
    """The bytes a secret may be written as: plain, and as a JSON string holds it."""
    return {value.encode("utf-8"), json.dumps(value)[1:-1].encode("utf-8")}


def add_publication_flags(parser: argparse.ArgumentParser, made: str, folder: str) -> None:
    """`--public`, `--dry-run` and `--out`, as every push takes them: `made` is what the push creates (new
    repositories, a new Space), `folder` what a dry run writes instead of uploading.
    """
    parser.add_argument(
        "--public", action="store_true", help=f"make {made} public (default private)"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help=f"write {folder} and print what would be uploaded; nothing is sent (needs --out)",
    )
    parser.add_argument("--out", help="the dry run's folder")


def check_publication_flags(dry_run: bool, out: str | None) -> None:
    """A dry run writes the folder it would upload (so it needs `--out`), and `--out` is a dry run's only."""
    if dry_run and not out:
        raise PublishError("--dry-run writes the folder it would upload: pass --out DIR as well.")
    if out and not dry_run:
        raise PublishError(
            "--out is the folder of a --dry-run; a push uploads from a temporary folder."
        )
