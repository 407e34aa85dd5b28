"""The reviewer's DeepSpeed AutoTP cases (DeepSpeed 0.19.8, CPU, gloo, 2 ranks, AutoTP 2).

* untied + DeepSpeed's ``vocab_parallel_lm_head``: the head sharded by DeepSpeed
  (VocabParallelLinear, its distributed loss), the embedding by us; equal to one
  process (AdamW, ZeRO-1);
* tied + a row-parallel head (``partition_config`` branch): with our embedding on,
  refused before any change (HIDDEN_DIM_SHARDED: DeepSpeed would demand an
  nn.Embedding sliced on the hidden dimension); with it off, DeepSpeed builds a
  HiddenParallelEmbedding, and sharding that afterwards is refused with
  ALREADY_PARALLELIZED (never "needs nn.Embedding, got HiddenParallelEmbedding");
* the heuristic branch (a model without a Hugging Face tp_plan): our embedding
  with DeepSpeed's heuristic AutoTP, equal to one process;
* ``vocab_parallel_embedding: null`` follows the plan's ``embedding_rowwise``.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import pytest
from _deepspeed_ranks import (
    assert_embedding_parity,
    code_of,
    ds_config,
    hf_loss,
    require_deepspeed,
    setup_rank,
    train_engine,
)
from _harness import run_ranks
from _llama import batches, build_llama, full_loss, make_optimizer, train
from torch import nn

from tokembed.errors import UsageError
from tokembed.parallel.deepspeed_tp import initialize_autotp

require_deepspeed()

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

_TP = 2
_ROW_HEAD = {
    "partition_config": {
        "use_default_specs": False,
        "layer_specs": [
            {"patterns": [".*lm_head.*"], "partition_type": "row"},
            {"patterns": [".*\\.o_proj$", ".*\\.down_proj$"], "partition_type": "row"},
            {"patterns": [".*\\.[qkv]_proj$", ".*\\.(up|gate)_proj$"], "partition_type": "column"},
        ],
    }
}


def _config(*, zero: int = 1, **tp: Any) -> dict[str, Any]:
    """ZeRO-1 for the trained cells; ZeRO-0 for engines built only to be looked at."""
    return ds_config(zero=zero, tensor_parallel={"autotp_size": _TP, **tp})


def _no_plan(model: nn.Module) -> nn.Module:
    """The same model with no Hugging Face tp_plan anywhere DeepSpeed looks."""
    model.config.base_model_tp_plan = None
    model.__dict__["_tp_plan"] = None
    model.__class__ = type("LlamaWithoutPlan", (type(model),), {"_tp_plan": None})
    return model


def _trained(rank: int, model: nn.Module, **tp: Any) -> dict[str, Any]:
    full = copy.deepcopy(model)
    opt = functools.partial(make_optimizer, "adamw")
    engine, *_ = initialize_autotp(model, _config(**tp), optimizer=opt)
    emb = engine.module.get_input_embeddings()
    losses = train_engine(engine, hf_loss, batches())
    ref = None
    if rank == 0:
        ref = train(full, make_optimizer("adamw", full.parameters()), batches(), full_loss)
    return {
        "losses": losses,
        "embedding": emb.gather_weight(),
        "types": (type(emb).__name__, type(engine.module.lm_head).__name__),
        "q_proj": type(engine.module.model.layers[0].self_attn.q_proj).__name__,
        "ref": ref,
    }


def _checks(rank: int, world_size: int) -> dict[str, Any]:
    setup_rank(rank, world_size)
    from tokembed.parallel.deepspeed_tp import autotp_group
    from tokembed.parallel.shard import shard_input_embedding

    out: dict[str, Any] = {}
    out["vocab-parallel-head"] = _trained(
        rank, build_llama(tied=False), vocab_parallel_embedding=True, vocab_parallel_lm_head=True
    )
    out["heuristic"] = _trained(rank, _no_plan(build_llama(tied=False)))

    tied = build_llama(tied=True)
    out["row-head-ours"] = code_of(lambda: initialize_autotp(tied, _config(**_ROW_HEAD), tie=True))
    out["row-head-ours-untouched"] = (
        type(tied.get_input_embeddings()).__name__,
        type(tied.lm_head).__name__,
        tied.lm_head.weight is tied.get_input_embeddings().weight,
    )
    engine, *_ = initialize_autotp(
        build_llama(tied=True), _config(zero=0, vocab_parallel_embedding=False, **_ROW_HEAD)
    )
    out["row-head-deepspeed"] = type(engine.module.get_input_embeddings()).__name__
    try:
        shard_input_embedding(engine.module, group=autotp_group(_TP), tie=True)
        out["row-head-after"] = None
    except Exception as error:  # the code and the whole text the user reads
        out["row-head-after"] = (getattr(error, "code", None), str(error))

    follow = build_llama(tied=False)
    engine, *_ = initialize_autotp(follow, _config(zero=0, vocab_parallel_embedding=None))
    out["follow-plan"] = type(engine.module.get_input_embeddings()).__name__
    unplanned = build_llama(tied=False)
    plan = dict(unplanned.__dict__["_tp_plan"])
    del plan["model.embed_tokens"]
    unplanned.__dict__["_tp_plan"] = plan
    engine, *_ = initialize_autotp(unplanned, _config(zero=0, vocab_parallel_embedding=None))
    out["plan-without-embedding"] = (
        type(engine.module.get_input_embeddings()).__name__,
        type(engine.module.model.layers[0].self_attn.q_proj).__name__,
    )
    return out


@functools.cache
def _results() -> list[dict[str, Any]]:
    return run_ranks(_checks, _TP, timeout=400.0)


@pytest.mark.parametrize("name", ["vocab-parallel-head", "heuristic"])
def test_cell_matches_one_process(name: str) -> None:
    ref = _results()[0][name]["ref"]
    for result in _results():
        run = result[name]
        assert run["types"][0] == "VocabParallelEmbedding"
        if name == "vocab-parallel-head":
            assert run["types"][1] == "VocabParallelLinear"  # sharded by DeepSpeed, no gather
        assert run["q_proj"] == "LinearLayer"
        assert_embedding_parity(run, ref)


def test_tied_row_parallel_head_is_refused_or_left_to_deepspeed() -> None:
    for result in _results():
        assert result["row-head-ours"] == "HIDDEN_DIM_SHARDED"
        assert result["row-head-ours-untouched"] == ("Embedding", "Linear", True)
        assert result["row-head-deepspeed"] == "HiddenParallelEmbedding"
        code, text = result["row-head-after"]
        assert code == "ALREADY_PARALLELIZED"
        assert "needs nn.Embedding" not in text


def test_null_flag_follows_the_hf_plan() -> None:
    for result in _results():
        assert result["follow-plan"] == "VocabParallelEmbedding"
        assert result["plan-without-embedding"] == ("Embedding", "LinearLayer")


def test_a_flag_that_is_not_a_boolean_or_null_is_refused() -> None:
    model = build_llama(tied=False)
    before = model.get_input_embeddings()
    with pytest.raises(UsageError) as e:
        initialize_autotp(model, _config(vocab_parallel_embedding="yes"))
    assert e.value.code == "INVALID_ARGUMENT"
    assert model.get_input_embeddings() is before


def test_the_heuristic_case_has_no_plan_for_deepspeed_to_read() -> None:
    from deepspeed.runtime.tensor_parallel.config import _get_hf_tp_plan

    assert _get_hf_tp_plan(build_llama(tied=False)) is not None
    assert _get_hf_tp_plan(_no_plan(build_llama(tied=False))) is None
