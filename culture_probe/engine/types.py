"""The engine's contract: what a caller asks (`ScoreRequest`, and the options of each call:
`ScoreOptions`, `GenerateOptions`, `FillMaskOptions`) and what it gets back (`CandidateScores`).

Benchmarks and outside users rely on these names and fields (see docs/engine.md). All are plain
data: requests and options are frozen and hashable, so they double as cache keys and group probes by
engine call; results are returned, never written back into requests.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args

from culture_probe.errors import InvalidValueError, UnknownNameError
from culture_probe.record import CutsJson, TruncationJson
from culture_probe.util.fromtext import from_text
from culture_probe.util.keyvalue import parse_pairs
from culture_probe.util.typecheck import check_types

# numpy loads with the first scores, so that `culture-probe list` starts without it
if TYPE_CHECKING:
    import numpy as np

ModelKind = Literal["causal", "masked", "seq2seq"]
# the model kinds the engine scores, defined once
MODEL_KINDS: tuple[str, ...] = get_args(ModelKind)
# `openai:<name>`: a model asked through an OpenAI-compatible server (engine.served)
SERVED = "openai:"
# The defaults of `--request-timeout` and `--max-retries` for such a server. 120 s lets a loaded
# server finish a long reply (a 1024-token chat answer, FmLAMA's upstream budget) that a shorter
# timeout would cut and ask again whole; 2 retries (the `openai` client's own default, tuned for
# rate limits) bound a server that stalls or trickles to about 6 minutes (each try is bounded whole:
# engine.deadline).
REQUEST_TIMEOUT = 120.0
MAX_RETRIES = 2
ScoreKind = Literal["sum", "mean"]
Ties = Literal["request", "fewer_tokens"]
MaskedMethod = Literal["typed", "l2r"]
Seq2SeqStyle = Literal["sentinel", "plain"]


def check_text(what: str, value: Any) -> None:
    """`value` is a string a tokenizer can take: not None or a number, and valid Unicode (a lone
    surrogate, as from a wrongly decoded file, cannot be encoded).
    """
    if not isinstance(value, str):
        raise InvalidValueError(f"{what} takes a string, got {value!r}.")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidValueError(
            f"{what} holds {value[error.start]!r} at character {error.start}, a lone surrogate that is no Unicode "
            "text: decode the source as UTF-8 (errors='replace' to keep going)."
        ) from None


@functools.lru_cache(maxsize=256)
def _check_candidates(candidates: tuple[str, ...]) -> None:
    """Each candidate is text (checked once per candidate set: a benchmark asks every item the same
    pool).
    """
    for candidate in candidates:
        check_text("ScoreRequest.candidates", candidate)


@functools.lru_cache(maxsize=64)
def code_point_places(candidates: tuple[str, ...]) -> np.ndarray:
    """Each candidate's place in code-point order (equal strings, equal places), once per candidate
    set.
    """
    import numpy as np

    place = {text: i for i, text in enumerate(sorted(set(candidates)))}
    return np.fromiter((place[c] for c in candidates), dtype=np.int64, count=len(candidates))


@functools.lru_cache(maxsize=64)
def candidate_positions(candidates: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    """Each candidate text's indices in `candidates`, once per candidate set."""
    where: dict[str, list[int]] = {}
    for i, text in enumerate(candidates):
        where.setdefault(text, []).append(i)
    return {text: tuple(indices) for text, indices in where.items()}


@functools.lru_cache(maxsize=256)
def _candidates_json(candidates: tuple[str, ...]) -> str:
    """The candidates as `json.dumps` writes them in a request key (once per candidate set)."""
    return json.dumps(list(candidates), ensure_ascii=False)


def check_prompts(prompts: Sequence[str], options: GenerateOptions) -> None:
    """Each `generate` prompt is text, and not empty unless the chat template wraps it (a plain
    empty prompt leaves a model nothing to continue).
    """
    for index, prompt in enumerate(prompts):
        check_text(f"generate(prompts[{index}])", prompt)
        if not prompt and not options.chat:
            raise InvalidValueError(
                f"generate(prompts[{index}]) is empty: a model needs text to continue (or chat=True)."
            )


