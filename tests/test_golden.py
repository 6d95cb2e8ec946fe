"""The golden runs of `tests/golden/cases.py`: records and metrics equal those written before the
refactor.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from golden.cases import CASES, golden_path, run_case

from culture_probe.schemas import validate_metrics

#: keys a later change added to records or metrics on purpose (structure, not numbers): the record's
#: probe kind (issue 11: typed records), the skipped-probe counts every protocol's metrics now
#: carry, and X-FaKT's count of answers still waiting for a verdict (always 0 in a finished run),
#: the results block's chance levels (issue 24), DLAMA's culture gap per language Holm-adjusted over
#: the run's languages, with how many tests that is (issue 34), and the processes a truncation
#: record sums over (issue 35)
ADDED_KEYS: frozenset[str] = frozenset(
    {
        "probe",
        "n_probes",
        "n_skipped",
        "skipped",
        "n_ungraded",
        "chance",
        "p_holm",
        "n_tests",
        "processes",
    }
)


def assert_same(expected: Any, actual: Any, where: str = "") -> None:
    """Equal JSON values; floats within 1e-6 (relative) so that another CPU's rounding does not fail
    the test.
    """
    if isinstance(expected, float) or isinstance(actual, float):
        assert isinstance(actual, (int, float)) and math.isclose(
            expected, actual, rel_tol=1e-6, abs_tol=1e-9
        ), f"{where}: {actual!r} != golden {expected!r}"
    elif isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: {type(actual).__name__} != golden dict"
        missing = expected.keys() - actual.keys()
        assert not missing, f"{where}: missing {sorted(missing)}"
        extra = actual.keys() - expected.keys() - ADDED_KEYS
        assert not extra, f"{where}: new keys {sorted(extra)} (add them to ADDED_KEYS if meant)"
        for key in expected:
            assert_same(expected[key], actual[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), (
            f"{where}: {actual!r} != {expected!r}"
        )
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            assert_same(e, a, f"{where}[{i}]")
    else:
        assert expected == actual, f"{where}: {actual!r} != golden {expected!r}"


@pytest.mark.slow
@pytest.mark.parametrize("bench", sorted(CASES))
def test_golden_runs_do_not_move(bench, mirror, tmp_path):
    golden = json.loads(golden_path(bench).read_text(encoding="utf-8"))
    for case in CASES[bench]:
        actual = json.loads(
            json.dumps(run_case(case, golden["rows"][case.config], tmp_path, mirror))
        )
        assert_same(golden["runs"][case.name], actual, f"{bench}/{case.name}")
        # every benchmark and mode follows the one results schema
        validate_metrics(actual["metrics"])


@pytest.mark.parametrize("bench", sorted(CASES))
def test_each_golden_file_says_why_its_numbers_last_moved(bench):
    changes = json.loads(golden_path(bench).read_text(encoding="utf-8")).get("changes")
    assert changes and all(isinstance(c, str) and c.strip() for c in changes), (
        f"{bench}.json: no `changes` entry"
    )
