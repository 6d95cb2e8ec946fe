"""The `culture-probe` command line: help with examples, run / report / compare on a run directory,
list, and errors that name the problem (exit code 2, no traceback).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from culture_probe.benchmarks.dlama.task import DlamaOptions
from culture_probe.cli import main

REPO = Path(__file__).resolve().parents[2]
FACTS = [
    ("ARAB_REGION", "Egypt", "Africa"),
    ("ARAB_REGION", "Oman", "Asia"),
    ("WESTERN_COUNTRIES", "France", "Europe"),
    ("WESTERN_COUNTRIES", "Canada", "North America"),
]


def dlama_run(model, data) -> list[str]:
    """`culture-probe run dlama_arab_west` on the test's model and data, as most tests here start
    their command.
    """
    return ["run", "dlama_arab_west", "--model", str(model), "--data-dir", str(data)]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A two-language DLAMA folder in the v1 layout and a tiny random BERT that knows its words."""
    from culture_probe.models import save_tiny, train_tokenizer

    root = tmp_path_factory.mktemp("cli")
    for language in ("en", "ar"):
        folder = root / "dlama" / "arab-west" / "dlama" / language
        folder.mkdir(parents=True)
        for region in ("ARAB_REGION", "WESTERN_COUNTRIES"):
            lines = [
                json.dumps(
                    {
                        "sub_uri": f"Q{i}",
                        "obj_uri": [f"Q{i}0"],
                        "sub_label": s,
                        "obj_label": [o],
                        "country": ["Q1"],
                        "size": 10 - i,
                        "uuid": f"P30_general_{region}_{i}",
                    }
                )
                for i, (r, s, o) in enumerate(FACTS)
                if r == region
            ]
            (folder / f"P30_general_{region}.jsonl").write_text(
                "\n".join(lines) + "\n", encoding="utf-8"
            )
    texts = ["Egypt Oman France Canada is located in Africa Asia Europe North America ."] * 3
    model = save_tiny(
        root / "bert", "bert", train_tokenizer(texts, "wordpiece", model_kind="masked")
    )
    return root / "dlama", model


