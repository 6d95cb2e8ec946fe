"""A new culture pair curated from the fixture store and read back with
`load_benchmark("dlama_custom", ...)`.
"""

from __future__ import annotations

import pytest
from curation_helpers import read_records

from culture_probe.benchmarks.dlama.curation import DlamaCuration, curate_dlama
from culture_probe.curation import Region, resolve_region
from culture_probe.data.registry import load_benchmark

# Morocco, Algeria, Tunisia: a region no released pair has; the fixture ranks them by their fr
# articles.
MAGHREB = Region("maghreb", "MAGHREB", ("Q1028", "Q262", "Q948"), default_sites=("ar", "fr", "en"))
PREDICATES = ("P30", "P36")


@pytest.fixture(scope="module")
def out(store, tmp_path_factory):
    """One output folder holding the new Maghreb-West pair next to a curated Arab-West pair."""
    root = tmp_path_factory.mktemp("curated")
    west = resolve_region("west")
    curate_dlama(DlamaCuration(MAGHREB, west, ("ar", "en"), PREDICATES), store, root)
    curate_dlama(DlamaCuration(resolve_region("arab"), west, ("ar", "en"), ("P36",)), store, root)
    return root


def test_new_pair_loads_from_its_manifest(out, tmp_path):
    split = load_benchmark("dlama_custom", data_dir=out, cache_dir=str(tmp_path))["test"]
    files = sorted((out / "maghreb-west" / "dlama").rglob("*.jsonl"))
    assert split.num_rows == sum(len(read_records(path)) for path in files) > 0
    assert set(split["pair"]) == {"maghreb_west"} and set(split["culture"]) == {"maghreb", "west"}
    assert {path.stem for path in files} == {
        f"{p}_general_{t}" for p in PREDICATES for t in ("MAGHREB", "WESTERN_COUNTRIES")
    }
    capitals = [
        r for r in split if (r["language"], r["predicate"], r["region"]) == ("en", "P36", "MAGHREB")
    ]
    assert [(r["rank"], r["sub_label"]) for r in capitals] == [
        (0, "Morocco"),
        (1, "Algeria"),
        (2, "Tunisia"),
    ]
    assert capitals[0]["obj_label"] == ["Rabat"]
    languages = split["language"]
    # curation's order
    assert languages == ["ar"] * languages.count("ar") + ["en"] * languages.count("en")
    assert {r["uuid"] for r in split if r["language"] == "ar"} == {
        r["uuid"] for r in split if r["language"] == "en"
    }


def test_options_pick_the_pair_and_released_configs_still_load(out, tmp_path):
    english = load_benchmark(
        "dlama_custom", data_dir=out, region="MAGHREB", languages=("en",), cache_dir=str(tmp_path)
    )["test"]
    assert set(english["language"]) == {"en"} and set(english["region"]) == {
        "MAGHREB",
        "WESTERN_COUNTRIES",
    }
    arab = load_benchmark("dlama_arab_west", data_dir=out, cache_dir=str(tmp_path))["test"]
    assert set(arab["pair"]) == {"arab_west"} and set(arab["predicate"]) == {"P36"}
    assert "MAGHREB" not in set(arab["region"])
