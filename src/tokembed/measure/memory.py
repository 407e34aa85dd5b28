"""Memory calculators: parameters and bytes of a model's vocabulary tables (torch-free).

The one place where table sizes are computed: ``tokembed memory`` and the HTML
report (``tokembed.measure.report``) both use it, with V and the width read from
the model's own ``config.json`` (:func:`load_table_config`). Importing this module
does not import torch.

Every figure is a logical payload (element count times element size); it
excludes allocator, workspace and collective-buffer overhead, which depend on
the runtime. GiB is 2^30 bytes.

* :func:`table_parameters`: input/output tables, tied or not, direct or
  factorized (ALBERT-style lexical width D with bridges to the hidden width H),
  output bias;
* :func:`training_state_bytes`: weights, optional master copy, Adam moments,
  gradient;
* :func:`memory_report`: the per-rank share under tensor parallelism
  (ceil(V/tp) rows per rank, no vocabulary padding) for ``tokembed memory``,
  from numbers or an HF ``config.json``.

Payloads and MACs (one-hot vs gather, dense vs sparse gradients, bridges,
projectors) live in :mod:`tokembed.measure.payloads`.

Example::

    >>> p = table_parameters(TableConfig(vocab_size=128_256, hidden_size=4_096, tied=False))
    >>> p.total, round(p.total / 8e9, 3)
    (1050673152, 0.131)

Raises :class:`~tokembed.errors.EmbeddingError` INVALID_CONFIG for a config
without the needed fields, :class:`~tokembed.errors.UsageError` for bad
arguments (FILE_NOT_FOUND, INVALID_ARGUMENT).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from tokembed.artifacts.config import ModelConfig, model_config_from_dict, read_model_config
from tokembed.errors import EmbeddingError, UsageError, require_choice

__all__ = [
    "DTYPE_BYTES",
    "GIB",
    "KIB",
    "MIB",
    "MemoryReport",
    "ParameterCount",
    "TableConfig",
    "TrainingState",
    "check_positive",
    "dtype_bytes",
    "format_memory_report",
    "load_table_config",
    "memory_report",
    "rows_per_rank",
    "table_config",
    "table_parameters",
    "training_state_bytes",
]

KIB, MIB, GIB = 2**10, 2**20, 2**30

DTYPE_BYTES: dict[str, int] = {
    "fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int64": 8, "int32": 4, "int8": 1,
}  # fmt: skip
_ALIASES = {"float64": "fp64", "float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def _canonical(dtype: str) -> str:
    name = _ALIASES.get(dtype, dtype)
    # An alias names a known dtype, so a refused ``name`` is ``dtype`` as given.
    require_choice(
        name, DTYPE_BYTES, "dtype", fix=f"use one of {', '.join([*DTYPE_BYTES, *_ALIASES])}"
    )
    return name


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of a dtype name (``"bf16"``, ``"float32"``, ``"int64"``...)."""
    return DTYPE_BYTES[_canonical(dtype)]


def check_positive(**values: int | None) -> None:
    """Refuse (INVALID_CONFIG) any value that is not a positive int (None is skipped)."""
    for name, v in values.items():
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise EmbeddingError(
                "INVALID_CONFIG", f"{name} must be a positive integer, got {v!r}", value=v
            )


@dataclass(frozen=True, kw_only=True)
class TableConfig:
    """Vocabulary-table architecture: V, hidden width H, tying, factorization, bias.

    ``embedding_dim`` is the lexical width D of a factorized table (None: D = H,
    a direct table). When factorized and ``tied``, the [V, D] lexical table is
    the classifier too, reached through an output bridge [H, D]; with
    ``shared_bridge`` that bridge is the input bridge transposed.
    """

    vocab_size: int
    hidden_size: int
    tied: bool
    embedding_dim: int | None = None
    shared_bridge: bool = False
    output_bias: bool = False

    def __post_init__(self) -> None:
        check_positive(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            embedding_dim=self.embedding_dim,
        )
        if self.shared_bridge and not (self.factorized and self.tied):
            raise EmbeddingError(
                "INVALID_CONFIG",
                "shared_bridge needs a factorized, tied table",
                fix="set embedding_dim and tied=True, or drop shared_bridge",
            )

    @property
    def factorized(self) -> bool:
        return self.embedding_dim is not None and self.embedding_dim != self.hidden_size

    @property
    def lexical_width(self) -> int:
        return self.embedding_dim if self.embedding_dim is not None else self.hidden_size


