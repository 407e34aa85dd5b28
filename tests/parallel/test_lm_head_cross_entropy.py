"""Vocabulary-parallel head and cross entropy equal nn.Linear + F.cross_entropy (gloo).

Checks per world size, in one spawned group: the loss, logit gradients and
hidden gradients for uneven V (131, and 9 over 4 with an empty tail shard),
ignore_index, label smoothing and every reduction, in fp32 and fp64 (the loss
keeps fp64; bf16 logits give an fp32 loss); a tied embedding + head
(``head.weight is emb.weight``) trained two fp64 SGD steps against the
single-process tied model; a bad target refused on every rank. Tolerances are
derived from the dtype's eps and the number of reordered additions.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from _harness import run_ranks
from torch import nn
from torch.testing import assert_close

from conftest import rounding_bound
from tokembed.errors import EmbeddingError, ParallelError
from tokembed.parallel import (
    VocabParallelEmbedding,
    VocabParallelLMHead,
    vocab_parallel_cross_entropy,
)

pytestmark = pytest.mark.distributed


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _bound(dtype: torch.dtype, terms: int, magnitude: torch.Tensor | float) -> float:
    """:func:`conftest.rounding_bound` with terms of size at least 1 (the softmax sums
    probabilities up to 1 and the logits feed it at their own size)."""
    size = float(torch.as_tensor(magnitude).detach().abs().max())
    return rounding_bound(dtype, terms=terms, magnitude=max(size, 1.0))


def _loss_matches(vocab: int, smoothing: float, reduction: str, dtype: torch.dtype) -> None:
    torch.manual_seed(vocab)
    ref = nn.Linear(8, vocab, bias=False, dtype=dtype)
    head = VocabParallelLMHead.from_linear(ref)
    hidden = torch.randn(3, 5, 8, generator=_gen(1), dtype=dtype)
    target = torch.randint(0, vocab, (3, 5), generator=_gen(2))
    target[0, 1] = target[2, 4] = -100
    target[1, 0] = vocab - 1  # the last row lives on the last non-empty shard
    h_ref = hidden.clone().requires_grad_()
    h_par = hidden.clone().requires_grad_()
    expected = F.cross_entropy(
        ref(h_ref).reshape(-1, vocab), target.reshape(-1),
        label_smoothing=smoothing, reduction=reduction,
    ).reshape(target.shape if reduction == "none" else ())  # fmt: skip
    local = head(h_par)
    local.retain_grad()
    got = vocab_parallel_cross_entropy(
        local, target.int(), vocab_start=head.vocab_start,
        label_smoothing=smoothing, reduction=reduction,
    )  # fmt: skip
    assert got.dtype == dtype  # fp64 is not cast down to fp32
    # The sharded loss splits the softmax sum over V and the mean over 15 positions;
    # the logits are dot products over the 8 hidden units.
    terms = vocab + 8 + target.numel()
    assert_close(got, expected, rtol=0, atol=_bound(dtype, terms, expected))
    upstream = torch.rand(expected.shape, generator=_gen(3), dtype=dtype)
    (expected * upstream).sum().backward()
    (got * upstream).sum().backward()
    assert ref.weight.grad is not None
    assert head.weight.grad is not None
    assert h_par.grad is not None
    want = ref.weight.grad[head.vocab_start : head.vocab_end]  # empty on an empty shard
    assert_close(head.weight.grad, want, rtol=0, atol=_bound(dtype, terms, ref.weight.grad))
    # The hidden gradient is summed over the V_r columns of each rank, then over ranks.
    assert h_ref.grad is not None
    hidden_bound = _bound(dtype, terms, h_ref.grad)
    assert_close(h_par.grad, h_ref.grad, rtol=0, atol=hidden_bound)


def _half_precision_loss_is_fp32() -> dict[str, Any]:
    """bf16 logits: the loss is computed and returned in fp32, the gradient is bf16."""
    head = VocabParallelLMHead(8, 131, dtype=torch.bfloat16)
    local = head(torch.randn(4, 8, generator=_gen(5)).bfloat16())
    local.retain_grad()
    target = torch.randint(0, 131, (4,), generator=_gen(6))
    loss = vocab_parallel_cross_entropy(local, target, vocab_start=head.vocab_start)
    loss.backward()
    assert local.grad is not None
    return {"loss": loss.dtype, "grad": local.grad.dtype}


def _tied_training(rank: int) -> dict[str, Any]:
    """Tied embedding + head, two SGD steps in fp64: losses and table equal the 1-process model."""
    vocab, dim, dtype = 131, 6, torch.float64
    torch.manual_seed(11)
    ref_emb = nn.Embedding(vocab, dim, padding_idx=70, dtype=dtype)
    ref_mix = nn.Linear(dim, dim, dtype=dtype)  # a replicated layer between lookup and head
    emb = VocabParallelEmbedding.from_embedding(ref_emb)
    mix = nn.Linear(dim, dim, dtype=dtype)
    mix.load_state_dict(ref_mix.state_dict())
    head = VocabParallelLMHead(dim, vocab, tie_to=emb)
    params = list(dict.fromkeys([*emb.parameters(), *mix.parameters(), *head.parameters()]))
    ref_params = [ref_emb.weight, *ref_mix.parameters()]
    lr, momentum = 0.5, 0.9
    opt = torch.optim.SGD(params, lr=lr, momentum=momentum)
    ref_opt = torch.optim.SGD(ref_params, lr=lr, momentum=momentum)
    # Rounding of one step: the softmax sum over V, dot products over dim, mean over 18.
    terms = vocab + 2 * dim + 18
    drift = 0.0  # bound on the weights' difference so far
    losses = []
    for step in range(2):
        ids = torch.randint(0, vocab, (2, 9), generator=_gen(20 + step))
        ids[:, 0] = 70  # PAD positions: no input gradient, still an output row
        target = ids.roll(-1, dims=1)
        ref_logits = torch.tanh(ref_mix(ref_emb(ids))) @ ref_emb.weight.t()
        ref_loss = F.cross_entropy(ref_logits.reshape(-1, vocab), target.reshape(-1))
        loss = vocab_parallel_cross_entropy(
            head(torch.tanh(mix(emb(ids)))), target, vocab_start=head.vocab_start
        )
        for o, lo in ((opt, loss), (ref_opt, ref_loss)):
            o.zero_grad()
            lo.backward()
        assert ref_emb.weight.grad is not None
        grad = float(ref_emb.weight.grad.abs().max())
        # To first order, weights that differ by `drift` move the loss by at most
        # drift * sum|grad| (the gradient is taken on the reference's side).
        spread = drift * sum(float(p.grad.abs().sum()) for p in ref_params if p.grad is not None)
        assert_close(loss, ref_loss, rtol=0, atol=_bound(dtype, terms, ref_loss) + spread)
        # Momentum SGD: the buffer sums at most 1 + momentum gradient differences; a
        # stable step at most doubles an earlier weight difference.
        drift = 2 * drift + lr * (1 + momentum) * _bound(dtype, terms, grad)
        opt.step()
        ref_opt.step()
        losses.append(loss.item())
    # Plus the rounding of the two updates themselves.
    for got, want in ((emb.gather_weight(), ref_emb.weight), (mix.weight, ref_mix.weight)):
        rounding = _bound(dtype, 2, want.detach().abs().max())
        assert_close(got, want.detach(), rtol=0, atol=drift + rounding)
    return {"tied": head.weight is emb.weight, "n_params": len(params), "losses": losses}


def _checks(rank: int, world: int) -> dict[str, Any]:
    for dtype in (torch.float32, torch.float64):
        for vocab, smoothing, reduction in (
            (131, 0.0, "mean"),
            (131, 0.1, "none"),
            (9, 0.1, "mean"),
            (9, 0.0, "sum"),
        ):
            _loss_matches(vocab, smoothing, reduction, dtype)
    out = _tied_training(rank)
    out["half"] = _half_precision_loss_is_fp32()
    head = VocabParallelLMHead(4, 10)
    try:
        vocab_parallel_cross_entropy(
            head(torch.zeros(2, 4)), torch.tensor([3, 10]), vocab_start=head.vocab_start
        )
    except EmbeddingError as e:  # an id outside [0, V): the single-device class
        out["bad_target"] = (e.code, e.value)
    try:
        VocabParallelLMHead(4, 11, tie_to=VocabParallelEmbedding(10, 4))
    except EmbeddingError as e:  # a table-shape contract, the same class as single-device
        out["tie_shape"] = e.code
    solo = [dist.new_group([r]) for r in range(world)][rank]  # built by all, in order
    try:  # rows of a head sharded over another group would not line up with the table's
        VocabParallelLMHead(4, 10, group=solo, tie_to=VocabParallelEmbedding(10, 4))
    except ParallelError as e:
        out["tie_group"] = e.code
    try:
        vocab_parallel_cross_entropy(head(torch.zeros(2, 4)), torch.tensor([3]), vocab_start=0)
    except EmbeddingError as e:
        out["ce_shape"] = e.code
    try:  # every rank claims its logits start at row 0: the blocks overlap
        vocab_parallel_cross_entropy(head(torch.zeros(2, 4)), torch.tensor([3, 4]), vocab_start=0)
    except ParallelError as e:
        out["bad_start"] = e.code
    return out


@pytest.mark.parametrize("world", [2, 4])
def test_head_and_cross_entropy_match_single_process(world: int) -> None:
    results = run_ranks(_checks, world)
    for r in results:
        assert r["tied"] is True
        assert r["n_params"] == 3  # the tied table is one optimizer entry
        assert r["half"] == {"loss": torch.float32, "grad": torch.bfloat16}
        assert r["bad_target"] == ("ID_OUT_OF_RANGE", 10)
        assert r["bad_start"] == "SHARD_OVERLAP"
        assert (r["tie_shape"], r["tie_group"], r["ce_shape"]) == (
            "SHAPE_MISMATCH",
            "GROUP_CONFLATION",
            "SHAPE_MISMATCH",
        )
    assert len({tuple(r["losses"]) for r in results}) == 1
