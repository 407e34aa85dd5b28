"""What every DeepSpeed test rank does first, and the small pieces the DeepSpeed tests share.

``setup_rank`` sets the variables a launcher would set (DeepSpeed asserts on
LOCAL_RANK) and keeps every collective on gloo: DeepSpeed otherwise JIT-compiles
a shared-memory allreduce op on first use (minutes on 2 cores).
"""

from __future__ import annotations

import os
from typing import Any

import torch

from tokembed.errors import TokembedError

__all__ = [
    "code_of",
    "hf_loss",
    "setup_rank",
    "train_data_parallel",
    "train_engine",
    "vp_loss",
]


def setup_rank(rank: int, world_size: int) -> None:
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size))
    import deepspeed

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False


def code_of(fn: Any) -> str | None:
    """The code of the TokembedError ``fn()`` raises, None when it returns."""
    try:
        fn()
    except TokembedError as error:
        return error.code
    return None


def hf_loss(engine: Any, ids: torch.Tensor) -> torch.Tensor:
    return engine(input_ids=ids, labels=ids).loss


def vp_loss(engine: Any, ids: torch.Tensor) -> torch.Tensor:
    from tokembed.parallel.causal_lm import causal_lm_loss

    return causal_lm_loss(engine.module, ids)


def train_engine(engine: Any, loss_fn: Any, data: list[torch.Tensor]) -> list[float]:
    losses = []
    for ids in data:
        loss = loss_fn(engine, ids)
        losses.append(loss.item())
        engine.backward(loss)
        engine.step()
    return losses


def train_data_parallel(
    engine: Any, loss_fn: Any, data: list[torch.Tensor], rank: int, world_size: int
) -> list[float]:
    """Each rank steps on its slice of every batch; returns the ranks' mean loss per step.

    ``loss_fn(engine, ids, labels)``. Equal slices without padding make the mean of
    the ranks' mean losses the whole batch's mean loss, as one process computes it.
    """
    import torch.distributed as dist

    losses = []
    for ids in data:
        part = ids.shape[0] // world_size
        mine = ids[part * rank : part * (rank + 1)]
        loss = loss_fn(engine, mine, mine)
        engine.backward(loss)
        engine.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(float(mean) / world_size)
    return losses
