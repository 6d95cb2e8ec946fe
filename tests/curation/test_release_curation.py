"""Curation gives the DLAMA-v1 release back: on Wikidata-shaped stores built from the release's own files (with the
distractors a real Wikidata has), `curate dlama` returns the released facts of every predicate: the same subjects
in the same order, the same objects and labels, the same `country` and sizes. Equal sizes are ranked by QID in
numeric order (upstream's sort was not stable: its order within a tie is arbitrary), so within a tie the test
compares sets.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from curation_helpers import read_records
from release_store import TOP, build_store, read_release

from culture_probe.curation import (
    PREDICATES,
    DlamaCuration,
    EmbeddedStore,
    HttpEndpoint,
    curate_dlama,
    oxigraph_server,
    resolve_region,
)

PAIR, LANGUAGES, TOKENS = "arab-west", ("ar", "en"), ("ARAB_REGION", "WESTERN_COUNTRIES")
# one predicate of each way a fact is tied to its region: object, subject, citizenship, place, origin, city
SMALL = ("P17", "P36", "P106", "P19", "P364", "P190", "P1376")


@pytest.fixture
def release(mirror) -> Path:
    return mirror / "manual" / "dlama" / "dlama-v1"


def curate_from_release(release: Path, pid: str, token: str, tmp: Path, top: int = TOP, n: int | None = None,
                        endpoint=None) -> tuple[list[dict], dict[str, list[dict]]]:
    """(released facts, {language: curated records}) of one (predicate, region) file."""
    facts = read_release(release, PAIR, LANGUAGES, f"{pid}_general_{token}")[:n]
    tmp.mkdir(parents=True, exist_ok=True)
    dump = build_store(facts, pid, token, LANGUAGES, tmp / f"{pid}_{token}.nt", top=top)
    config = DlamaCuration(resolve_region("arab"), resolve_region("west"), LANGUAGES, (pid,), top=top)
    if endpoint is None:
        result = curate_dlama(config, EmbeddedStore([dump]), tmp / "out")
    else:
        with endpoint([dump]) as server:
            result = curate_dlama(config, HttpEndpoint(server.url), tmp / "out")
    curated = {lang: read_records(result.pair_dir / "dlama" / lang / f"{pid}_general_{token}.jsonl")
               for lang in LANGUAGES}
    return facts, curated


def assert_release(facts: list[dict], curated: dict[str, list[dict]]) -> None:
    """The curated records are the released ones, rank for rank; within a tie in size, as a set, ranked by QID."""
    for lang, records in curated.items():
        released = [{"sub_uri": f["sub"], "obj_uri": f["obj"], "sub_label": f["labels"][f["sub"]][lang],
                     "obj_label": [f["labels"][o][lang] for o in f["obj"]], "country": f["country"],
                     "size": f["size"], "uuid": f["uuid"]} for f in facts]
        assert len(records) == len(released), f"{lang}: {len(records)} facts, the release has {len(released)}"
        assert [r["uuid"] for r in records] == [r["uuid"] for r in released]  # rank-numbered ids
        assert [r["size"] for r in records] == [r["size"] for r in released]
        start = 0
        for _, group in itertools.groupby(released, key=lambda r: r["size"]):
            tie = list(group)
            mine = records[start:start + len(tie)]
            assert by_subject(mine) == by_subject(tie), f"{lang}: facts of size {tie[0]['size']} differ"
            assert [int(r["sub_uri"][1:]) for r in mine] == sorted(int(r["sub_uri"][1:]) for r in mine)
            start += len(tie)


def by_subject(records: list[dict]) -> dict[str, dict]:
    """{subject: its record without the rank-numbered uuid}."""
    return {r["sub_uri"]: {k: v for k, v in r.items() if k != "uuid"} for r in records}


@pytest.mark.parametrize("pid", SMALL)
@pytest.mark.parametrize("token", TOKENS)
def test_curation_returns_the_released_facts_of_a_small_store(release, tmp_path, pid, token):
    facts, curated = curate_from_release(release, pid, token, tmp_path, top=6, n=6)
    assert_release(facts, curated)


def test_curation_through_an_oxigraph_server_returns_the_same(release, tmp_path):
    for pid in ("P106", "P19"):
        facts, curated = curate_from_release(release, pid, "ARAB_REGION", tmp_path / pid, top=6, n=6,
                                             endpoint=lambda dumps: oxigraph_server(dumps, max_lifetime=120))
        assert_release(facts, curated)


@pytest.mark.slow
@pytest.mark.parametrize("pid", sorted(PREDICATES, key=lambda p: int(p[1:])))
def test_curation_returns_the_whole_released_arab_west_pair(release, tmp_path, pid):
    for token in TOKENS:
        facts, curated = curate_from_release(release, pid, token, tmp_path / token)
        assert_release(facts, curated)
