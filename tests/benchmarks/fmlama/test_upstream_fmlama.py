"""FmLAMA under `--protocol upstream` against minimal excerpts of the released v1 code
(lizhou21/FmLAMA-master at commit f77d30d5, `access_LMs/`), restated here in our own words: the
masked path (each dish's gold set string whole, candidates tokenized on their own, at most 10
pieces), the T5/mT5 path (`re.sub("[X]", ...)` then `re.sub("[C]", ...)`, no cap), and the scorer
(AP over the golds found in the ranking, dishes without one dropped, each template's mAP rounded to
2 decimals, 10 named origin groups). Each test runs the library with `protocol="upstream"`, compares
it with the excerpt, and shows where the default protocol differs.

Sources (lines as the upstream audit counted them):
- `run_prompting_experiment.py`: the T5 path's gold `list(ast.literal_eval(obj_label))` (:79, :92)
  and fill `re.sub("[X]", ...)`, then `re.sub("[C]", ...)` for country templates (:108-111); the
  masked path's bare `tokenizer.tokenize(obj)` with `max_length` clipped to 10 (:274-275) and longer
  candidates dropped (:285);
- `eval_utils.py`: the stripped template and dish (:101, :105); `get_ranking` sorts the candidates
  grouped by piece count, best first, and lists the gold ranks ascending (:24-59); `get_T5_ranking`
  scores `<extra_id_0> answer <extra_id_1>` (:210 and following);
- `utils.py`: `fill_template_with_values` maps every origin through the 33-country tables (:92-110),
  English's `"United States of America": " the United States"` (:155);
- `metrics_utils.py`: `COUNTRY`, 10 named groups and Others (:21-36); `calculate_map` divides by the
  golds found (:123-133); rows without a found gold are dropped (:160-161); `round(100 * map, 2)`
  (:216).

The rows below keep to origins in v1's 33-country tables: any other origin raises KeyError in v1
(deviation F5), and every named group has a dish, as v1's scorer divides by zero on an empty one.
"""

from __future__ import annotations

import hashlib
import re
import statistics

import numpy as np
import pytest
from mlama_masked import roberta_style as roberta_style_model
from mlama_masked import upstream_masked_ranking

from culture_probe.benchmarks.fmlama.data import group_of
from culture_probe.benchmarks.fmlama.task import FmlamaTask, fill
from culture_probe.engine import Scorer
from culture_probe.engine.types import CandidateScores
from culture_probe.errors import UnknownNameError
from culture_probe.runner import run

HASPARTS = [
    "The food [X] has the ingredients of [Y] .",
    "[X] is a kind of food with [Y] .",
    "[X] is a type of food, comprising [Y] as its main constituents .",
    "[Y] is part of the food [X] .",
    "The food [X] has part of [Y] .",
]  # the released en templates hasParts_1..5
DISHES = [
    ("United States of America", "burger", ["beef", "bread"]),
    ("France", "crepe", ["flour", "egg", "milk"]),
    ("Italy", "pizza", ["cheese", "flour", "tomato"]),
    ("India", "dal", ["lentil", "salt"]),
    ("Japan", "sushi", ["rice", "fish"]),
    ("United Kingdom", "scone", ["flour", "butter"]),
    ("Spain", "tortilla", ["egg", "potato"]),
    ("People's Republic of China", "mapo doufu", ["tofu", "rice"]),
    ("Turkey", "kebab", ["beef", "salt"]),
    ("Mexico", "Caesar salad", ["lettuce", "cheese"]),
    ("Germany", "bratwurst", ["pork", "salt"]),
    (
        "Russia",
        "borscht",
        ["beetroot", "cabbage", "potato", "carrot", "onion", "beef", "dill", "salt", "garlic"],
    ),
]
ROWS = [
    {
        "id": f"Q{i}|en",
        "group": group_of(origin),
        "continent": None,
        "origin": origin,
        "lang": "en",
        "sub_label": dish,
        "obj_label": gold,
    }
    for i, (origin, dish, gold) in enumerate(DISHES)
]
# metrics_utils.COUNTRY: the named groups of v1's scorer; every other origin is "Others".
V1_COUNTRY = {
    "United States of America": "U.S.",
    "France": "France",
    "Italy": "Italy",
    "India": "India",
    "Japan": "Japan",
    "United Kingdom": "U.K.",
    "Spain": "Spain",
    "People's Republic of China": "China",
    "Turkey": "Turkey",
    "Mexico": "Mexico",
}
# utils.English2English for the origins above (the rest map to themselves).
V1_ENGLISH = {
    "People's Republic of China": "China",
    "United States of America": " the United States",
    "United Kingdom": "the United Kingdom",
}


