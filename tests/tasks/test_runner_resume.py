"""Runner behaviour around stages, resumption and model loading: a stage's own model (the LLM judge)
is loaded only when it has work and with its own kind; a run interrupted anywhere resumes without
loss or duplicates.

The runs are X-FaKT runs on the first three rows (United States cities asked in English) of
`xfakt_release`, the small `src/utils.py` of tests/releases.py, which also gives the task its
literals (`data_dir`).
"""

from __future__ import annotations

import json
import shutil
from functools import cache
from pathlib import Path

import pytest

from culture_probe import runner
from culture_probe.data.registry import load_benchmark
from culture_probe.errors import CultureProbeError
from culture_probe.record import RunRecord
from culture_probe.rundir import check_resumable
from culture_probe.runner import RunSettings, run


@cache
def recall_rows(release: Path) -> tuple[dict, ...]:
    return tuple(
        load_benchmark("xfakt_factual_recall", data_dir=str(release))["test"].select(range(3))
    )


def xfakt_run(release: Path, model, tmp_path, **kwargs):
    """An X-FaKT run on the release's first three rows, its literals from the same release, into
    tmp_path/run.
    """
    return run(
        "xfakt_factual_recall",
        model,
        rows=recall_rows(release),
        out=tmp_path / "run",
        progress=False,
        data_dir=str(release),
        **kwargs,
    )


class FakeModel:
    """A duck-typed causal scorer: fixed replies, counts its prompts, fails after `fail_after`
    calls.
    """

    kind = "causal"

    def __init__(self, reply: str, identity: str, fail_after: int | None = None):
        self.reply, self.identity, self.fail_after = reply, identity, fail_after
        self.prompts: list[str] = []

    def generate(self, prompts, options):
        if self.fail_after is not None and len(self.prompts) >= self.fail_after:
            raise RuntimeError("killed")
        self.prompts += prompts
        return [self.reply] * len(prompts)


def fake_loader(judge: FakeModel, loads: list, monkeypatch):
    """`ModelSpec.load` giving `judge` for every named model (and noting the loads), which resolves
    at once.
    """
    monkeypatch.setattr(
        "culture_probe.runner.stage_models.resolve_stage_model",
        lambda name, *_: runner.stage_models.StageModel(name, "causal"),
    )

    def load(spec):
        if spec.name is None:
            return spec.scorer
        loads.append((spec.name, spec))
        return judge

    return load


def judged_run(release: Path, model, tmp_path, **kwargs):
    return xfakt_run(release, model, tmp_path, judge_model="fake/judge", max_new_tokens=4, **kwargs)


def items(tmp_path) -> list[dict]:
    return [
        json.loads(line) for line in (tmp_path / "run" / "items.jsonl").read_text().splitlines()
    ]


def test_judge_is_loaded_only_with_pending_probes_and_with_its_own_kind(
    xfakt_release, tmp_path, monkeypatch
):
    loads: list = []
    monkeypatch.setattr(
        "culture_probe.engine.loading.ModelSpec.load",
        fake_loader(FakeModel("[1]", "judge"), loads, monkeypatch),
    )
    model = FakeModel("United States", "model")
    judged_run(
        xfakt_release,
        model,
        tmp_path,
        kind="causal",
        dtype="float16",
        device="cpu",
        batch_tokens=77,
    )
    assert [name for name, _ in loads] == ["fake/judge"]
    judge = loads[0][1]
    assert (
        judge.options.kind,
        judge.options.batch_tokens,
        judge.args.dtype,
        judge.options.device,
    ) == (
        "auto",
        None,
        "float16",
        "cpu",
    )
    result = judged_run(
        xfakt_release, model, tmp_path, resume=True, kind="causal", dtype="float16", device="cpu"
    )
    assert len(loads) == 1  # a finished run resumes without loading the judge
    assert result.metrics["n_items"] == 3


