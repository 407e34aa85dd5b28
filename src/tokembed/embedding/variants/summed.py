"""BERT-style initial state: token + token-type + position rows, then LayerNorm and dropout.

``X0 = E_tok[I] + E_type[T] + E_pos[P]`` (BERT, Devlin et al. 2019): three address spaces whose
rows share the hidden width and are superposed by addition. Each table checks its
own ids against its own row count, and errors name the role ("position_ids[0, 7]
= 512 ..."). Submodule names follow Hugging Face's ``BertEmbeddings``
(``word_embeddings``, ``token_type_embeddings``, ``position_embeddings``,
``LayerNorm``), so a BERT checkpoint's embedding block loads key for key; the
position-id buffer is not persisted (positions default to 0..L-1).

Example::

    >>> m = SummedEmbedding(30, 8, type_count=2, max_positions=16).eval()
    >>> m(torch.tensor([[5, 6, 7]])).shape
    torch.Size([1, 3, 8])
"""

from __future__ import annotations

import torch
from torch import nn

from tokembed.embedding.addressed import AddressedIds
from tokembed.embedding.lookup import TokenEmbedding
from tokembed.errors import EmbeddingError

__all__ = ["SummedEmbedding"]


class SummedEmbedding(nn.Module):
    """Token, type and learned-position lookups summed, normalized, dropped out.

    ``forward(input_ids, *, token_type_ids=None, position_ids=None) -> [B, L, H]``;
    type ids default to 0, positions to ``arange(L)``.

    Raises:
        EmbeddingError SHAPE_MISMATCH: type/position ids do not have the ids' shape.
        Lookup errors from each :class:`TokenEmbedding` (ID_OUT_OF_RANGE names the role).
    """

    def __init__(
        self,
        num_embeddings: int,
        hidden_dim: int,
        *,
        type_count: int = 2,
        max_positions: int = 512,
        padding_idx: int | None = None,
        address_hash: str | None = None,
        layer_norm_eps: float = 1e-12,  # BERT's value
        dropout: float = 0.1,  # BERT's hidden_dropout_prob
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.word_embeddings = TokenEmbedding(
            num_embeddings,
            hidden_dim,
            padding_idx=padding_idx,
            address_hash=address_hash,
            device=device,
            dtype=dtype,
        )
        self.token_type_embeddings = TokenEmbedding(
            type_count, hidden_dim, role="token_type_ids", device=device, dtype=dtype
        )
        self.position_embeddings = TokenEmbedding(
            max_positions, hidden_dim, role="position_ids", device=device, dtype=dtype
        )
        self.LayerNorm = nn.LayerNorm(hidden_dim, eps=layer_norm_eps, device=device, dtype=dtype)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        input_ids: torch.Tensor | AddressedIds,
        *,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        ids = input_ids.ids if isinstance(input_ids, AddressedIds) else input_ids
        shape = tuple(ids.shape)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(ids)
        if position_ids is None:
            # [L] broadcast over the batch: same rows for every sequence.
            position_ids = torch.arange(ids.shape[-1], device=ids.device).expand_as(ids)
        for role, other in (("token_type_ids", token_type_ids), ("position_ids", position_ids)):
            if tuple(other.shape) != shape:
                raise EmbeddingError(
                    "SHAPE_MISMATCH",
                    f"{role} has shape {tuple(other.shape)} but input_ids has {shape}",
                    value=tuple(other.shape),
                    fix=f"give {role} one entry per input position",
                )
        x = (
            self.word_embeddings(input_ids)
            + self.token_type_embeddings(token_type_ids)
            + self.position_embeddings(position_ids)
        )  # [B, L, H]
        out: torch.Tensor = self.dropout(self.LayerNorm(x))
        return out
