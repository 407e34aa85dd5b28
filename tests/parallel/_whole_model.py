"""Whole-model checks on real gloo ranks: one spawn per world size runs them all.

``world_results(world_size)`` spawns the ranks once per test session (cached) and
returns, per rank, a dict of everything the test modules assert on: recorded
training of sharded models (untied, tied, head-sharded, TP x DP) in fp32 and
fp64 together with the unsharded reference trained on rank 0 from a copy taken
before sharding (same process, same thread settings unless the reference is
asked to run with another thread count), runs with injected bugs that the
parity checks must reject, reshard round trips, collective ledgers and the
error codes of refusals made in whole-model context. Spawning once keeps the
distributed tests within the time budget on 2 cores (each child imports torch
and transformers).
"""

from __future__ import annotations

import copy
import functools
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from _harness import rank_threads, run_ranks
from _llama import (
    BATCH,
    HIDDEN,
    PAD,
    TINY_VOCAB,
    VOCAB,
    batches,
    build_llama,
    full_loss,
    make_optimizer,
    train,
)
from torch import nn

from tokembed._determinism import intra_op_threads
from tokembed.errors import TokembedError
from tokembed.parallel.collectives import all_gather_uneven
from tokembed.parallel.data_parallel import GradientReduction, reduce_gradients
from tokembed.parallel.intervals import row_intervals
from tokembed.parallel.ledger import count_collectives, memory_ledger
from tokembed.parallel.lm_head import VocabParallelLMHead
from tokembed.parallel.ownership import OwnerCheckedOptimizer, check_owned_step
from tokembed.parallel.reshard import load_vocab_shards, save_vocab_shards
from tokembed.parallel.shard import shard_input_embedding, shard_lm_head
from tokembed.parallel.vocab_embedding import VocabParallelEmbedding

__all__ = ["DTYPES", "KINDS", "world_results"]

KINDS = ("sgd", "adamw")
DTYPES = {"fp32": torch.float32, "fp64": torch.float64}

LossFn = Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]


