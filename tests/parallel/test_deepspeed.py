"""The vocabulary-parallel embedding as an add-on to DeepSpeed 0.19.8 AutoTP (CPU, gloo, 2 ranks).

One spawn runs every check (importing DeepSpeed costs seconds per rank). AutoTP
shards the attention/MLP linears and the gathered lm_head; our add-on shards the
input embedding over the same group. Losses of 2 steps and the gathered
embedding equal single-process training (``gradient_clipping: 0``: DeepSpeed
clips at 1.0 by default), trained on rank 0 from a copy taken before
DeepSpeed wraps the model (same thread settings), within the bounds
:func:`_parity.assert_parity` derives from fp32's eps.

DeepSpeed JIT-compiles a shared-memory allreduce op on first use (minutes on 2
cores); the ranks mark it incompatible so that gloo carries every collective.
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
from _llama import (
    HIDDEN,
    LR,
    VOCAB,
    batches,
    build_llama,
    dims,
    full_loss,
    make_optimizer,
    optimizer_settings,
    train,
)
from _parity import assert_parity
from torch import nn

from tokembed.errors import UsageError
from tokembed.parallel.deepspeed_tp import initialize_autotp

require_deepspeed()

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

_TP = 2


def _config(*, zero: int, sgd: bool, **tp: Any) -> dict[str, Any]:
    config = ds_config(
        zero=zero, tensor_parallel={"autotp_size": _TP, "vocab_parallel_embedding": True, **tp}
    )
    if sgd:
        config["optimizer"] = {"type": "SGD", "params": {"lr": LR["sgd"]}}
    return config


def _reference(model: nn.Module, kind: str) -> dict[str, Any] | None:
    """The unsharded copy trained on rank 0 (None elsewhere): what the engine must match."""
    import torch.distributed as dist

    if dist.get_rank() != 0:
        return None
    return train(model, make_optimizer(kind, model.parameters()), batches(), full_loss)


def _checks(rank: int, world_size: int) -> dict[str, Any]:
    setup_rank(rank, world_size)
    from deepspeed.module_inject.layers import HiddenParallelEmbedding

    from tokembed.parallel.deepspeed_tp import autotp_group
    from tokembed.parallel.shard import shard_input_embedding
    from tokembed.parallel.vocab_embedding import VocabParallelEmbedding

    out: dict[str, Any] = {}
    runs = {
        "untied-sgd-zero0": (False, "sgd", 0),
        "untied-sgd-zero1": (False, "sgd", 1),
        "untied-adamw-zero0": (False, "adamw", 0),
        "tied-sgd-zero0": (True, "sgd", 0),
    }
    engine = None
    for name, (tied, kind, zero) in runs.items():
        model = build_llama(tied=tied)
        full = copy.deepcopy(model)  # before DeepSpeed shards anything
        opt = None if kind == "sgd" else functools.partial(make_optimizer, kind)
        engine, *_ = initialize_autotp(
            model, _config(zero=zero, sgd=kind == "sgd"), optimizer=opt, tie=tied
        )
        emb = engine.module.get_input_embeddings()
        assert isinstance(emb, VocabParallelEmbedding), type(emb)
        losses = train_engine(engine, vp_loss if tied else hf_loss, batches())
        out[name] = {
            "losses": losses,
            "embedding": emb.gather_weight(),
            "rows": (emb.vocab_start, emb.vocab_end),
            "q_proj": type(engine.module.model.layers[0].self_attn.q_proj).__name__,
            "ref": _reference(full, kind),
        }
    assert engine is not None
    group = autotp_group(_TP)
    # DeepSpeed's own tied vocab-parallel head shards the pair: our call is a no-op.
    model = build_llama(tied=True)
    full = copy.deepcopy(model)
    ds_engine, *_ = initialize_autotp(
        model, _config(zero=0, sgd=True, vocab_parallel_lm_head=True), tie=False
    )
    out["deepspeed-head"] = {
        "embedding": type(ds_engine.module.get_input_embeddings()).__module__,
        "noop": shard_input_embedding(ds_engine.module, group=group),
        "losses": train_engine(ds_engine, hf_loss, batches()),
        "ref": _reference(full, "sgd"),
    }
    # Refusals in whole-model context.
    stale = build_llama(tied=False)
    stale_opt = torch.optim.AdamW(stale.parameters())
    linear_allreduce = engine.module.model.layers[0].self_attn.o_proj
    hidden_sliced = build_llama(tied=False)
    hidden_sliced.set_input_embeddings(
        HiddenParallelEmbedding(nn.Embedding(VOCAB, HIDDEN), mp_group=group)
    )
    allreduce_model = build_llama(tied=False)
    allreduce_model.set_input_embeddings(linear_allreduce)
    # A user partition_config that slices embed_tokens on the hidden dimension.
    slicing = {
        "partition_config": {
            "use_default_specs": False,
            "layer_specs": [
                {"patterns": [".*embed_tokens.*"], "partition_type": "row"},
                {"patterns": [".*\\.o_proj$", ".*\\.down_proj$"], "partition_type": "row"},
                {
                    "patterns": [".*\\.[qkv]_proj$", ".*\\.(up|gate)_proj$"],
                    "partition_type": "column",
                },
            ],
        },
    }
    sliced = build_llama(tied=False)
    sliced_engine, *_ = initialize_autotp(
        sliced, _config(zero=0, sgd=True, vocab_parallel_embedding=False, **slicing)
    )
    out["refusals"] = {
        "partition_config_slice": code_of(
            lambda: initialize_autotp(build_llama(tied=False), _config(zero=0, sgd=True, **slicing))
        ),
        "deepspeed_sliced": code_of(
            lambda: shard_input_embedding(sliced_engine.module, group=group)
        ),
        "deepspeed_sliced_shape": tuple(sliced_engine.module.get_input_embeddings().weight.shape),
        "tied": code_of(
            lambda: initialize_autotp(build_llama(tied=True), _config(zero=0, sgd=True))
        ),
        "stale_optimizer": code_of(
            lambda: initialize_autotp(stale, _config(zero=0, sgd=False), optimizer=stale_opt)
        ),
        "stale_left_unsharded": type(stale.get_input_embeddings()).__name__,
        "hidden_parallel_embedding": code_of(
            lambda: shard_input_embedding(hidden_sliced, group=group)
        ),
        "linear_allreduce": code_of(lambda: shard_input_embedding(allreduce_model, group=group)),
        "linear_allreduce_type": type(linear_allreduce).__name__,
    }
    return out


@functools.cache
def _results() -> list[dict[str, Any]]:
    return run_ranks(_checks, _TP, timeout=400.0)


@pytest.mark.parametrize(
    ("name", "tied", "kind"),
    [
        ("untied-sgd-zero0", False, "sgd"),
        ("untied-sgd-zero1", False, "sgd"),
        ("untied-adamw-zero0", False, "adamw"),
        ("tied-sgd-zero0", True, "sgd"),
    ],
)
def test_autotp_with_sharded_embedding_matches_single_process(
    name: str, tied: bool, kind: str
) -> None:
    halves = [(0, 66), (66, 131)]
    ref = _results()[0][name]["ref"]
    for rank, result in enumerate(_results()):
        run = result[name]
        assert run["rows"] == halves[rank]
        assert run["q_proj"] == "LinearLayer"  # AutoTP did shard the linears
        # AutoTP's row-parallel all-reduces reorder fp32 sums: bounds derived from eps.
        assert_embedding_parity(run, ref, kind=kind)


def test_deepspeed_sharded_tied_pair_makes_our_call_a_noop() -> None:
    ref = _results()[0]["deepspeed-head"]["ref"]
    for result in _results():
        run = result["deepspeed-head"]
        assert run["embedding"] == "deepspeed.module_inject.layers"
        assert run["noop"] is None
        assert_parity(
            {"losses": run["losses"], "state": {}},
            ref,
            dtype=torch.float32,
            dims=dims(),
            optimizer=optimizer_settings("sgd"),
            keys=[],
        )


def test_refusals_in_a_deepspeed_model() -> None:
    for result in _results():
        refusals = result["refusals"]
        assert refusals["tied"] == "TIED_WITHOUT_SHARDED_HEAD"
        assert refusals["stale_optimizer"] == "NON_OWNER_STEP"
        assert refusals["stale_left_unsharded"] == "Embedding"  # refused before any change
        assert refusals["hidden_parallel_embedding"] == "ALREADY_PARALLELIZED"
        assert refusals["linear_allreduce_type"] == "LinearAllreduce"
        assert refusals["linear_allreduce"] == "ALREADY_PARALLELIZED"
        # A hidden-dimension slice cannot be row-sharded, whether the user's partition
        # config asks for it or AutoTP already did it.
        assert refusals["partition_config_slice"] == "HIDDEN_DIM_SHARDED"
        assert refusals["deepspeed_sliced_shape"] == (131, 16)
        assert refusals["deepspeed_sliced"] == "HIDDEN_DIM_SHARDED"


@pytest.mark.parametrize(
    "config",
    [
        {"tensor_parallel": {"vocab_parallel_embedding": True}},
        {
            "tensor_parallel": {"autotp_size": 2},
            "compile": {"deepcompile": True, "passes": ["autotp"]},
        },
    ],
    ids=["no-autotp-size", "deepcompile-autotp"],
)
def test_configs_the_add_on_cannot_serve_are_refused_before_any_change(
    config: dict[str, Any],
) -> None:
    model = build_llama(tied=False)
    before = model.get_input_embeddings()
    with pytest.raises(UsageError) as e:
        initialize_autotp(model, config)
    assert e.value.code == "INVALID_ARGUMENT"
    assert model.get_input_embeddings() is before
