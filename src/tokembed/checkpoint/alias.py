"""Alias graphs: which parameter names of a module are one Parameter object.

``Module.state_dict()`` lists a tied table under every name it is registered
by, and ``load_state_dict`` copies values into whatever Parameters the module
holds: a loader that restores values does not restore topology. An
:class:`AliasGraph` is the topology written down: groups of names, the first
(canonical) name of each group owning the storage, the others aliases of it.
:func:`apply_aliases` re-points every alias to its canonical Parameter and
:func:`verify_aliases` proves the result by object and storage identity, never
by equal values.

Example::

    >>> model.lm_head.weight = model.embed.weight
    >>> graph = alias_graph(model)
    >>> graph.aliases()
    {'lm_head.weight': 'embed.weight'}

Raises :class:`~tokembed.errors.CheckpointError` ALIAS_GRAPH_LOST (verify) and
MALFORMED_CHECKPOINT (a graph naming unknown parameters or a name twice).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

from tokembed.artifacts.models import parameter_owner
from tokembed.errors import CheckpointError, UsageError

__all__ = [
    "AliasGraph",
    "alias_graph",
    "apply_aliases",
    "local_tensor",
    "placement",
    "same_storage",
    "verify_aliases",
]


@dataclass(frozen=True, kw_only=True)
class AliasGraph:
    """Groups of parameter names that must be one Parameter; canonical name first.

    Raises:
        CheckpointError MALFORMED_CHECKPOINT: a name appears in two groups, or a
            group has fewer than two names.
    """

    groups: tuple[tuple[str, ...], ...]

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for group in self.groups:
            if len(group) < 2 or seen & set(group) or len(set(group)) != len(group):
                raise CheckpointError(
                    "MALFORMED_CHECKPOINT",
                    f"alias group {list(group)} is empty, a singleton or overlaps another group",
                    value=list(group),
                    fix="give each group a canonical name and at least one distinct alias",
                )
            seen.update(group)

    @classmethod
    def from_aliases(cls, aliases: Mapping[str, str]) -> AliasGraph:
        """Build from ``{alias: canonical}`` (the form HF's tied-keys mapping uses)."""
        groups: dict[str, list[str]] = {}
        for alias, canonical in aliases.items():
            root = aliases.get(canonical, canonical)  # a chain a -> b -> c collapses to c
            groups.setdefault(root, [root])
            if alias != root and alias not in groups[root]:
                groups[root].append(alias)
        return cls(groups=tuple(tuple(g) for g in groups.values() if len(g) > 1))

    def aliases(self) -> dict[str, str]:
        """``{alias: canonical}`` for every non-canonical name."""
        return {alias: group[0] for group in self.groups for alias in group[1:]}

    def canonical(self, name: str) -> str:
        """The canonical name of ``name``'s group (``name`` itself when it is in none)."""
        return self.aliases().get(name, name)

    def merged(self, other: AliasGraph) -> AliasGraph:
        """Union of both graphs' aliases; ``self``'s canonical names win."""
        mapping = {**other.aliases(), **self.aliases()}
        return AliasGraph.from_aliases(mapping)


def local_tensor(t: torch.Tensor) -> torch.Tensor:
    """The part of ``t`` this process stores: a DTensor's local shard, any other tensor itself."""
    from torch.distributed.tensor import DTensor

    if isinstance(t, DTensor):
        local: torch.Tensor = t.to_local().detach()
        return local
    return t


def placement(t: torch.Tensor) -> str:
    """How ``t`` is distributed: ``""`` for a plain tensor, a DTensor's mesh and placements.

    Example::

        >>> placement(fsdp_model.emb.weight)  # doctest: +SKIP
        'mesh (2,) Shard(dim=0)'
    """
    from torch.distributed.tensor import DTensor

    if not isinstance(t, DTensor):
        return ""
    mesh = t.device_mesh
    names = f" {mesh.mesh_dim_names}" if mesh.mesh_dim_names else ""
    return f"mesh {tuple(mesh.shape)}{names} " + ", ".join(str(p) for p in t.placements)


def same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when ``a`` and ``b`` view the same bytes: storage, offset, shape and stride.

    DTensors (FSDP2, tensor-parallel plans) view the same bytes when they have the
    same global shape, mesh and placements and their local shards do; a DTensor and
    a plain tensor never do.
    """
    from torch.distributed.tensor import DTensor

    if a is b:
        return True
    if isinstance(a, DTensor) or isinstance(b, DTensor):
        if not (isinstance(a, DTensor) and isinstance(b, DTensor)):
            return False
        if a.shape != b.shape or a.device_mesh != b.device_mesh or a.placements != b.placements:
            return False
        a, b = local_tensor(a), local_tensor(b)
    if a.device.type == "meta" or b.device.type == "meta":  # no storage: identity is all there is
        return False
    return (
        a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
        and a.storage_offset() == b.storage_offset()
        and a.shape == b.shape
        and a.stride() == b.stride()
        and a.dtype == b.dtype
    )


def alias_graph(model: nn.Module) -> AliasGraph:
    """The groups of names under which ``model`` registers one Parameter object.

    Names follow ``named_parameters(remove_duplicate=False)`` order, so the
    canonical name is the first registration (``embed_tokens`` before
    ``lm_head`` in HF decoders, as their checkpoints store it).
    """
    by_id: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        by_id.setdefault(id(param), []).append(name)
    return AliasGraph(groups=tuple(tuple(g) for g in by_id.values() if len(g) > 1))


def _owner(model: nn.Module, name: str) -> tuple[nn.Module, str]:
    try:
        return parameter_owner(model, name)
    except UsageError:
        raise CheckpointError(
            "MALFORMED_CHECKPOINT",
            f"the alias graph names {name!r}, which is not a parameter of the model",
            value=name,
            fix="build the model whose parameter names the checkpoint records",
        ) from None


def apply_aliases(model: nn.Module, graph: AliasGraph) -> list[str]:
    """Point every alias of ``graph`` at its canonical Parameter; the names re-pointed.

    Do this before building the optimizer: an optimizer built earlier keeps the
    replaced Parameter (see :func:`tokembed.checkpoint.optimizer.check_registration`).

    Raises:
        CheckpointError MALFORMED_CHECKPOINT: a name is not a parameter of ``model``.
        CheckpointError TIE_SHAPE_MISMATCH: an alias has another shape or dtype.
    """
    changed: list[str] = []
    for group in graph.groups:
        owner, leaf = _owner(model, group[0])
        canonical = owner._parameters[leaf]
        assert canonical is not None
        for alias in group[1:]:
            module, attr = _owner(model, alias)
            current = module._parameters[attr]
            if current is canonical:
                continue
            if current is not None and (
                current.shape != canonical.shape or current.dtype != canonical.dtype
            ):
                raise CheckpointError(
                    "TIE_SHAPE_MISMATCH",
                    f"{alias!r} is {list(current.shape)} {current.dtype} but its canonical "
                    f"{group[0]!r} is {list(canonical.shape)} {canonical.dtype}",
                    value=(alias, tuple(current.shape), tuple(canonical.shape)),
                    fix="tie only tables of one shape and dtype, or keep them untied",
                )
            setattr(module, attr, canonical)
            changed.append(alias)
    return changed


def verify_aliases(model: nn.Module, graph: AliasGraph) -> None:
    """Prove every alias is its canonical Parameter: same object and same storage.

    Raises:
        CheckpointError ALIAS_GRAPH_LOST: naming the first alias that is a
            separate tensor (equal values do not count).
    """
    for group in graph.groups:
        canonical = model.get_parameter(group[0])
        for alias in group[1:]:
            other = model.get_parameter(alias)
            if other is not canonical or not same_storage(other, canonical):
                raise CheckpointError(
                    "ALIAS_GRAPH_LOST",
                    f"{alias!r} is not the Parameter {group[0]!r}: it is a separate tensor "
                    "(values alone do not make a tie)",
                    value=alias,
                    fix="restore the alias with apply_aliases(model, graph) before training "
                    "or building the optimizer",
                )
