"""MAPS: accuracy with negative questions and subsets, memorisation, culture gap (specs/maps.md 5 by
hand).
"""

from __future__ import annotations

import pytest

from culture_probe.benchmarks.maps.metrics import (
    cross_lingual_average,
    culture_gap,
    delta_en,
    maps,
    memorisation_rate,
)
from culture_probe.errors import MetricInputError
from culture_probe.metrics import format_score

LABELS = ["a", "b", "b", "a"]
LETTER_LOGPROBS = [(-0.9, -1.3), (-1.1, -0.4), (-0.7, -0.7), (-2.0, -1.5)]
# Ties go to "a" (the task's rule): a, b, a, b.
PREDICTIONS = ["a" if a >= b else "b" for a, b in LETTER_LOGPROBS]


def test_worked_example_positive_negative_and_figurative():
    assert PREDICTIONS == ["a", "b", "a", "b"]
    positive = maps(PREDICTIONS, LABELS, negative=[False] * 4, is_figurative=[1, 1, 0, 0])
    assert positive["accuracy"] == 100 * 2 / 4
    assert positive["subsets"]["figurative"] == {"accuracy": 100.0, "n": 2}
    assert positive["subsets"]["non_figurative"] == {"accuracy": 0.0, "n": 2}
    assert positive["subsets"]["negative"] == {"accuracy": None, "n": 0}
    negative = maps(PREDICTIONS, LABELS, negative=[True] * 4)
    assert negative["accuracy"] == 100 * 2 / 4  # items 3 and 4 disagree with the label
    assert negative["subsets"]["negative"]["n"] == 4


def test_mixed_variants_and_memorised_subset():
    result = maps(["a", "a"], ["a", "a"], negative=[False, True], memorised=[True, False])
    assert result["accuracy"] == 50.0
    assert (
        result["subsets"]["positive"]["accuracy"] == 100.0
        and result["subsets"]["negative"]["accuracy"] == 0.0
    )
    assert result["subsets"]["memorised"]["accuracy"] == 100.0


def test_memorisation_union_and_per_template():
    successes = [[False, True, False, False, False], [False] * 5, [True, False, False, True, True]]
    result = memorisation_rate(successes)
    assert result["union"] == pytest.approx(100 * 2 / 3)
    assert format_score(result["union"], display="truncate") == "66.66"
    assert format_score(result["union"], display="round") == "66.67"
    assert result["per_template"] == pytest.approx([100 / 3, 100 / 3, 0.0, 100 / 3, 100 / 3])
    assert result["mean_per_template"] == pytest.approx(100 * 4 / 15)
    assert format_score(result["mean_per_template"], display="truncate") == "26.66"


def test_truncation_is_not_fooled_by_binary_floats():
    assert format_score(60.526, display="truncate") == "60.52"
    assert format_score(0.29 * 100, display="truncate") == "29.00"  # 28.999999999999996 in binary


def test_culture_and_language_gap():
    gaps = culture_gap(source=70.0, target=80.0, human_translated=72.5, machine_translated=60.0)
    assert gaps == {"culture_gap": pytest.approx(7.5), "language_gap": pytest.approx(12.5)}
    assert culture_gap(70.0, 80.0, 72.5)["language_gap"] is None


def test_cross_lingual_average_excludes_english():
    per_language = {"en": 90.0, "de": 60.0, "zh": 70.0, "ru": 50.0, "id": 80.0, "bn": 40.0}
    assert cross_lingual_average(per_language) == pytest.approx(60.0)
    with pytest.raises(MetricInputError, match="lacks \\['bn'\\]"):
        cross_lingual_average({k: v for k, v in per_language.items() if k != "bn"})


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: maps(["a", "c"], ["a", "b"], [False] * 2), "Unknown label 'c' in `predictions`"),
        (
            lambda: maps(["a"], ["A"], [False]),
            "Unknown label 'A' in `references`.*Did you mean 'a'",
        ),
        (lambda: maps(["a"], ["a"], ["no"]), "`negative` must hold True/False"),
        (
            lambda: maps(["a"], ["a"], [False], is_figurative=[True, False]),
            "`is_figurative` has 2 items",
        ),
        (lambda: memorisation_rate([]), "`successes` must be a non-empty"),
        (
            lambda: culture_gap(70.0, float("nan"), 72.5),
            r"^`target` must be a finite accuracy .*got nan\.$",
        ),
        (
            lambda: culture_gap(70.0, 80.0, 72.5, machine_translated="60"),
            r"^`machine_translated` must be a finite accuracy .*got '60'\.$",
        ),
        (
            lambda: culture_gap(None, 80.0, 72.5),
            r"^`source` must be a finite accuracy .*got None\.$",
        ),
    ],
)
def test_bad_input(call, message):
    with pytest.raises(MetricInputError, match=message):
        call()


def test_delta_en_is_the_gap_to_english_after_machine_translation():
    # the paper's Table 11 (Llama-2 13B): En 78.68; MT into English de 73.35, ru 71.02, id 69.79, bn
    # 61.76, zh 54.19
    mt = {"de": 73.35, "ru": 71.02, "id": 69.79, "bn": 61.76, "zh": 54.19}
    deltas = delta_en(78.68, mt)
    assert deltas == {
        lang: pytest.approx(value)
        for lang, value in {"de": 5.33, "ru": 7.66, "id": 8.89, "bn": 16.92, "zh": 24.49}.items()
    }
    assert delta_en(50.0, {"de": 60.0}) == {"de": -10.0}  # MT may beat English: the sign is kept
    with pytest.raises(MetricInputError, match="`machine_translated` is empty"):
        delta_en(78.68, {})
    with pytest.raises(MetricInputError, match="`machine_translated` has nan"):
        delta_en(78.68, {"de": float("nan")})
    with pytest.raises(MetricInputError, match="`english` has inf"):
        delta_en(float("inf"), {"de": 1.0})
