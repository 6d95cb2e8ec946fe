"""The README's first screen works as written: every `culture-probe` line parses with the real
command line, every config, group and metric it names exists, the run, report and compare lines run
on the shipped data (with stand-in models and a small limit), and the offline Python lines run.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import replace
from pathlib import Path

import pytest

import culture_probe
from culture_probe.cli import build_parser, main
from culture_probe.data.registry import expand, groups, list_benchmarks
from culture_probe.engine.loading import ModelSpec
from culture_probe.metrics import list_metrics
from culture_probe.runner.run_command import config_names
from culture_probe.runner.suite import SKIPPED_EXIT, SkippedConfigWarning

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
FIRST_SCREEN = README[: README.index("## What it holds")]


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", FIRST_SCREEN, flags=re.S)


def command_lines() -> list[list[str]]:
    """Each `culture-probe ...` command of the first screen, comments dropped, from its subcommand
    on.
    """
    commands = []
    for line in "\n".join(blocks("bash")).splitlines():
        words = shlex.split(line, comments=True)
        if "culture-probe" in words:
            commands.append(words[words.index("culture-probe") + 1 :])
        # accelerate launch ... -m culture_probe run ...
        elif "culture_probe" in words and "-m" in words:
            commands.append(words[words.index("culture_probe") + 1 :])
    return commands


def test_the_first_screen_starts_with_the_two_commands() -> None:
    first, second = blocks("bash")[0].splitlines()[:2]
    assert first.startswith("make demo ") and second.startswith("make test ")


@pytest.mark.parametrize("argv", command_lines(), ids=lambda argv: " ".join(argv[:2]))
def test_each_command_parses_and_names_what_exists(argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    known = {e.name for e in list_benchmarks()} | set(groups())
    named = getattr(args, "configs", None)
    for config in config_names(named) if named else []:
        assert config in known, config
    if args.command == "push-metrics":
        assert set(args.metrics or list_metrics()) <= set(list_metrics())


def test_each_config_and_metric_the_python_lines_name_exists() -> None:
    python = "\n".join(blocks("python"))
    configs = set(re.findall(r'load_benchmark\("(\w+)"', python)) | set(
        re.findall(r'run\("(\w+)"', python)
    )
    configs |= set(re.findall(r'load_dataset\("[\w-]+/culture_probe", "(\w+)"\)', python))
    assert configs and configs <= {e.name for e in list_benchmarks()}
    metrics = set(re.findall(r'load\("(?:metrics/|my-org/)?(\w+)"\)', python)) | set(
        re.findall(r'load_metric\("(\w+)"\)', python)
    )
    assert metrics == {"cbs"} and metrics <= set(list_metrics())
    for name in re.findall(r"culture_probe\.(\w+)\(", python):
        assert callable(getattr(culture_probe, name)), name


def test_the_offline_metric_lines_run_from_the_repository_root(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import evaluate

    monkeypatch.chdir(REPO)
    inputs = {"prompt_id": ["t"] * 2, "culture": ["arab", "western"], "score": [-1.0, -2.0]}
    assert evaluate.load("metrics/cbs").compute(**inputs) == culture_probe.load_metric(
        "cbs"
    ).compute(**inputs)


def test_a_compare_line_pairs_runs_of_one_config() -> None:
    """`compare` pairs runs of the same config on the same items; the README's must compare such
    runs.
    """
    parser, made = build_parser(), {}
    for argv in command_lines():
        args = parser.parse_args(argv)
        if args.command == "run" and args.out:
            made[args.out] = tuple(args.configs)
        if args.command == "compare":
            assert len({made[run_dir] for run_dir in args.run_dirs}) == 1, args.run_dirs


@pytest.fixture
def stand_in(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every model the README names is a tiny random BERT here (they are all masked models), read
    for its kind and loaded from its folder; what runs around it (data, protocol, engine, metrics,
    reports) is the real code.
    """
    from culture_probe.models import save_tiny, train_tokenizer

    texts = [
        "Egypt is located in Africa . rice salt Paris",
        "مصر في أفريقيا اسمها فاطمة",
        "米 北京 是 中国",
    ] * 3
    tokenizer = train_tokenizer(texts, "wordpiece", model_kind="masked", vocab_size=300)
    folder = save_tiny(
        tmp_path_factory.mktemp("stand_in") / "bert",
        "bert",
        tokenizer,
        layers=1,
        hidden=32,
        heads=2,
    )
    kind = ModelSpec.kind
    monkeypatch.setattr(ModelSpec, "resolved", lambda spec: str(folder))
    monkeypatch.setattr(
        ModelSpec,
        "kind",
        lambda spec: kind(spec if spec.name is None else replace(spec, name=str(folder))),
    )
    return folder


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::culture_probe.runner.SmallLimitWarning")
def test_the_run_report_and_compare_lines_run_on_the_shipped_data(
    stand_in: Path, mirror: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each `run` line (a small --limit added where it has none), then `report` and `compare` on
    what they wrote, with `dlama-v1/` the unpacked DLAMA-v1 release; the suite skips asia-west,
    whose Korean labels that copy lacks, says so, and exits 3.
    """
    # figures have their own tests; here they would double the time
    for module in ("markdown", "summary", "compare"):
        monkeypatch.setattr(
            f"culture_probe.report.{module}.available", lambda name: name != "matplotlib"
        )
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dlama-v1").symlink_to(mirror / "manual" / "dlama" / "dlama-v1")
    suites = 0
    for argv in (argv for argv in command_lines() if argv[0] in ("run", "report", "compare")):
        args = build_parser().parse_args(argv)
        if args.command != "run":
            assert main(argv) == 0, argv
            continue
        configs = expand(config_names(args.configs))
        limited = [*argv, *(["--limit", "3"] if args.limit is None else [])]
        if "dlama_asia_west" not in configs:
            assert main(limited) == 0, argv
        else:
            with pytest.warns(SkippedConfigWarning, match="^dlama_asia_west skipped: No ko facts"):
                assert main(limited) == SKIPPED_EXIT, argv
        if len(configs) == 1:
            assert (Path(args.out) / "metrics.json").is_file(), argv
            continue
        suites += 1
        summary = json.loads((Path(args.out) / "suite.json").read_text(encoding="utf-8"))
        assert [row["config"] for row in summary["configs"]] == [
            c for c in configs if c not in summary["skipped"]
        ]
        assert set(summary["skipped"]) <= {"dlama_asia_west"}
    assert suites, "the README shows a suite"


FIVE = README[README.index("## What it holds") : README.index("## Layout")]
# what the README tells a user of the shipped DLAMA-v1 copy (no Korean labels) to add for exit code
# 0
EXIT_0_FIX = ["--data-option", "dlama_asia_west.languages=en"]


def five_benchmark_runs() -> list[list[str]]:
    """The README's `run` commands of all five benchmarks in one suite, from the subcommand on."""
    lines = "\n".join(re.findall(r"```bash\n(.*?)```", FIVE, flags=re.S)).splitlines()
    runs = [shlex.split(line, comments=True)[1:] for line in lines if " run " in line]
    return [argv for argv in runs if {"dlama", "fmlama", "camel", "xfakt", "maps"} <= set(argv)]


def test_the_five_benchmark_commands_say_what_they_skip_on_the_shipped_data_and_how_to_exit_0() -> (
    None
):
    """They exit 3 on the mirror's DLAMA-v1 copy (dlama_asia_west skipped): the README names that
    config, the exit code and its meaning, and a fix that parses with each command and reaches that
    config alone.
    """
    from culture_probe.data.registry import check_data_options, data_options_for, resolve

    commands = five_benchmark_runs()
    assert len(commands) == 2
    text = " ".join(FIVE.split())
    assert "skip `dlama_asia_west`" in text and "exit 3" in text and "set -e" in text
    assert f"add `{' '.join(EXIT_0_FIX)}`" in text
    for argv in commands:
        args = build_parser().parse_args([*argv, *EXIT_0_FIX])
        configs = [resolve(c) for c in expand(config_names(args.configs))]
        given = dict([args.data_option[0].split("=", 1)])
        check_data_options(configs, given)
        reached = {b.name: found for b in configs if (found := data_options_for(b, given))}
        assert reached == {"dlama_asia_west": {"languages": ("en",)}}
    # and the two suites are compared config by config, one command
    lines = "\n".join(re.findall(r"```bash\n(.*?)```", FIVE, flags=re.S)).splitlines()
    (compare,) = [shlex.split(line, comments=True)[1:] for line in lines if " compare " in line]
    outs = [build_parser().parse_args(argv).out for argv in commands]
    assert build_parser().parse_args(compare).run_dirs == outs


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::culture_probe.runner.SmallLimitWarning")
def test_the_documented_fix_makes_the_suite_exit_0_on_the_shipped_dlama_copy(
    stand_in: Path, mirror: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The DLAMA part of the five-benchmark command (the part that skips) on the mirror's copy: exit
    3 as written, exit 0 with the README's addition, dlama_asia_west then probed in English.
    """
    for module in ("markdown", "summary"):
        monkeypatch.setattr(
            f"culture_probe.report.{module}.available", lambda name: name != "matplotlib"
        )
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dlama-v1").symlink_to(mirror / "manual" / "dlama" / "dlama-v1")
    argv = five_benchmark_runs()[0]
    given = argv[argv.index("--model") : argv.index("--model") + 2]
    dlama = ["run", "dlama", *given, "--data-dir", "dlama=dlama-v1/", "--limit", "1", "--no-cache"]
    with pytest.warns(SkippedConfigWarning, match="--data-option dlama_asia_west.languages=en"):
        assert main([*dlama, "--out", "as_written"]) == SKIPPED_EXIT
    assert main([*dlama, *EXIT_0_FIX, "--out", "fixed"]) == 0
    summary = json.loads((tmp_path / "fixed" / "suite.json").read_text(encoding="utf-8"))
    assert not summary["skipped"] and "dlama_asia_west" in [r["config"] for r in summary["configs"]]