@dataclass(frozen=True)
class ScoreRequest:
    """Score every candidate as the filler of the slot between `left` and `right`.

    `sep=None` inserts one space between `left` and a candidate unless `left` ends in whitespace or
    its script does not separate words with spaces (CJK, Thai); `sep=""` or `sep=" "` force the
    choice.

    `chat=True` (causal models): `left` is the user turn of the tokenizer's chat template, preceded
    by a `system` turn when one is given, and each candidate is scored as the start of the assistant
    reply (no separator).

    `max_tokens` caps the model input below the model's own limit (a benchmark's fixed truncation,
    e.g. MAPS's 1,024 seq2seq encoder tokens); as with the model's limit, the context is cut on the
    left.

    `candidate_ids` says which token ids score a candidate: `"in_context"` (default) as the
    candidate is tokenized after the left text and separator; `"alone"` as it is tokenized on its
    own (the original DLAMA/FmLAMA probes: `tokenizer.tokenize(candidate)`); `"piece"`: the
    candidate names one vocabulary piece (`convert_tokens_to_ids`, as MAPS's XLM-R probe compared
    the pieces `a`/`b`). The last two reproduce upstream code, for masked and causal models in
    process; seq2seq and served models refuse them.
    """

    left: str
    candidates: tuple[str, ...]
    right: str = ""
    sep: str | None = None
    chat: bool = False
    system: str | None = None
    max_tokens: int | None = None
    candidate_ids: Literal["in_context", "alone", "piece"] = "in_context"

    def __post_init__(self) -> None:
        if self.candidate_ids not in ("in_context", "alone", "piece"):
            raise InvalidValueError(
                f"ScoreRequest.candidate_ids must be 'in_context', 'alone' or 'piece', got {self.candidate_ids!r}."
            )
        # Accept any sequence of candidates but store a tuple, so the request stays hashable.
        if isinstance(self.candidates, str):
            raise InvalidValueError(
                f"ScoreRequest.candidates must be a sequence of strings, not one string "
                f"({self.candidates!r}); e.g. candidates=({self.candidates!r},)."
            )
        if not isinstance(self.candidates, Iterable):
            raise InvalidValueError(
                f"ScoreRequest.candidates takes a list of strings, got {self.candidates!r}."
            )
        for name in ("left", "right"):
            check_text(f"ScoreRequest.{name}", getattr(self, name))
        object.__setattr__(self, "candidates", tuple(self.candidates))
        _check_candidates(self.candidates)
        if self.system is not None and not self.chat:
            raise InvalidValueError(
                f"ScoreRequest(system={self.system!r}) needs chat=True: a system message only "
                "exists in a chat template."
            )

    def key(self) -> str:
        """A stable digest of the request (the cache key's request half): of the JSON list [left,
        candidates, right, sep, and the other fields only where set], so the keys of plain requests
        (and caches built before chat) stay valid; the candidates' JSON is written once per
        candidate set.
        """
        fields: list = [self.right, self.sep]
        if self.chat:
            fields.append({"chat": True, "system": self.system})
        if self.max_tokens is not None:
            fields.append({"max_tokens": self.max_tokens})
        if self.candidate_ids != "in_context":
            fields.append({"candidate_ids": self.candidate_ids})
        # json.dumps([left, candidates, *fields]), item by item, the candidates' JSON written once
        # per set
        items = [json.dumps(self.left, ensure_ascii=False), _candidates_json(self.candidates)]
        payload = f"[{', '.join(items + [json.dumps(f, ensure_ascii=False) for f in fields])}]"
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True, eq=False)
class CandidateScores:
    """Scores of one request's candidates, in the request's candidate order.

    Equal when the candidates, sums and counts are equal (`token_logprobs` is a detail kept on
    request, so it is not compared); unhashable, as its arrays are.
    """

    candidates: tuple[str, ...]
    sum_logprob: np.ndarray
    n_tokens: np.ndarray
    token_logprobs: tuple[np.ndarray, ...] | None = None

    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CandidateScores):
            return NotImplemented
        import numpy as np

        return (
            self.candidates == other.candidates
            and np.array_equal(self.sum_logprob, other.sum_logprob)
            and np.array_equal(self.n_tokens, other.n_tokens)
        )

    @property
    def mean_logprob(self) -> np.ndarray:
        """Sum divided by token count: the papers' "mean-pooled" score."""
        import numpy as np

        mean: np.ndarray = self.sum_logprob / np.maximum(self.n_tokens, 1)
        return mean

    def scores(self, by: ScoreKind = "mean") -> np.ndarray:
        """The score array named by `by` ("mean" or "sum")."""
        if by == "mean":
            return self.mean_logprob
        if by == "sum":
            return self.sum_logprob
        raise UnknownNameError(
            "score kind", by, ("mean", "sum"), "Example: scores.ranking(by='mean')."
        )

    def ranking(self, by: ScoreKind = "mean", *, ties: Ties = "request") -> np.ndarray:
        """Candidate indices, best first. Ties keep request order, or (`ties="fewer_tokens"`, the
        DLAMA and FmLAMA rule) go to the candidate of fewer tokens, then to the first in code-point
        order.
        """
        import numpy as np

        if ties == "fewer_tokens":
            return np.lexsort((code_point_places(self.candidates), self.n_tokens, -self.scores(by)))
        return np.argsort(-self.scores(by), kind="stable")

    def positions(self) -> Mapping[str, tuple[int, ...]]:
        """Where each candidate text is in the request (its indices), worked out once per candidate
        set.
        """
        return candidate_positions(self.candidates)

    def best(self, by: ScoreKind = "mean") -> str:
        """The top-ranked candidate."""
        return self.candidates[int(self.ranking(by)[0])]


