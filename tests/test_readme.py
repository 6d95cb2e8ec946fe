"""The README's first screen works as written: every `culture-probe` line parses with the real command line, every
config, group and metric it names exists, and the offline Python lines run."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

import culture_probe
from culture_probe.cli import build_parser
from culture_probe.data.registry import groups, list_benchmarks
from culture_probe.metrics import list_metrics

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
FIRST_SCREEN = README[: README.index("## What it holds")]


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", FIRST_SCREEN, flags=re.S)


def command_lines() -> list[list[str]]:
    """Each `culture-probe ...` command of the first screen, comments dropped, from its subcommand on."""
    commands = []
    for line in "\n".join(blocks("bash")).splitlines():
        words = shlex.split(line, comments=True)
        if "culture-probe" in words:
            commands.append(words[words.index("culture-probe") + 1 :])
        elif "culture_probe" in words and "-m" in words:  # accelerate launch ... -m culture_probe run ...
            commands.append(words[words.index("culture_probe") + 1 :])
    return commands


def test_the_first_screen_starts_with_the_two_commands() -> None:
    first, second = blocks("bash")[0].splitlines()[:2]
    assert first.startswith("make demo ") and second.startswith("make test ")


@pytest.mark.parametrize("argv", command_lines(), ids=lambda argv: " ".join(argv[:2]))
def test_each_command_parses_and_names_what_exists(argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    known = {e.name for e in list_benchmarks()} | set(groups())
    for config in [*(getattr(args, "configs", None) or [])]:
        assert config in known, config
    if args.command == "push-metrics":
        assert set(args.metrics or list_metrics()) <= set(list_metrics())


def test_each_config_and_metric_the_python_lines_name_exists() -> None:
    python = "\n".join(blocks("python"))
    configs = set(re.findall(r'load_benchmark\("(\w+)"', python)) | set(re.findall(r'run\("(\w+)"', python))
    configs |= set(re.findall(r'load_dataset\("[\w-]+/culture_probe", "(\w+)"\)', python))
    assert configs and configs <= {e.name for e in list_benchmarks()}
    metrics = set(re.findall(r'load\("(?:metrics/|my-org/)?(\w+)"\)', python)) | set(
        re.findall(r'load_metric\("(\w+)"\)', python)
    )
    assert metrics == {"cbs"} and metrics <= set(list_metrics())
    for name in re.findall(r"culture_probe\.(\w+)\(", python):
        assert callable(getattr(culture_probe, name)), name


def test_the_offline_metric_lines_run_from_the_repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    import evaluate

    monkeypatch.chdir(REPO)
    inputs = {"prompt_id": ["t"] * 2, "culture": ["arab", "western"], "score": [-1.0, -2.0]}
    assert evaluate.load("metrics/cbs").compute(**inputs) == culture_probe.load_metric("cbs").compute(**inputs)


def test_a_compare_line_pairs_runs_of_one_config() -> None:
    """`compare` pairs runs of the same config on the same items; the README's must compare such runs."""
    parser, made = build_parser(), {}
    for argv in command_lines():
        args = parser.parse_args(argv)
        if args.command == "run" and args.out:
            made[args.out] = tuple(args.configs)
        if args.command == "compare":
            assert len({made[run_dir] for run_dir in args.run_dirs}) == 1, args.run_dirs
