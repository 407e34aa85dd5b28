"""One exception family for everything tokembed refuses.

Every error carries a stable ``code`` (a machine-readable name such as
``ID_OUT_OF_RANGE``), the offending ``value`` and a ``fix`` telling the caller
what to do instead. Codes are registered in :data:`CODES`; raising an
unregistered code is a bug in tokembed, caught by an internal assertion and by
``tests/test_errors.py``.

The CLI prints ``str(error)`` on one line and exits with ``error.exit_code``:
2 for a usage mistake (:class:`UsageError`), 1 for bad data (everything else).

Example::

    >>> try:
    ...     raise TokenizerError("INVALID_UTF8", "bytes are not UTF-8", value=b"\\xff", fix="...")
    ... except TokembedError as e:
    ...     e.code
    'INVALID_UTF8'
"""

from __future__ import annotations

from collections.abc import Container

__all__ = [
    "BUILTIN_OF",
    "CODES",
    "AuditError",
    "CheckpointError",
    "DisallowedSpecialError",
    "EmbeddingError",
    "FormatError",
    "HandoffError",
    "MeasureError",
    "ParallelError",
    "TokembedError",
    "TokenizerError",
    "UnknownTokenError",
    "UsageError",
    "require_choice",
]

# Registry of stable codes, grouped by the package that raises them.
# A code, once published, keeps its meaning; add new ones, never rename.
CODES: dict[str, str] = {
    # --- usage (CLI and configuration) -----------------------------------
    "INVALID_ARGUMENT": "an option or configuration field has an invalid value",
    "FILE_NOT_FOUND": "an input path does not exist",
    "OUTPUT_EXISTS": "the output path is an input, or exists and overwriting was not asked for",
    "OUTPUT_NOT_A_FILE": "the output path is a device, FIFO or socket, which is never replaced",
    "OUTPUT_READ_ONLY": "the output's filesystem is mounted read-only",
    "OUTPUT_PERMISSION_DENIED": "the output (or its folder) may not be written by this user",
    "OUTPUT_NO_SPACE": "the output's device is full or over its quota",
    "OUTPUT_PARENT_NOT_FOLDER": "a parent of the output path is a file, not a folder",
    "OUTPUT_WRITE_FAILED": "the operating system refused the write for another reason",
    "NAME_TOO_LONG": "a file name is longer than the filesystem allows",
    "RESUME_MISMATCH": "a run to resume was started with other inputs, tokenizer or options",
    "FILE_UNREADABLE": "an input file exists but cannot be read (permissions, a folder)",
    # --- tokenizer ---------------------------------------------------------
    "INVALID_PATTERN": "a pre-tokenization regex does not compile or is unknown",
    "INVALID_UTF8": "bytes being decoded strictly are not valid UTF-8",
    "LONE_SURROGATE": "a str contains a lone surrogate and has no UTF-8 form",
    "SPECIAL_TOKEN_DISALLOWED": "text contains a special-token spelling that was not allowed",
    "SPECIAL_TOKEN_CONFLICT": "a special token collides with an ordinary id or another name",
    "UNKNOWN_SPECIAL_TOKEN": "a special-token name is not registered",
    "UNREPRESENTABLE_BYTE": "the vocabulary has no id for a byte that occurs in the text",
    "UNKNOWN_TOKEN_ID": "an id given to decode is not defined by the vocabulary",
    "INVALID_MERGES": "a merge table is inconsistent (unknown ids, bad result bytes, reused id)",
    "EMPTY_CORPUS": "a corpus has no text to train on or to measure",
    "UNKNOWN_PIECE": "bytes or a name given to encode_single_token are not one token",
    "SCHEDULER_UNREACHABLE": "no Dask scheduler answers at the address given for counting chunks",
    "WORKERS_NOT_STARTED": "worker processes could not start or died (a script without the __main__ guard, or killed)",
    "LOCAL_CLUSTER_NOT_STARTED": "a local Dask cluster's worker processes could not start (code from stdin, or a script without the __main__ guard)",
    # --- file formats ------------------------------------------------------
    "MALFORMED_RANKS": "a tiktoken rank file has a bad line, bad base64 or duplicate rank/bytes",
    "NOTHING_TO_ADD": "continuing a tokenizer was asked with no new merges and no new specials",
    "NO_NEW_MERGE": "continuing a tokenizer found no pair left to merge: the base already spells every chunk as one token",
    "RESERVED_ID_UNAVAILABLE": "a new special asks for an id that is not a free reserved id of the base",
    "BASE_PRETOKENIZER_UNREPRODUCIBLE": "the output format cannot split text as the base tokenizer's pre-tokenizer does",
    "MALFORMED_TOKENIZER_FILE": "a tokenizer file is not valid JSON of the expected shape",
    "UNSUPPORTED_VERSION": "a file declares a format version this tokembed cannot read",
    "UNSUPPORTED_TOKENIZER": "a tokenizer file uses a model or component tokembed cannot represent",
    "MERGE_UNKNOWN_PIECE": "a merge names a piece the vocabulary does not contain",
    "HASH_MISMATCH": "a file's recorded content hash differs from its contents",
    "UNKNOWN_ENCODING": "a tiktoken encoding or model name is not known here",
    "ENCODING_UNAVAILABLE": "a named encoding's ranks are not in tiktoken's cache and cannot be downloaded",
    "SPECIAL_ID_UNREPRESENTABLE": "a special-token id is outside what the export format can store",
    "ID_RANGE_TOO_LARGE": "a tokenizer's id range does not fit the widest id type of the shard format",
    "DOCUMENT_TOO_LONG": "a document has more tokens than the shard format's index can count",
    "MALFORMED_SHARDS": "a shard folder's manifest, index or shard files are missing, malformed or disagree",
    "SHARDS_INCOMPLETE": "a shard folder's run has not finished (its manifest lists shards still to write)",
    # --- measure -----------------------------------------------------------
    "MALFORMED_CONLLU": "a CoNLL-U file lacks sentence ids or text lines",
    "UNALIGNED_PARALLEL_CORPUS": "parallel files do not share the same sentence ids in order",
    "EMPTY_WORD_DEFINITION": "the word regex matches nothing in the corpus",
    "VOCAB_BELOW_ID_RANGE": "a model allocates fewer rows V than the tokenizer's id range R",
    "INVALID_PARTITION": "a partition rule is unknown or leaves a side empty",
    "UNREADABLE_INPUT": "an input text file cannot be read (permissions, a damaged .gz)",
    "INPUT_NOT_UTF8": "an input text file is not UTF-8 (the file and the byte offset are named)",
    "INPUT_TOO_LARGE": "a compressed input unpacks to more bytes than the reader's bound",
    "EMPTY_INPUT": "the input files, or a corpus or partition side built from them, hold no text",
    "MALFORMED_JSONL": "a JSON Lines input has a line that is not an object with the text field as a string",
    # --- embedding ---------------------------------------------------------
    "INDEX_DTYPE_MISMATCH": "ids are not an integer tensor",
    "ID_OUT_OF_RANGE": "an id is outside [0, V)",
    "DEVICE_MISMATCH": "ids and table live on different devices with no declared route",
    "ADDRESS_HASH_MISMATCH": "ids were produced by a tokenizer other than the one the table is bound to",
    "PAD_ID_INVALID": "a PAD id is negative, out of range, or disagrees with padding_idx",
    "PAD_ROW_NOT_ZERO": "the PAD row must be zero under the declared policy but is not",
    "BRIDGE_INPUT_WIDTH_MISMATCH": "a factorized bridge's input width differs from the lexical width",
    "OPERATOR_CONTRACT_MISMATCH": "an operator received the wrong kind of input (ids vs features)",
    "INVALID_BAG_OFFSETS": "EmbeddingBag offsets are not sorted, in range, or start at 0",
    "SCALE_APPLIED_TWICE": "an input scale was applied more than once",
    "POSITION_APPLIED_TWICE": "positional rows were added to rows that already carry them",
    "FREQ_COUNT_SCOPE_UNDECLARED": "scale_grad_by_freq without a declared count scope (or its counts)",
    "MISSING_KEY": "a state dict lacks a key the table requires",
    "UNEXPECTED_KEY": "a state dict has a key the table does not know",
    "SHAPE_MISMATCH": "a tensor's shape differs from the declared one",
    "NON_FINITE_VALUES": "a loaded tensor contains NaN or infinity",
    "UNSAFE_CAST": "a load would cast to a dtype that loses information",
    "GROWTH_PREFIX_CHANGED": "growth changed a row of the preserved old prefix",
    "SPARSE_WITH_FREQ_SCALING": "sparse gradients were combined with scale_grad_by_freq",
    "GRADIENT_LAYOUT_MISMATCH": "the optimizer cannot accept the gradient's layout",
    "UNCOALESCED_GRADIENT": "a sparse gradient was required to be coalesced but is not",
    "TIED_DENSE_UNDER_SPARSE": "a tied output path makes the gradient dense under a sparse-only contract",
    "UNKNOWN_INITIALIZER": "an initializer name is not known",
    "DOUBLE_SCALING": "the observed numerical state finds a scale applied twice",
    "MASTER_COPY_ASSUMED": "a declared fp32 master copy of a table does not exist",
    "INVALID_CONFIG": "a model config lacks the fields a calculation needs",
    "MISSING_GRADIENT": "a table has no gradient where one was required (backward not run)",
    "SCALE_MISMATCH": "an observed lookup scale is not a power of the declared input scale",
    "POSITIONS_MISSING": "rows reach a consumer that expects positional rows added, but carry none",
    "POSITIONS_UNEXPECTED": "rows meant as raw content already carry positional rows (added too early)",
    "INIT_VARIANCE_MISSTATED": "a stated coordinate variance differs from the initializer's on this shape",
    "SCALED_VARIANCE_MISSTATED": "a stated post-scale variance is not s^2 times the initializer's variance",
    "TABLE_MUTATED_IN_FORWARD": "a forward (max_norm renormalization) changed a table declared unchanged",
    "PAD_MASK_MISMATCH": "the attention or label mask disagrees with a batch's PAD positions",
    "PAD_ROW_AS_CONTENT": "a row frozen as padding_idx is attended as content",
    "GRADIENT_NOT_ACCUMULATED": "a table gradient is not the scatter-add of its lookups' upstream rows",
    "CLIP_NOT_GLOBAL": "a sharded gradient's global norm exceeds the declared clipping threshold",
    # --- parallel ----------------------------------------------------------
    "SHARD_GAP": "row-shard intervals leave rows without an owner",
    "SHARD_OVERLAP": "row-shard intervals give a row two owners",
    "GLOBAL_ID_ON_LOCAL_SHARD": "a global id was used to index a local shard directly",
    "ORIGIN_POSITION_LOST": "routed rows came back without their origin rank and position",
    "NON_OWNER_STEP": "a rank tried to update rows it does not own",
    "GROUP_CONFLATION": "the tensor-parallel and data-parallel groups are the same or overlap wrongly",
    "DOUBLE_AVERAGING": "gradients were averaged by the reduction and again by the loss",
    "TIED_WITHOUT_SHARDED_HEAD": "a tied embedding cannot be sharded unless the head is sharded with it",
    "ALREADY_PARALLELIZED": "the module was already replaced by another tensor-parallel layer",
    "HIDDEN_DIM_SHARDED": "the embedding was sliced on the hidden dimension",
    "NOT_AN_EMBEDDING": "the module to shard is not an nn.Embedding",
    "REPLICA_DIVERGED": "replicas of a tied table differ in values or optimizer state",
    "SHARD_LAYOUT_MISMATCH": "saved shards do not reconstruct the declared logical table",
    "SEQUENCE_NOT_DIVISIBLE": "a sequence-parallel dimension is not divisible by the group size",
    "ACTIVATION_NOT_GATHERED": "a feature-sharded activation reached an operator that needs full rows",
    # --- checkpoint --------------------------------------------------------
    "TIE_NOT_SHARED": "tables claimed tied are distinct storages (equal values are not a tie)",
    "UNDECLARED_TIE": "tables share one storage but the config or caller says they are untied",
    "TIE_SHAPE_MISMATCH": "tables claimed tied have different row counts or layouts",
    "TIE_WIDTH_MISMATCH": "a [V, D] lexical table is claimed tied to a [V, H] head with D != H",
    "TIE_PARTITION_MISMATCH": "tied input and output shards cover different row intervals",
    "VOCABULARY_IDENTITY_MISMATCH": "tables tied across roles lack one proven ordered vocabulary",
    "ALIAS_GRAPH_LOST": "a declared alias is not one Parameter (same object and storage)",
    "DIVERGENT_ALIAS_VALUES": "two keys of one alias group hold different values",
    "STALE_OPTIMIZER_PARAMETER": "the optimizer holds a Parameter the model no longer uses",
    "DUPLICATE_OPTIMIZER_REGISTRATION": "one Parameter is registered with the optimizer twice",
    "OPTIMIZER_STATE_MISMATCH": "saved optimizer state does not fit the optimizer's parameters",
    "REPLICA_GRADIENT_REDUCED_TWICE": "a tied replica's group also reduces the same gradient again",
    "QUANTIZED_PACKS_NOT_TIED": "role packs of a tied table are not derived from one source tensor",
    "MALFORMED_CHECKPOINT": "a checkpoint's metadata is missing, malformed or disagrees with it",
    "HEAD_VOCAB_MISMATCH": "an output head's vocabulary axis differs from the input table's rows",
    "HEAD_LAYOUT_MISMATCH": "an output head's weight is not [V, d] (nn.Linear layout): transposed or other width",
    "TIE_ACROSS_SHARD_GROUPS": "registrations of one tied Parameter fall into different fully_shard groups",
    "TIE_LOST_IN_MATERIALIZATION": "to_empty, meta-device materialization or a DTensor plan replaced a tied Parameter by separate ones",
    "CHECKPOINT_SHARD_MISSING": "a data file a distributed checkpoint's metadata names is absent or shorter than recorded",
    # --- migrate -----------------------------------------------------------
    "NOT_APPEND_ONLY": "a change required to be append-only moves, removes or rewrites an old id",
    "SEMANTICS_CHANGED": "the pre-tokenizer changed, so equal pieces are not proved equal symbols",
    "APPROXIMATE_AS_EXACT": "an initialized row is recorded as an exact copy of an old row",
    "ROW_MAP_INVALID": "a row map is not injective or names rows outside the tables",
    "ROW_COUNT_MISMATCH": "a vocabulary table's rows disagree with its tokenizer's id range",
    "TABLE_ROLE_SWAPPED": "a table bound to one vocabulary is used where another's table belongs",
    "TABLE_SIZED_FOR_OTHER_VOCAB": "a table has the row count of another vocabulary than its own",
    "VOCAB_AXIS_STALE": "a vocabulary-indexed tensor was left at the old vocabulary size",
    "PRESERVED_ROW_CHANGED": "a row or moment the row map preserves differs from its source",
    "OPTIMIZER_STEP_RESET": "a migrated optimizer state lost its step (age) or its moments",
    "ZERO3_PARTITIONED_TABLE": "a vocabulary table is a DeepSpeed ZeRO-3 partition: its rows cannot change in place",
    "FROZEN_ROW_MOVED": "a row declared frozen changed during training",
    "PROBABILITY_SHIFT": "new rows moved old-token probabilities beyond the declared budget",
    "STALE_PACK": "a derived (quantized, packed) artifact was not regenerated from the migrated table",
    "VERSION_PAIR_REJECTED": "a tokenizer/model pair is not an admitted version pair",
    "ROLLBACK_INCOMPLETE": "a rollback restores the model without its tokenizer (or keeps foreign ids)",
    "MANIFEST_MISMATCH": "a release manifest does not bind the artifacts presented with it",
    "GATE_NOT_PASSED": "a release stage was entered before the gates it needs passed",
    # --- audit: under-trained tokens ------------------------------------------
    "AUDIT_VOCAB_MISMATCH": "the model's vocabulary rows are fewer than the tokenizer's id range R",
    "AUDIT_NO_REFERENCE": "no reference unused rows: no rows past R, holes or unreachable tokens, and no corpus",
    "AUDIT_REFERENCE_INVALID": "a reference unused id names no row of the model's output table",
    "AUDIT_NOT_A_LANGUAGE_MODEL": "the model has no input or output token table to audit",
    # --- audit: tokenizer/model admission and the initial state ---------------
    "SPECIAL_ID_MISMATCH": "a model config's BOS/EOS/PAD/UNK id is not the tokenizer's token for that role",
    "PAIR_NOT_ADMITTED": "a tokenizer/model pair failed admission (every failing check is listed)",
    "POSITION_COUNT_MISMATCH": "positional rows reach the first layer a fractional or >2 number of times",
    "LEDGER_DIMENSION_CONFLICT": "a shape ledger's symbolic dimension is bound to two sizes, or a rank differs",
    "LEDGER_MISMATCH": "two shape ledgers disagree (the first differing entry is named)",
    "INITIAL_STATE_REJECTED": "the initial state before step 0 fails its contract (every failing check is listed)",
    # --- audit: failure lab (guards of its own) -------------------------------
    "IDENTITY_KIND_MISMATCH": "an identity of one kind (address, table, checkpoint, artifact) stood for another",
    # --- handoff (positions, media rows, projectors, adapters, X0 assembly) ---
    "PROJECTOR_WIDTH_MISMATCH": "media rows have the encoder's width d_media where the model's d_model is expected (or the reverse)",
    "PROJECTOR_SPACE_MISMATCH": "projected rows have the model's width but were aligned to another model's input space",
    "PROJECTOR_ENCODER_MISMATCH": "features come from another encoder (or layer) than the one the projector was trained on",
    "PROJECTOR_TRAINABILITY_MISMATCH": "a projector is frozen or trained (requires_grad, optimizer groups) contrary to its declared set-up",
    "REPRESENTATION_NOT_CONTEXTUAL": "context-free lookup rows (or undeclared rows) are used where contextual states are required",
    "SCORE_NOT_CALIBRATED": "a similarity score is asked of a representation no retrieval objective trained for it",
    "ROWS_NOT_POOLED": "a sequence of projected rows [B,N,d] is used as one vector per item [B,d]",
    "REPRESENTATION_SPACE_MISMATCH": "equal-width representations from different layers, heads, checkpoints or objectives are mixed",
    "ADAPTER_ROW_COUNT_STALE": "a mask, label or metadata tensor still has the row count from before a count-changing adapter",
    "ADAPTER_ROW_ORDER_UNDECLARED": "rows were reordered or regrouped without their metadata following the declared row map",
    "ADAPTER_EVIDENCE_DROPPED": "declared evidence rows get less weight than the declared floor in every adapter output row",
    "X0_FEATURE_AXIS_CONCAT": "text and media rows were concatenated along the feature axis instead of the row axis",
    "X0_ROW_ORDER_MISMATCH": "segments of the initial state are in another order than the declared layout",
    "X0_ROW_TYPES_MISSING": "rows of the initial state carry no row type (text, image, audio, event, PAD)",
    "X0_GEOMETRY_MISSING": "media rows reach the initial state without their layout, time or position metadata",
    "X0_MEDIA_MASK_MISSING": "a ragged media batch was padded but carries no mask, so padding rows read as evidence",
}


