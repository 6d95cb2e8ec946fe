"""`culture-probe curate ...` end to end, and the output read back through the DLAMA builder."""

from __future__ import annotations

import json

import pytest
from curation_helpers import FIXTURE, read_records

from culture_probe.benchmarks.fmlama.curation import FmlamaCuration, curate_fmlama
from culture_probe.cli import main
from culture_probe.curation import Region
from culture_probe.errors import CultureProbeError


@pytest.fixture(scope="module")
def curated(tmp_path_factory):
    out = tmp_path_factory.mktemp("curated")
    code = main(
        [
            "curate",
            "dlama",
            "--region",
            "arab",
            "--contrast",
            "west",
            "--languages",
            "ar,en",
            "--predicates",
            "P30,P36,P37,P1376",
            "--endpoint",
            str(FIXTURE),
            "--out",
            str(out),
        ]
    )
    assert code == 0
    return out


def test_cli_writes_the_pair(curated, capsys):
    records = read_records(curated / "arab-west" / "dlama" / "ar" / "P36_general_ARAB_REGION.jsonl")
    assert records[1]["sub_label"] == "مصر" and records[1]["obj_label"] == ["القاهرة"]
    manifest = json.loads((curated / "arab-west" / "curation.json").read_text())
    assert manifest["sizes"].startswith("schema:contentSize in embedded store")


def test_output_loads_through_the_dlama_builder(curated, tmp_path):
    from culture_probe.data.registry import load_benchmark

    test = load_benchmark("dlama_arab_west", data_dir=str(curated), cache_dir=str(tmp_path))["test"]
    expected = sum(len(read_records(p)) for p in (curated / "arab-west" / "dlama").rglob("*.jsonl"))
    assert len(test) == expected > 0
    row = next(r for r in test if r["id"] == "P30_general_ARAB_REGION_1|en")
    assert (row["sub_label"], row["obj_label"], row["culture"], row["pair"]) == (
        "Egypt",
        ["Africa", "Asia"],
        "arab",
        "arab_west",
    )
    assert {r["uuid"] for r in test if r["language"] == "ar"} == {
        r["uuid"] for r in test if r["language"] == "en"
    }


def test_cli_errors(tmp_path, capsys):
    assert (
        main(
            [
                "curate",
                "dlama",
                "--region",
                "arabia",
                "--languages",
                "en",
                "--endpoint",
                str(FIXTURE),
                "--out",
                str(tmp_path),
            ]
        )
        == 2
    )
    assert "Unknown region 'arabia'. Did you mean 'arab'" in capsys.readouterr().err
    assert (
        main(["curate", "dlama", "--region", "arab", "--languages", "en", "--out", str(tmp_path)])
        == 2
    )
    assert "--endpoint is required" in capsys.readouterr().err
    assert (
        main(
            [
                "curate",
                "dlama",
                "--region",
                "arab",
                "--languages",
                "en",
                "--endpoint",
                "dump.xml",
                "--out",
                str(tmp_path),
            ]
        )
        == 2
    )
    assert "reads .nt, .ttl dumps" in capsys.readouterr().err


def test_cli_new_region_and_fmlama(tmp_path, capsys):
    assert (
        main(
            [
                "curate",
                "dlama",
                "--region",
                "maghreb=Q1028,Q262,Q948",
                "--sites",
                "ar,fr,en",
                "--languages",
                "ar,en",
                "--predicates",
                "P36",
                "--endpoint",
                str(FIXTURE),
                "--out",
                str(tmp_path / "d"),
            ]
        )
        == 0
    )
    records = read_records(
        tmp_path / "d" / "maghreb-west" / "dlama" / "en" / "P36_general_MAGHREB.jsonl"
    )
    # fr articles 260k, 175k, 150k
    assert [r["sub_label"] for r in records] == ["Morocco", "Algeria", "Tunisia"]
    assert (
        main(
            [
                "curate",
                "fmlama",
                "--region",
                "asia",
                "--languages",
                "en,ko",
                "--endpoint",
                str(FIXTURE),
                "--out",
                str(tmp_path / "f"),
            ]
        )
        == 0
    )
    assert "wrote FmLAMA-style dishes" in capsys.readouterr().out


