"""From request text to token ids: the separator rule, the context boundary, special tokens and
truncation.

Every backend encodes through this one module, so a tokenization fix reaches all model kinds at
once.
"""

from __future__ import annotations

import threading
import warnings
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from culture_probe.engine.tokenizer import (
    HEAD,
    chat_prompt,
    marks_start,
    plain_backend,
    separator,
    special_affixes,
    split_at,
)
from culture_probe.engine.tokens import TokenRows
from culture_probe.engine.types import ScoreRequest, Truncation
from culture_probe.errors import EmptyCandidateError, InputTooLongError, UnsupportedModelError

if TYPE_CHECKING:
    from tokenizers import Encoding

# candidate sets kept encoded per encoder (one per tokenizer), the least recently used dropped
# first: a run asks a few pools (FmLAMA's per template, DLAMA's per predicate), each after a few
# boundaries
ENCODED_SETS = 512


@dataclass(frozen=True)
class Encoded:
    """One request in token ids: the context (with its special tokens) and, per candidate, its ids
    (one `TokenRows` shared by every request that asks the same candidates after the same boundary)
    and the ids of the right-hand text that follows it. `suffix` holds the special tokens that close
    a sequence.
    """

    context: tuple[int, ...]
    candidates: TokenRows
    rights: TokenRows
    suffix: tuple[int, ...]
    # the right text's ids when they are the same after every candidate (a causal continuation split
    # from each)
    right: tuple[int, ...] | None = None


@dataclass
class Tally:
    """What `Encoder.fit` counted inside `Encoder.apart`: the cuts, and the warnings it held
    back.
    """

    truncation: Truncation = field(default_factory=Truncation)
    warnings: list[tuple[str, int]] = field(default_factory=list)


