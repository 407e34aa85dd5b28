"""Tying-mode changes as explicit conversions, each with a manifest of what changed.

A change of tying mode is an architecture migration, never a side effect of a
load:

* :func:`untie` clones the shared table into a new output Parameter, gives it
  its own optimizer state (a copy of the shared one) and records that the two
  roles may now diverge;
* :func:`tie` makes the output role an alias of the input role after an
  explicit choice of the canonical values (``keep="input" | "output" |
  "mean"``), measuring the change (max abs difference, and the loss before and
  after on a batch the caller supplies) — equality at one instant is not a
  reason to drop a trained matrix silently.

Both refuse pairs that cannot be one table: another width (a factorized [V, D]
table and a [V, H] head: TIE_WIDTH_MISMATCH), other rows (TIE_SHAPE_MISMATCH),
and tables whose ordered vocabularies are not proven equal
(VOCABULARY_IDENTITY_MISMATCH: two input tables, e.g. source and target, need
equal tokenizer address hashes; equal row counts prove nothing).

Example::

    >>> c = untie(model, optimizer=adam)         # HF-style model: pair found by role
    >>> c.kind, model.lm_head.weight is model.model.embed_tokens.weight
    ('untie', False)
    >>> tie(model, keep="mean", loss=lambda m: m(**batch).loss).changes["max_abs_difference"]
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn

from tokembed.artifacts.models import parameter_owner
from tokembed.checkpoint.optimizer import check_registration
from tokembed.errors import CheckpointError, UsageError
from tokembed.files.atomic import write_atomic

__all__ = ["Conversion", "role_pair", "tie", "untie"]

Keep = Literal["input", "output", "mean"]


@dataclass(frozen=True, kw_only=True)
class Conversion:
    """The manifest of one conversion: its kind and every recorded change."""

    kind: str
    changes: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.changes}

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the manifest as JSON, atomically."""
        return write_atomic(Path(path), json.dumps(self.to_dict(), indent=2).encode() + b"\n")


def _module_name(model: nn.Module, module: nn.Module | None) -> str | None:
    for name, m in model.named_modules(remove_duplicate=False):
        if m is module:
            return f"{name}.weight" if name else "weight"
    return None


def role_pair(model: nn.Module, pair: tuple[str, str] | None = None) -> tuple[str, str]:
    """``(input table, output table)`` parameter names: ``pair``, or the HF role getters.

    Raises:
        UsageError INVALID_ARGUMENT: no ``pair`` and the model has no
            ``get_input_embeddings``/``get_output_embeddings``.
    """
    if pair is not None:
        return pair
    get_in = getattr(model, "get_input_embeddings", None)
    get_out = getattr(model, "get_output_embeddings", None)
    found = (
        (_module_name(model, get_in()), _module_name(model, get_out()))
        if callable(get_in) and callable(get_out)
        else (None, None)
    )
    if found[0] is None or found[1] is None:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"cannot tell the input and output tables of {type(model).__name__}",
            value=type(model).__name__,
            fix="pass pair=('embed.weight', 'lm_head.weight')",
        )
    return found[0], found[1]


def _set_config_tie(model: nn.Module, tied: bool) -> bool:
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "tie_word_embeddings"):
        return False
    config.tie_word_embeddings = tied
    return True


def untie(
    model: nn.Module,
    *,
    pair: tuple[str, str] | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    manifest: str | os.PathLike[str] | None = None,
) -> Conversion:
    """Give the output role its own Parameter, a clone of the shared table.

    With ``optimizer`` the clone joins the shared table's param group with a
    copy of its state (moments and step), so the first step after untying is the
    step a tied model would take on each role's gradient.

    Raises:
        CheckpointError TIE_NOT_SHARED: the pair is not tied now.
        CheckpointError STALE_OPTIMIZER_PARAMETER / DUPLICATE_OPTIMIZER_REGISTRATION.
    """
    inp, out = role_pair(model, pair)
    shared = model.get_parameter(inp)
    if model.get_parameter(out) is not shared:
        raise CheckpointError(
            "TIE_NOT_SHARED",
            f"{out!r} is not the Parameter {inp!r}; there is no tie to undo",
            value=(inp, out),
            fix="untie only a tied pair",
        )
    module, leaf = parameter_owner(model, out)
    clone = nn.Parameter(shared.detach().clone(), requires_grad=shared.requires_grad)
    setattr(module, leaf, clone)
    state = "none"
    if optimizer is not None:
        check_registration(model, optimizer)
        group = next(g for g in optimizer.param_groups if any(p is shared for p in g["params"]))
        group["params"].append(clone)
        old = optimizer.state.get(shared, {})
        optimizer.state[clone] = {
            k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in old.items()
        }
        state = "cloned from the shared table" if old else "empty (the table had none)"
    changes = {
        "input": inp,
        "output": out,
        "shape": list(shared.shape),
        "dtype": str(shared.dtype).removeprefix("torch."),
        "optimizer_state": state,
        "config_updated": _set_config_tie(model, False),
        "note": "the roles now receive separate updates and may diverge",
    }
    result = Conversion(kind="untie", changes=changes)
    if manifest is not None:
        result.write(manifest)
    return result


