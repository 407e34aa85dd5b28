"""Freeze rows of vocabulary tables by closing every path that can update them.

Masking the lookup gradient is not a freeze: a tied (or any) output head gives
every row a dense softmax gradient, Adam's moments keep moving a row after its
gradient is zero, and AdamW's decoupled weight decay shrinks it regardless.
:func:`freeze_rows` closes all three for the given rows of every table:

1. a post-accumulate-grad hook zeroes the frozen rows of the combined gradient
   (after all producers, lookup and head, were summed into ``.grad``), so
   clipping and norms see them as absent;
2. with an optimizer, a step pre-hook saves the frozen rows of the parameter
   and of every row-shaped state (``exp_avg``, ``exp_avg_sq``), and a post-hook
   writes them back: moment-driven updates and decay cannot move them, and the
   moments resume unchanged when the freeze is lifted.

:meth:`RowFreeze.check` (and :func:`check_frozen`) prove the rows are bit for
bit what they were when frozen.

Example::

    >>> freeze = freeze_rows(model, range(V0), optimizer=opt)  # doctest: +SKIP
    >>> train(...); freeze.check(); freeze.remove()  # doctest: +SKIP

Raises CheckpointError FROZEN_ROW_MOVED; UsageError INVALID_ARGUMENT (sparse
gradients, rows out of range).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch
from torch import nn

from tokembed.artifacts.digest import tensor_digest
from tokembed.errors import CheckpointError, UsageError
from tokembed.migrate.roles import VocabRoles, parameter, vocab_roles

__all__ = ["RowFreeze", "check_frozen", "freeze_rows", "rows_digest"]


def rows_digest(param: torch.Tensor, ids: torch.Tensor) -> str:
    """:func:`~tokembed.artifacts.digest.tensor_digest` of the selected rows (in ``ids`` order)."""
    return tensor_digest(param.detach().index_select(0, ids))


def check_frozen(
    param: torch.Tensor, ids: torch.Tensor, digest: str, *, name: str = "table"
) -> None:
    """Refuse (FROZEN_ROW_MOVED) unless rows ``ids`` still hash to ``digest``."""
    if rows_digest(param, ids) != digest:
        raise CheckpointError(
            "FROZEN_ROW_MOVED",
            f"{name}: frozen rows changed during training",
            value=name,
            fix="freeze_rows(model, ids, optimizer=opt): masking the lookup gradient alone "
            "leaves the output gradient, Adam moments and weight decay active",
        )


class RowFreeze:
    """Handle of an active freeze: ``check()`` proves it held, ``remove()`` lifts it."""

    def __init__(
        self,
        params: Sequence[tuple[str, nn.Parameter]],
        ids: torch.Tensor,
        optimizer: torch.optim.Optimizer | None,
    ) -> None:
        self.params = list(params)
        self.ids = ids
        self.optimizer = optimizer
        self._digests = {name: rows_digest(p, ids) for name, p in self.params}
        self._saved: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._handles: list[Any] = [
            p.register_post_accumulate_grad_hook(self._mask_grad) for _, p in self.params
        ]
        if optimizer is not None:
            self._handles.append(optimizer.register_step_pre_hook(self._save))
            self._handles.append(optimizer.register_step_post_hook(self._restore))

    def _mask_grad(self, param: torch.Tensor) -> None:
        if param.grad is not None:
            param.grad.index_fill_(0, self.ids, 0.0)

    def _targets(self) -> Iterable[torch.Tensor]:
        assert self.optimizer is not None
        for _, p in self.params:
            yield p
            for value in self.optimizer.state.get(p, {}).values():
                if (
                    isinstance(value, torch.Tensor)
                    and value.dim() >= 1
                    and value.shape[0] == p.shape[0]
                ):
                    yield value

    def _save(self, *_: object) -> None:
        self._saved = [(t, t.detach().index_select(0, self.ids)) for t in self._targets()]

    def _restore(self, *_: object) -> None:
        with torch.no_grad():
            for target, rows in self._saved:
                target.index_copy_(0, self.ids, rows)
            # State created by this step (the first step) starts at zero on frozen rows.
            for target in self._targets():
                if all(target is not t for t, _ in self._saved):
                    target.index_fill_(0, self.ids, 0)
        self._saved = []

    def check(self) -> None:
        """Refuse (FROZEN_ROW_MOVED) if any frozen row differs from its value at freeze time."""
        for name, p in self.params:
            check_frozen(p, self.ids, self._digests[name], name=name)

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []


def freeze_rows(
    model: nn.Module,
    ids: Iterable[int] | torch.Tensor,
    *,
    optimizer: torch.optim.Optimizer | None = None,
    roles: VocabRoles | None = None,
) -> RowFreeze:
    """Freeze rows ``ids`` of every vocabulary table of ``model`` (tied tables once).

    Without ``optimizer`` only the gradient path is closed (enough for plain SGD);
    pass the optimizer to close moment and weight-decay updates too.
    """
    roles = vocab_roles(model) if roles is None else roles
    index = torch.as_tensor(
        list(ids) if not isinstance(ids, torch.Tensor) else ids, dtype=torch.int64
    )
    params = [(name, parameter(model, name)) for name in roles.names()]
    for name, p in params:
        if index.numel() and (int(index.min()) < 0 or int(index.max()) >= p.shape[0]):
            raise UsageError(
                "INVALID_ARGUMENT",
                f"rows to freeze must lie in [0, {p.shape[0]}) for {name!r}",
                value=(int(index.min()), int(index.max())),
                fix="pass row ids of the migrated table",
            )
        if getattr(model.get_submodule(name.rpartition(".")[0] or ""), "sparse", False):
            raise UsageError(
                "INVALID_ARGUMENT",
                f"{name!r} uses sparse gradients; a row freeze masks dense gradients",
                value=name,
                fix="use dense gradients while rows are frozen",
            )
    return RowFreeze(params, index, optimizer)