def _hf_loss(model: nn.Module, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return model(input_ids=ids, labels=labels).loss


def _vp_loss(model: nn.Module, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    from tokembed.parallel.causal_lm import causal_lm_loss

    return causal_lm_loss(model, ids, labels=labels)


def _tables(model: nn.Module) -> dict[int, VocabParallelEmbedding | VocabParallelLMHead]:
    return {
        id(m.weight): m
        for m in model.modules()
        if isinstance(m, VocabParallelEmbedding | VocabParallelLMHead)
    }


def _gather_for(model: nn.Module) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor | None]:
    """Full [V, d] tensors of the sharded tables' per-row tensors (collective on every rank)."""
    tables = _tables(model)

    def gather(p: torch.Tensor, local: torch.Tensor) -> torch.Tensor | None:
        table = tables.get(id(p))
        if table is None:
            return None
        sizes = [end - start for start, end in table.intervals]
        return all_gather_uneven(local.detach(), sizes, group=table.group)

    return gather


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


def _case(
    *,
    tied: bool,
    kind: str,
    dtype: torch.dtype,
    shard: Callable[[nn.Module], Any],
    loss_fn: LossFn,
    reference_threads: int | None,
    vocab: int = VOCAB,
    pad: int | None = PAD,
    data: list[torch.Tensor] | None = None,
    after_backward: Callable[[nn.Module], Callable[[], None]] | None = None,
    optimizer: Callable[[nn.Module], torch.optim.Optimizer] | None = None,
    keep_model: bool = False,
) -> dict[str, Any]:
    """Train a sharded model; with ``reference_threads``, also its unsharded copy here.

    The copy is taken before sharding and trained on the full batches with the
    full-logits loss under ``reference_threads`` intra-op threads.
    """
    model = build_llama(tied=tied, vocab=vocab, dtype=dtype, pad=pad)
    full = copy.deepcopy(model) if reference_threads is not None else None
    shard(model)
    opt = optimizer(model) if optimizer is not None else make_optimizer(kind, model.parameters())
    out: dict[str, Any] = {
        "run": train(
            model,
            opt,
            data if data is not None else batches(vocab=vocab, pad=pad),
            loss_fn,
            pad=pad,
            after_backward=after_backward(model) if after_backward is not None else None,
            gather=_gather_for(model),
            state=_gathered_state,
        )
    }
    if keep_model:
        out["model"] = model
    if full is not None:
        assert reference_threads is not None
        with intra_op_threads(reference_threads):
            out["ref"] = train(
                full,
                make_optimizer(kind, full.parameters()),
                batches(vocab=vocab, pad=pad),
                full_loss,
                pad=pad,
            )
    return out


def _code(fn: Callable[[], object]) -> str | None:
    try:
        fn()
    except TokembedError as error:
        return error.code
    return None


class _OffByOneEmbedding(VocabParallelEmbedding):
    """Injected bug: the lookup's shard offset is one row too high."""

    @property
    def vocab_start(self) -> int:
        return super().vocab_start + 1


class _UnmaskedPadEmbedding(VocabParallelEmbedding):
    """Injected bug: the owner of the PAD row forgets it, so PAD positions train that row."""

    @property
    def local_padding_idx(self) -> int | None:
        return None


def _shard_with(cls: type[VocabParallelEmbedding], group: dist.ProcessGroup | None) -> Any:
    def shard(model: nn.Module) -> None:
        model.set_input_embeddings(cls.from_embedding(model.get_input_embeddings(), group=group))

    return shard


def _parity(group: dist.ProcessGroup | None, reference_threads: int) -> dict[str, Any]:
    """Every variant in fp32 and fp64; the reference is trained on rank 0 only."""
    ref = reference_threads if dist.get_rank() == 0 else None
    out: dict[str, Any] = {}
    for dname, dtype in DTYPES.items():
        # The model's own loss casts logits to fp32; fp64 runs use the full-logits loss.
        own_loss = _hf_loss if dtype == torch.float32 else full_loss
        for kind in KINDS:
            common = {"kind": kind, "dtype": dtype, "reference_threads": ref}
            out[f"untied-{kind}-{dname}"] = _case(
                tied=False,
                shard=lambda m: shard_input_embedding(m, group=group),
                loss_fn=own_loss,
                **common,
            )
            out[f"tied-{kind}-{dname}"] = _case(
                tied=True,
                shard=lambda m: shard_input_embedding(m, group=group, tie=True),
                loss_fn=_vp_loss,
                **common,
            )
            out[f"untied-head-{kind}-{dname}"] = _case(
                tied=False,
                shard=lambda m: (
                    shard_lm_head(m, group=group),
                    shard_input_embedding(m, group=group),
                ),
                loss_fn=_vp_loss,
                **common,
            )
        # A vocabulary so small that at 4 ranks the last shard is empty.
        for tied in (False, True):
            name = "tied" if tied else "untied"
            out[f"tiny-{name}-adamw-{dname}"] = _case(
                tied=tied,
                kind="adamw",
                dtype=dtype,
                shard=lambda m, tied=tied: shard_input_embedding(m, group=group, tie=tied),
                loss_fn=_vp_loss if tied else own_loss,
                reference_threads=ref,
                vocab=TINY_VOCAB,
                pad=None,
            )
    return out


def _bugs(group: dist.ProcessGroup | None, reference_threads: int) -> dict[str, Any]:
    """fp32 AdamW runs (the widest tolerances) with one real bug injected each."""
    ref = reference_threads if dist.get_rank() == 0 else None
    common = {"tied": False, "kind": "adamw", "dtype": torch.float32, "reference_threads": ref}
    return {
        "wrong_offset": _case(
            shard=_shard_with(_OffByOneEmbedding, group), loss_fn=_hf_loss, **common
        ),
        "pad_unmasked": _case(
            shard=_shard_with(_UnmaskedPadEmbedding, group), loss_fn=_hf_loss, **common
        ),
    }


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
        dist.all_reduce(
            table.weight.grad, group=group
        )  # a replicated table's dense gradient reduce
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
    return [ids[replica * half : (replica + 1) * half] for ids in batches(pad=PAD)]


@dataclass(frozen=True, kw_only=True)
class _UncheckedReduction(GradientReduction):
    """Injected bug: the convention check is skipped, so AVG of a global mean is let through."""

    def __post_init__(self) -> None:
        pass


def _tp_dp_case(
    tp: dist.ProcessGroup,
    dp: dist.ProcessGroup,
    *,
    tied: bool,
    kind: str,
    dtype: torch.dtype,
    reference_threads: int,
    reduction: GradientReduction | None = None,
) -> dict[str, Any]:
    """2 x 2: embedding sharded over TP, replicas of each shard reduced over DP.

    Replica d trains on half d of every batch. Each replica's loss is the mean
    over its own half (both halves hold the same number of non-PAD labels), so
    AVG over DP gives the full batch's mean gradient exactly once. A
    ``reduction`` other than that divides the loss by the DP size as a global
    mean would.
    """
    replica = dist.get_rank() // 2
    right = GradientReduction(collective="avg", loss_normalization="local_mean")
    conv = right if reduction is None else reduction
    base = _vp_loss if tied else (_hf_loss if dtype == torch.float32 else full_loss)
    scale = dist.get_world_size(dp) if conv.loss_normalization == "global_mean" else 1

    def loss_fn(model: nn.Module, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return base(model, ids, labels) / scale

    def after_backward(model: nn.Module) -> Callable[[], None]:
        return lambda: reduce_gradients(
            model.parameters(), group=dp, reduction=conv, tensor_group=tp
        )

    return _case(
        tied=tied,
        kind=kind,
        dtype=dtype,
        shard=lambda m: shard_input_embedding(m, group=tp, tie=tied),
        loss_fn=loss_fn,
        # One reference per TP pair, on its first rank of the first replica.
        reference_threads=reference_threads if dist.get_rank() == 0 else None,
        data=_replica_batches(replica),
        after_backward=after_backward,
        optimizer=lambda m: OwnerCheckedOptimizer(  # type: ignore[return-value]
            make_optimizer(kind, m.parameters()), group=tp
        ),
        keep_model=True,
    )


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
    save_vocab_shards(wide, f"{directory}/tp4-from-tp2")  # a new folder: tp4 exists
    narrow = VocabParallelEmbedding(VOCAB, HIDDEN, group=tp)
    load_vocab_shards(narrow, f"{directory}/tp4-from-tp2")
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
        "wrong_shape": _code(lambda: load_vocab_shards(smaller, f"{directory}/tp4-from-tp2")),
    }


def _tp_dp_checks(directory: str, reference_threads: int) -> dict[str, Any]:
    tp, dp = _tp_dp_groups()
    out: dict[str, Any] = {}
    for dname, dtype in DTYPES.items():
        for tied, kind in ((False, "sgd"), (False, "adamw"), (True, "adamw")):
            out[f"{'tied' if tied else 'untied'}-{kind}-{dname}"] = _tp_dp_case(
                tp, dp, tied=tied, kind=kind, dtype=dtype, reference_threads=reference_threads
            )
    trained = out["untied-sgd-fp32"]["model"]
    for run in out.values():
        del run["model"]
    out["double_averaging"] = _tp_dp_case(
        tp,
        dp,
        tied=False,
        kind="adamw",
        dtype=torch.float32,
        reference_threads=reference_threads,
        reduction=_UncheckedReduction(collective="avg", loss_normalization="global_mean"),
    )
    del out["double_averaging"]["model"]
    out["refusals"] = _group_refusals(tp, dp)
    out["reshard"] = _reshard_across_sizes(tp, trained, directory)
    return out


def _checks(
    rank: int, world_size: int, directory: str, reference_threads: int, parity_only: bool
) -> dict[str, Any]:
    _make_self_groups()
    out: dict[str, Any] = {"rank": rank, "intervals": row_intervals(VOCAB, world_size)}
    out["parity"] = _parity(None, reference_threads)
    if parity_only:
        return out
    out["bugs"] = _bugs(None, reference_threads)
    out["facts"] = _model_facts(None)
    out["ledger"] = _ledger(None)
    out["reshard_to_1"] = _reshard_same_world(None, f"{directory}/tp{world_size}")
    if world_size == 4:
        out["tp_dp"] = _tp_dp_checks(directory, reference_threads)
    return out


@functools.cache
def world_results(world_size: int, reference_threads: int | None = None) -> list[dict[str, Any]]:
    """Run every whole-model check on ``world_size`` gloo ranks (once per session).

    The references train with the ranks' own thread count
    (:func:`_harness.rank_threads`); given ``reference_threads``, they train
    with that many intra-op threads instead and only the parity runs are made.
    """
    threads = rank_threads() if reference_threads is None else reference_threads
    only = reference_threads is not None
    with tempfile.TemporaryDirectory() as directory:
        return run_ranks(_checks, world_size, directory, threads, only, timeout=600.0)
