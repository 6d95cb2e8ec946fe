"""X-FaKT protocol: the paper's questions and judge rubric as exact strings, both judges, the spec's
worked example through the task's metrics, and generation / LLM-judge / ranking runs with tiny
models.

The protocol tests run on `xfakt_release` (tests/releases.py), a small `src/utils.py` in the
upstream layout holding the paper's templates and country names; the released rubric itself is
checked on the mirror.
"""

from __future__ import annotations

import hashlib
import random
from functools import cache
from pathlib import Path

import pytest

from culture_probe.benchmarks.xfakt.data import read_literals
from culture_probe.benchmarks.xfakt.report import headline_text
from culture_probe.benchmarks.xfakt.task import (
    StringJudge,
    XfaktTask,
    country_forms,
    judge_prompt,
    judge_template,
    parse_verdict,
)
from culture_probe.data.registry import load_benchmark
from culture_probe.engine import Scorer, ScoreRequest
from culture_probe.errors import CultureProbeError, UnsupportedModelError
from culture_probe.loading import load_task
from culture_probe.models.tiny import save_tiny, tiny_model, train_tokenizer
from culture_probe.runner import run
from culture_probe.schemas import validate_metrics
from culture_probe.tasks import GenerateProbe, ScoreProbe
from culture_probe.tasks.probes import Record

CHAT = "{% for m in messages %}<user> {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}<bot>{% endif %}"
COUNTRIES_EN = [
    "United States",
    "India",
    "China",
    "Russia",
    "Saudi Arabia",
    "France",
    "Nepal",
    "Japan",
    "Ukraine",
    "Greece",
    "Turkey",
    "Kenya",
    "Thailand",
]
LANGUAGE_CODES = ["en", "hi", "zh", "ru", "ar", "fr", "ne", "ja", "uk", "el", "tr", "sw", "th"]
PROMPT_OURS_SHA256 = "7e8a122eef9dba87372b73d50d686ece76017919eaa60ab75af398fc09dbeb22"  # spec 4.3


@cache
def literals(release: Path | None = None, corrected: bool = False) -> dict:
    """The data file's literals, from the `release` folder (or from the mirror when None)."""
    return read_literals(data_dir=str(release) if release else None, corrected=corrected)[0]


def xtask(
    release: Path, config: str = "xfakt_factual_recall", kind: str = "causal", **options
) -> XfaktTask:
    """The X-FaKT protocol with its literals loaded from `release`."""
    return load_task(config, XfaktTask.Options(**options), kind=kind, data_dir=str(release))[0]


@cache
def recall_rows(release: Path) -> tuple[dict, ...]:
    return tuple(load_benchmark("xfakt_factual_recall", data_dir=str(release))["test"])


def rows_of(release: Path, *entities: str, languages: tuple[str, ...] | None = None) -> list[dict]:
    """The factual-recall rows of the entities named (English names), in release order."""
    return [
        r
        for r in recall_rows(release)
        if r["entity_en"] in entities and (languages is None or r["language"] in languages)
    ]


def by_entity(rows: list[dict], probes: list) -> dict:
    """{(English entity name, question language): probe}, one probe per row."""
    assert [p.item_id for p in probes] == [r["id"] for r in rows]
    return {(r["entity_en"], r["language"]): p for r, p in zip(rows, probes, strict=True)}


@cache
def tiny_chat_scorer(release: Path) -> Scorer:
    texts = [r["question"] for r in recall_rows(release)[::4]] + [
        judge_template(literals(release))[1]
    ]
    tok = train_tokenizer(texts, "bpe", vocab_size=1500, model_kind="causal")
    tok.chat_template = CHAT
    return Scorer(tiny_model("gpt2", tok, layers=1, hidden=32), tok)


# ---------------------------------------------------------------- prompts


