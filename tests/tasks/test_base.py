"""The protocol base class and the runner: options, limits, skipped items, stages, the run
directory, resume.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

import pytest
from dlama_fixture import TableScorer, spec_table, write_dlama
from scipy import stats

from culture_probe import rundir, runner
from culture_probe.benchmarks.dlama.task import DlamaTask
from culture_probe.engine.types import GenerateOptions
from culture_probe.errors import CultureProbeError, UnknownNameError, UnsupportedModelError
from culture_probe.provenance import ProcessLog
from culture_probe.tasks import (
    GenerateProbe,
    ScoreProbe,
    Scores,
    Skipped,
    Stage,
    Task,
    parse_options,
    task_for,
)
from culture_probe.tasks.sampling import stratified_items


@dataclass(frozen=True)
class Opts:
    flag: bool = False
    count: int | None = None
    mode: Literal["a", "b"] = "a"
    families: tuple[str, ...] = ("x",)
    names: dict[str, dict[str, str]] | None = None


def test_options_from_command_line_strings_follow_field_types():
    opts = parse_options(
        Opts,
        {
            "flag": "true",
            "count": "10",
            "mode": "b",
            "families": "x,y",
            "names": '{"ko": {"Japan": "일본"}}',
        },
    )
    assert opts == Opts(
        flag=True, count=10, mode="b", families=("x", "y"), names={"ko": {"Japan": "일본"}}
    )
    assert parse_options(Opts, {"count": "none"}).count is None
    assert parse_options(Opts, {"flag": False}).flag is False  # Python values pass through


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"flga": "true"}, r"Unknown option 'flga'\. Did you mean 'flag'\?"),
        ({"mode": "c"}, r"Unknown value of option mode 'c'.*Valid .*: a, b"),
        ({"flag": "maybe"}, r"Option flag takes true or false, got 'maybe'"),
        ({"count": "ten"}, r"Option count takes a int, got 'ten'"),
        ({"names": "{oops"}, r"Option names takes a JSON object"),
    ],
)
def test_bad_options_name_the_problem(values, message):
    with pytest.raises(CultureProbeError, match=message):
        parse_options(Opts, values)


def _probes(n_per_language: dict[str, int]) -> list[GenerateProbe]:
    """Two probes per item; items grouped by language, the first language's items first (as rows
    come).
    """
    return [
        GenerateProbe(f"{lang}{i}", "p", GenerateOptions(1), tag=t, meta={"language": lang})
        for lang, n in n_per_language.items()
        for i in range(n)
        for t in ("1", "2")
    ]


def test_a_limit_draws_items_in_turn_from_every_stratum_with_all_their_probes():
    probes = _probes({"en": 50, "ar": 3, "ko": 1})
    for seed in range(5):
        kept = stratified_items(probes, 6, ("language",), seed)
        items = {p.item_id for p in kept}
        # never the first 6 English
        assert len(items) == 6 and {i[:2] for i in items} == {"en", "ar", "ko"}
        # every probe of a kept item
        assert all(sum(p.item_id == i for p in kept) == 2 for i in items)
        assert kept == [p for p in probes if p.item_id in items]  # in probe order
        assert stratified_items(probes, 6, ("language",), seed) == kept  # seeded: the same again
    draws = {
        frozenset(p.item_id for p in stratified_items(probes, 6, ("language",), s))
        for s in range(5)
    }
    assert len(draws) > 1  # another seed, another subset
    # a limit above the items keeps all
    assert stratified_items(probes, 100, ("language",), 0) == probes
    with pytest.raises(CultureProbeError, match="limit must be at least 1"):
        stratified_items(probes, 0, ("language",), 0)


def test_registry_maps_configs_to_their_protocol_by_module_name():
    assert task_for("dlama_arab_west") is DlamaTask
    assert task_for("dlama_arab_west_corrected") is DlamaTask
    with pytest.raises(
        UnknownNameError,
        match=r"Unknown benchmark config 'dlama_arab_wset'\. Did you mean "
        r"'dlama_arab_west'",
    ):
        task_for("dlama_arab_wset")


class TwoStage(Task):
    """A toy protocol: stage one generates an answer, stage two scores it (like a judge), one item
    skipped.
    """

    stages = (Stage("answer"), Stage("judge"))

    def _probes(self, rows, stage, previous):
        if stage == "answer":
            for row in rows:
                if row["id"] == "skip":
                    yield Skipped(row["id"], "no prompt in this language")
                else:
                    yield GenerateProbe(
                        row["id"], row["q"], GenerateOptions(3), meta={"gold": row["a"]}
                    )
        else:
            for record in previous:
                if not record.skipped:
                    yield ScoreProbe(
                        record["id"], _request(record["answer"]), meta={"gold": record["gold"]}
                    )

    def _read(self, probe, output):
        if isinstance(probe, GenerateProbe):
            return {"answer": output}
        return {"verdict": output.best()}

    def _metrics(self, records, skipped):
        from culture_probe.metrics.results import UnitValue, unit_table

        judged = [r for r in records if r["stage"] == "judge"]
        correct = unit_table(
            "correct", [UnitValue(r.item_id, 100.0 * (r["verdict"] == r["gold"])) for r in judged]
        )
        return Scores(
            {"correct": sum(r["verdict"] == r["gold"] for r in judged)},
            [correct.with_scale(100.0, binary=True)],
        )


def _request(answer):
    from culture_probe.engine.types import ScoreRequest

    return ScoreRequest(left="verdict on " + answer, candidates=("yes", "no"))


class EchoScorer:
    """Generates the prompt's last word; prefers "yes" when the context ends in "cat"."""

    kind = "causal"
    identity = {"name_or_path": "echo"}

    def generate(self, prompts, options):
        return [p.split()[-1] for p in prompts]

    def score(self, requests, options=None):
        import numpy as np

        from culture_probe.engine.types import CandidateScores

        return [
            CandidateScores(
                r.candidates,
                np.array([0.0, -1.0] if r.left.endswith("cat") else [-1.0, 0.0]),
                np.array([1, 1]),
            )
            for r in requests
        ]