@dataclass(frozen=True)
class Cuts:
    """Inputs of one kind fitted to the model's input limit: how many were fitted (`encoded`), how
    many of those were cut on the left (`cut`), and the tokens cut from them in all (`tokens_cut`)
    and from the most cut one (`max_cut`).
    """

    encoded: int = 0
    cut: int = 0
    tokens_cut: int = 0
    max_cut: int = 0

    def add(self, tokens_cut: int) -> Cuts:
        """These counts and one more input, `tokens_cut` tokens shorter than it was (0: kept
        whole).
        """
        return self.plus(Cuts(1, int(tokens_cut > 0), tokens_cut, tokens_cut))

    def plus(self, other: Cuts) -> Cuts:
        """The counts of both (two models of one run: the probed model and a judge)."""
        return Cuts(
            self.encoded + other.encoded,
            self.cut + other.cut,
            self.tokens_cut + other.tokens_cut,
            max(self.max_cut, other.max_cut),
        )

    def to_json(self) -> CutsJson:
        """The counts as metrics.json's `truncation` holds them (`record.CutsJson`)."""
        return {
            "encoded": self.encoded,
            "cut": self.cut,
            "tokens_cut": self.tokens_cut,
            "max_cut": self.max_cut,
        }

    @classmethod
    def from_json(cls, value: CutsJson) -> Cuts:
        """The counts `to_json` wrote."""
        return cls(value["encoded"], value["cut"], value["tokens_cut"], value["max_cut"])


CUT_KINDS = ("contexts", "prompts")


@dataclass(frozen=True)
class Truncation:
    """What a scorer cut on the left to fit its input limit (the model's, or a request's
    `max_tokens`) since the count last began (`Scorer.recording`): the contexts of scored requests
    and fill-mask queries, and generation prompts. Candidates, the right-hand text, special tokens
    and new tokens are never cut (an input that leaves no room for its context is an error instead),
    so they have no count. Every request is counted whether its scores came from the cache or the
    model, so the record does not depend on what the cache held.
    """

    contexts: Cuts = Cuts()
    prompts: Cuts = Cuts()

    def add(self, kind: str, tokens_cut: int) -> Truncation:
        """The record with one more input of `kind` ("contexts" or "prompts")."""
        if kind not in CUT_KINDS:
            raise UnknownNameError("kind of cut input", kind, CUT_KINDS)
        return replace(self, **{kind: getattr(self, kind).add(tokens_cut)})

    def plus(self, other: Truncation) -> Truncation:
        """Both records' counts, kind by kind."""
        return Truncation(*(getattr(self, k).plus(getattr(other, k)) for k in CUT_KINDS))

    @property
    def any_cut(self) -> bool:
        """Whether any input was cut."""
        return any(getattr(self, k).cut for k in CUT_KINDS)

    def to_json(self) -> TruncationJson:
        """{"contexts": {"encoded", "cut", "tokens_cut", "max_cut"}, "prompts": {...}}:
        metrics.json's `truncation` (`record.TruncationJson`).
        """
        return {"contexts": self.contexts.to_json(), "prompts": self.prompts.to_json()}

    @classmethod
    def from_json(cls, value: TruncationJson) -> Truncation:
        """The record `to_json` wrote."""
        return cls(Cuts.from_json(value["contexts"]), Cuts.from_json(value["prompts"]))


