"""A guard for forwards that change the table they read.

``nn.Embedding(max_norm=...)`` renormalizes the rows it looks up *in place*,
during the forward, under ``torch.no_grad()`` and in eval mode alike, with no
optimizer step. A hash taken before a forward, a checkpoint compared with the
model after an evaluation pass, or a second reader of the same table can all
disagree with the table afterwards. :func:`unchanged_table` raises when a block
of code changed a table's exact contents, as named by
:func:`~tokembed.artifacts.digest.tensor_digest` (dtype, shape and bytes in
row-major order, whatever the storage layout).

Example::

    >>> emb = torch.nn.Embedding(4, 2, max_norm=0.5)
    >>> with unchanged_table(emb.weight, by="evaluation"):
    ...     _ = emb(torch.tensor([1]))
    Traceback (most recent call last):
    ...
    tokembed.errors.EmbeddingError: TABLE_MUTATED_IN_FORWARD: ...
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from tokembed.artifacts.digest import tensor_digest
from tokembed.errors import EmbeddingError

__all__ = ["unchanged_table"]


def _changed_rows(before: torch.Tensor, after: torch.Tensor) -> list[int]:
    differ = before.ne(after) & ~(before.isnan() & after.isnan())
    return differ.reshape(differ.shape[0], -1).any(dim=1).nonzero().flatten().tolist()


@contextmanager
def unchanged_table(table: torch.Tensor, *, by: str, keep_copy: bool = True) -> Iterator[str]:
    """Raise if ``table`` differs after the block from before it; yield the digest before.

    ``keep_copy`` keeps a copy of the table to name the rows that changed (set it
    False for a table too large to copy: the digest alone then decides).

    Raises:
        EmbeddingError TABLE_MUTATED_IN_FORWARD: the block changed the table
            (e.g. a lookup with max_norm renormalized the rows it read); the value
            is the list of changed rows, or the two digests without a copy.
    """
    before = tensor_digest(table)
    copy = table.detach().clone() if keep_copy else None
    yield before
    after = tensor_digest(table)
    if after == before:
        return
    value: object = (before, after)
    where = f"its digest went from {before[:15]}... to {after[:15]}..."
    if copy is not None and copy.shape == table.shape:
        rows = _changed_rows(copy, table.detach())
        value = rows
        where = f"rows {rows[:8]}{'...' if len(rows) > 8 else ''} changed"
    raise EmbeddingError(
        "TABLE_MUTATED_IN_FORWARD",
        f"{by} changed the table it was declared to leave unchanged: {where}",
        value=value,
        fix="a max_norm lookup renormalizes the rows it reads in place: hash or compare the"
        " table after the forward, give concurrent readers a copy, or build without max_norm",
    )
