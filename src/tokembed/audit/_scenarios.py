"""The failure lab's rows: id, guard code and title of each scenario.

Data only, read by :mod:`tokembed.audit.lab`. A title is the scenario's stable
name, as written; ids and codes never change meaning once published. Which
tests trigger a scenario is not recorded here: they carry
``@pytest.mark.failure_lab("<id>")``, and ``tests/audit/test_lab.py`` checks
through pytest's own collection that every row has such a test asserting its
code.
"""

from __future__ import annotations

__all__ = ["GROUP_NAMES", "ROWS"]

GROUP_NAMES: dict[int, str] = {
    1: "artifact and table identity",
    2: "what reaches the lookup as token ids",
    3: "tokenizer vocabulary and its tables",
    4: "padding",
    5: "gradients and row ownership across ranks",
    6: "weight tying, checkpoint and output ownership",
    7: "input scale, positions and initial numerics",
    8: "media projector",
    9: "kinds of representation",
    10: "adapters that change the row count",
    11: "mixed-origin input sequence",
    12: "output head and weight tying",
}

# (id, code, title)
ROWS: tuple[tuple[str, str, str], ...] = (
    # --- group 1
    ("1.1", "IDENTITY_KIND_MISMATCH", "One release hash used as every kind of identity"),
    ("1.2", "ADDRESS_HASH_MISMATCH", "Equal vocabulary size admitted as address compatibility"),
    ("1.3", "TIE_NOT_SHARED", "Tied weights accepted from equal values"),
    ("1.4", "SHARD_OVERLAP", "Shard map accepted from local shapes alone"),
    # --- group 2
    ("2.1", "OPERATOR_CONTRACT_MISMATCH", "Token IDs treated as numeric magnitudes"),
    ("2.2", "INDEX_DTYPE_MISMATCH", "Strings passed into nn.Embedding"),
    ("2.3", "OPERATOR_CONTRACT_MISMATCH", "One-hot vectors passed into nn.Embedding"),
    ("2.4", "INDEX_DTYPE_MISMATCH", "Already embedded floats passed into nn.Embedding"),
    ("2.5", "ADDRESS_HASH_MISMATCH", "Media features cast to IDs"),
    # --- group 3
    ("3.1", "ROW_COUNT_MISMATCH", "Tokenizer vocabulary and embedding row count mismatch"),
    ("3.2", "ADDRESS_HASH_MISMATCH", "Tokenizer/model mismatch"),
    ("3.3", "TABLE_ROLE_SWAPPED", "Source and target embedding tables swapped"),
    (
        "3.4",
        "TIE_NOT_SHARED",
        "Shared embedding assumed when the implementation uses separate tables",
    ),
    ("3.5", "TABLE_SIZED_FOR_OTHER_VOCAB", "Target Generator initialized with V_src"),
    ("3.6", "NOT_APPEND_ONLY", "A reordered vocabulary is called append-only"),
    ("3.7", "APPROXIMATE_AS_EXACT", "An approximate initializer is recorded as an exact row copy"),
    (
        "3.8",
        "PROBABILITY_SHIFT",
        "Old raw logits are preserved, so old probabilities are assumed preserved",
    ),
    ("3.9", "VOCAB_AXIS_STALE", "The embedding grows but the untied output head or bias does not"),
    ("3.10", "OPTIMIZER_STEP_RESET", "Adam moments are resized but the step is reset"),
    (
        "3.11",
        "FROZEN_ROW_MOVED",
        "Only the sparse lookup gradient is masked to freeze old tied rows",
    ),
    (
        "3.12",
        "SHARD_LAYOUT_MISMATCH",
        "Physical shards are edited independently without a canonical reconstruction",
    ),
    ("3.13", "STALE_PACK", "Quantized bytes are appended without regenerating group metadata"),
    ("3.14", "VERSION_PAIR_REJECTED", "T1/M0 is admitted because most IDs are still in range"),
    (
        "3.15",
        "ROLLBACK_INCOMPLETE",
        "Rollback restores M0 while retaining T1 IDs or candidate cache state",
    ),
    # --- group 4
    ("4.1", "PAD_MASK_MISMATCH", "PAD ID, padding_idx, attention mask, and label mask disagree"),
    ("4.2", "PAD_ID_INVALID", "pad_id=-1 passed into embedding lookup"),
    ("4.3", "PAD_ID_INVALID", "PAD row updates unexpectedly"),
    ("4.4", "PAD_ROW_AS_CONTENT", "PAD row frozen when intended as content"),
    # --- group 5
    ("5.1", "GRADIENT_NOT_ACCUMULATED", "Duplicate IDs overwrite instead of accumulate"),
    ("5.2", "FREQ_COUNT_SCOPE_UNDECLARED", "Frequency scaling uses an undeclared count scope"),
    ("5.3", "UNCOALESCED_GRADIENT", "Sparse layout is confused with sparse values"),
    ("5.4", "GRADIENT_LAYOUT_MISMATCH", "Optimizer name is treated as a complete sparse contract"),
    ("5.5", "CLIP_NOT_GLOBAL", "Local clipping is called global clipping"),
    (
        "5.6",
        "TIED_DENSE_UNDER_SPARSE",
        "Tied output gradient is dropped to preserve input sparsity",
    ),
    ("5.7", "DOUBLE_AVERAGING", "Data-parallel AVG and loss averaging divide twice"),
    ("5.8", "SHARD_GAP", "Row-shard intervals contain a gap or overlap"),
    ("5.9", "GLOBAL_ID_ON_LOCAL_SHARD", "Global IDs index a local shard directly"),
    ("5.10", "ORIGIN_POSITION_LOST", "Origin-position metadata is lost during routing"),
    ("5.11", "NON_OWNER_STEP", "A non-owner rank steps a row shard"),
    (
        "5.12",
        "ACTIVATION_NOT_GATHERED",
        "Column-wise weight placement is mistaken for a full activation schedule",
    ),
    ("5.13", "GROUP_CONFLATION", "Tensor-parallel and data-parallel groups are conflated"),
    # --- group 6
    ("6.1", "TIE_NOT_SHARED", "Equal values are mistaken for one parameter"),
    ("6.2", "ALIAS_GRAPH_LOST", "A checkpoint stores values but loses the alias graph"),
    ("6.3", "DIVERGENT_ALIAS_VALUES", "Two declared alias keys contain different values"),
    ("6.4", "STALE_OPTIMIZER_PARAMETER", "The optimizer is built before an alias is restored"),
    (
        "6.5",
        "DUPLICATE_OPTIMIZER_REGISTRATION",
        "One tied Parameter is registered twice with the optimizer",
    ),
    (
        "6.6",
        "TIE_WIDTH_MISMATCH",
        "A factorized lexical table is tied directly to a hidden-width head",
    ),
    (
        "6.7",
        "VOCABULARY_IDENTITY_MISMATCH",
        "Source and target tables are tied from equal row counts",
    ),
    (
        "6.8",
        "TIE_PARTITION_MISMATCH",
        "Tensor-parallel input and output shards use different row intervals",
    ),
    ("6.9", "REPLICA_DIVERGED", "Pipeline replicas reduce values but not the two gradient paths"),
    ("6.10", "REPLICA_DIVERGED", "Pipeline replica values match while optimizer moments differ"),
    ("6.11", "REPLICA_GRADIENT_REDUCED_TWICE", "The reconciled pipeline gradient is reduced twice"),
    (
        "6.12",
        "QUANTIZED_PACKS_NOT_TIED",
        "Input and output roles create independent quantized packs and call them tied",
    ),
    # --- group 7
    ("7.1", "SCALE_MISMATCH", "Missing sqrt(d_model)"),
    ("7.2", "SCALE_APPLIED_TWICE", "Applying sqrt(d_model) twice"),
    (
        "7.3",
        "SCALED_VARIANCE_MISSTATED",
        "Treating sqrt(d_model) as an initializer-independent law",
    ),
    ("7.4", "INIT_VARIANCE_MISSTATED", "Calling rectangular Xavier variance 1/d_model"),
    ("7.5", "MISSING_KEY", "Fresh initialization confused with checkpoint loading"),
    ("7.6", "GROWTH_PREFIX_CHANGED", "Vocabulary growth overwrites old rows"),
    ("7.7", "PAD_ROW_NOT_ZERO", "Assuming padding_idx forces a permanent zero row"),
    ("7.8", "TABLE_MUTATED_IN_FORWARD", "Ignoring max_norm as a forward mutation"),
    (
        "7.9",
        "MASTER_COPY_ASSUMED",
        "Equating autocast with converted parameters or fp32 master weights",
    ),
    (
        "7.10",
        "POSITIONS_MISSING",
        "Calling only Embeddings when code expects Embeddings + PositionalEncoding",
    ),
    (
        "7.11",
        "POSITIONS_UNEXPECTED",
        "Calling src_embed when only raw content embeddings were intended",
    ),
    # --- group 8
    ("8.1", "PROJECTOR_WIDTH_MISMATCH", "Mistaking d_media for d_model"),
    (
        "8.2",
        "PROJECTOR_SPACE_MISMATCH",
        "Projector maps to the correct width but wrong semantic space",
    ),
    (
        "8.3",
        "PROJECTOR_ENCODER_MISMATCH",
        "Projector trained for one encoder is used with another encoder",
    ),
    ("8.4", "PROJECTOR_TRAINABILITY_MISMATCH", "Projector frozen or trained contrary to the setup"),
    # --- group 9
    ("9.1", "REPRESENTATION_NOT_CONTEXTUAL", "Treating lookup rows as contextual states"),
    (
        "9.2",
        "SCORE_NOT_CALIBRATED",
        "Using arbitrary hidden-state cosine as a calibrated retrieval score",
    ),
    ("9.3", "ROWS_NOT_POOLED", "Calling projected patch rows a single image embedding"),
    (
        "9.4",
        "REPRESENTATION_SPACE_MISMATCH",
        "Treating equal-width downstream representations as interchangeable",
    ),
    # --- group 10
    ("10.1", "ADAPTER_ROW_COUNT_STALE", "Adapter changes n but masks still use old n"),
    ("10.2", "ADAPTER_ROW_ORDER_UNDECLARED", "Adapter reorders rows without metadata update"),
    ("10.3", "ADAPTER_EVIDENCE_DROPPED", "Query bottleneck collapses needed evidence"),
    # --- group 11
    ("11.1", "X0_FEATURE_AXIS_CONCAT", "Text and media concatenated along the feature axis"),
    ("11.2", "X0_ROW_ORDER_MISMATCH", "Rows have correct shape but wrong order"),
    ("11.3", "X0_ROW_TYPES_MISSING", "Row-type metadata lost"),
    ("11.4", "X0_GEOMETRY_MISSING", "Geometry metadata dropped at concat"),
    ("11.5", "X0_MEDIA_MASK_MISSING", "Ragged media batches padded without media masks"),
    # --- group 12
    (
        "12.1",
        "HEAD_VOCAB_MISMATCH",
        "Output head and input embedding vocabulary dimensions disagree",
    ),
    ("12.2", "TIE_NOT_SHARED", "Assuming tied weights when the implementation does not tie"),
    (
        "12.3",
        "VOCABULARY_IDENTITY_MISMATCH",
        "Tying incompatible source, target, and output tables",
    ),
    ("12.4", "HEAD_LAYOUT_MISMATCH", "Using transposed weight layout incorrectly"),
)
