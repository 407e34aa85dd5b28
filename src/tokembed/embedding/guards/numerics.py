"""Numerical state: the dtypes that actually exist around one table, observed.

"The embedding is bf16" names one of at least six states:
checkpoint tensor, live parameter storage, gathered lookup output, autocast
compute, gradient (layout and dtype) and optimizer state (moments, an optional
master copy). :func:`observe_numerics` *observes* each from a live module and
optimizer instead of trusting a declaration: it runs the lookup (and, when
asked, the same lookup under ``torch.autocast``), reads ``weight.grad`` and the
optimizer's state tensors, and measures how many times the declared input
scale reached the output. :func:`write_numerical_state` saves it as JSON atomically.

Refused states: a scale applied twice (DOUBLE_SCALING), a declared scale that
does not match the observed one (SCALE_MISMATCH), and an fp32 master copy that
is assumed but absent, aliases the parameter, is not fp32 or is not what the
optimizer steps (MASTER_COPY_ASSUMED).

Example::

    >>> emb = torch.nn.Embedding(10, 4)
    >>> state = observe_numerics(emb, torch.tensor([1, 2]))
    >>> state.parameter_storage_dtype, state.lookup_output_dtype, state.scale_application_count
    ('float32', 'float32', 0)
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from tokembed.errors import EmbeddingError
from tokembed.files.atomic import write_bytes_atomic

__all__ = ["NumericalState", "observe_numerics", "write_numerical_state"]

# Optimizer state entries that hold per-element moments, by optimizer family.
_FIRST_MOMENT = ("exp_avg", "momentum_buffer")
_SECOND_MOMENT = ("exp_avg_sq", "sum", "square_avg")


def _name(dtype: torch.dtype | None) -> str | None:
    return None if dtype is None else str(dtype).removeprefix("torch.")


@dataclass(frozen=True, kw_only=True)
class NumericalState:
    """Observed numerical state of one table (dtype names as strings, e.g. ``"bfloat16"``)."""

    checkpoint_dtype: str | None
    parameter_storage_dtype: str
    parameter_device: str
    lookup_output_dtype: str
    input_scale: float
    scale_application_count: int
    autocast_enabled: bool
    autocast_dtype: str | None
    autocast_lookup_dtype: str | None
    autocast_lookup_policy: str | None  # follows_parameter_storage | autocast_target | other
    gradient_layout: str | None  # dense | sparse | None (no backward yet)
    gradient_dtype: str | None
    grad_scaler: bool
    optimizer: str | None
    first_moment_dtype: str | None
    second_moment_dtype: str | None
    optimizer_state: dict[str, str] = field(default_factory=dict)
    master_weight: str = "none"  # none | explicit_float32_copy

    def to_dict(self) -> dict[str, object]:
        """Nested manifest ``{"embedding_numerical_state": {...}}``, one key per state."""
        flat = asdict(self)
        return {
            "checkpoint_dtype": flat["checkpoint_dtype"],
            "parameter_storage_dtype": flat["parameter_storage_dtype"],
            "parameter_device": flat["parameter_device"],
            "lookup_output_dtype": flat["lookup_output_dtype"],
            "input_scale": flat["input_scale"],
            "scale_application_count": flat["scale_application_count"],
            "autocast": {
                "enabled": flat["autocast_enabled"],
                "target_dtype": flat["autocast_dtype"],
                "observed_lookup_dtype": flat["autocast_lookup_dtype"],
                "observed_lookup_policy": flat["autocast_lookup_policy"],
            },
            "gradient": {
                "layout": flat["gradient_layout"],
                "dtype": flat["gradient_dtype"],
                "grad_scaler": flat["grad_scaler"],
            },
            "optimizer": {
                "name": flat["optimizer"],
                "first_moment_dtype": flat["first_moment_dtype"],
                "second_moment_dtype": flat["second_moment_dtype"],
                "state": flat["optimizer_state"],
                "master_weight": flat["master_weight"],
            },
        }


def _scale_count(out: torch.Tensor, raw: torch.Tensor, scale: float) -> int:
    """How many times ``scale`` multiplies ``raw`` to give ``out`` (least squares ratio)."""
    r64, o64 = raw.detach().double(), out.detach().double()
    denom = float((r64 * r64).sum())
    if denom == 0.0:  # all-zero rows carry no scale evidence
        return 0 if scale == 1.0 else 1
    ratio = float((o64 * r64).sum()) / denom
    tol = 1e-2 if raw.dtype in (torch.bfloat16, torch.float16) else 1e-4
    if scale == 1.0:
        count = 0 if math.isclose(ratio, 1.0, rel_tol=tol) else -1
    else:
        k = math.log(ratio) / math.log(scale) if ratio > 0 else -1.0
        count = round(k) if abs(k - round(k)) * abs(math.log(scale)) < tol else -1
    if count >= 2:
        raise EmbeddingError(
            "DOUBLE_SCALING",
            f"the lookup output is scaled by {ratio:.6g} = {scale:.6g}^{count}: "
            f"the input scale was applied {count} times",
            value=count,
            fix="apply the input scale in one place (the module or the caller, not both)",
        )
    if count < 0 or (count == 0 and scale != 1.0):
        raise EmbeddingError(
            "SCALE_MISMATCH",
            f"observed lookup scale {ratio:.6g} is not the declared input scale {scale:.6g}",
            value=ratio,
            fix="declare the scale the architecture actually applies (1.0 for none)",
        )
    return count


def _master(
    weight: torch.Tensor,
    master: torch.Tensor | None,
    declared: bool,
    optimizer: torch.optim.Optimizer | None,
) -> str:
    def refuse(why: str) -> EmbeddingError:
        return EmbeddingError(
            "MASTER_COPY_ASSUMED",
            f"an fp32 master copy is assumed, but {why}",
            value=why,
            fix="record master_weight: none, or keep a separate fp32 copy that the optimizer steps",
        )

    if master is None:
        if declared:
            raise refuse("no master tensor exists")
        return "none"
    if master.untyped_storage().data_ptr() == weight.untyped_storage().data_ptr():
        raise refuse("the 'master' shares storage with the parameter itself")
    if master.dtype != torch.float32:
        raise refuse(f"the copy is {_name(master.dtype)}")
    if master.shape != weight.shape:
        raise refuse(f"the copy has shape {list(master.shape)}, not {list(weight.shape)}")
    if optimizer is not None and not any(
        p is master for g in optimizer.param_groups for p in g["params"]
    ):
        raise refuse("the optimizer does not step it")
    return "explicit_float32_copy"


def observe_numerics(
    embedding: nn.Module,
    ids: torch.Tensor,
    *,
    forward: Callable[[torch.Tensor], torch.Tensor] | None = None,
    input_scale: float = 1.0,
    optimizer: torch.optim.Optimizer | None = None,
    checkpoint_dtype: torch.dtype | None = None,
    autocast_dtype: torch.dtype | None = None,
    grad_scaler: torch.amp.GradScaler | None = None,
    master_weight: torch.Tensor | None = None,
    declared_master: bool = False,
) -> NumericalState:
    """Observe the numerical state of ``embedding.weight``.

    ``forward`` is the model's whole input path for ``ids`` (module plus any
    caller-side scaling; default ``embedding``); ``input_scale`` is the scale the
    architecture declares (1.0 for none). The lookup runs under ``no_grad``;
    with ``max_norm`` it may rescale selected rows in place, as in training.
    ``autocast_dtype`` repeats the lookup under ``torch.autocast`` on the
    weight's device type. Moment dtypes come from ``optimizer.state`` of the
    stepped tensor (the master copy when there is one), so call after a step.
    """
    weight: torch.Tensor = embedding.weight  # type: ignore[assignment]
    run = forward if forward is not None else embedding
    with torch.no_grad():
        out = run(ids)
        raw = F.embedding(ids, weight)
        count = _scale_count(out, raw, input_scale)
        auto_out: torch.Tensor | None = None
        if autocast_dtype is not None:
            with torch.autocast(weight.device.type, dtype=autocast_dtype):
                auto_out = run(ids)
    policy = None
    if auto_out is not None:
        if auto_out.dtype == weight.dtype:
            policy = "follows_parameter_storage"
        elif auto_out.dtype == autocast_dtype:
            policy = "autocast_target"
        else:
            policy = "other"
    master = _master(weight, master_weight, declared_master, optimizer)
    grad = weight.grad
    stepped = master_weight if master_weight is not None else weight
    state = optimizer.state.get(stepped, {}) if optimizer is not None else {}
    tensors = {k: v for k, v in state.items() if isinstance(v, torch.Tensor) and v.dim() > 0}
    first = next((tensors[k].dtype for k in _FIRST_MOMENT if k in tensors), None)
    second = next((tensors[k].dtype for k in _SECOND_MOMENT if k in tensors), None)
    return NumericalState(
        checkpoint_dtype=_name(checkpoint_dtype),
        parameter_storage_dtype=str(_name(weight.dtype)),
        parameter_device=str(weight.device),
        lookup_output_dtype=str(_name(out.dtype)),
        input_scale=input_scale,
        scale_application_count=count,
        autocast_enabled=autocast_dtype is not None,
        autocast_dtype=_name(autocast_dtype),
        autocast_lookup_dtype=None if auto_out is None else _name(auto_out.dtype),
        autocast_lookup_policy=policy,
        gradient_layout=None
        if grad is None
        else ("sparse" if grad.layout == torch.sparse_coo else "dense"),
        gradient_dtype=None if grad is None else _name(grad.dtype),
        grad_scaler=grad_scaler is not None and grad_scaler.is_enabled(),
        optimizer=None if optimizer is None else type(optimizer).__name__,
        first_moment_dtype=_name(first),
        second_moment_dtype=_name(second),
        optimizer_state={k: str(_name(v.dtype)) for k, v in sorted(tensors.items())},
        master_weight=master,
    )


def write_numerical_state(state: NumericalState, path: str | Path) -> Path:
    """Write ``state.to_dict()`` as JSON atomically (temp file in the same folder, then rename).

    A reader sees the old file or the complete new one, never a partial write.
    """
    target = Path(path)
    text = json.dumps(state.to_dict(), indent=2, sort_keys=True) + "\n"
    write_bytes_atomic(target, text.encode("utf-8"))
    return target