# The built-in type torch, NumPy or tiktoken raise in the same situation. An error with
# one of these codes is an instance of both its tokembed class and this type (as NumPy's
# AxisError is both a ValueError and an IndexError), so `except IndexError` written
# around an nn.Embedding lookup still catches an out-of-range id. Where torch raises
# another type for the same code at one site (nn.EmbeddingBag: a RuntimeError for an id
# outside the table, a ValueError for 2-D ids with offsets), that raise passes
# ``also=(RuntimeError,)``: the error is then an instance of both built-in types.
BUILTIN_OF: dict[str, type[Exception]] = {
    # --- usage
    "INVALID_ARGUMENT": ValueError,
    # --- tokenizer (tiktoken's types)
    "SPECIAL_TOKEN_DISALLOWED": ValueError,
    "UNKNOWN_TOKEN_ID": KeyError,
    "UNKNOWN_PIECE": KeyError,
    # --- embedding (torch's types for nn.Embedding / F.embedding_bag)
    "INDEX_DTYPE_MISMATCH": RuntimeError,
    "ID_OUT_OF_RANGE": IndexError,
    "PAD_ID_INVALID": IndexError,
    "DEVICE_MISMATCH": RuntimeError,
    "OPERATOR_CONTRACT_MISMATCH": RuntimeError,
    "INVALID_BAG_OFFSETS": RuntimeError,
    "SHAPE_MISMATCH": RuntimeError,
    "SPARSE_WITH_FREQ_SCALING": RuntimeError,
    "PAD_ROW_NOT_ZERO": RuntimeError,
    "ADDRESS_HASH_MISMATCH": ValueError,
    "FREQ_COUNT_SCOPE_UNDECLARED": ValueError,
}