def test_questions_are_the_papers_templates_sent_as_one_chat_turn(xfakt_release):
    rows = rows_of(
        xfakt_release,
        "New York",
        "George Washington",
        "Kutztown Folk Festival",
        languages=("en", "ar", "ja"),
    )
    probes = by_entity(rows, xtask(xfakt_release).build_probes(rows))
    assert probes["New York", "en"].prompt == "In which country is New York located?"
    assert probes["George Washington", "en"].prompt == "George Washington is from which country?"
    festival = "In which country is Kutztown Folk Festival widely celebrated?"
    assert probes["Kutztown Folk Festival", "en"].prompt == festival
    assert probes["New York", "ja"].prompt == "ニューヨーク はどの国にありますか?"
    assert probes["New York", "ar"].prompt == "في أي بلد يقع نيويورك؟"
    assert probes["George Washington", "ja"].prompt == "ジョージ・ワシントン はどの国からですか?"
    assert len(probes) == 9 and all(
        isinstance(p, GenerateProbe) and p.options.chat and p.options.max_new_tokens == 128
        for p in probes.values()
    )
    seq2seq = xtask(xfakt_release, kind="seq2seq").build_probes(rows[:1])
    assert not seq2seq[0].options.chat  # seq2seq instruct models get the raw question (spec 4.2)


def test_judge_prompt_is_the_papers_rubric_verbatim(mirror):
    system, template = judge_template(literals())
    assert system == "You are a helpful assistant."
    assert (
        len(template) == 1412
        and hashlib.sha256(template.encode()).hexdigest() == PROMPT_OURS_SHA256
    )
    filled = judge_prompt(literals(), "भारत", "मुंबई किस देश में स्थित है?", "India")
    assert filled.startswith("\n[Instruction]\nPlease act as an impartial judge")
    assert filled.endswith(
        "[Reference]\nभारत\n\n[Question]\nमुंबई किस देश में स्थित है?\n\n"
        "[The Start of Assistant's Answer]\nIndia\n\n[The End of Assistant's Answer]\n"
    )


def test_judge_prompt_fills_the_data_files_rubric(xfakt_release):
    system, template = judge_template(literals(xfakt_release))
    # SYSTEM_PROMPT_OURS, PROMPT_OURS
    assert system == "You are a helpful assistant." and template.count("{") == 3
    filled = judge_prompt(
        literals(xfakt_release), "भारत", "मुंबई किस देश में स्थित है?", "India {not a slot}"
    )
    assert filled.startswith("\n[Instruction]\nPlease act as an impartial judge")
    assert filled.endswith(
        "[Reference]\nभारत\n\n[Question]\nमुंबई किस देश में स्थित है?\n\n"
        "[The Start of Assistant's Answer]\nIndia {not a slot}\n\n[The End of Assistant's Answer]\n"
    )


def test_the_judge_gets_the_data_files_system_prompt_and_the_rubric(xfakt_release):
    answer = Record(
        "fr-000-hi",
        "",
        "answer",
        {"gold": "संयुक्त राज्य अमेरिका", "question": "न्यूयॉर्क किस देश में स्थित है?", "reply": "अमेरिका"},
        kind="generate",
    )
    task = xtask(xfakt_release)
    (probe,) = task.build_probes([], stage="judge", previous=[answer])
    # SYSTEM_PROMPT_OURS (spec 4.3)
    assert probe.options.system == "You are a helpful assistant." and probe.options.chat
    assert probe.prompt == judge_prompt(
        literals(xfakt_release), answer["gold"], answer["question"], answer["reply"]
    )
    assert probe.prompt.endswith(
        "[Reference]\nसंयुक्त राज्य अमेरिका\n\n[Question]\nन्यूयॉर्क किस देश में स्थित है?\n\n"
        "[The Start of Assistant's Answer]\nअमेरिका\n\n[The End of Assistant's Answer]\n"
    )
    assert not any(d["id"] == "X6" for d in task.applied_deviations())


