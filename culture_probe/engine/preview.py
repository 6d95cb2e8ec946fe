"""What a model will be given, without the model: each request, prompt or masked input encoded by
the backends' own steps from the tokenizer and the model's config alone (`culture-probe run
--dry-run`, docs/dry-run.md).

A backend encodes with its tokenizer and reads two things of its model to do so: the config's input
limit and, for seq2seq models, the decoder's start token. A backend built around
`Weightless(config)` therefore runs exactly the encoding a run runs (`_prepare`, the fill-mask
input, the generation prompt), fails as a run would on a model it cannot serve, and cannot score. A
served model's requests are recorded by a client that sends nothing.
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Literal, cast

from culture_probe.engine.backend import Backend, batch_sizes
from culture_probe.engine.causal import CausalItem
from culture_probe.engine.generation import prompt_ids, prompt_texts
from culture_probe.engine.masked import MaskedItem, MaskedScorer
from culture_probe.engine.seq2seq import Seq2SeqItem, Seq2SeqScorer
from culture_probe.engine.types import FillMaskOptions, GenerateOptions, ScoreOptions, ScoreRequest
from culture_probe.errors import UnsupportedModelError

# candidates (or served requests) a view's text shows; the view itself holds them all
SHOWN_CANDIDATES = 5
#: candidates whose tokens a workload counts exactly; beyond it, on a seeded sample of its requests:
#: preparing a candidate takes 30-100 microseconds on a 2-core machine, so a full FmLAMA run's 33
#: million would take an hour
COUNTED_CANDIDATES = 50_000

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@dataclass(frozen=True)
class Weightless:
    """A model's config without its weights: all that a backend reads of its model to encode, and
    the device a run would put it on (what its batch budget and a time estimate depend on).
    """

    config: Any

    def parameters(self) -> Any:
        """One empty tensor on the device `Scorer.from_pretrained` would choose (`Backend.device`
        reads it).
        """
        import torch

        from culture_probe.engine.parallel import local_device

        yield torch.empty(0, device=local_device(None))


@dataclass(frozen=True)
class Tokens:
    """Token ids with their vocabulary pieces (`readable_pieces`) and the text they decode to
    (special tokens kept).
    """

    ids: tuple[int, ...]
    pieces: tuple[str, ...]
    text: str

    @classmethod
    def of(cls, tokenizer: Any, ids: Sequence[int]) -> Tokens:
        """The ids as `tokenizer` writes and decodes them."""
        ids = [int(i) for i in ids]
        pieces = readable_pieces(tokenizer, tokenizer.convert_ids_to_tokens(ids))
        return cls(tuple(ids), pieces, tokenizer.decode(ids))

    def lines(self, name: str) -> list[str]:
        """`name`: the decoded text, then the ids and the pieces."""
        return [
            f"{name} ({len(self.ids)} tokens): {self.text!r}",
            f"  ids {list(self.ids)}",
            f"  pieces {list(self.pieces)}",
        ]


def readable_pieces(tokenizer: Any, pieces: Sequence[str]) -> tuple[str, ...]:
    """Vocabulary pieces as a reader reads them. A byte-level BPE vocabulary (GPT-2, Llama 3, Qwen)
    writes each byte as a stand-in character, so that an Arabic piece reads 'Ø§Ù': such a piece is
    shown as the text its bytes are, with a byte that is part of a character split across pieces as
    <0xD9> (as SentencePiece's byte pieces are written); a piece holding a character outside the
    byte table (an added token) is shown as it is. Other vocabularies' pieces are text already.
    """
    if not _byte_level(tokenizer):
        return tuple(pieces)
    table = _bytes_of_characters()
    return tuple(
        _utf8_text(bytes(table[c] for c in piece)) if all(c in table for c in piece) else piece
        for piece in pieces
    )


def _byte_level(tokenizer: Any) -> bool:
    """Whether the tokenizer's vocabulary is byte-level BPE: its decoder maps characters back to
    bytes.
    """
    from tokenizers import decoders

    decoder = getattr(getattr(tokenizer, "backend_tokenizer", None), "decoder", None)
    return isinstance(decoder, decoders.ByteLevel) or hasattr(tokenizer, "byte_decoder")


@functools.cache
def _bytes_of_characters() -> dict[str, int]:
    """The byte each stand-in character of a byte-level BPE vocabulary writes (GPT-2's table, as
    transformers converts such vocabularies with it).
    """
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    return {character: byte for byte, character in bytes_to_unicode().items()}


def _utf8_text(data: bytes) -> str:
    """`data` as UTF-8 text, each byte that is no part of a whole character written <0xNN>."""
    text, rest = [], data
    while rest:
        try:
            text.append(rest.decode("utf-8"))
            break
        except UnicodeDecodeError as cut:
            text.append(rest[: cut.start].decode("utf-8"))
            text.append("".join(f"<0x{byte:02X}>" for byte in rest[cut.start : cut.end]))
            rest = rest[cut.end :]
    return "".join(text)


@dataclass(frozen=True)
class ModelInput:
    """One sequence the model runs and what is read from it: `reads[j] = (position, token id)`, the
    log-prob of the token in the prediction at that position (causal: the position before the token;
    masked: its mask; seq2seq: the decoder position before it).
    """

    tokens: Tokens
    reads: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class CandidateView:
    """One candidate: the tokens whose log-probs make its score, and the model inputs they are read
    from (causal: the context and the candidate; masked: the sentence with its masks, one input per
    subword under `l2r`; seq2seq: the decoder input, the encoder input being the request's
    `context`).
    """

    text: str
    scored: Tokens
    inputs: tuple[ModelInput, ...]


@dataclass(frozen=True)
class ScoreView:
    """A scoring request as the model gets it: `context` (causal: the context after special tokens,
    chat template and separator rule; seq2seq: the encoder input; None for masked models, whose
    inputs hold the masks inside the sentence), each candidate, and the tokens cut on the left of
    the context to fit the input limit (`cut`).
    """

    request: ScoreRequest
    options: ScoreOptions
    kind: str
    context: Tokens | None
    candidates: tuple[CandidateView, ...]
    cut: int = 0

    def lines(self) -> list[str]:
        """The view as text: the context, then the first candidates."""
        out = [f"score {len(self.candidates)} candidates ({_score_rule(self.kind, self.options)})"]
        if self.context is not None:
            cut = f", {self.cut} tokens cut on the left" if self.cut else ""
            out += self.context.lines(f"context{cut}")
        for n, cand in enumerate(self.candidates[:SHOWN_CANDIDATES], 1):
            out.append(
                f"candidate {n} {cand.text!r}: scored ids {list(cand.scored.ids)} {list(cand.scored.pieces)}"
            )
            context = self.context.ids if self.context is not None else ()
            for model_input in cand.inputs:
                # a causal input says nothing new
                if model_input.tokens.ids != context + cand.scored.ids:
                    out.append(f"  input {model_input.tokens.text!r}")
                    out.append(f"    ids {list(model_input.tokens.ids)}")
        return out + _more(len(self.candidates), "candidates")


@dataclass(frozen=True)
class GenerateView:
    """A generation prompt as the model gets it: the text (chat template applied when the options
    ask for it), its ids (special tokens added or not, cut on the left to fit the input limit: `cut`
    tokens), and the options.
    """

    prompt: str
    tokens: Tokens
    options: GenerateOptions
    cut: int = 0

    def lines(self) -> list[str]:
        """The view as text: the rendered prompt, its ids, the generation options."""
        cut = f", {self.cut} tokens cut on the left" if self.cut else ""
        out = [f"generate ({_generation_rule(self.options)})", f"prompt: {self.prompt!r}"]
        return out + self.tokens.lines(f"prompt ids{cut}")[1:]


@dataclass(frozen=True)
class FillMaskView:
    """A fill-mask input as the model gets it: the ids with one mask at `mask` (the vocabulary's
    best pieces there are the answer).
    """

    tokens: Tokens
    mask: int
    options: FillMaskOptions

    def lines(self) -> list[str]:
        """The view as text: the masked input and where its mask is."""
        head = f"fill the mask at position {self.mask} (top {self.options.top_k} vocabulary pieces)"
        return [head, *self.tokens.lines("input")]


@dataclass(frozen=True)
class ServedCall:
    """One request to an OpenAI-compatible server: the endpoint and the JSON body the client would
    send.
    """

    endpoint: Literal["completions", "chat.completions"]
    body: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ServedView:
    """What a served model (`openai:NAME`) would be sent for one probe: one call per candidate
    (scoring) or one call (generation). The server tokenizes, so there are no ids to show.
    """

    calls: tuple[ServedCall, ...]

    def lines(self) -> list[str]:
        """The view as text: each request's endpoint and body."""
        out = [
            f"POST /{c.endpoint.replace('.', '/')} {json.dumps(c.body, ensure_ascii=False)}"
            for c in self.calls
        ]
        return out[:SHOWN_CANDIDATES] + _more(len(self.calls), "requests")


View = ScoreView | GenerateView | FillMaskView | ServedView


@dataclass(frozen=True)
class Workload:
    """What probes put through a model: `probes` asked, `candidates` scored, and `tokens`, the
    tokens the backend runs for them (its own `_cost`: a causal request's context and the inner
    nodes of its candidate trie, so candidates that share a prefix share its tokens; a masked
    request's queries; a seq2seq request's encoder and decoder inputs; a generation prompt and its
    new tokens at most; a fill-mask input), each distinct request once, as an empty score cache runs
    them. None for a served model: its server tokenizes. What a time estimate counts besides
    (`culture_probe.throughput`): `reads`, the positions scoring runs the LM head at; `generated`,
    the part of `tokens` that generation runs (its prompts and new tokens: a forward pass per new
    token, at another rate than scoring's), `new` of them new (the LM head runs at each) in at most
    `steps` forward passes.
    """

    probes: int = 0
    candidates: int = 0
    tokens: int | None = 0
    # False: `tokens` scaled up from a sample of the requests (`COUNTED_CANDIDATES`)
    exact: bool = True
    reads: int = 0
    generated: int = 0
    new: int = 0
    steps: int = 0

    def __add__(self, other: Workload) -> Workload:
        tokens = None if self.tokens is None or other.tokens is None else self.tokens + other.tokens
        return Workload(
            self.probes + other.probes,
            self.candidates + other.candidates,
            tokens,
            self.exact and other.exact,
            self.reads + other.reads,
            self.generated + other.generated,
            self.new + other.new,
            self.steps + other.steps,
        )


def counted_sample(requests: Sequence[ScoreRequest]) -> list[ScoreRequest]:
    """All of `requests` when they hold at most `COUNTED_CANDIDATES` candidates, else a seeded
    random sample of them that holds that many (the same sample for the same requests).
    """
    if sum(len(r.candidates) for r in requests) <= COUNTED_CANDIDATES:
        return list(requests)
    sample, held = [], 0
    for i in random.Random(0).sample(range(len(requests)), len(requests)):
        sample.append(requests[i])
        held += len(requests[i].candidates)
        if held >= COUNTED_CANDIDATES:
            break
    return sample


class EncodingPreview:
    """Previews of what an in-process backend (`scorer`) feeds its model, built by the backend's own
    encoding code.
    """

    def __init__(self, scorer: Backend):
        self.scorer = scorer

    @classmethod
    def weightless(
        cls, kind: str, tokenizer: Any, config: Any, *, name: str = ""
    ) -> EncodingPreview:
        """The preview of a `kind` model from its tokenizer and its transformers config (no
        weights).
        """
        from culture_probe.engine.scorer import backend_for

        # the backend reads of its model only what Weightless has (its config, the device of its
        # parameters)
        model = cast("PreTrainedModel", Weightless(config))
        return cls(backend_for(kind)(model, tokenizer, identity={"name_or_path": name}))

    def score(self, requests: Sequence[ScoreRequest], options: ScoreOptions) -> list[ScoreView]:
        """How `Scorer.score(requests, options)` encodes each request."""
        options = self.scorer._check_options(options)
        views = []
        for request in requests:
            before = self._cut()
            item = self.scorer._prepare(request, options)
            context, candidates = _CANDIDATES[self.scorer.kind](self.scorer, request, item, options)
            kind = self.scorer.kind
            views.append(
                ScoreView(request, options, kind, context, tuple(candidates), self._cut() - before)
            )
        return views

    def generate(self, prompts: Sequence[str], options: GenerateOptions) -> list[GenerateView]:
        """How `Scorer.generate(prompts, options)` renders and encodes each prompt."""
        texts, specials = prompt_texts(self.scorer, list(prompts), options)
        views = []
        for text in texts:
            before = self._cut()
            (ids,) = prompt_ids(self.scorer, [text], specials, options.max_new_tokens)
            views.append(
                GenerateView(
                    text, Tokens.of(self.scorer.tokenizer, ids), options, self._cut() - before
                )
            )
        return views

    def fill_mask(self, lefts: Sequence[str], options: FillMaskOptions) -> list[FillMaskView]:
        """How `Scorer.fill_mask(lefts, options)` builds each masked input."""
        scorer = self.scorer
        if not isinstance(scorer, MaskedScorer):
            raise UnsupportedModelError(
                f"fill_mask needs a masked model; this one is {scorer.kind}."
            )
        views = []
        for left in lefts:
            ids, mask = scorer._mask_input(left, "", options.sep)
            views.append(FillMaskView(Tokens.of(scorer.tokenizer, ids), mask, options))
        return views

    def score_workload(self, requests: Sequence[ScoreRequest], options: ScoreOptions) -> Workload:
        """What `Scorer.score(requests, options)` runs: each distinct request (by its cache key)
        prepared by the backend and counted by the backend's own `_cost`, as its batches count it.
        Beyond `COUNTED_CANDIDATES` candidates, the requests counted are a seeded random sample of
        them holding that many, and the tokens are scaled up by the candidates (`Workload.exact` is
        False).
        """
        options = self.scorer._check_options(options)
        distinct = list({self.scorer._key(r): r for r in requests}.values())
        counted = counted_sample(distinct)
        items = self.scorer._prepare_all(counted, options)
        tokens = sum(self.scorer._cost(item) for item in items)
        reads = sum(self.scorer._reads(item) for item in items)
        scale = sum(len(r.candidates) for r in distinct) / max(
            sum(len(r.candidates) for r in counted), 1
        )
        exact = len(counted) == len(distinct)
        if not exact:
            tokens, reads = round(tokens * scale), round(reads * scale)
        candidates = sum(len(r.candidates) for r in requests)
        return Workload(len(requests), candidates, tokens, exact, reads)

    def generate_workload(self, prompts: Sequence[str], options: GenerateOptions) -> Workload:
        """What `Scorer.generate(prompts, options)` runs at most: each distinct prompt's ids and
        `max_new_tokens`.
        """
        texts, specials = prompt_texts(self.scorer, list(prompts), options)
        ids = prompt_ids(self.scorer, list(dict.fromkeys(texts)), specials, options.max_new_tokens)
        new = options.max_new_tokens
        costs = {i: len(row) + new for i, row in enumerate(ids)}
        tokens = sum(costs.values())
        # the batches generation forms (`Backend.batches`), each a forward pass per new token
        batches = len(batch_sizes(costs, self.scorer.budget()))
        return Workload(len(prompts), 0, tokens, True, 0, tokens, len(ids) * new, batches * new)

    def fill_mask_workload(self, lefts: Sequence[str], options: FillMaskOptions) -> Workload:
        """What `Scorer.fill_mask(lefts, options)` runs: one masked input per text."""
        tokens = sum(len(view.tokens.ids) for view in self.fill_mask(lefts, options))
        return Workload(len(lefts), 0, tokens, True, len(lefts))

    def _cut(self) -> int:
        """Tokens cut so far by the backend's encoder (contexts and prompts)."""
        record = self.scorer.truncation
        return record.contexts.tokens_cut + record.prompts.tokens_cut


def _causal(
    backend: Backend, request: ScoreRequest, item: CausalItem, options: ScoreOptions
) -> tuple[Tokens, list[CandidateView]]:
    """Causal: each candidate (with the right text when it is scored) continues the context."""
    tok, context = backend.tokenizer, item.context
    views = []
    for text, path in zip(request.candidates, item.trie.paths.tuples(), strict=True):
        seq = tuple(int(item.tokens[node]) for node in path)
        reads = tuple((len(context) - 1 + j, token) for j, token in enumerate(seq))
        views.append(
            CandidateView(
                text, Tokens.of(tok, seq), (ModelInput(Tokens.of(tok, context + seq), reads),)
            )
        )
    return Tokens.of(tok, context), views


def _masked(
    backend: Backend, request: ScoreRequest, item: MaskedItem, options: ScoreOptions
) -> tuple[None, list[CandidateView]]:
    """Masked: each candidate's subwords are read at the masks of the queries that hold them."""
    tok = backend.tokenizer
    inputs: list[list[ModelInput]] = [[] for _ in request.candidates]
    subwords: list[dict[int, int]] = [{} for _ in request.candidates]
    for query in item.queries():
        reads: dict[int, list[tuple[int, int]]] = {}
        for position, cand, sub, token in query.reads:
            reads.setdefault(cand, []).append((position, token))
            subwords[cand][sub] = token
        tokens = Tokens.of(tok, query.ids)
        for cand, pairs in reads.items():
            inputs[cand].append(ModelInput(tokens, tuple(pairs)))
    views = [
        CandidateView(text, Tokens.of(tok, [subs[i] for i in sorted(subs)]), tuple(ins))
        for text, ins, subs in zip(request.candidates, inputs, subwords, strict=True)
    ]
    return None, views


def _seq2seq(
    backend: Backend, request: ScoreRequest, item: Seq2SeqItem, options: ScoreOptions
) -> tuple[Tokens, list[CandidateView]]:
    """Seq2seq: the encoder input is shared; each candidate is the decoder's target after its
    lead.
    """
    assert isinstance(backend, Seq2SeqScorer)
    tok, lead = backend.tokenizer, backend.decoder_lead(options)
    views = []
    for text, cand in zip(request.candidates, item.candidates.tuples(), strict=True):
        reads = tuple((len(lead) - 1 + j, token) for j, token in enumerate(cand))
        decoder = ModelInput(Tokens.of(tok, lead + cand[:-1]), reads)
        views.append(CandidateView(text, Tokens.of(tok, cand), (decoder,)))
    return Tokens.of(tok, item.encoder), views


_CANDIDATES: dict[str, Any] = {"causal": _causal, "masked": _masked, "seq2seq": _seq2seq}


class ServedPreview:
    """The requests a served model (`openai:NAME`) would be sent, made by `ServedScorer`'s own code
    with a client that records them and sends nothing.
    """

    def __init__(self, name: str, *, base_url: str):
        from culture_probe.engine.served import ServedScorer

        # one at a time: calls recorded in order
        self.scorer = ServedScorer(name, base_url=base_url, concurrency=1)
        self.client = _RecordingClient()
        self.scorer.client = self.client  # type: ignore[assignment]

    def score(self, requests: Sequence[ScoreRequest], options: ScoreOptions) -> list[ServedView]:
        """The completions requests (prompt echoed with its log-probs) that score each request's
        candidates.
        """
        views = []
        for request in requests:
            self.scorer.score([request], options)
            views.append(ServedView(self.client.take()))
        return views

    def generate(self, prompts: Sequence[str], options: GenerateOptions) -> list[ServedView]:
        """The completions or chat-completions request of each prompt."""
        views = []
        for prompt in prompts:
            self.scorer.generate([prompt], options)
            views.append(ServedView(self.client.take()))
        return views

    def fill_mask(self, lefts: Sequence[str], options: FillMaskOptions) -> list[ServedView]:
        """A served model is causal: `ServedScorer.fill_mask` refuses."""
        return self.scorer.fill_mask(lefts, options)

    def score_workload(self, requests: Sequence[ScoreRequest], options: ScoreOptions) -> Workload:
        """The requests and candidates; the server tokenizes, so no tokens are counted here."""
        return Workload(len(requests), sum(len(r.candidates) for r in requests), None)

    def generate_workload(self, prompts: Sequence[str], options: GenerateOptions) -> Workload:
        """The prompts; the server tokenizes."""
        return Workload(len(prompts), 0, None)

    def fill_mask_workload(self, lefts: Sequence[str], options: FillMaskOptions) -> Workload:
        """A served model is causal: `ServedScorer.fill_mask` refuses."""
        self.scorer.fill_mask(lefts, options)
        return Workload(len(lefts), 0, None)


class _RecordingClient:
    """Stands in for the `openai` client: records each request and answers with an empty text (and
    one prompt log-prob after the prompt), so that the scorer's own code runs to its end without a
    server.
    """

    def __init__(self) -> None:
        self.calls: list[ServedCall] = []
        self.completions = _Endpoint(self, "completions")
        self.chat = SimpleNamespace(completions=_Endpoint(self, "chat.completions"))

    def take(self) -> tuple[ServedCall, ...]:
        """The calls recorded since the last `take`."""
        calls, self.calls = tuple(self.calls), []
        return calls


@dataclass(frozen=True)
class _Endpoint:
    client: _RecordingClient
    name: Literal["completions", "chat.completions"]

    def create(self, **body: Any) -> Any:
        """Record the request; answer as a server would, with nothing in it."""
        self.client.calls.append(ServedCall(self.name, body))
        prompts = body.get("prompt", "")
        return SimpleNamespace(
            choices=[
                _empty_choice(i, prompt, echo=bool(body.get("echo")))
                for i, prompt in enumerate(prompts if isinstance(prompts, list) else [prompts])
            ]
        )


def _empty_choice(index: int, prompt: str, *, echo: bool) -> Any:
    """A choice with an empty text (after the prompt, when it is echoed), and the echo of a prompt
    of two tokens, the second at its end (scoring reads it), then one generated: an echo as
    `ServedScorer` checks it.
    """
    end = len(prompt)
    logprobs = SimpleNamespace(token_logprobs=[None, 0.0, 0.0], text_offset=[0, end, end])
    return SimpleNamespace(
        index=index,
        text=prompt if echo else "",
        logprobs=logprobs,
        message=SimpleNamespace(content=""),
    )


def _score_rule(kind: str, options: ScoreOptions) -> str:
    """The scoring rule of a `kind` model in words, as the view's heading says it."""
    if kind == "masked":
        return f"{options.masked_method} masks"
    if kind == "seq2seq":
        return f"{options.seq2seq_style} target"
    return (
        "log P(candidate + right text | context)"
        if options.score_right
        else "log P(candidate | context)"
    )


def _generation_rule(options: GenerateOptions) -> str:
    """The generation options in words."""
    how = (
        "greedy"
        if options.temperature is None
        else f"sampled at temperature {options.temperature}, seed {options.seed}"
    )
    parts = [how, f"at most {options.max_new_tokens} new tokens"]
    if options.stop:
        parts.append(f"stop at {list(options.stop)}")
    if options.chat:
        parts.append(
            "chat template" + (f", system {options.system!r}" if options.system is not None else "")
        )
    return ", ".join(parts)


def _more(total: int, what: str) -> list[str]:
    return [f"... and {total - SHOWN_CANDIDATES} more {what}"] if total > SHOWN_CANDIDATES else []
