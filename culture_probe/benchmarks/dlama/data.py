"""DLAMA-v1: Wikidata facts of contrasting cultures (Arab/Asia/South America vs West), two languages
per pair.

The builder reads (in this order) `data_dir=` (an unpacked tarball or the `.tar.gz`), `data_files=`
(the `.tar.gz`), the pinned URL through the mirror rule (verified by its git blob id), or, when the
tarball is not in the mirror, the mirror's unpacked copy of the release (`manual/dlama/dlama-v1`).
Released pairs must hold the paper's Table 1 counts per language and culture (`verify_counts=False`
opts out). The layout is the release tarball's: `<pair>/dlama/<lang>/P<id>_general_<REGION>.jsonl`,
optionally under one extra folder and with a `dlama_raw/` twin. Each row is one fact in one
language. The probing templates are a resource the protocol declares (`RESOURCES["templates"]`: the
vendored strings, or a user's file). `dlama_custom` reads a pair written by `culture_probe.curation`
(any region token), from its `curation.json` or the options.
"""

from __future__ import annotations

import json
import re
import tarfile
import unicodedata
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import datasets

from culture_probe.benchmarks.dlama.layout import (
    MANIFEST,
    WEST,
    FactFile,
    Pair,
    PairRequest,
    Reader,
    check_custom_options,
    choose_pair,
    find_fact_files,
    pair_folders,
)
from culture_probe.data._builder import (
    CultureProbeBuilder,
    CultureProbeConfig,
    Publication,
    corrected_twin,
)
from culture_probe.data.card import (
    CORRECTED_SUFFIX,
    BenchmarkInfo,
    Correction,
    FileResource,
    Licence,
    base_name,
)
from culture_probe.data.sources import (
    fetch,
    git_blob_id,
    mirror_root,
    parse_jsonl,
    read_jsonl,
    sha256_of,
    verify_git_blob,
)
from culture_probe.errors import CultureProbeError, MissingDataError, SourceFormatError
from culture_probe.util.jsonl import decode, read_lines

TARBALL_URL = "https://raw.githubusercontent.com/AMR-KELEG/DLAMA/61ea3bbc6c932d8332b053529e3d05b3ad12eb12/data/dlama-v1.tar.gz"
TARBALL_BLOB_ID = "49f09ec2e66fdd604dd3495ed360b3e4b7bb9a32"

# pair -> (non-Western region token, local language); the region token in file names identifies the
# pair.
PAIRS = {
    "arab_west": ("ARAB_REGION", "ar"),
    "asia_west": ("ASIA", "ko"),
    "south_america_west": ("SOUTH_AMERICA", "es"),
}
# a pair curated with culture_probe.curation (or any folder in the v1 layout)
CUSTOM = "dlama_custom"
PREDICATES = (
    "P17",
    "P19",
    "P20",
    "P27",
    "P30",
    "P36",
    "P37",
    "P47",
    "P103",
    "P106",
    "P136",
    "P190",
    "P264",
    "P364",
    "P449",
    "P495",
    "P530",
    "P1303",
    "P1376",
    "P1412",
)
# present in some dumps, not part of v1 (the original scorer skips it too)
SKIPPED_PREDICATES = ("P527",)
ROWS = {"arab_west": 49_070, "asia_west": 54_134, "south_america_west": 53_314}
# The paper's Table 1, which the release matches exactly: facts per language, and how many are
# Western.
FACTS = {
    "arab_west": (24_535, 13_589),
    "asia_west": (27_067, 13_588),
    "south_america_west": (26_657, 13_586),
}
# The release unpacked in the local mirror (CULTURE_PROBE_MIRROR; distributed on request, see its
# README): read when the tarball is not.
MANUAL_RELEASE = ("manual", "dlama", "dlama-v1")
# The labels an unpacked copy of the release may lack (the release tarball holds them): the note of
# the config, its report and the error that skips it in a suite say so of the data the user has.
MISSING_LABELS = {("asia_west", "ko"): "the Korean labels of asia-west (asia-west/dlama/ko/)"}
FIELDS = ("sub_uri", "obj_uri", "sub_label", "obj_label", "country", "size", "uuid")

