"""Release discipline: a manifest binding tokenizer, tables and optimizer state; version pairs.

A migration produces a candidate pair T1/M1 from the active pair T0/M0. The
tokenizer and the model only ever move together:

* :class:`ReleaseManifest` binds the old and new tokenizer address hashes and
  ordered-vocabulary digests, the row map and init-ledger digests, SHA-256 of
  every canonical model tensor and optimizer moment, the alias (tie) map,
  derived packs with the digest of the tensor they were made from, and the
  gates passed so far;
* :func:`admit_pair` admits T0/M0 (control), T0/M1 only for an append-only
  change (compatibility testing), T1/M1 only once every gate passed, and
  refuses T1/M0 however many of T1's ids fall inside M0's table: one new or
  re-meant id corrupts lookup and output;
* :func:`check_rollback` accepts only the complete old tuple, and refuses ids
  or cache entries produced under the candidate tokenizer;
* :func:`next_stage` walks the lifecycle from a proposed diff to active traffic,
  one stage at a time, each behind its gates.

Example::

    >>> manifest = build_manifest(change=change, migration=result, model=model,
    ...                           old_model=old_digest)  # doctest: +SKIP
    >>> admit_pair(manifest, tokenizer=new_tok.address_hash, model=old_digest)  # doctest: +SKIP
    Traceback (most recent call last):
    tokembed.errors.CheckpointError: VERSION_PAIR_REJECTED: ...

Raises CheckpointError VERSION_PAIR_REJECTED, ROLLBACK_INCOMPLETE, STALE_PACK,
MANIFEST_MISMATCH, GATE_NOT_PASSED.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace

import torch
from torch import nn

from tokembed.artifacts.digest import tensor_digest
from tokembed.errors import CheckpointError
from tokembed.migrate.apply import Migration
from tokembed.migrate.classify import VocabularyChange

__all__ = [
    "GATES",
    "STAGES",
    "PackRecord",
    "ReleaseManifest",
    "VersionPair",
    "admit_pair",
    "build_manifest",
    "check_packs",
    "check_rollback",
    "model_digest",
    "model_tensors",
    "next_stage",
    "verify_tensors",
]

STAGES: tuple[str, ...] = (
    "PROPOSED_DIFF",
    "LOGICAL_STATE_CONVERTED",
    "SHARDS_AND_PACKS_MATERIALIZED",
    "OFFLINE_MECHANICAL_AUDIT",
    "ONE_STEP_TRAINING_RECONCILIATION",
    "SHADOW_VERSION_PAIR",
    "CANARY_VERSION_PAIR",
    "RAMP",
    "ACTIVE",
)
GATES: tuple[str, ...] = (
    "address",
    "tensor",
    "classifier",
    "optimizer",
    "ownership",
    "artifact",
    "behavior",
    "release",
)
# The gates that must have passed before entering each stage (cumulative).
_ENTRY: dict[str, tuple[str, ...]] = {
    "LOGICAL_STATE_CONVERTED": ("address",),
    "SHARDS_AND_PACKS_MATERIALIZED": ("address", "tensor"),
    "OFFLINE_MECHANICAL_AUDIT": ("address", "tensor", "ownership", "artifact"),
    "ONE_STEP_TRAINING_RECONCILIATION": (
        "address",
        "tensor",
        "ownership",
        "artifact",
        "classifier",
    ),
    "SHADOW_VERSION_PAIR": GATES[:6],
    "CANARY_VERSION_PAIR": GATES[:7],
    "RAMP": GATES,
    "ACTIVE": GATES,
}


@dataclass(frozen=True, kw_only=True)
class VersionPair:
    """A tokenizer (address hash) and a model (digest of its tensors) routed together."""

    tokenizer: str
    model: str


@dataclass(frozen=True, kw_only=True)
class PackRecord:
    """A derived artifact (quantized or packed table) and the canonical tensor it came from."""

    name: str
    source: str
    source_sha256: str
    rows: int


@dataclass(frozen=True, kw_only=True)
class ReleaseManifest:
    """Everything a release of a migrated vocabulary binds together."""

    old: VersionPair
    new: VersionPair
    kind: str
    old_vocab_digest: str
    new_vocab_digest: str
    row_map_digest: str
    init_ledger_digest: str
    tensors: Mapping[str, str]
    optimizer: Mapping[str, str] = field(default_factory=dict)
    steps: Mapping[str, float] = field(default_factory=dict)
    aliases: Mapping[str, str] = field(default_factory=dict)
    packs: tuple[PackRecord, ...] = ()
    stage: str = "LOGICAL_STATE_CONVERTED"
    gates: Mapping[str, bool] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["format"] = "tokembed.migration_manifest"
        data["version"] = 1
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ReleaseManifest:
        fields = {k: v for k, v in data.items() if k not in ("format", "version")}
        fields["old"] = VersionPair(**fields["old"])  # type: ignore[arg-type]
        fields["new"] = VersionPair(**fields["new"])  # type: ignore[arg-type]
        fields["packs"] = tuple(PackRecord(**p) for p in fields.get("packs", ()))  # type: ignore[attr-defined]
        return cls(**fields)  # type: ignore[arg-type]

    def with_gates(self, **passed: bool) -> ReleaseManifest:
        return replace(self, gates={**self.gates, **passed})


def _sha(blob: object) -> str:
    text = json.dumps(blob, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def model_tensors(model: nn.Module) -> dict[str, torch.Tensor]:
    """The model's canonical tensors: state dict with each tied alias listed once."""
    seen: dict[int, str] = {}
    out: dict[str, torch.Tensor] = {}
    for name, t in model.state_dict(keep_vars=True).items():
        if id(t) in seen:
            continue
        seen[id(t)] = name
        out[name] = t.detach()
    return out


