"""Damaged and old run folders get one line, never a traceback (docs/reliability.md, "Damaged and
old run folders"): a config.json or metrics.json block of the wrong type, a NaN or infinite number
in metrics.json, and damaged alignment fields in items.jsonl are refused by `report`, `board`,
`compare` and `consistency` in one line naming the file (and line) and the field, exit 2; a DLAMA
run made before consistency alignment is told so by name.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from culture_probe import rundir
from culture_probe.cli import main
from culture_probe.record import RunRecord, read_metrics

GOLDEN = Path(__file__).resolve().parents[1] / "golden"

# (file, the keys down to the value, the wrong value, the field the error names)
WRONG_TYPES = [
    ("config.json", ["model"], "bert", "model"),
    ("config.json", ["model", "spec"], 12, "model.spec"),
    ("config.json", ["duration_s"], "12 s", "duration_s"),
    ("config.json", ["options"], ["mode=rank"], "options"),
    ("config.json", ["deviations"], 3, "deviations"),
    ("config.json", ["deviations", 0, "id"], 3, "deviations[0].id"),
    ("config.json", ["run"], "default", "run"),
    ("config.json", ["run", "seed"], "0", "run.seed"),
    ("config.json", ["benchmark", "languages"], "en", "benchmark.languages"),
    ("config.json", ["subset"], {"sampled": "all"}, "subset.sampled"),
    ("config.json", ["planned"], 48, "planned"),
    ("config.json", ["versions"], "0.1.0", "versions"),
    ("config.json", ["stage_options", "main"], "score", "stage_options.main"),
    ("metrics.json", ["results"], [], "results"),
    ("metrics.json", ["results", "headline"], 1, "results.headline"),
    ("metrics.json", ["results", "overall"], 3, "results.overall"),
    ("metrics.json", ["results", "overall", "p1", "value"], "62.5", "results.overall.p1.value"),
    ("metrics.json", ["results", "overall", "p1", "n"], "24", "results.overall.p1.n"),
    ("metrics.json", ["results", "by_culture"], ["arab"], "results.by_culture"),
    (
        "metrics.json",
        ["results", "by_culture", "arab", "p1", "ci_low"],
        "0",
        "results.by_culture.arab.p1.ci_low",
    ),
    ("metrics.json", ["results", "omitted"], "none", "results.omitted"),
    ("metrics.json", ["results", "chance", "p1"], 25, "results.chance.p1"),
    ("metrics.json", ["skipped"], 0, "skipped"),
    ("metrics.json", ["truncation"], "none", "truncation"),
    ("metrics.json", ["consistency", "pairs"], {"ar/en": {"n": 3}}, "consistency.pairs.ar/en"),
]
COMMANDS = ("report", "board", "compare", "consistency")
# where a number can be NaN or infinite: a headline value, an interval end, a chance level
NUMBERS = {
    "value": "results.overall.p1.value",
    "ci_high": "results.overall.p1.ci_high",
    "chance": "results.chance.p1.value",
}


def _copies(runs: dict[str, Path], tmp_path: Path) -> dict[str, Path]:
    return {
        language: Path(shutil.copytree(path, tmp_path / language))
        for language, path in runs.items()
    }


def _argv(command: str, runs: dict[str, Path], tmp_path: Path) -> list[str]:
    """`command` on the English run (first, where it takes two), with a fresh --out where it writes
    one.
    """
    given = {
        "report": ["report", str(runs["en"])],
        "board": ["board", str(runs["en"]), "--out", str(tmp_path / "board")],
        "compare": ["compare", str(runs["en"]), str(runs["ar"])],
        "consistency": ["consistency", str(runs["en"]), str(runs["ar"])],
    }
    return given[command]


def _set(path: Path, keys: list[Any], value: Any) -> None:
    """Put `value` at `keys` in the JSON file `path` (written as Python's json writes NaN and
    Infinity).
    """
    document = json.loads(path.read_text(encoding="utf-8"))
    parent = document
    for key in keys[:-1]:
        parent = parent.setdefault(key, {}) if isinstance(parent, dict) else parent[key]
    parent[keys[-1]] = value
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")


def _one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run a command that must fail with exit 2; its one error line (no traceback)."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("culture-probe: error: ")]
    assert len(lines) == 1 and "Traceback" not in err and "a bug" not in err, err[-2000:]
    return lines[0].removeprefix("culture-probe: error: ")


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    ("file", "keys", "value", "field"), WRONG_TYPES, ids=[case[3] for case in WRONG_TYPES]
)
def test_a_block_of_the_wrong_type_is_one_line_naming_the_file_and_the_field(
    runs, tmp_path, capsys, command, file, keys, value, field
):
    copies = _copies(runs, tmp_path)
    _set(copies["en"] / file, keys, value)
    line = _one_line(_argv(command, copies, tmp_path), capsys)
    assert line.startswith(f"{copies['en'] / file}: `{field}`"), line
    assert "the run folder is damaged" in line and "restore the file" in line
    assert not (tmp_path / "board").exists()


@pytest.mark.parametrize("command", ("report", "board", "compare"))
@pytest.mark.parametrize(
    "number", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"]
)
@pytest.mark.parametrize(
    "keys", [where.split(".") for where in NUMBERS.values()], ids=list(NUMBERS)
)
def test_a_non_finite_number_in_metrics_json_is_refused_never_shown_with_an_interval(
    runs, tmp_path, capsys, command, number, keys
):
    copies = _copies(runs, tmp_path)
    _set(copies["en"] / rundir.METRICS_FILE, keys, number)
    line = _one_line(_argv(command, copies, tmp_path), capsys)
    where = ".".join(keys)
    assert line.startswith(
        f"{copies['en'] / rundir.METRICS_FILE}: `{where}` should be a finite number"
    ), line
    assert f"got {number!r}" in line and "--resume" in line


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("ranked_ids", 5),
        ("ranked_ids", "Q1Q2"),
        ("ranked_ids", [1, 2]),
        ("uuid", ["P30_0"]),
        ("n_aligned", "4"),
        ("aligned_set", 4),
        ("language", 4),
        ("prediction", 4),
    ],
)
def test_a_damaged_record_in_consistency_is_one_line_naming_the_file_line_and_field(
    runs, tmp_path, capsys, field, value
):
    copies = _copies(runs, tmp_path)
    items = copies["ar"] / rundir.ITEMS_FILE
    lines = items.read_text(encoding="utf-8").splitlines(keepends=True)
    record = json.loads(lines[2])
    lines[2] = json.dumps({**record, field: value}, ensure_ascii=False) + "\n"
    items.write_text("".join(lines), encoding="utf-8")
    line = _one_line(_argv("consistency", copies, tmp_path), capsys)
    assert (
        line.startswith(f"{items}:3: `{field}") and "delete that line and resume the run" in line
    ), line


def test_a_dlama_run_made_before_consistency_alignment_is_told_so_by_name(runs, tmp_path, capsys):
    copies = _copies(runs, tmp_path)
    items = copies["ar"] / rundir.ITEMS_FILE
    # the fields records gained with the alignment
    older = ("uuid", "ranked_ids", "n_aligned", "aligned_set")
    records = [json.loads(line) for line in items.read_text(encoding="utf-8").splitlines()]
    items.write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k not in older}) + "\n" for r in records)
    )
    line = _one_line(_argv("consistency", copies, tmp_path), capsys)
    assert line.startswith("ar has no answer to pair") and "aligns no facts" not in line
    assert "made before consistency alignment; re-run it to get it" in line


def test_every_golden_runs_metrics_and_a_fresh_runs_files_read_as_written(runs):
    """The checks refuse only damage: the metrics of every golden run (each benchmark and model
    kind) and a fresh run's files pass, and what they return is what was written.
    """
    for golden in sorted(GOLDEN.glob("*.json")):
        for name, case in json.loads(golden.read_text(encoding="utf-8"))["runs"].items():
            assert read_metrics(case["metrics"], f"{golden.name}:{name}") is case["metrics"]
    for folder in runs.values():
        config = json.loads((folder / rundir.CONFIG_FILE).read_text(encoding="utf-8"))
        assert RunRecord.from_json(config).to_json() == config
        assert rundir.read_run(folder).metrics == json.loads(
            (folder / rundir.METRICS_FILE).read_text()
        )


# (file, the keys down to the value, a value of the right type out of its range, the field the error
# names, what it says): issue 46's run documents that `report`, `board` and `compare` showed, or
# left off, without a word
OUT_OF_RANGE = [
    (
        "metrics.json",
        ["results", "overall", "p1", "n"],
        -5,
        "results.overall.p1.n",
        "should be 0 or more",
    ),
    (
        "metrics.json",
        ["results", "by_culture", "arab", "p1", "n_observations"],
        -1,
        "results.by_culture.arab.p1.n_observations",
        "should be 0 or more",
    ),
    ("metrics.json", ["n_probes"], -3, "n_probes", "should be 0 or more"),
    (
        "metrics.json",
        ["skipped", "no_candidates"],
        -2,
        "skipped.no_candidates",
        "should be 0 or more",
    ),
    (
        "metrics.json",
        ["results", "overall", "p1", "ci_low"],
        99.0,
        "results.overall.p1",
        "has the interval [99.0, ",
    ),
    ("config.json", ["planned", "probes"], -5, "planned.probes", "should be 0 or more"),
    ("config.json", ["benchmark", "rows"], -1, "benchmark.rows", "should be 0 or more"),
    ("config.json", ["duration_s"], -2.0, "duration_s", "should be 0 or more"),
]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    ("file", "keys", "value", "field", "said"), OUT_OF_RANGE, ids=[case[3] for case in OUT_OF_RANGE]
)
def test_a_number_out_of_its_range_is_one_line_naming_the_file_and_the_field(
    runs, tmp_path, capsys, command, file, keys, value, field, said
):
    copies = _copies(runs, tmp_path)
    _set(copies["en"] / file, keys, value)
    line = _one_line(_argv(command, copies, tmp_path), capsys)
    assert line.startswith(f"{copies['en'] / file}: `{field}` {said}"), line
    assert "the run folder is damaged" in line and not (tmp_path / "board").exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_an_interval_that_does_not_hold_its_value_is_refused(runs, tmp_path, capsys, command):
    """The red-team's [90, 10] around 75: shown as it was before."""
    copies = _copies(runs, tmp_path)
    path = copies["en"] / rundir.METRICS_FILE
    for key, number in (("value", 75.0), ("ci_low", 90.0), ("ci_high", 10.0)):
        _set(path, ["results", "overall", "p1", key], number)
    line = _one_line(_argv(command, copies, tmp_path), capsys)
    assert line.startswith(
        f"{path}: `results.overall.p1` has the interval [90.0, 10.0] around 75.0, which does not hold it"
    ), line
    assert "--resume" in line


