"""DLAMA-v1 on fixture tarballs written in the exact release layout (spec dlama.md 2.2-2.5)."""

from __future__ import annotations

import io
import json
import tarfile
import unicodedata
from pathlib import Path

import pytest

from culture_probe.benchmarks.dlama import data as dlama
from culture_probe.benchmarks.dlama.task import candidate_sets, label_collisions
from culture_probe.data.registry import list_benchmarks, load_benchmark
from culture_probe.errors import (
    CultureProbeError,
    MissingDataError,
    SourceFormatError,
    UnknownNameError,
)

# (predicate, region) -> facts; each fact: uuid suffix, sub_uri, {lang: sub_label}, obj_uri, {lang:
# obj_label}. Cases of spec 2.5: two objects (Egypt), one label shared by two QIDs (Paris), a legacy
# scalar obj_label (Morocco, en), an empty sub_label (ar only: skipped and counted), identical uuids
# across ar and en.
FACTS = {
    ("P30", "ARAB_REGION"): [
        (
            0,
            "Q79",
            {"en": "Egypt", "ar": "مصر"},
            ["Q15", "Q48"],
            {"en": ["Africa", "Asia"], "ar": ["أفريقيا", "آسيا"]},
        ),
        (1, "Q1028", {"en": "Morocco", "ar": "المغرب"}, "Q15", {"en": "Africa", "ar": ["أفريقيا"]}),
        (2, "Q842", {"en": "Oman", "ar": ""}, ["Q48"], {"en": ["Asia"], "ar": ["آسيا"]}),
    ],
    ("P30", "WESTERN_COUNTRIES"): [
        (0, "Q142", {"en": "France", "ar": "فرنسا"}, ["Q46"], {"en": ["Europe"], "ar": ["أوروبا"]}),
        (
            1,
            "Q16",
            {"en": "Canada", "ar": "كندا"},
            ["Q49"],
            {"en": ["North America"], "ar": ["أمريكا الشمالية"]},
        ),
    ],
    ("P36", "ARAB_REGION"): [
        (0, "Q79", {"en": "Egypt", "ar": "مصر"}, ["Q85"], {"en": ["Cairo"], "ar": ["القاهرة"]}),
    ],
    ("P36", "WESTERN_COUNTRIES"): [
        (0, "Q142", {"en": "France", "ar": "فرنسا"}, ["Q90"], {"en": ["Paris"], "ar": ["باريس"]}),
        (
            1,
            "Q111",
            {"en": "Lamar County", "ar": "مقاطعة لامار"},
            ["Q830149"],
            {"en": ["Paris"], "ar": ["باريس"]},
        ),
    ],
    ("P527", "ARAB_REGION"): [  # not part of v1: must be skipped
        (0, "Q79", {"en": "Egypt", "ar": "مصر"}, ["Q1"], {"en": ["x"], "ar": ["x"]}),
    ],
}
EXPECTED_ROWS = 15  # en: 3 + 2 + 1 + 2 = 8 facts; ar: 8 - 1 (empty sub_label) = 7; P527 excluded


def fact_lines(predicate: str, region: str, language: str) -> list[dict]:
    lines = []
    for rank, sub_uri, sub_label, obj_uri, obj_label in FACTS[predicate, region]:
        lines.append(
            {
                "sub_uri": sub_uri,
                "obj_uri": obj_uri,
                "sub_label": sub_label[language],
                "obj_label": obj_label[language],
                "country": ["Q79"] if region == "ARAB_REGION" else ["Q142"],
                "size": 1000 - rank,
                "uuid": f"{predicate}_general_{region}_{rank}",
            }
        )
    return lines


def release_files(pair_dir: str = "arab-west", prefix: str = "") -> dict[str, bytes]:
    """{path inside the tarball: content} in the v1 layout."""
    files = {f"{prefix}README.md": b"DLAMA-v1\n"}
    for predicate, region in FACTS:
        for language in ("ar", "en"):
            name = f"{prefix}{pair_dir}/dlama/{language}/{predicate}_general_{region}.jsonl"
            lines = fact_lines(predicate, region, language)
            files[name] = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines).encode()
    return files