def test_rank_mode_scores_the_countries_as_the_reply_to_the_chat_prompt(xfakt_release):
    rows = rows_of(xfakt_release, "New York", languages=("en",))
    (chat,) = xtask(xfakt_release, mode="rank").build_probes(rows)
    # spec 4.4: same chat prompt as 4.2, no system turn
    assert chat.request.chat and chat.request.system is None
    assert (
        chat.request.left == "In which country is New York located?"
        and "India" in chat.request.candidates
    )
    plain_task = xtask(xfakt_release, mode="rank", rank_prompt="plain")
    (plain,) = plain_task.build_probes(rows)
    assert not plain.request.chat and plain.request.sep == " "
    assert plain.request.candidates == chat.request.candidates
    assert [d["id"] for d in plain_task.applied_deviations()] == ["X2", "X5", "X7", "X8"]
    assert plain_task.describe()["chat_template"] is False
    default = xtask(xfakt_release, mode="rank")
    # no generation, judge, or X7
    assert [d["id"] for d in default.applied_deviations()] == ["X2", "X5", "X8"]
    assert default.describe()["chat_template"] is True
    seq2seq = xtask(xfakt_release, kind="seq2seq", mode="rank")
    assert not seq2seq.build_probes(rows)[0].request.chat and "X7" in {
        d["id"] for d in seq2seq.applied_deviations()
    }


def test_masked_models_are_refused_with_the_reason():
    with pytest.raises(UnsupportedModelError, match="cannot probe a 'masked' model"):
        XfaktTask("xfakt_factual_recall", kind="masked")


# ---------------------------------------------------------------- judges


def test_string_judge_reads_the_first_answer_named_in_any_language(xfakt_release):
    judge = StringJudge(
        country_forms(literals(xfakt_release), literals(xfakt_release, corrected=True))
    )
    assert judge.judge("भारत", "India", gold_name="भारत", english_name="India") == (
        True,
        "same_language",
    )
    assert judge.judge("It is India.", "India", gold_name="भारत", english_name="India") == (
        True,
        "english",
    )
    assert judge.judge("它在印度。", "India", gold_name="भारत", english_name="India") == (
        True,
        "other_language",
    )
    assert judge.judge("Not China: India.", "India", gold_name="भारत", english_name="India") == (
        False,
        "incorrect",
    )
    assert judge.judge("Indiana, USA", "India", gold_name="India", english_name="India") == (
        False,
        "incorrect",
    )
    assert judge.judge(
        "saudi arabia", "Saudi Arabia", gold_name="Saudi Arabia", english_name="Saudi Arabia"
    ) == (
        True,
        "same_language",
    )
    assert judge.judge("I do not know.", "India", gold_name="India", english_name="India") == (
        False,
        "incorrect",
    )
    # the released bird name and the corrected name of Turkey are both accepted
    assert judge.judge("火鸡", "Turkey", gold_name="火鸡", english_name="Turkey")[0]
    assert judge.judge("土耳其", "Turkey", gold_name="火鸡", english_name="Turkey")[0]


def test_llm_verdicts_follow_the_error_rule():
    assert parse_verdict("The answer aligns. Rating: [[1]]") == (True, "same_language")
    assert parse_verdict("Rating: [[2]]") == (True, "english")
    assert parse_verdict("Rating: [[3]]") == (True, "other_language")
    assert parse_verdict("Rating: [[4]]") == (False, "incorrect")
    assert parse_verdict("no rating at all") == (True, "unparsed")  # X3: only [4] is an error


def test_string_judge_needs_names():
    with pytest.raises(CultureProbeError, match="at least one answer name"):
        StringJudge({"India": [" "]})


# ---------------------------------------------------------------- metrics