def test_two_stage_run_interrupted_in_the_judge_stage_resumes_without_loss_or_duplicates(
    xfakt_release, tmp_path, monkeypatch
):
    monkeypatch.setattr(
        "culture_probe.runner.execution.CHUNK", 1
    )  # one record per engine call: the kill lands mid-stage
    loads: list = []
    monkeypatch.setattr(
        "culture_probe.engine.loading.ModelSpec.load",
        fake_loader(FakeModel("[1]", "judge", fail_after=1), loads, monkeypatch),
    )
    model = FakeModel("United States", "model")
    with pytest.raises(RuntimeError, match="killed"):
        judged_run(xfakt_release, model, tmp_path)
    assert [r["stage"] for r in items(tmp_path)] == ["answer"] * 3 + ["judge"]
    from culture_probe.report import load_run

    # the interrupted run's report: one verdict, two answers waiting
    partial = load_run(tmp_path / "run")[2]
    assert partial["n_ungraded"] == 2 and partial["n_items"] == 1
    judge = FakeModel("[1]", "judge")
    monkeypatch.setattr(
        "culture_probe.engine.loading.ModelSpec.load", fake_loader(judge, loads, monkeypatch)
    )
    result = judged_run(xfakt_release, model, tmp_path, resume=True)
    # only the two missing verdicts were asked
    assert len(model.prompts) == 3 and len(judge.prompts) == 2
    lines = items(tmp_path)
    keys = [(r["stage"], r["key"]) for r in lines]
    assert len(keys) == len(set(keys)) == 6
    assert [(r["stage"], r["key"]) for r in result.records] == sorted(
        keys, key=lambda k: k[0] == "judge"
    )
    assert result.metrics["n_items"] == 3 and result.metrics["verdicts"] == {"same_language": 3}


def test_a_run_that_failed_before_its_first_answer_restarts_without_resume(xfakt_release, tmp_path):
    with pytest.raises(RuntimeError, match="killed"):
        xfakt_run(xfakt_release, FakeModel("x", "m", fail_after=0), tmp_path, judge="string")
    assert (tmp_path / "run" / "config.json").is_file()
    result = xfakt_run(xfakt_release, FakeModel("United States", "m"), tmp_path, judge="string")
    assert len(result.records) == 3 and len(items(tmp_path)) == 3
    assert result.metrics["verdicts"] == {"same_language": 3}  # the string judge read the replies
    with pytest.raises(
        CultureProbeError, match=r"already holds a run\. Pass --resume .*\(3 probe\(s\) answered"
    ):
        xfakt_run(xfakt_release, FakeModel("United States", "m"), tmp_path, judge="string")


def test_every_rank_reads_the_run_directory_before_items_are_written(
    xfakt_release, tmp_path, monkeypatch
):
    from culture_probe.engine import parallel

    seen = []
    monkeypatch.setattr(
        parallel,
        "barrier",
        lambda size: seen.append(
            (
                (tmp_path / "run" / "config.json").is_file(),
                (tmp_path / "run" / "items.jsonl").is_file(),
            )
        ),
    )
    xfakt_run(xfakt_release, FakeModel("United States", "m"), tmp_path, judge="string")
    assert seen[0] == (True, False)


def test_seed_is_a_resume_key_only_for_protocols_that_sample(tmp_path):
    from culture_probe.benchmarks.camel.task import CamelTask
    from culture_probe.benchmarks.dlama.task import DlamaTask

    assert CamelTask.seeded and not DlamaTask.seeded

    def record(seed, **more):
        return RunRecord.from_json({"run": {"seed": seed}, "model": {"identity": "m"}, **more})

    check_resumable(record(0), record(1, seed_used=False), tmp_path)
    with pytest.raises(CultureProbeError, match="run.seed was 0 and is now 1"):
        check_resumable(record(0), record(1, seed_used=True), tmp_path)