def table_config(model: ModelConfig) -> TableConfig:
    """The table architecture an HF config describes (ALBERT's ``embedding_size`` → D).

    Raises:
        EmbeddingError(INVALID_CONFIG): the config does not state the width or the tying.
    """
    missing = [
        name
        for name, value in (("hidden_size", model.hidden_size), ("tie_word_embeddings", model.tied))
        if value is None
    ]
    if missing:
        raise EmbeddingError(
            "INVALID_CONFIG",
            f"{model.path or 'config'} lacks {', '.join(missing)}",
            value=missing,
            fix="pass a model config.json that declares vocab_size, hidden_size and "
            "tie_word_embeddings",
        )
    assert model.hidden_size is not None  # checked just above
    assert model.tied is not None
    width = model.embedding_size
    return TableConfig(
        vocab_size=model.vocab_size,
        hidden_size=model.hidden_size,
        tied=model.tied,
        embedding_dim=width if width != model.hidden_size else None,
    )


def load_table_config(source: str | Path | Mapping[str, object]) -> TableConfig:
    """Read vocab_size, the width (hidden_size, n_embd or d_model), tie_word_embeddings and
    ALBERT's embedding_size from an HF ``config.json`` (or its parsed dict).

    A multimodal config without these at the top is read from its ``text_config``.

    Raises:
        UsageError(FILE_NOT_FOUND); EmbeddingError(INVALID_CONFIG): unreadable, or a
        field is missing or invalid.
    """
    if isinstance(source, Mapping):
        return table_config(model_config_from_dict(source))
    return table_config(read_model_config(source))


@dataclass(frozen=True, kw_only=True)
class ParameterCount:
    """Unique trainable parameters of the vocabulary boundary (biases of bridges excluded)."""

    input_table: int  # V * D
    input_bridge: int  # D * H when factorized
    output_table: int  # V * H (or V * D untied lexical); 0 when tied
    output_bridge: int  # H * D for a factorized tied classifier without a shared bridge
    output_bias: int  # V when the head has a bias
    total: int


def table_parameters(cfg: TableConfig) -> ParameterCount:
    """Unique parameters of the vocabulary boundary. At V=128,000, H=4096, D=256 the five
    architectures (untied, tied, factorized untied, factorized tied, factorized tied with a
    shared bridge) give 1,048,576,000 / 524,288,000 / 558,104,576 / 34,865,152 / 33,816,576.
    """
    v, h, d = cfg.vocab_size, cfg.hidden_size, cfg.lexical_width
    input_table = v * d
    input_bridge = d * h if cfg.factorized else 0
    output_table = 0 if cfg.tied else v * h
    output_bridge = d * h if cfg.factorized and cfg.tied and not cfg.shared_bridge else 0
    bias = v if cfg.output_bias else 0
    return ParameterCount(
        input_table=input_table,
        input_bridge=input_bridge,
        output_table=output_table,
        output_bridge=output_bridge,
        output_bias=bias,
        total=input_table + input_bridge + output_table + output_bridge + bias,
    )


def rows_per_rank(vocab_size: int, tp: int) -> int:
    """Rows of the largest vocabulary shard: ceil(V / tp) (contiguous chunks, no padding)."""
    check_positive(vocab_size=vocab_size)
    if tp < 1:
        raise UsageError("INVALID_ARGUMENT", f"tp must be >= 1, got {tp}", value=tp)
    return math.ceil(vocab_size / tp)


@dataclass(frozen=True, kw_only=True)
class TrainingState:
    """Bytes held for one set of parameters during mixed-precision Adam training."""

    weights: int
    master: int
    first_moment: int
    second_moment: int
    gradient: int
    total: int


