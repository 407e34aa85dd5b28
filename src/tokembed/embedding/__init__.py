"""Embedding tables: checked lookup, initial-state paths, NumPy oracles and table memory.

Lookup side: :func:`validate_ids`, :class:`TokenEmbedding`, :class:`AddressedIds`,
the initial-state paths (factorized, summed/BERT, Harvard, projector, bag,
one-hot) and :mod:`tokembed.embedding.oracles` (import it as a module:
``from tokembed.embedding import oracles``); initialization, gradients and
numerics; :mod:`tokembed.embedding.memory`, the torch-free table-size calculator.

Submodules are imported on first use of a name (PEP 562 ``__getattr__``), so
``import tokembed.embedding.memory`` does not import torch, while
``from tokembed.embedding import TokenEmbedding`` works as an eager import would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokembed._lazy import attach

if TYPE_CHECKING:
    from tokembed.embedding.addressed import (
        AddressedIds,
        check_address_hash,
    )
    from tokembed.embedding.bag import (
        TokenEmbeddingBag,
        validate_bag_offsets,
    )
    from tokembed.embedding.clipping import (
        check_global_norm,
        clip_grad_norm_sparse_,
    )
    from tokembed.embedding.contracts import (
        INDEX_DTYPES,
        check_index_tensor,
        validate_ids,
    )
    from tokembed.embedding.factorized import (
        FactorizedEmbedding,
    )
    from tokembed.embedding.frequency import (
        global_frequency_embedding,
        row_counts,
    )
    from tokembed.embedding.gradient_check import (
        check_lookup_gradient,
    )
    from tokembed.embedding.gradients import (
        GradientAdmission,
        PadRowGuard,
        admit_gradient,
        check_sparse_options,
        embedding_param_groups,
        guard_padding_row,
    )
    from tokembed.embedding.harvard import (
        HarvardEmbedding,
        sinusoidal_table,
    )
    from tokembed.embedding.init import (
        Initializer,
        InitStatistics,
        initialize_,
        initializer_statistics,
        matching_scale,
        sample_statistics,
    )
    from tokembed.embedding.lookup import (
        TokenEmbedding,
    )
    from tokembed.embedding.lookup_config import (
        LookupConfig,
        LookupPolicy,
        config_of,
    )
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
    from tokembed.embedding.mutation import (
        unchanged_table,
    )
    from tokembed.embedding.numerics import (
        NumericalState,
        observe_numerics,
        write_numerical_state,
    )
    from tokembed.embedding.onehot import (
        one_hot_linear,
        one_hot_lookup,
        one_hot_selectors,
    )
    from tokembed.embedding.pad_masks import (
        check_pad_masks,
    )
    from tokembed.embedding.projector import (
        FeatureProjector,
    )
    from tokembed.embedding.scale_ledger import (
        ScaleLedger,
    )
    from tokembed.embedding.stamps import (
        RowStamp,
        add_positions,
        apply_input_scale,
        require_rows,
        row_stamp,
    )
    from tokembed.embedding.summed import (
        SummedEmbedding,
    )

# Public name -> the submodule that defines it.
_SOURCES: dict[str, str] = {
    "AddressedIds": "addressed",
    "FactorizedEmbedding": "factorized",
    "FeatureProjector": "projector",
    "GradientAdmission": "gradients",
    "HarvardEmbedding": "harvard",
    "INDEX_DTYPES": "contracts",
    "InitStatistics": "init",
    "Initializer": "init",
    "LookupConfig": "lookup_config",
    "LookupPolicy": "lookup_config",
    "Materialized": "materialize",
    "NumericalState": "numerics",
    "PadRowGuard": "gradients",
    "RowStamp": "stamps",
    "ScaleLedger": "scale_ledger",
    "SummedEmbedding": "summed",
    "TableSpec": "materialize",
    "TokenEmbedding": "lookup",
    "TokenEmbeddingBag": "bag",
    "add_positions": "stamps",
    "admit_gradient": "gradients",
    "apply_input_scale": "stamps",
    "check_address_hash": "addressed",
    "check_global_norm": "clipping",
    "check_growth_prefix": "materialize",
    "check_index_tensor": "contracts",
    "check_lookup_gradient": "gradient_check",
    "check_pad_masks": "pad_masks",
    "check_sparse_options": "gradients",
    "clip_grad_norm_sparse_": "clipping",
    "config_of": "lookup_config",
    "embedding_param_groups": "gradients",
    "global_frequency_embedding": "frequency",
    "grow": "materialize",
    "grow_optimizer_state_": "materialize",
    "guard_padding_row": "gradients",
    "initialize_": "init",
    "initializer_statistics": "init",
    "is_safe_cast": "materialize",
    "load_exact": "materialize",
    "matching_scale": "init",
    "materialize_fresh": "materialize",
    "observe_numerics": "numerics",
    "one_hot_linear": "onehot",
    "one_hot_lookup": "onehot",
    "one_hot_selectors": "onehot",
    "require_rows": "stamps",
    "row_counts": "frequency",
    "row_stamp": "stamps",
    "sample_statistics": "init",
    "sinusoidal_table": "harvard",
    "unchanged_table": "mutation",
    "validate_bag_offsets": "bag",
    "validate_ids": "contracts",
    "write_numerical_state": "numerics",
}

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
    "NumericalState",
    "PadRowGuard",
    "RowStamp",
    "ScaleLedger",
    "SummedEmbedding",
    "TableSpec",
    "TokenEmbedding",
    "TokenEmbeddingBag",
    "add_positions",
    "admit_gradient",
    "apply_input_scale",
    "check_address_hash",
    "check_global_norm",
    "check_growth_prefix",
    "check_index_tensor",
    "check_lookup_gradient",
    "check_pad_masks",
    "check_sparse_options",
    "clip_grad_norm_sparse_",
    "config_of",
    "embedding_param_groups",
    "global_frequency_embedding",
    "grow",
    "grow_optimizer_state_",
    "guard_padding_row",
    "initialize_",
    "initializer_statistics",
    "is_safe_cast",
    "load_exact",
    "matching_scale",
    "materialize_fresh",
    "observe_numerics",
    "one_hot_linear",
    "one_hot_lookup",
    "one_hot_selectors",
    "require_rows",
    "row_counts",
    "row_stamp",
    "sample_statistics",
    "sinusoidal_table",
    "unchanged_table",
    "validate_bag_offsets",
    "validate_ids",
    "write_numerical_state",
]


__getattr__, __dir__ = attach(__name__, _SOURCES)
