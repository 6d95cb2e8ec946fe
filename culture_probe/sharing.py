"""What may leave the machine. A run records and shows its settings with whatever of a URL may be a
credential blanked (`redact_url`, `redacted`): the password in `--base-url`, and every query value
but a few known harmless ones (`HARMLESS_PARAMETERS`), are used for the requests and written
nowhere. Whatever `push`, `push-board` and `push-metrics` would upload is read first
(`check_upload`), as its readers see it (a Parquet file's values, a PNG's text chunks) and decoded
(percent-encoding, base64, a token split over lines): a file holding the user's Hub token, the value
of an environment secret, anything shaped like a key, or the home folder's path is refused by name,
and nothing is sent. A file copied out of a run folder never follows a link out of it (`inside`),
and front matter is written by a YAML library (`front_matter`), so no text given by a user adds keys
to it.

What is written for others (the board, a Space) names nothing of this machine (`redacted(...,
shared=True)`, `shown_model`): a local model is its folder's name and digest, the mirror's folder
`$CULTURE_PROBE_MIRROR`, the home folder `~`.

Light on purpose (the standard library; yaml, huggingface_hub and pyarrow load on use): the engine
names its server with it.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import struct
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, unquote_to_bytes, urlsplit, urlunsplit

from culture_probe.errors import CultureProbeError, PublishError

BLANK = "***"  # what a credential is shown as
# the only query parameters (and fragment keys; any case, `_` as `-`) whose value a written file
# shows: each names a protocol version, a model or the shape of an answer, never who asks, and tells
# two servers apart in config.json (Azure OpenAI's `api-version`, a proxy's `model`). Every other
# value is blanked, whatever its name.
HARMLESS_PARAMETERS = frozenset({"api-version", "version", "model", "format", "limit"})
# environment variables whose value is a secret (of SECRET_LENGTH characters or more: shorter ones
# are flags)
SECRET_VARIABLE = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.I)
SECRET_LENGTH = 8
# text shaped like a key, whoever's it is (ASCII bytes: read in any file, text or binary) (each
# starts with its literal and checks the character before it after it: the regex engine then skips
# to the literal, where a look-behind first tries every byte of a large file)
KEY_SHAPES: dict[str, re.Pattern[bytes]] = {
    "a Hugging Face token (hf_...)": re.compile(rb"hf_(?<![A-Za-z0-9]hf_)[A-Za-z0-9]{30,}"),
    "an API key (sk-...)": re.compile(rb"sk-(?<![\w-]sk-)(?=[\w-]*[0-9])[A-Za-z0-9_-]{20,}"),
    "an AWS access key (AKIA...)": re.compile(
        rb"(?:AKIA|ASIA)(?<![A-Z0-9]AKIA)(?<![A-Z0-9]ASIA)[A-Z0-9]{16}(?![A-Z0-9])"
    ),
    "a GitHub token (ghp_...)": re.compile(
        rb"gh[pousr]_(?<![A-Za-z0-9]gh[pousr]_)[A-Za-z0-9]{36,}"
        rb"|github_pat_(?<![A-Za-z0-9]github_pat_)\w{40,}"
    ),
    "a private key (-----BEGIN ... PRIVATE KEY-----)": re.compile(
        rb"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----"
    ),
}
URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>`]+")  # a URL inside other text
SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")  # a value that is a URL starts so
# what is left of a user and password after URL stopped at a quote, a space or a bracket in it
# (`u:p'x@host`)
USERINFO = re.compile(r"(?<=://)[^/?#\s]*@")
# how the scan decodes what a file holds (`_decodings`, `_contents`): a run of base64 (either
# alphabet) long enough to hold a key; a line break inside a value (or its `\n` escape) with the
# quotes, spaces and continuation (`\`, `+`) around it, as a token split over two lines is written
# (`"hf_ab" +` / `"cd"`, `hf_ab\` / `cd`)
BASE64_RUN = re.compile(rb"[A-Za-z0-9+/_-]{24,}={0,2}")
LINE_BREAK = re.compile(
    rb"(?=[\"' \t\\+\r\n])[\"']?[ \t]*[\\+]?[ \t]*(?:\r?\n|(?:\\r)?\\n)[ \t]*[\"']?"
)
URL_SAFE, STANDARD = bytes.maketrans(b"+/", b"-_"), bytes.maketrans(b"-_", b"+/")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# bytes of one PNG text chunk inflated: more is a bomb, not a figure's caption
INFLATED_LIMIT = 64 << 20
# the offline mirror's folder (culture_probe.data.sources reads it)
MIRROR_ENV = "CULTURE_PROBE_MIRROR"
DIGEST_LENGTH = 8  # hex digits of a local model's digest shown
T = TypeVar("T")


def redact_url(url: str) -> str:
    """`url` with everything that may be a credential blanked: the user and password (`user:pass@`),
    the value of every query parameter but a harmless one (`HARMLESS_PARAMETERS`), a bare query
    piece (`?s3cr3t`), and the values of fragment keys (`#access_token=...`; an anchor `#readme` is
    kept). A credential is told by where it is, not by its name: `?pw=`, `?jwt=` or `?passphrase=`
    name none of a list. A URL without any of these is returned as given, character for character
    (it may key a cache).
    """
    if "://" not in url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL after all (an unclosed IPv6 bracket): blank anything before an @
        return re.sub(r"(?<=://)[^/?#]*@", BLANK + "@", url)
    netloc = f"{BLANK}@{parts.netloc.rpartition('@')[2]}" if "@" in parts.netloc else parts.netloc
    fragment = _blanked(parts.fragment) if "=" in parts.fragment else parts.fragment
    blanked = parts._replace(netloc=netloc, query=_blanked(parts.query), fragment=fragment)
    return url if blanked == parts else urlunsplit(blanked)


def _blanked(query: str) -> str:
    """`model=m&pw=xyz;s3cr3t` -> `model=m&pw=***;***`: every value but a harmless parameter's, a
    bare piece (a value without a name) included; the names, the separators and empty pieces kept as
    written.
    """
    return re.sub(r"[^&;]+", lambda piece: _blanked_piece(piece.group()), query)


def _blanked_piece(piece: str) -> str:
    name, equals, _ = piece.partition("=")
    if equals and unquote(name).lower().replace("_", "-") in HARMLESS_PARAMETERS:
        return piece
    return f"{name}={BLANK}" if equals else BLANK


def redacted(value: T, *, shared: bool = False) -> T:
    """`value` (a string, or JSON-like lists and mappings of them) with the credentials of every URL
    in it blanked (`redact_url`); with `shared` (what is published), the mirror's folder is also
    shown as `$CULTURE_PROBE_MIRROR` and the home folder as `~` (`local_folders`).
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
    """The folders of this machine that shared text names by a placeholder, with it: the mirror's
    first (it may lie in the home folder), then the home folder's.
    """
    mirror, home = os.environ.get(MIRROR_ENV), home_pattern()
    found = (
        [(_folder_pattern(mirror), "$" + MIRROR_ENV)]
        if mirror and len(mirror.rstrip("/\\")) > 1
        else []
    )
    return found + ([(home, "~")] if home else [])


