"""Values for the rows a migration initializes, and the ledger of how each got them.

A row without an exact source (see :mod:`tokembed.migrate.rowmap`) needs a
declared initializer. :class:`NewRows` names one:

* ``constructor``: the model's own fresh-allocation rule, an
  :class:`~tokembed.embedding.init.Initializer` (HF causal LMs: ``normal`` with
  ``std=config.initializer_range``), drawn from a seeded generator;
* ``zeros``: not neutral at the output (a zero row's logit is 0, so ``exp(0) = 1``
  joins the softmax denominator, which dominates when old logits are negative);
* ``mean``: the mean old row; for M such output rows the added softmax mass
  satisfies ``A <= M Z / V0`` by Jensen's inequality, so KL(P0 || P1) <= log(1 + M/V0)
  (Hewitt, "Initializing new word embeddings for pretrained language models", 2021);
* ``mean_cov``: mean plus a draw from N(0, 1e-9 * covariance), the rule of
  ``transformers``' ``resize_token_embeddings(mean_resizing=True)`` (float32 mean
  and covariance, positive-definiteness checked, plain mean otherwise); the noise
  weakens the bound above;
* ``decomposition``: the mean of the old rows that the new token's bytes (a
  special token: its spelling) encode to under the old tokenizer.

Output biases get their own rule (:func:`bias_rows`): ``mean`` (HF's normal with
1e-9 std), ``zeros``, or ``prior``: one declared value, e.g. from
:func:`bias_for_mass` so that new tokens start with a chosen share of probability.

Every initialized row gets an :class:`InitRecord`; ``exact_copy`` is never a
valid initializer name, so an approximation cannot be filed as a preserved row.

Example::

    >>> rows = init_rows(old_table, row_map, NewRows(name="mean"))  # doctest: +SKIP

Raises EmbeddingError UNKNOWN_INITIALIZER (unknown name), CheckpointError
APPROXIMATE_AS_EXACT (a record claiming an exact copy), UsageError
INVALID_ARGUMENT (a decomposition that cannot be spelled).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from tokembed.embedding.init import (
    Initializer,
    initialize_,
    initializer_statistics,
    require_initializer,
)
from tokembed.errors import CheckpointError, EmbeddingError, TokenizerError, UsageError
from tokembed.migrate.rowmap import RowMap

if TYPE_CHECKING:
    from tokembed.tokenizer import Tokenizer

__all__ = [
    "BIAS_RULES",
    "NEW_ROW_INITIALIZERS",
    "InitRecord",
    "NewRows",
    "bias_for_mass",
    "bias_rows",
    "decompositions",
    "init_records",
    "init_rows",
]

NEW_ROW_INITIALIZERS: tuple[str, ...] = (
    "constructor",
    "zeros",
    "mean",
    "mean_cov",
    "decomposition",
)
BIAS_RULES: tuple[str, ...] = ("mean", "zeros", "prior")
# transformers scales the old covariance by this before sampling (modeling_utils,
# _init_added_embeddings_weights_with_mean): new rows sit within ~3e-5 std of the mean.
_HF_COV_SCALE = 1e-9
# Bytes of the float64 chunk behind each partial sum of the mean.
_MEAN_CHUNK_BYTES = 16 << 20


@dataclass(frozen=True, kw_only=True)
class NewRows:
    """A named initializer for new rows; ``random`` is the constructor rule, ``seed`` its draw."""

    name: str = "mean"
    random: Initializer | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        require_initializer(
            self.name,
            NEW_ROW_INITIALIZERS,
            kind="new-row initializer",
            note=" (exact copies are row-map edges)",
        )
        if self.name == "constructor" and self.random is None:
            raise UsageError(
                "INVALID_ARGUMENT",
                "the constructor initializer needs the model's rule",
                fix="pass random=Initializer(name='normal', std=config.initializer_range)",
            )


@dataclass(frozen=True, kw_only=True)
class InitRecord:
    """How one new row got its values: initializer name, its old sources, parameters."""

    row: int
    initializer: str
    sources: tuple[int, ...] = ()
    params: Mapping[str, object] | None = None

    def __post_init__(self) -> None:
        if self.initializer == "exact_copy":
            raise CheckpointError(
                "APPROXIMATE_AS_EXACT",
                f"row {self.row} is an initialized row recorded as an exact copy",
                value=(self.row, self.initializer),
                fix="exact copies live in the row map; initialized rows name their initializer",
            )
        if self.initializer not in NEW_ROW_INITIALIZERS + tuple(f"bias_{r}" for r in BIAS_RULES):
            raise EmbeddingError(
                "UNKNOWN_INITIALIZER",
                f"row {self.row} names initializer {self.initializer!r}, which is not known",
                value=(self.row, self.initializer),
                fix=f"use one of {', '.join(NEW_ROW_INITIALIZERS)}",
            )

    def to_json(self) -> dict[str, object]:
        return {
            "row": self.row,
            "initializer": self.initializer,
            "sources": list(self.sources),
            **({"params": dict(self.params)} if self.params else {}),
        }


def decompositions(
    old: Tokenizer, new: Tokenizer, new_ids: Sequence[int]
) -> dict[int, tuple[int, ...]]:
    """For each new id: the old ids its bytes (a special: its spelling) encode to under ``old``.

    Text that is valid UTF-8 goes through the old tokenizer's full path
    (pre-tokenizer included), so the sources are what the old model saw.

    Raises:
        UsageError INVALID_ARGUMENT: a new id is not defined by ``new``, or ``old``
            cannot spell its bytes.
    """
    from tokembed.tokenizer.encode import encode_chunk_reference

    names = {sid: name for name, sid in new.tables.specials.items()}
    out: dict[int, tuple[int, ...]] = {}
    for v in new_ids:
        data = new.tables.pieces.get(v)
        if data is None and v in names:
            data = names[v].encode("utf-8")
        try:
            if data is None:
                raise ValueError("undefined")
            try:
                ids = old.encode_ordinary(data.decode("utf-8"))
            except UnicodeDecodeError:
                if any(old.tables.byte_ids[b] is None for b in data):
                    raise ValueError("missing byte") from None
                ids = encode_chunk_reference(old.tables, data)
        except (ValueError, TokenizerError) as error:
            raise UsageError(
                "INVALID_ARGUMENT",
                f"new id {v} cannot be decomposed under the old tokenizer ({error})",
                value=v,
                fix="initialize that row with mean or constructor instead",
            ) from error
        out[v] = tuple(ids)
    return out


def _mean64(old: torch.Tensor) -> torch.Tensor:
    """Mean row accumulated in float64 chunk by chunk (a float64 copy of the whole table
    would double the peak memory of a large migration)."""
    rows = max(1, _MEAN_CHUNK_BYTES // (8 * max(1, old.shape[1])))
    total = torch.zeros(old.shape[1], dtype=torch.float64)
    for chunk in old.detach().split(rows):
        # ones @ chunk: a BLAS matrix-vector product, far faster than a dim-0 reduction.
        total += (torch.ones(1, chunk.shape[0], dtype=torch.float64) @ chunk.double())[0]
    return total / old.shape[0]


def _hf_mean_cov(old: torch.Tensor, count: int, generator: torch.Generator) -> torch.Tensor:
    """transformers' mean/covariance draw, with our generator instead of the global one."""
    x = old.detach().to(torch.float32)
    mean = torch.mean(x, dim=0)  # [D]
    centered = x - mean
    cov = centered.T @ centered / x.shape[0]  # [D, D]
    scale_tril, info = torch.linalg.cholesky_ex(_HF_COV_SCALE * cov)
    if int(info) != 0:  # not positive definite (e.g. V0 <= D): HF falls back to the mean
        return mean.expand(count, -1).to(old.dtype)
    eps = torch.empty(count, x.shape[1], dtype=torch.float32).normal_(generator=generator)
    # MultivariateNormal.rsample: loc + scale_tril @ eps, batched as a matrix-vector product.
    draw = mean + torch.matmul(scale_tril, eps.unsqueeze(-1)).squeeze(-1)
    return draw.to(old.dtype)


