"""What the thin `evaluate` modules share: their `MetricInfo`, and their base class
(`CultureMetric`).

A module passes the BibTeX of the paper it implements from that paper's one home: the benchmark's
data module (`culture_probe.data.<bench>.CITATION`, which is also its card's `INFO.citation`), or,
for a paper no benchmark carries, the metric's own module (RankC: `metrics.consistency`; the
library's own comparison: `metrics.compare`). Importing the constant, rather than looking the
benchmark up in the registry, keeps a published metric Space self-contained: the string is copied
into it.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any

import datasets
import evaluate

from culture_probe.errors import CultureProbeError, MetricInputError


def metric_info(
    doc: str, citation: str, features: datasets.Features | list[datasets.Features]
) -> evaluate.MetricInfo:
    """The `_info` of a module: its docstring (first paragraph as description), the paper's BibTeX,
    inputs.
    """
    return evaluate.MetricInfo(
        description=doc.strip().split("\n\n")[0],
        citation=citation,
        inputs_description=doc,
        features=features,
    )


class CultureMetric(evaluate.Metric, metaclass=abc.ABCMeta):
    """An `evaluate` module over one of the library's formulas. evaluate reads a batch's format from
    its first item and its length from each column before the formula sees it, so an empty column,
    None, a number, a string (read letter by letter) or columns of two lengths fail inside evaluate
    (an IndexError, a TypeError) or pass unchecked; inputs of that kind go to the formula first,
    whose own checks name the argument, as the library's function does. Abstract, so that
    `evaluate.load`, which takes a module file's first concrete module class, takes the module's
    own.
    """

    @abc.abstractmethod
    def _info(self) -> evaluate.MetricInfo:
        """The module's inputs and documentation (`metric_info`)."""

    @abc.abstractmethod
    def _compute(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The module's formula, called with its inputs and options."""

    def compute(self, **inputs: Any) -> Any:
        """The inputs checked first when nothing was added before (they are then all), then
        evaluate's `compute`.
        """
        names = self._feature_names()
        if self.writer is None:
            options = {key: value for key, value in inputs.items() if key not in names}
            self._check({name: inputs.get(name) for name in names}, options)
        return super().compute(**inputs)

    def add_batch(self, **batch: Any) -> None:
        """The batch checked first, then evaluate's `add_batch`."""
        self._check({name: batch.get(name) for name in self._feature_names()}, {})
        super().add_batch(**batch)

    def _check(self, columns: Mapping[str, Any], options: Mapping[str, Any]) -> None:
        """Nothing, for columns evaluate can batch; else the formula's own error about them, or one
        naming them.
        """
        if _batchable(list(columns.values())):
            return
        try:
            self._compute(**columns, **options)
        except CultureProbeError:
            raise
        except Exception:  # noqa: BLE001, S110 - the line below says what is wrong instead
            pass
        raise MetricInputError(
            f"{self.name}: {', '.join(f'`{name}`' for name in columns)} must be lists of one length, each with at "
            "least one item."
        )


def _batchable(columns: list[Any]) -> bool:
    """Whether every column is a non-empty list (tuple, array) of items, all of one length."""
    lengths = set()
    for column in columns:
        if isinstance(column, (str, bytes, Mapping)) or not hasattr(column, "__getitem__"):
            return False
        try:
            lengths.add(len(column))
        except TypeError:  # no length (a number, a 0-d array)
            return False
    return len(lengths) == 1 and 0 not in lengths