def write_tarball(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))
    return path


def write_folder(root: Path, files: dict[str, bytes]) -> Path:
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)
    return root


@pytest.fixture
def tarball(tmp_path: Path) -> Path:
    return write_tarball(tmp_path / "dlama-v1.tar.gz", release_files())


def test_fixture_tarball_rows_and_derived_fields(tarball: Path) -> None:
    split = load_benchmark("dlama_arab_west", data_files=str(tarball))["test"]
    assert split.num_rows == EXPECTED_ROWS
    rows = {row["id"]: row for row in split}
    assert len(rows) == EXPECTED_ROWS
    assert rows["P30_general_ARAB_REGION_0|ar"] == {
        "id": "P30_general_ARAB_REGION_0|ar",
        "uuid": "P30_general_ARAB_REGION_0",
        "pair": "arab_west",
        "language": "ar",
        "predicate": "P30",
        "culture": "arab",
        "region": "ARAB_REGION",
        "rank": 0,
        "sub_uri": "Q79",
        "sub_label": "مصر",
        "obj_uri": ["Q15", "Q48"],
        "obj_label": ["أفريقيا", "آسيا"],
        "country": ["Q79"],
        "size": 1000,
    }  # no template: templates are the protocol's declared resource, not a column of the data
    west = rows["P36_general_WESTERN_COUNTRIES_1|en"]
    assert (west["culture"], west["predicate"], west["rank"]) == ("west", "P36", 1)
    # the legacy scalar obj_uri/obj_label is wrapped into a list
    assert rows["P30_general_ARAB_REGION_1|en"]["obj_label"] == ["Africa"]
    assert rows["P30_general_ARAB_REGION_1|en"]["obj_uri"] == ["Q15"]
    # the empty ar sub_label is skipped (and counted), P527 is not part of v1
    assert "P30_general_ARAB_REGION_2|ar" not in rows and "P30_general_ARAB_REGION_2|en" in rows
    assert not any(row["predicate"] == "P527" for row in split)
    assert "facts skipped (empty sub_label or obj_label): 1" in split.info.description
    # same facts in both languages (minus the skipped one), languages in config order (local first)
    uuids = {lang: {r["uuid"] for r in split if r["language"] == lang} for lang in ("ar", "en")}
    assert uuids["en"] - uuids["ar"] == {"P30_general_ARAB_REGION_2"}
    assert split["language"] == ["ar"] * 7 + ["en"] * 8


def test_candidates_follow_the_spec_worked_example(tarball: Path) -> None:
    split = load_benchmark("dlama_arab_west", data_files=str(tarball))["test"]
    # spec 5.3: both cultures' labels, sorted by code point; two QIDs labelled Paris are one
    # candidate
    sets = candidate_sets(split)
    assert sets["en", "P30"] == ("Africa", "Asia", "Europe", "North America")
    assert sets["en", "P36"] == ("Cairo", "Paris")
    # Paris: Q90 and Q830149 in both languages; Africa is Q15 in both facts, so P30 has none
    assert label_collisions(split) == {"ar|P36": 1, "en|P36": 1}


def test_blank_labels_are_not_candidates_nor_collisions() -> None:
    # spec 2.3: a blank label is no object (a fact left without one is skipped); labels are
    # otherwise kept as stored
    rows = [
        {
            "language": "en",
            "predicate": "P30",
            "obj_uri": ["Q15", "Q1"],
            "obj_label": ["Africa", " "],
        },
        {"language": "en", "predicate": "P30", "obj_uri": ["Q2", "Q3"], "obj_label": [" ", ""]},
        {"language": "en", "predicate": "P30", "obj_uri": ["Q48"], "obj_label": [" Asia"]},
    ]
    assert candidate_sets(rows) == {("en", "P30"): (" Asia", "Africa")}
    assert label_collisions(rows) == {}


