"""Vocabulary-parallel embeddings, heads and losses over torch.distributed.

Row intervals and ownership, sharded lookups (vocabulary-parallel, row-routed,
column-parallel) that keep TokenEmbedding's lookup contract, the sharded output
head and loss, whole-model sharding (``shard_input_embedding``,
``shard_lm_head``, DeepSpeed AutoTP), data-parallel reduction, tied pipeline
replicas, resharded checkpoints and byte accounts of memory and collectives.
"""

from tokembed.parallel import (
    causal_lm,
    collectives,
    column,
    cross_entropy,
    data_parallel,
    deepspeed_tp,
    intervals,
    ledger,
    lm_head,
    ownership,
    pipeline_tie,
    reshard,
    routed,
    shard,
    vocab_embedding,
)
from tokembed.parallel.causal_lm import *
from tokembed.parallel.collectives import *
from tokembed.parallel.column import *
from tokembed.parallel.cross_entropy import *
from tokembed.parallel.data_parallel import *
from tokembed.parallel.deepspeed_tp import *
from tokembed.parallel.intervals import *
from tokembed.parallel.ledger import *
from tokembed.parallel.lm_head import *
from tokembed.parallel.ownership import *
from tokembed.parallel.pipeline_tie import *
from tokembed.parallel.reshard import *
from tokembed.parallel.routed import *
from tokembed.parallel.shard import *
from tokembed.parallel.vocab_embedding import *

__all__: list[str] = []
__all__ += causal_lm.__all__
__all__ += collectives.__all__
__all__ += column.__all__
__all__ += cross_entropy.__all__
__all__ += data_parallel.__all__
__all__ += deepspeed_tp.__all__
__all__ += intervals.__all__
__all__ += ledger.__all__
__all__ += lm_head.__all__
__all__ += ownership.__all__
__all__ += pipeline_tie.__all__
__all__ += reshard.__all__
__all__ += routed.__all__
__all__ += shard.__all__
__all__ += vocab_embedding.__all__
