"""FmLAMA protocol: the paper's prompts as exact strings, the spec's worked example (mAP, mWS,
template aggregation), the v1-code compat flags, and runs on the mirror's data with tiny models of
each kind.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import numpy as np
import pytest

from culture_probe.benchmarks.fmlama.metrics import (
    average_precision,
    family_table,
    table_correlation,
)
from culture_probe.benchmarks.fmlama.task import FmlamaTask, fill, record_ranking
from culture_probe.engine.types import CandidateScores
from culture_probe.errors import CultureProbeError, UnsupportedModelError
from culture_probe.loading import load_task
from culture_probe.runner import run
from culture_probe.tasks import ScoreProbe, Skipped
from culture_probe.tasks.options import json_ready
from culture_probe.tasks.sampling import stratified_items

POOL_RANKINGS = {  # spec 5.1: dish -> ranking of the pool [beef, cheese, flour, rice, tofu, tomato]
    "mapo doufu": ["tofu", "beef", "rice", "cheese", "tomato", "flour"],
    "pizza": ["beef", "cheese", "rice", "tofu", "tomato", "flour"],
}
ROWS = [
    {
        "id": "Q1|en",
        "group": "China",
        "continent": "Asia",
        "origin": "People's Republic of China",
        "lang": "en",
        "sub_label": "mapo doufu",
        "obj_label": ["tofu", "rice"],
    },
    {
        "id": "Q2|en",
        "group": "Italy",
        "continent": "Europe",
        "origin": "Italy",
        "lang": "en",
        "sub_label": "pizza",
        "obj_label": ["cheese", "flour", "tomato"],
    },
    {
        "id": "Q3|en",
        "group": "U.S.",
        "continent": "North America",
        "origin": "United States of America",
        "lang": "en",
        "sub_label": "burger",
        "obj_label": ["beef"],
    },  # brings beef into the pool; not probed
]
VECTORS = {
    "tofu": (1, 0),
    "beef": (0.8, 0.6),
    "rice": (0.6, 0.8),
    "cheese": (0, 1),
    "flour": (0.6, -0.8),
    "tomato": (-0.6, 0.8),
}


class RankingScorer:
    """Engine stand-in: the spec's rankings as scores; "tomato" is two tokens, the rest one."""

    kind = "masked"
    identity = {"name_or_path": "rankings"}

    def score(self, requests, options=None):
        out = []
        for request in requests:
            dish = next(d for d in POOL_RANKINGS if d in request.left + request.right)
            order = POOL_RANKINGS[dish]
            tokens = np.array([2 if c == "tomato" else 1 for c in request.candidates])
            means = np.array([-float(order.index(c)) for c in request.candidates])
            out.append(CandidateScores(request.candidates, means * tokens, tokens))
        return out


def spec_seed() -> int:
    """A seed whose two-dish subset is the spec's two dishes (the third row only adds beef to the
    pool).
    """
    task = FmlamaTask("fmlama_en", FmlamaTask.Options(families=("hasParts",)), kind="masked")
    probes = [task.probe(row, "hasParts_1", "hasParts", "[X] has [Y] .", ("a",)) for row in ROWS]
    return next(
        s
        for s in range(100)
        if {p.item_id for p in stratified_items(probes, 2, task.strata, s)} == {"Q1|en", "Q2|en"}
    )


def spec_run(release, tmp_path=None, **options):
    return run(
        "fmlama_en",
        RankingScorer(),
        rows=ROWS,
        limit=2,
        seed=spec_seed(),
        families=("hasParts",),
        progress=False,
        out=tmp_path,
        data_dir=str(release),
        **options,
    )


def task_for(release, config, kind="masked", **options):
    """The FmLAMA protocol with its templates loaded from `release` (a data folder in the upstream
    layout).
    """
    return load_task(config, FmlamaTask.Options(**options), kind=kind, data_dir=str(release))[0]


def _prompts(task, row):
    return {
        p.tag: p.meta.get("prompt") if isinstance(p, ScoreProbe) else p.reason
        for p in task.build_probes([row])
    }


