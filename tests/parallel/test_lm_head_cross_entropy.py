"""Vocabulary-parallel head and cross entropy equal nn.Linear + F.cross_entropy (gloo).

Checks per world size, in one spawned group: the loss, logit gradients and
hidden gradients for uneven V (131, and 9 over 4 with an empty tail shard),
ignore_index, label smoothing and every reduction; a tied embedding + head
(``head.weight is emb.weight``) trained two SGD steps against the
single-process tied model; a bad target refused on every rank.
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

from tokembed.errors import EmbeddingError, ParallelError
from tokembed.parallel import (
    VocabParallelEmbedding,
    VocabParallelLMHead,
    vocab_parallel_cross_entropy,
)

pytestmark = pytest.mark.distributed


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _loss_matches(vocab: int, smoothing: float, reduction: str) -> None:
    torch.manual_seed(vocab)
    ref = nn.Linear(8, vocab, bias=False)
    head = VocabParallelLMHead.from_linear(ref)
    hidden = torch.randn(3, 5, 8, generator=_gen(1))
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
    assert_close(got, expected, rtol=1e-6, atol=1e-6)
    upstream = torch.rand(expected.shape, generator=_gen(3))
    (expected * upstream).sum().backward()
    (got * upstream).sum().backward()
    assert ref.weight.grad is not None
    assert head.weight.grad is not None
    assert_close(head.weight.grad, ref.weight.grad[head.vocab_start : head.vocab_end])
    assert_close(h_par.grad, h_ref.grad)


def _tied_training(rank: int) -> dict[str, Any]:
    """Tied embedding + head, two SGD steps: losses and table equal the 1-process model."""
    vocab, dim = 131, 6
    torch.manual_seed(11)
    ref_emb = nn.Embedding(vocab, dim, padding_idx=70)
    ref_mix = nn.Linear(dim, dim)  # a replicated layer between lookup and head
    emb = VocabParallelEmbedding.from_embedding(ref_emb)
    mix = nn.Linear(dim, dim)
    mix.load_state_dict(ref_mix.state_dict())
    head = VocabParallelLMHead(dim, vocab, tie_to=emb)
    params = list(dict.fromkeys([*emb.parameters(), *mix.parameters(), *head.parameters()]))
    ref_params = [ref_emb.weight, *ref_mix.parameters()]
    opt = torch.optim.SGD(params, lr=0.5, momentum=0.9)
    ref_opt = torch.optim.SGD(ref_params, lr=0.5, momentum=0.9)
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
        assert_close(loss, ref_loss, rtol=1e-6, atol=1e-6)
        for o, lo in ((opt, loss), (ref_opt, ref_loss)):
            o.zero_grad()
            lo.backward()
            o.step()
        losses.append(float(loss))
    assert_close(emb.gather_weight(), ref_emb.weight.detach(), rtol=1e-5, atol=1e-6)
    assert_close(mix.weight, ref_mix.weight, rtol=1e-5, atol=1e-6)
    return {"tied": head.weight is emb.weight, "n_params": len(params), "losses": losses}


def _checks(rank: int, world: int) -> dict[str, Any]:
    for vocab, smoothing, reduction in (
        (131, 0.0, "mean"),
        (131, 0.1, "none"),
        (9, 0.1, "mean"),
        (9, 0.0, "sum"),
    ):
        _loss_matches(vocab, smoothing, reduction)
    out = _tied_training(rank)
    head = VocabParallelLMHead(4, 10)
    try:
        vocab_parallel_cross_entropy(
            head(torch.zeros(2, 4)), torch.tensor([3, 10]), vocab_start=head.vocab_start
        )
    except ParallelError as e:
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
    except ParallelError as e:
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
        assert r["bad_target"] == ("ID_OUT_OF_RANGE", 10)
        assert r["bad_start"] == "SHARD_OVERLAP"
        assert (r["tie_shape"], r["tie_group"], r["ce_shape"]) == (
            "SHAPE_MISMATCH",
            "GROUP_CONFLATION",
            "SHAPE_MISMATCH",
        )
    assert len({tuple(r["losses"]) for r in results}) == 1
