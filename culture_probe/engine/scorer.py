"""`Scorer`: the engine's entry point. It finds the backend for a model in one registry, `BACKENDS`
(model kind -> backend class), and builds it: `Scorer(model, tokenizer)` wraps loaded objects,
`Scorer.from_pretrained(name)` loads them. The backends (`causal`, `masked`, `seq2seq`) share
`culture_probe.engine.backend.Backend` and know nothing of this registry, so the modules import one
way: scorer -> backends -> backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from culture_probe.engine import parallel
from culture_probe.engine.backend import Backend, _identity, weight_fingerprint
from culture_probe.engine.causal import CausalScorer
from culture_probe.engine.masked import MaskedScorer
from culture_probe.engine.seq2seq import Seq2SeqScorer
from culture_probe.engine.types import (
    MODEL_KINDS,
    CandidateScores,
    FillMaskOptions,
    GenerateOptions,
    ModelArgs,
    ModelKind,
    ScoreOptions,
    ScoreRequest,
)
from culture_probe.errors import (
    InvalidValueError,
    MissingDataError,
    UnknownNameError,
    UnsupportedModelError,
)

#: model kind -> the backend that scores it (a new backend is one more entry)
BACKENDS: dict[str, type[Backend]] = {
    "causal": CausalScorer,
    "masked": MaskedScorer,
    "seq2seq": Seq2SeqScorer,
}

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def backend_for(kind: str) -> type[Backend]:
    """The backend class of a model kind; an unknown kind lists the valid ones."""
    if kind not in BACKENDS:
        raise UnknownNameError(
            "model kind",
            kind,
            ("auto", *BACKENDS),
            "Example: Scorer.from_pretrained(path, kind='causal').",
        )
    return BACKENDS[kind]


def detect_kind(config: Any, class_name: str | None = None) -> ModelKind:
    """The scoring kind of a model, from its config (architectures, is_encoder_decoder, model_type),
    never from its name.
    """
    # The loaded class is authoritative; else the config's architectures; else its model type.
    names = [class_name] if class_name else list(getattr(config, "architectures", None) or [])
    model_type = getattr(config, "model_type", None)
    for name in names:
        if name.endswith("ForMaskedLM"):
            return "masked"
        if name.endswith(("ForCausalLM", "LMHeadModel")) and not getattr(
            config, "is_encoder_decoder", False
        ):
            return "causal"
        if name.endswith(("ForConditionalGeneration", "ForSeq2SeqLM")) and getattr(
            config, "is_encoder_decoder", False
        ):
            return "seq2seq"
    if not names:
        return _kind_from_type(config, model_type)
    raise UnsupportedModelError(
        f"Model {names[0]!r} (type {model_type!r}) is none of the kinds the engine scores: {', '.join(MODEL_KINDS)}. "
        "Load it with a language-model head (e.g. AutoModelForMaskedLM), or pass kind= if it has one."
    )


def _kind_from_type(config: Any, model_type: str | None) -> ModelKind:
    from transformers.models.auto import modeling_auto as auto

    if (
        getattr(config, "is_encoder_decoder", False)
        and model_type in auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES
    ):
        return "seq2seq"
    if model_type in auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return "masked"
    if model_type in auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return "causal"
    raise UnsupportedModelError(
        f"Model of type {model_type!r} is none of the kinds the engine scores: {', '.join(MODEL_KINDS)}. "
        "Pass kind= one of them if the model has such a head."
    )


def config_kind(
    name_or_path: str | Path,
    *,
    kind: str = "auto",
    revision: str | None = None,
    trust_remote_code: bool = False,
) -> ModelKind:
    """The kind of a model from its config alone (no weights loaded), so a run can build its probes
    and check its options before the model is loaded. `kind` other than "auto" is returned as is
    once checked.
    """
    if kind == "auto":
        return detect_kind(_config(name_or_path, revision, trust_remote_code))
    check_kind(_config(name_or_path, revision, trust_remote_code), kind, name_or_path)
    return kind  # type: ignore[return-value]


def check_kind(config: Any, kind: str, name: str | Path) -> None:
    """A forced kind must be one transformers can load this model as (a BERT loads as causal too; a
    GPT-2 has no masked-LM head): otherwise an error naming the model's own kind.
    """
    import transformers as tf

    auto = getattr(tf, backend_for(kind).auto_class)
    if type(config) not in auto._model_mapping:
        raise UnsupportedModelError(
            f"--kind {kind}: {name} is a {config.model_type} model, which transformers cannot load as {kind} "
            f"({auto.__name__}); its own kind is {detect_kind(config)}. Drop --kind, or pick a model of that kind."
        )


def _config(name_or_path: str | Path, revision: str | None, trust_remote_code: bool) -> Any:
    """The model's transformers config. A name that is no local folder and cannot be a Hub id is
    reported as a missing path; a Hub id the Hub cannot provide (offline, private, misspelt) says
    so, without a traceback.
    """
    import transformers as tf
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    text = str(name_or_path)
    local = Path(text).expanduser().exists()
    if not local:
        try:
            validate_repo_id(text)
        except HFValidationError:
            raise MissingDataError(
                f"Model path {text!r} does not exist. Pass a local model folder or a Hub id "
                "(e.g. bert-base-multilingual-cased)."
            ) from None
    try:
        return tf.AutoConfig.from_pretrained(
            text, revision=revision, trust_remote_code=trust_remote_code
        )
    except OSError as error:
        if local:
            raise
        raise MissingDataError(
            f"Model {text!r} is no local folder, and the Hub could not provide it ({error}). "
            "Check the name, or pass a local model folder."
        ) from None


class ScorerProtocol(Protocol):
    """What a run asks of a model, whatever answers it: a backend that `Scorer` builds, a
    `ServedScorer`, or a stand-in of one's own (tests, a custom engine). A type for annotations,
    checked by mypy; nothing tests it at run time.
    """

    @property
    def kind(self) -> str:
        """One of `MODEL_KINDS`: what the protocols may ask of the model."""
        ...

    identity: dict[str, Any]  # what names the model in config.json and keys its score cache

    def score(
        self, requests: Sequence[ScoreRequest], options: ScoreOptions | None = None, **fields: Any
    ) -> list[CandidateScores]:
        """Log-probabilities of each request's candidates."""
        ...

    def generate(
        self, prompts: Sequence[str], options: GenerateOptions | None = None, **fields: Any
    ) -> list[str]:
        """Continuations of `prompts`."""
        ...

    def fill_mask(
        self, lefts: Sequence[str], options: FillMaskOptions | None = None, **fields: Any
    ) -> Any:
        """The best vocabulary pieces at a mask after each left text (masked models)."""
        ...