def init_rows(
    old: torch.Tensor,
    rows: RowMap,
    init: NewRows,
    *,
    sources: Mapping[int, Sequence[int]] | None = None,
) -> torch.Tensor:
    """Values [M, D] for ``rows.new_row_ids`` of a table whose old version is ``old`` [V0, D].

    ``sources`` (for ``decomposition``) maps each new id to old ids
    (:func:`decompositions`). Means are taken over all V0 old rows, as
    transformers does, accumulated in float64 (float32 for ``mean_cov``, its rule).
    Values are computed before the caller allocates the new table, so a large
    migration peaks at one extra table.
    """
    new_ids = rows.new_row_ids
    count, width = len(new_ids), old.shape[1]
    gen = torch.Generator().manual_seed(init.seed)
    if init.name == "zeros" or count == 0:
        return old.new_zeros(count, width)
    if init.name == "constructor":
        assert init.random is not None  # checked in NewRows
        return initialize_(old.new_empty(count, width), init.random, generator=gen)
    if init.name == "mean":
        return _mean64(old).to(old.dtype).expand(count, -1).clone()
    if init.name == "mean_cov":
        return _hf_mean_cov(old, count, gen)
    if sources is None or any(v not in sources or not sources[v] for v in new_ids):
        missing = next((v for v in new_ids if not sources or not sources.get(v)), None)
        raise UsageError(
            "INVALID_ARGUMENT",
            f"decomposition needs old source ids for every new row (row {missing} has none)",
            value=missing,
            fix="pass sources=decompositions(old_tok, new_tok, row_map.new_row_ids)",
        )
    out = old.new_empty(count, width)
    for k, v in enumerate(new_ids):
        idx = torch.tensor(list(sources[v]), dtype=torch.int64)
        out[k] = old.detach()[idx].to(torch.float64).mean(dim=0).to(old.dtype)
    return out