def test_english_prompts_are_the_papers_strings(fmlama_release):
    prompts = _prompts(task_for(fmlama_release, "fmlama_en"), ROWS[0])
    assert prompts == {
        "hasParts_1": "The food mapo doufu has the ingredients of [Y] .",
        "hasParts_2": "mapo doufu is a kind of food with [Y] .",
        "hasParts_3": "mapo doufu is a type of food, comprising [Y] as its main constituents .",
        "hasParts_4": "[Y] is part of the food mapo doufu .",
        "hasParts_5": "The food mapo doufu has part of [Y] .",
        "country_1": "In China, the food mapo doufu has the ingredients of [Y] .",
        "country_2": "In China, mapo doufu is a kind of food with [Y] .",
        "country_3": "In China, mapo doufu is a type of food, comprising [Y] as its main constituents .",
        "country_4": "In China, [Y] is part of the food mapo doufu .",
        "country_5": "In China, the food mapo doufu has part of [Y] .",
    }
    us = _prompts(task_for(fmlama_release, "fmlama_en"), ROWS[2])
    # F4
    assert us["country_1"] == "In the United States, the food burger has the ingredients of [Y] ."


def test_other_languages_follow_their_templates_and_slots(fmlama_release):
    zh = {**ROWS[0], "lang": "zh", "sub_label": "麻婆豆腐"}
    zh_prompts = _prompts(task_for(fmlama_release, "fmlama_zh"), zh)
    assert zh_prompts["country_1"] == "在中国，美食麻婆豆腐是以[Y]为主要原料制作的。"
    he = {**ROWS[1], "lang": "he", "sub_label": "פיצה"}
    he_prompts = _prompts(task_for(fmlama_release, "fmlama_he"), he)
    assert he_prompts["hasParts_1"] == "במאכל פיצה יש את המרכיבים של [Y]."
    # stored right-to-left damage kept (faithful)
    assert he_prompts["hasParts_2"] == ".[Y] הוא מאכל עם פיצה"
    names = {"he": {"Italy": "באיטליה"}}
    named = _prompts(task_for(fmlama_release, "fmlama_he", country_names=names), he)
    assert named["country_1"] == "באיטליה, במאכל פיצה יש את המרכיבים של [Y]."


def test_country_templates_without_a_name_are_skipped_and_counted(fmlama_release):
    ko = {**ROWS[1], "lang": "ko", "sub_label": "피자"}
    prompts = _prompts(task_for(fmlama_release, "fmlama_ko"), ko)
    assert prompts["hasParts_4"] == "[Y]는 음식 피자의 일부입니다."
    assert prompts["country_1"] == "no ko name for country 'Italy' (pass country_names=)"


def test_requests_keep_the_template_spacing_and_causal_models_see_the_dish():
    left, right, dish_after = fill("[Y] is part of the food [X] .", "pizza", None, "en")
    assert (left, right, dish_after) == ("", " is part of the food pizza .", True)
    left, right, dish_after = fill("美食[X]是以[Y]为主要原料制作的。", "麻婆豆腐", None, "zh")
    assert (left, right, dish_after) == ("美食麻婆豆腐是以", "为主要原料制作的。", False)
    task = FmlamaTask("fmlama_en", FmlamaTask.Options(families=("hasParts",)), kind="causal")
    probe = task.probe(
        ROWS[1], "hasParts_4", "hasParts", "[Y] is part of the food [X] .", ("a", "b")
    )
    assert probe.options.score_right and (probe.request.left, probe.request.sep) == ("", "")
    probe = task.probe(
        ROWS[1], "hasParts_1", "hasParts", "The food [X] has the ingredients of [Y] .", ("a",)
    )
    assert not probe.options.score_right and (probe.request.left, probe.request.sep) == (
        "The food pizza has the ingredients of",
        " ",
    )


