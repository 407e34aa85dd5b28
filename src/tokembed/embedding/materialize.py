"""Materialization: the three ways a [V, d] table may come into being.

A constructor, a checkpoint loader and a vocabulary resize can all produce a
tensor of the right shape; they differ in which rows they may write:

* ``fresh``: every row, from a named :class:`~tokembed.embedding.init.Initializer`
  and a seed, then the PAD post-init policy;
* ``exact_load``: no row; the saved tensor is copied after checking key set,
  shape, tokenizer address hash, finiteness and that the dtype cast is lossless;
* ``growth``: only appended rows; the old prefix is copied and then verified
  bit for bit, and optimizer moments gain explicit zero rows
  (:func:`grow_optimizer_state_`).

Every result carries its evidence (state, source key, dtypes, the SHA-256 digest of
the produced table, :func:`~tokembed.artifacts.digest.tensor_digest`) so a run can say which state its table is in. Restoring ties
after growth is the caller's step (assign the grown Parameter to every alias).

Example::

    >>> spec = TableSpec(num_embeddings=5, embedding_dim=4)
    >>> m = load_exact({"weight": torch.zeros(5, 4)}, spec=spec)
    >>> m.state, tuple(m.weight.shape)
    ('exact_load', (5, 4))

Raises :class:`~tokembed.errors.EmbeddingError` with MISSING_KEY, UNEXPECTED_KEY,
SHAPE_MISMATCH, ADDRESS_HASH_MISMATCH, NON_FINITE_VALUES, UNSAFE_CAST or
GROWTH_PREFIX_CHANGED.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from tokembed.artifacts.digest import tensor_digest
from tokembed.embedding.addressed import check_address_hash
from tokembed.embedding.init import Initializer, initialize_
from tokembed.embedding.lookup_checks import check_finite
from tokembed.embedding.lookup_config import LookupConfig
from tokembed.errors import EmbeddingError, UsageError

__all__ = [
    "Materialized",
    "TableSpec",
    "check_growth_prefix",
    "grow",
    "grow_optimizer_state_",
    "is_safe_cast",
    "load_exact",
    "materialize_fresh",
]


@dataclass(frozen=True, kw_only=True)
class TableSpec:
    """The declared table: shape, storage dtype, state-dict key, tokenizer binding, PAD.

    The shape, PAD row and tokenizer binding are those of a
    :class:`~tokembed.embedding.lookup_config.LookupConfig` (:meth:`lookup`),
    validated by it; the address hash has the form "sha256:<64 hex>".
    """

    num_embeddings: int
    embedding_dim: int
    dtype: torch.dtype = torch.float32
    key: str = "weight"
    address_hash: str | None = None
    padding_idx: int | None = None
    initializer: Initializer = field(
        default_factory=lambda: Initializer(name="constructor_default")
    )
    seed: int = 0

    def __post_init__(self) -> None:
        self.lookup()  # shape, PAD row and address hash: validated where every table's are
        if not self.dtype.is_floating_point:
            raise UsageError(
                "INVALID_ARGUMENT", f"a table stores floats, not {self.dtype}", value=self.dtype
            )

    def lookup(self) -> LookupConfig:
        """The lookup part of this spec (shape, ``padding_idx``, ``address_hash``).

        Raises:
            UsageError INVALID_ARGUMENT, EmbeddingError PAD_ID_INVALID: as LookupConfig.
        """
        return LookupConfig(
            num_embeddings=self.num_embeddings,
            embedding_dim=self.embedding_dim,
            padding_idx=self.padding_idx,
            address_hash=self.address_hash,
        )

    @property
    def shape(self) -> tuple[int, int]:
        return (self.num_embeddings, self.embedding_dim)


@dataclass(frozen=True, kw_only=True)
class Materialized:
    """A produced table and the evidence of how it was produced."""

    weight: torch.Tensor
    state: str  # "fresh" | "exact_load" | "growth"
    evidence: Mapping[str, object]


def is_safe_cast(src: torch.dtype, dst: torch.dtype) -> bool:
    """True when every ``src`` value is exactly representable in ``dst``.

    Float to float must widen both range and precision (fp16 -> bf16 loses
    mantissa, bf16 -> fp16 loses range); float to int or int to float is never
    admitted for a table.
    """
    if src == dst:
        return True
    if src.is_floating_point != dst.is_floating_point or src.is_complex or dst.is_complex:
        return False
    return torch.promote_types(src, dst) == dst


def _require_tensor(tensors: Mapping[str, torch.Tensor], key: str, prefix: str) -> torch.Tensor:
    wanted = prefix + key
    mine = sorted(k for k in tensors if k.startswith(prefix))
    if wanted not in tensors:
        raise EmbeddingError(
            "MISSING_KEY",
            f"state dict has no {wanted!r} (keys under {prefix!r}: {mine})",
            value=wanted,
            fix="load the checkpoint that holds this table, or materialize it fresh on purpose",
        )
    extra = [k for k in mine if k != wanted]
    if extra:
        raise EmbeddingError(
            "UNEXPECTED_KEY",
            f"state dict has keys the table does not know: {extra}",
            value=extra,
            fix="map the checkpoint's keys to this table explicitly before loading",
        )
    return tensors[wanted]


def _check_hash(expected: str | None, found: str | None) -> None:
    if expected is not None and found != expected:
        raise EmbeddingError(
            "ADDRESS_HASH_MISMATCH",
            f"checkpoint was saved for tokenizer {found!r}, the table is bound to {expected!r}",
            value=found,
            fix="load the checkpoint with the tokenizer it was trained with",
        )


def _admit(saved: torch.Tensor, spec: TableSpec, key: str) -> torch.Tensor:
    """Finite check, then an admitted cast to the table's dtype (nothing else changes)."""
    if not is_safe_cast(saved.dtype, spec.dtype):
        raise EmbeddingError(
            "UNSAFE_CAST",
            f"{key!r} is {saved.dtype}; casting it to {spec.dtype} would lose information",
            value=(saved.dtype, spec.dtype),
            fix=f"declare the table as {saved.dtype} (or wider), or convert the checkpoint "
            "explicitly and record the conversion",
        )
    check_finite(saved, what=repr(key))
    return saved.detach().to(dtype=spec.dtype, copy=True)


