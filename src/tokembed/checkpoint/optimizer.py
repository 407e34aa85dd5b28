"""Optimizer state per logical parameter: named by the canonical parameter, never by position.

``Optimizer.state_dict()`` keys state by the position of each Parameter in the
param groups, so it silently depends on construction order and on how many
times a tied table was registered. Here state is keyed by the canonical name of
the logical parameter (an alias group has one name and one state), which makes
two mistakes detectable:

* the optimizer holds a Parameter the model no longer uses (built before an
  alias was restored, so it steps the replaced head) — STALE_OPTIMIZER_PARAMETER;
* one Parameter appears twice in the param groups (stepped twice, or two
  states for one tie) — DUPLICATE_OPTIMIZER_REGISTRATION.

Tensors are flattened to ``"optimizer/<canonical name>/<state key>"``; the
param groups' hyper-parameters and member names go to JSON.

Example::

    >>> tensors, meta = optimizer_tensors(model, adam)
    >>> sorted(tensors)[:2]
    ['optimizer/embed.weight/exp_avg', 'optimizer/embed.weight/exp_avg_sq']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from tokembed.checkpoint.alias import alias_graph
from tokembed.errors import CheckpointError

__all__ = [
    "PREFIX",
    "check_registration",
    "check_saved_groups",
    "optimizer_tensors",
    "restore_optimizer",
    "restore_options",
]

PREFIX = "optimizer/"


def _names(model: nn.Module) -> dict[int, str]:
    """id(Parameter) -> canonical name (the first registration of each object)."""
    names: dict[int, str] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(param), name)
    return names


def check_registration(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[int, str]:
    """Require every optimizer Parameter to be a model Parameter, registered once.

    Returns ``id(param) -> canonical name`` for the optimizer's parameters.

    Raises:
        CheckpointError STALE_OPTIMIZER_PARAMETER: a Parameter the model does not use.
        CheckpointError DUPLICATE_OPTIMIZER_REGISTRATION: one Parameter twice.
    """
    names = _names(model)
    aliases = alias_graph(model).aliases()
    seen: dict[int, str] = {}
    for g, group in enumerate(optimizer.param_groups):
        for i, param in enumerate(group["params"]):
            name = names.get(id(param))
            if name is None:
                raise CheckpointError(
                    "STALE_OPTIMIZER_PARAMETER",
                    f"param_groups[{g}]['params'][{i}] {list(param.shape)} is not a parameter of "
                    f"the model (an alias restored after the optimizer was built replaced it; "
                    f"aliases now: {aliases})",
                    value=(g, i),
                    fix="restore aliases first (load_checkpoint without optimizer), then build "
                    "the optimizer from model.parameters() and load its state",
                )
            if id(param) in seen:
                raise CheckpointError(
                    "DUPLICATE_OPTIMIZER_REGISTRATION",
                    f"{name!r} is registered with the optimizer twice (as {seen[id(param)]} and "
                    f"param_groups[{g}][{i}]): a tied table would be stepped twice",
                    value=name,
                    fix="build the optimizer from model.parameters() (it yields each tied "
                    "Parameter once)",
                )
            seen[id(param)] = f"param_groups[{g}][{i}]"
    return {pid: names[pid] for pid in seen}


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, torch.Tensor):
        return value.item() if value.numel() == 1 else value.tolist()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


def optimizer_tensors(
    model: nn.Module, optimizer: torch.optim.Optimizer
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """State tensors keyed by logical parameter, and JSON metadata of the groups.

    Scalars that are not tensors (an int ``step`` in some optimizers) go to the
    metadata. Tensors are referenced, not copied.

    Raises:
        CheckpointError STALE_OPTIMIZER_PARAMETER / DUPLICATE_OPTIMIZER_REGISTRATION.
    """
    names = check_registration(model, optimizer)
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    groups = []
    for group in optimizer.param_groups:
        hyper = {k: _jsonable(v) for k, v in group.items() if k != "params"}
        groups.append({"params": [names[id(p)] for p in group["params"]], "options": hyper})
        for param in group["params"]:
            for key, value in optimizer.state.get(param, {}).items():
                name = names[id(param)]
                if isinstance(value, torch.Tensor):
                    tensors[f"{PREFIX}{name}/{key}"] = value.detach()
                else:
                    scalars.setdefault(name, {})[key] = _jsonable(value)
    meta = {"class": type(optimizer).__name__, "param_groups": groups, "scalars": scalars}
    return tensors, meta


def check_saved_groups(
    model: nn.Module, optimizer: torch.optim.Optimizer, meta: Mapping[str, Any]
) -> dict[int, str]:
    """Require ``optimizer`` to be built like the saved one; ``id(param) -> canonical name``.

    Raises:
        CheckpointError STALE_OPTIMIZER_PARAMETER / DUPLICATE_OPTIMIZER_REGISTRATION.
        CheckpointError OPTIMIZER_STATE_MISMATCH: another class, other groups or members.
    """
    names = check_registration(model, optimizer)
    saved_groups = meta.get("param_groups", [])
    mine = [[names[id(p)] for p in g["params"]] for g in optimizer.param_groups]
    theirs = [list(g["params"]) for g in saved_groups]
    if meta.get("class") != type(optimizer).__name__ or mine != theirs:
        raise CheckpointError(
            "OPTIMIZER_STATE_MISMATCH",
            f"saved {meta.get('class')} with groups {theirs}; this is "
            f"{type(optimizer).__name__} with groups {mine}",
            value=(meta.get("class"), theirs),
            fix="build the optimizer like the saved one: same class, same groups in the same order",
        )
    return names


def restore_options(group: dict[str, Any], saved: Mapping[str, Any]) -> None:
    """Put a saved param group's hyper-parameters (``saved["options"]``) into ``group``."""
    for key, value in saved["options"].items():
        if key in group and isinstance(group[key], tuple):
            value = tuple(value)
        if key in group and not isinstance(group[key], torch.Tensor):
            group[key] = value


