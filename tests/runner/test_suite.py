"""Suites: several configs (or a named group) on one model loaded once, one run directory per
config, a summary across them; options checked for every config before the model loads; groups
listed by `culture-probe list`.
"""

from __future__ import annotations

import json

import pytest
from dlama_fixture import TableScorer, spec_table, write_dlama

import culture_probe
from culture_probe.cli import main
from culture_probe.data.registry import expand, groups
from culture_probe.errors import (
    CultureProbeError,
    InvalidValueError,
    MissingDataError,
    UnknownNameError,
)


@pytest.fixture
def one_load(monkeypatch):
    """load_scorer counted: a suite must load its model once."""
    loads = []

    def load(spec):
        loads.append(spec.name)
        return TableScorer(spec_table())

    monkeypatch.setattr("culture_probe.engine.loading.ModelSpec.load", load)
    monkeypatch.setattr("culture_probe.engine.loading.ModelSpec.kind", lambda spec: "masked")
    return loads


def test_groups_expand_to_the_papers_experiments_in_order_each_once():
    assert groups()["dlama"] == ("dlama_arab_west", "dlama_asia_west", "dlama_south_america_west")
    assert len(groups()["fmlama"]) == 6 and set(groups()) == {
        "dlama",
        "fmlama",
        "camel",
        "xfakt",
        "maps",
    }
    assert expand(["dlama_asia_west", "dlama"]) == [
        "dlama_asia_west",
        "dlama_arab_west",
        "dlama_south_america_west",
    ]
    with pytest.raises(UnknownNameError, match="Unknown benchmark config or group 'dlam'"):
        expand(["dlam"])


def test_a_suite_loads_the_model_once_and_writes_a_run_per_config_and_a_summary(tmp_path, one_load):
    data = write_dlama(tmp_path / "dlama")
    suite = culture_probe.run_suite(
        ["dlama_arab_west", "dlama_arab_west_corrected"],
        "some/model",
        data_dir=str(data),
        out=tmp_path / "suite",
        progress=False,
        language="en",
    )
    assert one_load == ["some/model"]
    assert list(suite.runs) == ["dlama_arab_west", "dlama_arab_west_corrected"]
    for config in suite.runs:
        run_config = json.loads((tmp_path / "suite" / config / "config.json").read_text())
        assert (
            run_config["model"]["spec"] == "some/model" and not run_config["model"]["loaded_object"]
        )
    summary = json.loads((tmp_path / "suite" / "suite.json").read_text())
    first = summary["configs"][0]
    assert (first["config"], first["metric"], first["unit"]) == ("dlama_arab_west", "p1", "facts")
    assert (
        first["value"] == suite.runs["dlama_arab_west"].metrics["results"]["overall"]["p1"]["value"]
    )
    text = (tmp_path / "suite" / "suite.md").read_text()
    assert text.startswith("# Suite: some/model") and "| dlama_arab_west | p1 (%) |" in text
    assert (tmp_path / "suite" / "plots" / "suite_dlama.pdf").is_file()
    report = (tmp_path / "suite" / "dlama_arab_west" / "report.md").read_text()
    p1 = first["value"]
    # every report leads with them
    assert "## Headline numbers" in report and f"| p1 (%) | {p1:.2f} † |" in report


def test_an_option_given_to_a_config_that_lacks_it_fails_before_the_model_loads(tmp_path, one_load):
    # a plain option goes to the configs that have it (tests/runner/test_suite_options.py); a prefix
    # names the config
    with pytest.raises(
        CultureProbeError, match="In the suite's config dlama_arab_west: Unknown option 'tie_value'"
    ):
        culture_probe.run_suite(
            ["camel_co_prompts", "dlama_arab_west"],
            "some/model",
            options={"dlama_arab_west.tie_value": 0.5},
            out=tmp_path / "s",
            progress=False,
        )
    assert one_load == [] and not (tmp_path / "s").exists()


