"""The automatic batch budget halves on an out-of-memory error of torch's type (or one accelerate
recognises), and only then: an unrelated error that mentions memory reaches the caller at once, its
batch not retried.
"""

from __future__ import annotations

import pytest
import torch
from engine_reference import tiny

from culture_probe.engine import Scorer, ScoreRequest

REQUESTS = [ScoreRequest("The capital of France is ", ("Paris", "Rome", "Berlin"))] * 4


def failing(cls: type, error: Exception, budgets: list[int]):
    """`cls._score_batch`, noting each budget it is given and raising `error` while the budget is
    above 1024.
    """
    original = cls._score_batch

    def score_batch(self, items, options, budget):
        budgets.append(budget)
        if budget > 1024:
            raise error
        return original(self, items, options, budget)

    return score_batch


@pytest.mark.parametrize(
    "error",
    [
        torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
        RuntimeError(
            "MPS backend out of memory (MPS allocated: 1.00 GB, other allocations: 2.00 GB)"
        ),
        RuntimeError(
            "[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: you tried 9 GB"
        ),
    ],
    ids=["torch-type", "mps-message", "cpu-allocator"],
)
def test_an_out_of_memory_error_halves_the_automatic_budget(error, monkeypatch):
    scorer = Scorer(*tiny("gpt2", "bpe"), batch_tokens=None)
    budgets: list[int] = []
    monkeypatch.setattr(type(scorer), "_score_batch", failing(type(scorer), error, budgets))
    monkeypatch.setattr(scorer, "auto_budget", 4096)
    assert len(scorer.score(REQUESTS)) == len(REQUESTS)
    assert budgets[:3] == [4096, 2048, 1024] and scorer.auto_budget == 1024


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError("expected the memory-mapped weights to be out of memory order"),
        ValueError("out of memory"),
    ],
)
def test_an_error_that_only_mentions_memory_is_raised_at_once(error, monkeypatch):
    scorer = Scorer(*tiny("gpt2", "bpe"), batch_tokens=None)
    budgets: list[int] = []
    monkeypatch.setattr(type(scorer), "_score_batch", failing(type(scorer), error, budgets))
    monkeypatch.setattr(scorer, "auto_budget", 4096)
    with pytest.raises(type(error), match="memory"):
        scorer.score(REQUESTS)
    assert budgets == [4096] and scorer.auto_budget == 4096
