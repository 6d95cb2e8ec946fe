"""Multi-stage runs that can change their later stages (X-FaKT's judge), and models refused before
any folder.

The judge is resolved (config and tokenizer read, memory counted) before the first answer; a resume
with another judge keeps the answers and re-judges them, asking the probed model nothing; a model
that cannot serve a protocol (no chat template, a kind it cannot ask) is refused before the run
folder exists, naming the options that work. The runs are those of
tests/tasks/test_runner_resume.py: three United States cities asked in English.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from dlama_fixture import write_dlama
from test_runner_resume import FakeModel, items, xfakt_run

from culture_probe import runner
from culture_probe.benchmarks.xfakt.task import JUDGE_NEED
from culture_probe.engine import Scorer
from culture_probe.engine.loading import ModelSpec
from culture_probe.errors import CultureProbeError, UnsupportedModelError
from culture_probe.models.tiny import save_tiny, train_tokenizer
from culture_probe.rundir import ResumeNotice
from culture_probe.runner import RunSettings, run
from culture_probe.runner.stage_models import StageModelNotice, resolve_stage_model

FMLAMA_ROW = {
    "id": "Q1|en",
    "group": "China",
    "continent": "Asia",
    "origin": "People's Republic of China",
    "lang": "en",
    "sub_label": "mapo doufu",
    "obj_label": ["tofu", "rice"],
}
CHAT = "{% for m in messages %}<user> {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}<bot>{% endif %}"
TEXTS = ["In which country is New York located? United States India [1] [4]"] * 3


def tiny(path: Path, arch: str = "gpt2", *, chat: bool = True) -> str:
    """A tiny random model saved in `path` (GPT-2 or BERT), with a chat template or none."""
    masked = arch == "bert"
    tok = train_tokenizer(
        TEXTS,
        "wordpiece" if masked else "bpe",
        vocab_size=300,
        model_kind="masked" if masked else "causal",
    )
    if chat:
        tok.chat_template = CHAT
    return str(save_tiny(path, arch, tok, layers=1, hidden=32, heads=2))


def config_of(tmp_path: Path, folder: str = "run") -> dict:
    return json.loads((tmp_path / folder / "config.json").read_text())


@contextmanager
def no_weights() -> Iterator[None]:
    """Fail the test if any model's weights are loaded meanwhile."""

    def refuse(cls, name, **kwargs):
        raise AssertionError(f"weights of {name} were loaded")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Scorer, "from_pretrained", classmethod(refuse))
        yield


# ---------------------------------------------------------------- the judge, before the first
# answer


def test_a_judge_that_cannot_be_found_fails_before_any_answer_naming_the_alternatives(
    xfakt_release, tmp_path
):
    model = FakeModel("United States", "m")
    alternatives = (
        r"--option judge=string .*--option judge_model=PATH.*"
        r"--option judge_model=openai:NAME with --base-url"
    )
    # the paper's judge, offline and not cached (every test has an empty Hub cache)
    with pytest.raises(
        UnsupportedModelError,
        match=rf"judge stage's model 'Qwen/Qwen2.5-72B-Instruct'.*{alternatives}",
    ):
        xfakt_run(xfakt_release, model, tmp_path)
    with pytest.raises(UnsupportedModelError, match=rf"does not exist.*{alternatives}"):
        xfakt_run(xfakt_release, model, tmp_path, judge_model=str(tmp_path / "absent"))
    with pytest.raises(
        UnsupportedModelError, match=rf"pass the server's --base-url.*{alternatives}"
    ):
        xfakt_run(xfakt_release, model, tmp_path, judge_model="openai:judge")
    assert model.prompts == [] and not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("arch", "chat", "message"),
    [
        (
            "gpt2",
            False,
            r"through its chat template.*has no chat template\. Use --option judge=string",
        ),
        (
            "bert",
            True,
            r"The judge stage cannot probe a 'masked' model; it supports causal, seq2seq\..*judge=string",
        ),
    ],
)
def test_a_judge_that_cannot_judge_is_refused_before_any_answer(
    xfakt_release, tmp_path, arch, chat, message
):
    judge = tiny(tmp_path / "judge", arch, chat=chat)
    model = FakeModel("United States", "m")
    with pytest.raises(UnsupportedModelError, match=message):
        xfakt_run(xfakt_release, model, tmp_path, judge_model=judge)
    assert model.prompts == [] and not (tmp_path / "run").exists()


