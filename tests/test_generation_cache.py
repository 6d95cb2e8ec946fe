"""A second run of a generation protocol with the same model and cache folder asks the model
nothing: its texts (X-FaKT answers, MAPS memorisation continuations) come from the score cache, and
its records are the same.
"""

from __future__ import annotations

import pytest
from served_helpers import CHAT_TEMPLATE
from transformers.generation.utils import GenerationMixin

from culture_probe import run
from culture_probe.models import save_tiny, train_tokenizer

TEXTS = [
    "In which country is New York located?",
    "The answer is United States.",
    "a bird in the hand",
] * 3


@pytest.fixture
def model_dir(tmp_path):
    """A tiny causal chat model saved to a folder, as a user's model would be."""
    tok = train_tokenizer(TEXTS, "bpe", model_kind="causal", vocab_size=300)
    tok.chat_template = CHAT_TEMPLATE
    return str(
        save_tiny(tmp_path / "gpt2", "gpt2", tok, layers=1, hidden=32, heads=2, positions=1024)
    )


@pytest.fixture
def asked(monkeypatch) -> list[int]:
    """A list that gets the number of prompts of each `model.generate` call."""
    calls: list[int] = []
    generate = GenerationMixin.generate

    def counted(self, *args, **kwargs):
        calls.append(len(kwargs["input_ids"]))
        return generate(self, *args, **kwargs)

    monkeypatch.setattr(GenerationMixin, "generate", counted)
    return calls


@pytest.mark.parametrize(
    "config,options,folder",
    [
        ("xfakt_factual_recall", {"judge": "string", "max_new_tokens": 8}, None),
        # MAPS is given on request: the mirror keeps the folder a user unpacks
        ("maps_en", {}, "manual/maps"),
    ],
)
def test_a_second_run_asks_the_model_nothing(
    config, options, folder, mirror, model_dir, asked, tmp_path
):
    def probe(**more):
        data = {"data_dir": str(mirror / folder)} if folder else {}
        return run(
            config,
            model_dir,
            limit="smoke",
            cache_dir=tmp_path / "cache",
            progress=False,
            **data,
            **options,
            **more,
        )

    first = probe()
    assert asked, "the first run generated nothing"
    n = sum(asked)
    asked.clear()
    second = probe()
    assert asked == [] and second.records == first.records and second.metrics == first.metrics
    probe(no_cache=True)
    assert sum(asked) == n  # no_cache: every text asked again