def test_worked_example_map_and_groups(fmlama_release):
    result = spec_run(fmlama_release)
    cells = result.metrics["map"]["hasParts"]
    assert cells["ALL"]["mean"] == pytest.approx(65.0)  # 100 * (0.8333 + 0.4667) / 2
    assert cells["ALL"]["std"] == pytest.approx(0.0)  # the five templates rank alike here
    assert cells["China"]["mean"] == pytest.approx(100 * (1 + 2 / 3) / 2)
    assert cells["Italy"]["mean"] == pytest.approx(100 * (1 / 2 + 2 / 5 + 3 / 6) / 3)
    assert result.metrics["map_hasParts"] == pytest.approx(65.0)
    assert len(result.records) == 10 and {r["id"] for r in result.records} == {"Q1|en", "Q2|en"}


def test_worked_example_mws_from_a_vectors_file(fmlama_release, tmp_path):
    path = tmp_path / "toy.vec"
    path.write_text("".join(f"{w} {x} {y}\n" for w, (x, y) in VECTORS.items()), encoding="utf-8")
    result = spec_run(fmlama_release, vectors=str(path))
    assert result.metrics["mws"]["hasParts"]["ALL"]["mean"] == pytest.approx(0.79)
    assert "mws" not in spec_run(fmlama_release).metrics  # no vectors: mWS is left out, not faked


def test_map_mws_correlation_over_the_cells_of_a_run(fmlama_release, tmp_path):
    path = tmp_path / "toy.vec"
    path.write_text("".join(f"{w} {x} {y}\n" for w, (x, y) in VECTORS.items()), encoding="utf-8")
    result = spec_run(fmlama_release, tmp_path / "run", vectors=str(path))
    # cells ALL, China, Italy: mAP (65, 83.33, 46.67) and mWS (0.79, 0.98, 0.60) deviate by (0, +d,
    # -d) alike
    assert result.metrics["map_mws_correlation"] == {"pearson_r": pytest.approx(1.0), "n_cells": 3}
    assert (
        "Pearson r between the mAP and mWS cells: 1.00 (3 cells)."
        in (tmp_path / "run" / "report.md").read_text()
    )
    assert "map_mws_correlation" not in spec_run(fmlama_release).metrics
    # config.json names the vectors file the numbers came from, and its sha256
    recorded = json.loads((tmp_path / "run" / "config.json").read_text())["resources"]["vectors"]
    assert recorded["sources"] == [str(path)] and recorded["params"] == {
        "path": str(path),
        "language": "en",
    }
    assert (
        recorded["sha256"]
        == hashlib.sha256(hashlib.sha256(path.read_bytes()).hexdigest().encode()).hexdigest()
    )
    # an interrupted run (no metrics.json) is reported from its records, mWS included: the vectors
    # load again
    from culture_probe.report import load_run

    (tmp_path / "run" / "metrics.json").unlink()
    assert load_run(tmp_path / "run")[2]["mws"] == json_ready(result.metrics)["mws"]


def test_a_missing_vectors_file_fails_before_any_scoring(fmlama_release, tmp_path):
    class NeverAsked(RankingScorer):
        def score(self, requests, options=None):
            raise AssertionError("scored before the vectors file was checked")

    with pytest.raises(CultureProbeError, match=r"vectors file .*cc\.en\.300\.bin' does not exist"):
        run(
            "fmlama_en",
            NeverAsked(),
            rows=ROWS,
            limit=2,
            families=("hasParts",),
            progress=False,
            out=tmp_path / "run",
            vectors=str(tmp_path),
            data_dir=str(fmlama_release),
        )  # a folder without cc.en.300.bin


def test_table_correlation_pairs_cells_that_have_both_measures():
    map_table = {
        "hasParts": {
            "ALL": {"mean": 10.0},
            "A": {"mean": 20.0},
            "B": {"mean": 30.0},
            "C": {"mean": 5.0},
        },
        "country": {"ALL": {"mean": None}},
    }
    mws_table = {"hasParts": {"ALL": {"mean": 0.30}, "A": {"mean": 0.32}, "B": {"mean": 0.31}}}
    # C has no mWS and country's ALL no mAP: r over (10, 20, 30) and (0.30, 0.32, 0.31) = 0.5 (see
    # test_metrics)
    assert table_correlation(map_table, mws_table) == {
        "pearson_r": pytest.approx(0.5),
        "n_cells": 3,
    }
    assert (
        table_correlation(
            {"hasParts": {"ALL": {"mean": 1.0}}}, {"hasParts": {"ALL": {"mean": 0.1}}}
        )
        is None
    )


