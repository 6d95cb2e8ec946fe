"""DLAMA under `--protocol upstream` against minimal excerpts of the released code
(AMR-KELEG/DLAMA), restated here in our own words: masked P@1 with candidates tokenized on their own
(BPE), the T5/mT5 path's `re.sub("[X]", ...)` fill and its P@1 that scores only the first listed
label, and the GPT script's first 3 facts per file. Each test runs the library with
`protocol="upstream"`, compares it with the excerpt, and shows where the default protocol differs.

Sources (as cited by the upstream audit; two files are known by their index id, matched to the
repository by content):
- `mlama/scripts/run_prompting_experiment.py` (index id 34199386189): bare `tokenizer.tokenize(obj)`
  per candidate (:227, :238); the T5 path's `re.sub("[X]", sub_label, template)` (:93),
  `sorted((nll, answer))` (:98) and ranks in `obj_label` order (:108);
- `mlama/scripts/eval_utils.py` (index id 34196637796): `get_ranking`, ranks ascending over the
  sorted candidates (:52, :55-58); `"][" -> "] ["` (:123); the T5 sentinel (:204, :210);
- `mlama/scripts/modules/bert_connector.py@83e6ac1e`:83-84 (mask ids from the bare tokens);
- `mlama/metrics_utils.py@2aad907b`:46 (`ranks[0]` is the fact's rank), :90-94 (P@1 rounded to 3
  decimals);
- `mlama/scripts/evaluate_gpt.py@2f7755fb`:76 (`load_jsonl_file(path)[:3]`), and its loop over the
  sorted `<lang>/<predicate>_*.jsonl` files.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from dlama_fixture import ARABIC, FACTS, write_dlama
from mlama_masked import roberta_style as roberta_style_model
from mlama_masked import upstream_masked_ranking

from culture_probe.benchmarks.dlama.task import DlamaTask
from culture_probe.engine import Scorer
from culture_probe.engine.types import CandidateScores
from culture_probe.errors import UnknownNameError
from culture_probe.runner import run
from culture_probe.tasks.filling import fill_slots

TEMPLATE = "[X] is located in [Y] ."  # the vendored en P30 template (mLAMA)
CANDIDATES = ("Africa", "Asia", "Europe", "North America")


def test_the_upstream_profile_per_model_kind():
    assert DlamaTask.options_for("upstream", {}, "masked") == DlamaTask.Options(
        candidate_tokenization="alone"
    )
    assert DlamaTask.options_for("upstream", {}, "seq2seq") == DlamaTask.Options(
        fill="upstream_regex", p1_gold="first"
    )
    assert DlamaTask.options_for("upstream", {}, "causal") == DlamaTask.Options(generate_first_n=3)
    assert DlamaTask.options_for("default", {}, "masked") == DlamaTask.Options()
    sides = {
        d["id"]: d["side"]
        for d in DlamaTask(
            "dlama_arab_west", DlamaTask.options_for("upstream", {}, "seq2seq"), kind="seq2seq"
        ).applied_deviations()
    }
    # D6 changes no number (its note says)
    assert sides == {"D1": "upstream", "D6": "default", "D7": "upstream"}
    with pytest.raises(UnknownNameError, match="Unknown value of option fill 'regex'"):
        DlamaTask.Options(fill="regex")


# ---------------------------------------------------------------- masked P@1, candidates tokenized
# alone (D2)


def upstream_p_at_1(ranks: list[int]) -> float:
    """metrics_utils: a fact is right when its rank (the best gold's, 0-based) is 0; P@1 in %, 3
    decimals.
    """
    return round(100 * sum(rank < 1 for rank in ranks) / len(ranks), 3)


@pytest.fixture(scope="module")
def roberta_style():
    """A tiny RoBERTa-style masked model; "Asia" alone is two pieces, " Asia" one."""
    texts = [
        TEMPLATE.replace("[X]", s).replace("[Y]", o)
        for (_, s), (_, labels, _) in FACTS.items()
        for o in labels
    ]
    model, tok = roberta_style_model(
        texts * 20 + [" ".join(CANDIDATES)] * 5, vocab_size=320, seed=5
    )
    assert len(tok.tokenize("Asia")) != len(tok.tokenize(" Asia"))
    return model, tok


def test_masked_p_at_1_with_candidates_tokenized_alone(roberta_style, tmp_path):
    model, tok = roberta_style
    data_dir = str(write_dlama(tmp_path / "dlama"))
    runs = {
        protocol: run(
            "dlama_arab_west",
            Scorer(model, tok),
            data_dir=data_dir,
            language="en",
            keep_scores=True,
            protocol=protocol,
            out=tmp_path / protocol,
            progress=False,
        )
        for protocol in ("upstream", "default")
    }
    upstream = runs["upstream"]
    config = json.loads((tmp_path / "upstream" / "config.json").read_text(encoding="utf-8"))
    assert (
        config["options"]["candidate_tokenization"] == "alone"
        and config["run"]["protocol"] == "upstream"
    )
    assert {d["id"]: d["side"] for d in config["deviations"]} == {"D2": "upstream", "D5": "default"}
    assert "| D2 |" in (tmp_path / "upstream" / "report.md").read_text(encoding="utf-8")
    ranks: dict[str, list[int]] = {"arab": [], "west": []}
    for record in upstream.records:
        subject = record["prompt"].split(" is located in")[0]
        expected = upstream_masked_ranking(model, tok, TEMPLATE, subject, CANDIDATES)
        assert record["top"] == [c for c, _ in expected]
        np.testing.assert_allclose(record["top_scores"], [s for _, s in expected], atol=1e-5)
        ranks[record["culture"]].append(min(record["top"].index(g) for g in record["gold"]))
    cultures = upstream.metrics["en"]["cultures"]
    for culture, culture_ranks in ranks.items():
        assert round(cultures[culture], 3) == upstream_p_at_1(culture_ranks)
    # the default scores in-context ids: " Asia" is one piece there, two pieces upstream
    tokens = {
        p: dict(zip(CANDIDATES, runs[p].records[0]["scores"]["n_tokens"], strict=True))
        for p in runs
    }
    assert tokens["upstream"]["Asia"] == len(tok.tokenize("Asia")) != tokens["default"]["Asia"]
    assert [r["top_scores"] for r in runs["default"].records] != [
        r["top_scores"] for r in upstream.records
    ]


# ---------------------------------------------------------------- the T5/mT5 path: regex fill (D1),
# first gold (D7)


def upstream_t5_prompt(template: str, subject: str) -> str:
    """run_prompting_experiment.py:93: `re.sub("[X]", subject, template)`, neither stripped; [Y] is
    the slot.
    """
    return re.sub("[X]", subject, template)


def upstream_t5_rank(scores: dict[str, float], obj_labels: list[str]) -> int:
    """The T5 path ranks (nll, answer) pairs ascending, lists each label's index in `obj_label`
    order, and the scorer reads ranks[0]: the rank of the first listed label, whatever the others'
    ranks.
    """
    ranking = [answer for _, answer in sorted((-score, answer) for answer, score in scores.items())]
    return [ranking.index(label) for label in obj_labels][0]


class Seq2SeqTable:
    """A seq2seq stand-in: mean log-probs from a table {(subject, candidate): score}, one token
    each; it finds the subject in the prompt (brackets or not) and keeps every prompt it was asked.
    """

    kind = "seq2seq"
    identity = {"name_or_path": "seq2seq-table"}

    def __init__(self, table):
        self.table, self.prompts = table, []

    def score(self, requests, options=None):
        out = []
        for request in requests:
            self.prompts.append(request.left + (request.sep or "") + "[Y]" + request.right)
            subject = next(s for (s, _) in self.table if s in request.left)
            means = np.array([self.table[subject, c] for c in request.candidates])
            out.append(CandidateScores(request.candidates, means, np.ones(len(means), dtype=int)))
        return out


def t5_table() -> dict[tuple[str, str], float]:
    """The spec's worked-example scores, except that Egypt (gold [Africa, Asia]) now ranks Asia
    first.
    """
    table = {
        (s, c): v
        for (_, s), (_, _, scores) in FACTS.items()
        for c, v in zip(CANDIDATES, scores, strict=True)
    }
    return table | {("Egypt", "Asia"): -1.0}


def test_t5_path_fill_and_p_at_1_of_the_first_listed_label(tmp_path):
    data_dir = str(write_dlama(tmp_path / "dlama"))
    runs = {}
    for protocol in ("upstream", "default"):
        scorer = Seq2SeqTable(t5_table())
        runs[protocol] = (
            run(
                "dlama_arab_west",
                scorer,
                data_dir=data_dir,
                language="en",
                protocol=protocol,
                progress=False,
            ),
            scorer,
        )
    upstream, scorer = runs["upstream"]
    subjects = [s for (_, s) in FACTS]
    assert sorted(scorer.prompts) == sorted(upstream_t5_prompt(TEMPLATE, s) for s in subjects)
    assert "[Egypt] is located in [Y] ." in scorer.prompts
    assert sorted(runs["default"][1].prompts) == sorted(
        TEMPLATE.replace("[X]", s) for s in subjects
    )
    ranks: dict[str, list[int]] = {"arab": [], "west": []}
    for (region, subject), (_, labels, _) in FACTS.items():
        scores = {c: t5_table()[subject, c] for c in CANDIDATES}
        ranks["arab" if region == "ARAB_REGION" else "west"].append(
            upstream_t5_rank(scores, labels)
        )
    cultures = upstream.metrics["en"]["cultures"]
    assert {c: round(v, 3) for c, v in cultures.items()} == {
        c: upstream_p_at_1(r) for c, r in ranks.items()
    }
    # Egypt's top is Asia, its second label: a miss upstream
    assert cultures["arab"] == pytest.approx(100 / 3)
    # a hit by default
    assert runs["default"][0].metrics["en"]["cultures"]["arab"] == pytest.approx(200 / 3)


def test_the_regex_fill_replaces_every_capital_x_of_the_template_and_keeps_the_brackets(tmp_path):
    template = "The X-ray of [X] shows [Y] ."
    path = tmp_path / "templates.json"
    path.write_text(json.dumps({"en": {"P30": template}}), encoding="utf-8")
    rows_dir = str(write_dlama(tmp_path / "dlama"))
    scorer = Seq2SeqTable(t5_table())
    result = run(
        "dlama_arab_west",
        scorer,
        data_dir=rows_dir,
        language="en",
        templates=str(path),
        protocol="upstream",
        progress=False,
    )
    expected = upstream_t5_prompt(template, "Egypt")
    assert expected == "The Egypt-ray of [Egypt] shows [Y] ." and expected in scorer.prompts
    assert expected in {r["prompt"] for r in result.records}
    # the subject is a replacement template there: its own X stays, a backslash escape is read
    assert (
        fill_slots("[X] is in [Y] .", [("[X]", "Xanadu")], "upstream_regex")
        == "[Xanadu] is in [Y] ."
    )
    assert (
        fill_slots("[X] is in [Y] .", [("[X]", r"A\tB")], "upstream_regex") == "[A\tB] is in [Y] ."
    )
    assert fill_slots("[X] is in [Y] .", [("[X]", "Xanadu")]) == "Xanadu is in [Y] ."


# ---------------------------------------------------------------- generation mode: the first 3
# facts per file (D4)

ARAB = ["Egypt", "Morocco", "Oman", "Yemen", "Iraq"]
WEST = ["France", "Canada", "Spain", "Norway"]
P30_QUESTION = {
    "en": 'Where is "{}" located in? Reply with a name of a continent only.',
    "ar": 'أين يقع "{}"؟ أجب باسم قارة فقط',
}  # evaluate_gpt.py PROMPTS["P30"]


def upstream_gpt_questions(root) -> list[str]:
    """evaluate_gpt.py: for each language, each sorted `<lang>/P30_*.jsonl` file, its first 3 lines'
    questions.
    """
    asked = []
    for language in ("en", "ar"):
        for path in sorted((root / "arab-west" / "dlama" / language).glob("P30_*.jsonl")):
            facts = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()][:3]
            asked += [P30_QUESTION[language].format(fact["sub_label"]) for fact in facts]
    return asked


class Replies:
    """A chat model stand-in that answers "Africa" and keeps every question it was asked."""

    kind = "causal"
    identity = {"name_or_path": "replies"}

    def __init__(self):
        self.asked = []

    def generate(self, prompts, options):
        self.asked += list(prompts)
        return ["Africa"] * len(prompts)


def test_generation_asks_the_first_3_facts_of_each_file(tmp_path):
    facts = {
        (region, subject): ([f"Q{i}"], ["Africa"], [])
        for region, names in (("ARAB_REGION", ARAB), ("WESTERN_COUNTRIES", WEST))
        for i, subject in enumerate(names)
    }
    root = write_dlama(tmp_path / "dlama", facts)
    asked = {}
    for protocol in ("upstream", "default"):
        model = Replies()
        result = run(
            "dlama_arab_west",
            model,
            data_dir=str(root),
            mode="generate",
            protocol=protocol,
            progress=False,
        )
        asked[protocol] = (model.asked, result)
    model_asked, result = asked["upstream"]
    assert sorted(model_asked) == sorted(upstream_gpt_questions(root))
    assert len(model_asked) == 2 * 2 * 3  # two languages x two culture files x 3 facts
    assert result.metrics["skipped"] == {
        "not among the first 3 facts of its file (generate_first_n, D4)": 6
    }
    assert len(asked["default"][0]) == 2 * len(facts)  # the default asks every fact
    assert ARABIC["Egypt"] in " ".join(model_asked)