def test_fmlama_dishes(store, tmp_path):
    region = Region("mix", "MIX", ("Q148", "Q142", "Q79", "Q884", "Q822", "Q1028", "Q262"))
    assert curate_fmlama(FmlamaCuration(region, ("en", "ko")), store, tmp_path) == {
        "en": 4,
        "ko": 3,
    }
    en = read_records(tmp_path / "data_lang" / "en" / "en_dishes.jsonl")
    assert [(r["sub_label"], r["origin"]) for r in en] == [
        ("koshari", "Egypt"),
        ("bouillabaisse", "France"),  # bouillabaisse: instance of stew, a subclass of dish
        ("mapo doufu", "People's Republic of China"),  # origin through Sichuan cuisine's country
        ("bibimbap", "South Korea"),
    ]  # hummus has two countries of origin; couscous's cuisine lies in two countries: both excluded
    assert en[2] == {
        "url": "http://www.wikidata.org/entity/Q1298577",
        "origin": "People's Republic of China",
        "lang": "en",
        "sub_label": "mapo doufu",
        "obj_label": ["chili pepper", "tofu"],
    }
    ko = read_records(tmp_path / "data_lang" / "ko" / "ko_dishes.jsonl")
    assert "bouillabaisse" not in {r["url"] for r in ko} and len(ko) == 3  # no Korean label
    counts = read_records(tmp_path / "data_lang" / "en" / "en_count.jsonl")
    assert counts[0] == ["All", 4]
    with pytest.raises(CultureProbeError, match="needs the origin countries as QIDs"):
        FmlamaCuration(
            Region("arab", "ARAB_REGION", condition="?country wdt:P463 wd:Q7172 ."), ("en",)
        )


def test_auto_size_provider_asks_wikipedia_only_for_wikidata(store):
    from culture_probe.curation import (
        WIKIDATA_URL,
        HttpEndpoint,
        HttpPolicy,
        MediaWikiSizes,
        StoreSizes,
    )
    from culture_probe.curation.cli import size_provider

    policy = HttpPolicy()
    assert isinstance(
        size_provider("auto", HttpEndpoint(WIKIDATA_URL, policy), policy), MediaWikiSizes
    )
    assert isinstance(
        size_provider("auto", HttpEndpoint("http://127.0.0.1:1/query", policy), policy), StoreSizes
    )
    assert isinstance(size_provider("auto", store, policy), StoreSizes)
    assert isinstance(size_provider("mediawiki", store, policy), MediaWikiSizes)


@pytest.mark.parametrize(
    "extra", [["--contrast", "west"], ["--top", "5"], ["--predicates", "P36"], ["--sizes", "store"]]
)
def test_fmlama_curation_refuses_dlama_only_flags(tmp_path, capsys, extra):
    assert (
        main(
            [
                "curate",
                "fmlama",
                "--region",
                "asia",
                "--languages",
                "en",
                "--endpoint",
                str(FIXTURE),
                "--out",
                str(tmp_path / "f"),
                *extra,
            ]
        )
        == 2
    )
    assert f"does not use {extra[0]}: FmLAMA collects every dish" in capsys.readouterr().err
    assert not (tmp_path / "f").exists()  # refused before anything was fetched


@pytest.mark.parametrize(
    ("region", "sites", "message"),
    [
        (
            "maghreb=Q1028,Q262",
            "english",
            "--sites takes Wikipedia language codes (e.g. en,ar or zh-yue), got 'english'",
        ),
        ("arab", "ar,fr", "--sites sets the Wikipedia sites of a region defined as NAME=QID,..."),
    ],
)
def test_cli_refuses_bad_sites_before_any_query(
    tmp_path, capsys, monkeypatch, region, sites, message
):
    import culture_probe.curation.cli as curation_cli

    def no_query(*args, **kwargs):
        raise AssertionError("an endpoint was opened before --sites was checked")

    monkeypatch.setattr(curation_cli, "open_endpoint", no_query)
    argv = ["curate", "dlama", "--region", region, "--sites", sites, "--languages", "ar,en"]
    assert main([*argv, "--endpoint", str(FIXTURE), "--out", str(tmp_path / "d")]) == 2
    assert message in capsys.readouterr().err and not (tmp_path / "d").exists()
