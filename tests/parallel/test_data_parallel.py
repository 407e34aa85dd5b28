"""Tensor x data parallelism (TP 2 x DP 2 on 4 gloo ranks) and the ownership failures.

One SGD step of a sharded embedding + head, with the data-parallel gradient
SUM of a global-mean loss, equals the single-process step on the global
batch. GROUP_CONFLATION, DOUBLE_AVERAGING and NON_OWNER_STEP are raised on
every rank.
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
from tokembed.errors import ParallelError, TokembedError
from tokembed.parallel import (
    GradientReduction,
    OwnerCheckedOptimizer,
    VocabParallelEmbedding,
    VocabParallelLMHead,
    check_owned_step,
    check_parallel_groups,
    reduce_gradients,
    vocab_parallel_cross_entropy,
)

pytestmark = pytest.mark.distributed


def _code(action: Any) -> str:
    try:
        action()
    except TokembedError as e:
        return e.code
    return "no error"


def _train_step(rank: int, tp: dist.ProcessGroup, dp: dist.ProcessGroup) -> None:
    torch.manual_seed(1)
    ref_emb = nn.Embedding(131, 4, padding_idx=3)
    ref_head = nn.Linear(4, 131, bias=False)
    emb = VocabParallelEmbedding.from_embedding(ref_emb, group=tp)
    head = VocabParallelLMHead.from_linear(ref_head, group=tp)
    ids = torch.randint(0, 131, (4, 6), generator=torch.Generator().manual_seed(2))
    target = ids.roll(-1, dims=1)
    target[:, -1] = -100
    n_global = int((target != -100).sum())
    mine = slice(2 * (rank // 2), 2 * (rank // 2) + 2)  # DP replica r takes rows [2r, 2r+2)
    ref_loss = F.cross_entropy(ref_head(ref_emb(ids)).reshape(-1, 131), target.reshape(-1))
    ref_loss.backward()
    with torch.no_grad():
        for p in (ref_emb.weight, ref_head.weight):
            assert p.grad is not None
            p -= 0.5 * p.grad
    local_sum = vocab_parallel_cross_entropy(
        head(emb(ids[mine])), target[mine], group=tp, vocab_start=head.vocab_start,
        reduction="sum",
    )  # fmt: skip
    (local_sum / n_global).backward()  # a loss already averaged over the global batch
    convention = GradientReduction(collective="sum", loss_normalization="global_mean")
    params = [emb.weight, head.weight]
    reduce_gradients(params, group=dp, reduction=convention, tensor_group=tp)
    opt = OwnerCheckedOptimizer(torch.optim.SGD(params, lr=0.5), group=tp)
    opt.step()
    # The sharded, data-parallel gradient reorders the softmax sum over 131 rows, dot
    # products over 4 and the sum over 24 positions: within (131 + 4 + 24) eps of the
    # gradients' size; the step scales that by lr and rounds once more.
    for got, ref in ((emb.gather_weight(), ref_emb), (head.gather_weight(), ref_head)):
        assert ref.weight.grad is not None
        size = max(float(ref.weight.grad.abs().max()), 1.0)
        bound = 0.5 * rounding_bound(torch.float32, terms=131 + 4 + 24, magnitude=size)
        bound += rounding_bound(torch.float32, terms=1, magnitude=float(ref.weight.abs().max()))
        assert_close(got, ref.weight.detach(), rtol=0, atol=bound)
    # NON_OWNER_STEP: the optimizer still holds the replicated table the shard was cut from.
    stale = OwnerCheckedOptimizer(torch.optim.SGD([ref_emb.weight], lr=0.5))
    assert _code(stale.step) == "NON_OWNER_STEP"


_SUM_OF_SUMS = GradientReduction(collective="sum", loss_normalization="sum")


_SUM_OF_SUMS = GradientReduction(collective="sum", loss_normalization="sum")


def _checks(rank: int, world: int) -> dict[str, str]:
    tps = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    dps = [dist.new_group([0, 2]), dist.new_group([1, 3])]
    tp, dp = tps[rank // 2], dps[rank % 2]
    check_parallel_groups(tensor_group=tp, data_group=dp)  # orthogonal axes: accepted
    _train_step(rank, tp, dp)
    full = VocabParallelEmbedding(10, 2, group=tp)
    full.weight.data = torch.zeros(10, 2)  # the shard now holds every row
    return {
        "same_group": _code(lambda: check_parallel_groups(tensor_group=tp, data_group=tp)),
        "overlap": _code(lambda: check_parallel_groups(tensor_group=tp, data_group=None)),
        "reduce_over_tp": _code(
            lambda: reduce_gradients([], group=tp, tensor_group=tp, reduction=_SUM_OF_SUMS)
        ),
        "avg_of_global_mean": _code(
            lambda: GradientReduction(collective="avg", loss_normalization="global_mean")
        ),
        "sum_of_local_mean": _code(
            lambda: GradientReduction(collective="sum", loss_normalization="local_mean")
        ),
        "full_table_in_shard": _code(
            lambda: check_owned_step(torch.optim.SGD([full.weight], lr=0.1), group=tp)
        ),
    }


@pytest.mark.failure_lab("5.13")
def test_tensor_times_data_parallel_step_and_ownership_failures() -> None:
    """Tensor-parallel and data-parallel groups are conflated."""
    expected = {
        "same_group": "GROUP_CONFLATION",
        "overlap": "GROUP_CONFLATION",
        "reduce_over_tp": "GROUP_CONFLATION",
        "avg_of_global_mean": "DOUBLE_AVERAGING",
        "sum_of_local_mean": "INVALID_ARGUMENT",
        "full_table_in_shard": "NON_OWNER_STEP",
    }
    assert run_ranks(_checks, 4) == [expected] * 4


@pytest.mark.failure_lab("5.7")
def test_double_averaging_is_refused_before_any_gradient_exists() -> None:
    """Data-parallel AVG and loss averaging divide twice."""
    with pytest.raises(ParallelError) as e:
        GradientReduction(collective="avg", loss_normalization="global_mean")
    assert e.value.code == "DOUBLE_AVERAGING"
    assert GradientReduction(collective="avg", loss_normalization="local_mean").collective == "avg"
