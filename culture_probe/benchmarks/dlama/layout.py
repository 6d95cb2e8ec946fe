"""The DLAMA-v1 layout: fact files, culture-pair folders, and which folder a config reads.

A pair folder holds `dlama/<lang>/P<id>_<domain>_<TOKEN>.jsonl` files (and maybe a `dlama_raw/`
twin) for the two region tokens of one pair, plus, when `culture_probe.curation` wrote it, a
`curation.json` manifest naming the pair, its regions and languages. A config finds its folder by
region token, never by folder name; folders of other pairs are ignored, so one `data_dir` can hold
the release next to newly curated pairs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from culture_probe.errors import CultureProbeError, MissingDataError, SourceFormatError

WEST = "WESTERN_COUNTRIES"
# Culture names of the release's region tokens; a new token's culture is its manifest name, else the
# token lower-cased.
CULTURES = {"ARAB_REGION": "arab", "ASIA": "asia", "SOUTH_AMERICA": "south_america", WEST: "west"}
TOKEN = re.compile(r"[A-Z][A-Z0-9_]*")  # curation's tokens: an upper-cased region name
PAIR_NAME = re.compile(r"[a-z][a-z0-9_]*")
FILE_NAME = re.compile(r"(P\d+)_([A-Za-z]+)_(" + TOKEN.pattern + r")\.jsonl")
MANIFEST = "curation.json"
Reader = Callable[[tuple[str, ...]], list[str]]


@dataclass(frozen=True)
class FactFile:
    """One `P<id>_<domain>_<TOKEN>.jsonl` file found in the source, and where it sits in the
    layout.
    """

    parts: tuple[str, ...]  # path inside the tarball / data_dir
    kind: str  # "dlama" or "dlama_raw"
    language: str
    predicate: str
    region: str

    @property
    def pair_dir(self) -> tuple[str, ...]:
        """The culture-pair folder (e.g. `arab-west`, possibly under one extra leading folder)."""
        return self.parts[:-3]


@dataclass(frozen=True)
class Manifest:
    """What a curation run says about its pair folder (`curation.json`)."""

    pair: str
    region: str
    contrast: str
    cultures: tuple[tuple[str, str], ...]  # (token, culture name)
    languages: tuple[str, ...]


@dataclass(frozen=True)
class PairFolder:
    """One folder holding fact files: its path, region tokens, languages and manifest (if
    curated).
    """

    parts: tuple[str, ...]
    tokens: tuple[str, ...]
    languages: tuple[str, ...]
    manifest: Manifest | None

    @property
    def label(self) -> str:
        """How errors name the folder: its path and tokens."""
        return f"{'/'.join(self.parts) or '.'} ({', '.join(self.tokens)})"


@dataclass(frozen=True)
class PairRequest:
    """What a config asks for; None or empty fields are inferred from the folder or its manifest."""

    name: str | None = None
    region: str | None = None
    contrast: str | None = None
    languages: tuple[str, ...] = ()
    custom: bool = False  # False: a released pair, found by `region` alone


@dataclass(frozen=True)
class Pair:
    """The pair a config reads: its name, folder, two region tokens, culture names and languages."""

    name: str
    folder: tuple[str, ...]
    region: str
    contrast: str
    cultures: tuple[tuple[str, str], ...]
    languages: tuple[str, ...]

    def culture(self, token: str) -> str:
        """The `culture` column for a region token."""
        return dict(self.cultures)[token]


def find_fact_files(paths: list[tuple[str, ...]]) -> list[FactFile]:
    """The fact files among all paths of a source (anything else, e.g. a README, is ignored)."""
    found = []
    for parts in paths:
        match = FILE_NAME.fullmatch(parts[-1])
        # `<pair>/dlama/<lang>/<file>`, or `dlama/<lang>/<file>` in a data_dir that is the pair
        # folder itself
        if len(parts) >= 3 and match and parts[-3] in ("dlama", "dlama_raw"):
            predicate, _, region = match.groups()
            found.append(FactFile(parts, parts[-3], parts[-2], predicate, region))
    return found


def pair_folders(
    files: list[FactFile], paths: list[tuple[str, ...]], read: Reader, source: str
) -> list[PairFolder]:
    """Every folder holding fact files, with the manifest written next to them (if any)."""
    folders = []
    for parts in sorted({f.pair_dir for f in files}):
        mine = [f for f in files if f.pair_dir == parts]
        manifest = (*parts, MANIFEST)
        folders.append(
            PairFolder(
                parts,
                tuple(sorted({f.region for f in mine})),
                tuple(sorted({f.language for f in mine})),
                read_manifest(read(manifest), f"{source}/{'/'.join(manifest)}")
                if manifest in paths
                else None,
            )
        )
    return folders


def read_manifest(lines: list[str], path: str) -> Manifest | None:
    """The pair described by a DLAMA `curation.json` (None for another framework's manifest)."""
    try:
        data = json.loads("\n".join(lines))
    except json.JSONDecodeError as error:
        raise SourceFormatError(
            f"invalid JSON ({error.msg})", path=path, line=error.lineno
        ) from error
    if not isinstance(data, dict) or data.get("framework") != "dlama":
        return None
    try:
        config = data["config"]
        regions = (config["region"], config["contrast"])
        cultures = tuple((r["token"], r["name"]) for r in regions)
        return Manifest(
            str(data["pair"]), cultures[0][0], cultures[1][0], cultures, tuple(config["languages"])
        )
    except (KeyError, TypeError) as error:
        raise SourceFormatError(
            f"not a DLAMA curation manifest: expected 'pair' and config.region/contrast token and name and "
            f"config.languages, missing {error}",
            path=path,
        ) from error


def choose_pair(folders: list[PairFolder], request: PairRequest, source: str) -> Pair:
    """The one folder the request names, resolved into a `Pair`; clear errors for none or
    several.
    """
    matching = [folder for folder in folders if _matches(folder, request)]
    own = [folder for folder in matching if not set(folder.tokens) <= set(CULTURES)]
    # a pair of its own first: a curated copy of a released pair is taken when alone
    if request.custom and not (request.name or request.region) and len(own) == 1:
        matching = own
    found = [folder.label for folder in folders] or "no fact files"
    if not matching:
        wanted = (
            f"files P<id>_general_{request.region}.jsonl" if request.region else "a pair of its own"
        )
        hint = (
            "pass region= (its token, e.g. 'MAGHREB') or pair= to pick one (--data-option region=... or pair=...)"
            if request.custom
            else "pass the full DLAMA-v1 release, or load dlama_custom for a curated pair"
        )
        raise MissingDataError(
            f"{source} has no folder for {request.name or 'dlama_custom'} ({wanted}); found "
            f"pair folders {found}; {hint}."
        )
    if len(matching) > 1:
        hint = (
            "Pass region= and contrast= (tokens) or pair= to pick one (--data-option pair=NAME)"
            if request.custom
            else "Load a curated copy with dlama_custom and pair= (--data-option pair=NAME)"
        )
        raise CultureProbeError(
            f"{source} holds {len(matching)} folders that fit {_describe(request)}: "
            f"{[folder.label for folder in matching]}. {hint}, or point data_dir at one pair folder."
        )
    return _resolve(matching[0], request, source)


def _matches(folder: PairFolder, request: PairRequest) -> bool:
    if not request.custom:
        return request.region in folder.tokens
    if not {t for t in (request.region, request.contrast) if t} <= set(folder.tokens):
        return False
    if request.name:
        names = {_pair_name(folder.parts[-1]) if folder.parts else None}
        return request.name in names | ({folder.manifest.pair} if folder.manifest else set())
    # a curated pair says so in its manifest, also one of the released pairs' regions (the curation
    # quick start)
    return (
        request.region is not None
        or folder.manifest is not None
        or not set(folder.tokens) <= set(CULTURES)
    )


def _resolve(folder: PairFolder, request: PairRequest, source: str) -> Pair:
    manifest = folder.manifest
    region = request.region or (
        manifest.region if manifest else _only_region(folder, request, source)
    )
    if request.contrast or not request.custom:
        contrast = request.contrast or WEST
    elif manifest and manifest.region == region:
        contrast = manifest.contrast
    else:
        contrast = next((t for t in folder.tokens if t != region), WEST)
    if not set(folder.tokens) <= {region, contrast}:
        raise SourceFormatError(
            f"folder {folder.label} must hold the files of one pair, {region} and {contrast}; remove the others "
            "or move each pair into its own folder",
            path=source,
        )
    cultures = {**CULTURES, **dict(manifest.cultures if manifest else ())}
    named = tuple((t, cultures.get(t, t.lower())) for t in (region, contrast))
    name = request.name or (manifest.pair if manifest else f"{named[0][1]}_{named[1][1]}")
    languages = request.languages or (
        manifest.languages
        if manifest
        else tuple(sorted(folder.languages, key=lambda lang: (lang == "en", lang)))
    )
    return Pair(name, folder.parts, region, contrast, named, tuple(languages))


def _only_region(folder: PairFolder, request: PairRequest, source: str) -> str:
    """Without region= or a manifest: the folder's one token that is not the contrast (default: the
    West).
    """
    others = [t for t in folder.tokens if t != (request.contrast or WEST)]
    if len(others) != 1:
        raise SourceFormatError(
            f"cannot tell the region of folder {folder.label} (no {MANIFEST}); pass region= and contrast= tokens",
            path=source,
        )
    return others[0]


def _describe(request: PairRequest) -> str:
    if not request.custom:
        return str(request.name)
    asked = {"pair": request.name, "region": request.region, "contrast": request.contrast}
    given = ", ".join(f"{key}={value!r}" for key, value in asked.items() if value)
    return (
        f"dlama_custom({given})"
        if given
        else "dlama_custom (a folder with a region token of its own)"
    )


def _pair_name(text: str) -> str:
    """`maghreb-west` (a folder name, as curation writes it) and `maghreb_west` name the same
    pair.
    """
    return text.replace("-", "_").lower()


def check_custom_options(
    pair: str, region: str | None, contrast: str | None, languages: tuple[str, ...]
) -> PairRequest:
    """The request of `dlama_custom`'s options, or an error naming the bad value and the expected
    form.
    """
    for key, value in (("region", region), ("contrast", contrast)):
        if value is not None and not (isinstance(value, str) and TOKEN.fullmatch(value)):
            raise CultureProbeError(
                f"{key}= must be a region token as written in the file names (upper-case letters, digits, '_'), "
                f"got {value!r}. Example: region='MAGHREB' for P36_general_MAGHREB.jsonl."
            )
    if region is not None and region == contrast:
        raise CultureProbeError(f"region= and contrast= must differ, got {region!r} twice.")
    name = _pair_name(pair) if isinstance(pair, str) else pair
    if name and not (isinstance(name, str) and PAIR_NAME.fullmatch(name)):
        raise CultureProbeError(
            f"pair= must name a pair like 'maghreb_west' (or its folder 'maghreb-west'), got {pair!r}."
        )
    return PairRequest(name or None, region, contrast, tuple(languages), custom=True)
