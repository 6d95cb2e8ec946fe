"""Options in a suite: a plain `--option key=value` goes to every config that has `key` (refused
only when none does, naming the configs that have it), `CONFIG.key` or `BENCHMARK.key` to those it
names, a key reaching one config with two values is refused; the same in Python (`options=`);
config.json and suite.json record what each got. All checked before any data or model loads.
`culture-probe run dlama fmlama camel xfakt maps --model M --option mode=rank --option
rank_prompt=plain` stopped at X-FaKT's chat template, and X-FaKT's options then stopped DLAMA.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from dlama_fixture import TableScorer, spec_table, write_dlama

import culture_probe
from culture_probe.cli import main
from culture_probe.data.registry import groups, resolve
from culture_probe.errors import CultureProbeError, InvalidValueError, UnknownNameError
from culture_probe.tasks.routing import options_per_config

FIVE = [
    "dlama_arab_west",
    "fmlama_en",
    "camel_co_prompts",
    "xfakt_factual_recall",
    "xfakt_in_context",
    "maps_en",
]
DLAMA = ["dlama_arab_west", "dlama_arab_west_corrected"]


class Planned(CultureProbeError):
    """Raised where the suite would load its model: every config's options were routed and checked
    by then.
    """


@pytest.fixture
def routed(monkeypatch):
    """{config: the options it was planned with}: a suite stopped where its model would load, so
    that nothing (data, tokenizer, weights) is read.
    """
    got: dict[str, dict] = {}

    def planned(config, model, settings, options, data_dirs):
        got[config] = dict(options)

    def load(spec):
        raise Planned("planned")

    monkeypatch.setattr("culture_probe.runner.suite.planned", planned)
    monkeypatch.setattr("culture_probe.engine.loading.ModelSpec.load", load)
    return got


@pytest.fixture
def table_model(monkeypatch):
    """The DLAMA table scorer as the suite's and the run's model (no weights)."""
    monkeypatch.setattr(
        "culture_probe.engine.loading.ModelSpec.load",
        lambda spec: TableScorer(spec_table()),
    )
    monkeypatch.setattr("culture_probe.engine.loading.ModelSpec.kind", lambda spec: "masked")


def test_a_plain_option_goes_to_every_config_that_has_it():
    each = options_per_config(FIVE, {"mode": "rank", "rank_prompt": "plain"})
    xfakt = {"mode": "rank", "rank_prompt": "plain"}
    assert each == {
        "dlama_arab_west": {"mode": "rank"},
        "fmlama_en": {"mode": "rank"},
        "camel_co_prompts": {},
        "xfakt_factual_recall": xfakt,
        "xfakt_in_context": xfakt,
        "maps_en": {},
    }


def test_a_prefix_gives_an_option_to_one_benchmark_or_one_config():
    each = options_per_config(
        FIVE, {"xfakt.judge": "string", "xfakt_in_context.max_new_tokens": "8", "score": "sum"}
    )
    assert each["xfakt_factual_recall"] == {"judge": "string"}
    assert each["xfakt_in_context"] == {"judge": "string", "max_new_tokens": "8"}
    assert (
        each["dlama_arab_west"] == {"score": "sum"} and each["fmlama_en"] == each["maps_en"] == {}
    )


def test_an_option_no_config_of_the_run_has_is_refused_naming_the_configs_that_have_it():
    with pytest.raises(InvalidValueError) as refused:
        options_per_config(["dlama_arab_west", "camel_co_prompts"], {"rank_prompt": "plain"})
    xfakt = ", ".join(groups()["xfakt"])
    assert str(refused.value) == (
        "No config of this run (dlama_arab_west, camel_co_prompts) has option rank_prompt; xfakt's configs "
        f"({xfakt}) have it. Drop rank_prompt=..., or run those configs."
    )
    with pytest.raises(
        InvalidValueError, match=r"mode; dlama's configs .*; fmlama's configs .*; xfakt's configs"
    ):
        options_per_config(["camel_co_prompts"], {"mode": "rank"})
    with pytest.raises(
        UnknownNameError, match=r"Unknown option 'rank_prmpt'. Did you mean 'rank_prompt'"
    ):
        options_per_config(["xfakt_factual_recall", "dlama_arab_west"], {"rank_prmpt": "plain"})


def test_a_prefix_naming_no_config_or_benchmark_of_the_run_is_refused_naming_them():
    with pytest.raises(UnknownNameError) as refused:
        options_per_config(["dlama_arab_west", "xfakt_in_context"], {"xfak.judge": "string"})
    message = str(refused.value)
    assert message.startswith("Unknown option prefix 'xfak'. Did you mean 'xfakt'?")
    assert (
        "name a benchmark or config of this run: dlama, xfakt, dlama_arab_west, xfakt_in_context"
        in message
    )
    # a config, but not of this run
    with pytest.raises(UnknownNameError, match="Unknown option prefix 'maps_en'"):
        options_per_config(["dlama_arab_west"], {"maps_en.question": "neg"})


def test_one_option_with_two_values_for_one_config_is_refused_naming_both():
    with pytest.raises(InvalidValueError) as refused:
        options_per_config(FIVE, {"mode": "rank", "xfakt.mode": "generate"})
    assert str(refused.value) == (
        "Option mode of xfakt_factual_recall is given twice: mode=rank and xfakt.mode=generate. Give one value "
        "(neither spelling overrides the other)."
    )
    with pytest.raises(
        InvalidValueError, match="xfakt_in_context is given twice: xfakt.judge=llm and "
    ):
        options_per_config(FIVE, {"xfakt.judge": "llm", "xfakt_in_context.judge": "string"})
    # one value, two spellings: fine
    same = options_per_config(FIVE, {"mode": "rank", "xfakt.mode": "rank"})
    assert same["xfakt_in_context"] == {"mode": "rank"}
    with pytest.raises(
        InvalidValueError, match=r"Option score is given twice: 'sum' in options= and 'mean' as a"
    ):
        culture_probe.run_suite(DLAMA, "m", options={"score": "sum"}, score="mean")


def test_the_readme_runs_the_five_benchmarks_as_one_suite_on_a_base_or_a_chat_model(
    routed, tmp_path, monkeypatch
):
    # its two commands: each config is planned with its own options, refused nowhere
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    five = " run dlama fmlama camel xfakt maps "
    base, chat = [shlex.split(line)[1:] for line in readme.splitlines() if five in line]
    monkeypatch.chdir(tmp_path)
    # the README's --data-dir folders, read by no check before the model
    for folder in ("dlama-v1", "maps"):
        (tmp_path / folder).mkdir()
    assert main(base) == 2  # stopped where the model would load
    assert list(routed) == [
        c for name in ("dlama", "fmlama", "camel", "xfakt", "maps") for c in groups()[name]
    ]
    for config, options in routed.items():
        benchmark = resolve(config).info.name
        mode = {"mode": "rank"} if benchmark in ("dlama", "fmlama", "xfakt") else {}
        assert options == ({**mode, "rank_prompt": "plain"} if benchmark == "xfakt" else mode)
    routed.clear()
    assert main(chat) == 2
    assert {c: o for c, o in routed.items() if o} == {
        c: {"judge": "string"} for c in groups()["xfakt"]
    }


def test_every_option_is_checked_before_any_data_or_model_loads(routed):
    with pytest.raises(
        CultureProbeError,
        match="In the suite's config dlama_arab_west: Unknown value of option mode",
    ):
        # fmlama's mode, not dlama's
        culture_probe.run_suite(["fmlama_en", "dlama_arab_west"], "m", mode="chat")
    assert routed == {}
    with pytest.raises(Planned):  # the prefixed form: FmLAMA alone gets it
        culture_probe.run_suite(
            ["fmlama_en", "dlama_arab_west"], "m", options={"fmlama.mode": "chat"}
        )
    assert routed == {"fmlama_en": {"mode": "chat"}, "dlama_arab_west": {}}


def test_config_json_and_suite_json_record_what_each_config_got(tmp_path, table_model):
    data = write_dlama(tmp_path / "dlama")
    suite = culture_probe.run_suite(
        DLAMA,
        "m",
        data_dir=str(data),
        out=tmp_path / "suite",
        progress=False,
        language="en",
        options={"keep_scores": True, "dlama_arab_west_corrected.score": "sum"},
    )
    recorded = {
        c: json.loads((tmp_path / "suite" / c / "config.json").read_text())["options"]
        for c in DLAMA
    }
    assert (
        recorded["dlama_arab_west"]["score"],
        recorded["dlama_arab_west_corrected"]["score"],
    ) == ("mean", "sum")
    assert all(options["keep_scores"] for options in recorded.values())
    summary = json.loads((tmp_path / "suite" / "suite.json").read_text())
    assert {row["config"]: row["options"] for row in summary["configs"]} == {
        "dlama_arab_west": {"keep_scores": True},
        "dlama_arab_west_corrected": {"keep_scores": True, "score": "sum"},
    }
    assert suite.summary == summary


def test_one_run_takes_a_prefix_naming_its_own_config_or_benchmark(tmp_path, table_model):
    data = write_dlama(tmp_path / "dlama")
    common = {"data_dir": str(data), "progress": False, "language": "en", "limit": 2}
    result = culture_probe.run("dlama_arab_west", "m", options={"dlama.score": "sum"}, **common)
    assert result.config.options["score"] == "sum"
    result = culture_probe.run(
        "dlama_arab_west", "m", options={"dlama_arab_west.keep_scores": True}, **common
    )
    assert result.config.options["keep_scores"] is True
    with pytest.raises(UnknownNameError, match="Unknown option prefix 'xfakt'"):
        culture_probe.run("dlama_arab_west", "m", options={"xfakt.judge": "string"}, **common)


@pytest.fixture(scope="module")
def base_model(tmp_path_factory):
    """A tiny GPT-2 without a chat template: a base model."""
    from culture_probe.models import save_tiny, train_tokenizer

    tokenizer = train_tokenizer(
        ["Egypt is located in Africa ."] * 4, "bpe", vocab_size=120, model_kind="causal"
    )
    return save_tiny(
        tmp_path_factory.mktemp("base") / "gpt2", "gpt2", tokenizer, layers=1, hidden=32, heads=2
    )


def test_x_fakt_plans_on_a_base_model_with_mode_rank_given_to_the_suite(
    base_model, tmp_path, capsys
):
    # X-FaKT refuses a model without a chat template unless ranked after the plain question; DLAMA
    # takes mode=rank
    data = write_dlama(tmp_path / "dlama")
    argv = [
        "run",
        "xfakt_in_context",
        "dlama_arab_west",
        "--model",
        str(base_model),
        "--dry-run",
        "--show",
        "0",
    ]
    argv += ["--limit", "2", "--language", "en", "--data-dir", f"dlama={data}"]
    assert main(argv) == 2
    assert (
        "has no chat template. Use --option mode=rank --option rank_prompt=plain"
        in capsys.readouterr().err
    )
    assert main([*argv, "--option", "mode=rank", "--option", "rank_prompt=plain"]) == 0
    out = capsys.readouterr().out
    assert "xfakt_in_context: a causal model" in out and "dlama_arab_west: a causal model" in out