# The paper's BibTeX: the dataset card's citation and that of the benchmark's `evaluate` metrics.
CITATION = (
    "@inproceedings{keleg-magdy-2023-dlama,\n  title={{DLAMA}: A Framework for Curating Culturally Diverse "
    "Facts for Probing the Knowledge of Pretrained Language Models},\n  author={Keleg, Amr and Magdy, Walid},"
    "\n  booktitle={Findings of the Association for Computational Linguistics: ACL 2023},\n  year={2023}\n}"
)

INFO = BenchmarkInfo(
    name="dlama",
    title="DLAMA-v1: culturally diverse facts for probing masked LMs",
    description=(
        "Wikidata facts for 20 mLAMA predicates about entities of contrasting cultures (Arab-West, Asia-West, "
        "South America-West), each in English and a local language (ar, ko, es). A masked LM ranks all object "
        "labels of the predicate; P@1 of the non-Western and Western halves of a pair are compared."
    ),
    homepage="https://github.com/AMR-KELEG/DLAMA",
    licences=(
        Licence(
            "MIT",
            "the DLAMA repository and its released facts",
            "mit",
            "https://github.com/AMR-KELEG/DLAMA/blob/main/LICENSE",
        ),
        Licence(
            "CC0 1.0",
            "the facts and labels themselves (from Wikidata)",
            "cc0-1.0",
            "https://www.wikidata.org/wiki/Wikidata:Licensing",
        ),
    ),
    citation=CITATION,
    version="1.0.0",
    paper="papers/dlama_000_ab2a3dec4437f5c7.txt",
    # where each config's rows were read from, and its templates, are on its card
    sources=(TARBALL_URL,),
    suite=("dlama_arab_west", "dlama_asia_west", "dlama_south_america_west"),
    corrections=(
        Correction(
            "label_normalisation",
            "Labels stripped and NFC-normalised; duplicate labels within a fact "
            "merged (with their QID). Unverified on the real release.",
        ),
        Correction(
            "empty_labels",
            "Facts with an empty sub_label or no non-empty obj_label are skipped and counted (both variants).",
        ),
        Correction(
            "legacy_scalars",
            "Legacy scalar obj_uri/obj_label are wrapped into lists (both variants).",
        ),
        Correction(
            "provisional_templates",
            "es/ko/ar templates are provisional transcriptions of the paper's "
            "Table F9 (ko P17/P19 unreadable); pass --option templates= the mLAMA 1.1 folder or a JSON file.",
        ),
    ),
)


@dataclass
class DlamaConfig(CultureProbeConfig):
    """One culture pair; `raw` reads the facts before object augmentation (`dlama_raw/`).

    `dlama_custom` only: `pair` (a name or folder name), `region` and `contrast` (the tokens in the
    file names) pick a curated pair; whatever is left out comes from its `curation.json` or its
    files.
    """

    pair: str = "arab_west"
    region: str | None = None
    contrast: str | None = None
    raw: bool = False
    # released pairs: the paper's facts per language and culture, or an error
    verify_counts: bool = True


def missing_note(missing: str) -> str:
    """What the config's description and its report say of labels a copy may lack
    (`MISSING_LABELS`).
    """
    return f"the release tarball holds both languages; a copy that lacks {missing} runs in English (--language en)."