def _evidence(state: str, weight: torch.Tensor, **extra: object) -> dict[str, object]:
    return {
        "state": state,
        "shape": list(weight.shape),
        "dtype": str(weight.dtype).removeprefix("torch."),
        "sha256": tensor_digest(weight),
        **extra,
    }


def materialize_fresh(spec: TableSpec) -> Materialized:
    """All rows from ``spec.initializer`` with a ``torch.Generator`` seeded by ``spec.seed``."""
    gen = torch.Generator().manual_seed(spec.seed)
    weight = torch.empty(spec.shape, dtype=spec.dtype)
    initialize_(weight, spec.initializer, padding_idx=spec.padding_idx, generator=gen)
    return Materialized(
        weight=weight,
        state="fresh",
        evidence=_evidence(
            "fresh",
            weight,
            initializer=spec.initializer.name,
            seed=spec.seed,
            padding_idx=spec.padding_idx,
            address_hash=spec.address_hash,
        ),
    )


def load_exact(
    tensors: Mapping[str, torch.Tensor],
    *,
    spec: TableSpec,
    checkpoint_hash: str | None = None,
    prefix: str = "",
) -> Materialized:
    """Copy the saved table without changing any row (admitted dtype widening only).

    ``tensors`` is the checkpoint's state dict; only keys under ``prefix`` belong
    to this table and must be exactly ``{prefix + spec.key}``. ``checkpoint_hash``
    is the tokenizer address hash recorded with the checkpoint. A PAD row is
    loaded as saved (a checkpoint may have learned a nonzero one).
    """
    key = prefix + spec.key
    saved = _require_tensor(tensors, spec.key, prefix)
    if tuple(saved.shape) != spec.shape:
        raise EmbeddingError(
            "SHAPE_MISMATCH",
            f"{key!r} is {list(saved.shape)}, the table is {list(spec.shape)}",
            value=tuple(saved.shape),
            fix="use growth for a larger vocabulary; a load never reshapes",
        )
    _check_hash(spec.address_hash, checkpoint_hash)
    weight = _admit(saved, spec, key)
    return Materialized(
        weight=weight,
        state="exact_load",
        evidence=_evidence(
            "exact_load",
            weight,
            source_key=key,
            source_dtype=str(saved.dtype).removeprefix("torch."),
            source_sha256=tensor_digest(saved),
            address_hash=checkpoint_hash,
        ),
    )