def execute(task, scorer, rows):
    """The runner's stage loop on `rows`, with nothing done before and no run directory."""
    first = task.build_probes(rows)
    log = ProcessLog.begin(None, {}, [], clock=0.0, counting=False, write=False)
    writer = rundir.RecordWriter(None, False)
    return runner.execution.execute(
        task, rows, first, scorer, runner.RunSettings(), [], writer, progress=False, log=log
    )


def test_stages_see_earlier_records_and_skipped_items_are_recorded_and_counted_per_reason():
    rows = [
        {"id": "1", "q": "a cat", "a": "yes"},
        {"id": "2", "q": "a dog", "a": "yes"},
        {"id": "skip", "q": "", "a": "no"},
    ]
    task = TwoStage("toy", kind="causal")
    records = execute(task, EchoScorer(), rows)
    assert [(r["stage"], r["id"]) for r in records] == [
        ("answer", "1"),
        ("answer", "2"),
        ("answer", "skip"),
        ("judge", "1"),
        ("judge", "2"),
    ]
    assert records[2].skipped and records[2]["skipped"] == "no prompt in this language"
    assert [r.kind for r in records] == ["generate", "generate", "skipped", "score", "score"]
    metrics = task.compute_metrics(records)
    # one item of two right; the skipped one is no unit
    assert metrics.pop("results")["overall"]["correct"] == {
        "value": 50.0,
        "stderr": pytest.approx(50 / 2**0.5),
        # Wilson, with the exact Poisson limit at 1 of 2
        "ci_low": pytest.approx(100 * stats.chi2.ppf(0.025, 2) / 4),
        "ci_high": pytest.approx(100 - 100 * stats.chi2.ppf(0.025, 2) / 4),
        "n": 2,
    }
    assert metrics == {
        "correct": 1,
        "n_probes": 5,
        "n_skipped": 1,
        "skipped": {"no prompt in this language": 1},
    }


def test_a_probes_system_message_reaches_the_engine_only_when_set():
    class Asking(TwoStage):
        def _probes(self, rows, stage, previous):
            if stage == "answer":
                yield GenerateProbe(
                    "1", "a cat", GenerateOptions(3, chat=True, system="You are an encyclopedia.")
                )
                yield GenerateProbe("2", "a dog", GenerateOptions(3, chat=True))
                yield GenerateProbe("3", "a bird", GenerateOptions(3, chat=True))

    class Recording(EchoScorer):
        def __init__(self):
            self.calls = []

        def generate(self, prompts, options):
            self.calls.append((list(prompts), options))
            return super().generate(prompts, options)

    scorer = Recording()
    execute(Asking("toy", kind="causal"), scorer, [])
    # one engine call per distinct options object: probes with equal options share it
    assert sorted(scorer.calls, key=str) == sorted(
        [
            (["a cat"], GenerateOptions(3, chat=True, system="You are an encyclopedia.")),
            (["a dog", "a bird"], GenerateOptions(3, chat=True)),
        ],
        key=str,
    )


