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

__all__ = [
    "CODES",
    "CheckpointError",
    "EmbeddingError",
    "FormatError",
    "MeasureError",
    "ParallelError",
    "TokembedError",
    "TokenizerError",
    "UsageError",
]

# Registry of stable codes, grouped by the package that raises them.
# A code, once published, keeps its meaning; add new ones, never rename.
CODES: dict[str, str] = {
    # --- usage (CLI and configuration) -----------------------------------
    "INVALID_ARGUMENT": "an option or configuration field has an invalid value",
    "FILE_NOT_FOUND": "an input path does not exist",
    "OUTPUT_EXISTS": "the output path is an input, or exists and overwriting was not asked for",
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
    # --- file formats ------------------------------------------------------
    "MALFORMED_RANKS": "a tiktoken rank file has a bad line, bad base64 or duplicate rank/bytes",
    "MALFORMED_TOKENIZER_FILE": "a tokenizer file is not valid JSON of the expected shape",
    "UNSUPPORTED_VERSION": "a file declares a format version this tokembed cannot read",
    "UNSUPPORTED_TOKENIZER": "a tokenizer file uses a model or component tokembed cannot represent",
    "MERGE_UNKNOWN_PIECE": "a merge names a piece the vocabulary does not contain",
    "HASH_MISMATCH": "a file's recorded content hash differs from its contents",
    # --- measure -----------------------------------------------------------
    "MALFORMED_CONLLU": "a CoNLL-U file lacks sentence ids or text lines",
    "UNALIGNED_PARALLEL_CORPUS": "parallel files do not share the same sentence ids in order",
    "EMPTY_WORD_DEFINITION": "the word regex matches nothing in the corpus",
    "VOCAB_BELOW_ID_RANGE": "a model allocates fewer rows V than the tokenizer's id range R",
    "INVALID_PARTITION": "a partition rule is unknown or leaves a side empty",
    "UNREADABLE_INPUT": "an input text file cannot be read (permissions, a damaged .gz)",
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
    "DOUBLE_SCALING": "a numerical ledger finds a scale applied twice",
    "MASTER_COPY_ASSUMED": "a numerical ledger declares an fp32 master copy that does not exist",
    "INVALID_CONFIG": "a model config lacks the fields a calculation needs",
    "MISSING_GRADIENT": "a table has no gradient where one was required (backward not run)",
    "SCALE_MISMATCH": "an observed lookup scale is not a power of the declared input scale",
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
    # --- migrate -----------------------------------------------------------
    "NOT_APPEND_ONLY": "a change required to be append-only moves, removes or rewrites an old id",
    "SEMANTICS_CHANGED": "the pre-tokenizer changed, so equal pieces are not proved equal symbols",
    "APPROXIMATE_AS_EXACT": "an initialized row is recorded as an exact copy of an old row",
    "ROW_MAP_INVALID": "a row map is not injective or names rows outside the tables",
    "ROW_COUNT_MISMATCH": "a vocabulary table's rows disagree with its tokenizer's id range",
    "TABLE_ROLE_SWAPPED": "a table bound to one vocabulary is used where another's table belongs",
    "TABLE_SIZED_FOR_OTHER_VOCAB": "a table has the row count of another vocabulary than its own",
    "TIE_NOT_SHARED": "a declared tie is two tensors, not one parameter and storage",
    "VOCAB_AXIS_STALE": "a vocabulary-indexed tensor was left at the old vocabulary size",
    "PRESERVED_ROW_CHANGED": "a row or moment the row map preserves differs from its source",
    "OPTIMIZER_STEP_RESET": "a migrated optimizer state lost its step (age) or its moments",
    "FROZEN_ROW_MOVED": "a row declared frozen changed during training",
    "PROBABILITY_SHIFT": "new rows moved old-token probabilities beyond the declared budget",
    "STALE_PACK": "a derived (quantized, packed) artifact was not regenerated from the migrated table",
    "VERSION_PAIR_REJECTED": "a tokenizer/model pair is not an admitted version pair",
    "ROLLBACK_INCOMPLETE": "a rollback restores the model without its tokenizer (or keeps foreign ids)",
    "MANIFEST_MISMATCH": "a release manifest does not bind the artifacts presented with it",
    "GATE_NOT_PASSED": "a release stage was entered before the gates it needs passed",
}


class TokembedError(Exception):
    """Base of every error tokembed raises on purpose.

    Attributes:
        code: stable registered code, e.g. ``"ID_OUT_OF_RANGE"``.
        value: the offending value (an id, a path, a position...), or None.
        fix: one sentence saying what to do instead, or None.
    """

    exit_code: int = 1

    def __init__(
        self,
        code: str,
        message: str,
        *,
        value: object = None,
        fix: str | None = None,
    ) -> None:
        assert code in CODES, f"unregistered error code {code!r}"
        self.code = code
        self.message = message
        self.value = value
        self.fix = fix
        super().__init__(self.__str__())

    def __reduce__(self) -> tuple[object, ...]:
        # Rebuild with keywords so errors raised in worker processes unpickle in the
        # parent (the default reduce passes only args=(str,) and fails there).
        return (_rebuild, (type(self), self.code, self.message, self.value, self.fix))

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


def _rebuild(
    cls: type[TokembedError], code: str, message: str, value: object, fix: str | None
) -> TokembedError:
    return cls(code, message, value=value, fix=fix)
