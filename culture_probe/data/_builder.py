"""The shared base of every benchmark builder: one config class, two hooks, counted corrections.

A benchmark module subclasses `CultureProbeBuilder`, sets `CARD` (its `BenchmarkInfo`) and
`BUILDER_CONFIGS`, and writes `_features()` and `_rows(split)`. Splits, example keys, the dataset
card fields and the tally of corrected or skipped source records (written into `info.description`,
so it survives the `datasets` cache) live here once.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import datasets
from datasets.exceptions import DatasetGenerationError

from culture_probe.data.card import CORRECTED_SUFFIX, BenchmarkInfo
from culture_probe.errors import CultureProbeError


@dataclass(frozen=True)
class Publication:
    """How one config is published (`culture-probe export`/`push`): its name there, the files
    shipped beside its rows, what the dataset card says of it besides the benchmark's card, and its
    languages.
    """

    name: str
    languages: tuple[str, ...]
    files: tuple[tuple[str, bytes], ...] = ()
    about: tuple[str, ...] = ()


Variant = Literal["faithful", "corrected"]
VARIANTS: tuple[str, ...] = ("faithful", "corrected")


@dataclass
class CultureProbeConfig(datasets.BuilderConfig):
    """One loadable config: its languages, the row count the benchmark promises, and faithful or
    corrected data.

    `languages` doubles as a filter: `load_benchmark("dlama_arab_west", languages=["en"])` keeps
    English rows.
    """

    languages: tuple[str, ...] = ()
    rows: int | None = None
    variant: Variant = "faithful"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {self.variant!r}")

    @property
    def corrected(self) -> bool:
        """True for the `_corrected` twin, which applies the library's fixes to known data
        errors.
        """
        return self.variant == "corrected"


def corrected_twin(config: CultureProbeConfig, **changes: Any) -> CultureProbeConfig:
    """The `<name>_corrected` copy of a faithful config (pass `rows=` when corrections drop
    rows).
    """
    description = f"{config.description or ''} Known data errors corrected.".strip()
    name = config.name + CORRECTED_SUFFIX
    changes = {"name": name, "variant": "corrected", "description": description, **changes}
    return dataclasses.replace(config, **changes)


def with_corrected_twins(configs: list[CultureProbeConfig]) -> list[CultureProbeConfig]:
    """The configs followed by their `_corrected` twins (same rows unless a twin is built by
    hand).
    """
    return [*configs, *(corrected_twin(config) for config in configs)]


class CultureProbeBuilder(datasets.GeneratorBasedBuilder):
    """Base builder: subclasses set `CARD` and `BUILDER_CONFIGS` and write `_features` and
    `_rows`.
    """

    BUILDER_CONFIG_CLASS = CultureProbeConfig
    CARD: ClassVar[BenchmarkInfo]
    SPLITS: ClassVar[tuple[str, ...]] = ("test",)
    #: whether `languages=` builds only those languages (a run with --language then reads only its
    #: own files)
    LANGUAGE_FILTER: ClassVar[bool] = False
    config: CultureProbeConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._tally: Counter[str] = Counter()
        super().__init__(*args, **kwargs)

    def _features(self) -> datasets.Features:
        """The typed columns of `self.config`."""
        raise NotImplementedError

    def _rows(self, split: str) -> Iterator[dict[str, Any]]:
        """The rows of one split in source order; `self.tally(...)` every corrected or skipped
        record.
        """
        raise NotImplementedError

    def tally(self, what: str, n: int = 1) -> None:
        """Count a correction or a skipped record (e.g. `"skipped empty sub_label"`); it lands in
        the card.
        """
        self._tally[what] += n

    def _info(self) -> datasets.DatasetInfo:
        card = self.CARD
        return datasets.DatasetInfo(
            description=f"{card.title}. {self.config.description or ''}".strip(),
            features=self._features(),
            citation=card.citation,
            homepage=card.homepage,
            license=card.license,
        )

    def publication(self) -> Publication:
        """The config published under its own name; a builder whose data names itself (a curated
        pair) says more.
        """
        return Publication(self.config.name, tuple(self.config.languages or ()))

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        return [
            datasets.SplitGenerator(name=split, gen_kwargs={"split": split})
            for split in self.SPLITS
        ]

    def _generate_examples(self, split: str) -> Iterator[tuple[int, dict[str, Any]]]:
        """The rows with their keys; a row id seen twice is an error naming both rows (probes,
        records and resumption are keyed by it), as `datasets` does for duplicate keys.
        """
        seen: dict[Any, int] = {}
        for index, row in enumerate(self._rows(split)):
            if "id" in row:
                first = seen.setdefault(row["id"], index)
                if first != index:
                    raise CultureProbeError(
                        f"{self.config.name} ({split}): rows {first} and {index} share the id {row['id']!r}. The "
                        "source repeats a record (a file given twice, a duplicated line): remove the repetition."
                    )
            yield index, row

    def _download_and_prepare(self, dl_manager: Any, verification_mode: Any, **kwargs: Any) -> None:
        self._tally = Counter()
        try:
            super()._download_and_prepare(dl_manager, verification_mode, **kwargs)
        except DatasetGenerationError as error:
            # `datasets` wraps everything raised while generating; our errors already say what and
            # where.
            if isinstance(error.__cause__, CultureProbeError):
                raise error.__cause__ from None
            raise
        if self._tally:
            counted = "; ".join(f"{what}: {n}" for what, n in sorted(self._tally.items()))
            self.info.description = f"{self.info.description}\nCounted while building: {counted}."