def test_the_judges_memory_is_counted_from_its_config_and_stated(xfakt_release, tmp_path):
    from transformers import AutoModelForCausalLM

    judge = tiny(tmp_path / "judge")
    reference = sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(judge).parameters())
    with pytest.warns(
        StageModelNotice, match=rf"the judge stage loads {judge} \(causal\) once .* in float32"
    ):
        result = xfakt_run(
            xfakt_release,
            FakeModel("United States", "m"),
            tmp_path,
            judge_model=judge,
            max_new_tokens=2,
        )
    stated = result.config.to_json()["stage_models"]["judge"]
    assert stated["parameters"] == reference and stated["weight_bytes"] == 4 * reference
    assert config_of(tmp_path)["stage_models"] == result.config.to_json()["stage_models"]
    # no weights are read: the folder without its weight file gives the same count, in the run's
    # dtype
    bare = tmp_path / "bare"
    shutil.copytree(judge, bare, ignore=shutil.ignore_patterns("*.safetensors"))
    half = resolve_stage_model(str(bare), "judge", JUDGE_NEED, RunSettings.of(dtype="bfloat16"))
    assert (half.parameters, half.weight_bytes, half.dtype) == (
        reference,
        2 * reference,
        "bfloat16",
    )


@pytest.mark.slow
def test_the_papers_judge_takes_its_72_7b_parameters_in_bfloat16(tmp_path):
    from transformers import Qwen2Config

    # Qwen2.5-72B-Instruct's config.json (its model card: 72.7B parameters, bfloat16)
    folder = tmp_path / "qwen"
    Qwen2Config(
        hidden_size=8192,
        intermediate_size=29568,
        num_hidden_layers=80,
        num_attention_heads=64,
        num_key_value_heads=8,
        vocab_size=152064,
        max_position_embeddings=32768,
        tie_word_embeddings=False,
        dtype="bfloat16",
    ).save_pretrained(folder)
    tok = train_tokenizer(TEXTS, "bpe", vocab_size=300)
    tok.chat_template = CHAT
    tok.save_pretrained(folder)
    judge = resolve_stage_model(str(folder), "judge", JUDGE_NEED, RunSettings())
    assert judge.parameters == pytest.approx(72.7e9, abs=0.05e9) and judge.dtype == "bfloat16"
    assert judge.weight_bytes == 2 * judge.parameters
    assert "72.7B parameters, 135.4 GiB of weights in bfloat16" in judge.describe("judge")


# ---------------------------------------------------------------- resuming with another judge


def test_answers_whose_judge_failed_to_load_are_judged_on_resume_by_the_string_judge(
    xfakt_release, tmp_path, monkeypatch
):
    judge = tiny(tmp_path / "judge")
    loading = ModelSpec.load

    def out_of_memory(spec):
        if spec.name == str(judge):
            raise RuntimeError("CUDA out of memory")
        return loading(spec)

    monkeypatch.setattr("culture_probe.engine.loading.ModelSpec.load", out_of_memory)
    with pytest.raises(RuntimeError, match="out of memory"):
        xfakt_run(
            xfakt_release, FakeModel("India", "m"), tmp_path, judge_model=judge, max_new_tokens=4
        )
    assert [r["stage"] for r in items(tmp_path)] == ["answer"] * 3
    model = FakeModel("India", "m")
    with pytest.warns(ResumeNotice, match=r"judge='string' \(was 'llm'\)"):
        resumed = xfakt_run(
            xfakt_release, model, tmp_path, judge="string", max_new_tokens=4, resume=True
        )
    fresh = xfakt_run(
        xfakt_release, FakeModel("India", "m"), tmp_path / "fresh", judge="string", max_new_tokens=4
    )
    assert model.prompts == [] and resumed.metrics == fresh.metrics
    assert resumed.metrics["verdicts"] == {"incorrect": 3}  # "India" for three US cities
    assert config_of(tmp_path)["options"]["judge"] == "string" and list(
        config_of(tmp_path)["stage_options"]
    ) == ["answer"]


