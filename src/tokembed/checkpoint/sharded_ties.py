"""Ties that survive FSDP2 sharding and materialization from the meta device.

A tied table is one Parameter registered under two names. Two steps of a
large-scale setup replace Parameters and keep that identity only by luck:

* ``fully_shard`` (FSDP2) replaces the Parameters of the modules it manages by
  sharded ``DTensor`` Parameters. A tied Parameter whose registrations fall into
  two ``fully_shard`` groups (``fully_shard(model.embed)``, then
  ``fully_shard(model)``, which manages the head) is replaced twice: two tables,
  two gradients, two optimizer states, and nothing is raised (torch 2.13).
  :func:`check_shard_plan` refuses such a plan before anything is sharded:
  TIE_ACROSS_SHARD_GROUPS.
* ``Module.to_empty`` on a model built on the meta device gives every
  registration its own new Parameter: the tie is gone.
  :func:`materialize` materializes and re-points the aliases, proving identity
  afterwards; :func:`guard_ties` wraps any such step (to_empty, a DTensor plan
  that distributes modules one by one, a sharding plan) and refuses one that
  lost a tie: TIE_LOST_IN_MATERIALIZATION, or TIE_ACROSS_SHARD_GROUPS when the
  two names ended up in different ``fully_shard`` groups.

All checks are local: every rank applies the same plan and reaches the same verdict.

Example::

    >>> check_shard_plan(model, [model.embed, model])     # embed and head are one Parameter
    Traceback (most recent call last):
    tokembed.errors.CheckpointError: TIE_ACROSS_SHARD_GROUPS: ...
    >>> with guard_ties(model):
    ...     for layer in model.layers:
    ...         fully_shard(layer)
    ...     fully_shard(model)                              # embed and head in the root group
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn

from tokembed.checkpoint.alias import AliasGraph, alias_graph, apply_aliases, same_storage
from tokembed.errors import CheckpointError

__all__ = ["check_shard_plan", "check_ties_kept", "guard_ties", "materialize", "shard_groups"]


def _owner_path(name: str) -> str:
    return name.rpartition(".")[0]


def shard_groups(model: nn.Module, plan: Sequence[nn.Module]) -> dict[str, int | None]:
    """Which ``fully_shard`` call of ``plan`` (in call order) manages each parameter name.

    FSDP2's rule: ``fully_shard(m)`` manages the parameters registered on the modules
    of ``m``'s subtree that no earlier call manages. None: no call manages the name.
    Names follow ``named_parameters(remove_duplicate=False)``.
    """
    group_of: dict[int, int] = {}
    for index, root in enumerate(plan):
        for module in root.modules():
            group_of.setdefault(id(module), index)
    out: dict[str, int | None] = {}
    for name, _ in model.named_parameters(remove_duplicate=False):
        path = _owner_path(name)
        owner = model.get_submodule(path) if path else model
        out[name] = group_of.get(id(owner))
    return out


def _split(group: tuple[str, ...], groups: dict[str, int | None]) -> str | None:
    """The first name of ``group`` placed in another shard group than the canonical one."""
    return next((n for n in group[1:] if groups[n] != groups[group[0]]), None)


def check_shard_plan(model: nn.Module, plan: Sequence[nn.Module]) -> None:
    """Refuse a ``fully_shard`` plan that shards one tied Parameter in two groups.

    ``plan`` lists the modules ``fully_shard`` will be called on, in call order
    (innermost first, the root last). Call it before sharding.

    Raises:
        CheckpointError TIE_ACROSS_SHARD_GROUPS: naming the tie and both groups.
    """
    groups = shard_groups(model, plan)
    for group in alias_graph(model).groups:
        other = _split(group, groups)
        if other is None:
            continue

        def where(name: str) -> str:
            index = groups[name]
            return "no fully_shard call" if index is None else f"plan[{index}]"

        raise CheckpointError(
            "TIE_ACROSS_SHARD_GROUPS",
            f"{group[0]!r} and {other!r} are one tied Parameter but would be sharded by "
            f"{where(group[0])} and {where(other)}: each group replaces its own copy",
            value=(group[0], other),
            fix="shard the tied modules in one group: leave them out of the inner "
            "fully_shard calls and let their common parent's call manage both",
        )


def _fsdp_owner(model: nn.Module, name: str) -> int | None:
    """id of the innermost FSDP2 module above ``name``'s module (None: not FSDP-managed)."""
    from torch.distributed.fsdp import FSDPModule

    parts = _owner_path(name).split(".") if _owner_path(name) else []
    found = id(model) if isinstance(model, FSDPModule) else None
    module = model
    for part in parts:
        module = module.get_submodule(part)
        if isinstance(module, FSDPModule):
            found = id(module)
    return found


def check_ties_kept(model: nn.Module, graph: AliasGraph) -> None:
    """Require every alias of ``graph`` (taken before a step) to still be one Parameter.

    Raises:
        CheckpointError TIE_ACROSS_SHARD_GROUPS: the lost alias and its canonical name
            are managed by different ``fully_shard`` groups.
        CheckpointError TIE_LOST_IN_MATERIALIZATION: any other lost alias.
    """
    for group in graph.groups:
        canonical = model.get_parameter(group[0])
        for alias in group[1:]:
            other = model.get_parameter(alias)
            if other is canonical and same_storage(other, canonical):
                continue
            if _fsdp_owner(model, alias) != _fsdp_owner(model, group[0]):
                raise CheckpointError(
                    "TIE_ACROSS_SHARD_GROUPS",
                    f"{alias!r} and {group[0]!r} were one Parameter; fully_shard put them in "
                    "two groups, which sharded two separate tables",
                    value=(group[0], alias),
                    fix="rebuild the model and shard the tied modules in one fully_shard "
                    "group (check the plan first with check_shard_plan)",
                )
            raise CheckpointError(
                "TIE_LOST_IN_MATERIALIZATION",
                f"{alias!r} was the Parameter {group[0]!r} and is now a separate tensor: "
                "the step replaced each registration by its own Parameter",
                value=(group[0], alias),
                fix="materialize with tokembed.checkpoint.materialize (re-ties after "
                "to_empty), or re-tie before building the optimizer (apply_aliases)",
            )


@contextmanager
def guard_ties(model: nn.Module) -> Iterator[AliasGraph]:
    """Take the alias graph, run the block, refuse if the block lost a tie.

    Example::

        >>> with guard_ties(model):
        ...     model.to_empty(device="cpu")      # unties: raises TIE_LOST_IN_MATERIALIZATION

    Raises:
        CheckpointError: as :func:`check_ties_kept`, when the block returns.
    """
    graph = alias_graph(model)
    yield graph
    check_ties_kept(model, graph)


def materialize(model: nn.Module, *, device: torch.device | str) -> list[str]:
    """``model.to_empty(device=device)`` with every tie kept; returns the names re-tied.

    The alias graph is taken before (on the meta device identity is all there is),
    the aliases are re-pointed after, and identity is proven. Values are
    uninitialized, as with ``to_empty``: initialize (or load a checkpoint) next.
    An FSDP2 model keeps its ties through ``to_empty`` itself; its Parameters are
    never re-pointed here.

    Raises:
        CheckpointError TIE_LOST_IN_MATERIALIZATION: a tie of an FSDP2-managed
            Parameter was lost (it cannot be re-pointed safely).
    """
    graph = alias_graph(model)
    model.to_empty(device=device)
    managed = {name for group in graph.groups for name in group if _fsdp_owner(model, name)}
    retied = [] if managed else apply_aliases(model, graph)
    check_ties_kept(model, graph)
    return retied
