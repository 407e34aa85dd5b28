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
from tokembed.embedding.clipping import clip_grad_norm_sparse_
from tokembed.embedding.contracts import INDEX_DTYPES, check_index_tensor, validate_ids
from tokembed.embedding.factorized import FactorizedEmbedding
from tokembed.embedding.frequency import global_frequency_embedding, row_counts
from tokembed.embedding.gradients import (
    GradientAdmission,
    PadRowGuard,
    admit_gradient,
    check_sparse_options,
    embedding_param_groups,
    guard_padding_row,
)
from tokembed.embedding.harvard import HarvardEmbedding, sinusoidal_table
from tokembed.embedding.init import (
    Initializer,
    InitStatistics,
    initialize_,
    initializer_statistics,
    matching_scale,
    sample_statistics,
)
from tokembed.embedding.lookup import TokenEmbedding
from tokembed.embedding.lookup_config import LookupConfig, LookupPolicy, config_of
from tokembed.embedding.materialize import (
    Materialized,
    TableSpec,
    check_growth_prefix,
    grow,
    grow_optimizer_state_,
    is_safe_cast,
    load_exact,
    materialize_fresh,
)
from tokembed.embedding.memory import (
    MemoryReport,
    TableConfig,
    load_table_config,
    memory_report,
    table_parameters,
    training_state_bytes,
)
from tokembed.embedding.numerics import NumericalState, observe_numerics, write_numerical_state
from tokembed.embedding.onehot import one_hot_linear, one_hot_lookup, one_hot_selectors
from tokembed.embedding.payloads import (
    classifier_macs,
    gradient_payload,
    lookup_payload,
    projector_cost,
)
from tokembed.embedding.projector import FeatureProjector
from tokembed.embedding.stamps import RowStamp, add_positions, apply_input_scale, row_stamp
from tokembed.embedding.summed import SummedEmbedding

__all__ = [
    "INDEX_DTYPES",
    "AddressedIds",
    "FactorizedEmbedding",
    "FeatureProjector",
    "GradientAdmission",
    "HarvardEmbedding",
    "InitStatistics",
    "Initializer",
    "LookupConfig",
    "LookupPolicy",
    "Materialized",
    "MemoryReport",
    "NumericalState",
    "PadRowGuard",
    "RowStamp",
    "SummedEmbedding",
    "TableConfig",
    "TableSpec",
    "TokenEmbedding",
    "TokenEmbeddingBag",
    "add_positions",
    "admit_gradient",
    "apply_input_scale",
    "check_address_hash",
    "check_growth_prefix",
    "check_index_tensor",
    "check_sparse_options",
    "classifier_macs",
    "clip_grad_norm_sparse_",
    "config_of",
    "embedding_param_groups",
    "global_frequency_embedding",
    "gradient_payload",
    "grow",
    "grow_optimizer_state_",
    "guard_padding_row",
    "initialize_",
    "initializer_statistics",
    "is_safe_cast",
    "load_exact",
    "load_table_config",
    "lookup_payload",
    "matching_scale",
    "materialize_fresh",
    "memory_report",
    "observe_numerics",
    "one_hot_linear",
    "one_hot_lookup",
    "one_hot_selectors",
    "projector_cost",
    "row_counts",
    "row_stamp",
    "sample_statistics",
    "sinusoidal_table",
    "table_parameters",
    "training_state_bytes",
    "validate_bag_offsets",
    "validate_ids",
    "write_numerical_state",
]