def test_spec_worked_example_through_the_task():
    counts = {
        ("en", "United States"): 0,
        ("en", "Japan"): 1,
        ("en", "Kenya"): 3,
        ("ja", "United States"): 2,
        ("ja", "Japan"): 0,
        ("ja", "Kenya"): 4,
        ("sw", "United States"): 1,
        ("sw", "Japan"): 3,
        ("sw", "Kenya"): 1,
    }
    records = []
    for (language, country), errors in counts.items():
        for i in range(7):
            records.append(
                Record(
                    f"{language}-{country}-{i}",
                    "",
                    "answer",
                    {
                        "language": language,
                        "country": country,
                        "correct": i >= errors,
                        "verdict": "x",
                    },
                    kind="generate",
                )
            )
    # string-judged answers (with judge=llm only the judge stage's verdicts count)
    metrics = XfaktTask(
        "xfakt_factual_recall", XfaktTask.Options(judge="string"), kind="causal"
    ).compute_metrics(records)
    assert metrics["mu_assoc"] == pytest.approx(0.046667, abs=1e-6)
    assert metrics["mu_non"] == pytest.approx(0.333333, abs=1e-6)
    assert (metrics["frs"], metrics["kts"], metrics["xfakt"]) == pytest.approx(
        (0.586957, 0.554404, 0.570216), abs=1e-6
    )
    # the results schema: the same scores, with an interval from questions resampled within their
    # cells
    for name in ("frs", "kts", "xfakt"):
        estimate = metrics["results"]["overall"][name]
        assert estimate["value"] == metrics[name] and estimate["n"] == 63
        assert (
            estimate["ci_low"] < estimate["value"] < estimate["ci_high"] and estimate["stderr"] > 0
        )
    assert metrics["results"]["overall"]["error_rate"]["value"] == pytest.approx(100 * 15 / 63)
    exact = XfaktTask(
        "xfakt_factual_recall", XfaktTask.Options(round_cells=False, judge="string"), kind="causal"
    )
    metrics = exact.compute_metrics(records)
    assert (metrics["frs"], metrics["kts"], metrics["xfakt"]) == pytest.approx(
        (0.586207, 0.555556, 0.570470), abs=1e-6
    )


def recall_records(right, per_cell, *, mode="rank", seed=0):
    """Factual recall answered `per_cell` times in every language x country cell, each answer right
    with probability `right(language, country)`: ranked among the 13 countries (rank mode) or a
    judged reply.
    """
    rng = random.Random(seed)
    records = []
    for language, home in zip(LANGUAGE_CODES, COUNTRIES_EN, strict=True):
        for country in COUNTRIES_EN:
            for i in range(per_cell):
                correct = rng.random() < right(language, country, home)
                fields = {"language": language, "country": country, "correct": correct}
                fields["verdict"] = "same_language" if correct else "incorrect"
                if mode == "rank":
                    # what chance needs: the 13 answers ranked
                    fields["scores"] = dict.fromkeys(COUNTRIES_EN, 0.0)
                kind = "score" if mode == "rank" else "generate"
                records.append(Record(f"{language}-{country}-{i}", "", "answer", fields, kind=kind))
    return records


def recall_metrics(records, **options):
    task = XfaktTask("xfakt_factual_recall", XfaktTask.Options(**options), kind="causal")
    metrics = task.compute_metrics(records)
    validate_metrics(metrics)  # the new keys follow the one results schema
    return metrics


def test_rank_mode_says_what_random_answers_score_and_warns_at_chance():
    # two random models scored KTS 0.72 and 0.98 with no reference point: a run answering at random
    # (one of the 13 countries each time) gets the expected scores of random answers on its own
    # cells, their range, and a warning
    results = recall_metrics(recall_records(lambda *_: 1 / 13, 2), mode="rank")["results"]
    chance = results["chance"]
    assert list(chance) == ["error_rate", "frs", "kts", "xfakt"]
    for name in ("frs", "kts", "xfakt"):
        assert chance[name]["low"] <= chance[name]["value"] <= chance[name]["high"] <= 1
        assert chance[name]["method"].startswith(
            "exact distribution of the score when every question is answered"
        )
    assert (
        chance["kts"]["value"] == pytest.approx(0.9186, abs=1e-4) and chance["kts"]["high"] == 1.0
    )
    assert chance["frs"]["value"] == pytest.approx(1.5 * (1 / (1 + 24 / 13) - 1 / 3), abs=1e-3)
    warning = results["warnings"]["kts"]
    assert warning.startswith(
        "KTS says nothing about transfer here: the error rates cannot be told from random"
    )
    assert (
        "score KTS 0.919 on these cells (95% of random models between 0.783 and 1.000)" in warning
    )