class TokembedError(Exception):
    """Base of every error tokembed raises on purpose.

    Attributes:
        code: stable registered code, e.g. ``"ID_OUT_OF_RANGE"``.
        value: the offending value (an id, a path, a position...), or None.
        fix: one sentence saying what to do instead, or None.

    ``also=(T, ...)`` (keyword) makes this one error also an instance of the built-in
    types T besides its code's own (:data:`BUILTIN_OF`), for a site where the peer
    library raises another type.
    """

    exit_code: int = 1

    def __new__(cls, code: str, *args: object, **kwargs: object) -> TokembedError:
        # A code with a built-in type makes an instance of the class that derives from
        # the family and every built-in type (the code's, then those of ``also``; one
        # class per family and types, made once), so the raise site keeps naming the one
        # family class of its code.
        also = kwargs.get("also", ())
        assert isinstance(also, tuple), "also= takes a tuple of exception types"
        wanted = (BUILTIN_OF.get(code), *also)
        builtins = tuple(
            dict.fromkeys(b for b in wanted if b is not None and not issubclass(cls, b))
        )
        if builtins:
            cls = _with_builtin(cls, builtins)
        return super().__new__(cls, code, *args, **kwargs)

    def __init__(
        self,
        code: str,
        message: str,
        *,
        value: object = None,
        fix: str | None = None,
        also: tuple[type[Exception], ...] = (),
    ) -> None:
        assert code in CODES, f"unregistered error code {code!r}"
        self.code = code
        self.message = message
        self.value = value
        self.fix = fix
        self._also = also
        super().__init__(self.__str__())

    def __reduce__(self) -> tuple[object, ...]:
        # Rebuild with keywords so errors raised in worker processes unpickle in the
        # parent (the default reduce passes only args=(str,) and fails there).
        # The family class is named, not its made-on-demand built-in subclass (which is
        # not importable); __new__ makes that subclass again from the code and ``also``.
        args = (self._family, self.code, self.message, self.value, self.fix, self._also)
        return (_rebuild, args)

    def also_as(self, *builtins: type[Exception]) -> TokembedError:
        """This error (same family, code, message, value and fix), also an instance of ``builtins``.

        For a raise site where the peer library raises another built-in type than the
        code's usual one: re-raise an error a shared check raised as what the peer
        raises there.

        Example::

            >>> err = EmbeddingError("ID_OUT_OF_RANGE", "ids[0] = 9 is outside [0, 8)")
            >>> both = err.also_as(RuntimeError)
            >>> isinstance(both, RuntimeError), isinstance(both, IndexError), both.code
            (True, True, 'ID_OUT_OF_RANGE')
        """
        also = tuple(dict.fromkeys((*self._also, *builtins)))
        return self._family(self.code, self.message, value=self.value, fix=self.fix, also=also)

    @property
    def _family(self) -> type[TokembedError]:
        cls = type(self)
        return _FAMILY_OF.get(cls, cls)

    def __str__(self) -> str:
        text = f"{self.code}: {self.message}"
        if self.fix:
            text += f" — {self.fix}"
        return text