def _configs() -> list[DlamaConfig]:
    configs, raw = [], []
    for pair, (_, local) in PAIRS.items():
        label = pair.replace("_west", "").replace("_", " ").title()
        missing = MISSING_LABELS.get((pair, local))
        note = f" Note: {missing_note(missing)}" if missing else ""
        configs.append(
            DlamaConfig(
                name=f"dlama_{pair}",
                rows=ROWS[pair],
                version=INFO.version,
                languages=(local, "en"),
                pair=pair,
                description=f"{label}-West facts in {local} and en.{note}",
            )
        )
        raw.append(
            DlamaConfig(
                name=f"dlama_{pair}_raw",
                raw=True,
                version=INFO.version,
                languages=(local, "en"),
                pair=pair,
                description=f"{label}-West facts before object augmentation (if released).",
            )
        )
    configs.append(
        DlamaConfig(
            name=CUSTOM,
            version=INFO.version,
            pair="",
            description=(
                "A pair curated with culture_probe.curation (data_dir=; options pair=, region=, contrast=, languages=)."
            ),
        )
    )
    return [*configs, *(corrected_twin(c) for c in configs), *raw]


VENDORED_TEMPLATES = Path(__file__).parent / "vendored" / "dlama_templates.json"


def read_templates(
    *, data_dir: str | None = None, corrected: bool = False, path: str | None = None
) -> tuple[dict[str, dict[str, dict[str, Any]]], list[Path]]:
    """The probing templates, {language: {predicate: {"template", "verified"}}}, and the files they
    come from.

    The vendored strings (en exact; es/ko/ar provisional: `verified` false), then, with `path`, the
    user's: an mLAMA 1.1 folder (`<lang>/templates.jsonl`, one {"relation", "template"} object per
    line) or a JSON file {lang: {predicate: template}}; a user's template counts as verified.
    """
    vendored = json.loads(VENDORED_TEMPLATES.read_text(encoding="utf-8"))
    table = {
        lang: {
            pred: {"template": text, "verified": bool(entry.get("verified", False))}
            for pred, text in entry.get("templates", {}).items()
        }
        for lang, entry in vendored.items()
        if isinstance(entry, dict)
    }
    files = [VENDORED_TEMPLATES]
    if path is not None:
        user, read = _user_templates(Path(path))
        files += read
        for language, predicates in user.items():
            table.setdefault(language, {}).update(
                {pred: {"template": text, "verified": True} for pred, text in predicates.items()}
            )
    return table, files


def _user_templates(path: Path) -> tuple[dict[str, dict[str, str]], list[Path]]:
    """{language: {predicate: template}} of an mLAMA 1.1 folder or a JSON file, and the files
    read.
    """
    if path.is_dir():
        files = sorted(path.glob("*/templates.jsonl"))
        if not files:
            raise MissingDataError(
                f"{path} holds no <lang>/templates.jsonl (the mLAMA 1.1 layout)."
            )
        table: dict[str, dict[str, str]] = {}
        for file in files:
            for number, record in read_jsonl(file):
                if not isinstance(record.get("relation"), str) or not isinstance(
                    record.get("template"), str
                ):
                    raise SourceFormatError(
                        "expected 'relation' and 'template' strings", path=str(file), line=number
                    )
                table.setdefault(file.parent.name, {})[record["relation"]] = record["template"]
        return table, files
    if not path.is_file():
        raise MissingDataError(
            f"DLAMA templates {str(path)!r}: no such file or folder (give an mLAMA 1.1 folder or "
            "a JSON file {lang: {predicate: template}})."
        )
    try:
        user = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise SourceFormatError(
            f"invalid JSON ({error.msg})", path=str(path), line=error.lineno
        ) from None
    if not isinstance(user, dict) or not all(isinstance(v, dict) for v in user.values()):
        raise SourceFormatError(
            "expected a JSON object {lang: {predicate: template}}", path=str(path)
        )
    return user, [path]


RESOURCES = {"templates": FileResource(read_templates)}


def normalise(label: str) -> str:
    """The corrected variant's label form: stripped, NFC."""
    return unicodedata.normalize("NFC", label.strip())


