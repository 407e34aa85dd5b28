"""Tie verification: is a claimed tie one Parameter, and is every shared table claimed?

:func:`tie_report` looks at every pair of vocabulary tables that is tied (one
Parameter registered twice), claims to be (a transformers config's
``tie_word_embeddings`` over the class's tied keys, or the caller's
``claims``), or merely looks like one (equal shape and equal values). For each
pair it records object identity, storage identity (same storage, offset,
shape and stride), value equality and the claim, and gives a code where they
disagree:

* claimed tied, two storages — TIE_NOT_SHARED (equal values are not a tie: they
  get two gradients, two optimizer states and diverge on the first step);
* one storage, claimed untied — UNDECLARED_TIE;
* claimed tied, [V, D] against [V, H] — TIE_WIDTH_MISMATCH; other shapes —
  TIE_SHAPE_MISMATCH;
* row-sharded tables (vocab-parallel embedding and head) claimed tied whose
  row intervals differ on this rank, or DTensor parameters (FSDP2, tensor-parallel
  plans) claimed tied with another mesh or placement — TIE_PARTITION_MISMATCH;
  tied sharded tables share one local Parameter per rank, checked like any other
  tie (a DTensor by its identity, its local shard's storage and its placement);
* pipeline replicas (``replicas=``) are checked with their own collective
  contract (:meth:`tokembed.parallel.TiedReplica.check`): REPLICA_DIVERGED.

:func:`require_ties` raises the first problem. Works on any ``nn.Module``.

Example::

    >>> report = tie_report(model)                      # HF LlamaForCausalLM, tied config
    >>> [(p.left, p.right, p.kind, p.code) for p in report.pairs]
    [('model.embed_tokens.weight', 'lm_head.weight', 'same_parameter', None)]
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

import torch
from torch import nn

from tokembed.checkpoint._hf import hf_claims
from tokembed.checkpoint.alias import alias_graph, local_tensor, placement, same_storage
from tokembed.errors import CheckpointError, ParallelError, TokembedError

__all__ = ["TieKind", "TiePair", "TieReport", "check_replica_groups", "require_ties", "tie_report"]

TieKind = Literal[
    "same_parameter", "shared_storage", "equal_values", "distinct", "replica", "stored_once"
]


@dataclass(frozen=True, kw_only=True)
class TiePair:
    """One pair of tables: what they are, what is claimed, and the code if those disagree."""

    left: str
    right: str
    kind: TieKind
    left_shape: tuple[int, ...]
    right_shape: tuple[int, ...]
    same_object: bool
    same_storage: bool
    equal_values: bool | None  # None: shapes or dtypes differ, values not comparable
    claimed: bool | None  # None: nobody says either way
    claim_source: str
    code: str | None
    detail: str
    left_placement: str = ""  # a DTensor's mesh and placements ("" for a plain tensor)
    right_placement: str = ""

    @property
    def tied(self) -> bool:
        return self.same_object or self.same_storage or self.kind in ("replica", "stored_once")


@dataclass(frozen=True, kw_only=True)
class TieReport:
    """Every examined pair; ``problems`` are the pairs with a code."""

    pairs: tuple[TiePair, ...]

    @property
    def problems(self) -> tuple[TiePair, ...]:
        return tuple(p for p in self.pairs if p.code is not None)

    def to_dict(self) -> dict[str, Any]:
        return {"pairs": [asdict(p) for p in self.pairs], "ok": not self.problems}

    def format(self) -> str:
        """One line per pair: names, kind, claim and code (or ``ok``)."""
        if not self.pairs:
            return "no tied or tie-like tables"
        lines = []
        for p in self.pairs:
            claim = {True: "claimed tied", False: "claimed untied", None: "no claim"}[p.claimed]
            source = f" ({p.claim_source})" if p.claim_source else ""
            lines.append(
                f"{p.left} <-> {p.right}: {p.kind}, {claim}{source}: {p.code or 'ok'} — {p.detail}"
            )
        return "\n".join(lines)


def _table_names(model: nn.Module) -> list[str]:
    """Parameter names of vocabulary-like tables: embedding weights and V-row linear weights."""
    embeddings: list[str] = []
    rows: set[int] = set()
    for name, module in model.named_modules(remove_duplicate=False):
        weight = module._parameters.get("weight")
        if weight is None or weight.dim() != 2:
            continue
        if isinstance(module, nn.Embedding) or hasattr(module, "num_embeddings"):
            embeddings.append(f"{name}.weight" if name else "weight")
            rows.add(int(getattr(module, "num_embeddings", weight.shape[0])))
    getter = getattr(model, "get_output_embeddings", None)
    output = getter() if callable(getter) else None
    heads = [
        f"{name}.weight" if name else "weight"
        for name, module in model.named_modules(remove_duplicate=False)
        if isinstance(module, nn.Linear) and (module.out_features in rows or module is output)
    ]
    return list(dict.fromkeys(embeddings + heads))


def _intervals(model: nn.Module, name: str) -> tuple[int, int] | None:
    path = name.rpartition(".")[0]
    module = model.get_submodule(path) if path else model
    start, end = getattr(module, "vocab_start", None), getattr(module, "vocab_end", None)
    return None if start is None or end is None else (int(start), int(end))


def _examine(model: nn.Module, left: str, right: str, claimed: bool | None, source: str) -> TiePair:
    a, b = model.get_parameter(left), model.get_parameter(right)
    same_obj, same_sto = a is b, same_storage(a, b)
    pa, pb = placement(a), placement(b)
    # DTensors compare their local shards (same placement only: no collective here);
    # meta-device tensors (architectures built without weights) have no values at all.
    la, lb = local_tensor(a), local_tensor(b)
    comparable = a.shape == b.shape and a.dtype == b.dtype and pa == pb
    comparable = comparable and la.shape == lb.shape and la.device.type != "meta"
    equal = bool(torch.equal(la.detach(), lb.detach())) if comparable else None
    kind: TieKind = "distinct"
    if same_obj:
        kind = "same_parameter"
    elif same_sto:
        kind = "shared_storage"
    elif equal:
        kind = "equal_values"
    code, detail = None, "one Parameter" if same_obj else "one storage, two Parameter objects"
    if not (same_obj or same_sto):
        detail = "equal values in two storages: not a tie" if equal else "separate tables"
    if pa and (same_obj or same_sto):
        detail += f", sharded as {pa}"
    ia, ib = _intervals(model, left), _intervals(model, right)
    if claimed and a.shape[:1] == b.shape[:1] and a.shape[1:] != b.shape[1:]:
        code = "TIE_WIDTH_MISMATCH"
        detail = f"[V, D] = {list(a.shape)} cannot alias [V, H] = {list(b.shape)}"
    elif claimed and (a.shape != b.shape or a.dtype != b.dtype):
        code = "TIE_SHAPE_MISMATCH"
        detail = f"{list(a.shape)} {a.dtype} vs {list(b.shape)} {b.dtype}"
    elif claimed and ia != ib:
        code, detail = "TIE_PARTITION_MISMATCH", f"rows {ia} vs {ib} on this rank"
    elif claimed and (
        pa != pb or getattr(a, "device_mesh", None) != getattr(b, "device_mesh", None)
    ):
        code = "TIE_PARTITION_MISMATCH"
        detail = f"sharded as {pa or 'a plain tensor'} vs {pb or 'a plain tensor'}"
    elif claimed and not (same_obj or same_sto):
        code = "TIE_NOT_SHARED"
    elif claimed is False and (same_obj or same_sto):
        code = "UNDECLARED_TIE"
    return TiePair(
        left=left,
        right=right,
        kind=kind,
        left_shape=tuple(a.shape),
        right_shape=tuple(b.shape),
        same_object=same_obj,
        same_storage=same_sto,
        equal_values=equal,
        claimed=claimed,
        claim_source=source,
        code=code,
        detail=detail,
        left_placement=pa,
        right_placement=pb,
    )


def _replica_pair(name: str, replica: Any, optimizer: torch.optim.Optimizer | None) -> TiePair:
    shape = tuple(replica.param.shape)
    code, detail = None, "replicas agree in values, rows and optimizer state"
    try:
        replica.check(optimizer)
    except ParallelError as exc:
        code, detail = exc.code, exc.message
    return TiePair(
        left=name,
        right=f"{name}@group",
        kind="replica",
        left_shape=shape,
        right_shape=shape,
        same_object=False,
        same_storage=False,
        equal_values=code is None,
        claimed=True,
        claim_source="TiedReplica",
        code=code,
        detail=detail,
    )


def tie_report(
    model: nn.Module,
    *,
    claims: Mapping[tuple[str, str], bool] | None = None,
    replicas: Mapping[str, Any] | None = None,
    optimizer: torch.optim.Optimizer | None = None,
) -> TieReport:
    """Examine every tied, claimed-tied or tie-like pair of tables of ``model``.

    Args:
        claims: ``{(name_a, name_b): tied?}`` the caller asserts; these override
            the transformers config's claims for the same pair.
        replicas: ``{name: TiedReplica}`` of pipeline stages; checked with one
            collective each (call on every rank of the embedding group).
        optimizer: this stage's optimizer, for the replicas' state comparison.

    Comparing values reads each candidate pair once (``torch.equal``); pairs are
    limited to embedding tables and linear layers with a table's row count.
    """
    found: dict[frozenset[str], tuple[str, str, bool | None, str]] = {}
    for (a, b), hf_tied in hf_claims(model).items():
        found[frozenset((a, b))] = (b, a, hf_tied, "config.tie_word_embeddings")
    for (a, b), tied in (claims or {}).items():
        found[frozenset((a, b))] = (a, b, tied, "caller")
    for group in alias_graph(model).groups:
        for alias in group[1:]:
            found.setdefault(frozenset((group[0], alias)), (group[0], alias, None, ""))
    for a, b in itertools.combinations(_table_names(model), 2):
        key = frozenset((a, b))
        pa, pb = model.get_parameter(a), model.get_parameter(b)
        if key not in found and pa.shape == pb.shape and pa is not pb:
            found[key] = (a, b, None, "")
    pairs = []
    for left, right, claimed, source in found.values():
        pair = _examine(model, left, right, claimed, source)
        if pair.kind != "distinct" or claimed is not None:
            pairs.append(pair)
    for name, replica in (replicas or {}).items():
        pairs.append(_replica_pair(name, replica, optimizer))
    return TieReport(pairs=tuple(pairs))


def require_ties(
    model: nn.Module,
    *,
    claims: Mapping[tuple[str, str], bool] | None = None,
    replicas: Mapping[str, Any] | None = None,
    optimizer: torch.optim.Optimizer | None = None,
) -> TieReport:
    """:func:`tie_report`, raising the first problem; returns the report when there is none.

    Raises:
        CheckpointError: TIE_NOT_SHARED, UNDECLARED_TIE, TIE_WIDTH_MISMATCH,
            TIE_SHAPE_MISMATCH or TIE_PARTITION_MISMATCH.
        ParallelError REPLICA_DIVERGED: a pipeline replica differs.
    """
    report = tie_report(model, claims=claims, replicas=replicas, optimizer=optimizer)
    for p in report.problems:
        cls: type[TokembedError] = ParallelError if p.kind == "replica" else CheckpointError
        raise cls(
            p.code or "TIE_NOT_SHARED",
            f"{p.left} and {p.right}: {p.detail}",
            value=(p.left, p.right),
            fix=_FIXES.get(p.code or "", "reconcile the replicas before checking"),
        )
    return report


def check_replica_groups(replica: Any, *, data_group: Any) -> None:
    """Require a pipeline replica's embedding group to meet the data-parallel group only here.

    The reconciled gradient ``g_input + g_output`` is summed once over the
    embedding group (one rank per stage). If the data-parallel group contains
    another member of the embedding group, the same stage contribution is summed
    a second time by the data-parallel all-reduce. Local: uses group membership
    only, so every rank reaches the same verdict without communicating.

    Raises:
        CheckpointError REPLICA_GRADIENT_REDUCED_TWICE: the groups share another rank.
    """
    import torch.distributed as dist

    world = dist.group.WORLD
    emb = dist.get_process_group_ranks(replica.group if replica.group is not None else world)
    dp = dist.get_process_group_ranks(data_group if data_group is not None else world)
    shared = sorted(set(emb) & set(dp))
    if shared != [dist.get_rank()]:
        raise CheckpointError(
            "REPLICA_GRADIENT_REDUCED_TWICE",
            f"embedding group {emb} and data-parallel group {dp} share ranks {shared}: the "
            "reconciled tied gradient would be summed by both",
            value=(tuple(emb), tuple(dp)),
            fix="build the embedding group from one rank per pipeline stage with the same "
            "data-parallel index, and reduce data-parallel replicas in a separate group",
        )


_FIXES = {
    "TIE_NOT_SHARED": "assign one Parameter to both roles (head.weight = embedding.weight), "
    "or declare the pair untied",
    "UNDECLARED_TIE": "set tie_word_embeddings=True, or untie with tokembed.checkpoint.untie",
    "TIE_WIDTH_MISMATCH": "insert a hidden-to-lexical bridge and tie only the [V, D] decoder "
    "(tokembed.checkpoint.factorize_tied), or keep the head untied",
    "TIE_SHAPE_MISMATCH": "tie only tables of one vocabulary and width",
    "TIE_PARTITION_MISMATCH": "shard the head with the embedding's group and intervals "
    "(VocabParallelLMHead(tie_to=embedding))",
}
