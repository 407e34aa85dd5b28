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
from tokembed.errors import EmbeddingError, ParallelError, UsageError
from tokembed.parallel._autograd import reduce_from_group, reduce_scatter_along
from tokembed.parallel._collectives import (
    ProcessGroup,
    agree_on_error,
    all_gather_uneven,
)
from tokembed.parallel.ownership import RowOwnership, mark_rows

__all__ = ["VocabParallelEmbedding"]

IdCheck = Literal["local", "group"]


class VocabParallelEmbedding(nn.Module):
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
        super().__init__()
        if embedding_dim < 1 or (padding_idx is not None and not 0 <= padding_idx < num_embeddings):
            raise UsageError(
                "INVALID_ARGUMENT",
                f"embedding_dim={embedding_dim}, padding_idx={padding_idx} for V={num_embeddings}",
                value=(embedding_dim, padding_idx),
                fix="use embedding_dim >= 1 and a global padding_idx in [0, V)",
            )
        if id_check not in ("local", "group"):
            raise UsageError(
                "INVALID_ARGUMENT",
                f"id_check must be 'local' or 'group', got {id_check!r}",
                value=id_check,
                fix="pass id_check='local' (same ids on every rank) or 'group'",
            )
        self.group = group
        self.ownership = RowOwnership.for_group(num_embeddings, group=group)
        self.world_size, self.rank = self.ownership.world_size, self.ownership.rank
        self.intervals = self.ownership.intervals
        self.vocab_start, self.vocab_end = self.ownership.start, self.ownership.end
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = padding_idx
        self.max_norm, self.norm_type = max_norm, norm_type
        self.sequence_parallel, self.sequence_dim = sequence_parallel, sequence_dim
        self.id_check: IdCheck = id_check
        local_rows = self.vocab_end - self.vocab_start
        self.weight = nn.Parameter(
            torch.empty(local_rows, embedding_dim, dtype=dtype, device=device)
        )  # [V_r, d]
        mark_rows(self.weight, self.ownership)
        self.reset_parameters()

    @property
    def local_padding_idx(self) -> int | None:
        """``padding_idx - vocab_start`` on the owner of the PAD row, None elsewhere."""
        pad = self.padding_idx
        if pad is None or not self.vocab_start <= pad < self.vocab_end:
            return None
        return pad - self.vocab_start

    def reset_parameters(self) -> None:
        """N(0, 1) rows like nn.Embedding, with the owned PAD row zeroed."""
        nn.init.normal_(self.weight)
        if self.local_padding_idx is not None:
            with torch.no_grad():
                self.weight[self.local_padding_idx].zero_()

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

        Raises:
            ParallelError NOT_AN_EMBEDDING: ``emb`` is not an nn.Embedding.
            UsageError INVALID_ARGUMENT: ``emb`` uses sparse gradients or
                scale_grad_by_freq (masked lookup would count non-owned
                positions against local row 0).
        """
        if not isinstance(emb, nn.Embedding):
            raise ParallelError(
                "NOT_AN_EMBEDDING",
                f"expected an nn.Embedding, got {type(emb).__name__}",
                value=type(emb).__name__,
                fix="shard the model's input embedding module itself",
            )
        if emb.sparse or emb.scale_grad_by_freq:
            raise UsageError(
                "INVALID_ARGUMENT",
                "vocabulary-parallel lookup supports neither sparse=True nor scale_grad_by_freq",
                value=(emb.sparse, emb.scale_grad_by_freq),
                fix="build the embedding with sparse=False, scale_grad_by_freq=False",
            )
        out = cls(
            emb.num_embeddings,
            emb.embedding_dim,
            group=group,
            padding_idx=emb.padding_idx,
            max_norm=emb.max_norm,
            norm_type=emb.norm_type,
            sequence_parallel=sequence_parallel,
            sequence_dim=sequence_dim,
            id_check=id_check,
            dtype=emb.weight.dtype,
            device=emb.weight.device,
        )
        with torch.no_grad():
            out.weight.copy_(emb.weight[out.vocab_start : out.vocab_end])
        return out

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

    def local_lookup(self, local_ids: torch.Tensor) -> torch.Tensor:
        """Look up rows of this shard by LOCAL index in ``[0, vocab_end - vocab_start)``.

        ``local_ids`` [*] -> [*, d]. No collective, no renormalization.

        Raises:
            ParallelError GLOBAL_ID_ON_LOCAL_SHARD: an index is outside the
                local rows (a global id used without subtracting vocab_start).
        """
        rows = self.vocab_end - self.vocab_start
        try:
            validate_ids(local_ids, rows, device=self.weight.device, what="local_ids")
        except EmbeddingError as error:
            if error.code != "ID_OUT_OF_RANGE":
                raise
            raise ParallelError(
                "GLOBAL_ID_ON_LOCAL_SHARD",
                f"{error.message}; this shard holds local rows [0, {rows}) for global rows "
                f"[{self.vocab_start}, {self.vocab_end})",
                value=error.value,
                fix=f"map global ids with id - {self.vocab_start} after proving ownership, "
                "or call the module itself with global ids",
            ) from error
        return F.embedding(local_ids, self.weight, padding_idx=self.local_padding_idx)

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
            if self.max_norm is not None:
                # Renormalize only owned rows that are looked up; non-owned
                # positions point at local row 0 and must not touch it.
                with torch.no_grad():
                    torch.embedding_renorm_(
                        self.weight, local[owned], self.max_norm, self.norm_type
                    )
            part = F.embedding(local, self.weight, padding_idx=self.local_padding_idx)  # [*, d]
            part = part.masked_fill(~owned.unsqueeze(-1), 0.0)
        if self.sequence_parallel:
            return reduce_scatter_along(part, dim=self.sequence_dim, group=self.group)
        return reduce_from_group(part, group=self.group)

    @torch.no_grad()
    def gather_weight(self) -> torch.Tensor:
        """The full [V, d] table on every rank (a collective: call it on all ranks)."""
        sizes = [end - start for start, end in self.intervals]
        return all_gather_uneven(self.weight.detach(), sizes, group=self.group)

    def extra_repr(self) -> str:
        return (
            f"{self.num_embeddings}, {self.embedding_dim}, rows=[{self.vocab_start}, "
            f"{self.vocab_end}) of {self.world_size} ranks, padding_idx={self.padding_idx}, "
            f"max_norm={self.max_norm}, sequence_parallel={self.sequence_parallel}"
        )