class Encoder:
    """Encodes requests for one tokenizer; `add_bos` overrides the tokenizer's own leading special
    tokens. `truncation` counts what `fit` cut since the encoder was made or `recording` last began.
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        add_bos: bool | None = None,
        max_length: int | None = None,
        name: str = "",
    ):
        self.tokenizer = tokenizer
        self.name = name
        self.max_length = max_length
        self.truncation = Truncation()
        self.label: str | None = None  # named in the warnings (a run's config)
        self._warned: set[str] = set()  # the kinds of cut already warned of
        prefix, self.suffix = special_affixes(tokenizer)
        if add_bos is True:
            if tokenizer.bos_token_id is None:
                raise UnsupportedModelError(
                    f"add_bos=True, but the tokenizer of {name or type(tokenizer).__name__!r} has no BOS token "
                    "(bos_token is None). Pass add_bos=None (the tokenizer's own special tokens) or add_bos=False."
                )
            prefix = (tokenizer.bos_token_id,)
        elif add_bos is False:
            prefix = ()
        self.prefix = prefix
        self._backend = plain_backend(tokenizer)
        # whether the tokenizer marks the start of a text (a prefix space, a leading "▁"): then a
        # boundary glued to the word before it must hold that word too (`boundary`)
        self._marks_start = marks_start(self._backend)
        self._encoded: OrderedDict[tuple[Any, ...], TokenRows] = OrderedDict()
        self._apart = threading.local()  # a thread's `Tally` while it prepares ahead (`apart`)

    def ids(self, text: str) -> tuple[int, ...]:
        """Token ids of `text` without special tokens."""
        return self.batch_ids([text])[0] if text else ()

    def _after(
        self, known: list[tuple[int, ...]], head: list[str], tail: list[str]
    ) -> list[tuple[int, ...]]:
        """Ids of each `tail` as tokenized right after its `head` (whose ids are `known`): jointly
        when the joint ids start with `known` and add something, else `tail` alone (a token spanned
        the boundary).
        """
        joints = self.batch_ids([h + t for h, t in zip(head, tail, strict=True)])
        out = []
        for ids, joint, text in zip(known, joints, tail, strict=True):
            clean = len(joint) > len(ids) and joint[: len(ids)] == ids
            out.append(joint[len(ids) :] if clean else self.ids(text))
        return out

    def piece(self, name: str) -> tuple[int]:
        """The id of the vocabulary piece written `name` (`a`, `▁a`, `##a`); an error if the
        vocabulary lacks it.
        """
        found = self.tokenizer.convert_tokens_to_ids(name)
        if found is None or (
            found == self.tokenizer.unk_token_id and name != self.tokenizer.unk_token
        ):
            raise EmptyCandidateError(
                f"Candidate {name!r} is no piece of this vocabulary (candidate_ids='piece' "
                "names one piece exactly as the vocabulary writes it)."
            )
        return (found,)

    def batch_ids(self, texts: list[str]) -> list[tuple[int, ...]]:
        """`ids` of many texts in one tokenizer call (straight to the Rust tokenizer when there is
        one: the Python wrapper's per-text conversion costs twice the tokenization itself).
        """
        if not texts:
            return []
        if self._backend is not None:
            return [
                tuple(enc.ids)
                for enc in self._backend.encode_batch(texts, add_special_tokens=False)
            ]
        return [tuple(ids) for ids in self.tokenizer(texts, add_special_tokens=False)["input_ids"]]

    def after_special(self, texts: list[str]) -> list[tuple[int, ...]]:
        """Ids of each text as the tokenizer splits it right after a special token, which is how the
        original masked-LM probes tokenize the text right of the slot (the sentence with [MASK] as a
        special token): WordPiece starts a new word (`입니다`, not `##입니다`), byte-level BPE and
        SentencePiece start a new piece exactly as the text reads (a leading space stays a
        leading-space piece, none is added). Computed by tokenizing the mask token followed by the
        text and dropping the mask's id.
        """
        mask, mask_id = self.tokenizer.mask_token, self.tokenizer.mask_token_id
        if mask is None or mask_id is None:
            return self.batch_ids(texts)
        out = []
        for text, ids in zip(texts, self.batch_ids([mask + text for text in texts]), strict=True):
            if not ids or ids[0] != mask_id:
                raise UnsupportedModelError(
                    f"The mask token {mask!r} does not tokenize to its own id before "
                    f"{text[:30]!r}; the text right of the slot cannot be placed after it."
                )
            out.append(ids[1:])
        return out

    def encode(
        self, request: ScoreRequest, *, with_right: bool, right_after_mask: bool = False
    ) -> Encoded:
        """`encode_all` of one request."""
        return self.encode_all([request], with_right=with_right, right_after_mask=right_after_mask)[
            0
        ]

    def encode_all(
        self,
        requests: Sequence[ScoreRequest],
        *,
        with_right: bool,
        right_after_mask: bool = False,
    ) -> list[Encoded]:
        """Encode `requests`; trailing whitespace of `left` moves onto the candidates (never an
        empty one). A chat request's context is its rendered chat prompt, kept whole (its trailing
        newline belongs to the prompt). The right text is tokenized as it continues each candidate
        (a causal continuation), or on its own after the mask tokens (`right_after_mask`: masked
        models, as the original probes do). The contexts are tokenized in one call; each candidate
        set once per boundary (`candidate_rows`), whatever the number of requests.
        """
        parts = [self._split(request) for request in requests]
        contexts = self._contexts([core for core, _, _ in parts])
        afters = (
            self.after_special([r.right for r in requests])
            if with_right and right_after_mask
            else [()] * len(requests)
        )
        out = []
        for request, (core, lead, prefix), (context, encoding), after in zip(
            requests, parts, contexts, afters, strict=True
        ):
            cands = self.candidate_rows(request, core, lead, encoding)
            n, uniform = len(cands), None
            if with_right and request.right and right_after_mask:
                rights = TokenRows.repeat(after, n)
            elif with_right and request.right:
                uniform = self._right_after_split(cands, request.right)
                rights = (
                    TokenRows.repeat(uniform, n)
                    if uniform is not None
                    else TokenRows.of(
                        self._after(
                            [context + ids for ids in cands.tuples()],
                            [core + lead + cand for cand in request.candidates],
                            [request.right] * n,
                        )
                    )
                )
            else:
                rights = TokenRows.repeat((), n)
            full = prefix + context
            if not full:  # an empty context starts from BOS, or EOS when there is none
                start = self.tokenizer.bos_token_id
                full = (start if start is not None else self.tokenizer.eos_token_id,)
            out.append(Encoded(full, cands, rights, self.suffix, uniform))
        return out

    def _right_after_split(self, cands: TokenRows, right: str) -> tuple[int, ...] | None:
        """The ids the right text gets after every candidate, where the tokenizer splits it from
        each candidate's last word (worked out once per candidate set and right-hand start:
        `_splits`), else None (then each candidate's own, the slow way). After a split, the text
        right of it is tokenized as it would be after any other split: its ids after one candidate's
        last word are its ids after all.
        """
        ends = cands.derived.get("ends")
        head = HEAD.match(right)
        if ends is None or head is None:
            return None
        split = cands.derive(
            ("splits", head.group()), lambda rows: self._splits(ends, head.group())
        )
        if not split.all():
            return None
        end = ends[0]
        known, joint = self.ids(end), self.ids(end + right)
        if (
            len(joint) <= len(known) or joint[: len(known)] != known
        ):  # pragma: no cover - a split is clean
            return None
        return joint[len(known) :]

    def _splits(self, ends: tuple[str | None, ...], head: str) -> np.ndarray:
        """Per candidate (its last word `ends[c]`; None: unknown), whether the tokenizer splits the
        right text starting with `head` from it: no token and no word across the place where they
        meet.
        """
        distinct = sorted({e for e in ends if e is not None})
        if not distinct or self._backend is None:
            return np.zeros(len(ends), dtype=bool)
        encodings = self._backend.encode_batch(
            [e + head for e in distinct], add_special_tokens=False
        )
        splits = {e: split_at(enc, len(e)) for e, enc in zip(distinct, encodings, strict=True)}
        return np.array([e is not None and splits.get(e, False) for e in ends], dtype=bool)

    def _split(self, request: ScoreRequest) -> tuple[str, str, tuple[int, ...]]:
        """(context text, the text every candidate starts with, the leading special tokens) of a
        request.
        """
        if not request.candidates:
            raise EmptyCandidateError(
                f"Request with left={request.left!r} has no candidates; give at least one candidate string."
            )
        if (
            request.chat
        ):  # the reply starts right after the generation prompt; the template carries BOS
            return chat_prompt(self.tokenizer, request.left, request.system, name=self.name), "", ()
        core = request.left.rstrip()
        return core, request.left[len(core) :] + separator(request.left, request.sep), self.prefix

    def _contexts(self, texts: list[str]) -> list[tuple[tuple[int, ...], Encoding | None]]:
        """Each text's ids without special tokens, with its encoding where the tokenizer is a fast
        one.
        """
        if self._backend is None:
            return [(ids, None) for ids in self.batch_ids(texts)]
        out: list[tuple[tuple[int, ...], Encoding | None]] = [((), None)] * len(texts)
        full = [i for i, text in enumerate(texts) if text]
        encodings = self._backend.encode_batch([texts[i] for i in full], add_special_tokens=False)
        for i, encoding in zip(full, encodings, strict=True):
            out[i] = (tuple(encoding.ids), encoding)
        return out

    def candidate_rows(
        self, request: ScoreRequest, core: str, lead: str, encoding: Encoding | None
    ) -> TokenRows:
        """The ids of `request`'s candidates, encoded once per candidate set, `lead` and boundary:
        how they read after the context `core` depends on the context only through its last word
        (`boundary`), so every request whose context ends alike shares them, and what backends
        derive from them.
        """
        how = request.candidate_ids
        end = self.boundary(core, encoding) if how == "in_context" else ""
        key = (request.candidates, end, lead if how == "in_context" else "", how, bool(core))
        rows = self._encoded.get(key)
        if rows is None:
            rows = self._encode_candidates(request.candidates, end, key[2], how, bool(core))
            self._encoded[key] = rows
            if len(self._encoded) > ENCODED_SETS:
                self._encoded.popitem(last=False)
        else:
            self._encoded.move_to_end(key)
        return rows

    def _encode_candidates(
        self, candidates: tuple[str, ...], end: str, lead: str, how: str, after_context: bool
    ) -> TokenRows:
        """The ids of `candidates`: in context (after `end`, the context's boundary, or at the start
        of the text when there is no context), alone, or as vocabulary pieces; a candidate with no
        ids is an error.
        """
        tails = [lead + cand for cand in candidates]
        ends: tuple[str | None, ...] | None = None
        if how == "alone":
            rows = self.batch_ids(list(candidates))
        elif how == "piece":
            rows = [self.piece(cand) for cand in candidates]
        else:
            rows, ends = self._in_context(end if after_context else "", tails)
        for cand, ids in zip(candidates, rows, strict=True):
            if not ids or not cand.strip():  # a blank candidate would score only the separator
                raise EmptyCandidateError(
                    f"Candidate {cand!r} tokenizes to nothing; drop it or give a non-empty candidate."
                )
        out = TokenRows.of(rows)
        if ends is not None:
            out.derived["ends"] = ends
        return out

    def _in_context(
        self, end: str, tails: list[str]
    ) -> tuple[list[tuple[int, ...]], tuple[str | None, ...] | None]:
        """Each tail's ids after the context's `end` (at the start of the text when there is none),
        and the last word of the context and tail together as it ends each (`boundary`: what the
        right text continues; None where it is not known from the end alone, or the tail did not
        split cleanly from the context).
        """
        if self._backend is None:
            known = [self.ids(end)] * len(tails)
            return (
                self._after(known, [end] * len(tails), tails) if end else self.batch_ids(tails)
            ), None
        known_ids = self.ids(end)
        encodings = self._backend.encode_batch([end + t for t in tails], add_special_tokens=False)
        rows, ends, fallback = [], [], []
        for i, (tail, encoding) in enumerate(zip(tails, encodings, strict=True)):
            joint = tuple(encoding.ids)
            clean = not end or (
                len(joint) > len(known_ids) and joint[: len(known_ids)] == known_ids
            )
            rows.append(joint[len(known_ids) :] if clean else ())
            if not clean:  # a token spanned the boundary: the tail alone
                fallback.append(i)
            text = end + tail
            last = self.boundary(text, encoding) if clean else None
            # the whole text reads alike after the context's end unless the tokenizer marks a text's
            # start there
            fair = last is not None and (len(last) < len(text) or not end or self._fair_start(text))
            ends.append(last if fair else None)
        for i, ids in zip(fallback, self.batch_ids([tails[i] for i in fallback]), strict=True):
            rows[i] = ids
        return rows, tuple(ends)

    def _fair_start(self, text: str) -> bool:
        """Whether `text` at the start of a text is tokenized as it is after a split (nothing marks
        the start).
        """
        return not self._marks_start or text[:1].isspace()

    def boundary(self, core: str, encoding: Encoding | None) -> str:
        """The end of the context `core` that decides how a text after it is tokenized: its last
        word (pre-token), with the whitespace before it, and, where the tokenizer marks the start of
        a text, the words glued to it.

        A fast tokenizer splits a text into words, normalizes and tokenizes each on its own, and
        looks at most one character past a word to split it: so a candidate after `core` gets the
        ids it gets after this end alone, and whether the joint ids start with the context's is the
        same test too. The whole context where the tokenizer gives no words (a slow one, or no
        pre-tokenizer: one word).
        """
        words = encoding.word_ids if encoding is not None else None
        if encoding is None or not core or not words or words[-1] is None:
            return core
        t = len(words)
        while True:
            word = words[t - 1]
            while t > 0 and words[t - 1] == word:
                t -= 1
            start = encoding.offsets[t][0]
            while start > 0 and core[start - 1].isspace():
                start -= 1
            if start == 0:
                return core
            # an end that starts with whitespace reads alike at the start of a text: nothing is
            # added before it
            if core[start].isspace() or not self._marks_start:
                return core[start:]
            if (
                t == 0 or words[t - 1] is None
            ):  # text the tokenizer dropped, or a special token, before it
                return core
            # glued to the word before it (no whitespace between): that word comes too

    def fit(
        self,
        context: tuple[int, ...],
        rest: dict[str, int],
        limit: int | None = None,
        *,
        kind: str = "contexts",
    ) -> tuple[int, ...]:
        """Cut `context` on the left (keeping its leading special tokens) so that the `rest` of the
        input fits; `rest` maps each part that follows the context ("candidate", "right text", ...)
        to its token count. `limit` (a request's `max_tokens`) tightens the model's own maximum
        length. Every call is counted in `truncation` under `kind` ("contexts", or "prompts" for
        generation), cut or not.
        """
        room = sum(rest.values())
        max_length = min((n for n in (self.max_length, limit) if n is not None), default=None)
        if max_length is None or len(context) + room <= max_length:
            self._count(kind, 0)
            return context
        keep = max_length - room - len(self.prefix)
        if keep < 1:
            whose = "model's" if max_length == self.max_length else "request's (max_tokens)"
            longest = max(rest, key=rest.__getitem__)
            parts = ", ".join(f"{name} {n}" for name, n in rest.items() if n)
            raise InputTooLongError(
                f"The {longest} is too long: what must follow the context ({parts} tokens, plus "
                f"{len(self.prefix)} leading special tokens) leaves no room for it in the {whose} {max_length} "
                f"positions. Shorten the {longest}, or use a model with more positions."
            )
        head = len(self.prefix) if context[: len(self.prefix)] == self.prefix else 0
        fitted = context[:head] + context[len(context) - keep :]
        self._count(kind, len(context) - len(fitted))
        self._warn(kind, max_length)
        return fitted

    def _count(self, kind: str, tokens_cut: int) -> None:
        """Count one fitted input, in the tally of the block it is prepared in apart, if any
        (`apart`).
        """
        tally = getattr(self._apart, "tally", None)
        if tally is None:
            self.truncation = self.truncation.add(kind, tokens_cut)
        else:
            tally.truncation = tally.truncation.add(kind, tokens_cut)

    @contextmanager
    def apart(self) -> Iterator[Tally]:
        """Count (and hold back the warnings of) what this thread fits inside the block in a `Tally`
        of its own, not in `truncation`: inputs prepared ahead of their turn (`Backend.prefetch`)
        are counted once they are used (`absorb`), so a run stopped before that never counts them.
        """
        self._apart.tally = Tally()
        try:
            yield self._apart.tally
        finally:
            self._apart.tally = None

    def absorb(self, tally: Tally) -> None:
        """Count what a block prepared apart fitted, and give the warnings it held back."""
        self.truncation = self.truncation.plus(tally.truncation)
        for kind, max_length in tally.warnings:
            self._warn(kind, max_length)

    def _warn(self, kind: str, max_length: int) -> None:
        """Say once per kind of input (per `recording`) that one was cut, naming the recording's
        label.
        """
        tally = getattr(self._apart, "tally", None)
        if tally is not None:
            tally.warnings.append((kind, max_length))
            return
        if kind in self._warned:
            return
        self._warned.add(kind)
        what = f"A {kind[:-1]}" if self.label is None else f"{self.label}: a {kind[:-1]}"
        warnings.warn(
            f"{what} longer than the input limit ({max_length} tokens) was cut on the left; "
            "what follows it (candidates, new tokens) is kept whole. (Warned once; scorer.truncation counts "
            "every cut.)",
            stacklevel=4,
        )

    @contextmanager
    def recording(self, label: str | None = None) -> Iterator[None]:
        """Count cuts afresh and warn afresh (once per kind of input) within the block, the warnings
        naming `label` (a run's config, so that a suite's warnings say which); the counts stay in
        `truncation` after it.
        """
        self.truncation, self._warned, self.label = Truncation(), set(), label
        try:
            yield
        finally:
            self.label = None