# ---------------------------------------------------------------- the options of each engine call


@dataclass(frozen=True)
class ScoreOptions:
    """How `Scorer.score` scores: the rules that change numbers (part of the cache key) and
    `keep_tokens`, which only chooses what is returned (per-token log-probs) and so is left out of
    the cache key.

    `masked_method`: "typed" (mLAMA typed querying) or "l2r" (one mask per subword, left to right;
    masked models). `score_right`: causal models also score the right-hand text as a continuation of
    the candidate. `seq2seq_style`: "sentinel" (the slot is the first sentinel) or "plain" (the left
    text is the encoder input and the candidate the whole target).
    """

    masked_method: MaskedMethod = "typed"
    score_right: bool = False
    seq2seq_style: Seq2SeqStyle = "sentinel"
    keep_tokens: bool = False

    def __post_init__(self) -> None:
        for name, valid in (
            ("masked_method", get_args(MaskedMethod)),
            ("seq2seq_style", get_args(Seq2SeqStyle)),
        ):
            if getattr(self, name) not in valid:
                raise UnknownNameError(name, getattr(self, name), valid)

    def digest(self) -> str:
        """A stable digest of the options that change numbers."""
        rules = {k: v for k, v in asdict(self).items() if k != "keep_tokens"}
        return hashlib.sha256(json.dumps(rules, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class GenerateOptions:
    """How `Scorer.generate` continues prompts: greedy for `max_new_tokens`, or sampled at
    `temperature` with `seed` (each prompt from a seed derived from `seed` and its text).
    `chat=True` applies the model's chat template with each prompt as the user turn, after a
    `system` turn when one is given. The tokenizer adds its special tokens to plain prompts and not
    to chat prompts (their template holds them) unless `add_special_tokens` says otherwise. A prompt
    stops at the model's end of sequence, after `max_new_tokens`, or at the first of the `stop`
    strings, which is cut off with whatever follows it (as OpenAI-style APIs do).
    """

    max_new_tokens: int
    chat: bool = False
    system: str | None = None
    temperature: float | None = None
    seed: int | None = None
    add_special_tokens: bool | None = None
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise InvalidValueError(
                f"max_new_tokens must be a whole number >= 1, got {self.max_new_tokens!r}."
            )
        if isinstance(self.stop, str) or not all(isinstance(s, str) and s for s in self.stop):
            raise InvalidValueError(
                f"generate(stop={self.stop!r}): give a list of non-empty strings."
            )
        # hashable: probes are grouped by their options
        object.__setattr__(self, "stop", tuple(self.stop))
        if self.system is not None and not self.chat:
            raise InvalidValueError(
                f"generate(system={self.system!r}) needs chat=True: a system message only exists in a chat template."
            )
        if self.temperature is None:
            if self.seed is not None:
                raise InvalidValueError(
                    f"generate(seed={self.seed!r}) without temperature=: greedy decoding draws "
                    "nothing at random; pass temperature= to sample."
                )
            return
        if not self.temperature > 0:
            raise InvalidValueError(
                f"generate(temperature={self.temperature!r}): the temperature must be > 0 (None: greedy)."
            )
        if self.seed is None:
            raise InvalidValueError(
                f"generate(temperature={self.temperature!r}) needs seed=: sampling without a "
                "seed could not be repeated."
            )


@dataclass(frozen=True)
class FillMaskOptions:
    """How `Scorer.fill_mask` reads one mask: the separator rule between the left text and the mask
    (`sep`, as in `ScoreRequest`) and how many vocabulary pieces to return (`top_k`).
    """

    sep: str | None = None
    top_k: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.top_k, int) or self.top_k < 1:
            raise InvalidValueError(f"fill_mask needs top_k >= 1, got {self.top_k!r}.")


Options = TypeVar("Options", ScoreOptions, GenerateOptions, FillMaskOptions)


# what transformers' from_pretrained takes, checked before any weights load
ATTENTION = ("eager", "sdpa", "flash_attention_2", "flash_attention_3", "flex_attention")
DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")
DEVICE = re.compile(r"(cpu|cuda|mps|xpu|npu|hpu|meta)(:\d+)?")


@dataclass(frozen=True)
class ModelArgs:
    """How `Scorer.from_pretrained` loads a model: lm-evaluation-harness's `--model_args` spelling
    (`ModelArgs.parse("dtype=bfloat16,peft=./adapter")`). `load_in_8bit`/`load_in_4bit` quantize
    through transformers' `BitsAndBytesConfig` (bitsandbytes, a CUDA GPU); `peft` is a LoRA adapter
    folder, merged into the weights. Whatever changes a number is part of the model's identity, so
    the score cache keeps them apart. The only home of these arguments: those marked `shorthand`
    also have a run flag and keyword (`--dtype`).
    """

    dtype: str | None = field(
        default=None,
        metadata={"shorthand": True, "help": "torch dtype, e.g. float16", "metavar": "T"},
    )
    revision: str | None = field(
        default=None,
        metadata={
            "shorthand": True,
            "help": "Hub revision of --model (branch, tag or commit), kept in config.json",
            "metavar": "REV",
        },
    )
    trust_remote_code: bool = False
    device_map: str | None = None
    attn_implementation: str | None = None
    load_in_8bit: bool = False
    load_in_4bit: bool = False
    peft: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.peft, os.PathLike):  # an adapter folder given as a Path
            object.__setattr__(self, "peft", os.fspath(self.peft))
        # ModelArgs(...) from Python is checked as the parsed text is
        check_types(self, flag="--model-args")
        check_dtype(self.dtype)
        if self.load_in_8bit and self.load_in_4bit:
            raise InvalidValueError("load_in_8bit and load_in_4bit exclude each other: pick one.")
        attn, device_map = self.attn_implementation, self.device_map
        # "/": a kernel from the Hub
        if attn is not None and attn not in ATTENTION and "/" not in attn:
            raise UnknownNameError(
                "attn_implementation", attn, ATTENTION, "Or a Hub kernel, owner/name."
            )
        if device_map is not None and not (
            device_map in DEVICE_MAPS or DEVICE.fullmatch(str(device_map))
        ):
            raise UnknownNameError(
                "device_map", str(device_map), DEVICE_MAPS, "Or one device, e.g. cuda:0 or cpu."
            )

    @classmethod
    def parse(cls, text: str) -> ModelArgs:
        """`key=value,key=value` (booleans as true/false) -> ModelArgs; an unknown key lists the
        valid ones.
        """
        names = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        pairs = parse_pairs(
            text, what="--model-args", example="dtype=bfloat16,trust_remote_code=true"
        )
        for key, value in pairs.items():
            if key not in names:
                raise UnknownNameError("model argument", key, names)
            boolean = names[key].type in ("bool", bool)
            values[key] = (
                from_text(value, bool, name=key, flag="--model-args") if boolean else value
            )
        return cls(**values)

    def given(self) -> dict[str, Any]:
        """The arguments that differ from the defaults (what config.json records)."""
        return {k: v for k, v in asdict(self).items() if v != getattr(ModelArgs, k)}


