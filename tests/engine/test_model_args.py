"""How a model is loaded (`--model-args`, the harness's spelling): parsed and checked before
anything loads, a LoRA adapter made here with `peft` is applied (scores equal the unmerged
PeftModel's, by the slow reference) and kept apart in the cache, quantization without bitsandbytes
is a clear error, and config.json records what was given.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from engine_reference import reference_score, tiny

from culture_probe.engine import ModelArgs, Scorer, ScoreRequest
from culture_probe.errors import (
    InvalidValueError,
    MissingDataError,
    UnknownNameError,
    UnsupportedModelError,
)
from culture_probe.models import save_tiny

REQUEST = ScoreRequest("Egypt is located in", ["Africa", "Asia", "olive oil"])


def test_model_args_are_parsed_the_harness_way_and_checked():
    args = ModelArgs.parse(
        "dtype=bfloat16, trust_remote_code=true,attn_implementation=eager,peft=./a"
    )
    assert args == ModelArgs(
        dtype="bfloat16", trust_remote_code=True, attn_implementation="eager", peft="./a"
    )
    assert args.given() == {
        "dtype": "bfloat16",
        "trust_remote_code": True,
        "attn_implementation": "eager",
        "peft": "./a",
    }
    with pytest.raises(
        UnknownNameError, match="Unknown model argument 'dtyp'.*Did you mean 'dtype'"
    ):
        ModelArgs.parse("dtyp=float16")
    with pytest.raises(
        InvalidValueError, match="trust_remote_code takes true or false, got 'maybe'"
    ):
        ModelArgs.parse("trust_remote_code=maybe")
    with pytest.raises(InvalidValueError, match="--model-args takes KEY=VALUE, got 'float16'"):
        ModelArgs.parse("float16")
    with pytest.raises(InvalidValueError, match="exclude each other"):
        ModelArgs.parse("load_in_8bit=true,load_in_4bit=true")


@pytest.fixture(scope="module")
def adapted(tmp_path_factory):
    """(base model folder, LoRA adapter folder, the unmerged PeftModel, tokenizer)."""
    from peft import LoraConfig, get_peft_model

    root = tmp_path_factory.mktemp("peft")
    _, tok = tiny("gpt2", "bpe")
    base = save_tiny(root / "base", "gpt2", tok, layers=1, hidden=32, heads=4)
    model = Scorer.from_pretrained(base).model
    lora = get_peft_model(
        model, LoraConfig(r=4, target_modules=["c_attn"], init_lora_weights=False)
    )
    lora.save_pretrained(root / "adapter")
    return base, root / "adapter", lora.eval(), tok


def test_a_lora_adapter_changes_the_scores_as_the_adapted_model_does(adapted, tmp_path):
    base, adapter, lora, tok = adapted
    plain = Scorer.from_pretrained(base, cache=tmp_path / "c.sqlite").score([REQUEST])[0]
    scorer = Scorer.from_pretrained(
        base, cache=tmp_path / "c.sqlite", model_args=ModelArgs(peft=str(adapter))
    )
    got = scorer.score([REQUEST])[0]
    # unmerged, slow
    want = [np.sum(reference_score(lora, tok, REQUEST.left, c)) for c in REQUEST.candidates]
    np.testing.assert_allclose(got.sum_logprob, want, atol=1e-5)
    # not served the base model's cached scores
    assert not np.allclose(got.sum_logprob, plain.sum_logprob)
    assert scorer.identity["peft"]["path"] == str(adapter.resolve())


def test_loading_errors_are_named(adapted, tmp_path):
    base, *_ = adapted
    with pytest.raises(MissingDataError, match="PEFT adapter .* is not a folder"):
        Scorer.from_pretrained(base, model_args=ModelArgs(peft=str(tmp_path / "none")))
    if importlib.util.find_spec("bitsandbytes") is None:
        with pytest.raises(
            UnsupportedModelError,
            match="load_in_8bit quantizes through bitsandbytes, which is not installed: pip install bitsandbytes",
        ):
            Scorer.from_pretrained(base, model_args=ModelArgs(load_in_8bit=True))
    with pytest.raises(InvalidValueError, match="Given twice with different values"):
        Scorer.from_pretrained(base, torch_dtype="float32", model_args=ModelArgs(dtype="bfloat16"))
