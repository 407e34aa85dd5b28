"""Checking a table gradient against the lookup's backward rule: scatter-add, never assignment.

The backward of ``X = E[ids]`` is ``dE[u] = sum of dX[p] over positions p with
ids[p] = u``. A hand-written backward that assigns ``dE[ids] = dX`` keeps one
occurrence of each repeated id (which one is unspecified) and every shape
still matches. :func:`check_lookup_gradient` recomputes the scatter-add in
float64 and refuses a gradient that differs from it by more than the rounding
of its own sum, naming the first wrong row and whether that row was repeated.

Example::

    >>> table = torch.zeros(4, 2, requires_grad=True)
    >>> ids, upstream = torch.tensor([1, 1, 3]), torch.ones(3, 2)
    >>> torch.nn.functional.embedding(ids, table).backward(upstream)
    >>> check_lookup_gradient(table.grad, ids, upstream)
"""

from __future__ import annotations

import torch

from tokembed.errors import EmbeddingError, UsageError

__all__ = ["check_lookup_gradient"]


def check_lookup_gradient(grad: torch.Tensor, ids: torch.Tensor, upstream: torch.Tensor) -> None:
    """Refuse a [V, d] table gradient that is not the scatter-add of ``upstream`` [*ids, d] by ``ids``.

    ``grad`` may be dense or sparse (COO, coalesced or not). Each row is compared
    with the float64 sum of its contributions; the allowed difference for row u
    is ``(n_u + 1) * eps * sum |dX[p]|`` over its n_u contributions, the rounding
    bound of a sum of n_u terms accumulated in ``grad``'s dtype and rounded once.

    Raises:
        EmbeddingError GRADIENT_NOT_ACCUMULATED: a row differs from its sum (the
            value is the first such row; the message says when it was repeated,
            i.e. duplicates were overwritten rather than added).
        UsageError INVALID_ARGUMENT: shapes that do not describe one lookup.
    """
    if grad.dim() != 2 or upstream.shape != (*ids.shape, grad.shape[1]):
        raise UsageError(
            "INVALID_ARGUMENT",
            f"expected grad [V, d] and upstream [*ids.shape, d]; got grad {tuple(grad.shape)},"
            f" ids {tuple(ids.shape)}, upstream {tuple(upstream.shape)}",
            value=(tuple(grad.shape), tuple(ids.shape), tuple(upstream.shape)),
            fix="pass the table's .grad, the ids looked up and the gradient of the lookup output",
        )
    dense = (grad.to_dense() if grad.layout == torch.sparse_coo else grad).detach()
    flat = ids.reshape(-1).to(device=dense.device, dtype=torch.int64)
    contributions = upstream.detach().reshape(flat.numel(), -1).to(dense.device, torch.float64)
    rows = dense.shape[0]
    want = torch.zeros(rows, dense.shape[1], dtype=torch.float64, device=dense.device)
    want.index_add_(0, flat, contributions)
    magnitude = torch.zeros_like(want).index_add_(0, flat, contributions.abs())
    counts = torch.bincount(flat, minlength=rows).to(torch.float64).unsqueeze(1)
    eps = torch.finfo(dense.dtype).eps if dense.is_floating_point() else 0.0
    bound = (counts + 1) * eps * magnitude
    wrong = ((dense.to(torch.float64) - want).abs() > bound).any(dim=1).nonzero().flatten()
    if wrong.numel() == 0:
        return
    row = int(wrong[0])
    repeated = int(counts[row, 0])
    why = (
        f"id {row} occurs {repeated} times and its gradient is not the sum of their"
        " contributions (duplicates overwritten instead of accumulated)"
        if repeated > 1
        else f"row {row}'s gradient differs from its {repeated} contribution(s)"
    )
    raise EmbeddingError(
        "GRADIENT_NOT_ACCUMULATED",
        f"{why}; {wrong.numel()} row(s) differ from the scatter-add",
        value=row,
        fix="accumulate with index_add_ / scatter_add_ (or a sorted segment sum), never"
        " assign dE[ids] = dX",
    )
