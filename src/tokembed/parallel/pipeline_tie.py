"""Tied input/output tables across pipeline stages: synchronized replicas.

The first pipeline stage looks rows up, the last stage projects onto them;
two processes cannot share one Parameter object, so a logical tie becomes one
physical replica per stage (per tensor-parallel row shard) plus a contract:

1. equal at the start: :meth:`TiedReplica.sync_values` broadcasts the
   authority's values over the embedding group;
2. one logical gradient ``g_input + g_output`` (SUM over the group) and one
   update, by one of two schedules:
   * ``"identical"`` — :meth:`TiedReplica.reconcile_grads` all-reduces the
     gradient so both replicas hold it, and both stages step the replica in
     their optimizers from equal state (Megatron-Core's schedule);
   * ``"authority"`` — only the authority's optimizer holds the replica;
     reconcile reduces the gradient to the authority and clears it elsewhere
     (a non-stepping replica must not accumulate stale gradients), and after
     the step :meth:`TiedReplica.sync_values` publishes the new values;
4. verified: :meth:`TiedReplica.check` compares SHA-256 digests of the values,
   the row interval and (optionally) the optimizer state of every replica and
   raises REPLICA_DIVERGED on every rank if any differs. Equal values with
   different Adam moments are a divergence: the next step splits them again
   (matching values with differing moments is the usual way replicas drift).

The embedding group holds exactly the ranks with replicas of one row shard:
with TP 2 x PP 2 (ranks 0,1 first stage, 2,3 last) the groups are {0,2} and
{1,3}. It must not be a data-parallel group as well: the reconciled gradient
would be summed twice.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroup

from tokembed.artifacts.digest import tensor_digest
from tokembed.errors import ParallelError, UsageError
from tokembed.parallel.ownership import row_ownership

__all__ = ["TiedReplica"]


def _state_digest(state: dict[str, Any]) -> str:
    parts = []
    for key in sorted(state):
        value = state[key]
        parts.append(f"{key}={tensor_digest(value) if torch.is_tensor(value) else value!r}")
    return hashlib.sha256(";".join(parts).encode()).hexdigest()


class TiedReplica:
    """One stage's replica of a tied table shard, and its embedding group.

    Args:
        param: the local replica (the first stage's embedding weight, or the
            last stage's head weight); same shape and row interval on every
            member of ``group``.
        group: the embedding group (one rank per stage holding this shard).
        authority: global rank whose values and update are authoritative.
        schedule: "identical" (every stage steps) or "authority" (one steps,
            then publishes with :meth:`sync_values`).

    Example::

        >>> tie = TiedReplica(head.weight, group=emb_group, authority=0, schedule="identical")
        >>> tie.sync_values()                   # once, before training
        >>> loss.backward(); tie.reconcile_grads(); opt.step(); tie.check(opt)
    """

    def __init__(
        self,
        param: torch.Tensor,
        *,
        group: ProcessGroup | None,
        authority: int,
        schedule: Literal["identical", "authority"] = "identical",
    ) -> None:
        members = dist.get_process_group_ranks(group or dist.group.WORLD)
        if schedule not in ("identical", "authority") or authority not in members:
            raise UsageError(
                "INVALID_ARGUMENT",
                f"schedule={schedule!r}, authority={authority} for embedding group {members}",
                value=(schedule, authority),
                fix="pass schedule='identical' or 'authority' and an authority rank in the group",
            )
        self.param, self.group, self.authority = param, group, authority
        self.schedule = schedule

    @torch.no_grad()
    def sync_values(self) -> None:
        """Overwrite every replica with the authority's values (collective)."""
        dist.broadcast(self.param.data, src=self.authority, group=self.group)

    @torch.no_grad()
    def reconcile_grads(self) -> None:
        """Sum all stages' grads into the replica(s) that step (collective).

        "identical": every replica's grad becomes the SUM; "authority": the
        authority's grad becomes the SUM and the others' grads are cleared.
        A stage whose replica received no gradient contributes zeros.
        """
        if self.param.grad is None:
            self.param.grad = torch.zeros_like(self.param)
        if self.schedule == "identical":
            dist.all_reduce(self.param.grad, group=self.group)
            return
        dist.reduce(self.param.grad, dst=self.authority, group=self.group)
        if dist.get_rank() != self.authority:
            self.param.grad = None

    def check(self, optimizer: torch.optim.Optimizer | None = None) -> None:
        """Require equal values, row interval and optimizer state on every replica.

        ``optimizer`` is this stage's optimizer; pass it on every stage that
        steps the replica (identical-update schedule). One all_gather_object.

        Raises:
            ParallelError REPLICA_DIVERGED: on every rank, naming what differs.
        """
        owned = row_ownership(self.param)
        interval = None if owned is None else (owned.start, owned.end, owned.num_embeddings)
        state = None
        if optimizer is not None:
            state = _state_digest(optimizer.state.get(self.param, {}))
        mine = {
            "interval": (interval, tuple(self.param.shape)),
            "values": tensor_digest(self.param),
            "optimizer state": state,
        }
        everyone: list[Any] = [None] * dist.get_world_size(self.group)
        dist.all_gather_object(everyone, mine, group=self.group)
        ranks = dist.get_process_group_ranks(self.group or dist.group.WORLD)
        for what in ("interval", "values", "optimizer state"):
            seen = [entry[what] for entry in everyone]
            if any(s != seen[0] for s in seen):
                differ = [r for r, s in zip(ranks, seen, strict=True) if s != seen[0]]
                raise ParallelError(
                    "REPLICA_DIVERGED",
                    f"tied replicas differ in {what}: ranks {differ} disagree with rank {ranks[0]}",
                    value=(what, differ),
                    fix="reconcile grads (input + output) before every step and step from "
                    "equal optimizer state, or let one authority step and publish values",
                )