def test_revision_reaches_the_loader_and_config(tmp_path, monkeypatch):
    from culture_probe.cli import build_parser
    from culture_probe.engine import Scorer

    calls = []
    monkeypatch.setattr(
        Scorer, "from_pretrained", classmethod(lambda cls, name, **kw: calls.append((name, kw)))
    )
    runner.stage_models.model_spec("org/model", RunSettings.of(revision="0123abc")).load()
    runner.stage_models.model_spec("org/model", RunSettings(no_cache=True)).load()
    (name, pinned), (_, plain) = calls
    # the loader's only source of it
    assert name == "org/model" and pinned["model_args"].revision == "0123abc"
    assert (
        pinned.get("revision") in (None, "0123abc")
        and pinned["cache_dir"] == runner.stage_models.default_cache_dir()
    )
    assert plain == {"kind": "auto"}
    args = build_parser().parse_args(
        ["run", "dlama_arab_west", "--model", "org/model", "--revision", "v1"]
    )
    assert args.revision == "v1"


def test_config_records_the_revision(xfakt_release, tmp_path):
    xfakt_run(
        xfakt_release, FakeModel("United States", "m"), tmp_path, judge="string", revision="v1"
    )
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    # ModelArgs: its only home
    assert config["model_args"]["revision"] == "v1" and "revision" not in config["run"]
    assert config["seed_used"] is False


@pytest.mark.slow
def test_a_served_judge_gives_the_metrics_of_the_in_process_judge(xfakt_release, tmp_path):
    from served_helpers import CHAT_TEMPLATE, transformers_serve

    from culture_probe.models import save_tiny, train_tokenizer

    tok = train_tokenizer(
        ["[1] [2] [3] Yes, the answer is correct.", "United States"] * 3,
        "bpe",
        model_kind="causal",
        vocab_size=300,
    )
    tok.chat_template = CHAT_TEMPLATE
    # positions for the whole rubric
    judge = str(
        save_tiny(tmp_path / "judge", "gpt2", tok, layers=1, hidden=32, heads=2, positions=8192)
    )
    model = FakeModel("United States", "m")
    local = xfakt_run(xfakt_release, model, tmp_path / "local", judge_model=judge, max_new_tokens=4)
    with transformers_serve(tmp_path / "serve.log") as url:
        served = xfakt_run(
            xfakt_release,
            model,
            tmp_path / "served",
            judge_model=f"openai:{judge}",
            max_new_tokens=4,
            base_url=url,
        )
    assert served.config.options["judge_model"] == f"openai:{judge}"
    judged = [r for r in local.records if r.stage == "judge"]
    assert len(judged) == 3 and [r.fields for r in judged] == [
        r.fields for r in served.records if r.stage == "judge"
    ]
    # a server cuts (or refuses) long inputs itself: nothing counted here
    assert "truncation" not in served.metrics
    assert served.metrics == {k: v for k, v in local.metrics.items() if k != "truncation"}


def test_out_is_written_only_when_new_empty_or_a_run(xfakt_release, tmp_path):
    model = FakeModel("United States", "m")
    theirs = tmp_path / "run"  # xfakt_run writes to tmp_path / "run": here, somebody's model folder
    theirs.mkdir()
    (theirs / "config.json").write_text('{"model_type": "gpt2"}')
    (theirs / "model.safetensors").write_bytes(b"weights")
    with pytest.raises(
        CultureProbeError,
        match=r"is not empty and is not a culture_probe run .*nothing was written",
    ):
        xfakt_run(xfakt_release, model, tmp_path, judge="string")
    assert (theirs / "config.json").read_text() == '{"model_type": "gpt2"}' and len(
        list(theirs.iterdir())
    ) == 2
    assert model.prompts == []  # refused before anything was asked

    file = tmp_path / "file" / "run"
    file.parent.mkdir()
    file.write_text("notes")
    with pytest.raises(CultureProbeError, match="is a file; pass a folder"):
        xfakt_run(xfakt_release, model, tmp_path / "file", judge="string")
    assert file.read_text() == "notes"