def fake_judges(monkeypatch, **replies: str) -> dict[str, FakeModel]:
    """Judges by name (`judge_a="[4]"` is judge/a, always answering "[4]"), resolved and loaded
    without files.
    """
    judges = {name.replace("_", "/"): FakeModel(reply, name) for name, reply in replies.items()}
    monkeypatch.setattr(
        "culture_probe.runner.stage_models.resolve_stage_model",
        lambda name, *_: runner.stage_models.StageModel(name, "causal"),
    )
    monkeypatch.setattr(
        "culture_probe.engine.loading.ModelSpec.load",
        lambda spec: judges.get(spec.name, spec.scorer),
    )
    return judges


def test_resume_with_another_judge_model_rejudges_every_answer_and_asks_the_model_nothing(
    xfakt_release, tmp_path, monkeypatch
):
    judges = fake_judges(monkeypatch, judge_a="[4]", judge_b="[1]")
    xfakt_run(
        xfakt_release,
        FakeModel("United States", "m"),
        tmp_path,
        judge_model="judge/a",
        max_new_tokens=4,
    )
    model = FakeModel("United States", "m")
    with pytest.warns(
        ResumeNotice,
        match=r"judge_model='judge/b' \(was 'judge/a'\); the 3 record\(s\) of its judge ",
    ):
        resumed = xfakt_run(
            xfakt_release, model, tmp_path, judge_model="judge/b", max_new_tokens=4, resume=True
        )
    fresh = xfakt_run(
        xfakt_release,
        FakeModel("United States", "m"),
        tmp_path / "fresh",
        judge_model="judge/b",
        max_new_tokens=4,
    )
    # 3 for the resume, 3 for the fresh run
    assert model.prompts == [] and len(judges["judge/b"].prompts) == 6
    assert resumed.metrics == fresh.metrics and resumed.metrics["verdicts"] == {"same_language": 3}
    lines = items(tmp_path)
    assert len(lines) == 6 and {r["judge_output"] for r in lines if r["stage"] == "judge"} == {
        "[1]"
    }
    assert config_of(tmp_path)["options"]["judge_model"] == "judge/b"
    again = xfakt_run(
        xfakt_release, model, tmp_path, judge_model="judge/b", max_new_tokens=4, resume=True
    )
    assert (
        model.prompts == []
        and len(judges["judge/b"].prompts) == 6
        and again.metrics == fresh.metrics
    )


def test_a_string_judged_run_resumes_with_an_llm_judge_asking_only_the_judge(
    xfakt_release, tmp_path, monkeypatch
):
    judges = fake_judges(monkeypatch, judge_a="[4]")
    xfakt_run(
        xfakt_release, FakeModel("United States", "m"), tmp_path, judge="string", max_new_tokens=4
    )
    model = FakeModel("United States", "m")
    with pytest.warns(ResumeNotice, match=r"judge='llm' \(was 'string'\)"):
        resumed = xfakt_run(
            xfakt_release, model, tmp_path, judge_model="judge/a", max_new_tokens=4, resume=True
        )
    fresh = xfakt_run(
        xfakt_release,
        FakeModel("United States", "m"),
        tmp_path / "f",
        judge_model="judge/a",
        max_new_tokens=4,
    )
    assert model.prompts == [] and len(judges["judge/a"].prompts) == 6
    # the LLM's "[4]"
    assert resumed.metrics == fresh.metrics and resumed.metrics["verdicts"] == {"incorrect": 3}


