"""Mean word similarity (FmLAMA mWS): how close in meaning a dish's top predictions are to its gold
ingredients.

Thin `evaluate` module over `culture_probe.benchmarks.fmlama.metrics.mws`; formula and source:
docs/metrics.md.

Inputs: `predictions` (ranked pools) and `references` (gold sets). With l gold items, each gold item
takes its best cosine similarity to the top-l predictions; WS is their mean and mWS the mean over
dishes (0-1). Vectors: `embed` (a function or dict from a whole string to its vector), or `vectors`:
a fastText binary model (as in the paper: cc.<language>.300.bin, or a folder holding it; needs `pip
install fasttext-wheel`) or text vectors (.vec). With neither, the model named by the
CULTURE_PROBE_FASTTEXT environment variable. A string without a vector makes its dish NaN, counted
in `n_nan`.

Example (constructed, toy 2-d vectors):
    >>> import culture_probe
    >>> metric = culture_probe.load_metric("mws")
    >>> vectors = {"tofu": [1, 0], "beef": [0.8, 0.6], "rice": [0.6, 0.8], "cheese": [0, 1],
    ...            "flour": [0.6, -0.8], "tomato": [-0.6, 0.8]}
    >>> result = metric.compute(
    ...     predictions=[["tofu", "beef", "rice", "cheese", "tomato", "flour"],
    ...                  ["beef", "cheese", "rice", "tofu", "tomato", "flour"]],
    ...     references=[["tofu", "rice"], ["cheese", "flour", "tomato"]],
    ...     embed=vectors,
    ... )
    >>> round(result["mws"], 4), result["n_nan"]
    (0.79, 0)
"""

import datasets

from culture_probe.benchmarks.fmlama.data import CITATION
from culture_probe.benchmarks.fmlama.metrics import mws, words_needed
from culture_probe.data.vectors import read_vectors
from culture_probe.errors import MetricInputError
from culture_probe.metrics.info import CultureMetric, metric_info


class Mws(CultureMetric):
    """mWS with pluggable word vectors."""

    def _info(self):
        features = {
            "predictions": datasets.Sequence(datasets.Value("string")),
            "references": datasets.Sequence(datasets.Value("string")),
        }
        return metric_info(__doc__, CITATION, datasets.Features(features))

    def _compute(
        self, predictions, references, embed=None, groups=None, vectors=None, language="en"
    ):
        if embed is not None and vectors is not None:
            raise MetricInputError("Pass either `embed` or `vectors`, not both.")
        # the vectors of the strings mWS reads, from a file (or the fastText default)
        if embed is None:
            embed = read_vectors(
                vectors, keep=words_needed(predictions, references), language=language
            )
        return mws(predictions, references, embed=embed, groups=groups)
