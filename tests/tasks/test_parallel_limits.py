"""A `--limit` subset of a multilingual benchmark draws parallel units: a DLAMA fact (its release
id) or an X-FaKT entity, each asked in every language of the config, stratified by the other strata,
so that consistency across languages and paired language comparisons exist at smoke size (drawn per
language, English and Arabic shared almost no fact). A benchmark without such units draws as before.
A run that cannot report consistency says why, in `results.omitted` and the report.
"""

from __future__ import annotations

import json
import math
import random
from fractions import Fraction

import pytest
from dlama_fixture import TableScorer, spec_table, write_dlama
from stand_ins import NoIdeaScorer

from culture_probe import run
from culture_probe.benchmarks.dlama.task import DlamaOptions, DlamaTask
from culture_probe.errors import CultureProbeError
from culture_probe.tasks import Skipped
from culture_probe.tasks.probes import Record
from culture_probe.tasks.sampling import Smoke

CULTURES, PREDICATES = ("arab", "west"), ("P17", "P30")


def fact_probes(per_cell: int, lacking: dict[str, tuple[str, ...]] | None = None) -> list[Skipped]:
    """DLAMA-like probes (the sampler reads only ids and meta): `per_cell` facts of each culture x
    predicate, each in English and Arabic but for the languages `lacking` names per fact id.
    """
    probes = []
    for culture in CULTURES:
        for predicate in PREDICATES:
            for i in range(per_cell):
                uuid = f"{predicate}_{culture}_{i}"
                for language in ("en", "ar"):
                    if language not in (lacking or {}).get(uuid, ()):
                        meta = {
                            "uuid": uuid,
                            "language": language,
                            "culture": culture,
                            "predicate": predicate,
                        }
                        probes.append(Skipped(f"{uuid}|{language}", "", meta=meta))
    return probes


def facts_of(probes) -> dict[str, set[str]]:
    """{fact id: the languages it is probed in}."""
    out: dict[str, set[str]] = {}
    for p in probes:
        out.setdefault(p.meta["uuid"], set()).add(p.meta["language"])
    return out


def dlama(seed: int = 0, **options) -> DlamaTask:
    kind = "causal" if options.get("mode") == "generate" else "masked"
    return DlamaTask("dlama_arab_west", DlamaOptions(**options), kind=kind, seed=seed)


# ---------------------------------------------------------------- drawing


def test_a_limit_draws_that_many_facts_each_in_every_language_across_culture_and_predicate():
    probes = fact_probes(5)
    for seed in range(5):
        task = dlama(seed)
        assert (task.limit_unit, task.limit_strata) == ("facts", ("culture", "predicate"))
        for limit in range(1, 9):
            facts = facts_of(task.sample(probes, limit))
            assert len(facts) == limit and all(
                languages == {"en", "ar"} for languages in facts.values()
            )
            cells = {tuple(uuid.split("_")[:2]) for uuid in facts}
            assert len(cells) == min(limit, 4)  # every culture x predicate before any twice
        assert task.sample(probes, 3) == task.sample(probes, 3)  # seeded
    assert len({frozenset(facts_of(dlama(s).sample(probes, 3))) for s in range(6)}) > 1
    # 0.3 of each cell's 5 facts, rounded up: 2 of each
    share = facts_of(dlama().sample(probes, 0.3))
    assert len(share) == 8 and all(languages == {"en", "ar"} for languages in share.values())


def _old_groups(probes, strata):
    """The old samplers' cells: each item in the cell of its first probe's strata values."""
    first = {}
    for probe in probes:
        first.setdefault(probe.item_id, probe)
    groups = {}
    for item, probe in first.items():
        groups.setdefault(tuple(str(probe.meta.get(k)) for k in strata), []).append(item)
    return groups


