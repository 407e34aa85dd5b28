"""Embedding tables: the checked production lookup, and what it is built and trained with.

The production path is here, at the top: :class:`TokenEmbedding` (``nn.Embedding``
with every address contract checked) configured by a :class:`LookupConfig`, the
per-batch checks every table runs (:mod:`~tokembed.embedding.lookup_checks`, sharded
tables included), id validation (:func:`validate_ids`), stamped batches and address
hashes (:class:`AddressedIds`), row stamps (:func:`apply_input_scale`,
:func:`add_positions`), initialization (:func:`initialize_`), materialization and
growth (:func:`load_exact`, :func:`grow`), frequency-scaled gradients, gradient
admission and sparse/sharded clipping. Around it:

* :mod:`tokembed.embedding.guards` — checks that are not the lookup itself (PAD masks,
  gradient accumulation, table mutation, scale and numerics ledgers);
* :mod:`tokembed.embedding.variants` — reproduced variants (scaled sinusoidal, summed,
  factorized, one-hot, bag, projector);
* :mod:`tokembed.embedding.oracles` — float64 NumPy twins of the lookup's algebra,
  imported as a module (``from tokembed.embedding import oracles``).

Example::

    >>> from tokembed.embedding import TokenEmbedding
    >>> TokenEmbedding(8, 3, padding_idx=0)(torch.tensor([[1, 4, 6, 2]])).shape
    torch.Size([1, 4, 3])
"""

from tokembed.embedding import (
    addressed,
    clipping,
    contracts,
    frequency,
    gradients,
    init,
    lookup,
    lookup_checks,
    lookup_config,
    materialize,
    shard_reader,
    stamps,
)
from tokembed.embedding import guards as guards
from tokembed.embedding import oracles as oracles
from tokembed.embedding import variants as variants
from tokembed.embedding.addressed import *
from tokembed.embedding.clipping import *
from tokembed.embedding.contracts import *
from tokembed.embedding.frequency import *
from tokembed.embedding.gradients import *
from tokembed.embedding.init import *
from tokembed.embedding.lookup import *
from tokembed.embedding.lookup_checks import *
from tokembed.embedding.lookup_config import *
from tokembed.embedding.materialize import *
from tokembed.embedding.shard_reader import *
from tokembed.embedding.stamps import *

__all__: list[str] = []
__all__ += addressed.__all__
__all__ += clipping.__all__
__all__ += contracts.__all__
__all__ += frequency.__all__
__all__ += gradients.__all__
__all__ += init.__all__
__all__ += lookup.__all__
__all__ += lookup_checks.__all__
__all__ += lookup_config.__all__
__all__ += materialize.__all__
__all__ += shard_reader.__all__
__all__ += stamps.__all__
