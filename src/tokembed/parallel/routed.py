"""Owner-routed row lookup: ids travel to the rank that owns their row.

Unlike :class:`~tokembed.parallel.vocab_embedding.VocabParallelEmbedding`, each
rank here brings its *own* ids (its data-parallel batch). A forward:

1. runs the lookup contract of its config locally (the same checks as
   TokenEmbedding) and agrees on failure (one all-reduce of flags), so a
   rank with a bad batch cannot leave its peers blocked in the all_to_all;
2. sorts the flattened positions by owner and exchanges per-owner counts;
3. sends requests ``(global id, origin position)`` to owners (all_to_all);
   the origin rank is implied by the segment a request arrives in;
4. the owner proves ownership, subtracts its ``vocab_start`` and looks the
   rows up (renormalizing them when ``max_norm`` is set);
5. rows return to their origins (all_to_all, autograd-aware) together with
   the echoed ``(origin rank, origin position)``; :func:`restore_origin_order`
   checks the echo is exactly this rank's positions, once each, and puts the
   rows back in sequence order; the input scale is applied once and stamped.

Backward reverses the route: autograd un-permutes the upstream rows, the
all_to_all backward sends each row's gradient to the owner that served it (in
the very segment order of the forward), and the owner's lookup backward
scatter-adds it into the local shard. No rank ever holds a row it does not own.

gloo supports ``all_to_all_single`` with uneven splits in torch 2.13 (probed
with real process groups), so no all_gather/send-recv emulation is needed.

:attr:`RowRoutedEmbedding.last_route` records the bytes the last forward
routed: remote occurrences and their request, response and gradient bytes
(the ``owner_routed`` payload formula of :func:`tokembed.parallel.ledger.schedule_payloads`).
Repeated ids are not deduplicated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Unpack

import torch
import torch.distributed as dist

from tokembed.embedding.addressed import AddressedIds
from tokembed.embedding.lookup_checks import scale_lookup
from tokembed.embedding.lookup_config import LookupPolicy
from tokembed.errors import ParallelError
from tokembed.parallel._autograd import all_to_all_rows
from tokembed.parallel._row_shard import RowShardedTable
from tokembed.parallel.collectives import ProcessGroup, exchange_rows

__all__ = ["RouteLedger", "RowRoutedEmbedding", "restore_origin_order"]


@dataclass(frozen=True, kw_only=True)
class RouteLedger:
    """Bytes one rank sent for remote occurrences (owner != origin) in one forward.

    ``logical_bytes`` is ``N_remote (b_i + b_m) + 2 N_remote d b``:
    requests (id + origin position), row responses and row gradients.
    ``echo_bytes`` is the origin metadata returned with the rows for the
    ORIGIN_POSITION_LOST check, reported separately.
    """

    remote: int
    request_bytes: int
    response_bytes: int
    gradient_bytes: int
    echo_bytes: int

    @property
    def logical_bytes(self) -> int:
        return self.request_bytes + self.response_bytes + self.gradient_bytes


def restore_origin_order(rows: torch.Tensor, origin: torch.Tensor, *, rank: int) -> torch.Tensor:
    """Put routed ``rows`` [N, d] back in sequence order using their echoed ``origin`` [N, 2].

    ``origin[k] = (origin rank, origin position)`` of ``rows[k]``. Returns
    ``out`` [N, d] with ``out[p] = rows[k]`` where ``origin[k, 1] = p``.

    Raises:
        ParallelError ORIGIN_POSITION_LOST: a row names another origin rank, or
            the positions are not exactly ``0..N-1`` once each.
    """
    n = rows.shape[0]
    positions = origin[:, 1]  # [N]
    foreign = origin[:, 0] != rank  # [N]
    seen = torch.bincount(positions.clamp(0, max(n - 1, 0)), minlength=n)  # [N]
    in_range = bool(((positions >= 0) & (positions < n)).all())
    if origin.shape != (n, 2) or bool(foreign.any()) or not in_range or bool((seen != 1).any()):
        raise ParallelError(
            "ORIGIN_POSITION_LOST",
            f"rank {rank} got {n} routed rows whose origin metadata is not a permutation of "
            f"its own positions (foreign rows: {int(foreign.sum())}, "
            f"positions seen != once: {int((seen != 1).sum())})",
            value=rank,
            fix="carry (origin rank, origin position) with every request and response",
        )
    inverse = torch.empty_like(positions)
    inverse[positions] = torch.arange(n, device=positions.device)  # row index of position p
    return rows.index_select(0, inverse)  # [N, d]


class RowRoutedEmbedding(RowShardedTable):
    """An ``nn.Embedding(V, d)`` with row shards; each rank looks up its own ids via owners.

    Collective: every rank of ``group`` must call forward together (possibly
    with an empty id tensor).

    Example::

        >>> emb = RowRoutedEmbedding.from_embedding(nn.Embedding(8, 3, padding_idx=0))
        >>> emb(torch.tensor([1, 4, 1, 0])).shape    # rank 0 of 2; row 4 comes from rank 1
        torch.Size([4, 3])

    ``**policy`` is TokenEmbedding's lookup policy, as for VocabParallelEmbedding.

    Raises (forward, on every rank):
        EmbeddingError with the codes of TokenEmbedding's forward (ID_OUT_OF_RANGE,
            ADDRESS_HASH_MISMATCH, PAD_ID_INVALID, ...) on the rank with the bad
            batch, and the same class and code on its peers.
        ParallelError ORIGIN_POSITION_LOST: routed rows came back unordered.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        *,
        group: ProcessGroup | None = None,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
        **policy: Unpack[LookupPolicy],
    ) -> None:
        super().__init__(
            num_embeddings, embedding_dim, group=group, dtype=dtype, device=device, **policy
        )
        self.last_route: RouteLedger | None = None

    @classmethod
    def from_embedding(
        cls, emb: object, *, group: ProcessGroup | None = None
    ) -> RowRoutedEmbedding:
        """Shard a full nn.Embedding or TokenEmbedding (same on every rank): copy this rank's rows.

        Raises:
            ParallelError NOT_AN_EMBEDDING, UsageError INVALID_ARGUMENT (sparse
            or scale_grad_by_freq), as VocabParallelEmbedding.from_embedding.
        """
        return cls._from_embedding(emb, group=group)

    def _serve(self, requests: torch.Tensor) -> torch.Tensor:
        """Owner side: requests [M, 2] of (global id, origin position) -> rows [M, d]."""
        if self.ownership.rows == 0:
            return self.weight.new_zeros((0, 0)) @ self.weight  # [0, d], connected
        # An id routed to the wrong owner lands outside [0, rows) once the shard start is
        # subtracted: the local lookup refuses it instead of reading another row.
        return self.local_lookup(requests[:, 0] - self.vocab_start)  # [M, d]

    def forward(self, ids: torch.Tensor | AddressedIds) -> torch.Tensor:
        """This rank's global ids [*] -> embeddings [*, d], rows fetched from their owners."""
        ids = self._admit(ids, agree=True)  # ranks bring different batches: always agree
        flat = ids.reshape(-1).long()  # [N]; int32 ids travel with int64 positions
        n, world = flat.numel(), self.world_size
        chunk = self.intervals[0][1] - self.intervals[0][0]  # ceil(V / R) rows per owner
        owner = flat // max(chunk, 1)  # [N] owner rank of each position
        order = torch.argsort(owner, stable=True)  # [N] positions grouped by owner
        send_counts = torch.bincount(owner, minlength=world)  # [R]
        counts = torch.empty(world * world, dtype=torch.int64, device=flat.device)
        dist.all_gather_single(counts, send_counts, group=self.group)  # [R*R], row = source
        send = send_counts.tolist()
        recv = counts.view(world, world)[:, self.rank].tolist()

        requests = torch.stack((flat[order], order), dim=1)  # [N, 2] (global id, position)
        owner_requests = exchange_rows(requests, send, recv, group=self.group)  # [M, 2]
        rows = self._serve(owner_requests)  # [M, d]
        source = torch.repeat_interleave(
            torch.arange(world, device=flat.device), torch.tensor(recv, device=flat.device)
        )  # [M] origin rank of each request, implied by its segment
        echo = torch.stack((source, owner_requests[:, 1]), dim=1)  # [M, 2]
        back = all_to_all_rows(rows, send=recv, recv=send, group=self.group)  # [N, d]
        origin = exchange_rows(echo, recv, send, group=self.group)  # [N, 2]
        out = restore_origin_order(back, origin, rank=self.rank)  # [N, d]

        remote = n - send[self.rank]
        row_bytes = remote * self.embedding_dim * self.weight.element_size()
        self.last_route = RouteLedger(
            remote=remote,
            request_bytes=remote * requests.element_size() * 2,
            response_bytes=row_bytes,
            gradient_bytes=row_bytes if self.weight.requires_grad else 0,
            echo_bytes=remote * echo.shape[1] * echo.element_size(),
        )
        return scale_lookup(
            out.reshape(*ids.shape, self.embedding_dim), self.config, by=type(self).__name__
        )
