"""Planted-knowledge models: tiny LMs trained for seconds on a list of facts, to self-test a probing
setup.

A probe that ranks the gold answer first for facts a model was trained on, and does no better than
chance on facts it never saw, demonstrably finds knowledge that is there and does not invent
knowledge that is not. Real checkpoints cannot be downloaded here, so these models are also the
offline stand-in behind `planted:<config>`.

A `PlantedSpec` says what to memorise (`PlantedFact`s, each shaped like a `ScoreRequest` slot plus
its answer) and how (architecture, tokenizer, sizes, steps, seed). `train_planted(spec)` trains once
and saves the model and its tokenizer under a directory named by the spec's hash, loadable by
`Scorer.from_pretrained`; later calls with an equal spec reuse it.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from culture_probe.data.sources import cache_root
from culture_probe.engine.encoding import Encoder
from culture_probe.engine.tokenizer import separator
from culture_probe.engine.types import ScoreRequest
from culture_probe.errors import (
    CultureProbeError,
    EmptyCandidateError,
    UnknownNameError,
    UnsupportedModelError,
)
from culture_probe.models.tiny import ARCH_KIND, Arch, TokenizerKind, tiny_model, train_tokenizer

#: The one code path of the math libraries a planted model trains on, whatever x86-64 CPU runs it:
#: ATen's scalar kernels, MKL's compatible branch (its conditional numerical reproducibility),
#: oneDNN at SSE4.1, one thread. Each setting alone moves the weights of a 200-step training
#: (measured), and the tiny models train as fast on it as on AVX2 (too small to gain from vectors).
TRAINING_ENV = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "COMPATIBLE",
    "ONEDNN_MAX_CPU_ISA": "SSE41",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
STAGED_SPEC = "spec.pickle"  # the spec handed to the training process, in its staging folder

# Bump when training changes in a way that changes the weights, so stale cached models are not
# reused.
FORMAT_VERSION = 3  # 2: trained in float64; 3: on one code path whatever the CPU (`TRAINING_ENV`)
TOKENIZER_KINDS = ("bpe", "wordpiece", "metaspace")
PLANTABLE_ARCHS = tuple(arch for arch, kind in ARCH_KIND.items() if kind in ("causal", "masked"))
SPEC_FILE = "planted.json"
# A minimal chat format for planted models: the question as the user turn, the answer right after
# "A:".
CHAT_TEMPLATE = (
    "{% for message in messages %}Q: {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}A:{% endif %}"
)
EOS = "<|endoftext|>"  # the GPT-2 style byte-level BPE tokenizer's end of text (planted models use it)
# a hang guard, not a budget: a built-in planted model converges in under 40 s on an idle 2-core
# machine and takes several times that under load (179 steps in 100 s at load 8), where a tighter
# cap made notebooks' outputs depend on how busy the machine was
MAX_SECONDS = 900.0
ARCH_NAMES = {
    "gpt2": "GPT-2",
    "bert": "BERT",
}  # as a planted model's description names its architecture


def chat_prompt(question: str) -> str:
    """`question` rendered with `CHAT_TEMPLATE` and a generation prompt (what the engine feeds the
    model).
    """
    return f"Q: {question}\nA:"


def benchmark_rows(config: str, data_dir: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    """The `test` rows of benchmark config `config`: what a built-in planted model is trained on."""
    from culture_probe.data.registry import load_benchmark

    return list(load_benchmark(config, data_dir=data_dir)["test"])


@dataclass(frozen=True)
class PlantedFact:
    """One statement to memorise: `left + sep + answer + right`, the way a `ScoreRequest` slot is
    filled.

    `sep=None` follows the engine's rule (a space unless `left` ends in whitespace or its script has
    no spaces).
    """

    left: str
    answer: str
    right: str = ""
    sep: str | None = None

    def __post_init__(self) -> None:
        if not self.answer.strip():
            raise EmptyCandidateError(
                f"PlantedFact with left={self.left!r} has an empty answer {self.answer!r}; "
                "every fact needs the words the model should memorise."
            )

    @classmethod
    def from_request(cls, request: ScoreRequest, answer: str) -> PlantedFact:
        """The fact a probe `request` asks about, with its gold `answer` in the slot."""
        return cls(request.left, answer, request.right, request.sep)

    def request(self) -> ScoreRequest:
        """The probe that asks for this fact, with the answer as its only candidate."""
        return ScoreRequest(self.left, (self.answer,), self.right, self.sep)

    @property
    def text(self) -> str:
        """The sentence the model is trained on."""
        return self.left + separator(self.left, self.sep) + self.answer + self.right


@dataclass(frozen=True)
class PlantedSpec:
    """What a planted model memorises and how it is trained; equal specs give the same cached model.

    `probe_texts` are extra texts the tokenizer is trained on (every prompt and candidate that will
    be probed), so that facts the model never saw still tokenize into known pieces. Training stops
    once the mean loss on answer tokens over one pass drops below `target_loss`, after `steps`
    optimiser steps, or after `max_seconds` (a safety cap that makes the result depend on the
    machine, so it warns and is recorded in `planted.json`). Masked models see each answer replaced
    by as many masks as it has tokens, plus 0 to `extra_masks` unlabelled masks after it, so that
    the number of masks does not give the answer away. `what` says in words what was planted and the
    pattern a probe should find (a run's config.json and report show it); `items` names the
    benchmark items planted, so that a limited run draws some of them and its report splits planted
    from not planted. Neither changes a weight, so neither is part of the cache key.
    """

    facts: tuple[PlantedFact, ...]
    arch: Arch = "gpt2"
    tokenizer: TokenizerKind = "bpe"
    probe_texts: tuple[str, ...] = ()
    vocab_size: int = 1000
    layers: int = 2
    hidden: int = 64
    heads: int = 4
    steps: int = 1000
    batch_size: int = 64
    learning_rate: float = 3e-3
    target_loss: float = 0.02
    max_seconds: float = 60.0
    seed: int = 0
    extra_masks: int = 2
    what: str = ""
    items: tuple[
        str, ...
    ] = ()  # the benchmark items (row ids) whose facts were planted; () where none are

    def __post_init__(self) -> None:
        object.__setattr__(self, "facts", tuple(self.facts))
        object.__setattr__(self, "probe_texts", tuple(self.probe_texts))
        object.__setattr__(self, "items", tuple(sorted(self.items)))
        if not self.facts:
            raise ValueError("PlantedSpec needs at least one fact to plant; got an empty `facts`.")
        if self.arch not in PLANTABLE_ARCHS:
            if self.arch in ARCH_KIND:
                raise UnsupportedModelError(
                    f"Planted models are causal or masked LMs; {self.arch!r} is a {ARCH_KIND[self.arch]} "
                    f"architecture. Use one of {', '.join(PLANTABLE_ARCHS)}."
                )
            raise UnknownNameError("planted architecture", self.arch, PLANTABLE_ARCHS)
        if self.tokenizer not in TOKENIZER_KINDS:
            raise UnknownNameError("tokenizer kind", self.tokenizer, TOKENIZER_KINDS)
        for name, least in (
            ("steps", 1),
            ("batch_size", 1),
            ("vocab_size", 1),
            ("layers", 1),
            ("hidden", 1),
            ("heads", 1),
            ("extra_masks", 0),
            ("max_seconds", 0),
            ("target_loss", 0),
        ):
            if getattr(self, name) < least:
                raise ValueError(
                    f"PlantedSpec.{name} must be at least {least}, got {getattr(self, name)}."
                )
        if self.learning_rate <= 0:
            raise ValueError(
                f"PlantedSpec.learning_rate must be positive, got {self.learning_rate}."
            )

    @property
    def kind(self) -> Literal["causal", "masked"]:
        """The model kind: causal ones learn whole sentences, masked ones learn to fill the answer's
        masks.
        """
        return ARCH_KIND[self.arch]  # type: ignore[return-value]

    def key(self) -> str:
        """A digest of everything that changes the trained weights (the cache key)."""
        import tokenizers
        import torch
        import transformers

        versions = {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__,
        }
        spec = {
            k: v for k, v in asdict(self).items() if k not in ("what", "items")
        }  # words and labels: no weight
        payload = {"format": FORMAT_VERSION, "versions": versions, "spec": spec}
        return hashlib.sha256(
            json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()
        ).hexdigest()


StoppedBy = Literal["target_loss", "steps", "max_seconds"]  # what ended a planted model's training


def chat_gpt2_spec(
    facts: list[PlantedFact],
    texts: list[str],
    *,
    what: str,
    seed: int = 0,
    batch_size: int = 32,
    items: tuple[str, ...] = (),
) -> PlantedSpec:
    """The tiny GPT-2 (byte-level BPE, 2 layers of 64) that the generative benchmarks' planted
    models share: MAPS' and X-FaKT's, trained to a loss of 0.05 in at most 800 steps.
    """
    return PlantedSpec(
        tuple(facts),
        arch="gpt2",
        tokenizer="bpe",
        probe_texts=tuple(texts),
        vocab_size=2000,
        layers=2,
        hidden=64,
        steps=800,
        batch_size=batch_size,
        target_loss=0.05,
        max_seconds=MAX_SECONDS,
        seed=seed,
        what=what,
        items=items,
    )


@dataclass(frozen=True)
class TrainingRecord:
    """How a planted model's training went; saved next to the weights in `planted.json`."""

    steps: int
    answer_loss: float
    converged: bool
    seconds: float
    stopped_by: StoppedBy


def probe_texts_of(requests: Iterable[ScoreRequest]) -> tuple[str, ...]:
    """Every text a set of probe requests will feed the tokenizer: contexts and candidates, without
    repeats.
    """
    texts: dict[str, None] = {}
    for request in requests:
        texts.update(dict.fromkeys((request.left, request.right, *request.candidates)))
    texts.pop("", None)
    return tuple(texts)


def default_cache_dir() -> Path:
    """Where planted models live unless told otherwise: `planted/` in the library's cache folder."""
    return cache_root() / "planted"


def train_planted(spec: PlantedSpec, out_dir: str | os.PathLike | None = None) -> Path:
    """The directory of the model `spec` describes, trained now unless `out_dir` already holds it.

    The directory (`out_dir/<arch>-<hash>`) holds the weights, the tokenizer and `planted.json` (the
    spec and the training record). It appears atomically, and one process trains a spec while the
    others that ask for it (a run's other ranks, a second run) wait for it and use it.
    """
    from filelock import FileLock

    root = Path(out_dir) if out_dir is not None else default_cache_dir()
    target = root / f"{spec.arch}-{spec.key()[:16]}"
    if (target / SPEC_FILE).is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    # the lock lives in the machine's temp folder, so the cache holds models only (on storage shared
    # by several machines each may train it once: the publishing rename still keeps one)
    digest = hashlib.sha256(str(target.resolve()).encode()).hexdigest()[:16]
    with FileLock(Path(tempfile.gettempdir()) / f"culture_probe-planted-{digest}.lock"):
        if not (target / SPEC_FILE).is_file():  # trained while this process waited
            _train_into(spec, root, target)
    return target


def _train_into(spec: PlantedSpec, root: Path, target: Path) -> None:
    """Train `spec` in a staging folder of `root` and publish it as `target`."""
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=root))
    try:
        _train(spec, staging)
        _publish(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _train(spec: PlantedSpec, staging: Path) -> None:
    """Train `spec` into `staging` in a process of its own, on `TRAINING_ENV`'s code path (read
    when torch loads, so not settable in this process), and warn here where the time cap stopped
    it.
    """
    (staging / STAGED_SPEC).write_bytes(pickle.dumps(spec))
    command = [sys.executable, "-m", "culture_probe.models.train_process", str(staging)]
    done = subprocess.run(
        command, env={**os.environ, **TRAINING_ENV}, capture_output=True, text=True, check=False
    )
    (staging / STAGED_SPEC).unlink(missing_ok=True)
    if done.returncode != 0:
        said = "\n".join(done.stderr.strip().splitlines()[-20:])
        raise CultureProbeError(
            f"Training the planted model failed in its process (exit {done.returncode}):\n{said}"
        )
    record = read_record(staging)
    if record.stopped_by == "max_seconds":
        warnings.warn(
            f"Planted model training hit max_seconds={spec.max_seconds} after {record.steps} steps (answer "
            f"loss {record.answer_loss:.3f}); the result now depends on this machine's speed.",
            stacklevel=4,
        )


def train_staged(staging: str | os.PathLike) -> None:
    """The training process's part (`culture_probe.models.train_process`): train the spec
    `_train` left in `staging` and save the model, its tokenizer and `planted.json` there.
    """
    staging = Path(staging)
    spec = pickle.loads((staging / STAGED_SPEC).read_bytes())
    model, tokenizer, record = _fit(spec)
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    meta = {"spec": asdict(spec), "key": spec.key(), "training": asdict(record)}
    (staging / SPEC_FILE).write_text(
        json.dumps(meta, indent=1, ensure_ascii=False), encoding="utf-8"
    )


def read_record(path: str | os.PathLike) -> TrainingRecord:
    """The training record saved with a planted model (steps, final answer loss, whether it
    converged).
    """
    meta = json.loads((Path(path) / SPEC_FILE).read_text(encoding="utf-8"))
    return TrainingRecord(**meta["training"])


def _publish(staging: Path, target: Path) -> None:
    """Move a finished model into place; if another process got there first, keep theirs (same
    spec).
    """
    try:
        staging.rename(target)
    except OSError:
        if not (target / SPEC_FILE).is_file():
            raise


def _encode(fact: PlantedFact, encoder: Encoder) -> tuple[list[int], list[int]]:
    """Token ids of a fact's sentence and the positions of its answer, encoded exactly as the engine
    encodes the fact's probe (context, answer, right-hand text, closing special tokens), so training
    and probing agree on where the answer's tokens are even when a tokenizer would merge them with
    the text after them.
    """
    encoded = encoder.encode(fact.request(), with_right=True)
    start, answer = len(encoded.context), encoded.candidates[0]
    ids = [*encoded.context, *answer, *encoded.rights[0], *encoded.suffix]
    return ids, list(range(start, start + len(answer)))


def _batch(rows: Sequence[tuple[list[int], list[int]]], tokenizer, kind: str) -> dict[str, Any]:
    """Padded inputs plus `weights` marking the tokens to learn and `answer` marking the answer's
    tokens.

    Causal models learn whole sentences (`weights` on every real token); masked ones see the answer
    replaced by as many masks as it has tokens (what typed querying feeds them) and learn only those
    positions.
    """
    import torch

    width = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), width), tokenizer.pad_token_id)
    attention = torch.zeros_like(ids)
    answer = torch.zeros(ids.shape, dtype=torch.bool)
    for row, (tokens, positions) in enumerate(rows):
        ids[row, : len(tokens)] = torch.tensor(tokens)
        attention[row, : len(tokens)] = 1
        answer[row, positions] = True
    targets = ids.clone()
    if kind == "masked":
        ids = ids.masked_fill(answer, tokenizer.mask_token_id)
        weights = answer
    else:
        weights = attention.bool()
    return {
        "input_ids": ids,
        "attention_mask": attention,
        "targets": targets,
        "weights": weights,
        "answer": answer,
    }


