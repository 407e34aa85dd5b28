"""One-hot selection: the conceptual form of a lookup, built from the declared V.

``one_hot(ids) @ E == E[ids]`` exactly: every term but the selected
row is multiplied by zero. This module exists to state and test that identity,
not to execute lookups — for B=8, L=2048, V=128,000 the int64 selector alone is
15.625 GiB against 128 KiB of ids. The selector width is always the table's row
count V, never ``ids.max() + 1``: a batch-dependent width would give every
batch a different coordinate system.

Example::

    >>> E = torch.tensor([[1.0, 0], [2, 0], [0, 1]])
    >>> one_hot_lookup(torch.tensor([0, 2, 0]), E).tolist()
    [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tokembed.embedding.contracts import check_index_tensor, validate_ids
from tokembed.errors import UsageError

__all__ = ["one_hot_linear", "one_hot_lookup", "one_hot_selectors"]


def one_hot_selectors(
    ids: torch.Tensor, *, num_classes: int, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """S[..., v] = 1[v == ids[...]] with exactly ``num_classes`` (= declared V) columns.

    Raises:
        UsageError INVALID_ARGUMENT: ``num_classes`` < 1 (F.one_hot's -1 "infer from
            the batch" is refused on purpose).
        EmbeddingError INDEX_DTYPE_MISMATCH / ID_OUT_OF_RANGE: as validate_ids.
    """
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"num_classes must be the declared vocabulary size V >= 1, got {num_classes!r}",
            value=num_classes,
            fix="pass num_classes=table.num_embeddings, never ids.max() + 1",
        )
    validate_ids(ids, num_classes)
    return F.one_hot(ids.long(), num_classes).to(dtype)


def one_hot_lookup(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The reference lookup ``one_hot(ids, V) @ weight`` with V = weight.shape[0].

    Raises: as :func:`one_hot_selectors` (and DEVICE_MISMATCH via the ids check).
    """
    check_index_tensor(ids, device=weight.device)
    selectors = one_hot_selectors(ids, num_classes=weight.shape[0], dtype=weight.dtype)
    return selectors @ weight  # [*ids.shape, V] @ [V, d] -> [*ids.shape, d]


def one_hot_linear(weight: torch.Tensor) -> nn.Linear:
    """A bias-free ``nn.Linear(V, d)`` whose weight is E^T (a view, no copy): Linear(S) = S E.

    A bias would add the same vector to every selected row, breaking the identity with
    lookup, so there is none.
    """
    v, d = weight.shape
    linear = nn.Linear(v, d, bias=False, device=weight.device, dtype=weight.dtype)
    linear.weight = nn.Parameter(weight.detach().t())  # [d, V] view of the [V, d] table
    return linear
