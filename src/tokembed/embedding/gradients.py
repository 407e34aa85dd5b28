"""Gradient admission, PAD-row enforcement and the embedding optimizer group.

``sparse=True`` on a lookup says what the *lookup* emits, not what the
optimizer receives: a tied output path adds a dense ``D^T H``
contribution, a sparse tensor may be uncoalesced, and only some optimizers
accept a sparse layout. :func:`admit_gradient` inspects the actual gradient
after backward and refuses a pairing PyTorch would reject (or, worse, accept
with other semantics):

=========== ============ ============ ===========================================
optimizer   dense grad   sparse (CPU) sparse (accelerator)
=========== ============ ============ ===========================================
SGD         yes          yes          yes   (weight_decay must be 0 when sparse)
SparseAdam  no           yes          yes
Adagrad     yes          yes          no    (weight_decay must be 0 when sparse)
others      yes          no           no    (Adam, AdamW, RMSprop, ...)
=========== ============ ============ ===========================================

(torch.nn.Embedding documentation; torch 2.13 raises for the unsupported cells.)
Global-norm clipping of sparse and row-sharded gradients lives in
:mod:`tokembed.embedding.clipping`.

Example::

    >>> emb = torch.nn.Embedding(10, 4, sparse=True)
    >>> emb(torch.tensor([1, 2, 1])).sum().backward()
    >>> admit_gradient(emb, torch.optim.SparseAdam(emb.parameters())).layout
    'sparse'

Raises :class:`~tokembed.errors.EmbeddingError` SPARSE_WITH_FREQ_SCALING,
GRADIENT_LAYOUT_MISMATCH, TIED_DENSE_UNDER_SPARSE, UNCOALESCED_GRADIENT,
MISSING_GRADIENT, PAD_ID_INVALID; :class:`~tokembed.errors.UsageError`
INVALID_ARGUMENT for a table the optimizer does not hold.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from tokembed.embedding.lookup_config import check_sparse_options
from tokembed.errors import EmbeddingError, UsageError

__all__ = [
    "GradientAdmission",
    "PadRowGuard",
    "admit_gradient",
    "embedding_param_groups",
    "guard_padding_row",
]

# Optimizer class name -> (accepts dense, sparse devices accepted)
_SPARSE_SUPPORT: dict[str, tuple[bool, frozenset[str]]] = {
    "SGD": (True, frozenset({"cpu", "cuda"})),
    "SparseAdam": (False, frozenset({"cpu", "cuda"})),
    "Adagrad": (True, frozenset({"cpu"})),
}


@dataclass(frozen=True, kw_only=True)
class GradientAdmission:
    """What the optimizer will actually receive for the table."""

    optimizer: str
    layout: str  # "dense" | "sparse"
    coalesced: bool
    dtype: torch.dtype
    device: torch.device
    touched_rows: int  # rows with a stored gradient (V for dense)


def _layout_error(code: str, message: str, fix: str, value: object = None) -> EmbeddingError:
    return EmbeddingError(code, message, value=value, fix=fix)


def admit_gradient(
    embedding: nn.Module,
    optimizer: torch.optim.Optimizer,
    *,
    tied: bool = False,
    sparse_only: bool = False,
    require_coalesced: bool = False,
) -> GradientAdmission:
    """Check ``embedding.weight.grad`` (after backward) against ``optimizer``.

    ``tied`` declares an output head sharing the weight; ``sparse_only`` declares
    a contract under which the table must only ever receive sparse gradients
    (for example to keep row-sparse communication). The module's ``sparse`` and
    ``scale_grad_by_freq`` attributes are read when present.
    """
    sparse = bool(getattr(embedding, "sparse", False))
    check_sparse_options(
        sparse=sparse, scale_grad_by_freq=bool(getattr(embedding, "scale_grad_by_freq", False))
    )
    name = type(optimizer).__name__
    dense_ok, sparse_devices = _SPARSE_SUPPORT.get(name, (True, frozenset()))
    sparse_only = sparse_only or not dense_ok
    if tied and sparse_only:
        raise _layout_error(
            "TIED_DENSE_UNDER_SPARSE",
            f"the table is tied to an output head, whose gradient is dense, but {name} "
            "(or the declared contract) accepts only sparse gradients",
            "untie the head, use a dense-capable optimizer, or declare densification",
            value=name,
        )
    weight: torch.Tensor = embedding.weight  # type: ignore[assignment]
    grad = weight.grad
    if grad is None:
        raise EmbeddingError(
            "MISSING_GRADIENT",
            "the table has no gradient; call backward() before admission",
            fix="run the loss backward first (or the table is not part of the loss)",
        )
    if not any(p is weight for g in optimizer.param_groups for p in g["params"]):
        raise UsageError(
            "INVALID_ARGUMENT",
            "the table is not registered with this optimizer",
            fix="build the optimizer after tying/loading, from the live parameters",
        )
    is_sparse = grad.layout == torch.sparse_coo
    if not is_sparse and sparse_only:
        code = "TIED_DENSE_UNDER_SPARSE" if sparse else "GRADIENT_LAYOUT_MISMATCH"
        why = "a dense contribution (a tied output path?) made the sum dense" if sparse else ""
        raise _layout_error(
            code,
            f"{name} (or the declared contract) needs a sparse gradient, got dense. {why}".strip(),
            "use a dense optimizer (Adam/AdamW) or build the embedding with sparse=True",
            value=name,
        )
    if is_sparse:
        if grad.device.type not in sparse_devices:
            raise _layout_error(
                "GRADIENT_LAYOUT_MISMATCH",
                f"{name} does not accept sparse gradients on {grad.device.type}",
                "use SGD or SparseAdam for sparse gradients, or sparse=False",
                value=(name, grad.device.type),
            )
        decays = [g.get("weight_decay", 0) for g in optimizer.param_groups]
        if name in ("SGD", "Adagrad") and any(wd != 0 for wd in decays):
            raise _layout_error(
                "GRADIENT_LAYOUT_MISMATCH",
                f"{name} with weight_decay={max(decays)} cannot apply decay to a sparse gradient",
                "set weight_decay=0 for the table's group, or use a dense gradient",
                value=(name, max(decays)),
            )
        if require_coalesced and not grad.is_coalesced():
            raise _layout_error(
                "UNCOALESCED_GRADIENT",
                "the sparse gradient stores duplicate row indices (not coalesced)",
                "call weight.grad = weight.grad.coalesce() before the step",
            )
    rows = int(grad.coalesce().indices().unique().numel()) if is_sparse else grad.shape[0]
    return GradientAdmission(
        optimizer=name,
        layout="sparse" if is_sparse else "dense",
        coalesced=bool(grad.is_coalesced()) if is_sparse else True,
        dtype=grad.dtype,
        device=grad.device,
        touched_rows=rows,
    )


def _zero_row(grad: torch.Tensor, pad_id: int) -> torch.Tensor:
    if grad.layout == torch.sparse_coo:
        g = grad.coalesce()
        keep = g.indices()[0] != pad_id
        return torch.sparse_coo_tensor(
            g.indices()[:, keep], g.values()[keep], g.shape, is_coalesced=True
        )
    out = grad.clone()
    out[pad_id] = 0
    return out


class PadRowGuard:
    """Keeps one table row fixed: its gradient is zeroed and, after each
    optimizer step, its value is restored (decoupled weight decay would
    otherwise move a nonzero PAD row). Call :meth:`remove` to detach.
    """

    def __init__(
        self, weight: torch.Tensor, pad_id: int, optimizer: torch.optim.Optimizer | None
    ) -> None:
        self.pad_id = pad_id
        self.row = weight.detach()[pad_id].clone()
        self._handles: list[Any] = [weight.register_hook(lambda g: _zero_row(g, pad_id))]
        if optimizer is not None:

            def restore(*_: object) -> None:
                with torch.no_grad():
                    weight[pad_id].copy_(self.row)

            self._handles.append(optimizer.register_step_post_hook(restore))

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()


def guard_padding_row(
    weight: torch.Tensor,
    pad_id: int,
    *,
    optimizer: torch.optim.Optimizer | None = None,
    zero: bool = False,
) -> PadRowGuard:
    """Fix row ``pad_id`` of ``weight``: zero gradient (all paths, tied ones too),
    and with ``optimizer`` its value is restored after each step. ``zero=True``
    first sets the row to zero (a model whose definition requires a zero PAD row;
    never for a checkpoint that learned a nonzero one).
    """
    if not 0 <= pad_id < weight.shape[0]:
        raise EmbeddingError(
            "PAD_ID_INVALID",
            f"pad id {pad_id} is outside [0, {weight.shape[0]})",
            value=pad_id,
            fix="map metadata PAD ids such as -1 to a real row first",
        )
    if zero:
        with torch.no_grad():
            weight[pad_id].zero_()
    return PadRowGuard(weight, pad_id, optimizer)


def embedding_param_groups(
    model: nn.Module,
    tables: Iterable[torch.Tensor],
    *,
    lr: float,
    weight_decay: float,
    table_lr: float,
    table_weight_decay: float,
) -> list[dict[str, Any]]:
    """Split ``model``'s parameters into a table group and the rest, each registered once.

    A tied head shares the table's Parameter, so it lands in the table group and
    is not registered twice. Raises UsageError INVALID_ARGUMENT for a table that
    is not a parameter of ``model``.
    """
    params = list(model.parameters())  # deduplicated by identity (tied weights once)
    ids = {id(p) for p in params}
    table_params: list[torch.Tensor] = []
    for t in tables:
        if id(t) not in ids:
            raise UsageError(
                "INVALID_ARGUMENT",
                "a table passed to embedding_param_groups is not a parameter of the model",
                fix="pass module.weight of a submodule of this model",
            )
        if all(t is not p for p in table_params):
            table_params.append(t)
    table_ids = {id(t) for t in table_params}
    rest = [p for p in params if id(p) not in table_ids]
    groups = [{"params": table_params, "lr": table_lr, "weight_decay": table_weight_decay}]
    if rest:
        groups.append({"params": rest, "lr": lr, "weight_decay": weight_decay})
    return groups
