"""Tied table replicas on the first and last pipeline stages (gloo, PP 2 x TP 1 or 2).

The first stage (ranks [0, tp)) looks rows up with a VocabParallelEmbedding,
the last stage (ranks [tp, 2tp)) projects with a VocabParallelLMHead replica;
activations and their gradients travel by send/recv. Under both update
schedules (identical Adam steps on both stages, or one authority that steps
and publishes) two steps equal the single-process tied model. Skipping the
gradient reconciliation, or re-syncing values while Adam moments differ, is
detected as REPLICA_DIVERGED on every rank.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from _harness import run_ranks
from _parity import adam_ratio
from torch import nn
from torch.testing import assert_close

from tokembed.errors import ParallelError
from tokembed.parallel import (
    TiedReplica,
    VocabParallelEmbedding,
    VocabParallelLMHead,
    vocab_parallel_cross_entropy,
)

pytestmark = pytest.mark.distributed

V, D = 131, 6
# fp64: with AdamW's 1/(sqrt(v) + eps) the fp32 rounding of near-zero gradient
# entries would reach the weights at the size of a whole step.
DTYPE = torch.float64
LR = 0.05


class _Stage:
    """One rank's half of the two-stage model and its tied replica."""

    def __init__(self, rank: int, world: int, ref: dict[str, nn.Module], authority_only: bool):
        tp = world // 2
        tp_groups = [dist.new_group(list(range(s * tp, (s + 1) * tp))) for s in (0, 1)]
        emb_groups = [dist.new_group([i, i + tp]) for i in range(tp)]
        self.stage, tp_rank = divmod(rank, tp)
        self.rank, self.tp, self.tp_group = rank, tp, tp_groups[self.stage]
        if self.stage == 0:
            self.table: VocabParallelEmbedding | VocabParallelLMHead = (
                VocabParallelEmbedding.from_embedding(ref["emb"], group=self.tp_group)
            )
            self.layer = copy.deepcopy(ref["a"])
        else:  # freshly initialized: sync_values must make it equal to the first stage
            self.table = VocabParallelLMHead(D, V, group=self.tp_group, dtype=DTYPE)
            self.layer = copy.deepcopy(ref["b"])
        self.tie = TiedReplica(
            self.table.weight,
            group=emb_groups[tp_rank],
            authority=tp_rank,
            schedule="authority" if authority_only else "identical",
        )
        self.tie.sync_values()
        steps_replica = self.stage == 0 or not authority_only
        params = [*([self.table.weight] if steps_replica else []), *self.layer.parameters()]
        self.opt = torch.optim.Adam(params, lr=LR)
        self.authority_only = authority_only

    def step(self, ids: torch.Tensor, target: torch.Tensor, reconcile: bool = True) -> float:
        self.opt.zero_grad()
        peer = self.rank + self.tp if self.stage == 0 else self.rank - self.tp
        loss = torch.zeros((), dtype=DTYPE)
        if self.stage == 0:
            h = torch.tanh(self.layer(self.table(ids)))  # [B, L, D], replicated over TP
            dist.send(h.detach(), dst=peer)
            grad = torch.empty_like(h)
            dist.recv(grad, src=peer)
            h.backward(grad)
        else:
            h = torch.empty(*ids.shape, D, dtype=DTYPE)
            dist.recv(h, src=peer)
            h.requires_grad_()
            assert isinstance(self.table, VocabParallelLMHead)
            logits = self.table(torch.tanh(self.layer(h)))  # [B, L, V_r]
            loss = vocab_parallel_cross_entropy(
                logits, target, group=self.tp_group, vocab_start=self.table.vocab_start
            )
            loss.backward()
            assert h.grad is not None
            dist.send(h.grad, dst=peer)
        if reconcile:
            self.tie.reconcile_grads()
        self.opt.step()
        if self.authority_only:
            self.tie.sync_values()  # the authority publishes its update
        return float(loss)


def _reference() -> dict[str, nn.Module]:
    torch.manual_seed(7)
    return {
        "emb": nn.Embedding(V, D, dtype=DTYPE),
        "a": nn.Linear(D, D, dtype=DTYPE),
        "b": nn.Linear(D, D, dtype=DTYPE),
    }


