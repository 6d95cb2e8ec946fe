"""`engine.load` and `ModelSpec`: a model given by name goes to the backend its prefix names
(`openai:`, `planted:`, else a Hub id or folder), its kind known from configs alone, and a name or
option that cannot work is one line before weights load.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from culture_probe.engine import (
    LoadOptions,
    ModelArgs,
    ModelSpec,
    load,
    loading,
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
    assert ModelSpec.of("openai:org/m", options=LoadOptions(base_url=URL)).kind() == "causal"
    # the server holds it
    assert ModelSpec.of("openai:org/m", options=LoadOptions(base_url=URL)).tokenizer() is None
    with pytest.raises(
        InvalidValueError, match=r"openai:org/m is a served model: pass the server's --base-url"
    ):
        load("openai:org/m")
    with pytest.raises(UnknownNameError, match="kind of a served model"):
        ModelSpec.of("openai:org/m", options=LoadOptions(base_url=URL, kind="masked")).kind()


def test_a_planted_name_has_its_benchmarks_kind_without_training(monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("the kind of a planted model is known without training it")

    monkeypatch.setattr("culture_probe.models.planted_benchmarks.planted_model_dir", never)
    assert ModelSpec.of("planted:dlama_arab_west", options=PLANTED).kind() == "masked"
    assert ModelSpec.of("planted:xfakt_factual_recall", options=PLANTED).kind() == "causal"
    forced = LoadOptions(kind="causal", sources=PLANTED_SOURCES)
    assert ModelSpec.of("planted:dlama_arab_west", options=forced).kind() == "causal"
    with pytest.raises(UnknownNameError, match="dlama_arab_wst"):
        ModelSpec.of("planted:dlama_arab_wst", options=PLANTED).kind()


def test_the_engine_knows_no_benchmark_it_is_given_its_model_sources():
    """The engine imported models/ (which knows every benchmark) to load planted:<config>; the run
    layer now hands the source down, and a name with a prefix no source has is one line naming the
    ones there are.
    """
    with pytest.raises(UnknownNameError, match="'planted:'.*openai:"):
        ModelSpec.of("planted:dlama_arab_west").kind()
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
    tokenizer, config = ModelSpec.of("planted:xfakt_factual_recall", options=PLANTED).parts()
    assert tokenizer.chat_template == CHAT_TEMPLATE and config.model_type == "gpt2"


def test_a_folder_loads_as_the_kind_its_config_says(bert):
    assert ModelSpec.of(bert).kind() == ModelSpec.of(str(bert)).kind() == "masked"
    scorer = load(bert, ModelArgs(dtype="float32"), LoadOptions(batch_tokens=512, device="cpu"))
    assert scorer.kind == "masked" and scorer.batch_tokens == 512 and scorer.cache_path is None
    # a loaded scorer is used as is
    assert load(scorer) is scorer and ModelSpec.of(scorer).kind() == "masked"
    tokenizer, config = ModelSpec.of(str(bert)).parts()
    assert (
        config.model_type == "bert"
        and ModelSpec.of(bert).tokenizer().vocab_size == tokenizer.vocab_size
    )


def test_a_kind_the_model_cannot_load_as_is_refused_naming_its_own(bert):
    with pytest.raises(UnsupportedModelError, match="--kind seq2seq: .* its own kind is masked"):
        ModelSpec.of(bert, options=LoadOptions(kind="seq2seq")).kind()
    with pytest.raises(UnknownNameError, match="Unknown model kind 'causl'"):
        LoadOptions(kind="causl")


def test_a_name_that_is_no_folder_nor_hub_id_is_one_line(tmp_path):
    with pytest.raises(MissingDataError, match="does not exist"):
        ModelSpec.of(str(tmp_path / "no" / "such model")).kind()
    with pytest.raises(MissingDataError):
        ModelSpec.of(str(tmp_path / "missing")).parts()


def test_a_spec_reads_the_name_once_and_answers_what_a_run_asks_of_it(bert):
    served = ModelSpec.of("openai:org/m", options=LoadOptions(base_url=URL))
    assert served.served and served.served_name == "org/m" and served.source is None
    planted = ModelSpec.of("planted:dlama_arab_west", options=PLANTED)
    assert not planted.served and planted.source[1] == "dlama_arab_west"
    assert planted.label == "planted:dlama_arab_west" and planted.kind() == "masked"
    scorer = load(bert)
    given = ModelSpec.of(scorer)
    # a loaded scorer: named by its folder, its own kind and tokenizer, loaded as is
    assert given.name is None and given.label == str(bert) and given.load() is scorer
    assert given.kind() == "masked" and given.tokenizer() is scorer.tokenizer
    # a suite's model: named as given, answered by the scorer it loaded once
    suite = ModelSpec.of(str(bert), scorer=scorer)
    assert suite.label == str(bert) and suite.load() is scorer


@pytest.mark.parametrize("model", [None, 3, ["bert-base-cased"]])
def test_what_is_no_model_is_refused_naming_what_a_model_is(model):
    with pytest.raises(InvalidValueError, match=r"A model is a Hub id or local folder, .*got"):
        ModelSpec.of(model)
