"""Data parallel scoring: every process holds the model, scores a shard of the requests, and all
processes get every result back in request order.

Works under `torchrun`, `accelerate launch --multi_gpu` (which is torchrun underneath, and also
starts several processes on a machine without GPUs) and `accelerate launch --cpu --mpirun_hostfile
...` (MPI). Without a GPU the processes talk over gloo, with CUDA over nccl. `accelerate launch
--cpu` without MPI starts ONE process whatever `--num_processes` says; `world()` warns when it sees
that.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from culture_probe.engine.types import CUT_KINDS, Cuts, Truncation
from culture_probe.errors import CultureProbeError
from culture_probe.util import jsonl

logger = logging.getLogger(__name__)

# Launcher variables that give the number of processes (torchrun/accelerate, then the MPI flavours).
SIZE_VARIABLES = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")
# A folder: each process appends one JSON line per `gather` (rank, size, request indices it scored)
# to rank<r>.jsonl there, so that tests and users can check the work was really split.
TRACE_VARIABLE = "CULTURE_PROBE_SHARD_TRACE"


# set within `alone()`, per thread
_ALONE = threading.local()


@contextmanager
def alone() -> Iterator[None]:
    """Within the block this process works by itself, whatever launched it: what it scores is no
    part of the run's shared work (the machine's speed, measured on synthetic requests), so it is
    neither split, gathered nor traced, and no process waits for the others.
    """
    before = getattr(_ALONE, "on", False)
    _ALONE.on = True
    try:
        yield
    finally:
        _ALONE.on = before


def world() -> tuple[int, int]:
    """(rank, number of processes); (0, 1) when not launched by a distributed launcher, or within
    `alone()`.
    """
    import torch.distributed as dist

    if getattr(_ALONE, "on", False):
        return 0, 1

    if not dist.is_available():
        return 0, 1
    if not dist.is_initialized() and _launched_size() > 1:
        _init_process_group()
    if not dist.is_initialized():
        _warn_if_cpu_launch_started_one()
        return 0, 1
    return dist.get_rank(), dist.get_world_size()


def _launched_size() -> int:
    """The number of processes the launcher says it started (1 when none did)."""
    for name in SIZE_VARIABLES:
        if os.environ.get(name):
            return int(os.environ[name])
    return 1


def _init_process_group() -> None:
    """Set up the process group through accelerate, on gloo when there is no GPU.

    `PartialState()` alone picks the backend from the device: under torchrun on a CPU-only machine
    it finds no GPU and silently falls back to one process per launch (every process scoring
    everything).
    """
    import torch
    from accelerate import PartialState

    accelerator = (
        torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
    )
    PartialState(cpu=accelerator is None or accelerator.type == "mps")
    atexit.register(_destroy_process_group)


def _destroy_process_group() -> None:
    """Tear the process group down while the interpreter is still whole. Left to interpreter
    shutdown, gloo's worker threads can abort a process that finished its work (SIGABRT, "terminate
    called without an active exception"; pytorch/pytorch#190489), and the launcher then reports the
    run as failed.
    """
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def _warn_if_cpu_launch_started_one() -> None:
    """`accelerate launch --cpu --num_processes N` (N > 1) without MPI runs one process: say so,
    once.
    """
    if os.environ.get("ACCELERATE_USE_CPU", "").lower() in ("1", "true") and os.environ.get(
        "MASTER_ADDR"
    ):
        warnings.warn(
            "accelerate launch --cpu started a single process (several CPU processes need MPI); "
            "use `accelerate launch --multi_gpu --num_processes N` (or torchrun) to split the work "
            "over N CPU processes",
            stacklevel=3,
        )


def barrier(size: int) -> None:
    """Wait for every process (so that all read the result cache in the same state before
    sharding).
    """
    if size > 1:
        import torch.distributed as dist

        dist.barrier()


def raise_together(error: Exception | None, size: int) -> None:
    """Raise on every process when any process met an error (its own where it met one, the first by
    rank's on the others, of the same type where it can be rebuilt from its message): a process
    whose share held a bad request would otherwise leave the others waiting in the next gather.
    """
    if size == 1:
        if error is not None:
            raise error
        return
    import torch.distributed as dist

    parts: list[tuple[type, str] | None] = [None] * size
    dist.all_gather_object(parts, None if error is None else (type(error), str(error)))
    if error is not None:
        raise error
    met = next(((rank, part) for rank, part in enumerate(parts) if part is not None), None)
    if met is None:
        return
    rank, (kind, message) = met
    try:
        raised = kind(message)
    except Exception:  # noqa: BLE001 - an error type that takes other arguments
        raised = CultureProbeError(message)
    raise raised from RuntimeError(f"raised by process {rank} of {size}")


def sum_truncation(before: Truncation, after: Truncation, size: int) -> Truncation:
    """What every process's encoder cut since `before` (this process's count then; `after` its count
    now), added to `before`: the processes prepared disjoint shares, so each one's record then
    counts the whole call.
    """
    if size == 1:
        return after
    import torch.distributed as dist

    mine = Truncation(*(_minus(getattr(after, k), getattr(before, k)) for k in CUT_KINDS))
    parts: list[Truncation | None] = [None] * size
    dist.all_gather_object(parts, mine)
    return functools.reduce(Truncation.plus, (p for p in parts if p is not None), before)


def _minus(now: Cuts, then: Cuts) -> Cuts:
    """The cuts counted between `then` and `now` (the largest cut: now's, an upper bound of the new
    ones').
    """
    return Cuts(
        now.encoded - then.encoded,
        now.cut - then.cut,
        now.tokens_cut - then.tokens_cut,
        now.max_cut,
    )


def gather(local: dict[int, Any], size: int) -> dict[int, Any]:
    """Union of every process's `local` (request index -> result)."""
    rank = 0
    if size > 1:
        import torch.distributed as dist

        rank = dist.get_rank()
    logger.info("process %d of %d scored %d request(s)", rank, size, len(local))
    _trace(rank, size, sorted(local))
    if size == 1:
        return local
    parts: list[dict[int, Any] | None] = [None] * size
    dist.all_gather_object(parts, local)
    merged: dict[int, Any] = {}
    for part in parts:
        merged.update(part or {})
    return merged


def _trace(rank: int, size: int, indices: list[int]) -> None:
    """Append this process's shard to the trace folder named by $CULTURE_PROBE_SHARD_TRACE, if
    set.
    """
    folder = os.environ.get(TRACE_VARIABLE)
    if folder and not getattr(_ALONE, "on", False):
        with open(Path(folder) / f"rank{rank}.jsonl", "a", encoding="utf-8") as f:
            f.write(jsonl.line({"rank": rank, "size": size, "indices": indices}))


def local_device(device: Any = None) -> Any:
    """The device this process should use: `device` as given, except that a bare "cuda" (or None on
    a machine with GPUs) means this process's own GPU, `cuda:<LOCAL_RANK>`, so that N processes use
    N GPUs.
    """
    import torch

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if str(device) == "cuda":
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device(device)