def test_records_without_their_config_are_never_truncated(xfakt_release, tmp_path):
    model = FakeModel("United States", "m")
    xfakt_run(xfakt_release, model, tmp_path, judge="string")
    (tmp_path / "run" / "config.json").unlink()
    before = (tmp_path / "run" / "items.jsonl").read_text()
    with pytest.raises(
        CultureProbeError, match=r"holds 3 record\(s\) in items.jsonl but no config.json"
    ):
        xfakt_run(xfakt_release, model, tmp_path, judge="string")
    assert (tmp_path / "run" / "items.jsonl").read_text() == before


def test_a_second_writer_of_the_same_run_fails_at_once(xfakt_release, tmp_path):
    from filelock import FileLock

    (tmp_path / "run").mkdir()
    with FileLock(tmp_path / "run" / ".lock", timeout=0):  # another process writing this run
        with pytest.raises(CultureProbeError, match="Another process is writing the run in"):
            xfakt_run(xfakt_release, FakeModel("United States", "m"), tmp_path, judge="string")
    assert xfakt_run(
        xfakt_release, FakeModel("United States", "m"), tmp_path, judge="string"
    ).metrics


def test_a_run_made_before_the_marker_existed_still_resumes(xfakt_release, tmp_path):
    model = FakeModel("United States", "m")
    first = xfakt_run(xfakt_release, model, tmp_path, judge="string")
    (tmp_path / "run" / ".culture_probe_run").unlink()  # as runs of earlier versions were written
    again = xfakt_run(xfakt_release, model, tmp_path, judge="string", resume=True)
    assert again.metrics == first.metrics and len(model.prompts) == 3


def test_a_run_made_before_model_args_held_dtype_and_revision_reports_compares_and_resumes(
    xfakt_release, tmp_path
):
    # config.json of runs made before issue 27 kept the model's dtype and revision in `run`, not in
    # `model_args`
    from culture_probe.cli import main

    settings = {"judge": "string", "revision": "v1", "dtype": "float32"}
    first = xfakt_run(xfakt_release, FakeModel("United States", "m"), tmp_path, **settings)
    path = tmp_path / "run" / "config.json"
    new = json.loads(path.read_text())
    assert new["model_args"] == {"dtype": "float32", "revision": "v1"} and "dtype" not in new["run"]
    old = {k: v for k, v in new.items() if k != "model_args"}
    old["run"] = {**new["run"], "dtype": "float32", "revision": "v1"}
    path.write_text(json.dumps(old))
    assert main(["report", str(tmp_path / "run")]) == 0
    assert "--model-args dtype=float32,revision=v1" in (tmp_path / "run" / "report.md").read_text()
    shutil.copytree(tmp_path / "run", tmp_path / "copy")
    assert main(["compare", str(tmp_path / "run"), str(tmp_path / "copy")]) == 0
    again = xfakt_run(
        xfakt_release, FakeModel("United States", "m"), tmp_path, resume=True, **settings
    )
    assert (
        again.metrics == first.metrics
        and json.loads(path.read_text())["model_args"] == new["model_args"]
    )


def test_a_run_looks_its_config_name_up_once(xfakt_release, monkeypatch):
    # every stage resolved the name again (six lookups in one run): now the plan resolves it and
    # hands it down
    from culture_probe.data import registry

    rows = recall_rows(xfakt_release)  # the test's own rows, read before counting
    lookups: list[str] = []
    table = registry._configs
    monkeypatch.setattr(registry, "_configs", lambda: lookups.append("lookup") or table())
    model = FakeModel("United States", "m")
    run(
        "xfakt_factual_recall",
        model,
        rows=rows,
        progress=False,
        data_dir=str(xfakt_release),
        judge="string",
    )
    assert len(lookups) == 1