def test_unpacked_folder_with_extra_leading_dir_and_renamed_pair_folder(
    tmp_path: Path, tarball: Path
) -> None:
    # the pair comes from the region tokens in the file names, not from the folder names
    root = write_folder(
        tmp_path / "unpacked", release_files(pair_dir="whatever", prefix="dlama-v1/")
    )
    from_folder = load_benchmark("dlama_arab_west", data_dir=root)["test"]
    from_tarball = load_benchmark("dlama_arab_west", data_files=str(tarball))["test"]
    assert from_folder.to_list() == from_tarball.to_list()


def test_languages_restrict_rows(tarball: Path) -> None:
    split = load_benchmark("dlama_arab_west", data_files=str(tarball), languages=["en"])["test"]
    assert set(split["language"]) == {"en"} and split.num_rows == 8


def test_other_pairs_are_not_mixed_in(tmp_path: Path) -> None:
    files = release_files()
    asia = {
        name.replace("ARAB_REGION", "ASIA")
        .replace("arab-west", "asia-west")
        .replace("/ar/", "/ko/"): content
        for name, content in files.items()
        if name.endswith(".jsonl")
    }
    tarball = write_tarball(tmp_path / "two.tar.gz", {**files, **asia})
    split = load_benchmark("dlama_asia_west", data_files=str(tarball))["test"]
    assert set(split["pair"]) == {"asia_west"} and set(split["culture"]) == {"asia", "west"}
    assert set(split["language"]) == {"ko", "en"} and split.num_rows == EXPECTED_ROWS
    assert (
        load_benchmark("dlama_arab_west", data_files=str(tarball))["test"].num_rows == EXPECTED_ROWS
    )


def test_missing_language_folder_is_an_error(tmp_path: Path) -> None:
    files = {k: v for k, v in release_files().items() if "/ar/" not in k}
    tarball = write_tarball(tmp_path / "en_only.tar.gz", files)
    with pytest.raises(
        SourceFormatError, match=r"no dlama/ar/ facts for arab_west; found languages \['en'\]"
    ):
        load_benchmark("dlama_arab_west", data_files=str(tarball))


def test_corrected_variant_normalises_labels(tmp_path: Path) -> None:
    files = release_files()
    name = "arab-west/dlama/en/P30_general_WESTERN_COUNTRIES.jsonl"
    decomposed = unicodedata.normalize("NFD", "Réunion")
    lines = fact_lines("P30", "WESTERN_COUNTRIES", "en")
    lines[0]["obj_uri"], lines[0]["obj_label"] = (
        ["Q46", "Q999", "Q17"],
        ["Europe ", "Europe", decomposed],
    )
    files[name] = "".join(json.dumps(x) + "\n" for x in lines).encode()
    tarball = write_tarball(tmp_path / "messy.tar.gz", files)
    faithful = {
        r["id"]: r for r in load_benchmark("dlama_arab_west", data_files=str(tarball))["test"]
    }
    corrected_split = load_benchmark("dlama_arab_west", data_files=str(tarball), corrected=True)[
        "test"
    ]
    corrected = {r["id"]: r for r in corrected_split}
    key = "P30_general_WESTERN_COUNTRIES_0|en"
    assert faithful[key]["obj_label"] == ["Europe ", "Europe", decomposed]
    assert corrected[key]["obj_label"] == ["Europe", "Réunion"] and corrected[key]["obj_uri"] == [
        "Q46",
        "Q17",
    ]
    assert "corrected: empty or duplicate labels dropped: 1" in corrected_split.info.description


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ("{not json", r"P30_general_ARAB_REGION\.jsonl:2: invalid JSON"),
        ('{"sub_uri": "Q1"}', r"P30_general_ARAB_REGION\.jsonl:2: missing field\(s\) \['obj_uri'"),
        (
            json.dumps(
                {
                    "sub_uri": "Q1",
                    "obj_uri": ["Q2", "Q3"],
                    "sub_label": "a",
                    "obj_label": ["b"],
                    "country": [],
                    "size": 1,
                    "uuid": "P30_general_ARAB_REGION_9",
                }
            ),
            r"jsonl:2: obj_uri has 2 items but obj_label has 1",
        ),
        (
            json.dumps(
                {
                    "sub_uri": "Q1",
                    "obj_uri": ["Q2"],
                    "sub_label": "a",
                    "obj_label": ["b"],
                    "country": [],
                    "size": "big",
                    "uuid": "P30_general_ARAB_REGION_9",
                }
            ),
            r"jsonl:2: expected uuid .* an integer size",
        ),
    ],
)
def test_malformed_fact_names_file_and_line(tmp_path: Path, line: str, match: str) -> None:
    files = release_files()
    name = "arab-west/dlama/en/P30_general_ARAB_REGION.jsonl"
    files[name] = files[name].split(b"\n")[0] + b"\n" + line.encode() + b"\n"
    tarball = write_tarball(tmp_path / "bad.tar.gz", files)
    with pytest.raises(SourceFormatError, match=match):
        load_benchmark("dlama_arab_west", data_files=str(tarball))