def model_digest(tensors: Mapping[str, torch.Tensor]) -> str:
    """One digest naming a model: SHA-256 over sorted (name, tensor SHA-256) pairs."""
    return _sha(sorted((name, tensor_digest(t)) for name, t in tensors.items()))


def build_manifest(
    *,
    change: VocabularyChange,
    migration: Migration,
    model: nn.Module,
    old_model: str,
    optimizer: torch.optim.Optimizer | None = None,
    packs: tuple[PackRecord, ...] = (),
) -> ReleaseManifest:
    """The manifest of a finished migration of ``model`` (whose pre-migration digest is ``old_model``)."""
    tensors = model_tensors(model)
    digests = {name: tensor_digest(t) for name, t in tensors.items()}
    moments: dict[str, str] = {}
    steps: dict[str, float] = {}
    if optimizer is not None:
        for name in migration.optimizer_states:
            state = optimizer.state[model.get_parameter(name)]
            for key, value in state.items():
                if isinstance(value, torch.Tensor) and value.dim() >= 1:
                    moments[f"{name}:{key}"] = tensor_digest(value)
                elif key == "step":
                    steps[name] = float(value)
    roles = migration.roles
    aliases = {roles.output: roles.input} if roles.tied and roles.output else {}
    return ReleaseManifest(
        old=VersionPair(tokenizer=change.old_hash, model=old_model),
        new=VersionPair(tokenizer=change.new_hash, model=model_digest(tensors)),
        kind=change.kind,
        old_vocab_digest=change.old_vocab_digest,
        new_vocab_digest=change.new_vocab_digest,
        row_map_digest=migration.row_map.digest,
        init_ledger_digest=_sha([r.to_json() for r in migration.records]),
        tensors=digests,
        optimizer=moments,
        steps=steps,
        aliases=aliases,
        packs=packs,
        gates={"address": True, "tensor": True},
    )


def _reject(message: str, value: object, fix: str) -> CheckpointError:
    return CheckpointError("VERSION_PAIR_REJECTED", message, value=value, fix=fix)


def admit_pair(manifest: ReleaseManifest, *, tokenizer: str, model: str) -> str:
    """``"control"``, ``"compatibility"`` or ``"candidate"`` for an admitted pair; refuse others."""
    old, new = manifest.old, manifest.new
    if (tokenizer, model) == (old.tokenizer, old.model):
        return "control"
    if (tokenizer, model) == (old.tokenizer, new.model):
        if manifest.kind == "append-only":
            return "compatibility"
        raise _reject(
            f"old tokenizer with the migrated model: the change is {manifest.kind}, old ids moved",
            (tokenizer, model),
            "route old-tokenizer traffic to the old model",
        )
    if (tokenizer, model) == (new.tokenizer, old.model):
        raise _reject(
            "new tokenizer with the old model: new or re-meant ids address rows the model "
            "never trained, however many ids are in range",
            (tokenizer, model),
            "route the new tokenizer only to the migrated model",
        )
    if (tokenizer, model) == (new.tokenizer, new.model):
        missing = [g for g in GATES if not manifest.gates.get(g)]
        if not missing:
            return "candidate"
        raise _reject(
            f"the candidate pair has not passed the {missing[0]} gate",
            missing,
            "run every gate and record it in the manifest before routing traffic",
        )
    raise _reject(
        "this tokenizer/model pair is not named by the manifest",
        (tokenizer, model),
        "route only the manifest's old or new pair",
    )