class Dlama(CultureProbeBuilder):
    """DLAMA-v1 builder: one config per released pair plus `dlama_custom`; `languages=` restricts
    the rows.
    """

    CARD = INFO
    LANGUAGE_FILTER = True
    BUILDER_CONFIG_CLASS = DlamaConfig
    BUILDER_CONFIGS = _configs()
    config: DlamaConfig

    def _features(self) -> datasets.Features:
        string = datasets.Value("string")
        return datasets.Features(
            {
                "id": string,
                "uuid": string,
                "pair": string,
                "language": string,
                "predicate": string,
                "culture": string,
                "region": string,
                "rank": datasets.Value("int32"),
                "sub_uri": string,
                "sub_label": string,
                "obj_uri": datasets.List(string),
                "obj_label": datasets.List(string),
                "country": datasets.List(string),
                "size": datasets.Value("int64"),
            }
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._request()  # bad options fail here, before any source is read

    @property
    def custom(self) -> bool:
        """True for `dlama_custom` (and its corrected twin): a pair of the user's own."""
        return base_name(self.config.name) == CUSTOM

    def _request(self) -> PairRequest:
        """The pair this config asks for; options that do not fit the config raise here."""
        config = self.config
        if isinstance(config.languages, str):
            raise CultureProbeError(
                f"languages= must be a list of codes such as ('ar', 'en'), got {config.languages!r}."
            )
        if self.custom:
            return check_custom_options(
                config.pair, config.region, config.contrast, tuple(config.languages)
            )
        declared = self.builder_configs[config.name]
        changed = [
            key
            for key in ("pair", "region", "contrast")
            if getattr(config, key) != getattr(declared, key)
        ]
        if changed:
            raise CultureProbeError(
                f"{', '.join(changed)}= cannot be set on {config.name}, which reads the released {declared.pair} "
                f"pair. For a pair of your own load {CUSTOM!r}, e.g. load_benchmark({CUSTOM!r}, data_dir=OUT, "
                "region='MAGHREB')."
            )
        return PairRequest(config.pair, PAIRS[config.pair][0], WEST, tuple(config.languages))

    def publication(self) -> Publication:
        """Every pair's card says where its rows were read from and how its languages' probing
        templates stand (vendored provisional transcriptions or mLAMA's own). A curated pair is
        published under its own name (`dlama_maghreb_west`), with its regions, languages and
        `curation.json` (endpoint and query parameters).
        """
        origin = self._locate().describe()
        if not self.custom:
            published = super().publication()
            return replace(published, about=(origin, *template_notes(published.languages)))
        source, paths, read = self._open_source()
        pair, _ = self._select(source, paths, read)
        suffix = ("_raw" if self.config.raw else "") + (
            CORRECTED_SUFFIX if self.config.corrected else ""
        )
        manifest = (*pair.folder, MANIFEST)
        text = "\n".join(read(manifest)) + "\n" if manifest in paths else None
        regions = " vs ".join(f"{culture} ({token})" for token, culture in pair.cultures)
        about = [
            f"A culture pair curated with culture_probe.curation: {regions}; labels in {', '.join(pair.languages)}.",
            origin,
        ]
        if text is None:
            about.append("Its folder has no curation.json: how it was queried is not recorded.")
        else:
            about += curation_summary(json.loads(text))
        about += template_notes(pair.languages)
        files = (("curation.json", text.encode("utf-8")),) if text is not None else ()
        return Publication(f"dlama_{pair.name}{suffix}", pair.languages, files, tuple(about))

    def _rows(self, split: str) -> Iterator[dict[str, Any]]:
        source, paths, read = self._open_source()
        pair, files = self._select(source, paths, read)
        rows = 0
        counts: Counter[tuple[str, str]] = Counter()
        for file in files:
            display = f"{source}/{'/'.join(file.parts)}"
            for number, record in parse_jsonl(read(file.parts), path=display):
                fact = self._fact(record, display, number)
                if fact is not None:
                    rows += 1
                    counts[file.language, pair.culture(file.region)] += 1
                    yield self._row(pair, file, fact)
        self._check_counts(pair, files, counts, source)
        if not rows:  # a curation whose labels were all missing writes empty files
            raise SourceFormatError(
                f"the {len(files)} fact files of {pair.name} in {'/'.join(pair.folder) or '.'} "
                f"hold no facts in {list(pair.languages)}",
                path=source,
            )

    def _check_counts(
        self, pair: Pair, files: list[FactFile], counts: Counter[tuple[str, str]], source: str
    ) -> None:
        """A released pair must hold the paper's facts per language and culture (Table 1); a
        mismatch names the numbers (`verify_counts=False` accepts data changed on purpose). A copy
        with only a few of the pair's files (a test fixture, a subset) is not the release: it is
        counted in the card, not checked; one with more than half of them but not all is a damaged
        copy, and an error names the missing files.
        """
        if self.custom or self.config.raw or self.config.corrected or not self.config.verify_counts:
            return
        expected_files = {
            (lang, pid, token)
            for lang in pair.languages
            for pid in PREDICATES
            for token in (pair.region, pair.contrast)
        }
        present = {(f.language, f.predicate, f.region) for f in files}
        if present != expected_files:
            missing = sorted(expected_files - present)
            if len(present) * 2 <= len(expected_files):
                self.tally(
                    f"a subset of the release ({len(present)} of {len(expected_files)} files): counts not "
                    "checked against the paper"
                )
                return
            names = ", ".join(
                f"{lang}/{pid}_general_{token}.jsonl" for lang, pid, token in missing[:6]
            )
            raise SourceFormatError(
                f"{len(missing)} of the {len(expected_files)} files of {self.config.pair} are "
                f"missing: {names}{' ...' if len(missing) > 6 else ''}. Restore them, or pass "
                "verify_counts=False (--data-option verify_counts=false) to load a copy changed on purpose.",
                path=source,
            )
        total, west = FACTS[self.config.pair]
        for language in pair.languages:
            got = {culture: n for (lang, culture), n in counts.items() if lang == language}
            expected = {
                culture: west if culture == "west" else total - west for _, culture in pair.cultures
            }
            if got != expected:
                raise SourceFormatError(
                    f"{self.config.pair} in {language} has {dict(sorted(got.items()))} facts per culture, but the "
                    f"release has {dict(sorted(expected.items()))} (the paper's Table 1). A file is missing, empty "
                    "or changed; pass verify_counts=False (--data-option verify_counts=false) to load a copy changed "
                    "on purpose (a new curation of the pair: or load it with dlama_custom).",
                    path=source,
                )

    def _select(
        self, source: str, paths: list[tuple[str, ...]], read: Reader
    ) -> tuple[Pair, list[FactFile]]:
        """The pair of this config and its files, ordered by language, predicate, culture (the
        contrast last).
        """
        kind = "dlama_raw" if self.config.raw else "dlama"
        found = find_fact_files(paths)
        pair = choose_pair(pair_folders(found, paths, read, source), self._request(), source)
        files = [f for f in found if f.kind == kind and f.pair_dir == pair.folder]
        skipped = [f for f in files if f.predicate in SKIPPED_PREDICATES]
        if skipped:
            self.tally(
                f"files skipped ({', '.join(SKIPPED_PREDICATES)}: not part of v1)", len(skipped)
            )
        if not files:
            name = self.config.name
            hint = (
                "pass the full DLAMA-v1 release"
                if not self.config.raw
                else (
                    f"load {name.removesuffix('_raw')} instead"
                    if name.endswith("_raw")
                    else "load it without raw=True"
                )
            )
            raise MissingDataError(
                f"{source} has no {kind}/ folder for {pair.name} (in {'/'.join(pair.folder) or '.'}); {hint}."
            )
        languages = sorted({f.language for f in files})
        for language in pair.languages:
            if language not in languages and (self.config.pair, language) in MISSING_LABELS:
                other = next(iter(set(languages) & set(pair.languages)), "en")
                raise MissingDataError(
                    f"No {language} facts: the copy read ({Path(source).name}) lacks "
                    f"{MISSING_LABELS[self.config.pair, language]}, which the release tarball holds: pass it with "
                    f"--data-dir, or probe the other language alone: --language {other} (in a suite, where "
                    f"--language is every config's: --data-option {self.config.name}.languages={other}; Python: "
                    f"load_benchmark({self.config.name!r}, languages=[...]) or run(..., language=...))."
                )
            if language not in languages:
                raise SourceFormatError(
                    f"no {kind}/{language}/ facts for {pair.name}; found languages {languages}. Expected "
                    f"<pair>/{kind}/<lang>/P<id>_general_<REGION>.jsonl, or pass languages= a subset of those.",
                    path=source,
                )
        order = {language: i for i, language in enumerate(pair.languages)}
        files = [f for f in files if f.language in order and f.predicate not in SKIPPED_PREDICATES]
        return pair, sorted(
            files,
            key=lambda f: (order[f.language], int(f.predicate[1:]), f.region == pair.contrast),
        )

    def _fact(self, record: dict[str, Any], path: str, line: int) -> dict[str, Any] | None:
        """One validated fact; None (counted) for facts that are skipped (a blank subject or
        object).
        """
        missing = [key for key in FIELDS if key not in record]
        if missing:
            raise SourceFormatError(
                f"missing field(s) {missing}; found {sorted(record)}", path=path, line=line
            )
        fact = dict(record)
        for key in ("obj_uri", "obj_label", "country"):
            if isinstance(fact[key], str):
                fact[key] = [fact[key]]
                self.tally(f"legacy scalar {key} wrapped into a list")
            if not isinstance(fact[key], list) or not all(
                isinstance(item, str) for item in fact[key]
            ):
                raise SourceFormatError(
                    f"{key} must be a list of strings, got {fact[key]!r}", path=path, line=line
                )
        if len(fact["obj_uri"]) != len(fact["obj_label"]):
            raise SourceFormatError(
                f"obj_uri has {len(fact['obj_uri'])} items but obj_label has {len(fact['obj_label'])}",
                path=path,
                line=line,
            )
        rank = re.fullmatch(r".+_(\d+)", str(fact["uuid"]))
        if not rank or not isinstance(fact["size"], int) or not isinstance(fact["sub_label"], str):
            raise SourceFormatError(
                f"expected uuid '<predicate>_<domain>_<REGION>_<rank>', an integer size and a string sub_label, got "
                f"uuid={fact['uuid']!r}, size={fact['size']!r}",
                path=path,
                line=line,
            )
        fact["rank"] = int(rank.group(1))
        if self.config.corrected:
            fact = self._normalised(fact)
        if not fact["sub_label"].strip() or not any(label.strip() for label in fact["obj_label"]):
            self.tally("facts skipped (empty sub_label or obj_label)")
            return None
        return fact

    def _normalised(self, fact: dict[str, Any]) -> dict[str, Any]:
        """Corrected variant: stripped NFC labels; empty and repeated labels dropped with their
        QID.
        """
        labels = [normalise(label) for label in fact["obj_label"]]
        keep = [i for i, label in enumerate(labels) if label and label not in labels[:i]]
        changed = labels != fact["obj_label"] or normalise(fact["sub_label"]) != fact["sub_label"]
        if changed:
            self.tally("corrected: facts with labels normalised")
        if len(keep) < len(labels):
            self.tally("corrected: empty or duplicate labels dropped", len(labels) - len(keep))
        return {
            **fact,
            "sub_label": normalise(fact["sub_label"]),
            "obj_uri": [fact["obj_uri"][i] for i in keep],
            "obj_label": [labels[i] for i in keep],
        }

    @staticmethod
    def _row(pair: Pair, file: FactFile, fact: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": f"{fact['uuid']}|{file.language}",
            "uuid": fact["uuid"],
            "pair": pair.name,
            "language": file.language,
            "predicate": file.predicate,
            "culture": pair.culture(file.region),
            "region": file.region,
            "rank": fact["rank"],
            "sub_uri": fact["sub_uri"],
            "sub_label": fact["sub_label"],
            "obj_uri": fact["obj_uri"],
            "obj_label": fact["obj_label"],
            "country": fact["country"],
            "size": fact["size"],
        }

    def _open_source(self) -> tuple[str, list[tuple[str, ...]], Reader]:
        """(name for errors, every path in the source, reader of one path's lines)."""
        source = self._locate()
        return _open_folder(Path(source.path)) if source.folder else _open_tarball(source.path)

    def _locate(self) -> RowsSource:
        """Where the rows are read from: `data_dir` (a folder or a tarball), `data_files`, the
        pinned URL (verified), or the mirror's unpacked copy of the release.
        """
        if self.config.data_dir and Path(self.config.data_dir).is_dir():
            return RowsSource(str(self.config.data_dir), folder=True)
        tarball = self._tarball()
        if tarball is None:
            try:
                tarball = str(fetch(TARBALL_URL))
            except MissingDataError as error:
                manual = manual_release()
                if manual is not None:
                    return RowsSource(str(manual), folder=True, mirror=True)
                raise MissingDataError(
                    f"{error} The DLAMA-v1 tarball is not in the local mirror (CULTURE_PROBE_MIRROR): pass "
                    "the release, an unpacked copy or the .tar.gz, with --data-dir (Python: data_dir=, or "
                    "data_files= for the .tar.gz)."
                ) from error
            verify_git_blob(tarball, TARBALL_BLOB_ID)
            return RowsSource(tarball, folder=False, blob_id=TARBALL_BLOB_ID)
        blob_id = git_blob_id(tarball)
        if blob_id != TARBALL_BLOB_ID:
            self.tally("local tarball that is not the pinned release (git blob id differs)")
        return RowsSource(tarball, folder=False, blob_id=blob_id)

    def _tarball(self) -> str | None:
        """The user's `.tar.gz`: `data_files=` (one file), or a `data_dir=` that is a file."""
        if self.config.data_dir:
            if not Path(self.config.data_dir).exists():
                raise MissingDataError(
                    f"data_dir (--data-dir) {self.config.data_dir} does not exist; pass an unpacked "
                    "DLAMA-v1 tarball folder or the dlama-v1.tar.gz file."
                )
            return str(self.config.data_dir)
        files = [f for split in (self.config.data_files or {}).values() for f in split]
        if len(files) > 1:
            raise SourceFormatError(
                f"expected one DLAMA-v1 .tar.gz in data_files, got {len(files)}",
                path=", ".join(map(str, files)),
            )
        return str(files[0]) if files else None


def curation_summary(manifest: dict[str, Any]) -> list[str]:
    """What a dataset card says of a curation run: the countries of each region, endpoint, options,
    deviations.
    """
    config = manifest.get("config", {})
    lines = []
    for key in ("region", "contrast"):
        region = config.get(key, {})
        where = ", ".join(region.get("countries") or ()) or region.get("condition") or "?"
        lines.append(
            f"{key.title()} {region.get('name')} (token {region.get('token')}): countries {where}."
        )
    lines.append(
        f"Queried from {manifest.get('endpoint')} (article sizes: {manifest.get('sizes')}) by culture_probe "
        f"{manifest.get('culture_probe_version')}; predicates "
        f"{', '.join(config.get('predicates') or ()) or 'all 20'}, top {config.get('top')} subjects; "
        "every parameter is in curation.json beside the rows."
    )
    lines += [f"Deviation from DLAMA's code: {d}" for d in manifest.get("deviations", ())]
    return lines


@dataclass(frozen=True)
class RowsSource:
    """Where a config's rows are read from, as its dataset card says it: a folder (the user's, or
    the unpacked release in the mirror), or a `.tar.gz` with its git blob id (the pinned release's,
    or another).
    """

    path: str
    folder: bool
    blob_id: str = ""
    mirror: bool = False

    def describe(self) -> str:
        """The card's line: the folder, or the tarball with its checksums (the pinned URL when it is
        the release).
        """
        unpinned = "not from the pinned release tarball (no checksum ties a folder to it)"
        if self.mirror:
            where = "/".join(MANUAL_RELEASE)
            return f"Rows read from the unpacked release in a local mirror (CULTURE_PROBE_MIRROR, {where}), {unpinned}."
        if self.folder:
            return f"Rows read from the local folder `{Path(self.path).name}`, {unpinned}."
        digest = f"sha256 {sha256_of(self.path)}"
        if self.blob_id == TARBALL_BLOB_ID:
            return f"Rows read from the pinned release tarball {TARBALL_URL} (git blob id {self.blob_id}, {digest})."
        return (
            f"Rows read from the local tarball `{Path(self.path).name}`, which is not the pinned release "
            f"{TARBALL_URL} (git blob id {self.blob_id}, not {TARBALL_BLOB_ID}; {digest})."
        )


def template_notes(languages: Sequence[str]) -> tuple[str, ...]:
    """What a card says of the probing templates of `languages` (the protocol applies them; they are
    no column of the rows): per language, mLAMA's own strings or a provisional transcription, from
    the vendored file's record.
    """
    vendored = json.loads(VENDORED_TEMPLATES.read_text(encoding="utf-8"))
    parts = []
    for language in languages:
        entry = vendored.get(language)
        if not isinstance(entry, dict):
            parts.append(f"{language}: none vendored (a run needs --option templates=)")
        elif entry.get("verified"):
            parts.append(f"{language}: {entry.get('source')}, exact")
        else:
            notes = "; ".join(
                f"{predicate} {note}" for predicate, note in entry.get("notes", {}).items()
            )
            parts.append(
                f"{language}: provisional, {entry.get('source')}, not the released mLAMA 1.1 file"
                + (f" ({notes})" if notes else "")
            )
    provisional = any("provisional" in part for part in parts)
    fix = (
        " Runs can use the released ones with --option templates= an mLAMA 1.1 folder."
        if provisional
        else ""
    )
    return (
        f"Probing templates (applied by culture_probe's protocol, not stored in the rows): {'; '.join(parts)}.{fix}",
    )


def manual_release() -> Path | None:
    """The unpacked release in the mirror (`$CULTURE_PROBE_MIRROR/manual/dlama/dlama-v1`), when
    there is one.
    """
    root = mirror_root()
    folder = Path(root, *MANUAL_RELEASE) if root else None
    return folder if folder is not None and folder.is_dir() else None


def _open_folder(root: Path) -> tuple[str, list[tuple[str, ...]], Reader]:
    files = [*root.rglob("*.jsonl"), *root.rglob(MANIFEST)]
    paths = sorted(p.relative_to(root).parts for p in files if p.is_file())

    def read(parts: tuple[str, ...]) -> list[str]:
        return read_lines(root.joinpath(*parts))

    return str(root), paths, read


def _open_tarball(path: str) -> tuple[str, list[tuple[str, ...]], Reader]:
    """Every member of the archive read into memory once (the whole release is a few tens of MB of
    text).
    """
    contents: dict[tuple[str, ...], bytes] = {}
    try:
        with tarfile.open(path, "r:*") as archive:
            for member in archive:
                if member.isfile() and member.name.split("/")[-1].endswith((".jsonl", MANIFEST)):
                    parts = tuple(p for p in member.name.split("/") if p not in ("", "."))
                    stream = archive.extractfile(member)
                    assert stream is not None  # a regular member always has a stream
                    contents[parts] = stream.read()
    except (tarfile.TarError, EOFError, OSError) as error:
        raise SourceFormatError(f"not a readable .tar.gz archive ({error})", path=path) from error

    def read(parts: tuple[str, ...]) -> list[str]:
        return decode(contents[parts], path=f"{path}/{'/'.join(parts)}")

    return path, sorted(contents), read


BUILDER = Dlama