def _old_stratified_items(probes, limit, strata, seed):
    """The limit sampler before parallel units (a reference for tasks without them), unchanged."""
    groups = _old_groups(probes, strata)
    if sum(len(items) for items in groups.values()) <= limit:
        return list(probes)
    rng = random.Random(seed)
    keys = sorted(groups)
    rng.shuffle(keys)
    queues = [rng.sample(groups[k], len(groups[k])) for k in keys]
    chosen = set()
    while len(chosen) < limit:
        for queue in queues:
            if queue and len(chosen) < limit:
                chosen.add(queue.pop())
    return [p for p in probes if p.item_id in chosen]


def _old_stratified_share(probes, share, strata, seed):
    groups = _old_groups(probes, strata)
    rng = random.Random(seed)
    exact = Fraction(repr(share))
    chosen = {
        i for k in sorted(groups) for i in rng.sample(groups[k], math.ceil(exact * len(groups[k])))
    }
    return [p for p in probes if p.item_id in chosen]


def test_a_task_without_parallel_units_draws_items_exactly_as_before():
    probes = fact_probes(4, lacking={"P17_arab_0": ("ar",), "P30_west_1": ("en",)})
    for seed in range(4):
        task = dlama(seed)
        # a benchmark whose items are not asked in every language (FmLAMA, CAMeL, MAPS)
        task.parallel = None
        assert (task.limit_unit, task.limit_strata) == ("facts", task.strata)
        for limit in (1, 3, 8, 15, 40):
            assert task.sample(probes, limit) == _old_stratified_items(
                probes, limit, task.strata, seed
            )
        for share in (0.1, 0.5):
            assert task.sample(probes, share) == _old_stratified_share(
                probes, share, task.strata, seed
            )
        assert task.smoke_limit(probes) == 8  # one item of each language x culture x predicate cell


@pytest.mark.parametrize("per_cell", [1, 2])
def test_the_smoke_limit_counts_facts_and_gives_every_language_cell_whatever_the_seed(per_cell):
    probes = fact_probes(5)
    task = dlama()
    task.smoke = Smoke(per_cell, "the table needs them")
    # culture x predicate cells, each fact in both languages
    assert task.smoke_limit(probes) == 4 * per_cell
    for seed in range(30):
        task.seed = seed
        assert task.smoke_shortfall(probes, task.sample(probes, 4 * per_cell)) is None
        short = task.smoke_shortfall(probes, task.sample(probes, 4 * per_cell - 1))
        assert short is not None and "language x culture x predicate cells" in short


def test_facts_missing_in_a_language_raise_the_smoke_limit_to_what_guarantees_every_cell():
    """Three of the five Arab P17 facts lack Arabic: a draw of that cell may give those three first,
    so four rounds are needed before its Arabic cell is sure to get one.
    """
    probes = fact_probes(5, lacking={f"P17_arab_{i}": ("ar",) for i in range(3)})
    task = dlama()
    assert task.smoke_limit(probes) == 4 * 4
    for seed in range(60):
        task.seed = seed
        assert task.smoke_shortfall(probes, task.sample(probes, 16)) is None
    misses = []
    for seed in range(60):
        task.seed = seed
        misses.append(task.smoke_shortfall(probes, task.sample(probes, 12)))
    assert any(misses)  # three rounds are not enough for some seed


# ---------------------------------------------------------------- runs of two languages


@pytest.fixture
def dlama_dir(tmp_path):
    return write_dlama(tmp_path / "dlama")