@pytest.mark.parametrize(
    ("knows", "what"),
    [
        (lambda language, country, home: 0.9, "its facts in every language"),
        (
            lambda language, country, home: 0.95 if country == home else 0.05,
            "its facts in their own language",
        ),
        (lambda language, country, home: 0.3, "a little, in every language"),
    ],
)
@pytest.mark.parametrize("mode", ["rank", "generate"])
def test_a_model_that_knows_facts_gets_no_warning(knows, what, mode):
    metrics = recall_metrics(recall_records(knows, 2, mode=mode, seed=1), mode=mode, judge="string")
    assert "warnings" not in metrics["results"], what
    assert ("frs" in metrics["results"].get("chance", {})) is (mode == "rank")


def test_a_generating_model_that_answers_everything_wrong_gets_the_warning_and_no_chance_level():
    # generation has no random pick: a model that knows nothing may refuse (KTS 1), name one country
    # whatever the language (KTS 1), or name the language's own country (KTS 0), so no chance level;
    # all wrong is the reference
    metrics = recall_metrics(recall_records(lambda *_: 0.0, 1, mode="generate"), judge="string")
    assert metrics["kts"] == 1.0 and "chance" not in metrics["results"]
    assert (
        "cannot be told from a model that answers every question wrong"
        in metrics["results"]["warnings"]["kts"]
    )


# ---------------------------------------------------------------- runs on tiny models


@pytest.mark.slow
def test_generation_with_string_judge_end_to_end(xfakt_release, tmp_path):
    rows = rows_of(xfakt_release, "New York", "George Washington", languages=("en", "hi", "fr"))
    result = run(
        "xfakt_factual_recall",
        tiny_chat_scorer(xfakt_release),
        rows=rows,
        judge="string",
        max_new_tokens=6,
        out=tmp_path / "run",
        progress=False,
        data_dir=str(xfakt_release),
    )
    assert len(result.records) == 6 and all(r["stage"] == "answer" for r in result.records)
    assert {r["verdict"] for r in result.records} <= {
        "same_language",
        "english",
        "other_language",
        "incorrect",
    }
    assert set(result.metrics["error_by_language"]) == {"en", "hi", "fr"}
    # US entities asked in three languages: the transfer scores would compare English with nothing,
    # so they are left out with the reason, in metrics.json and in the results block (the formula is
    # tested in tests/metrics)
    assert (result.metrics["kts"], result.metrics["frs"], result.metrics["xfakt"]) == (
        None,
        None,
        None,
    )
    assert "India, France" in result.metrics["xfakt_unavailable"]
    # and RankC, with why: generated replies rank no candidates (per-fact agreement is reported for
    # each pair)
    assert set(result.metrics["results"]["omitted"]) == {"frs", "kts", "xfakt", "rankc"}
    assert "rank no candidates" in result.metrics["results"]["omitted"]["rankc"]
    assert "kts" not in result.metrics["results"]["overall"]
    errors = {
        lang: 100 * sum(not r["correct"] for r in result.records if r["language"] == lang) / 2
        for lang in ("en", "hi", "fr")
    }
    assert result.metrics["error_by_language"] == pytest.approx(errors)
    report = (tmp_path / "run" / "report.md").read_text()
    assert "Language x country errors" in report and list(
        (tmp_path / "run" / "plots").glob("*.png")
    )


@pytest.mark.slow
def test_llm_judge_is_a_second_stage_with_the_rubric(xfakt_release, tmp_path):
    judge_dir = tmp_path / "judge"
    scorer = tiny_chat_scorer(xfakt_release)
    save_tiny(judge_dir, "gpt2", scorer.tokenizer, layers=1, hidden=32)
    rows = rows_of(xfakt_release, "New York", languages=("en", "sw"))
    task = xtask(xfakt_release, judge_model=str(judge_dir))
    assert task.stage_names == ("answer", "judge") and task.stage("judge").model == str(judge_dir)
    result = run(
        "xfakt_factual_recall",
        scorer,
        rows=rows,
        judge_model=str(judge_dir),
        max_new_tokens=4,
        judge_max_new_tokens=4,
        progress=False,
        data_dir=str(xfakt_release),
    )
    answers = [r for r in result.records if r["stage"] == "answer"]
    judged = [r for r in result.records if r["stage"] == "judge"]
    assert [r["id"] for r in judged] == [r["id"] for r in answers] == ["fr-000-en", "fr-000-sw"]
    probes = task.build_probes(rows, stage="judge", previous=answers)
    assert probes[0].prompt == judge_prompt(
        literals(xfakt_release),
        "United States",
        "In which country is New York located?",
        answers[0]["reply"],
    )
    options = probes[0].options
    assert (
        options.chat
        and options.max_new_tokens == 256
        and options.system == "You are a helpful assistant."
    )
    assert result.metrics["n_items"] == 2