def _with_extra_masks(
    row: tuple[list[int], list[int]], n: int, mask_id: int
) -> tuple[list[int], list[int]]:
    """The row with `n` unlabelled masks after its answer.

    Trained only on exact-length masks, a masked model learns that the number of masks names the
    answer (if the only two-token answer is "United States", two masks mean "United States" whatever
    the question), and typed querying then ranks that answer first everywhere. Extra masks with no
    target hide the answer's length.
    """
    ids, positions = row
    end = positions[-1] + 1
    return ids[:end] + [mask_id] * n + ids[end:], positions


def _token_losses(model, batch: dict[str, Any], kind: str):
    """Cross-entropy of each target token (in the model's float64), aligned so that position i
    scores `targets[i]`.
    """
    import torch

    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    targets = batch["targets"]
    if kind == "causal":  # position i-1 predicts token i; the first token has no prediction
        losses = torch.nn.functional.cross_entropy(
            logits[:, :-1].transpose(1, 2), targets[:, 1:], reduction="none"
        )
        return torch.nn.functional.pad(losses, (1, 0))
    return torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none")


def _fit(spec: PlantedSpec):
    """Train a fresh tiny model on `spec.facts` (in the training process: `TRAINING_ENV`).

    Deterministic given the spec and the library versions, except that the `tokenizers` WordPiece
    trainer breaks ties in hash-map order (huggingface/tokenizers#1794), so a WordPiece vocabulary
    can differ between processes. Trained in float64 and returned in float32, on one code path of
    the math libraries: on each CPU's fastest path the weights depended on the CPU (in float32 the
    DLAMA spec's weights summed to 68.8 on MKL's AVX2 path and 72.0 on its compatible one; in
    float64 two machines still drifted apart over hundreds of steps, and a notebook's P@1 moved from
    47.2 to 50.0).
    """
    import torch

    threads = torch.get_num_threads()
    # One thread: tiny models gain nothing from more, a busy machine loses a lot to oversubscribed
    # threads, and the weights no longer depend on how many cores the machine has.
    torch.set_num_threads(1)
    try:
        return _fit_single_threaded(spec)
    finally:
        torch.set_num_threads(threads)