class Scorer:
    """Scores candidate fillers with a masked, causal or seq2seq model, and generates.

    `Scorer(model, tokenizer)` and `Scorer.from_pretrained(name_or_path)` build and return the
    backend for the model's kind (`scorer.kind`), which is no subclass of `Scorer`: annotate with
    `ScorerProtocol`.
    """

    def __new__(  # type: ignore[misc]
        cls, model: PreTrainedModel, tokenizer: Any, *, kind: str = "auto", **options: Any
    ) -> Backend:
        """The backend for `model`'s kind (detected from its class and config unless `kind` is
        given).
        """
        kind = detect_kind(model.config, type(model).__name__) if kind == "auto" else kind
        return backend_for(kind)(model, tokenizer, **options)

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | Path,
        *,
        kind: str = "auto",
        device: Any = None,
        torch_dtype: Any = None,
        device_map: Any = None,
        revision: str | None = None,
        batch_tokens: int | None = None,
        cache: str | Path | None = None,
        cache_dir: str | Path | None = None,
        add_bos: bool | None = None,
        trust_remote_code: bool = False,
        model_args: ModelArgs | None = None,
    ) -> Backend:
        """Load a model and its tokenizer (a Hub id or a local folder) and wrap them in the right
        backend.

        `model_args` (`ModelArgs`) holds every loading argument, the harness's way; `torch_dtype`,
        `device_map`, `revision` and `trust_remote_code` are shorthands for its fields.
        """
        import transformers as tf

        args = _merged(
            model_args or ModelArgs(),
            dtype=torch_dtype,
            device_map=device_map,
            revision=revision,
            trust_remote_code=trust_remote_code or None,
        )
        hub = {"revision": args.revision, "trust_remote_code": args.trust_remote_code}
        config = _config(name_or_path, args.revision, args.trust_remote_code)
        kind = detect_kind(config) if kind == "auto" else kind
        backend = backend_for(kind)
        loader = getattr(tf, backend.auto_class)
        extra = {
            k: v
            for k, v in {
                "dtype": args.dtype,
                "device_map": args.device_map,
                "attn_implementation": args.attn_implementation,
                "quantization_config": _quantization(args),
            }.items()
            if v is not None
        }
        model = loader.from_pretrained(name_or_path, config=config, **hub, **extra)
        if args.peft:
            model = _with_adapter(model, args.peft)
        if args.device_map is None and "quantization_config" not in extra:
            model = model.to(parallel.local_device(device))
        tokenizer = tf.AutoTokenizer.from_pretrained(name_or_path, **hub)
        identity = _identity(
            model, tokenizer, name=str(name_or_path), revision=args.revision, hash_weights=False
        )
        identity.update(_loading_identity(args))
        return backend(
            model.eval(),
            tokenizer,
            batch_tokens=batch_tokens,
            cache=cache,
            cache_dir=cache_dir,
            add_bos=add_bos,
            identity=identity,
        )


