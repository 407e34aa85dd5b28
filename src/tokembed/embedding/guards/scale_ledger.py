"""The input-scale ledger: which initializer a table had, who scales its rows, and what variance follows.

A multiplier s on looked-up rows gives coordinates of variance ``s^2 sigma^2``,
where ``sigma^2`` is the variance the initializer put into the table. The
original Transformer's ``sqrt(d_model)`` makes that one only when ``sigma^2 =
1/d``, which is not a law: under GPT-2's N(0, 0.02^2) at d = 512 the scaled
variance is 0.2048, and under PyTorch's Xavier uniform on a rectangular [V, d]
table ``sigma^2 = 2 g^2 / (V + d)``, not ``1/d``. :class:`ScaleLedger` records
the initializer, the table's shape, the scale and its owner (plus any
post-initialization passes), and :meth:`ScaleLedger.check_claim` refuses a
stated variance that these do not give.

Example::

    >>> ledger = ScaleLedger(init=Initializer(name="normal", std=0.02), num_embeddings=32_000,
    ...                      embedding_dim=512, scale=512**0.5, scale_owner="Embeddings")
    >>> round(ledger.output_variance, 4)
    0.2048
    >>> ledger.check_claim(output_variance=1.0)
    Traceback (most recent call last):
    ...
    tokembed.errors.EmbeddingError: SCALED_VARIANCE_MISSTATED: ...
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

from tokembed.embedding.init import Initializer, InitStatistics, initializer_statistics
from tokembed.errors import EmbeddingError, UsageError

__all__ = ["ScaleLedger"]

# A stated variance is a number the caller computed from a closed form (2/(V+d),
# d * 0.02**2); the exact figure here goes through a square root and a square.
# Both sides carry a few float64 roundings, so 64 ulps separates a right
# formula from a wrong one (1/d against 2/(V+d) differ by a factor, not ulps).
_REL_TOL = 64 * sys.float_info.epsilon


@dataclass(frozen=True, kw_only=True)
class ScaleLedger:
    """The initializer of a [V, d] table, the scale applied to its rows and the owner of that scale.

    Attributes:
        init: the initializer that filled the table.
        num_embeddings: V (Xavier's fan_out on a [V, d] tensor).
        embedding_dim: d (Xavier's fan_in).
        scale: the multiplier applied to looked-up rows (1.0: none).
        scale_owner: who applies it (a module or the caller): exactly one owner.
        post_init: passes run after the initializer (e.g. "pad row zeroed"), recorded
            because they change the table the variance describes.

    Raises:
        UsageError INVALID_ARGUMENT: a non-positive shape or scale, or an empty owner.
    """

    init: Initializer
    num_embeddings: int
    embedding_dim: int
    scale: float = 1.0
    scale_owner: str
    post_init: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise UsageError(
                "INVALID_ARGUMENT",
                f"scale must be finite and positive, got {self.scale}",
                value=self.scale,
                fix="record 1.0 when no scale is applied",
            )
        if not self.scale_owner:
            raise UsageError(
                "INVALID_ARGUMENT",
                "a scale needs an owner (the module or caller that multiplies the rows)",
                value=self.scale_owner,
                fix="pass scale_owner='Embeddings' or the caller's name",
            )
        self.statistics()  # shape checks

    def statistics(self) -> InitStatistics:
        """Exact expected figures of the initializer on this shape, before and after the scale."""
        return initializer_statistics(
            self.init,
            num_embeddings=self.num_embeddings,
            embedding_dim=self.embedding_dim,
            scale=self.scale,
        )

    @property
    def coordinate_variance(self) -> float:
        """sigma^2: the variance of one coordinate as initialized."""
        return self.statistics().coordinate_variance

    @property
    def output_variance(self) -> float:
        """s^2 sigma^2: the variance of one coordinate of a scaled looked-up row."""
        return self.statistics().scaled_variance

    def check_claim(
        self,
        *,
        coordinate_variance: float | None = None,
        output_variance: float | None = None,
    ) -> None:
        """Refuse a stated variance that the recorded initializer, shape and scale do not give.

        Raises:
            EmbeddingError INIT_VARIANCE_MISSTATED: ``coordinate_variance`` is not
                sigma^2 (e.g. 1/d stated for a rectangular Xavier table).
            EmbeddingError SCALED_VARIANCE_MISSTATED: ``output_variance`` is not
                s^2 sigma^2 (e.g. 1 stated for sqrt(d) whatever the initializer).
        """
        stats = self.statistics()
        if coordinate_variance is not None and not _close(
            coordinate_variance, stats.coordinate_variance
        ):
            raise EmbeddingError(
                "INIT_VARIANCE_MISSTATED",
                f"{self.init.name} on a [{self.num_embeddings}, {self.embedding_dim}] table has"
                f" coordinate variance {stats.coordinate_variance:.6g}, not the stated"
                f" {coordinate_variance:.6g}",
                value=coordinate_variance,
                fix=_variance_fix(self),
            )
        if output_variance is not None and not _close(output_variance, stats.scaled_variance):
            raise EmbeddingError(
                "SCALED_VARIANCE_MISSTATED",
                f"{self.scale_owner} scales by {self.scale:.6g}, so rows drawn by {self.init.name}"
                f" (variance {stats.coordinate_variance:.6g}) have variance"
                f" {stats.scaled_variance:.6g}, not the stated {output_variance:.6g}",
                value=output_variance,
                fix="state s^2 * sigma^2 of the recorded initializer, or change the initializer"
                " or the scale so that they give the variance you need",
            )


def _close(stated: float, exact: float) -> bool:
    return math.isclose(stated, exact, rel_tol=_REL_TOL, abs_tol=0.0)


def _variance_fix(ledger: ScaleLedger) -> str:
    if ledger.init.name == "xavier_uniform":
        v, d = ledger.num_embeddings, ledger.embedding_dim
        return f"for a [V, d] table Xavier gives 2 g^2 / (V + d) = 2 g^2 / {v + d}, not 1 / d"
    return "state the initializer's own variance (std^2 for a normal, truncated moments otherwise)"