def test_help_shows_runnable_examples(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert (
        "culture-probe run dlama_arab_west --model bert-base-multilingual-cased --out runs/mbert"
        in out
    )
    assert "--resume" in out and "--limit" in out and "--batch-tokens" in out


def test_run_report_compare(setup, tmp_path, capsys):
    data, model = setup
    common = ["--model", str(model), "--data-dir", str(data), "--language", "en"]
    assert (
        main(
            [
                "run",
                "dlama_arab_west",
                *common,
                "--out",
                str(tmp_path / "a"),
                "--batch-tokens",
                "64",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "run",
                "dlama_arab_west",
                *common,
                "--out",
                str(tmp_path / "b"),
                "--option",
                "score=sum",
                "--limit",
                "2",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "dlama_arab_west on" in out and "  p1 (%): " in out and f"wrote {tmp_path / 'b'}" in out
    for name in ("config.json", "items.jsonl", "metrics.json", "report.md"):
        assert (tmp_path / "a" / name).is_file()
    # the score cache is the model's, not the run's
    assert not (tmp_path / "a" / "cache.sqlite").exists()
    config = json.loads((tmp_path / "b" / "config.json").read_text())
    defaults = dataclasses.asdict(DlamaOptions())
    assert config["options"] == {**defaults, "score": "sum"} and config["run"]["limit"] == 2
    n_en = sum(1 for line in (tmp_path / "a" / "items.jsonl").read_text().splitlines())
    assert (
        config["subset"]
        == {
            "unit": "facts",
            # each fact drawn is asked in every language of the run: here en
            "strata": ["culture", "predicate"],
            "items": n_en,
            "sampled": 2,
            "seed": 0,
            "limit": 2,
            # one fact of each culture x predicate in each language: en, P30, two cultures
            "smoke_limit": 2,
            "parallel": {"fields": ["uuid"], "across": "language", "values": ["en"]},
        }
        and config["seed_used"]
    )
    cultures = {
        json.loads(line)["culture"]
        for line in (tmp_path / "b" / "items.jsonl").read_text().splitlines()
    }
    assert cultures == {"arab", "west"}  # two facts: one of each culture, not the first two rows
    assert (
        f"smoke run, not the benchmark's number**: 2 of {n_en} facts, drawn with seed 0 in turn from each "
        "culture x predicate" in (tmp_path / "b" / "report.md").read_text()
    )
    assert config["run"]["language"] == "en" and config["model"]["kind"] == "masked"
    assert {"culture_probe", "culture_probe_git", "torch", "transformers", "datasets"} <= set(
        config["versions"]
    )
    assert config["versions"]["culture_probe_git"]  # this checkout's commit
    assert config["hardware"]["device"] == "cpu" and config["hardware"]["processes"] == 1
    assert config["hardware"]["dtype"] == "float32" and config["duration_s"] > 0
    assert config["date"] <= config["finished"]
    assert len((tmp_path / "b" / "items.jsonl").read_text().splitlines()) == 2

    (tmp_path / "a" / "report.md").unlink()
    assert main(["report", str(tmp_path / "a")]) == 0
    assert (tmp_path / "a" / "report.md").read_text().startswith("# dlama_arab_west on")
    # b probed 2 facts, a all of them
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    assert "probed different units" in capsys.readouterr().err
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--unpaired"]) == 0
    assert "| overall | p1 |" in capsys.readouterr().out


def test_resume_of_a_finished_run_scores_nothing_new(setup, tmp_path, monkeypatch):
    from culture_probe.engine.backend import Backend

    data, model = setup
    calls: list[int] = []
    score = Backend.score
    monkeypatch.setattr(
        Backend,
        "score",
        lambda self, requests, *a, **k: (
            calls.append(len(requests)),
            score(self, requests, *a, **k),
        )[1],
    )
    args = [
        *dlama_run(model, data),
        "--out",
        str(tmp_path / "r"),
    ]
    assert main(args) == 0
    asked = sum(calls)
    before = (tmp_path / "r" / "items.jsonl").read_text()
    assert asked == len(before.splitlines()) > 0  # every probe was asked once
    assert main([*args, "--resume"]) == 0
    assert sum(calls) == asked  # the resumed finished run asked the engine nothing
    assert (tmp_path / "r" / "items.jsonl").read_text() == before


def test_a_second_run_of_the_same_model_is_served_from_the_shared_cache(
    setup, tmp_path, monkeypatch
):
    from culture_probe import runner
    from culture_probe.engine.masked import MaskedScorer

    data, model = setup
    batches: list[int] = []
    original = MaskedScorer._score_batch
    monkeypatch.setattr(
        MaskedScorer,
        "_score_batch",
        lambda self, items, *a: batches.append(len(items)) or original(self, items, *a),
    )
    common = ["run", "dlama_arab_west", "--model", str(model), "--data-dir", str(data)]
    assert main([*common, "--out", str(tmp_path / "first")]) == 0
    computed = len(batches)
    assert computed > 0
    # one file, named after the model
    (cache,) = runner.stage_models.default_cache_dir().glob("*.sqlite")
    assert cache.name.startswith(Path(model).name)
    # another run, config
    assert main([*common, "--out", str(tmp_path / "second"), "--option", "score=sum"]) == 0
    assert len(batches) == computed  # every score came from the cache
    assert (tmp_path / "first" / "items.jsonl").read_text().count("\n") == (
        tmp_path / "second" / "items.jsonl"
    ).read_text().count("\n")
    assert main([*common, "--out", str(tmp_path / "third"), "--no-cache"]) == 0
    assert len(batches) == 2 * computed  # computed again, and nothing written
    moved = tmp_path / "elsewhere"
    assert main([*common, "--out", str(tmp_path / "fourth"), "--cache-dir", str(moved)]) == 0
    assert len(batches) == 3 * computed and len(list(moved.glob("*.sqlite"))) == 1


def test_a_run_on_custom_rows_is_repeated_by_its_reproduce_command(setup, tmp_path):
    from culture_probe.data.registry import load_benchmark
    from culture_probe.runner import run

    data, model = setup
    rows = [
        r
        for r in load_benchmark("dlama_arab_west", data_dir=str(data))["test"]
        if r["language"] == "en"
    ][1:3]
    first = run("dlama_arab_west", str(model), rows=rows, out=tmp_path / "first", progress=False)
    command = (tmp_path / "first" / "report.md").read_text().split("```\n")[-2].strip()
    argv = [word.replace("RUN_DIR", str(tmp_path / "first")) for word in command.split()[1:]]
    assert main([*argv, "--out", str(tmp_path / "again")]) == 0
    again = json.loads((tmp_path / "again" / "config.json").read_text())
    assert again["benchmark"]["rows_sha256"] == first.config.benchmark.rows_sha256
    assert json.loads((tmp_path / "again" / "metrics.json").read_text()) == first.metrics


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--rows", "missing.jsonl"], "--rows 'missing.jsonl': no such file"),
        (["--option", "scroe=sum"], "Unknown option 'scroe'. Did you mean 'score'"),
        (["--option", "score"], "--option takes KEY=VALUE, got 'score'"),
        (["--language", "fr"], "Unknown language 'fr'"),
    ],
)
def test_bad_arguments_exit_2_with_a_clear_message(setup, capsys, extra, message):
    data, model = setup
    assert (
        main(["run", "dlama_arab_west", "--model", str(model), "--data-dir", str(data), *extra])
        == 2
    )
    assert message in capsys.readouterr().err


def test_limit_smoke_probes_the_fewest_items_that_give_every_headline_number(
    setup, tmp_path, capsys
):
    """`--limit smoke` resolves per config (one fact per language x culture x predicate here: 2),
    config.json says it was asked for and what it gave; a smaller --limit warns, before the model
    loads, what it will lack.
    """
    data, model = setup
    common = [
        *dlama_run(model, data),
        "--language",
        "en",
    ]
    assert main([*common, "--limit", "smoke", "--out", str(tmp_path / "smoke")]) == 0
    config = json.loads((tmp_path / "smoke" / "config.json").read_text())
    assert (
        config["run"]["limit"] == 2
        and config["subset"]["limit"] == "smoke"
        and config["subset"]["sampled"] == 2
    )
    # the command that repeats it, as a number
    assert "--limit 2" in (tmp_path / "smoke" / "report.md").read_text()
    with pytest.warns(
        UserWarning, match=r"--limit 1 is below the smoke limit of dlama_arab_west \(2 facts\)"
    ):
        assert main([*common, "--limit", "1"]) == 0
    with pytest.raises(SystemExit):
        main([*common, "--limit", "ten"])
    assert (
        "invalid value: 'ten' (give a whole number, a fraction such as 0.1, or smoke)"
        in capsys.readouterr().err
    )


def test_the_library_warnings_are_one_line_on_the_terminal(setup):
    """What `culture-probe` prints for the library's own warnings (the smoke-limit notice): one
    line, as its errors are, not Python's location and source line; other packages' warnings keep
    Python's format.
    """
    data, model = setup
    seen: list[str] = []

    def shown(message, category, filename, lineno, file=None, line=None):
        seen.append(warnings.formatwarning(message, category, filename, lineno, line))

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = shown
        assert (
            main(
                [
                    *dlama_run(model, data),
                    "--limit",
                    "1",
                ]
            )
            == 0
        )
    # restored after
    assert "DeprecationWarning" in warnings.formatwarning("x", DeprecationWarning, "x.py", 1)
    notices = [text for text in seen if "smoke limit" in text]
    assert len(notices) == 1 and notices[0].count("\n") == 1
    assert notices[0].startswith("culture-probe: warning: --limit 1 is below the smoke limit")


def test_a_run_without_out_says_that_nothing_was_written(setup, tmp_path, capsys, monkeypatch):
    data, model = setup
    monkeypatch.chdir(tmp_path)
    assert (
        main(
            [
                *dlama_run(model, data),
                "--language",
                "en",
            ]
        )
        == 0
    )
    assert "nothing was written (no --out): pass --out DIR" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_unknown_config_suggests_close_names(capsys):
    assert main(["run", "dlama_arab_wset", "--model", "x"]) == 2
    assert "Did you mean 'dlama_arab_west'" in capsys.readouterr().err


def test_module_entry_point_lists_benchmarks():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "culture_probe", "list"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr
    assert "dlama_arab_west" in done.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--option", "scroe=sum"], "Unknown option 'scroe'. Did you mean 'score'"),
        (["--option", "max_new_tokens=0"], "max_new_tokens must be a whole number >= 1, got 0"),
        (["--language", "fr"], "Unknown language 'fr'"),
        (["--limit", "0"], "limit must be a whole number >= 1, got 0"),
        (["--batch-tokens", "-5"], "batch_tokens must be a whole number >= 1, got -5"),
        (
            ["--option", "templates=./no/such/templates.json"],
            "no/such/templates.json': no such file",
        ),
    ],
)
def test_a_bad_option_is_named_before_a_missing_model_is_touched(setup, capsys, extra, message):
    """The pipeline validates before it loads: a model path that does not exist is not what the
    error is about.
    """
    data, _ = setup
    assert (
        main(
            [
                "run",
                "dlama_arab_west",
                "--model",
                "./no/such/model",
                "--data-dir",
                str(data),
                *extra,
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert message in err and "no/such/model" not in err


def test_a_served_model_without_its_server_url_is_named_before_anything_loads(setup, capsys):
    data, _ = setup
    assert (
        main(["run", "dlama_arab_west", "--model", "openai:org/model", "--data-dir", str(data)])
        == 2
    )
    assert (
        "openai:org/model is a served model: pass the server's --base-url"
        in capsys.readouterr().err
    )


def test_model_args_load_a_lora_adapter_and_are_recorded(setup, tmp_path, capsys):
    from peft import LoraConfig, get_peft_model

    from culture_probe.engine import Scorer

    data, model = setup
    lora = get_peft_model(
        Scorer.from_pretrained(model).model,
        LoraConfig(r=4, target_modules=["query", "value"], init_lora_weights=False),
    )
    lora.save_pretrained(tmp_path / "adapter")
    common = [
        *dlama_run(model, data),
        "--language",
        "en",
    ]
    assert main([*common, "--out", str(tmp_path / "plain")]) == 0
    adapted = [
        *common,
        "--out",
        str(tmp_path / "lora"),
        "--model-args",
        f"peft={tmp_path / 'adapter'},attn_implementation=eager",
    ]
    assert main(adapted) == 0
    config = json.loads((tmp_path / "lora" / "config.json").read_text())
    assert config["model_args"] == {
        "peft": str(tmp_path / "adapter"),
        "attn_implementation": "eager",
    }
    assert config["model"]["identity"]["peft"]["path"] == str((tmp_path / "adapter").resolve())
    assert (tmp_path / "lora" / "items.jsonl").read_text() != (
        tmp_path / "plain" / "items.jsonl"
    ).read_text()
    assert (
        main(
            [
                *common,
                "--out",
                str(tmp_path / "x"),
                "--model-args",
                "dtype=float32",
                "--dtype",
                "bfloat16",
            ]
        )
        == 2
    )
    assert "--dtype bfloat16 and --model-args dtype=float32 disagree" in capsys.readouterr().err


def test_a_missing_model_path_is_named_as_a_path(setup, capsys):
    data, _ = setup
    assert (
        main(["run", "dlama_arab_west", "--model", "./no/such/model", "--data-dir", str(data)]) == 2
    )
    assert "Model path './no/such/model' does not exist" in capsys.readouterr().err


def test_asia_west_runs_in_english_and_the_report_says_korean_is_missing(
    setup, mirror, tmp_path, capsys
):
    _, model = setup
    out = tmp_path / "asia"
    assert (
        main(
            [
                "run",
                "dlama_asia_west",
                "--model",
                str(model),
                "--language",
                "en",
                "--limit",
                "2",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    report = (out / "report.md").read_text()
    assert "- language: en only (the config also has ko)" in report
    assert (
        "**note**: the release tarball holds both languages; a copy that lacks the Korean labels of asia-west"
    ) in report and "(ko not probed in this run)" in report
    assert (
        main(
            [
                "run",
                "dlama_asia_west",
                "--model",
                str(model),
                "--limit",
                "2",
                "--out",
                str(tmp_path / "b"),
            ]
        )
        == 2
    )
    assert (
        "No ko facts: the copy read (dlama-v1) lacks the Korean labels" in capsys.readouterr().err
    )


def test_every_option_example_the_cli_gives_is_a_real_option():
    """The --option examples in `run --help` and in the refusal of a bad --option name options of
    real benchmarks.
    """
    import inspect

    from culture_probe.benchmarks.camel import task as camel
    from culture_probe.benchmarks.dlama import task as dlama
    from culture_probe.benchmarks.fmlama import task as fmlama
    from culture_probe.benchmarks.maps import task as maps
    from culture_probe.benchmarks.xfakt import task as xfakt
    from culture_probe.cli import build_parser
    from culture_probe.runner import run_command

    fields = set()
    for module in (camel, dlama, fmlama, maps, xfakt):
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__name__.endswith("Options") and dataclasses.is_dataclass(cls):
                fields |= {f.name for f in dataclasses.fields(cls)}
    run_help = (
        next(a for a in build_parser()._actions if a.dest == "command").choices["run"].format_help()
    )
    examples = re.findall(
        r"--option ([a-z_]+)=", run_help + inspect.getsource(run_command.option_values)
    )
    assert examples and set(examples) <= fields, set(examples) - fields


def test_a_fractional_limit_takes_that_share_of_each_stratum_rounded_up(setup, tmp_path, capsys):
    """`--limit 0.5` of 6 Arab and 2 Western facts probes 3 and 1 (the harness's fractional limit,
    per stratum; an integer limit of 4 would draw 2 and 2), recorded as the number probed
    (run.limit) and as given (subset.limit).
    """
    from dlama_fixture import write_dlama

    _, model = setup
    facts = {("ARAB_REGION", f"Arab{i}"): (["Q48"], ["Asia"], []) for i in range(6)}
    facts |= {("WESTERN_COUNTRIES", f"West{i}"): (["Q46"], ["Europe"], []) for i in range(2)}
    data = write_dlama(tmp_path / "dlama", facts)
    common = [
        *dlama_run(model, data),
        "--language",
        "en",
    ]
    assert main([*common, "--limit", "0.5", "--out", str(tmp_path / "half")]) == 0
    config = json.loads((tmp_path / "half" / "config.json").read_text())
    assert (config["run"]["limit"], config["subset"]["limit"], config["subset"]["sampled"]) == (
        4,
        0.5,
        4,
    )
    items = [
        json.loads(line) for line in (tmp_path / "half" / "items.jsonl").read_text().splitlines()
    ]
    assert sorted(item["culture"] for item in items) == ["arab"] * 3 + ["west"]
    for bad in ("1.5", "0", "-0.1"):
        assert main([*common, "--limit", bad]) == 2
        err = capsys.readouterr().err
        assert (
            f"limit must be a whole number >= 1, got {bad} (or " in err
            and "or a fraction 0 < x < 1 of each" in err
        )


def test_a_share_of_each_stratum_is_rounded_up_exactly_and_keeps_every_probe_of_an_item():
    """0.1 of 30 items is 3 (in floats 0.1 * 30 rounds up to 4), 0.1 of 7 is 1; an item's probes
    stay together.
    """
    import culture_probe
    from culture_probe.errors import InvalidValueError
    from culture_probe.tasks.probes import Skipped
    from culture_probe.tasks.sampling import stratified_share

    cells = {"arab": 30, "west": 7}
    probes = [
        Skipped(f"{culture}{i}", "", tag=tag, meta={"culture": culture})
        for culture, n in cells.items()
        for i in range(n)
        for tag in ("a", "b")
    ]
    for share, expected in ((0.1, {"arab": 3, "west": 1}), (0.5, {"arab": 15, "west": 4})):
        chosen = stratified_share(probes, share, ["culture"], seed=0)
        items = {p.item_id: p.meta["culture"] for p in chosen}
        assert {c: list(items.values()).count(c) for c in cells} == expected and len(
            chosen
        ) == 2 * len(items)
        assert (
            chosen
            == stratified_share(probes, share, ["culture"], seed=0)
            != stratified_share(probes, share, ["culture"], seed=1)
        )
    with pytest.raises(
        InvalidValueError, match=r"limit must be a whole number >= 1, got 1\.5 \(or "
    ):
        culture_probe.run("dlama_arab_west", "any/model", limit=1.5)


def test_the_model_can_be_named_by_model_args_pretrained_as_in_the_harness(setup, tmp_path, capsys):
    data, model = setup
    common = ["run", "dlama_arab_west", "--data-dir", str(data), "--language", "en", "--limit", "2"]
    assert (
        main(
            [
                *common,
                "--model-args",
                f"pretrained={model},dtype=float32",
                "--out",
                str(tmp_path / "r"),
            ]
        )
        == 0
    )
    config = json.loads((tmp_path / "r" / "config.json").read_text())
    assert config["model"]["spec"] == str(model) and config["model_args"] == {"dtype": "float32"}
    capsys.readouterr()
    assert main([*common, "--model", "other/model", "--model-args", f"pretrained={model}"]) == 2
    assert f"Two models are named (other/model, {model}): give one" in capsys.readouterr().err
    assert main([*common, "--model-args", "dtype=float32"]) == 2
    assert (
        "Name the model: --model NAME, or --model-args pretrained=NAME" in capsys.readouterr().err
    )


def test_progress_names_the_config_and_stage_and_datasets_bars_are_quiet(setup, tmp_path, capsys):
    data, model = setup
    # new files: the builder prepares them (a bar per split)
    fresh = shutil.copytree(data, tmp_path / "dlama")
    common = ["--model", str(model), "--data-dir", str(fresh), "--language", "en", "--no-cache"]
    assert main(["run", "dlama_arab_west", *common, "--out", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err
    assert "dlama_arab_west main:" in err, err  # which config a suite's bar is at
    assert "Generating" not in err and "split" not in err, err


def test_every_command_names_a_handler_that_exists():
    """Each command's module adds its sub-parsers and names their handlers beside them: the two
    lists agree, and a misspelt handler fails here rather than when someone runs that command.
    """
    import importlib

    from culture_probe.cli import HANDLERS, build_parser

    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    assert list(commands) == list(HANDLERS)
    for handler in HANDLERS.values():
        module, function = handler.split(":")
        assert callable(getattr(importlib.import_module(module), function)), handler


def test_list_and_help_start_without_the_heavy_libraries():
    """The parser modules import no handler, so `culture-probe list` and `--help` load no torch,
    datasets or numpy (seconds each); `python -m culture_probe.cli` runs the command line, as the
    benchmarks' start-up timing does.
    """
    for args in (["list"], ["--help"]):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "culture_probe.cli", *args],
            capture_output=True,
            text=True,
            check=True,
        )
        heavy = re.findall(r"\|\s+(torch|datasets|numpy)\b", done.stderr)
        assert done.stdout and not heavy, (args, sorted(set(heavy)))


@pytest.mark.parametrize(
    "flags,says",
    [
        (["--log_samples"], "--log_samples is lm-evaluation-harness's flag.*items.jsonl"),
        (["--num_fewshot", "5"], "--num_fewshot is lm-evaluation-harness's flag.*--option n_shot"),
        (["--num_fewshot=5"], "--num_fewshot is lm-evaluation-harness's flag"),
        (["-f", "5"], "--num_fewshot is lm-evaluation-harness's flag"),
        (
            ["--apply_chat_template"],
            "--apply_chat_template is .*applies the tokenizer's chat template itself",
        ),
        (["--gen_kwargs", "temperature=0"], "--gen_kwargs is .*protocol's options"),
        (["--use_cache", "db"], "--use_cache is .*--cache-dir"),
        (["--write_out"], "--write_out is .*--dry-run"),
        (["--trust_remote_code"], "--model-args trust_remote_code=True"),
        (["-t", "maps_en"], "-t is lm-evaluation-harness's short --tasks: spell it --tasks"),
    ],
    ids=lambda v: v if isinstance(v, str) else " ".join(v),
)
def test_an_lm_eval_flag_without_a_counterpart_says_what_to_do_instead(flags, says, capsys):
    """One line naming the flag and the native way, exit 2, where argparse gave its usage and
    "unrecognized arguments"; nothing loads.
    """
    assert main(["run", "maps_en", "--model", "planted:maps_en", *flags]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("culture-probe: error: ") and re.search(says, line), line


def test_an_unknown_flag_of_no_harness_keeps_argparses_refusal(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["run", "maps_en", "--model", "planted:maps_en", "--colour", "red"])
    assert stop.value.code == 2
    assert "unrecognized arguments: --colour red" in capsys.readouterr().err


def test_information_prints_as_a_plain_line_not_a_warning(setup, capsys):
    """What a run will cost is information: `culture-probe: ...` on stderr, never `culture-probe:
    warning:`, and the library's notices print so too; its warnings keep `warning:`.
    """
    from culture_probe.cli import _library_lines
    from culture_probe.rundir import ResumeNotice
    from culture_probe.runner.planning import SmallLimitWarning

    data, model = setup
    assert main([*dlama_run(model, data), "--limit", "2"]) == 0
    err = capsys.readouterr().err
    assert re.search(
        r"^culture-probe: dlama_arab_west starts, stage main: \d+ probes", err, re.M
    ), err
    assert "warning: dlama_arab_west starts" not in err
    with _library_lines():
        notice = warnings.formatwarning("Resuming x with a=1", ResumeNotice, "x.py", 1)
        warning = warnings.formatwarning("--limit 1 is small", SmallLimitWarning, "x.py", 1)
    assert (notice, warning) == (
        "culture-probe: Resuming x with a=1\n",
        "culture-probe: warning: --limit 1 is small\n",
    )