def test_not_a_tarball(tmp_path: Path) -> None:
    bogus = tmp_path / "dlama-v1.tar.gz"
    bogus.write_text("not an archive")
    with pytest.raises(
        SourceFormatError, match=r"dlama-v1\.tar\.gz: not a readable \.tar\.gz archive"
    ):
        load_benchmark("dlama_arab_west", data_files=str(bogus))


def test_folder_with_two_non_western_regions(tmp_path: Path) -> None:
    files = release_files()
    files["arab-west/dlama/en/P17_general_ASIA.jsonl"] = b""
    match = (
        r"folder arab-west \(ARAB_REGION, ASIA, WESTERN_COUNTRIES\) must hold the files of one pair"
    )
    with pytest.raises(SourceFormatError, match=match):
        load_benchmark(
            "dlama_arab_west", data_files=str(write_tarball(tmp_path / "x.tar.gz", files))
        )


def test_raw_config_without_raw_folder(tarball: Path) -> None:
    match = r"no dlama_raw/ folder for arab_west \(in arab-west\); load dlama_arab_west instead"
    with pytest.raises(MissingDataError, match=match):
        load_benchmark("dlama_arab_west_raw", data_files=str(tarball))


def test_raw_config_reads_dlama_raw(tmp_path: Path) -> None:
    files = release_files()
    raw = {k.replace("/dlama/", "/dlama_raw/"): v for k, v in files.items() if "/P30_" in k}
    tarball = write_tarball(tmp_path / "r.tar.gz", {**files, **raw})
    split = load_benchmark("dlama_arab_west_raw", data_files=str(tarball))
    assert set(split["test"]["predicate"]) == {"P30"} and split["test"].num_rows == 9


def test_pinned_url_follows_the_mirror_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CULTURE_PROBE_MIRROR", str(tmp_path / "mirror"))
    expected = (
        tmp_path
        / "mirror"
        / "raw.githubusercontent.com/AMR-KELEG/DLAMA"
        / dlama.TARBALL_URL.split("DLAMA/")[1]
    )
    with pytest.raises(
        MissingDataError,
        match=rf"expected the file {expected}.*with --data-dir \(Python: data_dir=",
    ):
        load_benchmark("dlama_arab_west")
    # a mirrored file that is not the pinned release fails its git blob id check
    expected.parent.mkdir(parents=True)
    write_tarball(expected, release_files())
    with pytest.raises(
        SourceFormatError, match=r"git blob id [0-9a-f]{40} is not the pinned 49f09ec2e66f"
    ):
        load_benchmark("dlama_arab_west")


def test_english_templates_are_the_mlama_strings() -> None:
    table, files = dlama.read_templates()
    assert set(table["en"]) == set(dlama.PREDICATES) and files == [dlama.VENDORED_TEMPLATES]
    assert table["en"]["P27"]["template"] == "[X] is [Y] citizen ."
    assert table["en"]["P1412"]["template"] == "[X] used to communicate in [Y] ."
    assert table["en"]["P27"]["verified"] and not table["ko"]["P27"]["verified"]
    assert all(set(table[lang]) == set(dlama.PREDICATES) for lang in ("ar", "ko", "es"))