def _merged(args: ModelArgs, **shorthands: Any) -> ModelArgs:
    """`args` with the shorthand keywords that were given; one given twice with two values is an
    error.
    """
    given = {k: v for k, v in shorthands.items() if v is not None}
    clash = {
        k: (getattr(args, k), v)
        for k, v in given.items()
        if getattr(args, k) not in (None, False, v)
    }
    if clash:
        raise InvalidValueError(
            f"Given twice with different values (model_args and a keyword): {clash}."
        )
    return replace(args, **given)


def _quantization(args: ModelArgs) -> Any:
    """The BitsAndBytesConfig of load_in_8bit/4bit; a clear error when bitsandbytes is missing."""
    if not (args.load_in_8bit or args.load_in_4bit):
        return None
    import importlib.util

    import transformers as tf

    flag = "load_in_8bit" if args.load_in_8bit else "load_in_4bit"
    if importlib.util.find_spec("bitsandbytes") is None:
        raise UnsupportedModelError(
            f"{flag} quantizes through bitsandbytes, which is not installed: pip install "
            "bitsandbytes (it needs a CUDA GPU), or drop the flag."
        )
    return tf.BitsAndBytesConfig(**{flag: True})


def _with_adapter(model: PreTrainedModel, path: str) -> Any:
    """`model` with the LoRA (or other PEFT) adapter in `path` merged into its weights."""
    if not Path(path).is_dir():
        raise MissingDataError(
            f"The PEFT adapter {path!r} is not a folder (expected adapter_config.json and the "
            "adapter weights, as PeftModel.save_pretrained writes them)."
        )
    try:
        from peft import PeftModel
    except ImportError:
        raise UnsupportedModelError("peft= needs the peft library: pip install peft.") from None
    return PeftModel.from_pretrained(model, path).merge_and_unload()


def _loading_identity(args: ModelArgs) -> dict[str, Any]:
    """What of the loading arguments changes the numbers, for the model's identity (and so the cache
    key).
    """
    out: dict[str, Any] = {}
    if args.attn_implementation:
        out["attn_implementation"] = args.attn_implementation
    if args.load_in_8bit or args.load_in_4bit:
        out["quantization"] = "8bit" if args.load_in_8bit else "4bit"
    if args.peft:
        folder = Path(args.peft).resolve()
        out["peft"] = {"path": str(folder), "weight_files": weight_fingerprint(folder)}
    return out
