"""What every DeepSpeed test rank does first, and the small pieces the DeepSpeed tests share.

``setup_rank`` sets the variables a launcher would set (DeepSpeed asserts on
LOCAL_RANK) and keeps every collective on gloo: DeepSpeed otherwise JIT-compiles
a shared-memory allreduce op on first use (minutes on 2 cores).
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import pytest
import torch
from _llama import dims, optimizer_settings
from _parity import assert_parity

from tokembed.errors import TokembedError

__all__ = [
    "EMBED_KEY",
    "assert_embedding_parity",
    "code_of",
    "ds_config",
    "hf_loss",
    "require_deepspeed",
    "setup_rank",
    "train_data_parallel",
    "train_engine",
    "vp_loss",
]

EMBED_KEY = "model.embed_tokens.weight"


def require_deepspeed() -> None:
    """Skip the calling test module without DeepSpeed; under CI (make test installs it) fail.

    find_spec, not importorskip: importing DeepSpeed costs seconds in the test process.
    """
    if importlib.util.find_spec("deepspeed") is None:
        reason = "deepspeed is not installed (make test installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason, allow_module_level=True)


def ds_config(
    *, zero: int, micro_batch: int = 4, bf16: bool = False, **sections: Any
) -> dict[str, Any]:
    """The tests' DeepSpeed config: ZeRO ``zero``, no clipping, torch optimizers allowed.

    ``gradient_clipping`` is 0 (DeepSpeed clips at 1.0 by default) so losses compare with
    unclipped single-process training; ``sections`` add or replace top-level sections
    (``tensor_parallel={...}``, ``zero_optimization={...}``, ``optimizer={...}``).
    """
    out: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": micro_batch,
        "gradient_clipping": 0.0,
        "zero_optimization": {"stage": zero},
        "zero_allow_untested_optimizer": True,  # torch SGD / AdamW under ZeRO
        "steps_per_print": 10**6,
        **sections,
    }
    if bf16:
        out["bf16"] = {"enabled": True}
    return out


def assert_embedding_parity(
    run: dict[str, Any], ref: dict[str, Any], *, kind: str = "adamw", dtype: Any = torch.float32
) -> None:
    """A DeepSpeed run's losses and gathered input embedding (``run["embedding"]``) vs one process."""
    assert_parity(
        {"losses": run["losses"], "state": {EMBED_KEY: run["embedding"]}},
        ref,
        dtype=dtype,
        dims=dims(),
        optimizer=optimizer_settings(kind),
        keys=[EMBED_KEY],
    )


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
    """``loss_fn(engine, ids)`` stepped on every batch; returns the losses."""
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
