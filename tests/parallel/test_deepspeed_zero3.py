"""ZeRO-3 without AutoTP, with our TokenEmbedding and tied head (DeepSpeed 0.19.8, CPU, gloo, 2 ranks).

Data parallelism over 2 ranks: each rank trains on its half of every batch
(micro-batch 2), ZeRO-3 partitions every parameter over the two ranks, and the
Llama's input embedding is a :class:`TokenEmbedding` bound to a tokenizer's
address hash (tied: the same Parameter is the head's weight). Two AdamW steps
equal one process on the whole batches: the mean of the ranks' losses and the
final embedding (gathered with ``deepspeed.zero.GatheredParameters``) within the
eps-derived bounds. Between forwards each rank holds only its partition of the
table; the lookup's id and address-hash checks run inside the forward, on the
rows DeepSpeed gathers there, and refuse bad ids with their codes.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import os
from typing import Any

import pytest
import torch
from _deepspeed_ranks import code_of, setup_rank
from _harness import run_ranks
from _llama import batches, build_llama, dims, full_loss, make_optimizer, optimizer_settings, train
from _parity import assert_parity
from torch import nn

from tokembed.embedding.addressed import AddressedIds
from tokembed.embedding.lookup import TokenEmbedding

if importlib.util.find_spec("deepspeed") is None:
    _REASON = "deepspeed is not installed (make test installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(_REASON, pytrace=False)
    pytest.skip(_REASON, allow_module_level=True)

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

_WORLD = 2
_KEY = "model.embed_tokens.weight"
_HASH, _OTHER = ("sha256:" + c * 64 for c in "ab")


def _model(tied: bool) -> nn.Module:
    model = build_llama(tied=tied)
    model.set_input_embeddings(
        TokenEmbedding.from_embedding(model.get_input_embeddings(), address_hash=_HASH)
    )
    if tied:
        assert model.lm_head.weight is model.get_input_embeddings().weight
    return model


def _loss(engine: Any, ids: torch.Tensor) -> torch.Tensor:
    out: torch.Tensor = full_loss(engine, ids, ids)
    return out


def _checks(rank: int, world_size: int) -> dict[str, Any]:
    setup_rank(rank, world_size)
    import deepspeed
    import torch.distributed as dist

    out: dict[str, Any] = {}
    for tied in (False, True):
        model = _model(tied)
        full = copy.deepcopy(model)
        config = {
            "train_micro_batch_size_per_gpu": 2,
            "gradient_clipping": 0.0,
            # Without the threshold at 0 ZeRO-3 keeps tables this small whole on every rank.
            "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0},
            "zero_allow_untested_optimizer": True,
            "steps_per_print": 10**6,
        }
        engine, *_ = deepspeed.initialize(
            model=model,
            model_parameters=model.parameters(),
            optimizer=functools.partial(make_optimizer, "adamw"),
            config=config,
        )
        emb = engine.module.get_input_embeddings()
        losses = []
        for ids in batches():
            loss = _loss(engine, ids[2 * rank : 2 * rank + 2])
            engine.backward(loss)
            engine.step()
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            losses.append(float(mean) / world_size)
        partition_rows = tuple(emb.weight.shape)  # what the rank holds between forwards
        with deepspeed.zero.GatheredParameters([emb.weight]):
            embedding = emb.weight.detach().clone()
        # Refusals inside a forward: DeepSpeed's hooks gather the rows for it.
        wrong_hash = AddressedIds(ids=torch.tensor([[1, 2]]), address_hash=_OTHER)
        ref = None
        if rank == 0:
            ref = train(full, make_optimizer("adamw", full.parameters()), batches(), full_loss)
        out["tied" if tied else "untied"] = {
            "losses": losses,
            "embedding": embedding,
            "partition": partition_rows,
            "type": type(emb).__name__,
            "wrong_hash": code_of(functools.partial(emb, wrong_hash)),
            "out_of_range": code_of(functools.partial(emb, torch.tensor([[1, 131]]))),
            "ref": ref,
        }
    return out


@functools.cache
def _results() -> list[dict[str, Any]]:
    return run_ranks(_checks, _WORLD, timeout=400.0)


@pytest.mark.parametrize("name", ["untied", "tied"])
def test_zero3_with_token_embedding_matches_one_process(name: str) -> None:
    ref = _results()[0][name]["ref"]
    for result in _results():
        run = result[name]
        assert run["type"] == "TokenEmbedding"
        assert run["partition"] == (0,)  # partitioned away between forwards
        assert_parity(
            {"losses": run["losses"], "state": {_KEY: run["embedding"]}},
            ref,
            dtype=torch.float32,
            dims=dims(),
            optimizer=optimizer_settings("adamw"),
            keys=[_KEY],
        )


@pytest.mark.parametrize("name", ["untied", "tied"])
def test_zero3_lookup_checks_refuse_without_the_full_table(name: str) -> None:
    for result in _results():
        assert result[name]["wrong_hash"] == "ADDRESS_HASH_MISMATCH"
        assert result[name]["out_of_range"] == "ID_OUT_OF_RANGE"