def planted_tokenizer(spec: PlantedSpec):
    """The tokenizer `spec`'s model is trained with (deterministic for a spec): built from its facts
    and probes.
    """
    texts = [fact.text for fact in spec.facts] + list(spec.probe_texts)
    return train_tokenizer(texts, spec.tokenizer, vocab_size=spec.vocab_size, model_kind=spec.kind)


def _fit_single_threaded(spec: PlantedSpec):
    import torch

    tokenizer = planted_tokenizer(spec)
    model = tiny_model(
        spec.arch,
        tokenizer,
        layers=spec.layers,
        hidden=spec.hidden,
        heads=spec.heads,
        seed=spec.seed,
    )
    model = model.double().train()
    encoder = Encoder(tokenizer)
    rows = [_encode(fact, encoder) for fact in spec.facts]
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.learning_rate, weight_decay=0.0)
    start, pass_loss, pass_tokens = time.monotonic(), 0.0, 0
    stopped_by: StoppedBy
    for step, (batch, end_of_pass) in enumerate(_batches(spec, rows, tokenizer), start=1):
        losses = _token_losses(model, batch, spec.kind)
        optimizer.zero_grad()
        losses[batch["weights"]].mean().backward()
        optimizer.step()
        pass_loss += losses[batch["answer"]].sum().item()
        pass_tokens += int(batch["answer"].sum())
        loss = pass_loss / pass_tokens  # mean answer loss of the current pass over the facts
        if end_of_pass:
            pass_loss, pass_tokens = 0.0, 0
            if loss < spec.target_loss:
                stopped_by = "target_loss"
                break
        if step >= spec.steps:
            stopped_by = "steps"
            break
        if time.monotonic() - start > spec.max_seconds:
            stopped_by = "max_seconds"  # said by the process that asked for it (`_train`)
            break
    record = TrainingRecord(
        step, loss, stopped_by == "target_loss", time.monotonic() - start, stopped_by
    )
    return model.float().eval(), tokenizer, record


def _batches(
    spec: PlantedSpec, rows: list[tuple[list[int], list[int]]], tokenizer
) -> Iterator[tuple[dict, bool]]:
    """Endless shuffled passes over the facts (seeded): (batch, whether it ends a pass)."""
    import torch

    generator = torch.Generator().manual_seed(spec.seed)
    while True:
        chunks = torch.randperm(len(rows), generator=generator).split(spec.batch_size)
        for number, chunk in enumerate(chunks, start=1):
            chosen = [rows[i] for i in chunk.tolist()]
            if spec.kind == "masked" and spec.extra_masks:
                extra = torch.randint(
                    0, spec.extra_masks + 1, (len(chosen),), generator=generator
                ).tolist()
                chosen = [
                    _with_extra_masks(row, n, tokenizer.mask_token_id)
                    for row, n in zip(chosen, extra, strict=True)
                ]
            yield _batch(chosen, tokenizer, spec.kind), number == len(chunks)
