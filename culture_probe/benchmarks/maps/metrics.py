"""MAPS metrics: proverb-reasoning accuracy (with negative questions and subsets), culture gap,
memorisation.

Formulas: Liu et al., 2024, "Are Multilingual LLMs Culturally-Diverse Reasoners?", sections 5.1-5.3.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from culture_probe.errors import MetricInputError
from culture_probe.metrics._checks import check_bools, check_labels, check_lengths, finite_floats
from culture_probe.util.typecheck import checked

LETTERS = ("a", "b")
# Table 9 and 12's cross-lingual average: the five non-English languages.
CROSS_LINGUAL = ("de", "zh", "ru", "id", "bn")


def _accuracy(correct: np.ndarray) -> dict[str, Any]:
    return {
        "accuracy": 100.0 * float(correct.mean()) if correct.size else None,
        "n": int(correct.size),
    }


@checked(MetricInputError, pure=True)
def maps(
    predictions: Sequence[str],
    references: Sequence[str],
    negative: Sequence[bool],
    is_figurative: Sequence[bool] | None = None,
    memorised: Sequence[bool] | None = None,
) -> dict[str, Any]:
    """Accuracy in percent of the chosen option letters, overall and per subset.

    For a `negative` item (the question asks for the wrong interpretation) a prediction is correct
    when it differs from the label of the right interpretation. Subsets: positive/negative, and when
    given, figurative/non-figurative and memorised/not memorised (the model's own union flags). An
    empty subset gives None; the paper omits subsets of 50 items or fewer, so `n` is reported with
    each.
    """
    check_lengths(
        predictions=predictions,
        references=references,
        negative=negative,
        is_figurative=is_figurative,
        memorised=memorised,
    )
    predicted = np.asarray(check_labels("predictions", predictions, LETTERS))
    gold = np.asarray(check_labels("references", references, LETTERS))
    flipped = check_bools("negative", negative)
    correct = (predicted == gold) != flipped
    subsets = {"positive": _accuracy(correct[~flipped]), "negative": _accuracy(correct[flipped])}
    for name, flags, (yes, no) in (
        ("is_figurative", is_figurative, ("figurative", "non_figurative")),
        ("memorised", memorised, ("memorised", "not_memorised")),
    ):
        if flags is not None:
            mask = check_bools(name, flags)
            subsets[yes], subsets[no] = _accuracy(correct[mask]), _accuracy(correct[~mask])
    return {**_accuracy(correct), "subsets": subsets}


@checked(MetricInputError, pure=True)
def memorisation_rate(successes: Sequence[Sequence[bool]]) -> dict[str, Any]:
    """Memorisation in percent from a proverbs x templates table of completion successes.

    `union`: proverbs completed under at least one template (the paper's headline); `per_template`:
    each template's rate; `mean_per_template`: their mean.
    """
    table = np.asarray(successes)
    if table.ndim != 2 or table.size == 0:
        raise MetricInputError(
            f"`successes` must be a non-empty proverbs x templates table of True/False, got shape {table.shape}."
        )
    flags: np.ndarray = check_bools("successes", table.ravel().tolist()).reshape(table.shape)
    return {
        "union": 100.0 * float(flags.any(axis=1).mean()),
        "per_template": [100.0 * float(v) for v in flags.mean(axis=0)],
        "mean_per_template": 100.0 * float(flags.mean()),
        "n": int(flags.shape[0]),
    }


@checked(MetricInputError, pure=True)
def culture_gap(
    source: float, target: float, human_translated: float, machine_translated: float | None = None
) -> dict[str, float | None]:
    """Culture gap |Acc_HT − max(Acc_Src, Acc_Tgt)| and language gap Acc_HT − Acc_MT, in accuracy
    points.
    """
    given = {
        "source": source,
        "target": target,
        "human_translated": human_translated,
        "machine_translated": machine_translated,
    }
    for name, value in given.items():
        if value is not None or name != "machine_translated":  # the one optional accuracy
            _check_accuracy(name, value)
    return {
        "culture_gap": abs(human_translated - max(source, target)),
        "language_gap": None
        if machine_translated is None
        else human_translated - machine_translated,
    }


def _check_accuracy(name: str, value: Any) -> None:
    """One accuracy argument: a finite number, or an error that names that argument."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(value):
        raise MetricInputError(
            f"`{name}` must be a finite accuracy in points (0-100), got {value!r}."
        )


@checked(MetricInputError, pure=True)
def delta_en(english: float, machine_translated: Mapping[str, float]) -> dict[str, float]:
    """Δ_En per language: Acc(maps_en) − Acc(<lang>_en_mt), the paper's Table 11.

    How much of the gap to English remains once a language's items are machine-translated into
    English (what translation cannot recover is knowledge, not language). Keys are language codes
    (or any label).
    """
    if not machine_translated:
        raise MetricInputError(
            "`machine_translated` is empty: pass {language: accuracy of <lang>_en_mt}."
        )
    finite_floats("english", [english])
    finite_floats("machine_translated", list(machine_translated.values()))
    return {lang: english - accuracy for lang, accuracy in machine_translated.items()}


def cross_lingual_average(
    per_language: Mapping[str, float], languages: Sequence[str] = CROSS_LINGUAL
) -> float:
    """Plain mean over the non-English languages (de, zh, ru, id, bn), as in the paper's Tables 9
    and 12.
    """
    missing = [lang for lang in languages if lang not in per_language]
    if missing:
        raise MetricInputError(
            f"`per_language` lacks {missing}; the cross-lingual average needs {list(languages)}."
        )
    return math.fsum(per_language[lang] for lang in languages) / len(languages)


# ---------------------------------------------------------------- a run's summary (typed inputs
# from the protocol)


@dataclass(frozen=True)
class ReasonAnswer:
    """One reasoning answer: the item, the chosen and the gold letter, its subset, whether it was
    right for the asked question, and the few-shot demonstration set it was asked with.
    """

    item_id: str
    prediction: str
    label: str
    is_figurative: bool
    correct: bool
    demo_set: int = 0


@dataclass(frozen=True)
class Completion:
    """Whether the continuation of one memorisation template (numbered from 1) completed the item's
    proverb.
    """

    item_id: str
    template: int
    success: bool


def union_flags(completions: Sequence[Completion]) -> dict[str, bool]:
    """{item id: memorised by any template}, in item order."""
    flags: dict[str, bool] = {}
    for c in completions:
        flags[c.item_id] = flags.get(c.item_id, False) or c.success
    return flags


def run_summary(
    answers: Sequence[ReasonAnswer],
    completions: Sequence[Completion],
    *,
    question: str,
    n_templates: int,
    n_sets: int = 0,
    memorised: Mapping[str, bool] | None = None,
) -> dict[str, Any]:
    """A MAPS run's metrics: `maps` accuracy (overall, figurative split, and memorised split when
    `memorised` flags every item), the accuracy of each few-shot demonstration set, and the
    memorisation rates.
    """
    out: dict[str, Any] = {"question": question}
    out.update(
        maps(
            predictions=[a.prediction for a in answers],
            references=[a.label for a in answers],
            negative=[question != "pos"] * len(answers),
            is_figurative=[a.is_figurative for a in answers],
            memorised=None
            if memorised is None
            else [memorised.get(a.item_id, False) for a in answers],
        )
    )
    if n_sets:  # the pooled accuracy is the mean over the equally sized sets
        out["per_set"] = [
            _mean_pct([a.correct for a in answers if a.demo_set == i]) for i in range(n_sets)
        ]
    if completions:
        success = {(c.item_id, c.template): c.success for c in completions}
        templates = range(1, n_templates + 1)
        table = [
            [success.get((item, t), False) for t in templates] for item in union_flags(completions)
        ]
        out["memorisation"] = memorisation_rate(successes=table)
    else:
        out["memorisation"] = None
    return out


def _mean_pct(values: Sequence[bool]) -> float | None:
    return 100.0 * sum(values) / len(values) if values else None
