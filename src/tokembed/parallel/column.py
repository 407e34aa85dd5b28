"""Column-parallel embedding: every rank holds all V rows, a slice of the features (schedule D).

Rank r owns feature columns ``[a_r, b_r)`` of the ``[V, d]`` table (ceil chunks
of d, like :func:`~tokembed.parallel.intervals.row_intervals` for rows), so
its weight is ``[V, b_r - a_r]``. Every rank needs every id, and computes its
slice ``X_r = E[:, a_r:b_r][ids]`` locally.

The activation schedule is declared, not implied (spec 0x0D "Column-wise
weight placement is mistaken for a full activation schedule"):

* ``gather_output=True``: forward all-gathers the slices and concatenates
  them along the feature dim, giving the full ``[*, d]`` on every rank;
  backward keeps this rank's columns of the upstream gradient (the split).
  This assumes the following computation is replicated, so every rank holds
  the same full upstream gradient.
* ``gather_output=False``: forward returns the local ``[*, b_r - a_r]`` slice
  for a next operator that accepts feature-sharded input; no collective.

max_norm is refused: a row's norm spans every rank's columns.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tokembed.embedding.contracts import validate_ids
from tokembed.parallel._autograd import gather_along
from tokembed.parallel._collectives import (
    ProcessGroup,
    all_gather_uneven,
    group_rank,
    group_size,
)
from tokembed.parallel._row_shard import check_table_args, require_plain_embedding
from tokembed.parallel.intervals import row_intervals

__all__ = ["ColumnParallelEmbedding"]


class ColumnParallelEmbedding(nn.Module):
    """An ``nn.Embedding(V, d)`` whose feature columns are split over ``group``.

    Example::

        >>> emb = ColumnParallelEmbedding(10, 8)            # rank 1 of 4: columns [2, 4)
        >>> emb.weight.shape, emb(torch.tensor([[1, 9]])).shape
        (torch.Size([10, 2]), torch.Size([1, 2, 8]))

    Raises (forward):
        EmbeddingError ID_OUT_OF_RANGE / INDEX_DTYPE_MISMATCH / DEVICE_MISMATCH
            on every rank before any collective (every rank holds the same ids).
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        *,
        group: ProcessGroup | None = None,
        padding_idx: int | None = None,
        gather_output: bool = True,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        check_table_args(num_embeddings, embedding_dim, padding_idx)
        self.group = group
        self.world_size, self.rank = group_size(group), group_rank(group)
        self.column_intervals = row_intervals(embedding_dim, self.world_size)
        self.column_start, self.column_end = self.column_intervals[self.rank]
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx, self.gather_output = padding_idx, gather_output
        self.weight = nn.Parameter(
            torch.empty(
                num_embeddings, self.column_end - self.column_start, dtype=dtype, device=device
            )
        )  # [V, d_r]
        nn.init.normal_(self.weight)
        if padding_idx is not None:
            with torch.no_grad():
                self.weight[padding_idx].zero_()

    @classmethod
    def from_embedding(
        cls, emb: nn.Embedding, *, group: ProcessGroup | None = None, gather_output: bool = True
    ) -> ColumnParallelEmbedding:
        """Shard a full ``nn.Embedding`` (same on every rank): copy this rank's columns.

        Raises:
            ParallelError NOT_AN_EMBEDDING: ``emb`` is not an nn.Embedding.
            UsageError INVALID_ARGUMENT: max_norm, sparse or scale_grad_by_freq is set.
        """
        emb = require_plain_embedding(emb, allow_max_norm=False)
        out = cls(
            emb.num_embeddings,
            emb.embedding_dim,
            group=group,
            padding_idx=emb.padding_idx,
            gather_output=gather_output,
            dtype=emb.weight.dtype,
            device=emb.weight.device,
        )
        with torch.no_grad():
            out.weight.copy_(emb.weight[:, out.column_start : out.column_end])
        return out

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Global ids [*] -> [*, d] (gathered) or this rank's columns [*, d_r]."""
        validate_ids(ids, self.num_embeddings, device=self.weight.device)
        local = F.embedding(ids, self.weight, padding_idx=self.padding_idx)  # [*, d_r]
        if not self.gather_output:
            return local
        sizes = [end - start for start, end in self.column_intervals]
        return gather_along(local, dim=-1, sizes=sizes, group=self.group)  # [*, d]

    @torch.no_grad()
    def gather_weight(self) -> torch.Tensor:
        """The full [V, d] table on every rank (a collective: call it on all ranks)."""
        sizes = [end - start for start, end in self.column_intervals]
        columns = all_gather_uneven(self.weight.detach().t(), sizes, group=self.group)  # [d, V]
        return columns.t().contiguous()

    def extra_repr(self) -> str:
        return (
            f"{self.num_embeddings}, {self.embedding_dim}, columns=[{self.column_start}, "
            f"{self.column_end}) of {self.world_size} ranks, gather_output={self.gather_output}"
        )
