"""Vocabulary-parallel embeddings, heads and losses over torch.distributed (spec 0x04A, 0x0A).

Core layers (row intervals, sharded lookups, sharded head and loss, pipeline
replicas) are owned by the parallel-core engineer; the whole-model sharding
engineer appends exports here with small edits.
"""

from __future__ import annotations

from tokembed.parallel.cross_entropy import vocab_parallel_cross_entropy
from tokembed.parallel.intervals import owner_of, row_intervals, validate_cover
from tokembed.parallel.lm_head import VocabParallelLMHead
from tokembed.parallel.ownership import RowOwnership, mark_rows, row_ownership
from tokembed.parallel.vocab_embedding import VocabParallelEmbedding

__all__ = [
    "RowOwnership",
    "VocabParallelEmbedding",
    "VocabParallelLMHead",
    "mark_rows",
    "owner_of",
    "row_intervals",
    "row_ownership",
    "validate_cover",
    "vocab_parallel_cross_entropy",
]
