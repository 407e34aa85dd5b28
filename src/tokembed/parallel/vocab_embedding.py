"""Vocabulary-parallel embedding: row shards, masked local lookup, sum over the group.

Schedule C of spec 0x04A. Rank ``r`` of the tensor-parallel group owns the
contiguous rows ``[vocab_start, vocab_end)`` given by
:func:`~tokembed.parallel.intervals.row_intervals` (ceil chunks, no padded
vocabulary). Every rank sees the same full ids ``[*]`` and:

1. marks the ids it owns, maps them to local rows (others to local row 0),
2. looks them up in its shard and zeroes the rows it does not own,
3. sums the partial outputs over the group (all-reduce), or, with
   ``sequence_parallel=True``, reduce-scatters them along ``sequence_dim`` so
   each rank keeps ``1/R`` of the sequence (its backward is an all-gather).

Exactly one rank contributes a non-zero row per position, so the sum is the
single-process lookup; in backward each shard receives the scatter-add of the
positions it owns and no weight-gradient collective is needed on this axis.

``padding_idx`` stays a global id: only its owner holds that row and
suppresses its gradient. ``max_norm`` renormalizes, in place on the owning
shard, exactly the owned rows that are looked up (as nn.Embedding does).

What this module does not do: data-parallel reduction of the shard's gradient
(see :mod:`tokembed.parallel.ownership`), frequency scaling, sparse gradients.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from tokembed.embedding.contracts import validate_ids
from tokembed.errors import ParallelError, UsageError
from tokembed.parallel._autograd import reduce_from_group, reduce_scatter_along
from tokembed.parallel._collectives import ProcessGroup, agree_on_error
from tokembed.parallel._row_shard import RowShardedTable

__all__ = ["VocabParallelEmbedding"]

IdCheck = Literal["local", "group"]


class VocabParallelEmbedding(RowShardedTable):
    """An ``nn.Embedding(V, d)`` whose rows are split over a tensor-parallel group.

    Args:
        num_embeddings: global vocabulary rows V.
        embedding_dim: row width d.
        group: tensor-parallel process group (default: the world).
        padding_idx: global PAD id in [0, V) or None; its owner zeroes the row
            and suppresses its lookup gradient.
        max_norm, norm_type: as nn.Embedding; renorm writes persist on the owner.
        sequence_parallel: reduce-scatter the output along ``sequence_dim``
            instead of all-reducing it; that dim must be divisible by R.
        sequence_dim: which output dim is the sequence (default 1: ids are
            [batch, seq], output [batch, seq/R, d]).
        id_check: "local" (default) validates ids on each rank before any
            collective; in tensor parallelism every rank holds the same ids, so
            every rank raises at the same point without communicating.
            "group" adds one all-reduce of a flag so that ranks whose ids differ
            still all raise together.

    Example::

        >>> emb = VocabParallelEmbedding(10, 4)        # rank 1 of 4 owns rows [3, 6)
        >>> emb(torch.tensor([[0, 4, 9]])).shape       # summed over the group
        torch.Size([1, 3, 4])

    Raises (forward):
        EmbeddingError ID_OUT_OF_RANGE / INDEX_DTYPE_MISMATCH / DEVICE_MISMATCH
            on every rank, before any collective; with id_check="group" peers of
            the failing rank raise ParallelError with the same code.
        ParallelError SHAPE_MISMATCH: sequence dim not divisible by the group size.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        *,
        group: ProcessGroup | None = None,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        sequence_parallel: bool = False,
        sequence_dim: int = 1,
        id_check: IdCheck = "local",
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        if id_check not in ("local", "group"):
            raise UsageError(
                "INVALID_ARGUMENT",
                f"id_check must be 'local' or 'group', got {id_check!r}",
                value=id_check,
                fix="pass id_check='local' (same ids on every rank) or 'group'",
            )
        super().__init__(
            num_embeddings,
            embedding_dim,
            group=group,
            padding_idx=padding_idx,
            max_norm=max_norm,
            norm_type=norm_type,
            dtype=dtype,
            device=device,
        )
        self.sequence_parallel, self.sequence_dim = sequence_parallel, sequence_dim
        self.id_check: IdCheck = id_check

    @classmethod
    def from_embedding(
        cls,
        emb: nn.Embedding,
        *,
        group: ProcessGroup | None = None,
        sequence_parallel: bool = False,
        sequence_dim: int = 1,
        id_check: IdCheck = "local",
    ) -> VocabParallelEmbedding:
        """Shard a full ``nn.Embedding`` (same on every rank): copy this rank's rows.

        Keeps its padding_idx, max_norm and norm_type.

        Raises:
            ParallelError NOT_AN_EMBEDDING: ``emb`` is not an nn.Embedding.
            UsageError INVALID_ARGUMENT: ``emb`` uses sparse gradients or
                scale_grad_by_freq (masked lookup would count non-owned
                positions against local row 0).
        """
        return cls._from_embedding(
            emb,
            group=group,
            sequence_parallel=sequence_parallel,
            sequence_dim=sequence_dim,
            id_check=id_check,
        )

    def _check_ids(self, ids: torch.Tensor) -> None:
        validate_ids(ids, self.num_embeddings, device=self.weight.device)
        if self.sequence_parallel:
            dim = self.sequence_dim % (ids.dim() + 1)
            if dim >= ids.dim() or ids.shape[dim] % self.world_size:
                raise ParallelError(
                    "SHAPE_MISMATCH",
                    f"sequence dim {self.sequence_dim} of ids {tuple(ids.shape)} is not "
                    f"divisible by the group size {self.world_size}",
                    value=tuple(ids.shape),
                    fix="pad the sequence to a multiple of the tensor-parallel size",
                )

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Global ids [*] -> embeddings [*, d] (sequence-parallel: ``sequence_dim`` / R)."""
        if self.id_check == "group":
            agree_on_error(lambda: self._check_ids(ids), group=self.group)
        else:
            self._check_ids(ids)
        owned = (ids >= self.vocab_start) & (ids < self.vocab_end)  # [*] bool
        local = torch.where(owned, ids - self.vocab_start, 0)  # [*] in [0, V_r)
        if self.weight.shape[0] == 0:  # an empty tail shard (e.g. V=9 over 4) owns nothing
            # [*, 0] @ [0, d]: zeros that stay connected to the (empty) weight, so
            # backward reaches the reduction on this rank like on its peers.
            part = self.weight.new_zeros((*ids.shape, 0)) @ self.weight  # [*, d]
        else:
            # Renormalize only owned rows that are looked up; non-owned
            # positions point at local row 0 and must not touch it.
            if self.max_norm is not None:  # the boolean gather costs a host sync: skip it
                self._renorm(local[owned])
            part = F.embedding(local, self.weight, padding_idx=self.local_padding_idx)  # [*, d]
            # In place is safe: embedding's backward needs only the indices, not its output.
            part.masked_fill_(~owned.unsqueeze(-1), 0.0)
        if self.sequence_parallel:
            return reduce_scatter_along(part, dim=self.sequence_dim, group=self.group)
        return reduce_from_group(part, group=self.group)
