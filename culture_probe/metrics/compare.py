"""Differences between groups (cultures, languages) of any per-item score, with their uncertainty.

None of the five papers offers this; it lets a report say "the model knows Western facts better"
together with a 95% interval and a p-value that come from one procedure, so that the interval
excludes 0 exactly when p < 0.05.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from itertools import combinations
from typing import Any

import numpy as np

from culture_probe.errors import MetricInputError
from culture_probe.metrics._checks import check_labels, check_lengths, finite_floats
from culture_probe.metrics._intervals import (
    MIETTINEN_NURMINEN,
    Interval,
    bounded,
    miettinen_nurminen_score,
    no_interval,
    score_interval,
    score_p_value,
)
from culture_probe.metrics._resample import check_resampling, shift_test
from culture_probe.util.typecheck import checked

#: The library's own: this comparison comes from no paper, so its `evaluate` metric cites
#: culture_probe.
CITATION = """@software{culture_probe,
  title = {culture\\_probe: probing what language models know about cultures},
  year = {2026}
}"""
PERMUTATION = "permutation test; interval: the shifts of the first group it does not reject"
HOLM = "Holm (1979) step-down adjustment"


def holm(p_values: Iterable[float | None]) -> list[float | None]:
    """Holm-adjusted p-values of a family of tests, in the order given; None (no test was possible)
    stays None and does not count as a test.

    With the m p-values sorted, p_(1) <= ... <= p_(m), the adjusted p_(k) is max over j <= k of (m -
    j + 1) p_(j), capped at 1: the smallest family-wise level at which Holm's step-down procedure
    rejects that hypothesis. It is never below the raw p-value and keeps the order of the raw ones
    (ties get the same adjusted value).
    """
    given = list(p_values)
    tested = [(float(p), i) for i, p in enumerate(given) if p is not None]
    for p, i in tested:
        if not 0.0 <= p <= 1.0:  # NaN fails both comparisons
            raise MetricInputError(f"`p_values[{i}]` must be a p-value in [0, 1], got {p!r}.")
    out: list[float | None] = [None] * len(given)
    running, m = 0.0, len(tested)
    for rank, (p, i) in enumerate(sorted(tested)):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def _fields(interval: Interval) -> dict[str, Any]:
    """An interval's keys in a comparison: `ci_low`, `ci_high`, and `no_interval` when there is
    none.
    """
    return {k: v for k, v in interval.fields().items() if k != "stderr"}


def _compare(
    a: np.ndarray, b: np.ndarray, n_resamples: int, confidence: float, seed: int
) -> dict[str, Any]:
    """One pair of any scores: the permutation test of the difference in means (seeded per pair, so
    a pair's result does not depend on the other groups) and the interval that inverts it.
    """
    difference = float(a.mean() - b.mean())
    if min(a.size, b.size) < 2:
        reason = "a group has one item"
        return {
            "difference": difference,
            **_fields(no_interval(reason)),
            "p_value": None,
            "method": PERMUTATION,
        }
    spread = float(np.ptp(np.concatenate([a, b])))
    if spread == 0:
        reason = "every score is the same: the difference has no spread to estimate"
        return {
            "difference": difference,
            **_fields(no_interval(reason)),
            "p_value": 1.0,
            "method": PERMUTATION,
        }
    test = shift_test(a, b, n_resamples, seed)
    found = test.interval(confidence, step=spread / 8)
    reason = f"with {a.size} and {b.size} items no shift can be rejected at {1 - confidence:.0%}"
    interval = no_interval(reason) if found is None else bounded(difference, None, *found, None)
    return {
        "difference": difference,
        **_fields(interval),
        "p_value": test.p_value(),
        "method": PERMUTATION,
    }


def _compare_proportions(
    a: np.ndarray, b: np.ndarray, success: float, confidence: float
) -> dict[str, Any]:
    """One pair of binary outcomes (0 or `success`): Miettinen and Nurminen's score interval of the
    difference of proportions and its score test at 0, so a group's 0 of n still leaves the interval
    its width.
    """
    score = miettinen_nurminen_score(
        int(np.sum(a == success)), a.size, int(np.sum(b == success)), b.size
    )
    d = float(a.mean() - b.mean()) / success
    low, high = score_interval(score, d, confidence)
    interval = bounded(success * d, None, success * low, success * high, None)
    return {
        "difference": success * d,
        **_fields(interval),
        "p_value": score_p_value(score),
        "method": MIETTINEN_NURMINEN,
    }


@checked(MetricInputError, pure=True)
def compare_groups(
    scores: Sequence[float] | np.ndarray,
    groups: Sequence[Hashable],
    reference: str | None = None,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
    *,
    success: float | None = None,
) -> dict[str, Any]:
    """Mean score per group and, for each pair of groups, mean(a) - mean(b) with a CI and a p-value.

    Pairs are every pair of groups in sorted order, or each group against `reference`. Scores that
    are binary outcomes (0 or `success`, e.g. 100 for a hit in percent) get the Miettinen-Nurminen
    score interval and its score test; any other scores a two-sided permutation test (every
    relabelling when there are at most `n_resamples`, else that many drawn with `seed`) and as
    interval the shifts of group a it does not reject. Either way interval and p-value come from one
    test (`method` names it). Each comparison also has `p_holm`, its p-value adjusted by Holm's
    step-down procedure over the `n_tests` comparisons of this call that have a p-value (equal to
    `p_value` when there is one); the intervals are not adjusted.
    """
    check_lengths(scores=scores, groups=groups)
    check_resampling(n_resamples, confidence)
    values = finite_floats("scores", scores)
    if success is not None and not np.isin(values, (0.0, success)).all():
        raise MetricInputError(
            f"`scores` must be 0 or {success:g} (`success`) for a comparison of proportions."
        )
    keys = np.asarray([str(g) for g in groups])
    names = sorted(set(keys.tolist()))
    if len(names) < 2:
        raise MetricInputError(
            f"`groups` has only the group {names[0]!r}: a comparison needs at least two groups."
        )
    if reference is not None:
        check_labels("reference", [reference], names)
        pairs = [(name, reference) for name in names if name != reference]
    else:
        pairs = list(combinations(names, 2))

    def compare(a: np.ndarray, b: np.ndarray) -> dict[str, Any]:
        if success is not None:
            return _compare_proportions(a, b, success, confidence)
        return _compare(a, b, n_resamples, confidence, seed)

    comparisons = [
        {"a": a, "b": b, **compare(values[keys == a], values[keys == b])} for a, b in pairs
    ]
    adjusted = holm(c["p_value"] for c in comparisons)
    comparisons = [{**c, "p_holm": p} for c, p in zip(comparisons, adjusted, strict=True)]
    means = {
        name: {"mean": float(values[keys == name].mean()), "n": int((keys == name).sum())}
        for name in names
    }
    return {
        "groups": means,
        "comparisons": comparisons,
        "n_tests": sum(p is not None for p in adjusted),
        "n_resamples": int(n_resamples),
        "confidence": float(confidence),
        "seed": int(seed),
    }