@pytest.mark.slow
def test_rank_mode_scores_every_country_by_its_best_form(xfakt_release):
    rows = rows_of(xfakt_release, "New York", "Riyadh", languages=("en", "zh"))
    scorer = tiny_chat_scorer(xfakt_release)
    result = run(
        "xfakt_factual_recall",
        scorer,
        rows=rows,
        mode="rank",
        progress=False,
        data_dir=str(xfakt_release),
    )
    assert len(result.records) == 4
    probes = xtask(xfakt_release, mode="rank").build_probes(rows)
    probe = next(p for p in probes if p.item_id == "fr-000-zh")
    assert isinstance(probe, ScoreProbe)
    # corrected names
    assert "土耳其" in probe.request.candidates and "火鸡" not in probe.request.candidates
    assert "Turkey" in probe.request.candidates and len(probe.request.candidates) == 26
    for record in result.records:
        assert len(record["scores"]) == 13
        assert record["reply"] == max(record["scores"], key=record["scores"].get)
        assert record["correct"] == (record["reply"] == record["country"])
    # each form is scored right after the rendered chat prompt (CHAT: "<user> {question}\n<bot>"),
    # no separator
    record = next(r for r in result.records if r["id"] == "fr-000-zh")
    rendered = f"<user> {record['question']}\n<bot>"
    after_prompt = scorer.score([ScoreRequest(rendered, ["土耳其", "Turkey"], sep="")])[0]
    assert record["scores"]["Turkey"] == pytest.approx(
        float(after_prompt.mean_logprob.max()), abs=1e-5
    )


def test_rank_mode_without_a_chat_template_names_the_fix_and_runs_plain(xfakt_release):
    rows = rows_of(xfakt_release, "New York", languages=("en",))
    tok = train_tokenizer(
        [rows[0]["question"], *COUNTRIES_EN], "bpe", vocab_size=300, model_kind="causal"
    )
    scorer = Scorer(tiny_model("gpt2", tok, layers=1, hidden=32), tok)
    with pytest.raises(UnsupportedModelError, match="has no chat template"):
        run(
            "xfakt_factual_recall",
            scorer,
            rows=rows,
            mode="rank",
            progress=False,
            data_dir=str(xfakt_release),
        )
    result = run(
        "xfakt_factual_recall",
        scorer,
        rows=rows,
        mode="rank",
        rank_prompt="plain",
        progress=False,
        data_dir=str(xfakt_release),
    )
    assert len(result.records[0]["scores"]) == 13
    assert "X7" in {d["id"] for d in result.config.deviations}


def test_in_context_and_counter_factual_report_error_rates(xfakt_release):
    rows = list(
        load_benchmark("xfakt_in_context", data_dir=str(xfakt_release))["test"].select(range(2))
    )
    assert (
        rows[0]["question"]
        == "David lives in India and Rahul lives in United States. Who lives in India?"
    )
    assert [r["answer"] for r in rows] == ["David", "Rahul"]
    task = xtask(xfakt_release, "xfakt_in_context", judge="string")
    probes = task.build_probes(rows)
    records = [task.to_record(p, rows[i]["answer"] + " lives there.") for i, p in enumerate(probes)]
    metrics = task.compute_metrics(records)
    assert metrics["error_rate"] == 0.0 and "kts" not in metrics
    wrong = [task.to_record(p, rows[1 - i]["answer"]) for i, p in enumerate(probes)]
    assert task.compute_metrics(wrong)["error_rate"] == 100.0