def test_the_upstream_profile_per_model_kind():
    v1 = {
        "split_gold": False,
        "ap_denominator": "ranked",
        "group_set": "v1_code",
        "round_template_map": True,
        "country_names": {"en": {"United States of America": " the United States"}},
    }
    assert FmlamaTask.options_for("upstream", {}, "masked") == FmlamaTask.Options(
        **v1, max_candidate_tokens=10, candidate_tokenization="alone"
    )
    assert FmlamaTask.options_for("upstream", {}, "seq2seq") == FmlamaTask.Options(
        **v1, fill="upstream_regex"
    )
    assert FmlamaTask.options_for("upstream", {}, "causal") == FmlamaTask.Options(
        chat_decoding="sample", chat_temperature=0.7, chat_max_new_tokens=1024
    )
    options = FmlamaTask.options_for("upstream", {}, "masked")
    sides = {
        d["id"]: d["side"]
        for d in FmlamaTask("fmlama_en", options, kind="masked").applied_deviations()
    }
    assert sides == {
        "F1": "upstream",
        "F2": "upstream",
        "F2b": "upstream",
        "F4": "upstream",
        "F5": "default",
        "F7": "default",
        "F9": "upstream",
        "F10": "upstream",
        "F11": "upstream",
    }
    chat = FmlamaTask(
        "fmlama_cs_en_en", FmlamaTask.Options(mode="chat", split_gold=False), kind="causal"
    )
    # F1 concerns the ranking: chat replies match ingredients
    assert chat.gold(ROWS[0]) == ["beef", "bread"]
    with pytest.raises(UnknownNameError, match="Unknown value of option group_set 'v1'"):
        FmlamaTask.Options(group_set="v1")


# ---------------------------------------------------------------- v1's scorer


def v1_template_map(found: list[tuple[str, list[int]]]) -> dict[str, float]:
    """metrics_utils.compute_mAP for one template: `found` holds (origin, 0-based ranks of the golds
    found, ascending) per dish, dishes without one already dropped; AP = mean over the found golds
    of (j + 1) / (rank_j + 1); mAP = round(100 * mean AP, 2) per named origin, for Others (every
    other origin) and for all dishes.
    """

    def m_ap(rows: list[list[int]]) -> float:
        return round(
            100
            * sum(
                sum((j + 1) / (r + 1) for j, r in enumerate(ranks)) / len(ranks) for ranks in rows
            )
            / len(rows),
            2,
        )

    cells = {
        label: m_ap([ranks for o, ranks in found if o == origin])
        for origin, label in V1_COUNTRY.items()
    }
    cells["Others"] = m_ap([ranks for o, ranks in found if o not in V1_COUNTRY])
    cells["ALL"] = m_ap([ranks for _, ranks in found])
    return cells


def v1_gold(row) -> str:
    """The v1 gold of a dish: the released set string's one element (the loader split it on ",
    ").
    """
    return ", ".join(row["obj_label"])


# ---------------------------------------------------------------- the masked path


@pytest.fixture(scope="module")
def roberta_style():
    """A tiny RoBERTa-style masked model trained on the rows' words: short gold strings are a few
    pieces, borscht's more than 10.
    """
    texts = [
        t.replace("[X]", dish).replace("[Y]", ", ".join(gold))
        for _, dish, gold in DISHES
        for t in HASPARTS
    ]
    return roberta_style_model(texts * 10, vocab_size=400, seed=2)


def test_masked_map_of_whole_gold_strings_capped_at_10_pieces(
    roberta_style, fmlama_release, tmp_path
):
    model, tok = roberta_style
    pool = sorted({v1_gold(row) for row in ROWS})
    lengths = {c: len(tok.tokenize(c)) for c in pool}
    # the cap bites once
    assert lengths[v1_gold(ROWS[-1])] > 10 and sum(n <= 10 for n in lengths.values()) >= 8
    runs = {
        p: run(
            "fmlama_en",
            Scorer(model, tok),
            rows=ROWS,
            families=("hasParts",),
            data_dir=str(fmlama_release),
            protocol=p,
            out=tmp_path / p,
            progress=False,
        )
        for p in ("upstream", "default")
    }
    upstream = runs["upstream"]
    sides = {d["id"]: d["side"] for d in upstream.config.deviations}
    assert {i for i, side in sides.items() if side == "upstream"} == {
        "F1",
        "F2",
        "F2b",
        "F9",
        "F10",
        "F11",
    }
    assert "| F10 |" in (tmp_path / "upstream" / "report.md").read_text(encoding="utf-8")
    expected: dict[str, dict[str, float]] = {}
    for number, template in enumerate(HASPARTS, 1):
        relation, found = f"hasParts_{number}", []
        for row in ROWS:
            ranking = [
                c
                for c, _ in upstream_masked_ranking(
                    model, tok, template, row["sub_label"], pool, max_pieces=10
                )
            ]
            ranks = [i for i, c in enumerate(ranking) if c == v1_gold(row)]
            record = next(
                r for r in upstream.records if r["id"] == row["id"] and r["template"] == relation
            )
            assert record["gold"] == [v1_gold(row)] and record["n_candidates"] == len(ranking)
            assert record["gold_ranks"] == [ranks[0] + 1 if ranks else None]
            if ranks:  # v1's scorer drops a dish whose gold was not ranked
                found.append((row["origin"], ranks))
        expected[relation] = v1_template_map(found)
        assert upstream.metrics["templates"][relation]["map"] == pytest.approx(
            expected[relation], abs=1e-9
        )
    table = upstream.metrics["map"]["hasParts"]
    for group, cell in table.items():
        assert cell["mean"] == pytest.approx(
            statistics.fmean(expected[r][group] for r in expected), abs=1e-9
        )
    assert "Germany" not in table and "Russia" not in table  # Others in v1's 10-group scorer
    # the default: ingredients split (a larger pool), in-context ids, no cap, AP over |G|, the
    # paper's 14 groups
    default = runs["default"]
    assert {r["n_candidates"] for r in default.records} == {
        len({i for row in ROWS for i in row["obj_label"]})
    }
    assert {"Germany", "Russia"} <= set(default.metrics["map"]["hasParts"])