def test_mlama_templates_override_vendored_strings(tmp_path: Path) -> None:
    (tmp_path / "mlama1.1" / "ar").mkdir(parents=True)
    user = tmp_path / "mlama1.1" / "ar" / "templates.jsonl"
    user.write_text(
        json.dumps({"relation": "P30", "template": "[X] يقع في [Y] ."}) + "\n", encoding="utf-8"
    )
    table, files = dlama.read_templates(path=str(tmp_path / "mlama1.1"))
    assert (
        table["ar"]["P30"] == {"template": "[X] يقع في [Y] .", "verified": True}
        and files[-1] == user
    )
    # still the vendored one
    assert table["ar"]["P36"] == {"template": "عاصمة [X] هي [Y].", "verified": False}
    overrides = tmp_path / "mine.json"
    overrides.write_text(json.dumps({"fr": {"P30": "[X] est situé en [Y] ."}}), encoding="utf-8")
    assert (
        dlama.read_templates(path=str(overrides))[0]["fr"]["P30"]["template"]
        == "[X] est situé en [Y] ."
    )
    with pytest.raises(SourceFormatError, match=r"mine\.json.*expected a JSON object"):
        overrides.write_text("[1]", encoding="utf-8")
        dlama.read_templates(path=str(overrides))
    with pytest.raises(MissingDataError, match="no such file or folder"):
        dlama.read_templates(path=str(tmp_path / "nowhere"))


def test_configs_and_spec_row_counts() -> None:
    entries = {e.name: e for e in list_benchmarks() if e.benchmark == "dlama"}
    assert {
        name: entries[name].rows
        for name in ("dlama_arab_west", "dlama_asia_west", "dlama_south_america_west")
    } == {"dlama_arab_west": 49_070, "dlama_asia_west": 54_134, "dlama_south_america_west": 53_314}
    assert entries["dlama_asia_west"].languages == ("ko", "en")
    assert {"dlama_arab_west_corrected", "dlama_arab_west_raw"} <= set(entries)


def test_unknown_option_lists_valid_ones(tarball: Path) -> None:
    match = r"Unknown option of dlama_arab_west 'language'.*Did you mean 'languages'"
    with pytest.raises(UnknownNameError, match=match):
        load_benchmark("dlama_arab_west", data_files=str(tarball), language=["en"])


# ---- pairs curated with culture_probe.curation: any region token, read by dlama_custom
# ----------------------------

MAGHREB_MANIFEST = {  # the fields culture_probe.curation writes into <pair>/curation.json
    "framework": "dlama",
    "pair": "maghreb_west",
    "config": {
        "region": {"name": "maghreb", "token": "MAGHREB"},
        "contrast": {"name": "west", "token": "WESTERN_COUNTRIES"},
        "languages": ["en", "ar"],
    },
}


def custom_pair(
    token: str = "MAGHREB",
    pair_dir: str = "maghreb-west",
    manifest: dict | None = None,
) -> dict[str, bytes]:
    """The fixture facts as a curated pair: the Arab half renamed to `token`, plus its manifest if
    given.
    """
    files = {
        name.replace("ARAB_REGION", token).replace("arab-west", pair_dir): content.replace(
            b"ARAB_REGION", token.encode()
        )
        for name, content in release_files().items()
        if name.endswith(".jsonl")
    }
    if manifest is not None:
        files[f"{pair_dir}/curation.json"] = json.dumps(manifest).encode()
    return files


@pytest.fixture
def release_and_custom(tmp_path: Path) -> Path:
    """One data_dir with the release, a curated Maghreb pair and a half-written West-only folder."""
    partial = {"partial/dlama/en/P30_general_WESTERN_COUNTRIES.jsonl": b""}
    return write_folder(
        tmp_path / "out", {**release_files(), **custom_pair(manifest=MAGHREB_MANIFEST), **partial}
    )


def test_released_pair_ignores_folders_of_other_pairs(release_and_custom: Path) -> None:
    split = load_benchmark("dlama_arab_west", data_dir=release_and_custom)["test"]
    assert split.num_rows == EXPECTED_ROWS
    assert set(split["pair"]) == {"arab_west"} and set(split["region"]) == {
        "ARAB_REGION",
        "WESTERN_COUNTRIES",
    }


