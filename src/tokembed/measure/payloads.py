"""Payload and arithmetic calculators: one-hot vs gather, dense vs sparse gradients, MACs.

Logical payloads only (element count times element size): allocator, sort or
coalesce workspace and collective buffers come on top. Figures reproduced by
the tests: one-hot at B=8, L=2048, V=128,000, the V=128,000, d=4096, U=4096
gradient, bridge/classifier MACs and the 1024 -> 4096 media projector.

Example::

    >>> g = gradient_payload(vocab_size=128_000, embedding_dim=4_096, unique_rows=4_096)
    >>> round(g.dense_bytes / GIB, 3), g.sparse_value_bytes // MIB, g.sparse_index_bytes // KIB
    (1.953, 64, 32)

Raises :class:`~tokembed.errors.UsageError` INVALID_ARGUMENT (unknown dtype, more
touched rows than V) and :class:`~tokembed.errors.EmbeddingError` INVALID_CONFIG
(non-positive sizes).
"""

from __future__ import annotations

from dataclasses import dataclass

from tokembed.errors import UsageError
from tokembed.measure.memory import TableConfig, check_positive, dtype_bytes

__all__ = [
    "GradientPayload",
    "LookupPayload",
    "ProjectorCost",
    "classifier_macs",
    "gradient_payload",
    "lookup_payload",
    "projector_cost",
]


@dataclass(frozen=True, kw_only=True)
class LookupPayload:
    """One-hot product versus gather for a [batch, seq_len] id tensor."""

    id_entries: int
    one_hot_entries: int
    id_bytes: int
    one_hot_bytes: int  # F.one_hot's int64 result
    selector_bytes: int  # after the cast to the compute dtype
    gather_output_bytes: int  # B * L * d rows in the compute dtype (0 without d)
    entry_ratio: int  # = V


def lookup_payload(
    *,
    batch: int,
    seq_len: int,
    vocab_size: int,
    embedding_dim: int | None = None,
    id_dtype: str = "int64",
    compute_dtype: str = "fp16",
) -> LookupPayload:
    """B=8, L=2048, V=128,000 -> 128 KiB of ids versus a 15.625 GiB int64 one-hot."""
    check_positive(batch=batch, seq_len=seq_len, vocab_size=vocab_size, embedding_dim=embedding_dim)
    n = batch * seq_len
    c = dtype_bytes(compute_dtype)
    return LookupPayload(
        id_entries=n,
        one_hot_entries=n * vocab_size,
        id_bytes=n * dtype_bytes(id_dtype),
        one_hot_bytes=n * vocab_size * 8,
        selector_bytes=n * vocab_size * c,
        gather_output_bytes=n * (embedding_dim or 0) * c,
        entry_ratio=vocab_size,
    )


@dataclass(frozen=True, kw_only=True)
class GradientPayload:
    """Dense [V, d] gradient versus coalesced sparse rows."""

    dense_bytes: int
    sparse_value_bytes: int
    sparse_index_bytes: int

    @property
    def sparse_bytes(self) -> int:
        return self.sparse_value_bytes + self.sparse_index_bytes


def gradient_payload(
    *,
    vocab_size: int,
    embedding_dim: int,
    unique_rows: int,
    dtype: str = "fp32",
    index_dtype: str = "int64",
) -> GradientPayload:
    """V=128,000, d=4096, U=4096, fp32 -> 1.953 GiB dense, 64 MiB values + 32 KiB indices."""
    check_positive(vocab_size=vocab_size, embedding_dim=embedding_dim)
    if not 0 <= unique_rows <= vocab_size:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"unique_rows {unique_rows} is outside [0, {vocab_size}]",
            value=unique_rows,
        )
    b = dtype_bytes(dtype)
    return GradientPayload(
        dense_bytes=vocab_size * embedding_dim * b,
        sparse_value_bytes=unique_rows * embedding_dim * b,
        sparse_index_bytes=unique_rows * dtype_bytes(index_dtype),
    )


def classifier_macs(cfg: TableConfig, *, input_rows: int, output_rows: int) -> dict[str, int]:
    """Logical dense MACs of the vocabulary boundary (factorized bridge, output classifier).

    ``input_bridge`` = M D H, ``output_bridge`` = N H D (factorized tied head),
    ``classifier`` = N V H, or N V D for a factorized tied head.
    """
    v, h, d = cfg.vocab_size, cfg.hidden_size, cfg.lexical_width
    lexical_head = cfg.factorized and cfg.tied
    return {
        "input_bridge": input_rows * d * h if cfg.factorized else 0,
        "output_bridge": output_rows * h * d if lexical_head else 0,
        "classifier": output_rows * v * (d if lexical_head else h),
    }


@dataclass(frozen=True, kw_only=True)
class ProjectorCost:
    """Parameters, MACs and output bytes of a linear media projector d_media -> d_model."""

    parameters: int
    parameter_bytes: int
    macs: int
    projected_elements: int
    projected_bytes: int


def projector_cost(
    *, batch: int, n_media: int, d_media: int, d_model: int, dtype: str = "bf16"
) -> ProjectorCost:
    """B=1, n=576, 1024 -> 4096: 4,194,304 params (8 MiB), 2,415,919,104 MACs, 4.5 MiB out."""
    check_positive(batch=batch, n_media=n_media, d_media=d_media, d_model=d_model)
    b = dtype_bytes(dtype)
    params = d_media * d_model
    states = batch * n_media * d_model
    return ProjectorCost(
        parameters=params,
        parameter_bytes=params * b,
        macs=batch * n_media * params,
        projected_elements=states,
        projected_bytes=states * b,
    )