def bias_rows(
    old: torch.Tensor, rows: RowMap, rule: str = "mean", *, value: float = 0.0, seed: int = 0
) -> torch.Tensor:
    """Values [M] for the new entries of an output bias whose old version is ``old`` [V0].

    ``mean`` follows transformers (normal with the old mean and 1e-9 of the old std),
    ``prior`` writes ``value`` (see :func:`bias_for_mass`).

    Raises:
        EmbeddingError UNKNOWN_INITIALIZER: ``rule`` not in BIAS_RULES.
        UsageError INVALID_ARGUMENT: ``value`` is NaN, infinite or beyond the bias's dtype.
    """
    count = len(rows.new_row_ids)
    require_initializer(rule, BIAS_RULES, kind="bias rule")
    if rule == "zeros":
        return old.new_zeros(count)
    if rule == "prior":
        limit = torch.finfo(old.dtype).max if old.dtype.is_floating_point else math.inf
        if not math.isfinite(value) or abs(value) > limit:
            raise UsageError(
                "INVALID_ARGUMENT",
                f"bias value {value!r} is not a finite {str(old.dtype).removeprefix('torch.')}: "
                "every logit it touches would be NaN or infinite",
                value=value,
                fix=f"give bias_value a finite number of magnitude at most {limit:.3g}",
            )
        return old.new_full((count,), value)
    gen = torch.Generator().manual_seed(seed)
    mean = float(torch.mean(old.detach(), dim=0, dtype=torch.float32))
    std = float(torch.std(old.detach().to(torch.float32)))
    return old.new_empty(count).normal_(mean, _HF_COV_SCALE * std, generator=gen)


def bias_for_mass(target: float, old_logits: torch.Tensor, new_logits: torch.Tensor) -> float:
    """One bias b for every new row so new tokens get ``target`` of the probability, on average.

    ``old_logits`` [N, V0] and ``new_logits`` [N, M] (without bias) are measured on
    real contexts. Per context, ``q = A e^b / (Z + A e^b)`` gives
    ``b = log(q / (1 - q)) + log Z - log A``; the mean over contexts is returned.
    """
    if not 0 < target < 1:
        raise UsageError(
            "INVALID_ARGUMENT", f"target mass must lie in (0, 1), got {target}", value=target
        )
    log_z = torch.logsumexp(old_logits.to(torch.float64), dim=-1)
    log_a = torch.logsumexp(new_logits.to(torch.float64), dim=-1)
    return float((math.log(target / (1 - target)) + log_z - log_a).mean())


def init_records(
    rows: RowMap,
    init: NewRows,
    *,
    sources: Mapping[int, Sequence[int]] | None = None,
    embedding_dim: int | None = None,
) -> list[InitRecord]:
    """One :class:`InitRecord` per new row of ``rows`` for ``init``.

    For ``constructor`` with ``embedding_dim`` the record carries the expected
    squared row norm of the rule (:func:`~tokembed.embedding.init.initializer_statistics`),
    so a fresh row can be compared with the trained rows it joins.
    """
    params: dict[str, object] = {"seed": init.seed}
    if init.random is not None and init.name == "constructor":
        params.update(random=init.random.name, std=init.random.sigma)
        if embedding_dim is not None:
            led = initializer_statistics(
                init.random, num_embeddings=rows.new_rows, embedding_dim=embedding_dim
            )
            params["expected_sq_row_norm"] = led.sq_row_norm
    if init.name == "mean_cov":
        params["covariance_scale"] = _HF_COV_SCALE
    return [
        InitRecord(
            row=v,
            initializer=init.name,
            sources=tuple(sources.get(v, ())) if sources and init.name == "decomposition" else (),
            params=params,
        )
        for v in rows.new_row_ids
    ]