def test_custom_pair_from_its_manifest(release_and_custom: Path, tmp_path: Path) -> None:
    split = load_benchmark("dlama_custom", data_dir=release_and_custom)["test"]
    assert split.num_rows == EXPECTED_ROWS
    assert set(split["pair"]) == {"maghreb_west"} and set(split["culture"]) == {"maghreb", "west"}
    assert split["language"] == ["en"] * 8 + ["ar"] * 7  # the manifest's language order
    row = {r["id"]: r for r in split}["P30_general_MAGHREB_0|ar"]
    assert (row["region"], row["culture"], row["sub_label"], row["obj_label"]) == (
        "MAGHREB",
        "maghreb",
        "مصر",
        ["أفريقيا", "آسيا"],
    )
    assert candidate_sets(split)["en", "P30"] == ("Africa", "Asia", "Europe", "North America")
    tarball = write_tarball(
        tmp_path / "c.tar.gz", {**release_files(), **custom_pair(manifest=MAGHREB_MANIFEST)}
    )
    assert (
        load_benchmark("dlama_custom", data_files=str(tarball))["test"].to_list() == split.to_list()
    )


def test_custom_pair_options_pick_and_restrict(release_and_custom: Path) -> None:
    split = load_benchmark(
        "dlama_custom",
        data_dir=release_and_custom,
        pair="maghreb-west",
        region="MAGHREB",
        languages=("ar",),
    )["test"]
    assert (
        set(split["language"]) == {"ar"}
        and split.num_rows == 7
        and set(split["pair"]) == {"maghreb_west"}
    )
    # a released pair's region token picks its folder through dlama_custom too
    arab = load_benchmark("dlama_custom", data_dir=release_and_custom, region="ARAB_REGION")["test"]
    assert set(arab["culture"]) == {"arab", "west"} and arab.num_rows == EXPECTED_ROWS


def test_custom_pair_without_manifest_is_named_from_its_tokens(tmp_path: Path) -> None:
    root = write_folder(tmp_path / "bare", custom_pair(token="EAST_AFRICA", pair_dir="anything"))
    split = load_benchmark(
        "dlama_custom",
        data_files=str(
            write_tarball(
                tmp_path / "p.tar.gz", custom_pair(token="EAST_AFRICA", pair_dir="anything")
            )
        ),
    )["test"]
    assert set(split["pair"]) == {"east_africa_west"} and set(split["culture"]) == {
        "east_africa",
        "west",
    }
    assert split["language"] == ["ar"] * 7 + ["en"] * 8  # sorted, English last
    assert load_benchmark("dlama_custom", data_dir=root)["test"].to_list() == split.to_list()


def test_custom_pair_corrected_and_raw(release_and_custom: Path) -> None:
    corrected = load_benchmark("dlama_custom", data_dir=release_and_custom, corrected=True)["test"]
    assert corrected.num_rows == EXPECTED_ROWS and set(corrected["pair"]) == {"maghreb_west"}
    with pytest.raises(
        MissingDataError,
        match=r"no dlama_raw/ folder for maghreb_west \(in maghreb-west\); load it "
        r"without raw=True",
    ):
        load_benchmark("dlama_custom", data_dir=release_and_custom, raw=True)


@pytest.mark.parametrize(
    ("name", "options", "error", "match"),
    [
        (
            "dlama_custom",
            {"region": "maghreb"},
            CultureProbeError,
            r"region= must be a region token as written in the file names .* got 'maghreb'\. Example: region='MAGHREB'",
        ),
        (
            "dlama_custom",
            {"region": "MAGHREB", "contrast": "MAGHREB"},
            CultureProbeError,
            r"must differ",
        ),
        (
            "dlama_custom",
            {"pair": "Maghreb West!"},
            CultureProbeError,
            r"pair= must name a pair like 'maghreb_west'",
        ),
        (
            "dlama_custom",
            {"languages": "ar"},
            CultureProbeError,
            r"languages= must be a list .* got 'ar'",
        ),
        (
            "dlama_custom",
            {"region": "LEVANT"},
            MissingDataError,
            r"no folder for dlama_custom \(files P<id>_general_LEVANT\.jsonl\); found pair folders "
            r"\[.*maghreb-west \(MAGHREB, WESTERN_COUNTRIES\).*\]; pass region=",
        ),
        ("dlama_custom", {"pair": "levant_west"}, MissingDataError, r"no folder for levant_west"),
        (
            "dlama_asia_west",
            {},
            MissingDataError,
            r"no folder for asia_west \(files P<id>_general_ASIA\.jsonl\); "
            r"found pair folders .*; pass the full DLAMA-v1 release, or load dlama_custom",
        ),
        (
            "dlama_arab_west",
            {"region": "MAGHREB"},
            CultureProbeError,
            r"region= cannot be set on dlama_arab_west, which reads the released arab_west pair\. For a pair of your "
            r"own load 'dlama_custom'",
        ),
        (
            "dlama_custom",
            {"regions": "MAGHREB"},
            UnknownNameError,
            r"option of dlama_custom 'regions'.*'region'",
        ),
    ],
)
def test_bad_custom_options(
    release_and_custom: Path, name: str, options: dict, error: type, match: str
) -> None:
    with pytest.raises(error, match=match):
        load_benchmark(name, data_dir=release_and_custom, **options)


