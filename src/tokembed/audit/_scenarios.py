"""The failure lab's rows: id, guard code, title (the scenario's stable marker) and triggering tests.

Data only, read by :mod:`tokembed.audit.lab`. Titles are the scenarios' marker
names, lowercased; a test that triggers one starts its docstring with
``Failure lab: <title>`` and asserts the code. ``tests/audit/test_lab.py``
scans the test files and fails when this table and the tests disagree, so an
edit here goes with the test it names.
"""

from __future__ import annotations

__all__ = ["GROUP_NAMES", "ROWS"]

GROUP_NAMES: dict[int, str] = {
    1: "artifact and table identity",
    2: "ID / embedding boundary",
    3: "vocabulary and table",
    4: "PAD",
    5: "backward and distributed ownership",
    6: "weight tying, checkpoint and output ownership",
    7: "input scale, positions and initial numerics",
    8: "projector",
    9: "embedding-object boundary",
    10: "count-changing adapter",
    11: "mixed-origin input sequence",
    12: "output head and weight tying",
}

_E = "tests/embedding/"
_P = "tests/parallel/"
_C = "tests/checkpoint/"
_M = "tests/migrate/"
_H = "tests/inputs/"
_G6 = _C + "test_group6_scenarios.py::test_"

# (id, code, title, tests)
ROWS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    # --- 1 artifact and table identity
    (
        "1.1",
        "IDENTITY_KIND_MISMATCH",
        "One release hash used as every kind of identity",
        ("tests/audit/test_identity.py::test_one_release_hash_is_not_every_kind_of_identity",),
    ),
    (
        "1.2",
        "ADDRESS_HASH_MISMATCH",
        "Equal vocabulary size admitted as address compatibility",
        (_M + "test_classify.py::test_equal_size_tables_are_not_address_compatible",),
    ),
    (
        "1.3",
        "TIE_NOT_SHARED",
        "Tied weights accepted from equal values",
        (_C + "test_ties.py::test_equal_values_after_loading_are_not_a_tie",),
    ),
    (
        "1.4",
        "SHARD_OVERLAP",
        "Shard map accepted from local shapes alone",
        (_P + "test_reshard.py::test_overlap_in_manifest_intervals_is_refused",),
    ),
    # --- 2 ID / embedding boundary
    (
        "2.1",
        "OPERATOR_CONTRACT_MISMATCH",
        "Token IDs treated as numeric magnitudes",
        (_E + "variants/test_projector.py::test_integer_ids_refused",),
    ),
    (
        "2.2",
        "INDEX_DTYPE_MISMATCH",
        "Strings passed into nn.Embedding",
        (_E + "test_contracts.py::test_strings_and_lists_refused",),
    ),
    (
        "2.3",
        "OPERATOR_CONTRACT_MISMATCH",
        "One-hot vectors passed into nn.Embedding",
        (_E + "test_lookup.py::test_one_hot_guard_is_an_opt_in_policy",),
    ),
    (
        "2.4",
        "INDEX_DTYPE_MISMATCH",
        "Already embedded floats passed into nn.Embedding",
        (_E + "test_lookup.py::test_already_embedded_rows_are_not_ids",),
    ),
    (
        "2.5",
        "ADDRESS_HASH_MISMATCH",
        "Media features cast to IDs",
        (_E + "test_lookup.py::test_media_features_cast_to_in_range_ids_have_no_address",),
    ),
    # --- 3 vocabulary and table
    (
        "3.1",
        "ROW_COUNT_MISMATCH",
        "Tokenizer vocabulary and embedding row count mismatch",
        (
            _M + "test_apply.py::test_table_rows_other_than_the_map_are_refused",
            _M + "test_rowmap.py::test_table_smaller_than_its_tokenizer_is_refused",
        ),
    ),
    (
        "3.2",
        "ADDRESS_HASH_MISMATCH",
        "Tokenizer/model mismatch",
        (_M + "test_apply.py::test_model_trained_for_another_tokenizer_is_refused",),
    ),
    (
        "3.3",
        "TABLE_ROLE_SWAPPED",
        "Source and target embedding tables swapped",
        (_M + "test_roles.py::test_source_and_target_tables_swapped_are_refused",),
    ),
    (
        "3.4",
        "TIE_NOT_SHARED",
        "Shared embedding assumed when the implementation uses separate tables",
        (_M + "test_apply.py::test_shared_embedding_assumed_over_separate_tables_is_caught",),
    ),
    (
        "3.5",
        "TABLE_SIZED_FOR_OTHER_VOCAB",
        "Target Generator initialized with V_src",
        (_M + "test_roles.py::test_target_generator_built_with_the_source_vocabulary_is_refused",),
    ),
    (
        "3.6",
        "NOT_APPEND_ONLY",
        "A reordered vocabulary is called append-only",
        (_M + "test_classify.py::test_reordered_vocabulary_is_never_called_append_only",),
    ),
    (
        "3.7",
        "APPROXIMATE_AS_EXACT",
        "An approximate initializer is recorded as an exact row copy",
        (
            _M
            + "test_initializers.py::test_decomposition_to_one_old_row_is_still_not_an_exact_copy",
            _M + "test_rowmap.py::test_hand_added_edge_between_different_symbols_is_refused",
        ),
    ),
    (
        "3.8",
        "PROBABILITY_SHIFT",
        "Old raw logits are preserved, so old probabilities are assumed preserved",
        (_M + "test_measure.py::test_preserved_logits_do_not_mean_preserved_probabilities",),
    ),
    (
        "3.9",
        "VOCAB_AXIS_STALE",
        "The embedding grows but the untied output head or bias does not",
        (_M + "test_apply.py::test_embedding_grown_but_head_and_bias_left_behind_is_caught",),
    ),
    (
        "3.10",
        "OPTIMIZER_STEP_RESET",
        "Adam moments are resized but the step is reset",
        (_M + "test_apply.py::test_step_reset_after_resizing_moments_is_caught",),
    ),
    (
        "3.11",
        "FROZEN_ROW_MOVED",
        "Only the sparse lookup gradient is masked to freeze old tied rows",
        (_M + "test_freeze.py::test_masking_only_the_lookup_gradient_does_not_freeze_tied_rows",),
    ),
    (
        "3.12",
        "SHARD_LAYOUT_MISMATCH",
        "Physical shards are edited independently without a canonical reconstruction",
        (_M + "test_shards.py::test_shards_edited_independently_are_caught",),
    ),
    (
        "3.13",
        "STALE_PACK",
        "Quantized bytes are appended without regenerating group metadata",
        (
            _M
            + "test_release.py::test_packed_bytes_appended_without_new_group_metadata_are_refused",
        ),
    ),
    (
        "3.14",
        "VERSION_PAIR_REJECTED",
        "T1/M0 is admitted because most IDs are still in range",
        (
            _M
            + "test_release.py::test_new_tokenizer_with_old_model_is_rejected_even_when_most_ids_fit",
        ),
    ),
    (
        "3.15",
        "ROLLBACK_INCOMPLETE",
        "Rollback restores M0 while retaining T1 IDs or candidate cache state",
        (_M + "test_release.py::test_rollback_of_the_model_alone_is_refused",),
    ),
    # --- 4 PAD
    (
        "4.1",
        "PAD_MASK_MISMATCH",
        "PAD ID, padding_idx, attention mask, and label mask disagree",
        (
            _E
            + "guards/test_pad_masks.py::test_masks_that_disagree_with_the_pad_positions_are_refused",
        ),
    ),
    (
        "4.2",
        "PAD_ID_INVALID",
        "pad_id=-1 passed into embedding lookup",
        (_E + "test_lookup.py::test_pad_convention_naming_is_switchable",),
    ),
    (
        "4.3",
        "PAD_ID_INVALID",
        "PAD row updates unexpectedly",
        (
            _E
            + "guards/test_pad_masks.py::test_padding_without_its_padding_idx_trains_the_pad_row",
            _E + "test_lookup.py::test_batch_and_table_pad_ids_must_agree",
        ),
    ),
    (
        "4.4",
        "PAD_ROW_AS_CONTENT",
        "PAD row frozen when intended as content",
        (_E + "guards/test_pad_masks.py::test_a_content_token_frozen_as_padding_is_refused",),
    ),
    # --- 5 backward and distributed ownership
    (
        "5.1",
        "GRADIENT_NOT_ACCUMULATED",
        "Duplicate IDs overwrite instead of accumulate",
        (_E + "guards/test_gradient_check.py::test_overwritten_duplicates_are_refused",),
    ),
    (
        "5.2",
        "FREQ_COUNT_SCOPE_UNDECLARED",
        "Frequency scaling uses an undeclared count scope",
        (_E + "test_lookup.py::test_global_scope_needs_counts",),
    ),
    (
        "5.3",
        "UNCOALESCED_GRADIENT",
        "Sparse layout is confused with sparse values",
        (_E + "test_gradients.py::test_uncoalesced_missing_and_unregistered",),
    ),
    (
        "5.4",
        "GRADIENT_LAYOUT_MISMATCH",
        "Optimizer name is treated as a complete sparse contract",
        (_E + "test_gradients.py::test_sparse_gradient_with_weight_decay_is_refused",),
    ),
    (
        "5.5",
        "CLIP_NOT_GLOBAL",
        "Local clipping is called global clipping",
        (_E + "test_clipping.py::test_local_clipping_is_not_global_clipping",),
    ),
    (
        "5.6",
        "TIED_DENSE_UNDER_SPARSE",
        "Tied output gradient is dropped to preserve input sparsity",
        (_E + "test_gradients.py::test_tied_output_path_makes_the_gradient_dense",),
    ),
    (
        "5.7",
        "DOUBLE_AVERAGING",
        "Data-parallel AVG and loss averaging divide twice",
        (
            _P
            + "test_data_parallel.py::test_double_averaging_is_refused_before_any_gradient_exists",
        ),
    ),
    (
        "5.8",
        "SHARD_GAP",
        "Row-shard intervals contain a gap or overlap",
        (_P + "test_intervals.py::test_bad_covers_name_the_rows",),
    ),
    (
        "5.9",
        "GLOBAL_ID_ON_LOCAL_SHARD",
        "Global IDs index a local shard directly",
        (_P + "test_vocab_embedding.py::test_vocab_parallel_embedding_matches_nn_embedding",),
    ),
    (
        "5.10",
        "ORIGIN_POSITION_LOST",
        "Origin-position metadata is lost during routing",
        (_P + "test_routed.py::test_lost_origin_positions_are_refused",),
    ),
    (
        "5.11",
        "NON_OWNER_STEP",
        "A non-owner rank steps a row shard",
        (
            _P
            + "test_llama_parity.py::test_group_and_ownership_mistakes_are_refused_in_a_whole_model",
        ),
    ),
    (
        "5.12",
        "ACTIVATION_NOT_GATHERED",
        "Column-wise weight placement is mistaken for a full activation schedule",
        (_P + "test_column.py::test_a_column_slice_is_not_a_full_activation",),
    ),
    (
        "5.13",
        "GROUP_CONFLATION",
        "Tensor-parallel and data-parallel groups are conflated",
        (
            _P
            + "test_data_parallel.py::test_tensor_times_data_parallel_step_and_ownership_failures",
        ),
    ),
    # --- 6 weight tying, checkpoint and output ownership
    (
        "6.1",
        "TIE_NOT_SHARED",
        "Equal values are mistaken for one parameter",
        (_G6 + "equal_values_are_mistaken_for_one_parameter",),
    ),
    (
        "6.2",
        "ALIAS_GRAPH_LOST",
        "A checkpoint stores values but loses the alias graph",
        (_G6 + "a_checkpoint_stores_values_but_loses_the_alias_graph",),
    ),
    (
        "6.3",
        "DIVERGENT_ALIAS_VALUES",
        "Two declared alias keys contain different values",
        (_G6 + "two_declared_alias_keys_contain_different_values",),
    ),
    (
        "6.4",
        "STALE_OPTIMIZER_PARAMETER",
        "The optimizer is built before an alias is restored",
        (_G6 + "the_optimizer_is_built_before_an_alias_is_restored",),
    ),
    (
        "6.5",
        "DUPLICATE_OPTIMIZER_REGISTRATION",
        "One tied Parameter is registered twice with the optimizer",
        (_G6 + "one_tied_parameter_is_registered_twice_with_the_optimizer",),
    ),
    (
        "6.6",
        "TIE_WIDTH_MISMATCH",
        "A factorized lexical table is tied directly to a hidden-width head",
        (_G6 + "a_factorized_lexical_table_is_tied_directly_to_a_hidden_width_head",),
    ),
    (
        "6.7",
        "VOCABULARY_IDENTITY_MISMATCH",
        "Source and target tables are tied from equal row counts",
        (_G6 + "source_and_target_tables_are_tied_from_equal_row_counts",),
    ),
    (
        "6.8",
        "TIE_PARTITION_MISMATCH",
        "Tensor-parallel input and output shards use different row intervals",
        (_G6 + "tensor_parallel_input_and_output_shards_use_different_row_intervals",),
    ),
    (
        "6.9",
        "REPLICA_DIVERGED",
        "Pipeline replicas reduce values but not the two gradient paths",
        (_G6 + "pipeline_replicas_reduce_values_but_not_the_two_gradient_paths",),
    ),
    (
        "6.10",
        "REPLICA_DIVERGED",
        "Pipeline replica values match while optimizer moments differ",
        (_G6 + "pipeline_replica_values_match_while_optimizer_moments_differ",),
    ),
    (
        "6.11",
        "REPLICA_GRADIENT_REDUCED_TWICE",
        "The reconciled pipeline gradient is reduced twice",
        (_G6 + "the_reconciled_pipeline_gradient_is_reduced_twice",),
    ),
    (
        "6.12",
        "QUANTIZED_PACKS_NOT_TIED",
        "Input and output roles create independent quantized packs and call them tied",
        (_G6 + "input_and_output_roles_create_independent_quantized_packs_and_call_them_tied",),
    ),
    # --- 7 input scale, positions and initial numerics
    (
        "7.1",
        "SCALE_MISMATCH",
        "Missing sqrt(d_model)",
        (_E + "guards/test_numerics.py::test_declared_scale_must_match_the_observed_one",),
    ),
    (
        "7.2",
        "SCALE_APPLIED_TWICE",
        "Applying sqrt(d_model) twice",
        (_E + "test_lookup.py::test_input_scale_applied_once_and_recorded",),
    ),
    (
        "7.3",
        "SCALED_VARIANCE_MISSTATED",
        "Treating sqrt(d_model) as an initializer-independent law",
        (
            _E
            + "guards/test_scale_ledger.py::test_sqrt_d_gives_unit_variance_only_when_sigma_squared_is_1_over_d",
        ),
    ),
    (
        "7.4",
        "INIT_VARIANCE_MISSTATED",
        "Calling rectangular Xavier variance 1/d_model",
        (_E + "guards/test_scale_ledger.py::test_rectangular_xavier_variance_is_not_1_over_d",),
    ),
    (
        "7.5",
        "MISSING_KEY",
        "Fresh initialization confused with checkpoint loading",
        (
            _C
            + "test_checkpoint.py::test_missing_keys_are_refused_or_reported_never_silently_fresh",
        ),
    ),
    (
        "7.6",
        "GROWTH_PREFIX_CHANGED",
        "Vocabulary growth overwrites old rows",
        (_E + "test_materialize.py::test_growth_prefix_check_sees_changed_bits",),
    ),
    (
        "7.7",
        "PAD_ROW_NOT_ZERO",
        "Assuming padding_idx forces a permanent zero row",
        (_E + "test_lookup.py::test_zero_pad_row_policy",),
    ),
    (
        "7.8",
        "TABLE_MUTATED_IN_FORWARD",
        "Ignoring max_norm as a forward mutation",
        (_E + "guards/test_mutation.py::test_a_max_norm_lookup_changes_the_table_it_reads",),
    ),
    (
        "7.9",
        "MASTER_COPY_ASSUMED",
        "Equating autocast with converted parameters or fp32 master weights",
        (_E + "guards/test_numerics.py::test_assumed_master_copies_are_refused",),
    ),
    (
        "7.10",
        "POSITIONS_MISSING",
        "Calling only Embeddings when code expects Embeddings + PositionalEncoding",
        (
            _E
            + "variants/test_sinusoidal.py::test_content_rows_where_the_stack_expects_positions_are_refused",
        ),
    ),
    (
        "7.11",
        "POSITIONS_UNEXPECTED",
        "Calling src_embed when only raw content embeddings were intended",
        (
            _E
            + "variants/test_sinusoidal.py::test_positioned_rows_where_raw_content_was_intended_are_refused",
        ),
    ),
    # --- 8 projector (guards in tokembed.inputs)
    (
        "8.1",
        "PROJECTOR_WIDTH_MISMATCH",
        "Mistaking d_media for d_model",
        (_H + "test_media_projector.py::test_d_media_mistaken_for_d_model",),
    ),
    (
        "8.2",
        "PROJECTOR_SPACE_MISMATCH",
        "Projector maps to the correct width but wrong semantic space",
        (_H + "test_media_projector.py::test_right_width_wrong_semantic_space",),
    ),
    (
        "8.3",
        "PROJECTOR_ENCODER_MISMATCH",
        "Projector trained for one encoder is used with another encoder",
        (_H + "test_media_projector.py::test_projector_from_another_encoder",),
    ),
    (
        "8.4",
        "PROJECTOR_TRAINABILITY_MISMATCH",
        "Projector frozen or trained contrary to the setup",
        (_H + "test_media_projector.py::test_trainability_contrary_to_the_setup",),
    ),
    # --- 9 embedding-object boundary
    (
        "9.1",
        "REPRESENTATION_NOT_CONTEXTUAL",
        "Treating lookup rows as contextual states",
        (_H + "test_kinds.py::test_lookup_rows_as_contextual_states",),
    ),
    (
        "9.2",
        "SCORE_NOT_CALIBRATED",
        "Using arbitrary hidden-state cosine as a calibrated retrieval score",
        (_H + "test_kinds.py::test_hidden_state_cosine_as_a_retrieval_score",),
    ),
    (
        "9.3",
        "ROWS_NOT_POOLED",
        "Calling projected patch rows a single image embedding",
        (_H + "test_kinds.py::test_projected_patch_rows_as_one_image_embedding",),
    ),
    (
        "9.4",
        "REPRESENTATION_SPACE_MISMATCH",
        "Treating equal-width downstream representations as interchangeable",
        (_H + "test_kinds.py::test_equal_width_representations_as_interchangeable",),
    ),
    # --- 10 count-changing adapter
    (
        "10.1",
        "ADAPTER_ROW_COUNT_STALE",
        "Adapter changes n but masks still use old n",
        (_H + "test_adapter.py::test_adapter_changes_n_but_masks_keep_old_n",),
    ),
    (
        "10.2",
        "ADAPTER_ROW_ORDER_UNDECLARED",
        "Adapter reorders rows without metadata update",
        (_H + "test_adapter.py::test_adapter_reorders_rows_without_metadata_update",),
    ),
    (
        "10.3",
        "ADAPTER_EVIDENCE_DROPPED",
        "Query bottleneck collapses needed evidence",
        (_H + "test_adapter.py::test_query_bottleneck_collapses_needed_evidence",),
    ),
    # --- 11 mixed-origin input sequence
    (
        "11.1",
        "X0_FEATURE_AXIS_CONCAT",
        "Text and media concatenated along the feature axis",
        (_H + "test_sequence.py::test_text_and_media_concatenated_along_the_feature_axis",),
    ),
    (
        "11.2",
        "X0_ROW_ORDER_MISMATCH",
        "Rows have correct shape but wrong order",
        (_H + "test_sequence.py::test_rows_have_correct_shape_but_wrong_order",),
    ),
    (
        "11.3",
        "X0_ROW_TYPES_MISSING",
        "Row-type metadata lost",
        (_H + "test_sequence.py::test_row_type_metadata_lost",),
    ),
    (
        "11.4",
        "X0_GEOMETRY_MISSING",
        "Geometry metadata dropped at concat",
        (_H + "test_sequence.py::test_geometry_metadata_dropped_at_concat",),
    ),
    (
        "11.5",
        "X0_MEDIA_MASK_MISSING",
        "Ragged media batches padded without media masks",
        (_H + "test_sequence.py::test_ragged_media_padded_without_media_masks",),
    ),
    # --- 12 output head and weight tying
    (
        "12.1",
        "HEAD_VOCAB_MISMATCH",
        "Output head and input embedding vocabulary dimensions disagree",
        (_C + "test_heads.py::test_an_untied_head_of_another_vocabulary_is_refused",),
    ),
    (
        "12.2",
        "TIE_NOT_SHARED",
        "Assuming tied weights when the implementation does not tie",
        (_C + "test_ties.py::test_hf_config_claims_are_checked_against_storage",),
    ),
    (
        "12.3",
        "VOCABULARY_IDENTITY_MISMATCH",
        "Tying incompatible source, target, and output tables",
        (_C + "test_heads.py::test_tables_of_other_vocabularies_are_not_tied",),
    ),
    (
        "12.4",
        "HEAD_LAYOUT_MISMATCH",
        "Using transposed weight layout incorrectly",
        (_C + "test_heads.py::test_a_transposed_head_is_refused",),
    ),
)
