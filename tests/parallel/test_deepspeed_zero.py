"""AutoTP x ZeRO-1 and ZeRO-2 with the vocabulary-parallel embedding (DeepSpeed 0.19.8, CPU, gloo, 2 ranks).

Each cell trains 2 AdamW steps through a real DeepSpeed engine on 2 spawned
gloo ranks (AutoTP 2) and is compared with one process trained on rank 0 from a
copy taken before DeepSpeed wraps the model, within the bounds
:func:`_parity.assert_parity` derives from the dtype's eps: untied (the HF
model's loss) and tied (our tied head and the vocabulary-parallel loss), fp32
and bf16 with fp32 master weights. The bf16 reference keeps fp32 master
copies too: bf16 forward and backward, AdamW on the fp32 copies, weights cast
back after each step (what DeepSpeed's bf16 optimizer does).

ZeRO-3 with AutoTP also runs on DeepSpeed 0.19.8 (its engine supports the pair;
at 2 ranks and AutoTP 2 the data-parallel group is one rank, so ZeRO-3
partitions over a group of one): fp32, untied and tied. Refused before any
change: an autotp_size that does not divide the world.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import pytest
import torch
from _deepspeed_ranks import (
    assert_embedding_parity,
    code_of,
    ds_config,
    hf_loss,
    require_deepspeed,
    setup_rank,
    train_engine,
    vp_loss,
)
from _harness import run_ranks
from _llama import batches, build_llama, full_loss, make_optimizer, train
from torch import nn

from tokembed.parallel.deepspeed_tp import initialize_autotp

require_deepspeed()

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

_TP = 2
CELLS = {
    f"{'tied' if tied else 'untied'}-zero{zero}-{dtype}": (tied, zero, dtype)
    for dtype in ("fp32", "bf16")
    for zero in (1, 2, 3)
    for tied in (False, True)
    if not (zero == 3 and dtype == "bf16")
}
# One spawn per group keeps each under ~30 s on two shared cores.
_GROUP = {name: "zero3" if zero == 3 else dtype for name, (_, zero, dtype) in CELLS.items()}


def config(*, zero: int, bf16: bool = False, tp: int = _TP) -> dict[str, Any]:
    return ds_config(
        zero=zero, bf16=bf16, tensor_parallel={"autotp_size": tp, "vocab_parallel_embedding": True}
    )


def _bf16_reference(model: nn.Module, loss_fn: Any) -> dict[str, Any]:
    """bf16 forward/backward, AdamW on fp32 master copies, cast back each step."""
    model = model.to(torch.bfloat16)
    params = [p for p in model.parameters()]
    masters = [p.detach().float().clone().requires_grad_(True) for p in params]
    opt = make_optimizer("adamw", masters)
    names = {id(p): n for n, p in model.named_parameters()}
    losses, grads, moments = [], [], []
    for step, ids in enumerate(batches(), start=1):
        loss = loss_fn(model, ids, ids)
        losses.append(loss.item())
        loss.backward()
        grads.append({names[id(p)]: p.grad.float().clone() for p in params})
        for p, m in zip(params, masters, strict=True):
            m.grad = p.grad.float()
            p.grad = None
        opt.step()
        opt.zero_grad()
        with torch.no_grad():
            for p, m in zip(params, masters, strict=True):
                p.copy_(m)
        beta2 = opt.param_groups[0]["betas"][1]
        moments.append(
            {
                names[id(p)]: opt.state[m]["exp_avg_sq"] / (1 - beta2**step)
                for p, m in zip(params, masters, strict=True)
            }
        )
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return {"losses": losses, "grads": grads, "state": state, "second_moments": moments}


def _hf_full_loss(model: nn.Module, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    out: torch.Tensor = model(input_ids=ids, labels=labels).loss
    return out


def _checks(rank: int, world_size: int, group: str) -> dict[str, Any]:
    setup_rank(rank, world_size)
    import deepspeed

    from tokembed.parallel.vocab_embedding import VocabParallelEmbedding

    out: dict[str, Any] = {}
    for name, (tied, zero, dtype) in CELLS.items():
        if _GROUP[name] != group:
            continue
        bf16 = dtype == "bf16"
        model = build_llama(tied=tied)
        full = copy.deepcopy(model)
        engine, *_ = initialize_autotp(
            model,
            config(zero=zero, bf16=bf16),
            optimizer=functools.partial(make_optimizer, "adamw"),
            tie=tied,
        )
        emb = engine.module.get_input_embeddings()
        assert isinstance(emb, VocabParallelEmbedding), type(emb)
        losses = train_engine(engine, vp_loss if tied else hf_loss, batches())
        ref = None
        if rank == 0:
            if bf16:
                ref = _bf16_reference(full, full_loss if tied else _hf_full_loss)
            else:
                opt = make_optimizer("adamw", full.parameters())
                ref = train(full, opt, batches(), full_loss)
        out[name] = {
            "losses": losses,
            "embedding": _gathered(deepspeed, emb),
            "dtype": str(emb.weight.dtype),
            "optimizer": type(engine.optimizer).__name__,
            "ref": ref,
        }
    if group == "fp32":
        out["indivisible"] = code_of(
            lambda: initialize_autotp(build_llama(tied=False), config(zero=1, tp=3))
        )
    return out


def _gathered(deepspeed: Any, emb: Any) -> torch.Tensor:
    # Under ZeRO-3 the shard itself is partitioned over the data-parallel group (of one
    # rank here) between forwards: gather it first (a no-op at ZeRO-1/2).
    with deepspeed.zero.GatheredParameters([emb.weight]):
        out: torch.Tensor = emb.gather_weight()
    return out


@functools.cache
def _results(group: str) -> list[dict[str, Any]]:
    return run_ranks(_checks, _TP, group, timeout=400.0)


@pytest.mark.parametrize("name", list(CELLS))
def test_autotp_zero_cell_matches_one_process(name: str) -> None:
    _, zero, dtype = CELLS[name]
    results = _results(_GROUP[name])
    ref = results[0][name]["ref"]
    for result in results:
        run = result[name]
        assert run["dtype"] == ("torch.bfloat16" if dtype == "bf16" else "torch.float32")
        want = "DeepSpeedZeroOptimizer_Stage3" if zero == 3 else "DeepSpeedZeroOptimizer"
        assert run["optimizer"] == want
        assert_embedding_parity(
            run, ref, dtype=torch.bfloat16 if dtype == "bf16" else torch.float32
        )


def test_autotp_size_not_dividing_the_world_is_refused() -> None:
    assert [r["indivisible"] for r in _results("fp32")] == ["INVALID_ARGUMENT"] * _TP