def test_unsupported_model_kind_is_named():
    class MaskedOnly(TwoStage):
        kinds = ("masked",)

    with pytest.raises(
        UnsupportedModelError, match=r"cannot probe a 'causal' model; it supports masked"
    ):
        MaskedOnly("toy", kind="causal")


def test_duplicate_probe_keys_are_refused():
    class Twice(TwoStage):
        def _probes(self, rows, stage, previous):
            yield GenerateProbe("1", "x", GenerateOptions(1))
            yield GenerateProbe("1", "y", GenerateOptions(1))

    with pytest.raises(CultureProbeError, match="two probes with one key"):
        Twice("toy", kind="causal").build_probes([])


# ---------------------------------------------------------------- the run directory and resume


@pytest.fixture
def dlama_dir(tmp_path):
    return str(write_dlama(tmp_path / "dlama"))


class Crash(RuntimeError):
    pass


class CrashingScorer(TableScorer):
    """Dies (like a killed process) on its n-th engine call."""

    def __init__(self, table, crash_on):
        super().__init__(table)
        self.crash_on = crash_on

    def score(self, requests, options=None):
        if self.calls + 1 == self.crash_on:
            raise Crash("killed")
        return super().score(requests, options)


def test_limit_probes_that_many_facts_each_in_every_language(dlama_dir):
    result = runner.run(
        "dlama_arab_west", TableScorer(spec_table()), data_dir=dlama_dir, limit=2, progress=False
    )
    facts = {
        r["uuid"]: sorted(x["language"] for x in result.records if x["uuid"] == r["uuid"])
        for r in result.records
    }
    assert len(facts) == 2 and all(languages == ["ar", "en"] for languages in facts.values())
    assert result.config.run.limit == 2 and result.config.subset["sampled"] == 2


def test_resume_continues_an_interrupted_run_and_loses_nothing(dlama_dir, tmp_path, monkeypatch):
    monkeypatch.setattr("culture_probe.runner.execution.CHUNK", 3)  # 10 facts -> 4 engine calls
    full = runner.run(
        "dlama_arab_west", TableScorer(spec_table()), data_dir=dlama_dir, progress=False
    )
    out = tmp_path / "run"
    with pytest.raises(Crash):
        runner.run(
            "dlama_arab_west",
            CrashingScorer(spec_table(), crash_on=3),
            data_dir=dlama_dir,
            out=out,
            progress=False,
        )
    lines = (out / "items.jsonl").read_text().splitlines()
    assert len(lines) == 6 and not (out / "metrics.json").exists()
    with (out / "items.jsonl").open("a") as handle:  # a line cut short by the kill
        handle.write('{"id": "P30_gen')
    with pytest.raises(CultureProbeError, match="already holds a run. Pass --resume"):
        runner.run(
            "dlama_arab_west",
            TableScorer(spec_table()),
            data_dir=dlama_dir,
            out=out,
            progress=False,
        )
    scorer = TableScorer(spec_table())
    resumed = runner.run(
        "dlama_arab_west", scorer, data_dir=dlama_dir, out=out, resume=True, progress=False
    )
    assert scorer.calls == 2  # only the 4 missing facts were scored
    assert resumed.records == full.records
    assert resumed.metrics == full.metrics
    assert json.loads((out / "metrics.json").read_text()) == full.metrics
    assert len((out / "items.jsonl").read_text().splitlines()) == 10


def test_resume_refuses_other_settings(dlama_dir, tmp_path):
    out = tmp_path / "run"
    runner.run(
        "dlama_arab_west", TableScorer(spec_table()), data_dir=dlama_dir, out=out, progress=False
    )
    with pytest.raises(
        CultureProbeError, match=r"Cannot resume .*run\.limit was None and is now 3"
    ):
        runner.run(
            "dlama_arab_west",
            TableScorer(spec_table()),
            data_dir=dlama_dir,
            out=out,
            resume=True,
            limit=3,
            progress=False,
        )


