"""Word vectors for FmLAMA's mWS, read from files: fastText's binary models (as in the paper) or
text `.vec` files. Reading happens here, in the data layer, so the metric itself is a pure function
of the vectors it gets.

The protocol declares the vectors as a resource (`fmlama`'s `RESOURCES["vectors"]`); what that gives
is a `WordVectors`, which reads only the strings a run needs, after the engine has ranked (so a 7 GB
model is opened once, at the metrics step).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from culture_probe.errors import MetricInputError, MissingDataError

Embed = Callable[[str], Any]
FASTTEXT_ENV = "CULTURE_PROBE_FASTTEXT"  # path of a cc.<lang>.300.bin, or of a folder holding them
FASTTEXT_URL = "https://fasttext.cc/docs/en/crawl-vectors.html"


@dataclass(frozen=True)
class WordVectors:
    """The vectors file of one language, read on demand (`lookup`) for the strings a run needs."""

    path: str
    language: str

    def lookup(self, keep: set[str]) -> dict[str, np.ndarray]:
        """{string: vector} for the strings of `keep` (those the file has)."""
        return read_vectors(self.path, keep=keep, language=self.language)


def vectors_resource(
    *, data_dir: str | None = None, corrected: bool = False, path: str, language: str
) -> tuple[WordVectors, list[Path]]:
    """The `vectors` resource: the file is checked now (before any scoring), read later
    (`WordVectors.lookup`).
    """
    file = vectors_file(path, language)
    if not file.is_file():
        raise MissingDataError(
            f"The mWS vectors file {str(file)!r} does not exist: pass --option vectors= a "
            "fastText cc.<lang>.300.bin (or the folder holding it) or a text .vec file."
        )
    return WordVectors(str(file), language), [file]


def load_text_vectors(path: str | Path, keep: set[str] | None = None) -> dict[str, np.ndarray]:
    """Read word vectors from a text file in fastText's `.vec` format (optional "count dim" header
    line).

    A key may contain spaces (the last `dim` fields are the vector), so a file of whole-string
    vectors precomputed with fastText's `get_word_vector` works too. `keep` reads only the strings a
    metric needs, so a 2-million-word file does not have to fit in memory.
    """
    vectors: dict[str, np.ndarray] = {}
    dim = None
    with open(path, encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            fields = line.rstrip("\n").rstrip(" ").split(" ")
            if line_number == 1 and len(fields) == 2 and all(f.isdigit() for f in fields):
                dim = int(fields[1])
                continue
            if dim is None:
                dim = _trailing_numbers(fields)
            if len(fields) <= dim:
                raise MetricInputError(f"{path}:{line_number}: expected a key and {dim} numbers.")
            key = " ".join(fields[:-dim])
            if keep is None or key in keep:
                vectors[key] = np.asarray(fields[-dim:], dtype=np.float64)
    return vectors


def _trailing_numbers(fields: list[str]) -> int:
    count = 0
    for field in reversed(fields[1:]):
        try:
            float(field)
        except ValueError:
            break
        count += 1
    return count


def vectors_file(vectors: str | Path, language: str) -> Path:
    """The vectors file `vectors` names: itself, or the `cc.<language>.300.bin` inside it when it is
    a folder.
    """
    return Path(vectors) / f"cc.{language}.300.bin" if Path(vectors).is_dir() else Path(vectors)


def fasttext_vectors(path: str | Path | None = None, *, language: str = "en") -> Embed:
    """The paper's vectors: fastText's `get_word_vector` on the whole string, from a binary
    `cc.<lang>.300.bin`.

    `path` is the `.bin` model or a folder holding `cc.<language>.300.bin`; without it, the
    environment variable CULTURE_PROBE_FASTTEXT (read at call time) gives one of the two. Nothing is
    downloaded: the model is 7 GB. Needs the optional `fasttext` module (`pip install
    fasttext-wheel`, or `culture-probe[fasttext]`).
    """
    name = f"cc.{language}.300.bin"
    fix = (
        f"download {name} from {FASTTEXT_URL} and pass vectors='path/to/{name}' (or a folder holding it), "
        f"or set {FASTTEXT_ENV} to that path; or pass embed= a function from a string to its vector."
    )
    location = path if path is not None else os.environ.get(FASTTEXT_ENV)
    if not location:
        raise MetricInputError(
            f"mWS uses fastText vectors by default (as the paper), but no model was given: {fix}"
        )
    model = vectors_file(location, language)
    if not model.is_file():
        raise MetricInputError(f"fastText model {str(model)!r} does not exist: {fix}")
    try:
        fasttext = importlib.import_module("fasttext")
    except ImportError:
        raise MetricInputError(
            f"Reading {str(model)!r} needs the `fasttext` module, which is not installed: run "
            "`pip install fasttext-wheel` (or `pip install culture-probe[fasttext]`), or pass embed=."
        ) from None
    return fasttext.load_model(str(model)).get_word_vector


def read_vectors(
    vectors: str | Path | None, *, keep: set[str], language: str = "en"
) -> dict[str, np.ndarray]:
    """The vectors of the strings in `keep`: from a fastText binary model (`.bin`, or a folder
    holding `cc.<language>.300.bin`; None: `fasttext_vectors`' default) or from text vectors (any
    other file).
    """
    if vectors is None or Path(vectors).is_dir() or Path(vectors).suffix == ".bin":
        vector = fasttext_vectors(vectors, language=language)
        return {text: np.asarray(vector(text)) for text in keep}
    # no vectors for strings it lacks: multi-word items become NaN
    return load_text_vectors(vectors, keep=keep)
