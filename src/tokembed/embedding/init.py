"""Initialization statistics: what a named initializer puts into a fresh [V, d] table.

Before training, a row is an initialized parameter vector, not a meaning. For independent coordinates with mean mu and variance sigma^2,
``E||E_i||^2 = d (sigma^2 + mu^2)``, and a scalar multiplier s turns the
coordinate variance into ``s^2 sigma^2``. ``s = sqrt(d)`` gives unit variance
only when ``sigma^2 = 1/d``; for PyTorch's Xavier uniform on a rectangular
[V, d] table, ``sigma^2 = 2 g^2 / (V + d)`` (fan_in = d, fan_out = V), so at
V=32,000, d=512 the scaled variance is 0.0315, not 1.

This module computes those figures from formulas (:func:`initializer_statistics`),
measures the same figures on a sampled table (:func:`sample_statistics`) and fills
a table in place with the named initializer (:func:`initialize_`). It does not
decide *whether* a model should scale its lookup; that is the architecture's
choice, recorded by the observed numerical state (:mod:`tokembed.embedding.guards.numerics`).

Example::

    >>> stats = initializer_statistics(Initializer(name="xavier_uniform"),
    ...                          num_embeddings=32_000, embedding_dim=512, scale=512**0.5)
    >>> round(stats.scaled_variance, 4), round(stats.scaled_sq_row_norm, 2)
    (0.0315, 16.13)

Raises :class:`~tokembed.errors.EmbeddingError` ``UNKNOWN_INITIALIZER`` for an
unknown name, :class:`~tokembed.errors.UsageError` ``INVALID_ARGUMENT`` for a
negative std or empty truncation interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tokembed.errors import EmbeddingError, UsageError

if TYPE_CHECKING:
    import torch

__all__ = [
    "INITIALIZERS",
    "InitStatistics",
    "Initializer",
    "initialize_",
    "initializer_statistics",
    "matching_scale",
    "new_table",
    "require_initializer",
    "sample_statistics",
]

# The named initializers whose statistics are derived exactly.
INITIALIZERS: tuple[str, ...] = (
    "constructor_default",  # nn.Embedding.reset_parameters: N(0, 1), PAD row zeroed
    "normal",  # N(mean, std^2); GPT-2 lineage uses std=0.02
    "truncated_normal",  # N(mean, std^2) conditioned on [a, b]; BERT: std=0.02, |x| <= 2 std
    "xavier_uniform",  # U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out))
    "zeros",
)


def require_initializer(
    name: str, known: Sequence[str] = INITIALIZERS, *, kind: str = "initializer", note: str = ""
) -> None:
    """Refuse an initializer ``name`` that is not one of ``known`` (a table's, new rows', a bias's).

    ``kind`` names what was asked for in the message; ``note`` follows the list of known
    names in the fix.

    Raises:
        EmbeddingError UNKNOWN_INITIALIZER: ``name`` is not in ``known``.
    """
    if name not in known:
        raise EmbeddingError(
            "UNKNOWN_INITIALIZER",
            f"{kind} {name!r} is not known",
            value=name,
            fix=f"use one of {', '.join(known)}{note}",
        )


@dataclass(frozen=True, kw_only=True)
class Initializer:
    """A named initializer and its parameters.

    ``std`` defaults to 1 for ``constructor_default`` and 0.02 for ``normal`` and
    ``truncated_normal``. For ``truncated_normal``, ``a``/``b`` are absolute bounds
    (the :func:`torch.nn.init.trunc_normal_` convention); when omitted they are
    ``mean -/+ 2 std`` (BERT's convention, not torch's absolute default of +-2).
    """

    name: str
    std: float | None = None
    mean: float = 0.0
    gain: float = 1.0
    a: float | None = None
    b: float | None = None

    def __post_init__(self) -> None:
        require_initializer(self.name)
        if self.std is not None and not self.std >= 0:
            raise UsageError(
                "INVALID_ARGUMENT", f"std must be >= 0, got {self.std}", value=self.std
            )
        if self.name == "truncated_normal" and not self.bounds[0] < self.bounds[1]:
            raise UsageError(
                "INVALID_ARGUMENT",
                f"truncation interval {self.bounds} is empty",
                value=self.bounds,
                fix="pass a < b",
            )

    @property
    def sigma(self) -> float:
        """The std of the (untruncated) normal, or 0 for zeros / N/A for Xavier."""
        if self.std is not None:
            return self.std
        return 1.0 if self.name == "constructor_default" else 0.02

    @property
    def bounds(self) -> tuple[float, float]:
        """Absolute truncation bounds of ``truncated_normal``."""
        a = self.mean - 2 * self.sigma if self.a is None else self.a
        b = self.mean + 2 * self.sigma if self.b is None else self.b
        return a, b


@dataclass(frozen=True, kw_only=True)
class InitStatistics:
    """Per-coordinate and per-row figures of a table, before and after an input scale."""

    initializer: str
    num_embeddings: int
    embedding_dim: int
    scale: float
    coordinate_mean: float
    coordinate_variance: float
    sq_row_norm: float  # E||E_i||^2 = d (var + mean^2)
    scaled_variance: float  # s^2 var
    scaled_sq_row_norm: float  # s^2 d (var + mean^2)
    scaled_rms: float  # sqrt(s^2 (var + mean^2)): RMS of one scaled coordinate


def _phi(x: float) -> float:
    return math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def _cdf(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def _moments(init: Initializer, num_embeddings: int, embedding_dim: int) -> tuple[float, float]:
    """(mean, variance) of one coordinate."""
    if init.name == "zeros":
        return 0.0, 0.0
    if init.name == "xavier_uniform":
        # torch 2-D fan convention on a [V, d] tensor: fan_in = size(1), fan_out = size(0).
        bound = init.gain * math.sqrt(6.0 / (embedding_dim + num_embeddings))
        return 0.0, bound * bound / 3.0
    sigma = init.sigma
    if init.name == "truncated_normal" and sigma > 0:
        lo, hi = ((x - init.mean) / sigma for x in init.bounds)
        mass = _cdf(hi) - _cdf(lo)
        shift = (_phi(lo) - _phi(hi)) / mass
        factor = 1 + (lo * _phi(lo) - hi * _phi(hi)) / mass - shift * shift
        return init.mean + sigma * shift, sigma * sigma * factor
    return init.mean, sigma * sigma


def initializer_statistics(
    init: Initializer, *, num_embeddings: int, embedding_dim: int, scale: float = 1.0
) -> InitStatistics:
    """Exact expected figures of ``init`` on a [num_embeddings, embedding_dim] table.

    ``constructor_default`` figures describe ordinary rows; its PAD row (if any)
    is zero. Example: normal(std=0.02), d=768 -> ``sq_row_norm == 768 * 0.0004``.
    """
    if num_embeddings < 1 or embedding_dim < 1:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"table shape [{num_embeddings}, {embedding_dim}] must be positive",
            value=(num_embeddings, embedding_dim),
        )
    mean, var = _moments(init, num_embeddings, embedding_dim)
    second = var + mean * mean
    return InitStatistics(
        initializer=init.name,
        num_embeddings=num_embeddings,
        embedding_dim=embedding_dim,
        scale=scale,
        coordinate_mean=mean,
        coordinate_variance=var,
        sq_row_norm=embedding_dim * second,
        scaled_variance=scale * scale * var,
        scaled_sq_row_norm=scale * scale * embedding_dim * second,
        scaled_rms=abs(scale) * math.sqrt(second),
    )


def matching_scale(stats: InitStatistics, *, target_variance: float = 1.0) -> float:
    """The multiplier s = tau / sigma that gives scaled coordinates variance ``target_variance``.

    Raises UsageError INVALID_ARGUMENT for a zero-variance (``zeros``) table.
    """
    if stats.coordinate_variance <= 0:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"{stats.initializer} has zero coordinate variance; no scale reaches {target_variance}",
            value=stats.initializer,
        )
    return math.sqrt(target_variance / stats.coordinate_variance)


def initialize_(
    table: torch.Tensor,
    init: Initializer,
    *,
    padding_idx: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Fill a 2-D ``table`` [V, d] in place with ``init``; zero ``padding_idx`` afterwards.

    The PAD row is zeroed only when ``padding_idx`` is given: that is a
    post-init policy (the constructor's), not a property of the initializer.
    """
    import torch

    with torch.no_grad():
        if init.name == "zeros":
            table.zero_()
        elif init.name == "xavier_uniform":
            torch.nn.init.xavier_uniform_(table, gain=init.gain, generator=generator)
        elif init.name == "truncated_normal":
            a, b = init.bounds
            torch.nn.init.trunc_normal_(
                table, mean=init.mean, std=init.sigma, a=a, b=b, generator=generator
            )
        else:
            table.normal_(init.mean, init.sigma, generator=generator)
        if padding_idx is not None:
            table[padding_idx].zero_()
    return table


def new_table(
    rows: int,
    cols: int,
    *,
    init: Initializer | None = None,
    padding_idx: int | None = None,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> torch.nn.Parameter:
    """A fresh ``[rows, cols]`` Parameter filled by ``init``, its ``padding_idx`` row zeroed.

    The one place a table of tokembed is created: the single-device lookup, each
    rank's row or column shard and the sharded output head all call it, so the
    default (``constructor_default``: nn.Embedding's N(0, 1), drawn from the
    global generator exactly as ``nn.Embedding`` draws it) and the PAD post-init
    policy cannot drift apart. ``padding_idx`` is an index into these rows (a
    shard passes its local PAD row, or None when it holds none).

    Example::

        >>> new_table(4, 2, padding_idx=1)[1].tolist()
        [0.0, 0.0]
    """
    import torch

    weight = torch.nn.Parameter(torch.empty(rows, cols, dtype=dtype, device=device))
    initialize_(weight, init or Initializer(name="constructor_default"), padding_idx=padding_idx)
    return weight


def sample_statistics(
    table: torch.Tensor, *, scale: float = 1.0, name: str = "sampled"
) -> InitStatistics:
    """The same figures measured on an actual [V, d] table (float64 accumulation)."""
    import torch

    x = table.detach().to(torch.float64)
    mean = float(x.mean())
    var = float(x.var(unbiased=False))
    sq_row = float((x * x).sum(dim=1).mean())
    num_embeddings, embedding_dim = x.shape
    return InitStatistics(
        initializer=name,
        num_embeddings=num_embeddings,
        embedding_dim=embedding_dim,
        scale=scale,
        coordinate_mean=mean,
        coordinate_variance=var,
        sq_row_norm=sq_row,
        scaled_variance=scale * scale * var,
        scaled_sq_row_norm=scale * scale * sq_row,
        scaled_rms=abs(scale) * math.sqrt(sq_row / embedding_dim),
    )
