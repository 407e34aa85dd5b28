"""Whole-model checks on real gloo ranks: one spawn per world size runs them all.

``world_results(world_size)`` spawns the ranks once per test session (cached) and
returns, per rank, a dict of everything the test modules assert on: losses and
gathered weights of sharded training (untied, tied, head-sharded, TP x DP),
reshard round trips, collective ledgers and the error codes of refusals made in
whole-model context. Spawning once keeps the distributed tests within the time
budget on 2 cores (each child imports torch and transformers).
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from _harness import run_ranks
from _llama import BATCH, HIDDEN, TINY_VOCAB, VOCAB, batches, build_llama, make_optimizer, train
from torch import nn

from tokembed.errors import TokembedError
from tokembed.parallel.data_parallel import GradientReduction, reduce_gradients
from tokembed.parallel.intervals import row_intervals
from tokembed.parallel.ledger import count_collectives, memory_ledger
from tokembed.parallel.lm_head import VocabParallelLMHead
from tokembed.parallel.ownership import OwnerCheckedOptimizer, check_owned_step
from tokembed.parallel.reshard import load_vocab_shards, save_vocab_shards
from tokembed.parallel.shard import shard_input_embedding, shard_lm_head
from tokembed.parallel.vocab_embedding import VocabParallelEmbedding

__all__ = ["KINDS", "world_results"]

KINDS = ("sgd", "adamw")


def _hf_loss(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    return model(input_ids=ids, labels=ids).loss


def _vp_loss(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    from tokembed.parallel.causal_lm import causal_lm_loss

    return causal_lm_loss(model, ids)


def _gathered_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """Full state dict: sharded tables gathered, replicated tensors as they are."""
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    emb = model.get_input_embeddings()
    if isinstance(emb, VocabParallelEmbedding):
        state["model.embed_tokens.weight"] = emb.gather_weight()
    head = model.get_output_embeddings()
    if isinstance(head, VocabParallelLMHead):
        state["lm_head.weight"] = head.gather_weight()
    return state


def _run(
    *,
    tied: bool,
    kind: str,
    shard: Callable[[nn.Module], Any],
    loss_fn: Callable[[nn.Module, torch.Tensor], torch.Tensor],
    vocab: int = VOCAB,
) -> dict[str, Any]:
    model = build_llama(tied=tied, vocab=vocab)
    shard(model)
    opt = make_optimizer(kind, model.parameters())
    losses = train(model, opt, batches(vocab=vocab), loss_fn)
    return {"losses": losses, "state": _gathered_state(model)}


def _code(fn: Callable[[], object]) -> str | None:
    try:
        fn()
    except TokembedError as error:
        return error.code
    return None


def _parity(group: dist.ProcessGroup | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in KINDS:
        out[f"untied-{kind}"] = _run(
            tied=False,
            kind=kind,
            shard=lambda m: shard_input_embedding(m, group=group),
            loss_fn=_hf_loss,
        )
        out[f"tied-{kind}"] = _run(
            tied=True,
            kind=kind,
            shard=lambda m: shard_input_embedding(m, group=group, tie=True),
            loss_fn=_vp_loss,
        )
        out[f"untied-head-{kind}"] = _run(
            tied=False,
            kind=kind,
            shard=lambda m: (shard_lm_head(m, group=group), shard_input_embedding(m, group=group)),
            loss_fn=_vp_loss,
        )
    # A vocabulary so small that at 4 ranks the last shard is empty.
    out["tiny-untied-adamw"] = _run(
        tied=False,
        kind="adamw",
        shard=lambda m: shard_input_embedding(m, group=group),
        loss_fn=_hf_loss,
        vocab=TINY_VOCAB,
    )
    out["tiny-tied-adamw"] = _run(
        tied=True,
        kind="adamw",
        shard=lambda m: shard_input_embedding(m, group=group, tie=True),
        loss_fn=_vp_loss,
        vocab=TINY_VOCAB,
    )
    return out


def _model_facts(group: dist.ProcessGroup | None) -> dict[str, Any]:
    """Identity and ownership facts of sharded models (not values)."""
    tied = build_llama(tied=True)
    emb = shard_input_embedding(tied, group=group, tie=True)
    head = tied.get_output_embeddings()
    untied = build_llama(tied=False)
    first = shard_input_embedding(untied, group=group)
    second = shard_input_embedding(untied, group=group)  # already sharded: a no-op
    pre_head = build_llama(tied=True)
    shard_lm_head(pre_head, group=group)  # shards the tied pair; the embedding call is then a no-op
    return {
        "tied_same_parameter": head.weight is emb.weight,
        "tied_param_count": len({id(p) for p in tied.parameters()}),
        "tied_named_params": len(list(tied.named_parameters())),
        "interval": (emb.vocab_start, emb.vocab_end),
        "local_rows": int(emb.weight.shape[0]),
        "second_call": second,
        "first_is_vpe": isinstance(first, VocabParallelEmbedding),
        "after_head_call": shard_input_embedding(pre_head, group=group),
        "tied_refusal": _code(lambda: shard_input_embedding(build_llama(tied=True), group=group)),
        "dtensor_refusal": _dtensor_refusal(group),
    }


def _dtensor_refusal(group: dist.ProcessGroup | None) -> str | None:
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor.parallel import RowwiseParallel, parallelize_module

    model = build_llama(tied=False)
    ranks = dist.get_process_group_ranks(group) if group is not None else None
    mesh = DeviceMesh("cpu", ranks if ranks is not None else list(range(dist.get_world_size())))
    parallelize_module(model.model, mesh, {"embed_tokens": RowwiseParallel()})
    return _code(lambda: shard_input_embedding(model, group=group))


def _ledger(group: dist.ProcessGroup | None) -> dict[str, Any]:
    """Bytes handed to collectives by one forward + backward of the sharded table."""
    emb = VocabParallelEmbedding.from_embedding(nn.Embedding(VOCAB, HIDDEN), group=group)
    ids = batches()[0]
    with count_collectives() as ledger:
        emb(ids).square().sum().backward()
    table = nn.Embedding(VOCAB, HIDDEN)
    table(ids).sum().backward()
    with count_collectives() as replicated:
        assert table.weight.grad is not None
        dist.all_reduce(table.weight.grad, group=group)  # schedule A's dense gradient reduce
    opt = torch.optim.AdamW(emb.parameters())
    opt.step()
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import RowwiseParallel, parallelize_module

    dtensor = nn.Embedding(VOCAB, HIDDEN)
    mesh = DeviceMesh("cpu", list(range(dist.get_world_size())))
    parallelize_module(dtensor, mesh, RowwiseParallel(input_layouts=Replicate()))
    with count_collectives() as functional:  # DTensor's collectives are functional ops
        dtensor(ids).square().sum().backward()
    return {
        "vpe": ledger.by_op(),
        "replicated": replicated.by_op(),
        "dtensor": functional.by_op(),
        "memory": memory_ledger(emb, opt, table=emb.weight),
        "n_tokens": ids.numel(),
    }


def _reshard_same_world(group: dist.ProcessGroup | None, directory: str) -> dict[str, Any]:
    """Save at the group's size, load into a one-rank table: every rank has the full rows."""
    model = build_llama(tied=False, seed=3)
    emb = shard_input_embedding(model, group=group)
    assert emb is not None
    save_vocab_shards(emb, directory)
    full = emb.gather_weight()
    single = VocabParallelEmbedding(VOCAB, HIDDEN, group=_SELF_GROUP[dist.get_rank()])
    load_vocab_shards(single, directory)
    return {"full": full, "loaded": single.weight.detach().clone()}