def test_the_cli_runs_a_suite_and_lists_groups(tmp_path, one_load, capsys):
    data = write_dlama(tmp_path / "dlama")
    assert (
        main(
            [
                "run",
                "dlama_arab_west",
                "dlama_arab_west_corrected",
                "--model",
                "m",
                "--data-dir",
                f"dlama={data}",
                "--language",
                "en",
                "--out",
                str(tmp_path / "suite"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "dlama_arab_west: p1 " in out and f"wrote {tmp_path / 'suite' / 'suite.md'}" in out
    assert main(["list"]) == 0
    listed = capsys.readouterr().out
    assert (
        listed.splitlines()[0].startswith("group")
        and "dlama      dlama_arab_west dlama_asia_west" in listed
    )
    assert main(["run", "dlama", "--model", "m", "--rows", "x.jsonl"]) == 2
    assert "--rows belongs to one config" in capsys.readouterr().err


def test_a_suite_with_the_four_maps_gap_configs_reports_the_culture_gap():
    from culture_probe.benchmarks.maps.task import culture_gap_study
    from culture_probe.record import RunRecord
    from culture_probe.report.summary import SuiteRun, studies

    accuracy = {"maps_zh": 60.0, "maps_en": 80.0, "maps_zh_en_mt": 70.0, "maps_zh_en_ht": 72.0}
    runs = {
        c: SuiteRun(RunRecord.from_json({"config": c}), {"accuracy": a})
        for c, a in accuracy.items()
    }
    assert studies(runs) == {"maps_culture_gap_zh_en": culture_gap_study(accuracy, "zh_en")}
    smoke = RunRecord.from_json({"config": "maps_zh_en_ht", "subset": {"sampled": 3}})
    runs["maps_zh_en_ht"] = SuiteRun(smoke, {"accuracy": 72.0})
    assert studies(runs) == {}  # a smoke run of one of the four gives no gap


def _suite(tmp_path, **keywords):
    data = write_dlama(tmp_path / "dlama")
    configs = ["dlama_arab_west", "dlama_arab_west_corrected"]
    return culture_probe.run_suite(
        configs,
        "some/model",
        data_dir=str(data),
        out=tmp_path / "suite",
        progress=False,
        language="en",
        **keywords,
    )


def test_a_suite_whose_figures_fail_still_writes_every_number(tmp_path, one_load, monkeypatch):
    # `culture-probe run camel --limit 10 --out S` died in report/plots.py after all its runs
    # finished: suite.md was never written
    import culture_probe.report.markdown as markdown

    def broken(figure, stem, title, note):
        raise ValueError("'yerr' must not contain negative values")

    monkeypatch.setattr(markdown, "draw", broken)
    with pytest.warns(UserWarning, match="Figure 'dlama: headline per config' could not be drawn"):
        suite = _suite(tmp_path)
    folder = tmp_path / "suite"
    for config in suite.runs:
        assert (folder / config / "metrics.json").is_file() and (
            folder / config / "report.md"
        ).is_file()
    assert (
        json.loads((folder / "suite.json").read_text())["configs"][0]["config"] == "dlama_arab_west"
    )
    text = (folder / "suite.md").read_text()
    assert (
        "| dlama_arab_west | p1 (%) |" in text
        and "*Figure 'dlama: headline per config' could not be drawn" in text
    )


def test_report_rerenders_a_suite_folder(tmp_path, one_load, capsys):
    # `culture-probe report S` refused a suite folder ("is not a run directory")
    _suite(tmp_path)
    folder = tmp_path / "suite"
    (folder / "suite.md").unlink()
    (folder / "dlama_arab_west" / "report.md").unlink()
    # an interrupted config: reported from its items
    (folder / "dlama_arab_west_corrected" / "metrics.json").unlink()
    assert main(["report", str(folder)]) == 0
    out = capsys.readouterr().out
    assert (
        f"wrote {folder / 'dlama_arab_west' / 'report.md'}" in out
        and f"wrote {folder / 'suite.md'}" in out
    )
    assert (
        (folder / "dlama_arab_west" / "report.md")
        .read_text()
        .startswith("# dlama_arab_west on some/model")
    )
    corrected = (folder / "dlama_arab_west_corrected" / "report.md").read_text()
    assert "**INCOMPLETE" in corrected
    text = (folder / "suite.md").read_text()
    assert (
        "| dlama_arab_west | p1 (%) |" in text and "| dlama_arab_west_corrected | p1 (%) |" in text
    )


def test_the_terminal_lines_of_a_suite_round_as_suite_md(tmp_path, one_load, capsys):
    data = write_dlama(tmp_path / "dlama")
    argv = [
        "run",
        "dlama_arab_west",
        "dlama_arab_west_corrected",
        "--model",
        "m",
        "--data-dir",
        f"dlama={data}",
    ]
    assert main([*argv, "--language", "en", "--out", str(tmp_path / "suite")]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    value = json.loads((tmp_path / "suite" / "suite.json").read_text())["configs"][0]["value"]
    # 5 facts: marked, and rounded as suite.md
    assert first.startswith(f"dlama_arab_west: p1 (%): {value:.2f} † [")


def test_a_config_whose_data_cannot_be_had_is_skipped_saying_why(tmp_path, one_load, capsys):
    """The folder holds the arab-west pair only: asia-west is skipped, said at once, in suite.md and
    suite.json, and in the exit code (3); the other config runs on the model loaded once.
    """
    from culture_probe.runner.suite import SkippedConfigWarning

    data, folder = write_dlama(tmp_path / "dlama"), tmp_path / "suite"
    argv = [
        "run",
        "dlama_arab_west,dlama_asia_west",
        "--model",
        "m",
        "--data-dir",
        f"dlama={data}",
        "--language",
        "en",
    ]
    with pytest.warns(
        SkippedConfigWarning,
        match=r"^dlama_asia_west skipped: .* has no folder for asia_west \(files",
    ):
        assert main([*argv, "--out", str(folder)]) == 3
    assert one_load == ["m"] and (folder / "dlama_arab_west" / "metrics.json").is_file()
    assert not (folder / "dlama_asia_west").exists()
    why = json.loads((folder / "suite.json").read_text())["skipped"]["dlama_asia_west"]
    assert "has no folder for asia_west" in why and "\n" not in why
    assert f"- dlama_asia_west: {why}" in (folder / "suite.md").read_text()
    assert f"dlama_asia_west: skipped ({why})" in capsys.readouterr().out
    (folder / "suite.md").unlink()
    # re-rendered from the folder, the skipped block stays
    assert main(["report", str(folder)]) == 0
    assert f"- dlama_asia_west: {why}" in (folder / "suite.md").read_text()


def test_strict_stops_before_the_model_loads_and_a_suite_with_nothing_to_run_is_an_error(
    tmp_path, one_load, capsys
):
    data = write_dlama(tmp_path / "dlama")
    argv = [
        "run",
        "dlama_arab_west",
        "dlama_asia_west",
        "--model",
        "m",
        "--data-dir",
        f"dlama={data}",
    ]
    assert main([*argv, "--strict", "--out", str(tmp_path / "strict")]) == 2
    assert "error: In the suite's config dlama_asia_west: " in capsys.readouterr().err
    assert one_load == [] and not (tmp_path / "strict").exists()
    with pytest.raises(
        MissingDataError,
        match=r"has its data: dlama_asia_west: .* asia_west .* pair; dlama_south_america_west: .*pair\.$",
    ):
        culture_probe.run_suite(
            ["dlama_asia_west", "dlama_south_america_west"], "m", data_dir=str(data)
        )
    assert one_load == []


def test_a_mistyped_data_dir_or_option_stops_the_suite_instead_of_skipping(tmp_path, one_load):
    with pytest.raises(InvalidValueError, match="--data-dir no/such/dlama does not exist"):
        culture_probe.run_suite(
            ["dlama_arab_west", "camel_co_prompts"], "m", data_dir="dlama=no/such/dlama"
        )
    with pytest.raises(
        CultureProbeError, match="In the suite's config camel_co_prompts: Unknown option 'score'"
    ):
        culture_probe.run_suite(
            ["dlama_arab_west", "camel_co_prompts"], "m", options={"camel.score": "sum"}
        )
    assert one_load == []


def test_configs_are_named_with_commas_or_spaces_once_each_and_a_typo_gets_a_short_hint(
    tmp_path, one_load, capsys
):
    data = write_dlama(tmp_path / "dlama")
    argv = [
        "--model",
        "m",
        "--data-dir",
        f"dlama={data}",
        "--language",
        "en",
        "--out",
        str(tmp_path / "suite"),
    ]
    names = ["dlama_arab_west_corrected,dlama_arab_west", "dlama_arab_west_corrected"]
    assert main(["run", *names, *argv]) == 0
    capsys.readouterr()
    summary = json.loads((tmp_path / "suite" / "suite.json").read_text())
    assert [row["config"] for row in summary["configs"]] == [
        "dlama_arab_west_corrected",
        "dlama_arab_west",
    ]
    assert main(["run", "camel_co_prompts,camel_ag_prompt", "--model", "m"]) == 2
    err = capsys.readouterr().err
    assert (
        "Unknown benchmark config or group 'camel_ag_prompt'. Did you mean 'camel_ag_prompts'"
        in err
    )
    assert "fmlama_he" not in err and len(err.splitlines()) == 1 and one_load == ["m"]
