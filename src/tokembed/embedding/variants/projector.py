"""A continuous projector: floating feature rows in, model-width rows out, no addresses.

Media encoders (a ViT's patch features, an audio encoder's frames) hand over ``[B, N, d_media]`` floats. They
enter the model through an affine map, never through a vocabulary table: casting
them to integers and looking them up destroys their meaning, and feeding token ids
to a projector treats addresses as magnitudes. Both substitutions keep every
shape valid, so this module refuses integer inputs explicitly.

Example::

    >>> proj = FeatureProjector(2, 5)
    >>> proj(torch.zeros(2, 2, 2)).shape
    torch.Size([2, 2, 5])
"""

from __future__ import annotations

import torch
from torch import nn

from tokembed.errors import EmbeddingError

__all__ = ["FeatureProjector"]


class FeatureProjector(nn.Linear):
    """``Z = F W^T + b`` on floating features ``[..., in_features]`` (nn.Linear state dict).

    Raises (forward):
        EmbeddingError OPERATOR_CONTRACT_MISMATCH: integer or bool input (token ids,
            or media features cast to ids).
        EmbeddingError SHAPE_MISMATCH: the last axis is not ``in_features``
            (e.g. d_media = 1024 given to a projector built for 4096).
    """

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        if not (features.is_floating_point() or features.is_complex()):
            raise EmbeddingError(
                "OPERATOR_CONTRACT_MISMATCH",
                f"a projector consumes floating feature rows, got {features.dtype}"
                " (integer ids are addresses for a lookup table, not features)",
                value=features.dtype,
                fix="send token ids to TokenEmbedding; pass media features as floats",
            )
        if features.shape[-1] != self.in_features:
            raise EmbeddingError(
                "SHAPE_MISMATCH",
                f"features have width {features.shape[-1]} but the projector expects"
                f" {self.in_features}",
                value=features.shape[-1],
                fix="use the projector trained for this encoder's output width",
            )
        return super().forward(features)
