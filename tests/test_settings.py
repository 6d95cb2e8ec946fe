"""Run settings are declared once (`culture_probe.settings.RunSettings`): the command line's run
flags, their help and defaults come from the fields, `run(...)` and a suite take the same fields as
keywords, and the model's `dtype` and `revision` live only in `ModelArgs`, whichever way they are
given. Every `KEY=VALUE` flag refuses a malformed pair or a key given twice the same way
(`culture_probe.util.keyvalue`).
"""

from __future__ import annotations

import pytest

from culture_probe.cli import build_parser
from culture_probe.engine.types import ModelArgs
from culture_probe.errors import InvalidValueError
from culture_probe.settings import RunSettings, flag_fields, from_arguments


def run_flags(*argv: str):
    return build_parser().parse_args(["run", "dlama_arab_west", "--model", "m", *argv])


def test_every_setting_is_a_run_flag_with_the_fields_help_and_default():
    run = next(a for a in build_parser()._actions if a.dest == "command").choices["run"]
    flags = {option: action for action in run._actions for option in action.option_strings}
    for spec in flag_fields():
        action = flags[f"--{spec.name.replace('_', '-')}"]
        assert action.help.startswith(spec.metadata["help"]), spec.name
    # no flag: every field's default
    assert RunSettings.of(**from_arguments(run_flags())) == RunSettings()


def test_flags_and_keywords_make_the_same_settings():
    argv = (
        "--limit",
        "smoke",
        "--seed",
        "3",
        "--corrected",
        "--max-retries",
        "0",
        "--dtype",
        "float16",
    )
    keywords = {
        "limit": "smoke",
        "seed": 3,
        "corrected": True,
        "max_retries": 0,
        "dtype": "float16",
    }
    assert RunSettings.of(**from_arguments(run_flags(*argv))) == RunSettings.of(**keywords)


def test_dtype_and_revision_are_written_into_model_args_their_only_home():
    settings, options = RunSettings.split(
        {"dtype": "bfloat16", "revision": "v1", "judge": "string"}
    )
    assert settings.model_args == ModelArgs(dtype="bfloat16", revision="v1") and options == {
        "judge": "string"
    }
    assert "dtype" not in settings.recorded() and "revision" not in settings.recorded()
    with pytest.raises(
        InvalidValueError, match="--dtype float16 and --model-args dtype=float32 disagree"
    ):
        RunSettings.of(dtype="float16", model_args="dtype=float32")


def test_keywords_apply_over_a_settings_object():
    settings, _ = RunSettings.split({"limit": 5}, RunSettings(seed=2, limit=1))
    assert (settings.seed, settings.limit) == (2, 5)
    with pytest.raises(InvalidValueError, match="batch_tokens must be a whole number >= 1, got 0"):
        RunSettings.of(batch_tokens=0)  # the bounds declared on the field


def parsers():
    from culture_probe.curation.regions import resolve_region
    from culture_probe.data.export import parse_data_dirs
    from culture_probe.runner.run_command import option_values

    return {
        "--model-args": ModelArgs.parse,
        "--option": lambda text: option_values(text.split(",")),
        "--data-dir": parse_data_dirs,
        "--region": resolve_region,
    }


@pytest.mark.parametrize("flag", ["--model-args", "--option", "--data-dir", "--region"])
def test_every_key_value_flag_refuses_a_malformed_pair_naming_the_flag_and_the_text(flag):
    with pytest.raises(
        InvalidValueError, match=f"^{flag} takes [A-Z]+=[A-Z]+.*, got '=x' \\(e\\.g\\. {flag} "
    ):
        parsers()[flag]("=x")


@pytest.mark.parametrize(
    "flag,text",
    [
        ("--model-args", "dtype=float16,dtype=float32"),
        ("--option", "n=1,n=2"),
        ("--data-dir", "maps=a,maps=b"),
    ],
)
def test_every_key_value_flag_refuses_a_key_given_twice_naming_both_values(flag, text):
    key = text.split("=")[0]
    with pytest.raises(
        InvalidValueError, match=f"^{flag} gives {key} twice \\('.*' and '.*'\\): keep one"
    ):
        parsers()[flag](text)
