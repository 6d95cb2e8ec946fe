"""The registry: names, errors that list the closest names, listing without torch, and the cache
key.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from culture_probe import cli
from culture_probe.data import registry
from culture_probe.data.registry import list_benchmarks, load_benchmark
from culture_probe.errors import UnknownNameError

REPO = Path(__file__).resolve().parents[2]
# config names the issue and the specs promise (the DLAMA/FmLAMA side; other benchmarks test their
# own)
PROMISED = [
    "dlama_arab_west",
    "dlama_asia_west",
    "dlama_south_america_west",
    "dlama_arab_west_corrected",
    *(f"fmlama_{la}" for la in ("en", "zh", "ar", "ko", "ru", "he")),
    *(f"fmlama_aligned_{la}" for la in ("en", "zh", "ar", "ko", "ru", "he")),
    "fmlama_cs_en_en",
    "fmlama_cs_en_zh",
    "fmlama_cs_zh_zh",
    "fmlama_cs_zh_en",
    "fmlama_en14",
    "fmlama_templates",
    "fmlama_en_corrected",
    "fmlama_templates_corrected",
]


def test_promised_configs_are_listed() -> None:
    entries = {e.name: e for e in list_benchmarks()}
    assert set(PROMISED) <= set(entries)
    assert all(re.fullmatch(r"[a-z0-9_]+", name) for name in entries)
    assert entries["fmlama_ko"].rows == 807 and entries["fmlama_ko"].languages == ("ko",)
    assert entries["fmlama_cs_en_zh"].languages == ("en", "zh")
    assert all(e.description and e.benchmark for e in entries.values())


def test_unknown_name_lists_closest_names() -> None:
    with pytest.raises(
        UnknownNameError,
        match=r"Unknown benchmark config 'dlama_arab_wset'\. Did you mean "
        r"'dlama_arab_west'.*Valid benchmark configs: .*fmlama_en",
    ):
        load_benchmark("dlama_arab_wset")
    # with corrected=True the error still names what was typed, not 'dlama_arab_wset_corrected'
    with pytest.raises(
        UnknownNameError,
        match=r"Unknown benchmark config 'dlama_arab_wset'\. Did you mean "
        r"'dlama_arab_west'",
    ):
        load_benchmark("dlama_arab_wset", corrected=True)


def test_corrected_flag_picks_the_twin() -> None:
    twin = registry.resolve("fmlama_en", corrected=True)
    assert (twin.name, twin.config.name, twin.config.variant, twin.corrected) == (
        "fmlama_en_corrected",
        "fmlama_en_corrected",
        "corrected",
        True,
    )
    # the faithful name without parsing it again
    assert twin.base == "fmlama_en" and twin.info.name == "fmlama"
    assert registry.resolve("fmlama_en_corrected", corrected=True).name == "fmlama_en_corrected"
    assert (
        registry.resolve("fmlama_en").config.variant == "faithful"
        and not registry.resolve("fmlama_en").corrected
    )
    with pytest.raises(
        UnknownNameError, match=r"'dlama_arab_west_raw' has no known data errors to correct"
    ):
        registry.resolve("dlama_arab_west_raw", corrected=True)


def test_listing_and_registry_do_not_import_torch() -> None:
    code = (
        "import sys\n"
        "from culture_probe.data import listing, registry\n"
        "assert registry.list_benchmarks()\n"
        "listing.main(None)\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'accelerate') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "fmlama_templates" in result.stdout


def test_cli_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("fmlama_en14 "))
    assert re.search(r"fmlama\s+en\s+1549\s+English dishes", row)


def _fixture_folder(root: Path) -> Path:
    folder = root / "arab-west" / "dlama" / "en"
    folder.mkdir(parents=True)
    (folder / "P30_general_ARAB_REGION.jsonl").write_text("{}\n")
    return root


def test_cache_key_is_stable_across_working_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _fixture_folder(tmp_path / "data")
    absolute = registry.make_builder(
        "dlama_arab_west", data_dir=data, cache_dir=str(tmp_path / "c")
    )
    monkeypatch.chdir(tmp_path)
    relative = registry.make_builder(
        "dlama_arab_west", data_dir="data", cache_dir=str(tmp_path / "c")
    )
    assert relative.cache_dir == absolute.cache_dir
    other = registry.make_builder("dlama_asia_west", data_dir="data", cache_dir=str(tmp_path / "c"))
    assert other.cache_dir != absolute.cache_dir


def test_cache_key_changes_with_the_local_data(tmp_path: Path) -> None:
    data = _fixture_folder(tmp_path / "data")
    before = registry.make_builder(
        "dlama_arab_west", data_dir=data, cache_dir=str(tmp_path / "c")
    ).cache_dir
    (data / "arab-west/dlama/en/P30_general_ARAB_REGION.jsonl").write_text('{"changed": 1}\n')
    after = registry.make_builder(
        "dlama_arab_west", data_dir=data, cache_dir=str(tmp_path / "c")
    ).cache_dir
    assert before != after
    other_dir = registry.make_builder(
        "dlama_arab_west",
        data_dir=_fixture_folder(tmp_path / "copy"),
        cache_dir=str(tmp_path / "c"),
    ).cache_dir
    assert other_dir not in (before, after)
    assert os.path.commonpath([before, str(tmp_path / "c")]) == str(tmp_path / "c")