def home_pattern() -> re.Pattern[str] | None:
    """The home folder's path where it starts a path (`/home/ann`, `/home/ann/runs`, never
    `/home/anna` or `/x/home/ann`); None when the home folder is the root or cannot be told.
    """
    try:
        home = str(Path.home())
    except RuntimeError:
        return None
    return _folder_pattern(home) if len(home.rstrip("/\\")) > 1 else None


def _folder_pattern(folder: str) -> re.Pattern[str]:
    """`folder` (as given, or with its links resolved) where it starts a path, and not a longer name
    (each spelling checks the character before it after it, as `KEY_SHAPES` do, to be found fast in
    a large file).
    """
    spellings = sorted({folder.rstrip("/\\"), str(Path(folder).resolve())}, key=len, reverse=True)
    found = "|".join(f"{re.escape(s)}(?<![\\w.-]{re.escape(s)})" for s in spellings)
    return re.compile(f"(?:{found})(?![\\w.-])")


def shown_model(spec: str, identity: Any) -> str:
    """A model as what is shared names it: a Hub id (or any name) as given; a local folder by its
    name and the digest of its recorded identity without the path (`my-model (sha256:ab12cd34)`),
    which tells two models of one folder name apart, where the folder's path would only say whose
    machine it was on.
    """
    name = local_model(spec, identity)
    return spec if name is None else f"{name} (sha256:{model_digest(identity)[:DIGEST_LENGTH]})"


def local_model(spec: str, identity: Any) -> str | None:
    """The folder name of a model loaded from a folder of this machine (its spec or recorded path is
    one); None for a Hub id or any other name.
    """
    path = identity.get("name_or_path") if isinstance(identity, Mapping) else None
    path = path if isinstance(path, str) and path else None
    if not Path(spec).expanduser().is_absolute() and not (path and Path(path).is_absolute()):
        return None
    return Path(path or spec).name or spec


