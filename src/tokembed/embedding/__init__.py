"""Embedding tables: checked lookup, initial-state paths and NumPy oracles (torch).

Lookup side (this file's owner): :func:`validate_ids`, :class:`TokenEmbedding`,
:class:`AddressedIds`, the initial-state paths (factorized, summed/BERT,
Harvard, projector, bag, one-hot) and :mod:`tokembed.embedding.oracles`
(import it as a module: ``from tokembed.embedding import oracles``).
The init/gradients/numerics engineer appends their exports below with small edits.
"""

from __future__ import annotations

from tokembed.embedding.addressed import AddressedIds, check_address_hash
from tokembed.embedding.bag import TokenEmbeddingBag, validate_bag_offsets
from tokembed.embedding.contracts import INDEX_DTYPES, check_index_tensor, validate_ids
from tokembed.embedding.factorized import FactorizedEmbedding
from tokembed.embedding.harvard import HarvardEmbedding, sinusoidal_table
from tokembed.embedding.lookup import LookupConfig, TokenEmbedding
from tokembed.embedding.onehot import one_hot_linear, one_hot_lookup, one_hot_selectors
from tokembed.embedding.projector import FeatureProjector
from tokembed.embedding.stamps import RowStamp, add_positions, apply_input_scale, row_stamp
from tokembed.embedding.summed import SummedEmbedding

__all__ = [
    "INDEX_DTYPES",
    "AddressedIds",
    "FactorizedEmbedding",
    "FeatureProjector",
    "HarvardEmbedding",
    "LookupConfig",
    "RowStamp",
    "SummedEmbedding",
    "TokenEmbedding",
    "TokenEmbeddingBag",
    "add_positions",
    "apply_input_scale",
    "check_address_hash",
    "check_index_tensor",
    "one_hot_linear",
    "one_hot_lookup",
    "one_hot_selectors",
    "row_stamp",
    "sinusoidal_table",
    "validate_bag_offsets",
    "validate_ids",
]
