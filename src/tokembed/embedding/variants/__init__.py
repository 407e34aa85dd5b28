"""Reproduced embedding variants: other ways a model's input rows are built from ids or features.

Each variant is built on the checked lookup (:class:`~tokembed.embedding.TokenEmbedding`
or its id checks), so it refuses what the lookup refuses:

* :mod:`~tokembed.embedding.variants.sinusoidal` — the original Transformer's input:
  rows scaled by √d_model plus fixed sinusoidal positions (:class:`ScaledSinusoidalEmbedding`);
* :mod:`~tokembed.embedding.variants.summed` — BERT's token + type + position rows,
  then LayerNorm (:class:`SummedEmbedding`);
* :mod:`~tokembed.embedding.variants.factorized` — ALBERT's narrow table and a
  bias-free bridge to the model width (:class:`FactorizedEmbedding`);
* :mod:`~tokembed.embedding.variants.onehot` — the one-hot product that a lookup
  equals (:func:`one_hot_lookup`);
* :mod:`~tokembed.embedding.variants.bag` — ``nn.EmbeddingBag`` with checked bag
  offsets (:class:`TokenEmbeddingBag`);
* :mod:`~tokembed.embedding.variants.projector` — floating features in, model-width
  rows out, ids refused (:class:`FeatureProjector`).

Example::

    >>> from tokembed.embedding.variants import FactorizedEmbedding
    >>> FactorizedEmbedding(8, 3, 5)(torch.tensor([[1, 4]])).shape
    torch.Size([1, 2, 5])
"""

from tokembed.embedding.variants import bag, factorized, onehot, projector, sinusoidal, summed
from tokembed.embedding.variants.bag import *
from tokembed.embedding.variants.factorized import *
from tokembed.embedding.variants.onehot import *
from tokembed.embedding.variants.projector import *
from tokembed.embedding.variants.sinusoidal import *
from tokembed.embedding.variants.summed import *

__all__: list[str] = []
__all__ += bag.__all__
__all__ += factorized.__all__
__all__ += onehot.__all__
__all__ += projector.__all__
__all__ += sinusoidal.__all__
__all__ += summed.__all__
