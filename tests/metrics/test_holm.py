"""Holm's step-down adjustment (`culture_probe.metrics.compare.holm`) against a slow reference
written from the definition: the adjusted p-value of a hypothesis is the smallest family-wise level
at which Holm's procedure (Holm 1979, Scand. J. Statist. 6:65-70) rejects it, capped at 1.
"""

from __future__ import annotations

import numpy as np
import pytest

from culture_probe.errors import MetricInputError
from culture_probe.metrics.compare import holm


def holm_rejects(p_values: list[float], alpha: float) -> set[int]:
    """Holm's procedure at level `alpha`: walk the p-values from the smallest; reject the k-th (k =
    0, 1, ...) while p_(k) <= alpha / (m - k), and stop at the first that is not.
    """
    m = len(p_values)
    rejected: set[int] = set()
    for k, i in enumerate(sorted(range(m), key=lambda j: p_values[j])):
        if p_values[i] * (m - k) > alpha:
            break
        rejected.add(i)
    return rejected


def reference(p_values: list[float | None]) -> list[float | None]:
    """The smallest level among the procedure's critical values (m - k) p_(k) that rejects each
    hypothesis, capped at 1; None (no test) is no hypothesis of the family.
    """
    tested = [i for i, p in enumerate(p_values) if p is not None]
    family = [float(p_values[i]) for i in tested]
    m = len(family)
    levels = sorted({p * (m - k) for k, p in enumerate(sorted(family))})
    out: list[float | None] = [None] * len(p_values)
    for position, i in enumerate(tested):
        out[i] = min(1.0, next(a for a in levels if position in holm_rejects(family, a)))
    return out


def test_a_worked_example():
    # sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 = 0.04 -> stepped down to
    # 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.6, 0.7, 0.02]) == pytest.approx([1.0, 1.0, 0.06])  # capped at 1
    assert holm([0.2]) == [0.2] and holm([]) == []


@pytest.mark.parametrize("seed", range(6))
def test_holm_equals_the_step_down_procedure_read_as_a_p_value(seed):
    rng = np.random.default_rng(seed)
    for _ in range(150):
        m = int(rng.integers(1, 9))
        # ties (from a coarse grid), zeros, ones, tiny and large p-values, and untested entries
        pool = [0.0, 1.0, 0.01, 0.05, 0.05, *rng.uniform(0, 1, 4), *(10 ** rng.uniform(-6, 0, 4))]
        p_values: list[float | None] = [float(rng.choice(pool)) for _ in range(m)]
        p_values = [None if rng.random() < 0.15 else p for p in p_values]
        got = holm(p_values)
        want = reference(p_values)
        assert [g is None for g in got] == [w is None for w in want]
        assert [g for g in got if g is not None] == pytest.approx(
            [w for w in want if w is not None], rel=1e-12
        )
        tested = [(p, g) for p, g in zip(p_values, got, strict=True) if p is not None]
        for (p, g), (q, h) in ((a, b) for a in tested for b in tested):
            assert p <= g <= 1.0  # never below the raw p-value, never above 1
            if p <= q:
                assert g <= h  # monotone: the order of the raw p-values is kept


def test_not_a_p_value_is_refused():
    with pytest.raises(MetricInputError, match=r"p_values\[1\].*\[0, 1\]"):
        holm([0.2, 1.5])
    with pytest.raises(MetricInputError, match=r"p_values\[0\]"):
        holm([float("nan")])