def test_an_answer_stage_change_is_refused_on_resume_and_a_metrics_option_is_not(
    xfakt_release, tmp_path
):
    xfakt_run(
        xfakt_release, FakeModel("United States", "m"), tmp_path, judge="string", max_new_tokens=4
    )
    before = (tmp_path / "run" / "items.jsonl").read_text()
    with pytest.raises(
        CultureProbeError,
        match=r"option max_new_tokens of its answer stage, which already ran, was 4 and is now 8",
    ):
        xfakt_run(
            xfakt_release,
            FakeModel("United States", "m"),
            tmp_path,
            judge="string",
            max_new_tokens=8,
            resume=True,
        )
    assert (tmp_path / "run" / "items.jsonl").read_text() == before
    model = FakeModel("United States", "m")
    with pytest.warns(ResumeNotice, match=r"round_cells=False \(was True\)\.$"):
        xfakt_run(
            xfakt_release,
            model,
            tmp_path,
            judge="string",
            max_new_tokens=4,
            round_cells=False,
            resume=True,
        )
    assert model.prompts == [] and config_of(tmp_path)["options"]["round_cells"] is False
    assert (tmp_path / "run" / "items.jsonl").read_text() == before


def test_a_run_that_did_not_record_its_stages_options_refuses_any_option_change(
    xfakt_release, tmp_path
):
    xfakt_run(xfakt_release, FakeModel("United States", "m"), tmp_path, judge="string")
    config = config_of(tmp_path)
    del config["stage_options"]  # as runs made before stages recorded their options
    (tmp_path / "run" / "config.json").write_text(json.dumps(config))
    with pytest.raises(
        CultureProbeError,
        match=r"options was .*'round_cells': True.* and is now .*'round_cells': False",
    ):
        xfakt_run(
            xfakt_release,
            FakeModel("United States", "m"),
            tmp_path,
            judge="string",
            round_cells=False,
            resume=True,
        )


# ---------------------------------------------------------------- models that cannot serve the
# protocol


def test_a_causal_model_without_a_chat_template_is_refused_before_any_folder_naming_what_works(
    xfakt_release, tmp_path
):
    model = tiny(tmp_path / "base", chat=False)
    with no_weights():
        with pytest.raises(
            UnsupportedModelError,
            match=r"X-FaKT asks each question .* chat template.*has no chat template\. Use --option mode=rank "
            r"--option rank_prompt=plain",
        ):
            xfakt_run(xfakt_release, model, tmp_path, judge="string")
        with pytest.raises(
            UnsupportedModelError,
            match=r"rank mode scores the countries .* --option rank_prompt=plain",
        ):
            xfakt_run(xfakt_release, model, tmp_path, mode="rank")
    assert not (tmp_path / "run").exists()
    result = xfakt_run(xfakt_release, model, tmp_path, mode="rank", rank_prompt="plain")
    assert len(result.records) == 3 and {d["id"] for d in result.config.deviations} >= {"X7"}


def test_generation_modes_refuse_models_they_cannot_ask_before_any_folder(
    tmp_path, fmlama_release, xfakt_release
):
    base, masked = tiny(tmp_path / "base", chat=False), tiny(tmp_path / "bert", "bert")
    dlama = {"data_dir": str(write_dlama(tmp_path / "dlama")), "mode": "generate"}
    fmlama = {"data_dir": str(fmlama_release), "rows": [FMLAMA_ROW], "mode": "chat"}
    cases = [
        ("dlama_arab_west", base, dlama, r"has no chat template\. Use --option mode=rank"),
        ("dlama_arab_west", masked, dlama, r"'masked' model.*Use --option mode=rank"),
        (
            "fmlama_en",
            base,
            fmlama,
            r"FmLAMA chat mode .* has no chat template\. Use --option mode=rank",
        ),
        ("fmlama_en", masked, fmlama, r"'masked' model.*Use --option mode=rank"),
        (
            "xfakt_factual_recall",
            masked,
            {"data_dir": str(xfakt_release)},
            r"cannot probe a 'masked' model; it supp",
        ),
    ]
    out = tmp_path / "run"
    for config, model, options, message in cases:
        with no_weights(), pytest.raises(UnsupportedModelError, match=message):
            run(config, model, out=out, progress=False, **options)
        assert not out.exists()