@pytest.mark.parametrize("command", COMMANDS)
def test_a_missing_headline_estimate_is_refused_not_left_off(runs, tmp_path, capsys, command):
    copies = _copies(runs, tmp_path)
    path = copies["en"] / rundir.METRICS_FILE
    document = json.loads(path.read_text(encoding="utf-8"))
    del document["results"]["overall"]["p1"]
    path.write_text(json.dumps(document), encoding="utf-8")
    line = _one_line(_argv(command, copies, tmp_path), capsys)
    assert line.startswith(
        f"{path}: `results.overall` lacks the estimate of the headline metric 'p1' (`results.headline`)"
    ), line


@pytest.mark.parametrize(
    ("file", "depth", "said"),
    [
        ("metrics.json", 200_000, "is nested too deep to read"),
        ("metrics.json", 100, "nested deeper than 64 levels"),
        ("config.json", 200_000, "is nested too deep to read"),
        ("config.json", 400, "nested deeper than 64 levels"),
    ],
    ids=["metrics 200000", "metrics 100", "config 200000", "config 400"],
)
def test_a_document_nested_too_deep_is_one_line_naming_it(
    runs, tmp_path, capsys, file, depth, said
):
    """A 200,000-deep metrics.json raised RecursionError in json's reader; one a few hundred deep,
    in the readers after it (copy.deepcopy of config.json).
    """
    copies = _copies(runs, tmp_path)
    path = copies["en"] / file
    text = path.read_text(encoding="utf-8").rstrip()
    path.write_text(f'{text[:-1]}, "deep": {"[" * depth}{"]" * depth}}}', encoding="utf-8")
    for command in ("report", "board", "compare"):
        line = _one_line(_argv(command, copies, tmp_path), capsys)
        assert line.startswith(f"{path}") and said in line and "damaged" in line, line


def test_a_board_killed_mid_build_leaves_nothing_after_the_next_build(runs, tmp_path, capsys):
    """A SIGKILL leaves the temporary folder beside the board (`.board.building-XXXXXXXX`); the next
    build of that board removes it, under the board's lock, and nothing else: another board's, or a
    folder of another name.
    """
    left = tmp_path / ".board.building-k1ll3d_x"
    (left / "data").mkdir(parents=True)
    (left / "index.html").write_text("half a board", encoding="utf-8")
    others = [tmp_path / ".other.building-k1ll3d_x", tmp_path / ".board.building-notours"]
    for other in others:
        other.mkdir()
    held = tmp_path / "board"
    held.mkdir()
    with FileLock(held / ".lock", timeout=0):  # a live build of this board: its folder is let be
        line = _one_line(["board", str(runs["en"]), "--out", str(held)], capsys)
        assert line.startswith("Another process is writing the board") and left.is_dir()
    assert main(["board", str(runs["en"]), "--out", str(held)]) == 0
    building = {p.name for p in tmp_path.iterdir() if ".building-" in p.name}
    assert not left.exists() and building == {other.name for other in others}