def model_digest(identity: Any) -> str:
    """The sha256 of a model's recorded identity (its weights' digest or files, tokenizer, dtype,
    architecture and loading options) without the path it was loaded from, so that the path of the
    folder cannot change it.
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
    """A README's YAML front matter holding exactly `fields`, whatever their text (a colon, a
    newline).
    """
    import yaml

    return "---\n" + yaml.safe_dump(dict(fields), sort_keys=False, allow_unicode=True) + "---\n"


def inside(path: Path, root: Path) -> Path:
    """`path` resolved, when it (and any link on its way) stays in the folder `root`; a link out of
    it is refused by name, so a run folder received from someone else cannot make its figures copy a
    file from this machine.
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
    """The user's secrets on this machine now: `tokens` (the one a push uses), the stored or
    configured Hub token, and every environment variable named like a token, key, secret or
    password.
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
    """Read each file `names` (relative to `folder`) that would be uploaded `to` a repository before
    anything is sent: one holding a secret (`secrets`), text shaped like a key (`KEY_SHAPES`) or the
    home folder's path, or a link out of `folder`, is refused by name. A file is read as its readers
    see it (`_contents`: a Parquet file's values, a PNG's text chunks, decompressed) and each text
    as written and decoded (`_decodings`: percent-encoded, split across lines, base64), so no
    encoding carries a secret past the scan.
    """
    known = [Written(s.what, form, how) for s in secrets(tokens) for form, how in _written(s.value)]
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


@dataclass(frozen=True)
class Written:
    """One way a secret may be written in a file: `form`, its bytes, and `how` a refusal says so (""
    for as is).
    """

    what: str
    form: bytes
    how: str


def _found(
    path: Path, folder: Path, known: list[Written], home: re.Pattern[bytes] | None
) -> str | None:
    """What of the secrets `path` holds (the first found, and how it is written there), or None."""
    if path.is_symlink() and not path.resolve().is_relative_to(Path(folder).resolve()):
        return f"a link to {path.resolve()}, outside the folder uploaded"
    data = path.read_bytes()
    try:
        contents = list(_contents(path, data))
    # pyarrow's errors are these (ArrowInvalid, ArrowIOError, ArrowNotImplementedError,
    # ArrowTypeError)
    except (ValueError, OSError, NotImplementedError, TypeError) as error:
        return f"data that cannot be read to check it ({str(error).splitlines()[0][:200]})"
    for where, content in contents:
        for decoded, text in _decodings(content):
            found = _secret_in(text, known, home)
            if found:
                what, how = found
                notes = ", ".join(note for note in (how, decoded, where) if note)
                return f"{what} ({notes})" if notes else what
    return None


def _secret_in(
    text: bytes, known: list[Written], home: re.Pattern[bytes] | None
) -> tuple[str, str] | None:
    """The first secret `text` holds and how it is written, or None."""
    for written in known:
        if written.form in text:
            return written.what, written.how
    for what, shape in KEY_SHAPES.items():
        if shape.search(text):
            return f"text shaped like {what}", ""
    if home is not None and home.search(text):
        return f"the path of your home folder ({Path.home()})", ""
    return None


def _written(value: str) -> list[tuple[bytes, str]]:
    """The bytes a secret may be written as: plain, as a JSON string holds it, and base64-encoded
    (standard and URL-safe alphabets) wherever it starts in the encoded bytes: the characters that
    encode it alone, at each of the 3 alignments, so that the base64 of any text holding it holds
    one of them.
    """
    plain = value.encode("utf-8")
    forms = [(plain, ""), (json.dumps(value)[1:-1].encode("utf-8"), "")]
    for pad in range(3):
        encoded, size = base64.b64encode(b"\0" * pad + plain), pad + len(plain)
        # without the characters that also encode the padding before it, or the bytes after it
        alone = encoded[(0, 2, 3)[pad] : 4 * (size // 3) + (0, 1, 2)[size % 3]]
        forms += [(alone, "base64-encoded"), (alone.translate(URL_SAFE), "base64-encoded")]
    return forms


def _contents(path: Path, data: bytes) -> Iterator[tuple[str, bytes]]:
    """What a file holds, as its readers see it, each with where a refusal says it is: its bytes; a
    Parquet file's values and schema (its pages are compressed); a PNG's text chunks (zTXt and iTXt
    may be compressed).
    """
    yield "", data
    if data[:4] == b"PAR1":
        yield "in its Parquet data", b"\0".join(_parquet_values(path))
    if data.startswith(PNG_SIGNATURE):
        yield "in a PNG text chunk", b"\0".join(_png_texts(data))


def _decodings(text: bytes) -> Iterator[tuple[str, bytes]]:
    """`text` as written, and each way it may be decoded (only those that change it):
    percent-decoded; with every line break in a value taken out, with the quotes, spaces and
    continuation around it (`LINE_BREAK`); and each base64-looking run decoded (`BASE64_RUN`).
    """
    yield "", text
    if b"%" in text:
        yield "URL-encoded", unquote_to_bytes(text)
    joined = LINE_BREAK.sub(b"", text)
    if joined != text:
        yield "split across lines", joined
    runs = BASE64_RUN.findall(text)
    if runs:
        yield "base64-encoded", b"\0".join(decoded for run in runs for decoded in _base64(run))


def _base64(run: bytes) -> Iterator[bytes]:
    """`run` base64-decoded from each of its first 4 characters (it may start with a character of
    what is before it: `key=aGZf...` is the run `key` and the encoding), in either alphabet.
    """
    run = run.rstrip(b"=").translate(STANDARD)
    for start in range(4):
        piece = run[start:]
        piece = piece[: len(piece) - (len(piece) % 4 == 1)]  # one character alone encodes no byte
        yield base64.b64decode(piece + b"=" * (-len(piece) % 4))


def _parquet_values(path: Path) -> Iterator[bytes]:
    """Every text and binary value of a Parquet file (in lists, structs, maps and dictionaries too),
    its column names and its schema's metadata, decompressed by pyarrow.
    """
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    table = pq.read_table(path)
    for field in table.schema:
        yield field.name.encode("utf-8")
        yield from _metadata(field.metadata)
    yield from _metadata(table.schema.metadata)
    for column in table.columns:
        for chunk in column.chunks:
            yield from _arrow_values(chunk)


def _metadata(metadata: Mapping[bytes, bytes] | None) -> Iterator[bytes]:
    for key, value in (metadata or {}).items():
        yield key
        yield value


def _arrow_values(array: Any) -> Iterator[bytes]:
    """The text and binary values in an Arrow array, each array's joined by NUL by Arrow itself (a
    value never runs into the next, and a large file is not read value by value in Python).
    """
    import pyarrow as pa
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    kind, types = array.type, pa.types
    texts = [types.is_string, types.is_large_string, types.is_binary, types.is_large_binary]
    texts.append(types.is_fixed_size_binary)
    if types.is_dictionary(kind):
        yield from _arrow_values(array.dictionary)
    elif types.is_struct(kind):
        for child in array.flatten():
            yield from _arrow_values(child)
    elif types.is_map(kind):
        yield from _arrow_values(array.keys)
        yield from _arrow_values(array.items)
    elif types.is_list(kind) or types.is_large_list(kind) or types.is_fixed_size_list(kind):
        yield from _arrow_values(array.flatten())
    elif any(is_text(kind) for is_text in texts):
        values = pc.fill_null(array.cast(pa.large_binary()), b"")
        whole = pa.LargeListArray.from_arrays(pa.array([0, len(values)], pa.int64()), values)
        yield pc.binary_join(whole, pa.scalar(b"\0", pa.large_binary()))[0].as_py()


def _png_texts(data: bytes) -> Iterator[bytes]:
    """The keywords and text of a PNG's tEXt, zTXt and iTXt chunks, decompressed; a chunk past a
    malformed length ends the walk (the file's bytes are read as they are anyway).
    """
    at = len(PNG_SIGNATURE)
    while at + 8 <= len(data):
        length, kind = struct.unpack_from(">I4s", data, at)
        body = data[at + 8 : at + 8 + length]
        at += 12 + length  # length, type, data, CRC
        keyword, _, rest = body.partition(b"\0")
        if kind == b"tEXt":
            yield body
        elif kind == b"zTXt":  # keyword, 0, method, zlib text
            yield keyword
            yield _inflated(rest[1:])
        elif kind == b"iTXt":  # keyword, 0, compressed?, method, language, 0, translated, 0, text
            language, _, rest_ = rest[2:].partition(b"\0")
            translated, _, text = rest_.partition(b"\0")
            yield b"\0".join((keyword, language, translated))
            yield _inflated(text) if rest[:1] == b"\1" else text


def _inflated(compressed: bytes) -> bytes:
    """The text a zlib stream `compressed` holds, up to `INFLATED_LIMIT` bytes: a chunk that is not
    zlib, or that inflates past the limit, cannot be checked (ValueError).
    """
    inflater = zlib.decompressobj()
    try:
        text = inflater.decompress(compressed, INFLATED_LIMIT)
    except zlib.error as error:
        raise ValueError(f"a PNG text chunk is not zlib data: {error}") from None
    if inflater.unconsumed_tail:
        raise ValueError(f"a PNG text chunk inflates past {INFLATED_LIMIT:,} bytes")
    return text


def add_publication_flags(parser: argparse.ArgumentParser, made: str, folder: str) -> None:
    """`--public`, `--dry-run` and `--out`, as every push takes them: `made` is what the push
    creates (new repositories, a new Space), `folder` what a dry run writes instead of uploading.
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
    """A dry run writes the folder it would upload (so it needs `--out`), and `--out` is a dry run's
    only.
    """
    if dry_run and not out:
        raise PublishError("--dry-run writes the folder it would upload: pass --out DIR as well.")
    if out and not dry_run:
        raise PublishError(
            "--out is the folder of a --dry-run; a push uploads from a temporary folder."
        )