@pytest.mark.slow
@pytest.mark.parametrize("machines", [1, 2], ids=["one-machine", "two-machines"])
def test_two_processes_give_the_numbers_of_one(dlama_dir, tmp_path, monkeypatch, machines):
    """`accelerate launch --multi_gpu --num_processes 2 -m culture_probe run ...` on CPUs: two
    processes really run, each scores its own half of every engine call, the records and metrics
    equal one process's, and only rank 0 writes the run directory. (`--cpu` would start one process:
    several CPU processes need MPI there.) With two machines (`--num_machines 2 --machine_rank 0/1
    --main_process_ip 127.0.0.1`, one process each, on this host) the same holds: the ranks are
    global, so machine 1's only process is rank 1 and writes nothing.
    """
    import os
    import subprocess
    import sys

    from culture_probe.benchmarks.dlama.data import read_templates
    from culture_probe.engine import parallel
    from culture_probe.loading import load_rows
    from culture_probe.models import save_tiny, train_tokenizer

    rows = load_rows("dlama_arab_west", data_dir=dlama_dir)
    templates = [read_templates()[0][lang]["P30"]["template"] for lang in ("en", "ar")]
    texts = templates + [r["sub_label"] for r in rows] + [o for r in rows for o in r["obj_label"]]
    model = save_tiny(
        tmp_path / "bert", "bert", train_tokenizer(texts, "wordpiece", model_kind="masked")
    )
    traces = {name: tmp_path / name for name in ("one", "two")}
    for folder in traces.values():
        folder.mkdir()
    monkeypatch.setenv(parallel.TRACE_VARIABLE, str(traces["one"]))
    single = runner.run("dlama_arab_west", str(model), data_dir=dlama_dir, progress=False)
    out, port = tmp_path / "two", str(free_port())
    launch = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--multi_gpu",
        "--num_processes",
        "2",
    ]
    launch += ["--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", port]
    machine = (
        [["--num_machines", "1"]]
        if machines == 1
        else [
            ["--num_machines", "2", "--machine_rank", str(rank), "--main_process_ip", "127.0.0.1"]
            for rank in (0, 1)
        ]
    )
    run_args = [
        "-m",
        "culture_probe",
        "run",
        "dlama_arab_west",
        "--model",
        str(model),
        "--data-dir",
        dlama_dir,
        "--out",
        str(out),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", parallel.TRACE_VARIABLE: str(traces["two"])}
    started = [
        subprocess.Popen([*launch, *each, *run_args], stderr=subprocess.PIPE, text=True, env=env)
        for each in machine
    ]
    for process in started:
        _, err = process.communicate(timeout=1200)
        assert process.returncode == 0, err[-3000:]

    def calls(folder, rank):
        return [
            json.loads(line) for line in (folder / f"rank{rank}.jsonl").read_text().splitlines()
        ]

    one, (rank0, rank1) = (
        calls(traces["one"], 0),
        (calls(traces["two"], 0), calls(traces["two"], 1)),
    )
    assert len(one) == len(rank0) == len(rank1) > 0
    assert {c["size"] for c in rank0 + rank1} == {2}
    for alone, mine, theirs in zip(one, rank0, rank1, strict=True):
        assert not set(mine["indices"]) & set(theirs["indices"]), (
            "a request was scored by both processes"
        )
        assert sorted(mine["indices"] + theirs["indices"]) == alone["indices"]
        assert abs(len(mine["indices"]) - len(theirs["indices"])) <= 1
    assert all(sum(len(c["indices"]) for c in rank) > 0 for rank in (rank0, rank1))

    records = rundir.read_records(out / "items.jsonl")
    # rank 1 wrote no lines
    assert len((out / "items.jsonl").read_text().splitlines()) == len(single.records)
    assert [(r["key"], r["prediction"]) for r in records] == [
        (r["key"], r["prediction"]) for r in single.records
    ]
    for mine, theirs in zip(records, single.records, strict=True):
        assert mine["top_scores"] == pytest.approx(theirs["top_scores"], abs=1e-5)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["en"]["cultures"] == single.metrics["en"]["cultures"]
    assert metrics["ar"]["p1"] == single.metrics["ar"]["p1"]


def free_port() -> int:
    """A TCP port nobody listens on now, so parallel test runs do not collide on a fixed rendezvous
    port.
    """
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