def test_two_custom_pairs_need_a_choice(tmp_path: Path) -> None:
    root = write_folder(
        tmp_path / "two", {**custom_pair(), **custom_pair(token="LEVANT", pair_dir="levant-west")}
    )
    with pytest.raises(
        CultureProbeError,
        match=r"holds 2 folders that fit dlama_custom \(a folder with a region token "
        r"of its own\).*Pass region= and contrast=",
    ):
        load_benchmark("dlama_custom", data_dir=root)
    levant = load_benchmark("dlama_custom", data_dir=root, pair="levant-west")["test"]
    assert (
        set(levant["region"]) == {"LEVANT", "WESTERN_COUNTRIES"}
        and levant.num_rows == EXPECTED_ROWS
    )


def test_two_copies_of_a_released_pair_are_an_error(tmp_path: Path) -> None:
    root = write_folder(
        tmp_path / "c", {**release_files(), **custom_pair(token="ARAB_REGION", pair_dir="mine")}
    )
    with pytest.raises(
        CultureProbeError,
        match=r"holds 2 folders that fit arab_west: \['arab-west \(ARAB_REGION, "
        r"WESTERN_COUNTRIES\)', 'mine \(ARAB_REGION, WESTERN_COUNTRIES\)'\]\. Load a curated copy",
    ):
        load_benchmark("dlama_arab_west", data_dir=root)
    assert (
        load_benchmark("dlama_custom", data_dir=root, pair="mine")["test"].num_rows == EXPECTED_ROWS
    )


def test_pair_without_facts_is_an_error(tmp_path: Path) -> None:
    # a curation whose labels were all missing writes empty files: say so instead of an empty split.
    # 8 files: P30 and P36, two regions, two languages (P527 is not part of v1)
    root = write_folder(
        tmp_path / "e",
        {name: b"" for name in custom_pair(manifest=MAGHREB_MANIFEST) if name.endswith(".jsonl")},
    )
    with pytest.raises(
        SourceFormatError,
        match=r"the 8 fact files of maghreb_west in maghreb-west hold no facts in "
        r"\['ar', 'en'\]",
    ):
        load_benchmark("dlama_custom", data_dir=root)


def test_malformed_manifest_names_the_file(tmp_path: Path) -> None:
    broken = {**MAGHREB_MANIFEST, "config": {"languages": ["ar"]}}
    root = write_folder(tmp_path / "m", custom_pair(manifest=broken))
    with pytest.raises(
        SourceFormatError, match=r"maghreb-west/curation\.json: not a DLAMA curation manifest"
    ):
        load_benchmark("dlama_custom", data_dir=root)


# spec 2.4: facts per culture; every fact appears once per language of its pair
RELEASE_FACTS = {
    "arab_west": {"arab": 10_946, "west": 13_589},
    "asia_west": {"asia": 13_479, "west": 13_588},
    "south_america_west": {"south_america": 13_071, "west": 13_586},
}


