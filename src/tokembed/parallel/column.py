"""Column-parallel embedding: every rank holds all V rows, a slice of the features.

Rank r owns feature columns ``[a_r, b_r)`` of the ``[V, d]`` table (ceil chunks
of d, like :func:`~tokembed.parallel.intervals.row_intervals` for rows), so
its weight is ``[V, b_r - a_r]``. Every rank needs every id, and computes its
slice ``X_r = E[:, a_r:b_r][ids]`` locally.

The activation schedule is declared, not implied: placing the weight by columns
says nothing about whether the next operator wants the full width.

* ``gather_output=True``: forward all-gathers the slices and concatenates
  them along the feature dim, giving the full ``[*, d]`` on every rank;
  backward keeps this rank's columns of the upstream gradient (the split).
  This assumes the following computation is replicated, so every rank holds
  the same full upstream gradient.
* ``gather_output=False``: forward returns the local ``[*, b_r - a_r]`` slice
  for a next operator that accepts feature-sharded input; no collective.

An operator that needs whole rows (a norm, attention over the full width)
states it with :func:`require_full_rows`, which refuses a slice.

The lookup contract is TokenEmbedding's (the same config and checks); every
rank holds the PAD row's columns, so under ``zero_pad_row`` with a gathered
output the check is agreed over the group. max_norm is refused: a row's norm
spans every rank's columns.
"""

from __future__ import annotations

from typing import Unpack

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed import ProcessGroup

from tokembed.embedding.addressed import AddressedIds
from tokembed.embedding.init import new_table
from tokembed.embedding.lookup_checks import scale_lookup
from tokembed.embedding.lookup_config import LookupConfig, LookupPolicy
from tokembed.errors import ParallelError
from tokembed.parallel._autograd import gather_along
from tokembed.parallel._sharded_lookup import ShardedLookup, require_shardable, table_source
from tokembed.parallel.collectives import (
    all_gather_uneven,
    group_rank,
    group_size,
)
from tokembed.parallel.intervals import row_intervals

__all__ = ["ColumnParallelEmbedding", "require_full_rows"]


class ColumnParallelEmbedding(ShardedLookup, nn.Module):
    """An ``nn.Embedding(V, d)`` whose feature columns are split over ``group``.

    ``**policy`` is TokenEmbedding's lookup policy (``max_norm``, ``sparse`` and
    ``scale_grad_by_freq`` are refused).

    Example::

        >>> emb = ColumnParallelEmbedding(10, 8)            # rank 1 of 4: columns [2, 4)
        >>> emb.weight.shape, emb(torch.tensor([[1, 9]])).shape
        (torch.Size([10, 2]), torch.Size([1, 2, 8]))

    Raises (forward):
        EmbeddingError with the codes of TokenEmbedding's forward, on every rank
            before any collective (every rank holds the same ids).
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        *,
        group: ProcessGroup | None = None,
        gather_output: bool = True,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
        **policy: Unpack[LookupPolicy],
    ) -> None:
        super().__init__()
        config = LookupConfig(num_embeddings=num_embeddings, embedding_dim=embedding_dim, **policy)
        self.config = require_shardable(config, allow_max_norm=False)
        self.group, self.gather_output = group, gather_output
        self.world_size, self.rank = group_size(group), group_rank(group)
        self.column_intervals = row_intervals(embedding_dim, self.world_size)
        self.column_start, self.column_end = self.column_intervals[self.rank]
        self.weight = new_table(
            num_embeddings,
            self.column_end - self.column_start,
            padding_idx=self.local_padding_idx,
            dtype=dtype,
            device=device,
        )  # [V, d_r]
        self._guard_pad_row_on_load()

    @property
    def local_padding_idx(self) -> int | None:
        """``padding_idx``: every rank holds every row (its columns of it)."""
        return self.config.padding_idx

    @classmethod
    def from_embedding(
        cls, emb: object, *, group: ProcessGroup | None = None, gather_output: bool = True
    ) -> ColumnParallelEmbedding:
        """Shard a full nn.Embedding or TokenEmbedding (same on every rank): copy this rank's columns.

        Raises:
            ParallelError NOT_AN_EMBEDDING: ``emb`` is neither.
            UsageError INVALID_ARGUMENT: max_norm, sparse or scale_grad_by_freq is set.
        """
        config, full = table_source(emb, allow_max_norm=False)
        out = cls(
            config.num_embeddings,
            config.embedding_dim,
            group=group,
            gather_output=gather_output,
            dtype=full.dtype,
            device=full.device,
            **config.policy(),
        )
        with torch.no_grad():
            out.weight.copy_(full[:, out.column_start : out.column_end])
        return out

    def forward(self, ids: torch.Tensor | AddressedIds) -> torch.Tensor:
        """Global ids [*] -> [*, d] (gathered) or this rank's columns [*, d_r]."""
        raw = self._admit(ids, agree=self.gather_output and self.config.zero_pad_row)
        local = F.embedding(raw, self.weight, padding_idx=self.padding_idx)  # [*, d_r]
        if self.gather_output:
            sizes = [end - start for start, end in self.column_intervals]
            local = gather_along(local, dim=-1, sizes=sizes, group=self.group)  # [*, d]
        return scale_lookup(local, self.config, by=type(self).__name__)

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


def require_full_rows(rows: torch.Tensor, *, d_model: int, by: str) -> torch.Tensor:
    """Return ``rows`` if their last axis is the full width ``d_model``; refuse a feature slice.

    Example::

        >>> require_full_rows(torch.zeros(2, 8), d_model=8, by="RMSNorm").shape
        torch.Size([2, 8])

    Raises:
        ParallelError ACTIVATION_NOT_GATHERED: the rows are narrower or wider than
            ``d_model`` (a column-sharded lookup's local slice reached an operator
            that needs every feature; no all-gather was declared).
    """
    width = rows.shape[-1] if rows.dim() else 0
    if width != d_model:
        raise ParallelError(
            "ACTIVATION_NOT_GATHERED",
            f"{by} needs full rows of width {d_model} but got width {width}: placing the"
            " weight by columns does not gather the activation",
            value=width,
            fix="build the column-parallel embedding with gather_output=True, or give the next"
            " operator a declared feature-sharded layout",
        )
    return rows
