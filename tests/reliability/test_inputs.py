"""Every input is checked before anything loads, and the Python API checks its arguments as the
command line does: a key given twice, an option of the wrong type or range, a custom row that does
not fit its benchmark and a wrong argument are each one `CultureProbeError` naming what is wrong,
raised before any data, model or score.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from culture_probe.benchmarks.camel.task import CamelOptions
from culture_probe.benchmarks.fmlama.metrics import mean_average_precision
from culture_probe.benchmarks.fmlama.task import FmlamaOptions
from culture_probe.cli import main
from culture_probe.engine import Scorer, ScoreRequest
from culture_probe.engine.types import CandidateScores, ModelArgs
from culture_probe.errors import CultureProbeError, InvalidValueError, MetricInputError
from culture_probe.metrics import load_metric
from culture_probe.models.tiny import tiny_model, train_tokenizer
from culture_probe.runner import run
from culture_probe.tasks.options import parse_options

MAPS_ROW = {
    "id": "maps_en-test-0000",
    "language": "en",
    "proverb": "Look before you leap",
    "conversation": 'Person 1: "Should I sign now?" Person 2: "Look before you leap."',
    "answer1": "Think first.",
    "answer2": "Do not think first.",
    "is_figurative": True,
    "label": "a",
}


class NeverCalled:
    """A loaded model that fails the test if anything is asked of it: the error must come first."""

    kind = "causal"
    identity = {"name_or_path": "never"}

    def score(self, requests, options=None):
        raise AssertionError("scored before the bad input was refused")

    def generate(self, prompts, options=None):
        raise AssertionError("generated before the bad input was refused")


class Letters:
    """A causal stand-in that answers MAPS's a/b letters (a run that gets this far scores)."""

    kind = "causal"
    identity = {"name_or_path": "letters"}

    def score(self, requests, options=None):
        return [
            CandidateScores(
                r.candidates, np.full(len(r.candidates), -1.0), np.ones(len(r.candidates))
            )
            for r in requests
        ]

    def generate(self, prompts, options=None):
        return [" nothing"] * len(prompts)


def _cli_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one stderr line of a command that must exit 2."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip() and "it/s]" not in line]
    assert "Traceback" not in err and len(lines) == 1, err[-2000:]
    return lines[0]


# ---------------------------------------------------------------- a key given twice


def test_a_model_argument_given_twice_names_both_values():
    with pytest.raises(
        InvalidValueError, match=r"--model-args gives dtype twice \('float32' and 'bfloat16'\)"
    ):
        ModelArgs.parse("dtype=float32,dtype=bfloat16")


@pytest.mark.parametrize(
    "text,says",
    [
        ("attn_implementation=banana", r"Unknown attn_implementation 'banana'.*sdpa"),
        ("device_map=banana", r"Unknown device_map 'banana'.*auto.*Or one device"),
    ],
)
def test_a_model_argument_transformers_would_refuse_is_named_before_loading(text, says):
    with pytest.raises(CultureProbeError, match=says):
        ModelArgs.parse(text)
    # valid ones load
    assert ModelArgs.parse("attn_implementation=sdpa,device_map=cuda:0").device_map == "cuda:0"


def test_an_option_given_twice_names_both_values(capsys):
    line = _cli_line(
        [
            "run",
            "maps_en",
            "--model",
            "planted:maps_en",
            "--option",
            "question=pos",
            "--option",
            "question=neg",
        ],
        capsys,
    )
    assert re.search(r"--option gives question twice \('pos' and 'neg'\)", line), line


# ---------------------------------------------------------------- options: type and range, before
# any data


@pytest.mark.parametrize(
    "options_type,values,says",
    [
        (CamelOptions, {"tie_value": "nan"}, r"tie_value must be a finite number, got nan"),
        (CamelOptions, {"tie_value": 2.0}, r"tie_value .* must be >= 0 and <= 1, got 2.0"),
        (CamelOptions, {"culture_token": 1}, r"culture_token must be True or False, got 1"),
        (
            FmlamaOptions,
            {"country_names": "[1,2]"},
            r"country_names must be a JSON object \{str: \{str: str\}\}",
        ),
        (
            FmlamaOptions,
            {"country_names": {"en": {"Italy": 1}}},
            r"country_names must be a JSON object",
        ),
        (FmlamaOptions, {"chat_temperature": "-1"}, r"chat_temperature must be > 0, got -1.0"),
        (FmlamaOptions, {"families": ("country", 3)}, r"families must be a list of strings"),
    ],
)
def test_an_option_of_the_wrong_type_or_range_is_named(options_type, values, says):
    with pytest.raises(InvalidValueError, match=says):
        parse_options(options_type, values)


