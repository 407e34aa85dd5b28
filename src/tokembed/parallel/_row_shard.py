"""What every row-sharded table shares: its interval, local weight, PAD row and checks.

Both row schedules (masked local lookup, owner-routed lookup) hold rows
``[vocab_start, vocab_end)`` of a global ``[V, d]`` table on each rank. This
base keeps the bookkeeping in one place: the ownership record on the weight,
the global ``padding_idx`` mapped to a local row only on its owner,
``max_norm`` renormalization of owned rows, building from a full table
(nn.Embedding or TokenEmbedding, whose contract is kept), gathering the full
table, and the local-index lookup that refuses global ids
(GLOBAL_ID_ON_LOCAL_SHARD). The lookup contract itself lives in
:mod:`tokembed.parallel._sharded_lookup`.
"""

from __future__ import annotations

from typing import Any, Self, Unpack

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed import ProcessGroup

from tokembed.embedding.contracts import validate_ids
from tokembed.embedding.init import new_table
from tokembed.embedding.lookup_config import LookupConfig, LookupPolicy
from tokembed.errors import EmbeddingError, ParallelError
from tokembed.parallel._sharded_lookup import ShardedLookup, require_shardable, table_source
from tokembed.parallel.collectives import all_gather_uneven
from tokembed.parallel.ownership import RowOwnership, mark_rows, mark_sharded_source

__all__ = ["RowIntervals", "RowShardedTable", "copy_owned_rows"]


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


class RowShardedTable(RowIntervals, ShardedLookup, nn.Module):
    """Rows ``[vocab_start, vocab_end)`` of a ``[V, d]`` table, on one rank of ``group``.

    Constructors take ``(num_embeddings, embedding_dim, *, group, ..., **policy)``
    with the policy fields of :class:`~tokembed.embedding.lookup_config.LookupConfig`
    (the global table's: ``padding_idx`` is a global id).
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        *,
        group: ProcessGroup | None,
        dtype: torch.dtype | None,
        device: torch.device | str | None,
        **policy: Unpack[LookupPolicy],
    ) -> None:
        super().__init__()
        config = LookupConfig(num_embeddings=num_embeddings, embedding_dim=embedding_dim, **policy)
        self.config = require_shardable(config, allow_max_norm=True)
        self.group = group
        self.ownership = RowOwnership.for_group(config.num_embeddings, group=group)
        self.weight = new_table(
            self.ownership.rows,
            config.embedding_dim,
            padding_idx=self.local_padding_idx,
            dtype=dtype,
            device=device,
        )  # [V_r, d]
        mark_rows(self.weight, self.ownership)
        self._guard_pad_row_on_load()

    @property
    def local_padding_idx(self) -> int | None:
        """``padding_idx - vocab_start`` on the owner of the PAD row, None elsewhere."""
        pad = self.config.padding_idx
        if pad is None or not self.vocab_start <= pad < self.vocab_end:
            return None
        return pad - self.vocab_start

    @classmethod
    def from_config(
        cls,
        config: LookupConfig,
        *,
        group: ProcessGroup | None = None,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
        **options: Any,
    ) -> Self:
        """Build from a validated config; ``options`` are the subclass's own keywords."""
        policy: LookupPolicy = config.policy()
        return cls(
            config.num_embeddings,
            config.embedding_dim,
            group=group,
            dtype=dtype,
            device=device,
            **options,
            **policy,
        )

    @classmethod
    def _from_embedding(cls, emb: object, **options: Any) -> Self:
        config, full = table_source(emb, allow_max_norm=True)
        out = cls.from_config(config, dtype=full.dtype, device=full.device, **options)
        copy_owned_rows(out.weight, full, out.ownership)
        return out

    def _renorm(self, owned_local_ids: torch.Tensor) -> None:
        """nn.Embedding's max_norm write, restricted to owned rows that are looked up."""
        if self.max_norm is not None and owned_local_ids.numel():
            with torch.no_grad():
                torch.embedding_renorm_(self.weight, owned_local_ids, self.max_norm, self.norm_type)

    def local_lookup(self, local_ids: torch.Tensor) -> torch.Tensor:
        """Look up rows of this shard by LOCAL index in ``[0, vocab_end - vocab_start)``.

        ``local_ids`` [*] -> [*, d]: the owner's side of a routed lookup. No collective;
        ``max_norm`` renormalizes the rows looked up, as ``nn.Embedding`` would.

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
        self._renorm(local_ids.reshape(-1))
        return F.embedding(local_ids, self.weight, padding_idx=self.local_padding_idx)

    def extra_repr(self) -> str:
        return (
            f"{self.num_embeddings}, {self.embedding_dim}, rows=[{self.vocab_start}, "
            f"{self.vocab_end}) of {self.world_size} ranks, padding_idx={self.padding_idx}, "
            f"max_norm={self.max_norm}"
            # Like nn.Embedding's repr, options left at their default are not listed.
            + (f", input_scale={self.config.input_scale}" if self.config.input_scale else "")
            + (f", address_hash={self.config.address_hash}" if self.config.address_hash else "")
        )
