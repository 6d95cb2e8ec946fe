"""A curated pair probed from the command line: `--data-option KEY=VALUE` gives the builder the
options that `load_benchmark` takes (`verify_counts`, `pair`, `languages`, ...), so the advice its
errors give can be followed on the command line; each option is routed to the configs that have it,
read by its field's type, recorded in config.json and spelled back by the Reproduce command.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from curation_helpers import FIXTURE
from stand_ins import NoIdeaScorer

from culture_probe.cli import build_parser, main
from culture_probe.data.registry import check_data_options, data_options_for, resolve
from culture_probe.errors import InvalidValueError, UnknownNameError
from culture_probe.runner.run_command import planned

pytestmark = pytest.mark.filterwarnings("ignore::culture_probe.runner.SmallLimitWarning")


class Flat(NoIdeaScorer):
    """A masked stand-in that ranks every candidate alike: no weights, no Hub."""

    kind, identity = "masked", {"name_or_path": "flat"}


@pytest.fixture
def flat(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every `--model` is the flat stand-in; the report's figures are left out (they have their own
    tests).
    """
    monkeypatch.setattr("culture_probe.engine.loading.ModelSpec.load", lambda spec: Flat())
    monkeypatch.setattr("culture_probe.engine.loading.ModelSpec.kind", lambda spec: "masked")
    monkeypatch.setattr(
        "culture_probe.report.markdown.available", lambda name: name != "matplotlib"
    )


def curate(out: Path, region: str, languages: str, *extra: str) -> None:
    argv = [
        "curate",
        "dlama",
        "--region",
        region,
        "--languages",
        languages,
        "--endpoint",
        str(FIXTURE),
    ]
    assert main([*argv, "--out", str(out), *extra]) == 0


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """arab-west curated with all 20 predicates (those the fixture lacks written empty): the
    release's 80 files, not its counts.
    """
    out = tmp_path_factory.mktemp("whole")
    curate(out, "arab", "ar,en", "--allow-empty")
    return out


def test_a_new_curation_of_a_released_pair_runs_under_its_config_with_verify_counts_off(
    whole: Path, flat: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "dlama_arab_west", "--data-dir", str(whole), "--model", "m", "--limit", "2"]
    assert main([*argv, "--out", str(tmp_path / "refused")]) == 2
    assert "(--data-option verify_counts=false)" in capsys.readouterr().err
    out = tmp_path / "run"
    assert main([*argv, "--data-option", "verify_counts=false", "--out", str(out)]) == 0
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert config["run"]["data_options"] == {"verify_counts": "false"}
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "--data-option verify_counts=false" in report.split("## Reproduce", 1)[1]


def test_dlama_custom_picks_one_of_several_curated_pairs_by_a_data_option(
    tmp_path: Path, flat: None, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "pairs"
    for region, languages in (("arab", "ar,en"), ("asia", "ko,en")):
        curate(out, region, languages, "--predicates", "P30,P36")
    argv = ["run", "dlama_custom", "--data-dir", str(out), "--model", "m", "--limit", "2"]
    assert main(argv) == 2
    assert "(--data-option pair=NAME)" in capsys.readouterr().err
    run_dir = tmp_path / "asia"
    assert main([*argv, "--data-option", "pair=asia_west", "--out", str(run_dir)]) == 0
    items = [json.loads(line) for line in (run_dir / "items.jsonl").open(encoding="utf-8")]
    assert {r["language"] for r in items} == {"ko", "en"}
    # the pair folder itself is a data_dir too
    assert (
        main(
            [
                "run",
                "dlama_custom",
                "--data-dir",
                str(out / "arab-west"),
                "--model",
                "m",
                "--limit",
                "1",
            ]
        )
        == 0
    )


def test_the_flag_reaches_the_run_as_typed_builder_options() -> None:
    args = build_parser().parse_args(
        [
            "run",
            "dlama",
            "camel",
            "--model",
            "m",
            "--data-option",
            "verify_counts=false",
            "--data-option",
            "dlama_asia_west.languages=en",
        ]
    )
    keywords = planned(args)[3]
    assert keywords["data_options"] == {"verify_counts": "false", "dlama_asia_west.languages": "en"}
    given = keywords["data_options"]
    assert data_options_for(resolve("dlama_asia_west"), given) == {
        "verify_counts": False,
        "languages": ("en",),
    }
    assert data_options_for(resolve("dlama_arab_west"), given) == {"verify_counts": False}
    assert data_options_for(resolve("camel_co_prompts"), given) == {}
    check_data_options(
        [resolve("dlama_arab_west"), resolve("camel_co_prompts")], {"verify_counts": "no"}
    )


@pytest.mark.parametrize(
    ("given", "error", "match"),
    [
        ({"verify_count": "false"}, UnknownNameError, "Did you mean 'verify_counts'"),
        (
            {"verify_counts": "maybe"},
            InvalidValueError,
            "verify_counts takes true or false, got 'maybe'",
        ),
        ({"dlama_custom.pair": "x"}, UnknownNameError, "data option prefix 'dlama_custom'"),
        ({"camel.verify_counts": "false"}, UnknownNameError, "data option 'verify_counts'"),
    ],
)
def test_a_data_option_no_config_of_the_run_takes_is_refused_naming_the_valid_ones(
    given, error, match
) -> None:
    with pytest.raises(error, match=match):
        check_data_options([resolve("dlama_arab_west"), resolve("camel_co_prompts")], given)
