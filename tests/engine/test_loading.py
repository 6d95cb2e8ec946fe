"""`engine.load`: a model given by name goes to the backend its prefix names (`openai:`, `planted:`, else a Hub id
or folder), its kind known from configs alone, and a name or option that cannot work is one line before weights load.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from culture_probe.engine import (
    LoadOptions,
    ModelArgs,
    load,
    loading,
    model_kind,
    model_parts,
    tokenizer_of,
)
from culture_probe.engine.served import ServedScorer
from culture_probe.errors import (
    InvalidValueError,
    MissingDataError,
    UnknownNameError,
    UnsupportedModelError,
)
from culture_probe.models import save_tiny, train_tokenizer
from culture_probe.models.planted import CHAT_TEMPLATE
from culture_probe.models.planted_benchmarks import PLANTED_SOURCES

TEXTS = ["Egypt is located in Africa .", "Paris is the capital of France ."] * 3
URL = "http://127.0.0.1:9/v1"  # never asked: nothing here sends a request
PLANTED = LoadOptions(sources=PLANTED_SOURCES)  # what the run layer hands the engine


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tokenizer = train_tokenizer(TEXTS, "wordpiece", model_kind="masked", vocab_size=120)
    return save_tiny(
        tmp_path_factory.mktemp("bert") / "bert", "bert", tokenizer, layers=1, hidden=32, heads=2
    )


def test_an_openai_name_is_a_served_causal_model_that_needs_its_url():
    scorer = load(
        "openai:org/m",
        options=LoadOptions(base_url=URL, concurrency=3, request_timeout=5, max_retries=0),
    )
    assert isinstance(scorer, ServedScorer) and scorer.name == "org/m" and scorer.concurrency == 3
    # no cache_dir: no cache
    assert (scorer.timeout, scorer.retries, scorer.cache_path) == (5, 0, None)
    assert model_kind("openai:org/m", options=LoadOptions(base_url=URL)) == "causal"
    # the server holds it
    assert tokenizer_of("openai:org/m", options=LoadOptions(base_url=URL)) is None
    with pytest.raises(
        InvalidValueError, match=r"openai:org/m is a served model: pass the server's --base-url"
    ):
        load("openai:org/m")
    with pytest.raises(UnknownNameError, match="kind of a served model"):
        model_kind("openai:org/m", options=LoadOptions(base_url=URL, kind="masked"))


def test_a_planted_name_has_its_benchmarks_kind_without_training(monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("the kind of a planted model is known without training it")

    monkeypatch.setattr("culture_probe.models.planted_benchmarks.planted_model_dir", never)
    assert model_kind("planted:dlama_arab_west", options=PLANTED) == "masked"
    assert model_kind("planted:xfakt_factual_recall", options=PLANTED) == "causal"
    forced = LoadOptions(kind="causal", sources=PLANTED_SOURCES)
    assert model_kind("planted:dlama_arab_west", options=forced) == "causal"
    with pytest.raises(UnknownNameError, match="dlama_arab_wst"):
        model_kind("planted:dlama_arab_wst", options=PLANTED)


def test_the_engine_knows_no_benchmark_it_is_given_its_model_sources():
    """The engine imported models/ (which knows every benchmark) to load planted:<config>; the run layer now hands the
    source down, and a name with a prefix no source has is one line naming the ones there are."""
    with pytest.raises(UnknownNameError, match="'planted:'.*openai:"):
        model_kind("planted:dlama_arab_west")
    assert "culture_probe.models" not in " ".join(
        line
        for line in Path(loading.__file__).read_text().splitlines()
        if line.lstrip().startswith(("from", "import"))
    )


def test_a_planted_name_loads_the_folder_its_benchmark_trains(bert, tmp_path, monkeypatch):
    asked = []

    def trained(config, *, data_dir=None, **options):
        asked.append((config, data_dir))
        return bert

    monkeypatch.setattr("culture_probe.models.planted_benchmarks.planted_model_dir", trained)
    options = LoadOptions(data_dir=str(tmp_path), cache_dir=tmp_path / "c", sources=PLANTED_SOURCES)
    scorer = load("planted:dlama_arab_west", options=options)
    assert asked == [("dlama_arab_west", str(tmp_path))]
    assert scorer.kind == "masked" and scorer.identity["name_or_path"] == str(bert)
    assert Path(scorer.cache_path).parent == tmp_path / "c"


@pytest.mark.mirror
def test_a_planted_models_tokenizer_and_config_come_from_its_spec_untrained(mirror, monkeypatch):
    # calling it fails
    monkeypatch.setattr("culture_probe.models.planted_benchmarks.planted_model_dir", None)
    tokenizer, config = model_parts("planted:xfakt_factual_recall", options=PLANTED)
    assert tokenizer.chat_template == CHAT_TEMPLATE and config.model_type == "gpt2"


def test_a_folder_loads_as_the_kind_its_config_says(bert):
    assert model_kind(bert) == model_kind(str(bert)) == "masked"
    scorer = load(bert, ModelArgs(dtype="float32"), LoadOptions(batch_tokens=512, device="cpu"))
    assert scorer.kind == "masked" and scorer.batch_tokens == 512 and scorer.cache_path is None
    # a loaded scorer is used as is
    assert load(scorer) is scorer and model_kind(scorer) == "masked"
    tokenizer, config = model_parts(str(bert))
    assert config.model_type == "bert" and tokenizer_of(bert).vocab_size == tokenizer.vocab_size


def test_a_kind_the_model_cannot_load_as_is_refused_naming_its_own(bert):
    with pytest.raises(UnsupportedModelError, match="--kind seq2seq: .* its own kind is masked"):
        model_kind(bert, options=LoadOptions(kind="seq2seq"))
    with pytest.raises(UnknownNameError, match="Unknown model kind 'causl'"):
        LoadOptions(kind="causl")


def test_a_name_that_is_no_folder_nor_hub_id_is_one_line(tmp_path):
    with pytest.raises(MissingDataError, match="does not exist"):
        model_kind(str(tmp_path / "no" / "such model"))
    with pytest.raises(MissingDataError):
        model_parts(str(tmp_path / "missing"))