class UsageError(TokembedError):
    """The caller asked for something impossible (bad option, missing file)."""

    exit_code = 2


class TokenizerError(TokembedError):
    """Encoding, decoding, training or special-token policy refused the input."""


class DisallowedSpecialError(TokenizerError, ValueError):
    """Text holds a special token's spelling that was not allowed (SPECIAL_TOKEN_DISALLOWED).

    Also a ``ValueError``, which is what tiktoken raises here, so ``except ValueError``
    written for tiktoken catches it too.
    """


class UnknownTokenError(TokenizerError, KeyError):
    """An id (UNKNOWN_TOKEN_ID) or a piece (UNKNOWN_PIECE) is not in the vocabulary.

    Also a ``KeyError``, which is what tiktoken raises for an unknown id or piece,
    so ``except KeyError`` written for tiktoken catches it too.
    """


class FormatError(TokembedError):
    """A tokenizer or checkpoint file cannot be read faithfully; nothing was loaded."""


class MeasureError(TokembedError):
    """A corpus, partition or measurement request is inconsistent."""


class EmbeddingError(TokembedError):
    """An embedding-table contract was violated (ids, shapes, dtypes, state)."""


class ParallelError(TokembedError):
    """A sharding, routing or ownership contract was violated across ranks."""


class CheckpointError(TokembedError):
    """A checkpoint, alias graph or migration cannot be applied faithfully."""


