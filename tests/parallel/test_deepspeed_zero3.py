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
from typing import Any

import pytest
import torch
from _deepspeed_ranks import (
    assert_embedding_parity,
    code_of,
    ds_config,
    require_deepspeed,
    setup_rank,
    train_data_parallel,
)
from _harness import run_ranks
from _llama import batches, build_llama, full_loss, make_optimizer, train
from torch import nn

from tokembed.embedding.addressed import AddressedIds
from tokembed.embedding.lookup import TokenEmbedding

require_deepspeed()

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

_WORLD = 2
_HASH, _OTHER = ("sha256:" + c * 64 for c in "ab")


def _model(tied: bool) -> nn.Module:
    model = build_llama(tied=tied)
    model.set_input_embeddings(
        TokenEmbedding.from_embedding(model.get_input_embeddings(), address_hash=_HASH)
    )
    if tied:
        assert model.lm_head.weight is model.get_input_embeddings().weight
    return model


def _checks(rank: int, world_size: int) -> dict[str, Any]:
    setup_rank(rank, world_size)
    import deepspeed

    out: dict[str, Any] = {}
    for tied in (False, True):
        model = _model(tied)
        full = copy.deepcopy(model)
        config = ds_config(
            zero=3,
            micro_batch=2,
            # Without the threshold at 0 ZeRO-3 keeps tables this small whole on every rank.
            zero_optimization={"stage": 3, "stage3_param_persistence_threshold": 0},
        )
        engine, *_ = deepspeed.initialize(
            model=model,
            model_parameters=model.parameters(),
            optimizer=functools.partial(make_optimizer, "adamw"),
            config=config,
        )
        emb = engine.module.get_input_embeddings()
        losses = train_data_parallel(engine, full_loss, batches(), rank, world_size)
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
        assert_embedding_parity(run, ref)


@pytest.mark.parametrize("name", ["untied", "tied"])
def test_zero3_lookup_checks_refuse_without_the_full_table(name: str) -> None:
    for result in _results():
        assert result[name]["wrong_hash"] == "ADDRESS_HASH_MISMATCH"
        assert result[name]["out_of_range"] == "ID_OUT_OF_RANGE"