def test_a_bad_option_is_refused_before_the_data_is_read(tmp_path):
    # no CAMeL data in an empty folder: the option error must come first
    with pytest.raises(InvalidValueError, match="tie_value must be a finite number"):
        run(
            "camel_co_prompts",
            NeverCalled(),
            tie_value=math.nan,
            data_dir=str(tmp_path),
            progress=False,
        )


def test_a_sample_above_every_pool_is_refused_with_the_pool_size(mirror):
    with pytest.raises(
        InvalidValueError,
        match=r"sample_size=100000 is above every entity pool \(the largest holds \d+",
    ):
        run("camel_co_prompts", NeverCalled(), sample_size=100_000, progress=False)


# ---------------------------------------------------------------- custom rows, when read


@pytest.mark.parametrize(
    "change,says",
    [
        (
            {"label": "c"},
            r"Custom row 2 \(id 'bad'\): label is 'c', not one of the labels 'a', 'b'",
        ),
        ({"proverb": None}, r"Custom row 2 \(id 'bad'\): proverb is null"),
        ({"answer1": 7}, r"Custom row 2 \(id 'bad'\): answer1 is 7, not a string"),
    ],
)
def test_a_custom_row_that_does_not_fit_is_named_before_scoring(change, says):
    rows = [MAPS_ROW, {**MAPS_ROW, "id": "bad", **change}]
    with pytest.raises(InvalidValueError, match=says):
        run("maps_en", NeverCalled(), rows=rows, progress=False)


def test_rows_with_null_where_the_benchmark_has_nulls_still_run():
    result = run(
        "maps_en",
        Letters(),
        rows=[{**MAPS_ROW, "explanation": None}],
        memorisation=False,
        progress=False,
    )
    assert result.metrics["n"] == 1


def test_a_rows_file_with_a_wrong_label_is_one_line(tmp_path, capsys):
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({**MAPS_ROW, "label": "c"}) + "\n")
    line = _cli_line(["run", "maps_en", "--model", "planted:maps_en", "--rows", str(path)], capsys)
    assert "Custom row 1" in line and "label is 'c'" in line, line


# ---------------------------------------------------------------- the Python API's arguments


@pytest.mark.parametrize(
    "call,says",
    [
        (lambda: run(None, "gpt2"), r"run\(config\) takes one benchmark config name.*got None"),
        (
            lambda: run(["maps_en"], "gpt2"),
            r"got \['maps_en'\] \(several configs: culture_probe.run_suite\)",
        ),
        (lambda: run("maps_en", None), r"A model is a Hub id or local folder.*got None"),
        (lambda: run("maps_en", NeverCalled(), rows="rows.jsonl"), r"rows= takes a list of rows"),
        (
            lambda: load_metric(None),
            r"load_metric\(name\) takes a metric's name, one of .*cbs.*got None",
        ),
        (
            lambda: ScoreRequest("Egypt is in", None),
            r"ScoreRequest.candidates takes a list of strings, got None",
        ),
        (
            lambda: ScoreRequest("Egypt is in", [1, 2]),
            r"ScoreRequest.candidates takes a string, got 1",
        ),
        (lambda: ScoreRequest(None, ["Africa"]), r"ScoreRequest.left takes a string, got None"),
        (
            lambda: run("maps_en", NeverCalled(), model_args={"trust_remote_code": "yes"}),
            r"ModelArgs.trust_remote_code must be True or False, got 'yes' \(on the command line --model-args",
        ),
        (lambda: ModelArgs(dtype=16), r"ModelArgs.dtype must be a string or None, got 16"),
        (
            lambda: ScoreRequest("Egypt \ud800 is in", ["Africa"]),
            r"ScoreRequest.left holds '\\ud800' at character 6",
        ),
    ],
)
def test_a_wrong_argument_names_the_argument_and_what_it_takes(call, says):
    with pytest.raises(CultureProbeError, match=says):
        call()


@pytest.mark.parametrize(
    "predictions,references,says",
    [
        ([None], [["salt"]], r"`predictions` at index 0 must be a list of strings, got None"),
        ([["salt", 3]], [["salt"]], r"`predictions` at index 0 must be a list of strings"),
        ([["salt"]], [None], r"`references` at index 0 must be a list of strings, got None"),
    ],
)
def test_map_with_a_none_prediction_is_a_metric_error(predictions, references, says):
    with pytest.raises(MetricInputError, match=says):
        mean_average_precision(predictions, references)


@pytest.fixture(scope="module")
def tiny_scorers() -> dict[str, Scorer]:
    corpus = ["Egypt is located in Africa .", "Japan is located in Asia ."] * 4
    causal = train_tokenizer(corpus, "bpe", vocab_size=120, model_kind="causal")
    masked = train_tokenizer(corpus, "wordpiece", vocab_size=120, model_kind="masked")
    return {
        "causal": Scorer(tiny_model("gpt2", causal, layers=1, hidden=16, heads=2), causal),
        "masked": Scorer(tiny_model("bert", masked, layers=1, hidden=16, heads=2), masked),
    }