def _address_hash(module: nn.Module) -> str | None:
    config = getattr(module, "config", None)
    value = getattr(config, "address_hash", None) or getattr(module, "address_hash", None)
    return value if isinstance(value, str) else None


def _check_tieable(
    model: nn.Module, inp: str, out: str, vocabularies: tuple[str, str] | None
) -> None:
    a, b = model.get_parameter(inp), model.get_parameter(out)
    if a.shape[:1] == b.shape[:1] and a.shape != b.shape:
        raise CheckpointError(
            "TIE_WIDTH_MISMATCH",
            f"{inp!r} is {list(a.shape)} and {out!r} is {list(b.shape)}: a lexical [V, D] table "
            "and a [V, H] head live in different coordinates",
            value=(tuple(a.shape), tuple(b.shape)),
            fix="tie only the [V, D] decoder behind a hidden-to-lexical bridge "
            "(tokembed.checkpoint.factorize_tied), or keep the head untied",
        )
    if a.shape != b.shape or a.dtype != b.dtype:
        raise CheckpointError(
            "TIE_SHAPE_MISMATCH",
            f"{inp!r} is {list(a.shape)} {a.dtype}, {out!r} is {list(b.shape)} {b.dtype}",
            value=(tuple(a.shape), tuple(b.shape)),
            fix="tie only tables of one vocabulary, width and dtype",
        )
    in_mod, out_mod = parameter_owner(model, inp)[0], parameter_owner(model, out)[0]
    hashes = vocabularies or (_address_hash(in_mod), _address_hash(out_mod))
    both_inputs = not isinstance(out_mod, nn.Linear)
    unproven = both_inputs and (hashes[0] is None or hashes[1] is None)
    if unproven or (None not in hashes and hashes[0] != hashes[1]):
        raise CheckpointError(
            "VOCABULARY_IDENTITY_MISMATCH",
            f"{inp!r} and {out!r} have {a.shape[0]} rows each, but their vocabularies are "
            f"{hashes[0]!r} and {hashes[1]!r}: equal row counts do not make row v one token",
            value=hashes,
            fix="bind both tables to one tokenizer (bind_address) or build a joint vocabulary "
            "and migrate both tables to it first",
        )


def tie(
    model: nn.Module,
    *,
    keep: Keep,
    pair: tuple[str, str] | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    loss: Callable[[nn.Module], torch.Tensor] | None = None,
    vocabularies: tuple[str, str] | None = None,
    manifest: str | os.PathLike[str] | None = None,
) -> Conversion:
    """Make the output role an alias of the input role, with chosen canonical values.

    Args:
        keep: "input" keeps the input table's values, "output" the output's,
            "mean" their elementwise mean.
        loss: evaluated (no grad) before and after, e.g. ``lambda m: m(**batch).loss``.
        vocabularies: address hashes of the two tables, when the modules do not carry them.
        optimizer: the output Parameter leaves its group; the canonical keeps
            the input table's state (recorded).

    Raises:
        CheckpointError TIE_WIDTH_MISMATCH, TIE_SHAPE_MISMATCH,
            VOCABULARY_IDENTITY_MISMATCH, UNDECLARED_TIE (already tied).
        UsageError INVALID_ARGUMENT: unknown ``keep``.
    """
    if keep not in ("input", "output", "mean"):
        raise UsageError(
            "INVALID_ARGUMENT", f"keep={keep!r}", value=keep, fix="input, output or mean"
        )
    inp, out = role_pair(model, pair)
    canonical, other = model.get_parameter(inp), model.get_parameter(out)
    if canonical is other:
        raise CheckpointError(
            "UNDECLARED_TIE",
            f"{inp!r} and {out!r} are already one Parameter",
            value=(inp, out),
            fix="nothing to tie; check the config with tie_report",
        )
    _check_tieable(model, inp, out, vocabularies)
    if optimizer is not None:
        check_registration(model, optimizer)
    with torch.no_grad():
        before = None if loss is None else float(loss(model))
        diff = (canonical.double() - other.double()).abs()  # [V, H], exact for fp32 inputs
        if keep == "output":
            canonical.copy_(other)
        elif keep == "mean":
            canonical.copy_((canonical.double() + other.double()).div(2).to(canonical.dtype))
        module, leaf = parameter_owner(model, out)
        setattr(module, leaf, canonical)
        after = None if loss is None else float(loss(model))
    state = "none"
    if optimizer is not None:
        for group in optimizer.param_groups:
            group["params"] = [p for p in group["params"] if p is not other]
        dropped = optimizer.state.pop(other, None)
        state = "input's kept, output's dropped" if dropped else "input's kept"
    changes = {
        "input": inp,
        "output": out,
        "keep": keep,
        "max_abs_difference": float(diff.max()),
        "mean_abs_difference": float(diff.mean()),
        "loss_before": before,
        "loss_after": after,
        "optimizer_state": state,
        "config_updated": _set_config_tie(model, True),
    }
    result = Conversion(kind="tie", changes=changes)
    if manifest is not None:
        result.write(manifest)
    return result