# ---------------------------------------------------------------- the T5/mT5 path


def v1_t5_prompt(template: str, dish: str, origin: str, relation: str) -> str:
    """run_prompting_experiment.py:108-111: `re.sub("[X]", dish, template)`, then for country
    templates `re.sub("[C]", country, ...)` on that text; nothing stripped; [Y] becomes the
    sentinel.
    """
    prompt = re.sub("[X]", dish, template)
    if relation.startswith("country"):
        prompt = re.sub("[C]", V1_ENGLISH.get(origin, origin), prompt)
    return prompt


def t5_score(prompt: str, candidate: str) -> float:
    """The stand-in model's mean log-prob: a fixed pseudo-random function of the prompt and the
    candidate.
    """
    return -int(hashlib.sha256(f"{prompt}|{candidate}".encode()).hexdigest()[:12], 16) / 16**12


class HashSeq2Seq:
    """A seq2seq stand-in scoring with `t5_score`; a candidate is as many tokens as it has
    characters (so a cap of 10 would drop most of them). It keeps every prompt it was asked.
    """

    kind = "seq2seq"
    identity = {"name_or_path": "hash-seq2seq"}

    def __init__(self):
        self.prompts = []

    def score(self, requests, options=None):
        out = []
        for request in requests:
            prompt = request.left + (request.sep or "") + "[Y]" + request.right
            self.prompts.append(prompt)
            tokens = np.array([len(c) for c in request.candidates])
            means = np.array([t5_score(prompt, c) for c in request.candidates])
            out.append(CandidateScores(request.candidates, means * tokens, tokens))
        return out


def test_t5_path_regex_fill_and_map_without_a_cap(fmlama_release):
    scorers = {p: HashSeq2Seq() for p in ("upstream", "default")}
    runs = {
        p: run(
            "fmlama_en",
            scorers[p],
            rows=ROWS,
            data_dir=str(fmlama_release),
            protocol=p,
            progress=False,
            **({"max_candidate_tokens": 10} if p == "upstream" else {}),
        )  # the cap is the masked path's only
        for p in scorers
    }
    upstream = runs["upstream"]
    templates = {rel: text for rel, text in upstream.config.protocol["templates"].items()}
    pool = sorted({v1_gold(row) for row in ROWS})
    expected: dict[str, dict[str, float]] = {}
    for relation, template in templates.items():
        found = []
        for origin, dish, _ in DISHES:
            prompt = v1_t5_prompt(template, dish, origin, relation)
            assert prompt in scorers["upstream"].prompts
            # (nll, answer) ascending
            ranking = [c for _, c in sorted((-t5_score(prompt, c), c) for c in pool)]
            gold = v1_gold(next(row for row in ROWS if row["sub_label"] == dish))
            found.append((origin, [ranking.index(gold)]))
        expected[relation] = v1_template_map(found)
        assert upstream.metrics["templates"][relation]["map"] == pytest.approx(
            expected[relation], abs=1e-9
        )
    assert {r["n_candidates"] for r in upstream.records} == {len(pool)}  # no cap on this path
    caesar = {r["template"]: r["prompt"] for r in upstream.records if r["id"] == "Q9|en"}
    assert (
        caesar["country_1"]
        == "In [Mexico], the food [Mexicoaesar salad] has the ingredients of [Y] ."
    )
    assert caesar["hasParts_1"] == "The food [Caesar salad] has the ingredients of [Y] ."
    burger = {r["template"]: r["prompt"] for r in upstream.records if r["id"] == "Q0|en"}
    assert (
        burger["country_1"]
        == "In [ the United States], the food [burger] has the ingredients of [Y] ."
    )  # F4
    default = {r["template"]: r["prompt"] for r in runs["default"].records if r["id"] == "Q9|en"}
    assert default["country_1"] == "In Mexico, the food Caesar salad has the ingredients of [Y] ."


def test_the_fill_strips_the_template_and_the_dish_but_not_the_country():
    assert fill(" In [C], the food [X] has [Y] . ", " pizza ", " the United States", "en") == (
        "In  the United States, the food pizza has ",
        " .",
        False,
    )
    # Hebrew's numbered slots are filled by replacement either way (v1 never filled them)
    assert fill("במאכל [1] יש את [2].", "פיצה", None, "he", "upstream_regex") == (
        "במאכל פיצה יש את ",
        ".",
        False,
    )