def restore_optimizer(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    meta: Mapping[str, Any],
    read: Callable[[str], torch.Tensor],
    keys: set[str],
) -> None:
    """Load per-logical-parameter state into ``optimizer`` (built after aliases were restored).

    ``read(key)`` returns a saved tensor; ``keys`` are the saved tensor keys. Each
    parameter's old state is dropped before its saved state is read, so at most
    one set of moments exists at a time.

    Raises:
        CheckpointError STALE_OPTIMIZER_PARAMETER / DUPLICATE_OPTIMIZER_REGISTRATION.
        CheckpointError OPTIMIZER_STATE_MISMATCH: another optimizer class, other
            groups or members, or a moment of another shape.
    """
    names = check_saved_groups(model, optimizer, meta)
    scalars = meta.get("scalars", {})
    for group, saved in zip(optimizer.param_groups, meta["param_groups"], strict=True):
        restore_options(group, saved)
        for param in group["params"]:
            name = names[id(param)]
            optimizer.state.pop(param, None)
            prefix = f"{PREFIX}{name}/"
            state: dict[str, Any] = dict(scalars.get(name, {}))
            for key in (k for k in keys if k.startswith(prefix)):
                value = read(key)
                moment = key[len(prefix) :]
                if value.dim() > 0 and value.shape != param.shape:
                    raise CheckpointError(
                        "OPTIMIZER_STATE_MISMATCH",
                        f"{moment} of {name!r} is {list(value.shape)}, the parameter is "
                        f"{list(param.shape)}",
                        value=(name, moment),
                        fix="load optimizer state saved for this model's shapes",
                    )
                if value.dim() > 0:  # moments follow the parameter's device and dtype
                    value = value.to(device=param.device, dtype=param.dtype)
                state[moment] = value
            if state:
                optimizer.state[param] = state
