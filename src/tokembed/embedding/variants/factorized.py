"""Factorized lookup: a narrow lexical table [V, e] then a bias-free bridge e -> d.

ALBERT-style (Lan et al. 2020): ``X = E[ids] @ P`` keeps every
position and address; only the width changes. Parameters ``V e + e d`` instead
of ``V d`` (33,816,576 vs 524,288,000 at V=128,000, d=4096, e=256), at the cost
of ``B L e d`` bridge MACs. The bridge is an ``nn.Linear(e, d, bias=False)``, so
its stored weight is P^T with shape [d, e]. State-dict keys: ``lookup.weight``,
``bridge.weight``.

Example::

    >>> m = FactorizedEmbedding(8, 3, 5, padding_idx=0)
    >>> m(torch.tensor([[1, 4, 6, 2], [1, 5, 2, 0]])).shape
    torch.Size([2, 4, 5])
"""

from __future__ import annotations

import torch
from torch import nn

from tokembed.embedding.addressed import AddressedIds
from tokembed.embedding.lookup import TokenEmbedding
from tokembed.errors import EmbeddingError

__all__ = ["FactorizedEmbedding"]


def _check_bridge(lookup: TokenEmbedding, bridge: nn.Linear) -> None:
    if bridge.in_features != lookup.embedding_dim:
        raise EmbeddingError(
            "BRIDGE_INPUT_WIDTH_MISMATCH",
            f"the bridge consumes width {bridge.in_features} but the lexical table is"
            f" {lookup.embedding_dim} wide",
            value=(bridge.in_features, lookup.embedding_dim),
            fix="build the bridge as nn.Linear(lexical_dim, hidden_dim, bias=False)",
        )


class FactorizedEmbedding(nn.Module):
    """``ids [*] -> lookup [*, e] -> bridge [*, d]``; ids checked by :class:`TokenEmbedding`.

    Raises:
        EmbeddingError BRIDGE_INPUT_WIDTH_MISMATCH: bridge input width differs from
            the lexical width (at construction and, if swapped later, at forward).
        Lookup errors from :class:`TokenEmbedding` at forward.
    """

    def __init__(
        self,
        num_embeddings: int,
        lexical_dim: int,
        hidden_dim: int,
        *,
        padding_idx: int | None = None,
        address_hash: str | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.lookup = TokenEmbedding(
            num_embeddings,
            lexical_dim,
            padding_idx=padding_idx,
            address_hash=address_hash,
            device=device,
            dtype=dtype,
        )
        self.bridge = nn.Linear(lexical_dim, hidden_dim, bias=False, device=device, dtype=dtype)

    @classmethod
    def from_parts(cls, lookup: TokenEmbedding, bridge: nn.Linear) -> FactorizedEmbedding:
        """Compose existing modules (shared, not copied) after checking their widths."""
        _check_bridge(lookup, bridge)
        module = cls.__new__(cls)
        nn.Module.__init__(module)
        module.lookup = lookup
        module.bridge = bridge
        return module

    def forward(self, ids: torch.Tensor | AddressedIds) -> torch.Tensor:
        _check_bridge(self.lookup, self.bridge)  # two int compares; catches a swapped bridge
        lexical = self.lookup(ids)  # [*, e]
        hidden: torch.Tensor = self.bridge(lexical)  # [*, d]
        return hidden