def check_dtype(name: str | None) -> None:
    """A dtype must name a torch dtype (or "auto"): ModelArgs checks it when made, from `--dtype`,
    `--model-args` or Python alike, before any data or model loads.
    """
    if name is None or name == "auto":
        return
    import torch  # deferred: only a dtype that is given needs it

    if not isinstance(getattr(torch, name, None), torch.dtype):
        raise InvalidValueError(
            f"dtype {name!r} is not a torch dtype: use float32, float16 or bfloat16 (or auto)."
        )


def make_options(
    kind: type[Options], options: Options | None, values: Mapping[str, Any]
) -> Options:
    """`options` as given, or built from keyword `values` (`score(reqs, masked_method="l2r")`); not
    both.
    """
    if options is not None:
        if values:
            raise InvalidValueError(
                f"Pass either a {kind.__name__} or its fields as keywords, not both (got both and {', '.join(values)})."
            )
        if not isinstance(options, kind):
            raise InvalidValueError(
                f"Expected a {kind.__name__}, got {type(options).__name__}: {options!r}."
            )
        return options
    valid = [f.name for f in fields(kind)]
    for name in values:
        if name not in valid:
            raise UnknownNameError(f"field of {kind.__name__}", name, valid)
    try:
        return kind(**values)
    except TypeError as error:  # a required field left out
        raise InvalidValueError(f"{kind.__name__}: {error}.") from None
