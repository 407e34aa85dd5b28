"""What every row-sharded table shares: its interval, local weight, PAD row and checks.

Both row schedules of spec 0x04A (masked local lookup, owner-routed lookup)
hold rows ``[vocab_start, vocab_end)`` of a global ``[V, d]`` table on each
rank. This base keeps the bookkeeping in one place: the ownership record on
the weight, the global ``padding_idx`` mapped to a local row only on its
owner, ``max_norm`` renormalization of owned rows, building from a full
``nn.Embedding``, gathering the full table, and the local-index lookup that
refuses global ids (GLOBAL_ID_ON_LOCAL_SHARD).
"""

from __future__ import annotations

from typing import Any, Self

import torch
import torch.nn.functional as F
from torch import nn

from tokembed.embedding.contracts import validate_ids
from tokembed.errors import EmbeddingError, ParallelError, UsageError
from tokembed.parallel._collectives import ProcessGroup, all_gather_uneven
from tokembed.parallel.ownership import RowOwnership, mark_rows, mark_sharded_source

__all__ = [
    "RowIntervals",
    "RowShardedTable",
    "check_table_args",
    "copy_owned_rows",
    "require_plain_embedding",
]


def check_table_args(num_embeddings: int, embedding_dim: int, padding_idx: int | None) -> None:
    """Refuse a table shape or PAD id nn.Embedding would refuse (UsageError INVALID_ARGUMENT)."""
    if (
        num_embeddings < 0
        or embedding_dim < 1
        or (padding_idx is not None and not 0 <= padding_idx < num_embeddings)
    ):
        raise UsageError(
            "INVALID_ARGUMENT",
            f"num_embeddings={num_embeddings}, embedding_dim={embedding_dim}, "
            f"padding_idx={padding_idx}",
            value=(num_embeddings, embedding_dim, padding_idx),
            fix="use V >= 0, embedding_dim >= 1 and a global padding_idx in [0, V)",
        )


def require_plain_embedding(emb: object, *, allow_max_norm: bool) -> nn.Embedding:
    """Return ``emb`` if it is an nn.Embedding a sharded lookup can reproduce exactly.

    Raises:
        ParallelError NOT_AN_EMBEDDING: ``emb`` is not an nn.Embedding.
        UsageError INVALID_ARGUMENT: sparse=True or scale_grad_by_freq (the
            frequency count scope would be per shard, spec 0x04A), or
            max_norm where the schedule cannot renormalize a whole row.
    """
    if not isinstance(emb, nn.Embedding):
        raise ParallelError(
            "NOT_AN_EMBEDDING",
            f"expected an nn.Embedding, got {type(emb).__name__}",
            value=type(emb).__name__,
            fix="shard the model's input embedding module itself",
        )
    if emb.sparse or emb.scale_grad_by_freq or (emb.max_norm is not None and not allow_max_norm):
        raise UsageError(
            "INVALID_ARGUMENT",
            "this sharded lookup supports neither sparse=True nor scale_grad_by_freq"
            + ("" if allow_max_norm else " nor max_norm (a row norm spans every rank)"),
            value=(emb.sparse, emb.scale_grad_by_freq, emb.max_norm),
            fix="build the embedding with sparse=False and scale_grad_by_freq=False"
            + ("" if allow_max_norm else "; use row sharding for max_norm tables"),
        )
    return emb


@torch.no_grad()
def copy_owned_rows(shard: torch.Tensor, full: torch.Tensor, ownership: RowOwnership) -> None:
    """Copy rows ``[start, end)`` of the replicated ``full`` table into ``shard``; mark ``full``.

    The mark lets :func:`~tokembed.parallel.ownership.check_owned_step` refuse
    an optimizer that still steps the replicated table (NON_OWNER_STEP).
    """
    shard.copy_(full[ownership.start : ownership.end])
    mark_sharded_source(full, ownership)


class RowIntervals:
    """Row-interval views and the gather shared by row-sharded tables and heads.

    Subclasses set ``self.ownership`` (a RowOwnership), ``self.group`` and ``self.weight``.
    """

    ownership: RowOwnership
    group: ProcessGroup | None
    weight: nn.Parameter

    @property
    def vocab_start(self) -> int:
        return self.ownership.start

    @property
    def vocab_end(self) -> int:
        return self.ownership.end

    @property
    def intervals(self) -> list[tuple[int, int]]:
        return self.ownership.intervals

    @property
    def rank(self) -> int:
        return self.ownership.rank

    @property
    def world_size(self) -> int:
        return self.ownership.world_size

    @torch.no_grad()
    def gather_weight(self) -> torch.Tensor:
        """The full [V, d] table on every rank (a collective: call it on all ranks)."""
        sizes = [end - start for start, end in self.intervals]
        return all_gather_uneven(self.weight.detach(), sizes, group=self.group)


class RowShardedTable(RowIntervals, nn.Module):
    """Rows ``[vocab_start, vocab_end)`` of a ``[V, d]`` table, on one rank of ``group``."""

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        *,
        group: ProcessGroup | None,
        padding_idx: int | None,
        max_norm: float | None,
        norm_type: float,
        dtype: torch.dtype | None,
        device: torch.device | str | None,
    ) -> None:
        super().__init__()
        check_table_args(num_embeddings, embedding_dim, padding_idx)
        self.group = group
        self.ownership = RowOwnership.for_group(num_embeddings, group=group)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = padding_idx
        self.max_norm, self.norm_type = max_norm, norm_type
        self.weight = nn.Parameter(
            torch.empty(self.ownership.rows, embedding_dim, dtype=dtype, device=device)
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
    def _from_embedding(cls, emb: nn.Embedding, **options: Any) -> Self:
        emb = require_plain_embedding(emb, allow_max_norm=True)
        out = cls(
            emb.num_embeddings,
            emb.embedding_dim,
            padding_idx=emb.padding_idx,
            max_norm=emb.max_norm,
            norm_type=emb.norm_type,
            dtype=emb.weight.dtype,
            device=emb.weight.device,
            **options,
        )
        copy_owned_rows(out.weight, emb.weight, out.ownership)
        return out

    def _renorm(self, owned_local_ids: torch.Tensor) -> None:
        """nn.Embedding's max_norm write, restricted to owned rows that are looked up."""
        if self.max_norm is not None and owned_local_ids.numel():
            with torch.no_grad():
                torch.embedding_renorm_(self.weight, owned_local_ids, self.max_norm, self.norm_type)

    def local_lookup(self, local_ids: torch.Tensor) -> torch.Tensor:
        """Look up rows of this shard by LOCAL index in ``[0, vocab_end - vocab_start)``.

        ``local_ids`` [*] -> [*, d]. No collective, no renormalization.

        Raises:
            ParallelError GLOBAL_ID_ON_LOCAL_SHARD: an index is outside the
                local rows (a global id used without subtracting vocab_start).
        """
        rows = self.ownership.rows
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

    def extra_repr(self) -> str:
        return (
            f"{self.num_embeddings}, {self.embedding_dim}, rows=[{self.vocab_start}, "
            f"{self.vocab_end}) of {self.world_size} ranks, padding_idx={self.padding_idx}, "
            f"max_norm={self.max_norm}"
        )