def test_unknown_config_is_refused():
    with pytest.raises(CultureProbeError, match="Unknown benchmark config 'xfakt_other'"):
        XfaktTask("xfakt_other", kind="causal")
    with pytest.raises(CultureProbeError, match="'fmlama_en' is not an X-FaKT config"):
        XfaktTask("fmlama_en", kind="causal")


class _FixedReply:
    """A duck-typed causal scorer that always replies with one text (no model needed)."""

    kind, identity = "causal", "fixed-reply"

    def __init__(self, reply: str):
        self.reply = reply

    def generate(self, prompts, options):
        return [self.reply] * len(prompts)


def test_double_bos_reproduces_upstreams_second_bos_and_is_logged(xfakt_release, tmp_path):
    asked = []

    class Recording(_FixedReply):
        def generate(self, prompts, options):
            asked.append((options.chat, options.add_special_tokens))
            return super().generate(prompts, options)

    rows = rows_of(xfakt_release, "New York", languages=("en",))
    run(
        "xfakt_factual_recall",
        Recording("United States"),
        rows=rows,
        judge="string",
        progress=False,
        data_dir=str(xfakt_release),
    )
    result = run(
        "xfakt_factual_recall",
        Recording("United States"),
        rows=rows,
        judge="string",
        double_bos=True,
        out=tmp_path / "run",
        progress=False,
        data_dir=str(xfakt_release),
    )
    # the paper's rule, then upstream's special tokens added again
    assert asked == [(True, None), (True, True)]
    # X1 concerns every chat-templated generation; its side says which rule the run took
    assert {d["id"]: d["side"] for d in result.config.deviations}["X1"] == "upstream"
    assert "--option double_bos=true" in (tmp_path / "run" / "report.md").read_text()
    seq2seq = xtask(xfakt_release, kind="seq2seq", double_bos=True)
    # no chat template: nothing doubled
    assert seq2seq.build_probes(rows)[0].options.add_special_tokens is None


def test_smoke_run_without_non_associated_cells_still_reports(xfakt_release, tmp_path):
    # United States entities asked in English: diagonal cells only
    rows = rows_of(xfakt_release, "New York", "Los Angeles", "Chicago", languages=("en",))
    assert len(rows) == 3 and {r["country"] for r in rows} == {"United States"}
    result = run(
        "xfakt_factual_recall",
        _FixedReply("United States"),
        rows=rows,
        judge="string",
        limit=3,
        out=tmp_path / "run",
        progress=False,
        data_dir=str(xfakt_release),
    )
    assert (result.metrics["frs"], result.metrics["kts"], result.metrics["xfakt"]) == (
        None,
        None,
        None,
    )
    assert "non-associated" in result.metrics["xfakt_unavailable"]
    assert result.metrics["error_rate"] == 0.0
    assert (tmp_path / "run" / "metrics.json").is_file()
    assert "not available" in (tmp_path / "run" / "report.md").read_text()


def test_pure_xfakt_metric_still_refuses_missing_cells():
    from culture_probe.benchmarks.xfakt.metrics import xfakt
    from culture_probe.errors import MetricInputError

    with pytest.raises(MetricInputError, match="non-associated"):
        xfakt(correct=[True], language=["en"], country=["United States"])


def test_headline_shows_errors_with_two_decimals_and_scores_with_three():
    # spec 5: errors x100 to 2 decimals, FRS/KTS/X-FaKT to 3 (the spec's worked example, unrounded
    # cells)
    metrics = {
        "mu_assoc": 1 / 21,
        "mu_non": 1 / 3,
        "kts": 0.555556,
        "frs": 0.586207,
        "xfakt": 0.570470,
    }
    assert headline_text("factual_recall", metrics) == (
        "Associated-language error 4.76% vs non-associated 33.33% (gap 28.57 points): KTS 0.556 (1 = the same "
        "knowledge in every language), FRS 0.586, X-FaKT 0.570."
    )
