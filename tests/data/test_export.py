"""Hub layout: Parquet + README `configs:`; `datasets.load_dataset(DIR, name)` gives the rows of
`load_benchmark`.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import datasets
import pytest
import yaml

from culture_probe import cli
from culture_probe.data import export as export_module
from culture_probe.data.export import export
from culture_probe.data.registry import list_benchmarks, load_benchmark
from culture_probe.errors import CultureProbeError, UnknownNameError

SMALL = ["fmlama_he", "fmlama_templates", "fmlama_cs_en_zh", "fmlama_zh_corrected"]


# the three released pairs: (folder, non-Western region token, local language, a subject QID of that
# region)
PAIRS = (
    ("arab-west", "ARAB_REGION", "ar", "Q79"),
    ("asia-west", "ASIA", "ko", "Q17"),
    ("south-america-west", "SOUTH_AMERICA", "es", "Q155"),
)


def tiny_dlama(path: Path) -> Path:
    """A DLAMA-v1 tarball with every released pair, in both languages and cultures, one fact per
    file, with its `dlama_raw/` twin, so that every DLAMA config but `dlama_custom` has data.
    """
    with tarfile.open(path, "w:gz") as archive:
        for folder, token, local, subject in PAIRS:
            for kind in ("dlama", "dlama_raw"):
                for lang in (local, "en"):
                    for region, sub in ((token, subject), ("WESTERN_COUNTRIES", "Q142")):
                        fact = {
                            "sub_uri": sub,
                            "obj_uri": ["Q15"],
                            "sub_label": f"{sub}-{lang}-{kind}",
                            "obj_label": [f"o-{lang}"],
                            "country": [sub],
                            "size": 1,
                            "uuid": f"P30_general_{region}_0",
                        }
                        content = (json.dumps(fact) + "\n").encode()
                        info = tarfile.TarInfo(f"{folder}/{kind}/{lang}/P30_general_{region}.jsonl")
                        info.size = len(content)
                        archive.addfile(info, io.BytesIO(content))
    return path


def front_matter(readme: Path) -> dict:
    text = readme.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def assert_same_rows(folder: Path, name: str, **kwargs) -> None:
    exported = datasets.load_dataset(str(folder), name)
    built = load_benchmark(name, **kwargs)
    assert set(exported) == set(built)
    for split in built:
        assert exported[split].features == built[split].features
        assert exported[split].to_list() == built[split].to_list()


def test_export_small_configs_round_trip(mirror: Path, tmp_path: Path) -> None:
    tarball = tiny_dlama(tmp_path / "dlama-v1.tar.gz")
    names = [*SMALL, "dlama_arab_west"]
    result = export(tmp_path / "hub", configs=names, data_dirs={"dlama": tarball})
    assert [c.name for c in result.configs] == names and result.skipped == ()
    for name in SMALL:
        assert (tmp_path / "hub" / name / "test-00000-of-00001.parquet").is_file()
        assert_same_rows(tmp_path / "hub", name)
    assert_same_rows(tmp_path / "hub", "dlama_arab_west", data_dir=tarball)
    header = front_matter(tmp_path / "hub" / "README.md")
    assert header["configs"][0] == {
        "config_name": "fmlama_he",
        "data_files": [{"split": "test", "path": "fmlama_he/test-00000-of-00001.parquet"}],
    }
    assert [c["config_name"] for c in header["configs"]] == names
    assert {"he", "zh", "ar", "en"} <= set(header["language"])


def test_dataset_card_describes_each_benchmark(mirror: Path, tmp_path: Path) -> None:
    export(tmp_path / "hub", configs=["fmlama_he"])
    card = (tmp_path / "hub" / "README.md").read_text(encoding="utf-8")
    for expected in (
        "## FmLAMA: food-related cultural knowledge",
        "- Licence: none stated (the FmLAMA repository",
        "- Licence: CC0 1.0 (the dishes, ingredients and labels themselves (from Wikidata))",
        "@article{zhou2024mapo",
        "| `fmlama_he` | he | test 463 |",
        "- Source: `https://raw.githubusercontent.com/lizhou21/FmLAMA-master/",
    ):
        assert expected in card
    assert front_matter(tmp_path / "hub" / "README.md")["license"] == ["other", "cc0-1.0"]
    assert "## DLAMA" not in card  # only exported benchmarks are described
    assert "corrected configs" not in card  # no corrected config written: no corrections claimed
    export(tmp_path / "hub", configs=["fmlama_he", "fmlama_he_corrected"])
    card = (tmp_path / "hub" / "README.md").read_text(encoding="utf-8")
    assert "What the corrected configs (`fmlama_he_corrected`) fix" in card
    assert "**self_item**" in card and "**templates**" in card


def test_cli_export(mirror: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["export", str(tmp_path / "out"), "--configs", "fmlama_he"]) == 0
    assert "wrote   fmlama_he: test 463" in capsys.readouterr().out
    assert (tmp_path / "out" / "fmlama_he" / "test-00000-of-00001.parquet").is_file()
    assert (
        cli.main(
            ["export", str(tmp_path / "out"), "--configs", "fmlama_he", "--data-dir", "manual/maps"]
        )
        == 2
    )
    assert "--data-dir takes BENCHMARK=PATH, got 'manual/maps'" in capsys.readouterr().err


def test_data_dir_names_a_benchmark() -> None:
    assert export_module.parse_data_dirs("fmlama=a,dlama=b.tar.gz") == {
        "fmlama": "a",
        "dlama": "b.tar.gz",
    }
    with pytest.raises(UnknownNameError, match=r"Unknown benchmark 'dlam'\. Did you mean 'dlama'"):
        export_module.parse_data_dirs("dlam=x")


def test_explicit_config_without_data_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CULTURE_PROBE_MIRROR", str(tmp_path / "empty_mirror"))
    with pytest.raises(FileNotFoundError, match=r"with --data-dir \(Python: data_dir="):
        export(tmp_path / "hub", configs=["dlama_arab_west"])


@pytest.mark.slow
def test_export_every_config_round_trips(mirror: Path, tmp_path: Path) -> None:
    tarball = tiny_dlama(tmp_path / "dlama-v1.tar.gz")
    data_dirs = {"dlama": tarball}
    if (mirror / "manual" / "maps").is_dir():
        data_dirs["maps"] = mirror / "manual" / "maps"
    result = export(tmp_path / "hub", data_dirs=data_dirs)
    skipped = dict(result.skipped)
    # only configs whose data is genuinely absent are skipped: a curated pair of one's own (and MAPS
    # without the mirror's manual folder); the fixture holds every released DLAMA pair and its
    # dlama_raw/ twin
    absent = {"dlama_custom", "dlama_custom_corrected"}
    if "maps" not in data_dirs:
        absent |= {e.name for e in list_benchmarks() if e.benchmark == "maps"}
    assert set(skipped) == absent, skipped
    dlama = {
        f"dlama_{pair}{suffix}"
        for pair in ("arab_west", "asia_west", "south_america_west")
        for suffix in ("", "_corrected", "_raw")
    }
    assert dlama <= {c.name for c in result.configs}
    listed = [e.name for e in list_benchmarks()]
    assert sorted([c.name for c in result.configs] + list(skipped)) == sorted(listed)
    header = front_matter(tmp_path / "hub" / "README.md")
    assert [c["config_name"] for c in header["configs"]] == [c.name for c in result.configs]
    for config in result.configs:
        benchmark = next(e.benchmark for e in list_benchmarks() if e.name == config.name)
        assert_same_rows(tmp_path / "hub", config.name, data_dir=data_dirs.get(benchmark))
    assert os.path.getsize(tmp_path / "hub" / "README.md") > 1000


def test_an_export_replaces_the_earlier_one_whole_and_refuses_other_folders(
    mirror: Path, tmp_path: Path
) -> None:
    out = tmp_path / "hub"
    # named twice: written once
    export(out, configs=["camel_co_prompts", "camel_ag_prompts", "camel_co_prompts"])
    readme = (out / "README.md").read_text(encoding="utf-8")
    assert readme.count("config_name: camel_co_prompts\n") == 1
    export(out, configs=["camel_ag_prompts"])
    assert sorted(p.name for p in out.iterdir()) == [
        ".culture_probe_export",
        "README.md",
        "camel_ag_prompts",
    ]
    # no stale config declared
    assert "camel_co_prompts" not in (out / "README.md").read_text(encoding="utf-8")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(CultureProbeError, match="not empty and holds no earlier export"):
        export(mine, configs=["camel_ag_prompts"])
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    with pytest.raises(CultureProbeError, match="shadows the package"):
        export(tmp_path / "culture_probe", configs=["camel_ag_prompts"])
    (out / ".culture_probe_export").write_text('["../mine"]')
    with pytest.raises(CultureProbeError, match="is damaged"):
        export(out, configs=["camel_ag_prompts"])
    assert (mine / "notes.txt").read_text() == "keep"


def config_section(card: str, name: str) -> list[str]:
    """The lines the card gives one config under its own heading."""
    return card.split(f"### `{name}`\n\n", 1)[1].split("\n\n", 1)[0].splitlines()


def test_dlama_card_says_where_its_rows_came_from(
    mirror: Path, tmp_path: Path, monkeypatch
) -> None:
    """The pinned tarball with its checksums, another tarball, an unpacked folder, the mirror's
    unpacked release.
    """
    import hashlib
    import shutil

    from culture_probe.benchmarks.dlama import data as dlama

    tarball = tiny_dlama(tmp_path / "dlama-v1.tar.gz")
    content = tarball.read_bytes()
    sha256 = hashlib.sha256(content).hexdigest()
    # git's blob id (git hash-object)
    blob = hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()
    export(tmp_path / "hub", configs=["dlama_arab_west"], data_dirs={"dlama": tarball})
    line = config_section(
        (tmp_path / "hub" / "README.md").read_text(encoding="utf-8"), "dlama_arab_west"
    )[0]
    assert line.startswith(
        "- Rows read from the local tarball `dlama-v1.tar.gz`, which is not the pinned release "
    )
    assert f"(git blob id {blob}, not {dlama.TARBALL_BLOB_ID}; sha256 {sha256})" in line

    # the same file as the pinned release at its URL (the mirror rule): the card names the URL and
    # both checksums
    fake = tmp_path / "mirror"
    pinned = fake / dlama.TARBALL_URL.removeprefix("https://")
    pinned.parent.mkdir(parents=True)
    shutil.copyfile(tarball, pinned)
    monkeypatch.setenv("CULTURE_PROBE_MIRROR", str(fake))
    monkeypatch.setattr(dlama, "TARBALL_BLOB_ID", blob)
    export(tmp_path / "hub", configs=["dlama_arab_west"])
    line = config_section(
        (tmp_path / "hub" / "README.md").read_text(encoding="utf-8"), "dlama_arab_west"
    )[0]
    assert (
        line
        == f"- Rows read from the pinned release tarball {dlama.TARBALL_URL} (git blob id {blob}, sha256 {sha256})."
    )

    unpacked = tmp_path / "my-dlama"
    shutil.unpack_archive(tarball, unpacked)
    export(tmp_path / "hub", configs=["dlama_arab_west"], data_dirs={"dlama": unpacked})
    line = config_section(
        (tmp_path / "hub" / "README.md").read_text(encoding="utf-8"), "dlama_arab_west"
    )[0]
    assert line == (
        "- Rows read from the local folder `my-dlama`, not from the pinned release tarball (no checksum ties a "
        "folder to it)."
    )


def test_dlama_card_of_the_mirrors_unpacked_release_claims_no_tarball(
    mirror: Path, tmp_path: Path
) -> None:
    """The issue's case: rows from the unpacked release (the tarball is not in the mirror), ar
    templates provisional.
    """
    from culture_probe.benchmarks.dlama import data as dlama
    from culture_probe.data.sources import mirror_path

    if dlama.manual_release() is None or mirror_path(dlama.TARBALL_URL).is_file():
        pytest.skip("needs the mirror's unpacked DLAMA release and no tarball beside it")
    export(tmp_path / "hub", configs=["dlama_arab_west"])
    card = (tmp_path / "hub" / "README.md").read_text(encoding="utf-8")
    origin, templates = config_section(card, "dlama_arab_west")
    assert origin == (
        "- Rows read from the unpacked release in a local mirror (CULTURE_PROBE_MIRROR, manual/dlama/dlama-v1), "
        "not from the pinned release tarball (no checksum ties a folder to it)."
    )
    assert (
        "ar: provisional, DLAMA paper Table F9 (transcribed), not the released mLAMA 1.1 file"
        in templates
    )
    assert (
        "en: mLAMA 1.1 / LAMA, exact" in templates
        and "--option templates= an mLAMA 1.1 folder" in templates
    )
    # the old claim: every template vendored from mLAMA 1.1
    assert "vendored in culture_probe" not in card


def test_dlama_card_names_each_languages_templates(mirror: Path, tmp_path: Path) -> None:
    tarball = tiny_dlama(tmp_path / "dlama-v1.tar.gz")
    export(
        tmp_path / "hub",
        configs=["dlama_asia_west", "dlama_south_america_west"],
        data_dirs={"dlama": tarball},
    )
    card = (tmp_path / "hub" / "README.md").read_text(encoding="utf-8")
    korean = config_section(card, "dlama_asia_west")[1]
    assert korean.startswith(
        "- Probing templates (applied by culture_probe's protocol, not stored in the rows): ko: "
    )
    assert (
        "ko: provisional, DLAMA paper Table F9 (transcribed), not the released mLAMA 1.1 file (P17 unreadable"
        in korean
    )
    assert (
        "P19 unreadable in Table F9; machine translation" in korean
        and "en: mLAMA 1.1 / LAMA, exact" in korean
    )
    assert "es: provisional" in config_section(card, "dlama_south_america_west")[1]