def test_v1_code_compat_flags(fmlama_release):
    # "tomato" (2 tokens) leaves; AP still over |G|
    capped = spec_run(fmlama_release, max_candidate_tokens=1)
    italy = (1 / 2 + 2 / 5) / 3
    assert capped.metrics["map"]["hasParts"]["Italy"]["mean"] == pytest.approx(100 * italy)
    ranked = spec_run(fmlama_release, max_candidate_tokens=1, ap_denominator="ranked")
    assert ranked.metrics["map"]["hasParts"]["Italy"]["mean"] == pytest.approx(
        100 * (1 / 2 + 2 / 5) / 2
    )
    # both are listed with the side that applied: only a cap of 10 is the v1 code's (F2), "ranked"
    # is (F2b)
    sides = {d["id"]: d["side"] for d in ranked.config.deviations}
    assert (sides["F2"], sides["F2b"]) == ("default", "upstream")
    defaults = {d["id"]: d["side"] for d in spec_run(fmlama_release).config.deviations}
    assert (defaults["F2"], defaults["F2b"]) == ("default", "default")


def test_template_aggregation_is_mean_and_sample_std():
    per_template = {
        f"hasParts_{i}": {"map": {"ALL": v}}
        for i, v in enumerate((65.0, 60.0, 70.0, 55.0, 62.5), 1)
    }
    cell = family_table(per_template, "map")["hasParts"]["ALL"]
    assert cell["mean"] == pytest.approx(62.5) and cell["std"] == pytest.approx(5.59, abs=0.005)


def test_records_keep_enough_of_the_ranking_for_ap_and_mws():
    rng = random.Random(0)
    pool = [f"c{i}" for i in range(200)]
    for _ in range(50):
        ranking = rng.sample(pool, len(pool))
        gold = rng.sample(pool, rng.randint(1, 8))
        rank = {c: i for i, c in enumerate(ranking, 1)}
        record = {
            "gold": gold,
            "top": ranking[: len(gold) + 10],
            "gold_ranks": [rank[g] for g in gold],
        }
        rebuilt = record_ranking(record)
        assert average_precision(rebuilt, set(gold)) == pytest.approx(
            average_precision(ranking, set(gold))
        )
        assert rebuilt[: len(gold)] == ranking[: len(gold)]


def test_skipped_probes_do_not_enter_the_metrics():
    task = FmlamaTask("fmlama_ko", kind="masked")  # no templates needed to count skipped probes
    records = [
        task.to_record(
            Skipped("Q2|ko", "no ko name", tag="country_1", meta={"family": "country"}), None
        )
    ]
    metrics = task.compute_metrics(records)
    assert (
        metrics["n_skipped"] == 1
        and metrics["skipped"] == {"no ko name": 1}
        and "map" not in metrics
    )


