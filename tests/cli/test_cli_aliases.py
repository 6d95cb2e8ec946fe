"""lm-evaluation-harness 0.4's spellings of `run` (`--tasks`, `--model hf --model_args pretrained=`,
`--output_path`, `--batch_size`) ask for exactly what the native spellings ask for; a clash is one
line.
"""

from __future__ import annotations

import pytest

from culture_probe.cli import build_parser, main
from culture_probe.runner.run_command import planned
from culture_probe.settings import TOKENS_PER_SEQUENCE

NATIVE = ["run", "camel_co_prompts", "maps_en", "--model", "gpt2", "--model-args", "dtype=float32"]


def _planned(argv: list[str]):
    return planned(build_parser().parse_args(argv))


@pytest.mark.parametrize(
    "native, alias",
    [
        (
            NATIVE,
            [
                "run",
                "--tasks",
                "camel_co_prompts,maps_en",
                "--model",
                "gpt2",
                "--model_args",
                "dtype=float32",
            ],
        ),
        (
            NATIVE,
            [
                "run",
                "--tasks",
                "camel_co_prompts",
                "--tasks",
                "maps_en",
                "--model-args",
                "pretrained=gpt2,dtype=float32",
            ],
        ),
        (
            NATIVE,
            ["run", *NATIVE[1:3], "--model", "hf", "--model_args", "pretrained=gpt2,dtype=float32"],
        ),
        ([*NATIVE, "--out", "runs/x"], [*NATIVE, "--output_path", "runs/x"]),
        ([*NATIVE, "--batch-tokens", str(8 * TOKENS_PER_SEQUENCE)], [*NATIVE, "--batch_size", "8"]),
        (NATIVE, [*NATIVE, "--batch_size", "auto"]),
    ],
    ids=[
        "tasks-model_args",
        "tasks-twice-pretrained",
        "model-hf",
        "output_path",
        "batch_size",
        "batch_size-auto",
    ],
)
def test_an_lm_eval_spelling_asks_for_what_the_native_one_does(native, alias):
    assert _planned(alias) == _planned(native)


def test_help_shows_the_native_spelling_first_and_names_the_aliases(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--out OUT, --output_path OUT" in text
    assert "--model-args KEY=VALUE,..., --model_args KEY=VALUE,..." in text
    assert "lm-evaluation-harness 0.4's spellings work too: --tasks (CONFIG)" in text


@pytest.mark.parametrize(
    "argv, message",
    [
        ([*NATIVE, "--tasks", "maps_en"], "named twice (CONFIG and --tasks)"),
        (
            [*NATIVE, "--batch-tokens", "64", "--batch_size", "2"],
            "--batch-tokens and --batch_size both",
        ),
        (
            ["run", "maps_en", "--model", "vllm", "--model_args", "pretrained=x"],
            "--model openai:NAME --base-url",
        ),
        (
            ["run", "maps_en", "--model", "gpt2", "--batch_size", "0"],
            "give a whole number of sequences, or auto",
        ),
        (["run", "--model", "gpt2"], "Name a benchmark config"),
    ],
    ids=["configs-twice", "batch-twice", "served-backend", "batch-size-zero", "no-config"],
)
def test_a_clash_or_a_bad_alias_value_is_one_line(argv, message, capsys):
    try:
        code = main(argv)
    except SystemExit as exit:  # argparse's own refusal of a value
        code = exit.code
    err = capsys.readouterr().err
    assert code == 2
    # argparse's usage, then one line
    assert message in err.strip().splitlines()[-1] and "Traceback" not in err, err