@pytest.mark.parametrize(("limit", "facts"), [(2, 2), ("smoke", 2), (0.5, 3)])
def test_a_limited_dlama_run_of_two_languages_has_consistency_and_a_paired_comparison(
    dlama_dir, tmp_path, limit, facts
):
    """Drawn per language, `--limit 2` asked one English and one Arabic fact of different ids: no
    pair at all.
    """
    out = tmp_path / "run"
    result = run(
        "dlama_arab_west",
        TableScorer(spec_table()),
        data_dir=str(dlama_dir),
        limit=limit,
        out=out,
        progress=False,
    )
    pair = result.metrics["consistency"]["pairs"]["ar/en"]
    assert pair["n"] == facts and pair["unpaired"] == {"only_a": 0, "only_b": 0}
    assert pair["difference"]["of"] == "P@1 in ar minus P@1 in en"
    estimates = result.metrics["results"]["by_language_pair"]["ar/en"]
    assert estimates["rankc"]["n"] == estimates["both_right"]["n"] == facts
    assert not any(
        key.startswith(("rankc", "both_right")) for key in result.metrics["results"]["omitted"]
    )
    assert result.config.subset["sampled"] == facts and len(result.records) == 2 * facts
    report = (out / "report.md").read_text(encoding="utf-8")
    assert (
        f"{facts} of 5 facts, each asked in ar and en, drawn with seed 0 in turn from each culture x predicate"
        in report
    )
    assert "## Consistency across languages" in report


def test_resuming_a_limited_run_drawn_per_language_is_refused(dlama_dir, tmp_path):
    """A run made before facts were drawn in every language: the same limit now draws other
    units.
    """
    out = tmp_path / "run"
    run(
        "dlama_arab_west",
        TableScorer(spec_table()),
        data_dir=str(dlama_dir),
        limit=2,
        out=out,
        progress=False,
    )
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    config["subset"]["strata"] = ["language", "culture", "predicate"]
    del config["subset"]["parallel"]
    (out / "config.json").write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(CultureProbeError, match=r"Cannot resume .*its --limit subset was drawn as"):
        run(
            "dlama_arab_west",
            TableScorer(spec_table()),
            data_dir=str(dlama_dir),
            limit=2,
            out=out,
            resume=True,
        )


# ---------------------------------------------------------------- why consistency is not reported


def ranked(language, uuid, *, right=True, n=4, aligned_set="s", keep_uuid=True):
    """A DLAMA ranking record: `n` aligned candidates ranked in QID order, the first gold when
    `right`.
    """
    qids = [f"Q{k}" for k in range(n)]
    fields = {
        "uuid": uuid,
        "language": language,
        "predicate": "P30",
        "culture": "arab",
        "gold": ["c0" if right else "c1"],
        "obj_uri": ["Q0" if right else "Q1"],
        "prediction": "c0",
        "top": ["c0"],
        "n_candidates": n,
        "ranked_ids": qids,
        "n_aligned": n,
        "aligned_set": aligned_set,
    }
    if not keep_uuid:
        del fields["uuid"]
    return Record(f"{uuid}|{language}", "", "main", fields, kind="score")


def generated(language, uuid, right=True):
    fields = {
        "uuid": uuid,
        "language": language,
        "predicate": "P30",
        "culture": "arab",
        "gold": ["Asia"],
        "obj_uri": ["Q48"],
        "reply": "Asia" if right else "Europe",
        "overlap": right,
        "exact": right,
    }
    return Record(f"{uuid}|{language}", "", "main", fields, kind="generate")


def omitted(task, records) -> dict[str, str]:
    metrics = task.compute_metrics(records)
    return {
        k: v
        for k, v in metrics["results"]["omitted"].items()
        if k.startswith(("rankc", "both_right"))
    }


def test_one_language_says_that_consistency_needs_two(dlama_dir, tmp_path):
    out = tmp_path / "en"
    result = run(
        "dlama_arab_west",
        TableScorer(spec_table()),
        data_dir=str(dlama_dir),
        language="en",
        out=out,
        progress=False,
    )
    left_out = result.metrics["results"]["omitted"]
    assert (
        "this run answered in en only" in left_out["rankc"]
        and left_out["both_right"] == left_out["rankc"]
    )
    report = (out / "report.md").read_text(encoding="utf-8")
    section = report.split("## Consistency across languages", 1)[1].split("\n## ", 1)[0]
    assert (
        "- **rankc** is not reported: it compares two languages' answers to the same facts"
        in section
    )
    assert "culture-probe consistency RUN_A RUN_B" in section