def training_state_bytes(
    params: int,
    *,
    weight_dtype: str = "bf16",
    master_dtype: str | None = "fp32",
    moment_dtype: str = "fp32",
    grad_dtype: str | None = None,
    dense_gradient: bool = True,
) -> TrainingState:
    """Mixed-precision Adam: bf16 weight + fp32 master + two fp32 moments = 14 bytes/param,
    plus a dense gradient in ``grad_dtype`` (default: the weight dtype). No master copy
    is counted when ``master_dtype`` is None or the weights already are that dtype.
    """
    w = dtype_bytes(weight_dtype)
    same = master_dtype is not None and _canonical(master_dtype) == _canonical(weight_dtype)
    master = 0 if master_dtype is None or same else dtype_bytes(master_dtype)
    moments = dtype_bytes(moment_dtype)
    grad = dtype_bytes(grad_dtype or weight_dtype) if dense_gradient else 0
    parts = [params * w, params * master, params * moments, params * moments, params * grad]
    return TrainingState(
        weights=parts[0],
        master=parts[1],
        first_moment=parts[2],
        second_moment=parts[3],
        gradient=parts[4],
        total=sum(parts),
    )


@dataclass(frozen=True, kw_only=True)
class MemoryReport:
    """What ``tokembed memory`` prints: whole-model and per-rank figures."""

    config: TableConfig
    tp: int
    dtype: str
    parameters: ParameterCount
    weight_bytes: int
    rows_per_rank: int
    input_params_per_rank: int  # ceil(V/tp) rows of the input table
    output_params_per_rank: int  # the same rows of an untied head (0 when tied)
    params_per_rank: int
    weight_bytes_per_rank: int
    training: TrainingState  # per rank, Adam + fp32 master + dense gradient

    def to_dict(self) -> dict[str, object]:
        out = asdict(self)
        out["config"]["factorized"] = self.config.factorized
        return out


def memory_report(cfg: TableConfig, *, tp: int = 1, dtype: str = "bf16") -> MemoryReport:
    """Whole-table and per-rank figures; under tp > 1 both tables are row-sharded.

    Per-rank figures count table rows only: bridges are small and replicated,
    and the output bias is left out.
    """
    params = table_parameters(cfg)
    b = dtype_bytes(dtype)
    rows = rows_per_rank(cfg.vocab_size, tp)
    input_rows = rows * cfg.lexical_width
    output_rows = 0 if cfg.tied else rows * cfg.hidden_size
    per_rank = input_rows + output_rows
    return MemoryReport(
        config=cfg,
        tp=tp,
        dtype=dtype,
        parameters=params,
        weight_bytes=params.total * b,
        rows_per_rank=rows,
        input_params_per_rank=input_rows,
        output_params_per_rank=output_rows,
        params_per_rank=per_rank,
        weight_bytes_per_rank=per_rank * b,
        training=training_state_bytes(per_rank, weight_dtype=dtype),
    )


def _gib(n: int) -> str:
    """Bytes in GiB (2^30), or MiB below one GiB."""
    return f"{n / GIB:.3f} GiB" if n >= GIB else f"{n / MIB:.1f} MiB"


def format_memory_report(report: MemoryReport) -> str:
    """Human-readable lines of a :class:`MemoryReport`."""
    cfg, p = report.config, report.parameters
    kind = "tied" if cfg.tied else "untied"
    if cfg.factorized:
        kind += f", factorized D={cfg.lexical_width}"
    lines = [
        f"vocab_size V={cfg.vocab_size:,}  hidden_size H={cfg.hidden_size:,}  ({kind})",
        f"input table      {p.input_table:>16,} params",
        f"output table     {p.output_table:>16,} params"
        + ("  (tied: shares the input table)" if cfg.tied else ""),
    ]
    if p.input_bridge or p.output_bridge:
        lines.append(f"bridges          {p.input_bridge + p.output_bridge:>16,} params")
    if p.output_bias:
        lines.append(f"output bias      {p.output_bias:>16,} params")
    lines += [
        f"total            {p.total:>16,} params = {_gib(report.weight_bytes)} in {report.dtype}",
        f"per rank (tp={report.tp}): {report.rows_per_rank:,} rows; input "
        f"{report.input_params_per_rank:,} + output {report.output_params_per_rank:,} params "
        f"= {_gib(report.weight_bytes_per_rank)}",
        f"training state per rank (weights {report.dtype} + fp32 master + Adam m, v + "
        f"{report.dtype} grad): {_gib(report.training.total)}",
    ]
    return "\n".join(lines)
