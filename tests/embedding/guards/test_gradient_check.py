"""check_lookup_gradient: a table gradient is the scatter-add of the upstream rows, duplicates summed."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from conftest import assert_within, rounding_bound
from tokembed.embedding import oracles as O
from tokembed.embedding.guards import check_lookup_gradient
from tokembed.errors import EmbeddingError, UsageError

IDS = torch.tensor([[1, 3, 1], [0, 3, 3]])  # ids 1 and 3 repeat


def _upstream(dtype: torch.dtype = torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randn(2, 3, 4, generator=g, dtype=dtype)


class _AssignBackward(torch.autograd.Function):
    """A hand-written lookup whose backward assigns dE[ids] = dX (the bug)."""

    @staticmethod
    def forward(ctx, table, ids):  # type: ignore[no-untyped-def,override]
        ctx.save_for_backward(ids)
        ctx.rows = table.shape[0]
        return table[ids]

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def,override]
        (ids,) = ctx.saved_tensors
        out = grad.new_zeros(ctx.rows, grad.shape[-1])
        out[ids.reshape(-1)] = grad.reshape(-1, grad.shape[-1])  # one occurrence survives
        return out, None


def test_torch_backward_dense_and_sparse_pass() -> None:
    for dtype in (torch.float64, torch.float32):
        for sparse in (False, True):
            table = torch.zeros(5, 4, dtype=dtype, requires_grad=True)
            up = _upstream(dtype)
            F.embedding(IDS, table, sparse=sparse).backward(up)
            assert table.grad is not None
            check_lookup_gradient(table.grad, IDS, up)
    expected = O.scatter_add_backward(IDS.numpy(), _upstream().numpy(), 5)
    table = torch.zeros(5, 4, dtype=torch.float64, requires_grad=True)
    F.embedding(IDS, table).backward(_upstream())
    assert table.grad is not None
    # Row 3 sums three terms, in an order torch and NumPy may not share.
    bound = rounding_bound(torch.float64, terms=3, magnitude=3 * float(_upstream().abs().max()))
    assert_within(table.grad, expected, bound)


@pytest.mark.failure_lab("5.1")
def test_overwritten_duplicates_are_refused() -> None:
    """Duplicate IDs overwrite instead of accumulate."""
    table = torch.zeros(5, 4, dtype=torch.float64, requires_grad=True)
    _AssignBackward.apply(table, IDS).backward(_upstream())
    assert table.grad is not None
    with pytest.raises(EmbeddingError) as e:
        check_lookup_gradient(table.grad, IDS, _upstream())
    assert (e.value.code, e.value.value) == ("GRADIENT_NOT_ACCUMULATED", 1)
    assert "occurs 2 times" in e.value.message
    assert "2 row(s)" in e.value.message  # ids 1 and 3; id 0 occurs once and is right


def test_a_wrong_single_row_is_named_without_blaming_duplicates() -> None:
    up = _upstream()
    table = torch.zeros(5, 4, dtype=torch.float64, requires_grad=True)
    F.embedding(IDS, table).backward(up)
    assert table.grad is not None
    bad = table.grad.clone()
    bad[0, 0] += 1e-6
    with pytest.raises(EmbeddingError) as e:
        check_lookup_gradient(bad, IDS, up)
    assert (e.value.code, e.value.value) == ("GRADIENT_NOT_ACCUMULATED", 0)
    assert "duplicates" not in e.value.message
    with pytest.raises(UsageError):
        check_lookup_gradient(bad, IDS, up[..., :2])