@pytest.mark.slow
@pytest.mark.parametrize("pair", list(RELEASE_FACTS))
def test_the_release_in_the_mirror_has_the_papers_counts(mirror: Path, pair: str) -> None:
    """The unpacked release (manual/dlama/dlama-v1) is read without data_dir; asia-west has English
    only.
    """
    languages = [
        lang for lang in (dlama.PAIRS[pair][1], "en") if (pair, lang) not in dlama.MISSING_LABELS
    ]
    split = load_benchmark(f"dlama_{pair}", languages=languages)["test"]
    assert split.num_rows == len(languages) * sum(RELEASE_FACTS[pair].values())
    for language in languages:
        rows = [
            r for r in split.select_columns(["language", "culture"]) if r["language"] == language
        ]
        counts = {
            culture: sum(r["culture"] == culture for r in rows) for culture in RELEASE_FACTS[pair]
        }
        assert counts == RELEASE_FACTS[pair]
    by_language = {
        lang: set(split.filter(lambda r, lang=lang: r["language"] == lang)["uuid"])
        for lang in set(split["language"])
    }
    assert len({frozenset(uuids) for uuids in by_language.values()}) == 1


def test_asia_west_without_korean_labels_says_so_and_runs_in_english(mirror: Path) -> None:
    with pytest.raises(
        MissingDataError,
        match=r"No ko facts: the copy read \(dlama-v1\) lacks the Korean labels of asia-west .*, which the release "
        r"tarball holds: pass it with --data-dir, or probe the other language alone: --language en",
    ):
        load_benchmark("dlama_asia_west")
    description = next(e.description for e in list_benchmarks() if e.name == "dlama_asia_west")
    assert (
        "Note: the release tarball holds both languages; a copy that lacks the Korean labels of asia-west "
        "(asia-west/dlama/ko/) runs in English (--language en)." in description
    )
    assert "mirror" not in description  # what `list` says holds for the data a user has


def test_a_changed_release_fails_its_counts_unless_told(mirror: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "dlama-v1"
    shutil.copytree(mirror / "manual" / "dlama" / "dlama-v1" / "arab-west", copy / "arab-west")
    emptied = copy / "arab-west" / "dlama" / "en" / "P36_general_ARAB_REGION.jsonl"
    emptied.write_text("", encoding="utf-8")
    with pytest.raises(
        SourceFormatError,
        match=r"arab_west in en has \{'arab': 10924, 'west': 13589\} facts per "
        r"culture, but the release has \{'arab': 10946, 'west': 13589\}",
    ):
        load_benchmark("dlama_arab_west", data_dir=str(copy))
    changed = load_benchmark("dlama_arab_west", data_dir=str(copy), verify_counts=False)["test"]
    assert changed.num_rows == 2 * 24_535 - 22
    emptied.unlink()
    with pytest.raises(
        SourceFormatError,
        match=r"1 of the 80 files of arab_west are missing: "
        r"en/P36_general_ARAB_REGION\.jsonl",
    ):
        load_benchmark("dlama_arab_west", data_dir=str(copy))


@pytest.mark.slow
@pytest.mark.parametrize("pair", list(RELEASE_FACTS))
def test_real_release_counts(mirror: Path, pair: str) -> None:
    tarball = (
        mirror / "raw.githubusercontent.com/AMR-KELEG/DLAMA" / dlama.TARBALL_URL.split("DLAMA/")[1]
    )
    if not tarball.is_file():
        pytest.skip(
            f"the DLAMA-v1 tarball is not in the mirror (expected {tarball}); counts checked on fixtures only"
        )
    split = load_benchmark(f"dlama_{pair}")["test"]
    assert split.num_rows == dlama.ROWS[pair]
    for language in dlama.PAIRS[pair][1], "en":
        rows = [
            r for r in split.select_columns(["language", "culture"]) if r["language"] == language
        ]
        counts = {
            culture: sum(r["culture"] == culture for r in rows) for culture in RELEASE_FACTS[pair]
        }
        assert counts == RELEASE_FACTS[pair]
    by_language = {
        lang: set(split.filter(lambda r, lang=lang: r["language"] == lang)["uuid"])
        for lang in set(split["language"])
    }
    assert len({frozenset(uuids) for uuids in by_language.values()}) == 1
