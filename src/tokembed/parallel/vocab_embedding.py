"""Vocabulary-parallel embedding: row shards, masked local lookup, sum over the group.

Rank ``r`` of the tensor-parallel group owns the contiguous rows
``[vocab_start, vocab_end)`` given by
:func:`~tokembed.parallel.intervals.row_intervals` (ceil chunks, no padded
vocabulary). Every rank sees the same full ids ``[*]`` and:

1. runs the lookup contract of its :class:`~tokembed.embedding.lookup_config.LookupConfig`
   (the same checks as TokenEmbedding, see :mod:`tokembed.parallel._sharded_lookup`),
2. marks the ids it owns, maps them to local rows (others to local row 0),
3. looks them up in its shard and zeroes the rows it does not own,
4. sums the partial outputs over the group (all-reduce), or, with
   ``sequence_parallel=True``, reduce-scatters them along ``sequence_dim`` so
   each rank keeps ``1/R`` of the sequence (its backward is an all-gather),
5. applies the input scale once and stamps it.

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

from typing import Literal, Unpack

import torch
import torch.nn.functional as F
from torch.distributed import ProcessGroup

from tokembed.embedding.addressed import AddressedIds
from tokembed.embedding.lookup_checks import scale_lookup
from tokembed.embedding.lookup_config import LookupPolicy
from tokembed.errors import ParallelError, UsageError
from tokembed.parallel._autograd import reduce_from_group, reduce_scatter_along
from tokembed.parallel._row_shard import RowShardedTable

__all__ = ["VocabParallelEmbedding"]

IdCheck = Literal["local", "group"]


class VocabParallelEmbedding(RowShardedTable):
    """An ``nn.Embedding(V, d)`` whose rows are split over a tensor-parallel group.

    Args:
        num_embeddings: global vocabulary rows V.
        embedding_dim: row width d.
        group: tensor-parallel process group (default: the world).
        sequence_parallel: reduce-scatter the output along ``sequence_dim``
            instead of all-reducing it; that dim must be divisible by R.
        sequence_dim: which output dim is the sequence (default 1: ids are
            [batch, seq], output [batch, seq/R, d]).
        id_check: "local" (default) validates ids on each rank before any
            collective; in tensor parallelism every rank holds the same ids, so
            every rank raises at the same point without communicating.
            "group" adds one all-reduce of a flag so that ranks whose ids differ
            still all raise together. ``zero_pad_row`` implies "group": only the
            PAD row's owner can see that it is not zero.
        **policy: the lookup policy of TokenEmbedding (``padding_idx`` as a
            global id, ``zero_pad_row``, ``max_norm``, ``norm_type``,
            ``input_scale``, ``address_hash``, ``require_address``, ``id_route``,
            ``role``); ``sparse`` and ``scale_grad_by_freq`` are refused.

    Example::

        >>> emb = VocabParallelEmbedding(10, 4)        # rank 1 of 4 owns rows [3, 6)
        >>> emb(torch.tensor([[0, 4, 9]])).shape       # summed over the group
        torch.Size([1, 3, 4])

    Raises (forward, on every rank before any collective):
        EmbeddingError, the codes of TokenEmbedding's forward (ID_OUT_OF_RANGE,
            ADDRESS_HASH_MISMATCH, PAD_ID_INVALID, PAD_ROW_NOT_ZERO, ...); under
            group agreement the peers of a failing rank raise the same class and
            code, naming that rank.
        ParallelError SEQUENCE_NOT_DIVISIBLE: sequence dim not divisible by the group size.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        *,
        group: ProcessGroup | None = None,
        sequence_parallel: bool = False,
        sequence_dim: int = 1,
        id_check: IdCheck = "local",
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
        **policy: Unpack[LookupPolicy],
    ) -> None:
        if id_check not in ("local", "group"):
            raise UsageError(
                "INVALID_ARGUMENT",
                f"id_check must be 'local' or 'group', got {id_check!r}",
                value=id_check,
                fix="pass id_check='local' (same ids on every rank) or 'group'",
            )
        super().__init__(
            num_embeddings, embedding_dim, group=group, dtype=dtype, device=device, **policy
        )
        self.sequence_parallel, self.sequence_dim = sequence_parallel, sequence_dim
        self.id_check: IdCheck = id_check

    @classmethod
    def from_embedding(
        cls,
        emb: object,
        *,
        group: ProcessGroup | None = None,
        sequence_parallel: bool = False,
        sequence_dim: int = 1,
        id_check: IdCheck = "local",
    ) -> VocabParallelEmbedding:
        """Shard a full table (the same on every rank): copy this rank's rows.

        ``emb`` is an nn.Embedding (its padding_idx, max_norm and norm_type are
        kept) or a TokenEmbedding (its whole lookup contract is kept).

        Raises:
            ParallelError NOT_AN_EMBEDDING: ``emb`` is neither.
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

    def _check_sequence(self, ids: torch.Tensor) -> None:
        if not self.sequence_parallel:
            return
        dim = self.sequence_dim % (ids.dim() + 1)
        if dim >= ids.dim() or ids.shape[dim] % self.world_size:
            raise ParallelError(
                "SEQUENCE_NOT_DIVISIBLE",
                f"sequence dim {self.sequence_dim} of ids {tuple(ids.shape)} is not "
                f"divisible by the group size {self.world_size}",
                value=tuple(ids.shape),
                fix="pad the sequence to a multiple of the tensor-parallel size",
            )

    def forward(self, ids: torch.Tensor | AddressedIds) -> torch.Tensor:
        """Global ids [*] -> embeddings [*, d] (sequence-parallel: ``sequence_dim`` / R)."""
        agree = self.id_check == "group" or self.config.zero_pad_row
        ids = self._admit(ids, agree=agree, also=self._check_sequence)
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
            out = reduce_scatter_along(part, dim=self.sequence_dim, group=self.group)
        else:
            out = reduce_from_group(part, group=self.group)
        return scale_lookup(out, self.config, by=type(self).__name__)