def _bits(t: torch.Tensor) -> torch.Tensor:
    """Reinterpret float storage as same-width integers, so NaN and -0.0 compare exactly."""
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.detach().contiguous().view(width)


def check_growth_prefix(old: torch.Tensor, new: torch.Tensor) -> None:
    """Refuse (GROWTH_PREFIX_CHANGED) unless ``new[:len(old)]`` equals ``old`` bit for bit."""
    rows = old.shape[0]
    if new.shape[0] < rows or new.shape[1:] != old.shape[1:] or new.dtype != old.dtype:
        raise EmbeddingError(
            "SHAPE_MISMATCH",
            f"grown table {list(new.shape)} {new.dtype} cannot hold old {list(old.shape)} "
            f"{old.dtype}",
            value=tuple(new.shape),
        )
    differs = (_bits(new[:rows]) != _bits(old)).reshape(rows, -1).any(dim=1)
    if bool(differs.any()):
        row = int(differs.nonzero()[0, 0])
        raise EmbeddingError(
            "GROWTH_PREFIX_CHANGED",
            f"row {row} of the old {rows}-row prefix changed during growth",
            value=row,
            fix="copy old rows unchanged and initialize only appended rows",
        )


def grow(
    tensors: Mapping[str, torch.Tensor],
    *,
    spec: TableSpec,
    new_rows: Initializer,
    checkpoint_hash: str | None = None,
    old_address_hash: str | None = None,
    prefix: str = "",
) -> Materialized:
    """Append rows to a saved table: old prefix copied exactly, new rows from ``new_rows``.

    ``old_address_hash`` is the hash the checkpoint must carry (the old
    tokenizer); ``spec.address_hash`` names the grown address space.
    """
    key = prefix + spec.key
    if old_address_hash is not None:
        check_address_hash(old_address_hash)
    saved = _require_tensor(tensors, spec.key, prefix)
    old_rows = saved.shape[0]
    if saved.dim() != 2 or saved.shape[1] != spec.embedding_dim or old_rows > spec.num_embeddings:
        raise EmbeddingError(
            "SHAPE_MISMATCH",
            f"{key!r} is {list(saved.shape)}; growth to {list(spec.shape)} only appends rows",
            value=tuple(saved.shape),
        )
    _check_hash(old_address_hash, checkpoint_hash)
    old = _admit(saved, spec, key)
    weight = torch.empty(spec.shape, dtype=spec.dtype)
    gen = torch.Generator().manual_seed(spec.seed)
    weight[:old_rows].copy_(old)
    if old_rows < spec.num_embeddings:
        initialize_(weight[old_rows:], new_rows, generator=gen)
    pad = spec.padding_idx
    if pad is not None and pad >= old_rows:
        weight[pad].zero_()
    check_growth_prefix(old, weight)
    return Materialized(
        weight=weight,
        state="growth",
        evidence=_evidence(
            "growth",
            weight,
            source_key=key,
            old_rows=old_rows,
            new_row_initializer=new_rows.name,
            seed=spec.seed,
            old_address_hash=checkpoint_hash,
            address_hash=spec.address_hash,
        ),
    )


def grow_optimizer_state_(
    optimizer: torch.optim.Optimizer, old: torch.nn.Parameter, new: torch.nn.Parameter
) -> None:
    """Move ``old``'s optimizer state to ``new``, giving appended rows zero moments.

    Row-shaped state (Adam's exp_avg/exp_avg_sq, Adagrad's sum...) is padded with
    zero rows; scalar state (``step``) is kept. ``old`` is replaced by ``new`` in
    its param group. Raises UsageError INVALID_ARGUMENT when ``old`` is not registered.
    """
    groups = [g for g in optimizer.param_groups if any(p is old for p in g["params"])]
    if not groups:
        raise UsageError(
            "INVALID_ARGUMENT",
            "the old table is not registered with this optimizer",
            fix="pass the Parameter the optimizer was built with",
        )
    for group in groups:
        group["params"] = [new if p is old else p for p in group["params"]]
    state = optimizer.state.pop(old, {})
    grown: dict[str, object] = {}
    for name, value in state.items():
        if isinstance(value, torch.Tensor) and value.shape == old.shape:
            pad = value.new_zeros((new.shape[0] - old.shape[0], *value.shape[1:]))
            grown[name] = torch.cat([value, pad])
        else:
            grown[name] = value
    if grown:
        optimizer.state[new] = grown
