"""Curation gives the DLAMA-v1 release back: on Wikidata-shaped stores built from the release's own
files (with the distractors a real Wikidata has), `curate dlama` returns the released facts of every
predicate: the same subjects in the same order, the same objects and labels, the same `country` and
sizes. Equal sizes are ranked by QID in numeric order (upstream's sort was not stable: its order
within a tie is arbitrary), so within a tie the test compares sets; the first facts of a file have
no ties, so subjects tied with released ones are added to exercise the rule, inside the kept
subjects and at the top-k cut. The command line (`culture-probe curate dlama`) gives the same.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from curation_helpers import read_records
from release_store import TOP, add_tie, build_store, read_release, store_triples, tie_qids

from culture_probe.benchmarks.dlama.curation import DlamaCuration, curate_dlama
from culture_probe.cli import main
from culture_probe.curation import (
    PREDICATES,
    EmbeddedStore,
    HttpEndpoint,
    oxigraph_server,
    resolve_region,
)

PAIR, LANGUAGES, TOKENS = "arab-west", ("ar", "en"), ("ARAB_REGION", "WESTERN_COUNTRIES")
# one predicate of each way a fact is tied to its region: object, subject, citizenship, place,
# origin, city
SMALL = ("P17", "P36", "P106", "P19", "P364", "P190", "P1376")
# a subject tied to its region through the object (P17), citizenship (P106) and origin (P364)
TIES = (("P17", "WESTERN_COUNTRIES"), ("P106", "ARAB_REGION"), ("P364", "ARAB_REGION"))


@pytest.fixture
def release(mirror) -> Path:
    return mirror / "manual" / "dlama" / "dlama-v1"


def curate_from_release(
    release: Path,
    pid: str,
    token: str,
    tmp: Path,
    top: int = TOP,
    n: int | None = None,
    endpoint=None,
) -> tuple[list[dict], dict[str, list[dict]]]:
    """(released facts, {language: curated records}) of one (predicate, region) file."""
    facts = read_release(release, PAIR, LANGUAGES, f"{pid}_general_{token}")[:n]
    tmp.mkdir(parents=True, exist_ok=True)
    dump = build_store(facts, pid, token, LANGUAGES, tmp / f"{pid}_{token}.nt", top=top)
    return facts, curate_dump(dump, pid, token, tmp, top, endpoint)


def curate_dump(
    dump: Path, pid: str, token: str, tmp: Path, top: int, endpoint=None
) -> dict[str, list[dict]]:
    """{language: curated records} of one (predicate, region) file, curated from the store
    `dump`.
    """
    config = DlamaCuration(
        resolve_region("arab"), resolve_region("west"), LANGUAGES, (pid,), top=top
    )
    if endpoint is None:
        result = curate_dlama(config, EmbeddedStore([dump]), tmp / "out")
    else:
        with endpoint([dump]) as server:
            result = curate_dlama(config, HttpEndpoint(server.url), tmp / "out")
    return {
        lang: read_records(result.pair_dir / "dlama" / lang / f"{pid}_general_{token}.jsonl")
        for lang in LANGUAGES
    }


def ranked(facts: list[dict], pid: str, token: str) -> list[dict]:
    """`facts` in this order, their uuids numbered by rank as the curation numbers them."""
    return [{**fact, "uuid": f"{pid}_general_{token}_{rank}"} for rank, fact in enumerate(facts)]


def assert_release(facts: list[dict], curated: dict[str, list[dict]]) -> None:
    """The curated records are the released ones, rank for rank; within a tie in size, as a set,
    ranked by QID.
    """
    for lang, records in curated.items():
        released = [
            {
                "sub_uri": f["sub"],
                "obj_uri": f["obj"],
                "sub_label": f["labels"][f["sub"]][lang],
                "obj_label": [f["labels"][o][lang] for o in f["obj"]],
                "country": f["country"],
                "size": f["size"],
                "uuid": f["uuid"],
            }
            for f in facts
        ]
        assert len(records) == len(released), (
            f"{lang}: {len(records)} facts, the release has {len(released)}"
        )
        assert [r["uuid"] for r in records] == [r["uuid"] for r in released]  # rank-numbered ids
        assert [r["size"] for r in records] == [r["size"] for r in released]
        start = 0
        for _, group in itertools.groupby(released, key=lambda r: r["size"]):
            tie = list(group)
            mine = records[start : start + len(tie)]
            assert by_subject(mine) == by_subject(tie), (
                f"{lang}: facts of size {tie[0]['size']} differ"
            )
            assert [int(r["sub_uri"][1:]) for r in mine] == sorted(
                int(r["sub_uri"][1:]) for r in mine
            )
            start += len(tie)


def by_subject(records: list[dict]) -> dict[str, dict]:
    """{subject: its record without the rank-numbered uuid}."""
    return {r["sub_uri"]: {k: v for k, v in r.items() if k != "uuid"} for r in records}


@pytest.mark.parametrize("pid", SMALL)
@pytest.mark.parametrize("token", TOKENS)
def test_curation_returns_the_released_facts_of_a_small_store(release, tmp_path, pid, token):
    facts, curated = curate_from_release(release, pid, token, tmp_path, top=6, n=6)
    assert_release(facts, curated)


@pytest.mark.parametrize(("pid", "token"), TIES)
def test_equal_sizes_are_ranked_by_qid_in_numeric_order(release, tmp_path, pid, token):
    """Two subjects of the region with the size of the third released one, one numbered below it and
    one above (each on the other side as text: Q999 < Q1028 < Q10000), all kept: the three are
    ranked by QID number.
    """
    facts = read_release(release, PAIR, LANGUAGES, f"{pid}_general_{token}")[:6]
    kept = facts[2]
    # no tie in the release's own facts here
    assert facts[1]["size"] > kept["size"] > facts[3]["size"]
    triples = store_triples(facts, pid, token, LANGUAGES, top=8)
    below, above = tie_qids(triples, kept["sub"])
    ties = [add_tie(triples, pid, kept, qid, LANGUAGES) for qid in (below, above)]
    curated = curate_dump(triples.write(tmp_path / "store.nt"), pid, token, tmp_path, top=8)
    order = [below, kept["sub"], above]
    assert sorted(order) != order  # text order would rank them otherwise
    for records in curated.values():
        assert [r["sub_uri"] for r in records[2:5]] == order
    assert_release(ranked([*facts[:2], ties[0], kept, ties[1], *facts[3:]], pid, token), curated)


@pytest.mark.parametrize("side", ["below", "above"])
@pytest.mark.parametrize(("pid", "token"), TIES)
def test_a_tie_at_the_top_k_cut_keeps_the_lower_qid(release, tmp_path, pid, token, side):
    """A subject with the size of the last released one (rank top - 1) competes for the last place:
    the one with the lower QID number is kept, the other left out.
    """
    facts = read_release(release, PAIR, LANGUAGES, f"{pid}_general_{token}")[:6]
    last = facts[-1]
    triples = store_triples(facts, pid, token, LANGUAGES, top=6)
    rival = add_tie(triples, pid, last, tie_qids(triples, last["sub"])[side == "above"], LANGUAGES)
    curated = curate_dump(triples.write(tmp_path / "store.nt"), pid, token, tmp_path, top=6)
    winner, loser = (rival, last) if side == "below" else (last, rival)
    for records in curated.values():
        assert len(records) == 6 and records[-1]["sub_uri"] == winner["sub"]
        assert loser["sub"] not in {r["sub_uri"] for r in records}
    assert_release(ranked([*facts[:5], winner], pid, token), curated)


def test_the_command_line_returns_the_released_facts_of_a_small_store(release, tmp_path, capsys):
    """`culture-probe curate dlama` on each small store (one per predicate and region, as upstream
    crawled them). A store may hold no facts of the other region: --allow-empty accepts that.
    """
    for pid, token in itertools.product(SMALL, TOKENS):
        facts = read_release(release, PAIR, LANGUAGES, f"{pid}_general_{token}")[:6]
        dump = build_store(facts, pid, token, LANGUAGES, tmp_path / f"{pid}_{token}.nt", top=6)
        out = tmp_path / f"{pid}_{token}"
        argv = [
            "curate",
            "dlama",
            "--region",
            "arab",
            "--contrast",
            "west",
            "--languages",
            ",".join(LANGUAGES),
            "--predicates",
            pid,
            "--top",
            "6",
            "--endpoint",
            str(dump),
            "--out",
            str(out),
            "--allow-empty",
        ]
        code = main(argv)
        printed = capsys.readouterr()
        assert code == 0, printed.err
        assert f"to {out / PAIR}" in printed.out
        curated = {
            lang: read_records(out / PAIR / "dlama" / lang / f"{pid}_general_{token}.jsonl")
            for lang in LANGUAGES
        }
        assert_release(facts, curated)


def test_curation_through_an_oxigraph_server_returns_the_same(release, tmp_path):
    for pid in ("P106", "P19"):
        facts, curated = curate_from_release(
            release,
            pid,
            "ARAB_REGION",
            tmp_path / pid,
            top=6,
            n=6,
            endpoint=lambda dumps: oxigraph_server(dumps, max_lifetime=120),
        )
        assert_release(facts, curated)


@pytest.mark.slow
@pytest.mark.parametrize("pid", sorted(PREDICATES, key=lambda p: int(p[1:])))
def test_curation_returns_the_whole_released_arab_west_pair(release, tmp_path, pid):
    for token in TOKENS:
        facts, curated = curate_from_release(release, pid, token, tmp_path / token)
        assert_release(facts, curated)