def _bounds(grads: list[torch.Tensor], loss: torch.Tensor, step: int) -> tuple[float, float]:
    """Rounding bounds of one step's loss and of its Adam update, from fp64's eps.

    The pipeline reorders the softmax sum over V (split over TP ranks), the dot
    products over D and the mean over the 16 positions: two orders of those
    ``V + 2 D + 16`` additions differ by at most that many eps times the size of
    the terms (the loss; for gradients their largest entry G). Adam's update
    ``lr m / (sqrt(v) + e)`` moves by at most ``lr d (1 + c) / e`` for a
    gradient difference d, with ``c`` the largest |m| / sqrt(v) after the step
    (see _parity), and never by more than ``2 lr c``.
    """
    terms = V + 2 * D + 16
    eps = torch.finfo(DTYPE).eps
    g = max(float(t.abs().max()) for t in grads)
    c = adam_ratio(0.9, 0.999, step + 1)  # torch.optim.Adam's default betas and eps
    update = min(LR * terms * eps * g * (1 + c) / 1e-8, 2 * LR * c)
    return terms * eps * max(abs(float(loss)), 1.0), update


def _batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(0, V, (2, 8), generator=torch.Generator().manual_seed(step))
    return ids, ids.roll(-1, dims=1)


def _run_schedule(rank: int, world: int, authority_only: bool) -> dict[str, Any]:
    ref = _reference()
    stage = _Stage(rank, world, ref, authority_only)
    emb, a, b = ref["emb"], ref["a"], ref["b"]
    assert isinstance(emb, nn.Embedding)
    ref_params = [*emb.parameters(), *a.parameters(), *b.parameters()]
    ref_opt = torch.optim.Adam(ref_params, lr=LR)
    out: dict[str, Any] = {}
    drift = 0.0  # bound on the weights' difference so far
    for step in range(2):
        ids, target = _batch(step)
        ref_loss = F.cross_entropy(
            (torch.tanh(b(torch.tanh(a(emb(ids))))) @ emb.weight.t()).reshape(-1, V),
            target.reshape(-1),
        )
        ref_opt.zero_grad()
        ref_loss.backward()
        grads = [p.grad for p in ref_params if p.grad is not None]
        loss_bound, update_bound = _bounds(grads, ref_loss, step)
        # To first order, weights apart by `drift` move the loss by drift * sum|grad|.
        spread = drift * sum(float(g.abs().sum()) for g in grads)
        ref_opt.step()
        loss = stage.step(ids, target)
        if stage.stage == 1:
            got = torch.tensor(loss, dtype=DTYPE)
            assert_close(got, ref_loss.detach(), rtol=0, atol=loss_bound + spread)
        stage.tie.check(None if authority_only else stage.opt)
        # A stable step at most doubles an earlier difference (lr x curvature < 2).
        drift = 2 * drift + update_bound
    gathered = stage.table.gather_weight()
    rounding = 2 * torch.finfo(DTYPE).eps * float(emb.weight.abs().max())
    assert_close(gathered, emb.weight.detach(), rtol=0, atol=drift + rounding)
    if authority_only:
        return out
    # Failure 1: a step without reconciling input and output gradients.
    stage.step(*_batch(5), reconcile=False)
    try:
        stage.tie.check(stage.opt)
    except ParallelError as e:
        out["unreconciled"] = (e.code, e.value[0])
    # Failure 2: values re-synced by broadcast, but Adam moments still differ.
    stage.tie.sync_values()
    stage.tie.check()  # values alone look fine ...
    try:
        stage.tie.check(stage.opt)  # ... the optimizer state does not
    except ParallelError as e:
        out["moments"] = (e.code, e.value[0])
    return out


def _checks(rank: int, world: int) -> dict[str, Any]:
    out = _run_schedule(rank, world, authority_only=False)
    _run_schedule(rank, world, authority_only=True)
    return out


@pytest.mark.parametrize("world", [2, 4])
def test_pipeline_replicas_match_single_process_tied_model(world: int) -> None:
    for r in run_ranks(_checks, world):
        assert r == {
            "unreconciled": ("REPLICA_DIVERGED", "values"),
            "moments": ("REPLICA_DIVERGED", "optimizer state"),
        }