@pytest.mark.parametrize(
    "prompts,says",
    [
        ([""], r"generate\(prompts\[0\]\) is empty"),
        (["ok", "a\ud800"], r"generate\(prompts\[1\]\) holds '\\ud800'"),
    ],
)
def test_a_prompt_that_is_no_text_is_named(tiny_scorers, prompts, says):
    with pytest.raises(InvalidValueError, match=says):
        tiny_scorers["causal"].generate(prompts, max_new_tokens=2)


@pytest.mark.parametrize("where", ["left", "right", "candidates"])
def test_a_literal_mask_token_is_refused_not_made_a_second_slot(tiny_scorers, where):
    scorer = tiny_scorers["masked"]
    mask = scorer.tokenizer.mask_token
    fields = {"left": "Egypt is located in", "right": ".", "candidates": ["Africa", "Asia"]}
    fields[where] = (
        [f"{mask} Asia", "Africa"] if where == "candidates" else f"{fields[where]} {mask}"
    )
    with pytest.raises(InvalidValueError, match=rf"{where} text holds the mask token '\[MASK\]'"):
        scorer.score([ScoreRequest(**fields)])
    # the same text without it scores
    assert scorer.score([ScoreRequest("Egypt is located in", ["Africa", "Asia"])])


def test_fill_mask_refuses_a_literal_mask_token_too(tiny_scorers):
    scorer = tiny_scorers["masked"]
    with pytest.raises(InvalidValueError, match=r"left text holds the mask token"):
        scorer.fill_mask([f"Egypt {scorer.tokenizer.mask_token} is located in"])


# ---------------------------------------------------------------- flags given twice, numbers of
# another script or size

RUN_MAPS = ["run", "maps_en", "--model", "planted:maps_en"]


def _refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The error line of a command argparse refuses (its usage first), or that exits 2 with one
    line.
    """
    try:
        code = main(argv)
    except SystemExit as stop:
        code = stop.code
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err[-2000:]
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize(
    "flags,says",
    [
        (["--limit", "2", "--limit", "3"], "--limit 2 and --limit 3: give it once"),
        (["--out", "a", "--output_path", "b"], "--out a and --output_path b: give it once"),
        (["--seed", "1", "--seed", "2"], "--seed 1 and --seed 2"),
        (["--batch_size", "2", "--batch_size", "4"], "--batch_size 2 and --batch_size 4"),
        (
            ["--model-args", "dtype=float32", "--model_args", "dtype=bfloat16"],
            "dtype is given twice with two values, dtype=float32 and dtype=bfloat16",
        ),
    ],
    ids=["limit", "out-output_path", "seed", "batch_size", "model-args-both-spellings"],
)
def test_a_flag_given_twice_with_two_values_is_refused_naming_both(flags, says, capsys):
    line = _refusal([*RUN_MAPS, *flags], capsys)
    assert says in line, line


def test_model_args_in_both_spellings_join_and_a_flag_twice_with_one_value_is_fine():
    from culture_probe.cli import build_parser
    from culture_probe.runner.run_command import planned

    argv = [
        *RUN_MAPS,
        "--model-args",
        "dtype=float32",
        "--model_args",
        "revision=main,dtype=float32",
    ]
    args = build_parser().parse_args([*argv, "--limit", "3", "--limit", "3"])
    assert planned(args)[3]["model_args"] == "dtype=float32,revision=main"
    assert args.limit == 3
    # repeatable flags stay repeatable
    many = build_parser().parse_args(
        [*RUN_MAPS, "--option", "question=pos", "--option", "n_shot=2"]
    )
    assert many.option == ["question=pos", "n_shot=2"]


@pytest.mark.parametrize(
    "flag,value",
    [
        ("--limit", "٣"),  # Arabic-Indic three: int() reads it as 3
        ("--batch-tokens", "٣٠٠"),
        ("--concurrency", "٤"),
        ("--max-retries", "١"),
        ("--seed", "٧"),
        ("--show", "٢"),
        ("--request-timeout", "١.٥"),
        ("--batch_size", "٢"),
        ("--batch-tokens", "1" + "0" * 20),  # fits no 64-bit count
        ("--limit", "9" * 5000),
        ("--batch-tokens", "9" * 5000),
    ],
    ids=lambda v: v if len(v) < 20 else f"{len(v)}-digits",
)
def test_a_number_not_in_ascii_digits_or_too_long_is_one_short_line(flag, value, capsys):
    line = _refusal([*RUN_MAPS, "--dry-run", flag, value], capsys)
    assert f"argument {flag}" in line and "invalid value" in line, line
    assert len(line) < 300, line  # a 5,000-digit value is not printed whole