_SELF_GROUP: dict[int, dist.ProcessGroup] = {}


def _make_self_groups() -> None:
    # new_group is collective over the world: every rank creates every singleton group.
    for r in range(dist.get_world_size()):
        g = dist.new_group([r])
        if r == dist.get_rank():
            _SELF_GROUP[r] = g


def _tp_dp_groups() -> tuple[dist.ProcessGroup, dist.ProcessGroup]:
    """TP pairs {0,1},{2,3} and DP pairs {0,2},{1,3}; every rank creates every group."""
    rank = dist.get_rank()
    tp = [dist.new_group(r) for r in ([0, 1], [2, 3])]
    dp = [dist.new_group(r) for r in ([0, 2], [1, 3])]
    return tp[rank // 2], dp[rank % 2]


def _replica_batches(replica: int) -> list[torch.Tensor]:
    half = BATCH[0] // 2
    return [ids[replica * half : (replica + 1) * half] for ids in batches()]


def _tp_dp_run(
    tp: dist.ProcessGroup, dp: dist.ProcessGroup, *, tied: bool, kind: str
) -> dict[str, Any]:
    """2 x 2: embedding sharded over TP, replicas of each shard reduced over DP."""
    model = build_llama(tied=tied)
    shard_input_embedding(model, group=tp, tie=tied)
    # Each replica's loss is the mean over its own (equal-sized) half: AVG over DP
    # then gives the global mean's gradient exactly once.
    reduction = GradientReduction(collective="avg", loss_normalization="local_mean")
    opt = OwnerCheckedOptimizer(make_optimizer(kind, model.parameters()), group=tp)
    losses = train(
        model,
        opt,  # type: ignore[arg-type]
        _replica_batches(dist.get_rank() // 2),
        _vp_loss if tied else _hf_loss,
        after_backward=lambda: reduce_gradients(
            model.parameters(), group=dp, reduction=reduction, tensor_group=tp
        ),
    )
    return {"losses": losses, "state": _gathered_state(model), "model": model}


def _double_averaging_run(tp: dist.ProcessGroup, dp: dist.ProcessGroup) -> dict[str, Any]:
    """One SGD step with a global-mean loss and an AVG all-reduce anyway: R-fold too small."""
    model = build_llama(tied=False)
    shard_input_embedding(model, group=tp)
    opt = make_optimizer("sgd", model.parameters())
    ids = _replica_batches(dist.get_rank() // 2)[0]
    # Local mean / DP size = this replica's share of the global mean.
    loss = _hf_loss(model, ids) / dist.get_world_size(dp)
    loss.backward()
    for p in model.parameters():
        assert p.grad is not None
        dist.all_reduce(p.grad, group=dp)
        p.grad /= dist.get_world_size(dp)  # the second division
    opt.step()
    return {"embedding": model.get_input_embeddings().gather_weight()}


def _group_refusals(tp: dist.ProcessGroup, dp: dist.ProcessGroup) -> dict[str, str | None]:
    model = build_llama(tied=False)
    early = make_optimizer("sgd", model.parameters())  # built before sharding
    shard_input_embedding(model, group=tp)
    model(input_ids=batches()[0], labels=batches()[0]).loss.backward()
    conv = GradientReduction(collective="sum", loss_normalization="global_mean")
    params = list(model.parameters())
    return {
        "tp_as_dp": _code(
            lambda: reduce_gradients(params, group=tp, reduction=conv, tensor_group=tp)
        ),
        "world_as_dp": _code(
            lambda: reduce_gradients(params, group=None, reduction=conv, tensor_group=tp)
        ),
        "avg_of_global_mean": _code(
            lambda: GradientReduction(collective="avg", loss_normalization="global_mean")
        ),
        "stale_optimizer": _code(lambda: check_owned_step(early, group=tp)),
        "fresh_optimizer": _code(
            lambda: check_owned_step(make_optimizer("sgd", model.parameters()), group=tp)
        ),
    }


def _reshard_across_sizes(
    tp: dist.ProcessGroup, trained: nn.Module, directory: str
) -> dict[str, Any]:
    """TP=2 shards -> a TP=4 layer, and TP=4 shards -> TP=2 layers, same logical table."""
    emb = trained.get_input_embeddings()
    assert isinstance(emb, VocabParallelEmbedding)
    logical = emb.gather_weight()
    if dist.get_rank() < 2:  # data-parallel replica 0's TP pair writes the checkpoint
        save_vocab_shards(emb, f"{directory}/tp2")
    dist.barrier()
    wide = VocabParallelEmbedding(VOCAB, HIDDEN)  # the world: TP = 4
    load_vocab_shards(wide, f"{directory}/tp2")
    save_vocab_shards(wide, f"{directory}/tp4")
    narrow = VocabParallelEmbedding(VOCAB, HIDDEN, group=tp)
    load_vocab_shards(narrow, f"{directory}/tp4")
    smaller = VocabParallelEmbedding(VOCAB - 1, HIDDEN, group=tp)
    torch.manual_seed(5)
    linear = nn.Linear(HIDDEN, VOCAB, bias=False)  # an untied output head, same on every rank
    if dist.get_rank() < 2:
        save_vocab_shards(VocabParallelLMHead.from_linear(linear, group=tp), f"{directory}/head2")
    dist.barrier()
    head4 = VocabParallelLMHead(HIDDEN, VOCAB)
    load_vocab_shards(head4, f"{directory}/head2")
    return {
        "head_logical": linear.weight.detach().clone(),
        "head_tp4": head4.gather_weight(),
        "logical": logical,
        "tp4_rows": (wide.vocab_start, wide.vocab_end),
        "tp4": wide.gather_weight(),
        "tp2_again": narrow.gather_weight(),
        "wrong_shape": _code(lambda: load_vocab_shards(smaller, f"{directory}/tp4")),
    }


def _tp_dp_checks(directory: str) -> dict[str, Any]:
    tp, dp = _tp_dp_groups()
    out: dict[str, Any] = {}
    for tied, kind in ((False, "sgd"), (False, "adamw"), (True, "adamw")):
        out[f"{'tied' if tied else 'untied'}-{kind}"] = _tp_dp_run(tp, dp, tied=tied, kind=kind)
    trained = out["untied-sgd"]["model"]
    for run in out.values():
        del run["model"]
    out["double_averaging"] = _double_averaging_run(tp, dp)
    out["refusals"] = _group_refusals(tp, dp)
    out["reshard"] = _reshard_across_sizes(tp, trained, directory)
    return out


def _checks(rank: int, world_size: int, directory: str) -> dict[str, Any]:
    _make_self_groups()
    out: dict[str, Any] = {"rank": rank, "intervals": row_intervals(VOCAB, world_size)}
    out["parity"] = _parity(None)
    out["facts"] = _model_facts(None)
    out["ledger"] = _ledger(None)
    out["reshard_to_1"] = _reshard_same_world(None, f"{directory}/tp{world_size}")
    if world_size == 4:
        out["tp_dp"] = _tp_dp_checks(directory)
    return out


@functools.cache
def world_results(world_size: int) -> list[dict[str, Any]]:
    """Run every whole-model check on ``world_size`` gloo ranks (once per session)."""
    with tempfile.TemporaryDirectory() as directory:
        return run_ranks(_checks, world_size, directory, timeout=300.0)
