"""Vocabulary-parallel embeddings, heads and losses over torch.distributed.

Row intervals and ownership, sharded lookups (vocabulary-parallel, row-routed,
column-parallel) that keep TokenEmbedding's lookup contract, the sharded output
head and loss, whole-model sharding (``shard_input_embedding``,
``shard_lm_head``, DeepSpeed AutoTP), data-parallel reduction, tied pipeline
replicas, resharded checkpoints and byte accounts of memory and collectives.
"""

from __future__ import annotations

from tokembed.parallel.causal_lm import causal_lm_loss
from tokembed.parallel.column import ColumnParallelEmbedding, require_full_rows
from tokembed.parallel.cross_entropy import vocab_parallel_cross_entropy
from tokembed.parallel.data_parallel import (
    GradientReduction,
    check_parallel_groups,
    reduce_gradients,
)
from tokembed.parallel.deepspeed_tp import autotp_group, initialize_autotp
from tokembed.parallel.intervals import owner_of, row_intervals, validate_cover
from tokembed.parallel.ledger import (
    CollectiveLedger,
    MemoryLedger,
    count_collectives,
    count_remote,
    memory_ledger,
    schedule_payloads,
)
from tokembed.parallel.lm_head import VocabParallelLMHead
from tokembed.parallel.ownership import (
    OwnerCheckedOptimizer,
    RowOwnership,
    check_owned_step,
    mark_rows,
    mark_sharded_source,
    row_ownership,
)
from tokembed.parallel.pipeline_tie import TiedReplica
from tokembed.parallel.reshard import (
    ShardLayout,
    load_rows,
    load_vocab_shards,
    read_layout,
    save_shard,
    save_vocab_shards,
)
from tokembed.parallel.routed import RouteLedger, RowRoutedEmbedding, restore_origin_order
from tokembed.parallel.shard import shard_input_embedding, shard_lm_head
from tokembed.parallel.vocab_embedding import VocabParallelEmbedding

__all__ = [
    "CollectiveLedger",
    "ColumnParallelEmbedding",
    "GradientReduction",
    "MemoryLedger",
    "OwnerCheckedOptimizer",
    "RouteLedger",
    "RowOwnership",
    "RowRoutedEmbedding",
    "ShardLayout",
    "TiedReplica",
    "VocabParallelEmbedding",
    "VocabParallelLMHead",
    "autotp_group",
    "causal_lm_loss",
    "check_owned_step",
    "check_parallel_groups",
    "count_collectives",
    "count_remote",
    "initialize_autotp",
    "load_rows",
    "load_vocab_shards",
    "mark_rows",
    "mark_sharded_source",
    "memory_ledger",
    "owner_of",
    "read_layout",
    "reduce_gradients",
    "require_full_rows",
    "restore_origin_order",
    "row_intervals",
    "row_ownership",
    "save_shard",
    "save_vocab_shards",
    "schedule_payloads",
    "shard_input_embedding",
    "shard_lm_head",
    "validate_cover",
    "vocab_parallel_cross_entropy",
]
