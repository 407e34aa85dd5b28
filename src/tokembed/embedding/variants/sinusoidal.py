"""The original Transformer's input rows: a lookup scaled by sqrt(d_model), plus fixed sinusoids.

``dropout(E[ids] * sqrt(d_model) + PE[:L])`` (Vaswani et al. 2017, section 3.4): the content
scale is applied once, by the ``lut`` lookup, and stamped; the fixed sinusoidal
table is added once and stamped. A second scaling or positional add on the
output raises (SCALE_APPLIED_TWICE / POSITION_APPLIED_TWICE), which is how the
"applied sqrt(d_model) twice" and "positions applied twice" reproduction bugs
surface instead of silently changing the input scale. ``content(ids)`` returns the
scaled rows without positions (the Annotated Transformer's ``Embeddings`` module).
State-dict key: ``lut.weight`` as in the Annotated Transformer; the sinusoid table is
a non-persistent buffer (recomputed, not saved).

Example::

    >>> m = ScaledSinusoidalEmbedding(11, 8, dropout=0.0)
    >>> m(torch.tensor([[1, 3]])).shape
    torch.Size([1, 2, 8])
"""

from __future__ import annotations

import math

import torch
from torch import nn

from tokembed.embedding.addressed import AddressedIds
from tokembed.embedding.lookup import TokenEmbedding
from tokembed.embedding.stamps import add_positions, carry_stamp
from tokembed.errors import EmbeddingError

__all__ = ["ScaledSinusoidalEmbedding", "sinusoidal_table"]


def sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    """PE[p, 2k] = sin(p / 10000^(2k/d)), PE[p, 2k+1] = cos(same), float32 [max_len, d]."""
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # [max_len, 1]
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * -(math.log(1e4) / d_model))
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(position * div)
    pe[:, 1::2] = torch.cos(position * div[: d_model // 2])  # odd d: one fewer cosine column
    return pe.to(torch.float32)


class ScaledSinusoidalEmbedding(nn.Module):
    """``lut`` (scaled TokenEmbedding) + sinusoidal positions + dropout.

    Raises:
        EmbeddingError SHAPE_MISMATCH: sequence longer than ``max_len``.
        Lookup errors from :class:`TokenEmbedding`; SCALE_APPLIED_TWICE /
        POSITION_APPLIED_TWICE when its output is scaled or positioned again
        through :mod:`tokembed.embedding.stamps`.
    """

    def __init__(
        self,
        num_embeddings: int,
        d_model: int,
        *,
        dropout: float = 0.1,  # the Annotated Transformer's default
        max_len: int = 5000,
        padding_idx: int | None = None,
        address_hash: str | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.d_model = d_model
        self.lut = TokenEmbedding(
            num_embeddings,
            d_model,
            padding_idx=padding_idx,
            input_scale=math.sqrt(d_model),
            address_hash=address_hash,
            device=device,
            dtype=dtype,
        )
        pe = sinusoidal_table(max_len, d_model).to(device=device, dtype=dtype or torch.float32)
        self.register_buffer("pe", pe, persistent=False)
        self.dropout = nn.Dropout(dropout)

    def content(self, ids: torch.Tensor | AddressedIds) -> torch.Tensor:
        """Scaled content rows only: ``E[ids] * sqrt(d_model)`` (stamped)."""
        out: torch.Tensor = self.lut(ids)
        return out

    def forward(self, ids: torch.Tensor | AddressedIds) -> torch.Tensor:
        rows = self.content(ids)  # [B, L, d], scale stamped
        length = rows.shape[-2]
        pe = self.get_buffer("pe")
        if length > pe.shape[0]:
            raise EmbeddingError(
                "SHAPE_MISMATCH",
                f"sequence length {length} exceeds the sinusoid table's max_len {pe.shape[0]}",
                value=length,
                fix="build the module with a larger max_len",
            )
        rows = add_positions(rows, pe[:length], name="sinusoidal", by="ScaledSinusoidalEmbedding")
        return carry_stamp(rows, self.dropout(rows))