class AuditError(TokembedError):
    """An audit before training found a pair, a table or an initial state that fails its contract."""


class HandoffError(TokembedError):
    """Rows handed to a model's first layer (positions, media, projected or assembled rows) break their contract."""


def require_choice(value: object, choices: Container[object], what: str, *, fix: str) -> None:
    """Refuse ``value`` unless it is one of ``choices`` (an option or configuration field).

    The one rule behind every "unknown join rule", "unknown regex dialect" ...: the
    message names ``what`` was asked for and the value as given.

    Example::

        >>> require_choice("tab", ("space", "bare"), "leading-space policy", fix="use 'space'")
        Traceback (most recent call last):
        ...
        tokembed.errors.UsageError: INVALID_ARGUMENT: unknown leading-space policy 'tab' — use 'space'

    Raises:
        UsageError INVALID_ARGUMENT: ``value`` is not in ``choices``.
    """
    if value not in choices:
        raise UsageError("INVALID_ARGUMENT", f"unknown {what} {value!r}", value=value, fix=fix)


def _rebuild(
    cls: type[TokembedError],
    code: str,
    message: str,
    value: object,
    fix: str | None,
    also: tuple[type[Exception], ...] = (),
) -> TokembedError:
    return cls(code, message, value=value, fix=fix, also=also)


# (family class, built-in types) -> the class deriving from all of them; seeded with the
# tokenizer's public classes, so a TokenizerError made with an unknown-id code is an
# UnknownTokenError: one class per code, whichever name the raise site uses.
_MIXED: dict[tuple[type[TokembedError], tuple[type[Exception], ...]], type[TokembedError]] = {
    (TokenizerError, (ValueError,)): DisallowedSpecialError,
    (TokenizerError, (KeyError,)): UnknownTokenError,
}
_FAMILY_OF: dict[type[TokembedError], type[TokembedError]] = {}


def _with_builtin(
    family: type[TokembedError], builtins: tuple[type[Exception], ...]
) -> type[TokembedError]:
    mixed = _MIXED.get((family, builtins))
    if mixed is None:
        # The family comes first in the MRO, so its one-line str() wins over KeyError's repr.
        mixed = type(family.__name__, (family, *builtins), {"__module__": __name__})
        mixed.__qualname__ = family.__qualname__  # tracebacks name the family
        _MIXED[family, builtins] = mixed
        _FAMILY_OF[mixed] = family
    return mixed
