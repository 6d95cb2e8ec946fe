"""Data parallel scoring: every process holds the model, scores a shard of the requests, and all processes
get every result back in request order. Works under `accelerate launch` and `torchrun` (CPU: gloo).
"""

from __future__ import annotations

import os
from typing import Any


def world() -> tuple[int, int]:
    """(rank, number of processes); (0, 1) when not launched by a distributed launcher."""
    import torch.distributed as dist

    if not dist.is_available():
        return 0, 1
    if not dist.is_initialized() and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        # Launched by accelerate/torchrun but nobody set the process group up yet.
        from accelerate import PartialState

        PartialState()
    if not dist.is_initialized():
        return 0, 1
    return dist.get_rank(), dist.get_world_size()


def barrier(size: int) -> None:
    """Wait for every process (so that all read the result cache in the same state before sharding)."""
    if size > 1:
        import torch.distributed as dist

        dist.barrier()


def gather(local: dict[int, Any], size: int) -> dict[int, Any]:
    """Union of every process's `local` (request index -> result)."""
    if size == 1:
        return local
    import torch.distributed as dist

    parts: list[dict[int, Any] | None] = [None] * size
    dist.all_gather_object(parts, local)
    merged: dict[int, Any] = {}
    for part in parts:
        merged.update(part or {})
    return merged