# ---------------------------------------------------------------- end to end with tiny models


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    import os

    if not Path(os.environ.get("CULTURE_PROBE_MIRROR") or "/nonexistent").is_dir():
        pytest.skip("../shared/mirror is absent: these runs are on the real FmLAMA dishes")
    from culture_probe.data.registry import load_benchmark
    from culture_probe.models import save_tiny, train_tokenizer

    rows = load_benchmark("fmlama_en")["test"]
    texts = [t for _, _, t in load_task("fmlama_en", kind="masked")[0].templates("en")] + rows[
        "sub_label"
    ][:200]
    texts += [item for labels in rows["obj_label"] for item in labels]
    root = tmp_path_factory.mktemp("tiny")
    return {
        arch: save_tiny(
            root / arch, arch, train_tokenizer(texts, tok, model_kind=kind, vocab_size=800)
        )
        for arch, tok, kind in (
            ("bert", "wordpiece", "masked"),
            ("gpt2", "bpe", "causal"),
            ("t5", "metaspace", "seq2seq"),
        )
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    ("arch", "families"),
    [("bert", ("hasParts", "country")), ("gpt2", ("hasParts",)), ("t5", ("hasParts",))],
)
def test_mirror_items_end_to_end_with_tiny_models(mirror, tiny_models, arch, families, tmp_path):
    # every dish is ranked against all 1,287 ingredients: keep it small
    limit = 2 if len(families) == 2 else 1
    result = run(
        "fmlama_en",
        str(tiny_models[arch]),
        limit=limit,
        families=families,
        out=tmp_path / "run",
        progress=False,
    )
    assert len(result.records) == limit * 5 * len(families)
    assert {r["n_candidates"] for r in result.records} == {1287}
    for record in result.records:
        assert all(1 <= rank <= 1287 for rank in record["gold_ranks"])
        assert record["prediction"] == record["top"][0]
    assert set(result.metrics["map"]) == set(families)

    # mAP of the hasParts family by hand from the records: the mean over templates of the mean
    # per-dish AP
    def ap(record):  # (1/|G|) sum over the golds, best ranked first, of P@(its rank)
        ranks = sorted(set(record["gold_ranks"]))
        return sum((i + 1) / rank for i, rank in enumerate(ranks)) / len(set(record["gold"]))

    templates = sorted({r["template"] for r in result.records if r["family"] == "hasParts"})
    per_template = [
        np.mean([ap(r) for r in result.records if r["template"] == t]) for t in templates
    ]
    assert result.metrics["map_hasParts"] == pytest.approx(100 * np.mean(per_template))
    assert (tmp_path / "run" / "report.md").read_text().count("![") >= 2


# ---------------------------------------------------------------- chat mode (paper Table 3/13)


class ReplyScorer:
    """A chat model stand-in: names the gold ingredients of mapo doufu, and nothing right for other
    dishes.
    """

    kind = "causal"
    identity = {"name_or_path": "replies"}

    def generate(self, prompts, options):
        assert options.chat
        return [
            "The food mapo doufu has the ingredients of Tofu, rices and chili."
            if "mapo" in p
            else "Pineapple"
            for p in prompts
        ]


def test_chat_prompts_are_the_papers_strings(fmlama_release):
    task = task_for(fmlama_release, "fmlama_cs_en_en", kind="causal", mode="chat")
    poutine = {**ROWS[2], "sub_label": "poutine"}
    prompts = {p.tag: p.prompt for p in task.build_probes([poutine])}
    assert (
        prompts["hasParts_1_chat0"]
        == "The food poutine has the ingredients of [] . Please fill the sentence."
    )
    assert prompts["hasParts_1_chat1"] == (
        "The food poutine has the ingredients of [] . Please fill the sentence with only one entity."
    )
    assert prompts["country_1_chat0"] == (
        "In the United States, the food poutine has the ingredients of [] . Please fill the sentence."
    )
    zh_task = task_for(fmlama_release, "fmlama_cs_zh_zh", kind="causal", mode="chat")
    zh = {**ROWS[0], "lang": "zh", "sub_label": "麻婆豆腐"}
    zh_prompts = {p.tag: p.prompt for p in zh_task.build_probes([zh])}
    assert (
        zh_prompts["hasParts_1_chat1"]
        == "美食麻婆豆腐是以[]为主要原料制作的。请用一个词填充这个句子。"
    )
    with pytest.raises(UnsupportedModelError, match="chat mode generates replies"):
        FmlamaTask("fmlama_en", FmlamaTask.Options(mode="chat"), kind="masked")


def test_chat_replies_are_split_and_matched(fmlama_release):
    result = run(
        "fmlama_cs_en_en",
        ReplyScorer(),
        rows=ROWS[:2],
        families=("hasParts",),
        mode="chat",
        data_dir=str(fmlama_release),
        progress=False,
    )
    mapo = result.records[0]
    # "rices" -> "rice", case folded
    assert mapo["items"] == ["Tofu", "rices", "chili"] and mapo["correct"]
    assert not result.records[2]["correct"]
    assert result.metrics["chat"]["hasParts_1 / 0"] == {"ALL": 50.0, "China": 100.0, "Italy": 0.0}
    assert result.metrics["chat_accuracy_best"] == 50.0
    assert "F-chat" in {d["id"] for d in result.config.deviations}


