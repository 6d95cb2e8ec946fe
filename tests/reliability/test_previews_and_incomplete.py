"""Previews tell the truth, and interrupted runs are marked wherever they are paired or summarised
(issue 35, items 6 and 8): `run --dry-run --resume` shows the probes left or the refusal the resume
would give; `consistency` and suite summaries mark a run that did not finish; a run killed and
resumed keeps the provenance of every probe it holds.

The runs are DLAMA Arab-West runs (five facts per language, tests/dlama_fixture.py) of a tiny BERT,
whose scorer counts what it encodes; `interrupted` kills one after two probes, as
tests/tasks/test_runner_resume.py does.
"""

from __future__ import annotations

import json

import pytest
from dlama_fixture import ARABIC, FACTS, write_dlama

import culture_probe
from culture_probe.cli import main
from culture_probe.engine.backend import Backend
from culture_probe.errors import CultureProbeError
from culture_probe.report.summary import summary_lines
from culture_probe.runner.dryrun import dry_run

pytestmark = pytest.mark.filterwarnings("ignore::culture_probe.runner.SmallLimitWarning")
CONFIG = "dlama_arab_west"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A DLAMA folder in English and Arabic, and a tiny random BERT that knows their words."""
    from culture_probe.models import save_tiny, train_tokenizer

    root = tmp_path_factory.mktemp("previews")
    words = [s for _, s in FACTS] + [o for _, labels, _ in FACTS.values() for o in labels]
    texts = [" ".join(words + [ARABIC.get(w, w) for w in words] + ["is located in ."])] * 3
    model = save_tiny(
        root / "bert", "bert", train_tokenizer(texts, "wordpiece", model_kind="masked")
    )
    return write_dlama(root / "dlama"), str(model)


def probe(setup, out, **kwargs):
    data, model = setup
    return culture_probe.run(CONFIG, model, data_dir=str(data), out=out, progress=False, **kwargs)


def cli_run(setup) -> list[str]:
    data, model = setup
    return ["run", CONFIG, "--model", model, "--data-dir", str(data), "--language", "en"]


@pytest.fixture
def interrupted(monkeypatch):
    """`interrupted(call, after)`: `call()` killed after `after` probes were answered (one probe per
    engine call).
    """

    def kill(call, after=2):
        with monkeypatch.context() as patch:
            patch.setattr("culture_probe.runner.execution.CHUNK", 1)
            score, asked = Backend.score, []

            def dying(self, requests, *args, **kwargs):
                if len(asked) == after:
                    raise RuntimeError("killed")
                asked.append(requests)
                return score(self, requests, *args, **kwargs)

            patch.setattr(Backend, "score", dying)
            with pytest.raises(RuntimeError, match="killed"):
                call()

    return kill


def test_a_dry_run_resume_of_a_finished_run_with_another_limit_gives_the_resumes_refusal(
    setup, tmp_path, capsys
):
    probe(setup, tmp_path / "run", limit=2, language="en")
    argv = [*cli_run(setup), "--out", str(tmp_path / "run")]
    before = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()}
    capsys.readouterr()
    assert main([*argv, "--limit", "3", "--resume", "--dry-run"]) == 2
    previewed = capsys.readouterr().err.strip()
    assert "run.limit was 2 and is now 3" in previewed and len(previewed.splitlines()) == 1
    with pytest.raises(CultureProbeError) as refused:  # the real resume: the very same line
        probe(setup, tmp_path / "run", limit=3, language="en", resume=True)
    assert previewed == f"culture-probe: error: {refused.value}"
    assert {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()} == before
    # without --resume, refused as the run refuses it
    assert main([*argv, "--limit", "2", "--dry-run"]) == 2
    assert "already holds a run. Pass --resume" in capsys.readouterr().err


def test_a_dry_run_resume_of_an_interrupted_run_shows_the_probes_left(
    setup, tmp_path, interrupted, capsys
):
    data, model = setup
    interrupted(lambda: probe(setup, tmp_path / "run", language="en"))
    (plan,) = dry_run(
        CONFIG, model, data_dir=str(data), language="en", out=tmp_path / "run", resume=True
    ).configs
    head = plan.stages[0]
    assert (head.probes, head.answered, plan.resumes) == (5, 2, str(tmp_path / "run"))
    answered = {
        json.loads(line)["key"]
        for line in (tmp_path / "run" / "items.jsonl").read_text().splitlines()
    }
    # the first left
    assert len(plan.shown) == 3 and not {shown.probe.key for shown in plan.shown} & answered
    argv = [*cli_run(setup), "--out", str(tmp_path / "run")]
    capsys.readouterr()
    assert main([*argv, "--resume", "--dry-run", "--show", "1"]) == 0
    text = capsys.readouterr().out
    assert (
        "3 probes left of 5" in text
        and "the first probe left" in text
        and "was read, not changed" in text
    )


def test_consistency_marks_an_interrupted_run_incomplete(setup, tmp_path, interrupted, capsys):
    probe(setup, tmp_path / "en", language="en")
    interrupted(lambda: probe(setup, tmp_path / "ar", language="ar"))
    out = tmp_path / "consistency"
    assert main(["consistency", str(tmp_path / "en"), str(tmp_path / "ar"), "--out", str(out)]) == 0
    assert "ar is INCOMPLETE 2/5" in capsys.readouterr().out
    assert (
        "- **note**: ar is INCOMPLETE 2/5 (no metrics.json)" in (out / "consistency.md").read_text()
    )
    assert json.loads((out / "consistency.json").read_text())["incomplete"] == {
        "ar": "INCOMPLETE 2/5"
    }


def test_a_suite_summary_marks_an_interrupted_config(setup, tmp_path, interrupted, capsys):
    data, model = setup
    suite = tmp_path / "suite"
    configs = [CONFIG, f"{CONFIG}_corrected"]
    run_suite = culture_probe.run_suite
    interrupted(
        lambda: run_suite(
            configs, model, data_dir=str(data), out=suite, progress=False, language="en"
        ),
        7,
    )
    previewed = dry_run(configs, model, data_dir=str(data), language="en", out=suite, resume=True)
    assert [(plan.stages[0].answered, plan.resumes) for plan in previewed.configs] == [
        (5, str(suite / CONFIG)),
        (2, str(suite / configs[1])),
    ]  # per config, as the suite's resume continues each
    assert main(["report", str(suite)]) == 0
    summary = json.loads((suite / "suite.json").read_text())
    assert [row.get("status") for row in summary["configs"]] == [None, "INCOMPLETE 2/5"]
    text = (suite / "suite.md").read_text()
    assert (
        "| **INCOMPLETE 2/5**" in text
        and f"{CONFIG}_corrected is INCOMPLETE 2/5 (no metrics.json)" in text
    )
    # a suite resumed for its first config only summarises the other as it stands, marked, on the
    # terminal too
    again = run_suite(
        [CONFIG], model, data_dir=str(data), out=suite, progress=False, language="en", resume=True
    )
    assert f"{CONFIG}_corrected: INCOMPLETE 2/5, so far: " in summary_lines(again.summary)


def test_a_run_killed_and_resumed_keeps_the_earlier_processes_provenance(
    setup, tmp_path, interrupted
):
    whole = probe(setup, tmp_path / "whole", language="en")
    interrupted(lambda: probe(setup, tmp_path / "run", language="en"))
    resumed = probe(setup, tmp_path / "run", language="en", resume=True)
    cut, counts = resumed.metrics["truncation"], ("contexts", "prompts")
    # not only the last 3
    assert {k: cut[k] for k in counts} == {k: whole.metrics["truncation"][k] for k in counts}
    assert (
        cut["contexts"]["encoded"] > 0
        and cut["processes"] == 2
        and cut["resumed"]
        and "uncounted" not in cut
    )
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    processes = json.loads((tmp_path / "run" / "processes.json").read_text())["processes"]
    # the killed one kept
    assert [(p["records"], p["finished"]) for p in processes] == [(2, False), (3, True)]
    assert config["processes"] == 2
    assert config["duration_s"] == pytest.approx(sum(p["duration_s"] for p in processes), abs=0.01)
    # a finished run resumed (as a suite resumed after it resumes it) asks nothing, and keeps every
    # count
    again = probe(setup, tmp_path / "run", language="en", resume=True)
    assert again.metrics["truncation"]["contexts"] == whole.metrics["truncation"]["contexts"]
    assert again.metrics["truncation"]["processes"] == 3
