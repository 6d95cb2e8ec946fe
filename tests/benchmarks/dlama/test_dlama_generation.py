"""DLAMA's optional generation mode (spec 4.6): the paper's questions and system messages as exact
strings, its scope, overlap/exact matching on the worked-example facts, and a run with a tiny chat
model.
"""

from __future__ import annotations

import pytest
from dlama_fixture import write_dlama

from culture_probe.benchmarks.dlama.task import SYSTEM, DlamaTask, answer_matches, question
from culture_probe.errors import UnsupportedModelError
from culture_probe.loading import load_rows
from culture_probe.runner import run
from culture_probe.tasks import GenerateProbe, Skipped

GENERATE = DlamaTask.Options(mode="generate")


@pytest.fixture
def dlama_dir(tmp_path):
    return str(write_dlama(tmp_path / "dlama"))


def _probes(data_dir, config="dlama_arab_west"):
    rows = load_rows(config, data_dir=data_dir)
    return {p.item_id: p for p in DlamaTask(config, GENERATE, kind="causal").build_probes(rows)}


def test_questions_and_system_messages_are_the_papers_strings(dlama_dir):
    probes = _probes(dlama_dir)
    egypt_en, egypt_ar = (
        probes["P30_general_ARAB_REGION_0|en"],
        probes["P30_general_ARAB_REGION_0|ar"],
    )
    assert isinstance(egypt_en, GenerateProbe) and egypt_en.options.chat
    assert egypt_en.prompt == 'Where is "Egypt" located in? Reply with a name of a continent only.'
    assert egypt_en.options.system == "You are an encyclopedia."
    assert egypt_ar.prompt == 'أين يقع "مصر"؟ أجب باسم قارة فقط'
    assert egypt_ar.options.system == "تعامل كأنك موسوعة."
    assert question("P1376", "en", " Cairo ") == (
        'What is the country of which the capital is "Cairo"? Reply with a country name only.'
    )


def test_the_p530_typo_is_kept_and_fixed_only_in_corrected_configs():
    assert "maintains dimplomatic relations" in question("P530", "en", "Oman")
    assert "maintains diplomatic relations" in question("P530", "en", "Oman", corrected=True)


def test_predicates_outside_the_seven_are_skipped_with_the_reason(tmp_path):
    probes = _probes(str(write_dlama(tmp_path / "p17", predicate="P17")))
    assert probes and all(isinstance(p, Skipped) for p in probes.values())
    assert next(iter(probes.values())).reason.startswith("no generation question for P17 in ")


def test_generation_needs_a_causal_chat_model():
    with pytest.raises(
        UnsupportedModelError, match="needs a causal model with a chat template.*mode=rank"
    ):
        DlamaTask("dlama_arab_west", GENERATE, kind="masked")


def test_overlap_is_a_substring_and_exact_is_equality():
    assert answer_matches(" Africa ", ["Africa", "Asia"]) == {"overlap": True, "exact": True}
    assert answer_matches("It is in Asia.", ["Africa", "Asia"]) == {"overlap": True, "exact": False}
    assert answer_matches("africa", ["Africa"]) == {"overlap": False, "exact": False}
    assert answer_matches("anything", [" "]) == {"overlap": False, "exact": False}


class ReplyTable:
    """A chat model stand-in that answers each subject from a table and records what it was
    asked.
    """

    kind = "causal"
    identity = {"name_or_path": "replies"}

    def __init__(self, replies):
        self.replies, self.asked = replies, []

    def generate(self, prompts, options):
        self.asked += [(p, options.chat, options.system) for p in prompts]
        return [self.replies[p.split('"')[1]] for p in prompts]


def test_per_culture_accuracies_on_the_worked_example_facts(dlama_dir):
    # Arab: Egypt {Africa, Asia}, Morocco {Africa}, Oman {Asia}; West: France {Europe}, Canada
    # {North America}
    model = ReplyTable(
        {
            "Egypt": "Africa",
            "Morocco": "It is in Africa.",
            "Oman": "Europe",
            "France": "Europe",
            "Canada": "north america",
        }
    )
    result = run(
        "dlama_arab_west", model, data_dir=dlama_dir, language="en", mode="generate", progress=False
    )
    assert {(chat, system) for _, chat, system in model.asked} == {
        (True, "You are an encyclopedia.")
    }
    en = result.metrics["en"]
    assert en["overlap"] == pytest.approx({"arab": 200 / 3, "west": 50.0, "pair": 60.0})
    assert en["exact"] == pytest.approx({"arab": 100 / 3, "west": 50.0, "pair": 40.0})
    assert en["n"] == {"arab": 3, "west": 2}
    assert result.metrics["overlap_en_arab"] == pytest.approx(200 / 3)
    assert {d["id"] for d in result.config.deviations} >= {"D4"}


def test_a_tiny_chat_model_answers_through_its_chat_template(dlama_dir, tmp_path):
    from culture_probe.engine import Scorer
    from culture_probe.models import tiny_model, train_tokenizer

    rows = load_rows("dlama_arab_west", data_dir=dlama_dir)
    texts = [question("P30", r["language"], r["sub_label"]) for r in rows] + list(SYSTEM.values())
    tok = train_tokenizer(
        texts + [o for r in rows for o in r["obj_label"]],
        "bpe",
        model_kind="causal",
        vocab_size=600,
    )
    tok.chat_template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant:{% endif %}"
    )
    scorer = Scorer(tiny_model("gpt2", tok, layers=1, hidden=32), tok)
    result = run(
        "dlama_arab_west",
        scorer,
        data_dir=dlama_dir,
        mode="generate",
        max_new_tokens=3,
        out=tmp_path / "run",
        progress=False,
    )
    assert len(result.records) == 10
    for record in result.records:
        want = scorer.generate(
            [record["prompt"]], max_new_tokens=3, chat=True, system=SYSTEM[record["language"]]
        )[0].strip()
        assert record["reply"] == want
        assert record["overlap"] == any(g in want for g in record["gold"])
    without_system = scorer.generate(
        [r["prompt"] for r in result.records], max_new_tokens=3, chat=True
    )
    assert any(r["reply"] != w.strip() for r, w in zip(result.records, without_system, strict=True))
    assert set(result.metrics["ar"]["overlap"]) == {"arab", "west", "pair"}
    assert (
        "Generation accuracy per culture (ar questions)"
        in (tmp_path / "run" / "report.md").read_text()
    )


def test_a_corrected_run_asks_the_corrected_question_not_only_the_corrected_rows(tmp_path):
    data = str(write_dlama(tmp_path / "p530", predicate="P530"))
    replies = {"Egypt": "x", "Morocco": "x", "Oman": "x", "France": "x", "Canada": "x"}
    asked = {}
    for corrected in (False, True):
        model = ReplyTable(replies)
        result = run(
            "dlama_arab_west",
            model,
            data_dir=data,
            language="en",
            mode="generate",
            corrected=corrected,
            progress=False,
        )
        asked[corrected] = {prompt for prompt, _, _ in model.asked}
        assert result.config.config == "dlama_arab_west" + ("_corrected" if corrected else "")
    assert all("dimplomatic" in p for p in asked[False]) and all(
        "diplomatic" in p for p in asked[True]
    )
    assert not any("dimplomatic" in p for p in asked[True])