def check_rollback(
    manifest: ReleaseManifest, *, tokenizer: str, model: str, ids_tokenizer: str | None = None
) -> VersionPair:
    """Accept a rollback to exactly the old tuple; ``ids_tokenizer`` names where kept ids came from.

    Raises:
        CheckpointError ROLLBACK_INCOMPLETE: the model or the tokenizer is not the old
            one, or ids / cache entries from the candidate tokenizer would be reused.
    """
    target = manifest.old
    if (tokenizer, model) != (target.tokenizer, target.model):
        kept = "tokenizer" if tokenizer != target.tokenizer else "model"
        raise CheckpointError(
            "ROLLBACK_INCOMPLETE",
            f"rollback restores only part of the old tuple: the {kept} is still the candidate's",
            value=(tokenizer, model),
            fix="restore tokenizer and model together (manifest.old)",
        )
    if ids_tokenizer is not None and ids_tokenizer != target.tokenizer:
        raise CheckpointError(
            "ROLLBACK_INCOMPLETE",
            "ids or cache entries made by another tokenizer would be replayed on the old model",
            value=ids_tokenizer,
            fix="drop candidate ids and caches; re-tokenize the source text with the old tokenizer",
        )
    return target


def check_packs(manifest: ReleaseManifest, tensors: Mapping[str, torch.Tensor]) -> None:
    """Every derived pack was made from the migrated canonical tensor (digest and rows).

    Raises:
        CheckpointError STALE_PACK: a pack's source digest or row count differs.
    """
    for pack in manifest.packs:
        source = tensors[pack.source]
        if pack.source_sha256 != tensor_digest(source) or pack.rows != source.shape[0]:
            raise CheckpointError(
                "STALE_PACK",
                f"pack {pack.name!r} ({pack.rows} rows) was not made from the migrated "
                f"{pack.source!r} ({source.shape[0]} rows)",
                value=pack.name,
                fix="regenerate the pack (groups, scales, padding) from the migrated table; "
                "never append packed bytes",
            )


def verify_tensors(manifest: ReleaseManifest, tensors: Mapping[str, torch.Tensor]) -> None:
    """The presented tensors are exactly the manifest's (names and SHA-256).

    Raises:
        CheckpointError MANIFEST_MISMATCH: a name is missing or extra, or a digest differs.
    """
    names = set(tensors)
    if names != set(manifest.tensors):
        diff = sorted(names ^ set(manifest.tensors))
        raise CheckpointError(
            "MANIFEST_MISMATCH",
            f"tensors {diff[:3]} are not in both the manifest and the checkpoint",
            value=diff,
            fix="present the checkpoint this manifest was written for",
        )
    for name, t in tensors.items():
        if tensor_digest(t) != manifest.tensors[name]:
            raise CheckpointError(
                "MANIFEST_MISMATCH",
                f"{name!r} differs from the manifest's digest",
                value=name,
                fix="present the checkpoint this manifest was written for",
            )


def next_stage(manifest: ReleaseManifest) -> ReleaseManifest:
    """The manifest advanced one lifecycle stage, if the gates that stage needs have passed.

    Raises:
        CheckpointError GATE_NOT_PASSED: a gate required by the next stage is missing.
    """
    k = STAGES.index(manifest.stage)
    if k + 1 == len(STAGES):
        return manifest
    stage = STAGES[k + 1]
    missing = [g for g in _ENTRY.get(stage, ()) if not manifest.gates.get(g)]
    if missing:
        raise CheckpointError(
            "GATE_NOT_PASSED",
            f"{stage} needs the {', '.join(missing)} gate(s)",
            value=missing,
            fix="run those gates and record them with manifest.with_gates(...)",
        )
    return replace(manifest, stage=stage)