class SamplingReplyScorer(ReplyScorer):
    """ReplyScorer that also takes the sampling arguments, and remembers them."""

    def __init__(self):
        self.calls = []

    def generate(self, prompts, options):
        self.calls.append(
            {k: v for k, v in (("temperature", options.temperature), ("seed", options.seed)) if v}
        )
        return super().generate(prompts, options)


def test_chat_sampling_uses_the_papers_temperature_and_the_runs_seed(fmlama_release):
    scorer = SamplingReplyScorer()
    result = run(
        "fmlama_cs_en_en",
        scorer,
        rows=ROWS[:2],
        families=("hasParts",),
        mode="chat",
        data_dir=str(fmlama_release),
        chat_decoding="sample",
        seed=5,
        progress=False,
    )
    assert scorer.calls and all(call == {"temperature": 0.7, "seed": 5} for call in scorer.calls)
    config = result.config.to_json()
    assert (
        config["options"]["chat_decoding"] == "sample"
        and config["options"]["chat_temperature"] == 0.7
    )
    assert config["run"]["seed"] == 5 and config["seed_used"]  # a resumed run must keep the seed
    # sampling is the paper's decoding, but not its 1,024-token budget: F8 stays on the library's
    # side sampling, not 1,024 tokens
    assert next(d["side"] for d in config["deviations"] if d["id"] == "F8") == "partial"
    assert (
        "temperature 0.7" in config["protocol"]["chat_decoding"]
        and "seed 5" in config["protocol"]["chat_decoding"]
    )


def test_chat_decodes_greedily_by_default_as_the_spec_says(fmlama_release):
    scorer = SamplingReplyScorer()
    result = run(
        "fmlama_cs_en_en",
        scorer,
        rows=ROWS[:1],
        families=("hasParts",),
        mode="chat",
        data_dir=str(fmlama_release),
        progress=False,
    )
    assert scorer.calls == [{}]  # no temperature, no seed: Scorer.generate's greedy path
    assert not result.config.seed_used
    assert "decoded greedily" in next(
        d["description"] for d in result.config.deviations if d["id"] == "F8"
    )


@pytest.fixture(scope="module")
def tiny_chat_model(tmp_path_factory):
    """A tiny GPT-2 whose tokenizer knows the fixture rows' words (no mirror needed)."""
    from culture_probe.models import save_tiny, train_tokenizer

    texts = [row["sub_label"] for row in ROWS] + [item for row in ROWS for item in row["obj_label"]]
    texts += [
        "What are the ingredients of this food? The food contains tofu, rice, cheese and beef."
    ]
    tokenizer = train_tokenizer(texts, "bpe", model_kind="causal", vocab_size=300)
    return save_tiny(tmp_path_factory.mktemp("tiny_chat") / "gpt2", "gpt2", tokenizer)


@pytest.mark.slow
def test_chat_sampling_end_to_end_gives_each_dish_the_same_reply_whatever_else_runs(
    tiny_chat_model,
):
    from culture_probe.engine import Scorer

    scorer = Scorer.from_pretrained(tiny_chat_model)
    scorer.tokenizer.chat_template = (
        "{% for m in messages %}user: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant:{% endif %}"
    )
    options = {
        "families": ("hasParts",),
        "mode": "chat",
        "chat_decoding": "sample",
        "chat_max_new_tokens": 8,
        "progress": False,
    }
    both = run("fmlama_cs_en_en", scorer, rows=ROWS[:2], seed=1, **options).records
    alone = run("fmlama_cs_en_en", scorer, rows=ROWS[1:2], seed=1, **options).records
    assert [r["reply"] for r in both[2:]] == [r["reply"] for r in alone]
    assert [r["reply"] for r in alone] == scorer.generate(
        [r["prompt"] for r in alone], max_new_tokens=8, chat=True, temperature=0.7, seed=1
    )
    other_seed = run("fmlama_cs_en_en", scorer, rows=ROWS[:2], seed=2, **options).records
    assert [r["reply"] for r in other_seed] != [r["reply"] for r in both]