def test_languages_without_a_shared_fact_say_so():
    records = [ranked("en", "f1"), ranked("en", "f2"), ranked("ar", "f3")]
    why = omitted(dlama(), records)
    assert why["rankc"] == why["both_right"]
    assert "answered no fact in common (1 in ar, 2 in en)" in why["rankc"]


def test_generated_answers_get_agreement_and_say_why_rankc_is_missing():
    task = dlama(mode="generate")
    records = [
        generated(lang, f"f{i}", right=i % 2 == 0) for i in range(4) for lang in ("en", "ar")
    ]
    metrics = task.compute_metrics(records)
    assert list(metrics["results"]["by_language_pair"]["ar/en"]) == ["both_right"]
    assert "rank no candidates" in metrics["results"]["omitted"]["rankc"]
    assert "both_right" not in metrics["results"]["omitted"]


def test_records_without_fact_ids_say_they_cannot_be_aligned():
    records = [ranked(lang, f"f{i}", keep_uuid=False) for i in range(3) for lang in ("en", "ar")]
    why = omitted(dlama(), records)
    assert set(why) == {"rankc", "both_right"} and "carry no fact id (`uuid`" in why["rankc"]


def test_a_pair_left_out_or_ranked_over_other_candidates_is_named_per_pair():
    # es shares no fact with ar or en; en and ar rank f2 over different candidate sets, f1 over the
    # same
    records = [ranked("en", "f1"), ranked("ar", "f1"), ranked("es", "f9")]
    records += [ranked("en", "f2"), ranked("ar", "f2", aligned_set="other")]
    why = omitted(dlama(), records)
    assert set(why) == {
        "rankc (ar/es)",
        "both_right (ar/es)",
        "rankc (en/es)",
        "both_right (en/es)",
    }
    assert why["rankc (ar/es)"].startswith("ar and es answered no fact in common (2 and 1 facts)")
    other = omitted(dlama(), [ranked("en", "f2"), ranked("ar", "f2", aligned_set="other")])
    assert other == {
        "rankc": "no fact was ranked over the same aligned candidates in both languages (1 over "
        "candidate sets that differ, 0 not ranked)"
    }


@pytest.mark.parametrize(
    ("config", "what"), [("xfakt_in_context", "in-context"), ("xfakt_counter_factual", "counter")]
)
def test_xfakt_parts_that_are_not_aligned_say_so(mirror, tmp_path, config, what):
    out = tmp_path / "run"
    result = run(config, NoIdeaScorer(), judge="string", limit="smoke", out=out, progress=False)
    left_out = result.metrics["results"]["omitted"]
    assert left_out["rankc"] == left_out["both_right"] and what in left_out["rankc"]
    assert "does not ask one question in every language" in left_out["rankc"]
    assert "parallel" not in result.config.subset  # drawn per question, as before
    assert "- **rankc** is not reported" in (out / "report.md").read_text(encoding="utf-8")


def test_xfakt_factual_recall_draws_entities_in_every_language_and_generation_has_no_rankc(mirror):
    result = run("xfakt_factual_recall", NoIdeaScorer(), judge="string", limit=2, progress=False)
    entities = {(r["country"], r["entity_idx"]) for r in result.records}
    assert len(entities) == 2 and len(result.records) == 2 * 13
    assert result.config.subset["unit"] == "entities" and result.config.subset["strata"] == [
        "country"
    ]
    pairs = result.metrics["results"]["by_language_pair"]
    assert len(pairs) == 78 and all(list(p) == ["both_right"] for p in pairs.values())
    assert "rank no candidates" in result.metrics["results"]["omitted"]["rankc"]
    ranked_run = run(
        "xfakt_factual_recall",
        NoIdeaScorer(),
        mode="rank",
        rank_prompt="plain",
        limit=2,
        progress=False,
    )
    assert all(
        {"rankc", "both_right"} <= set(p)
        for p in ranked_run.metrics["results"]["by_language_pair"].values()
    )
