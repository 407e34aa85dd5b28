"""The :class:`Tokenizer` facade: one object for encode, decode and the address hash.

It binds a :class:`Pretokenizer` to validated :class:`BPETables` and delegates:
``encode.py`` (the one check of a text, the reference encoder), ``compiled.py`` (the
compiled encoder), ``special.py`` (special-token policy), ``decode.py`` (bytes, text,
streams). It does not read or write files (``formats/`` does).

Example::

    >>> from tokembed.tokenizer import BPETables, Pretokenizer, Tokenizer
    >>> tok = Tokenizer(pretokenizer=Pretokenizer.preset("teaching"),
    ...                 tables=BPETables.byte_level(merges=[(104, 105)], specials={"<|end|>": 257}))
    >>> tok.encode("hi<|end|>", allowed_special="all")
    [256, 257]
    >>> tok.decode([256, 33])
    'hi!'

It also answers to the names tiktoken and Hugging Face ``tokenizers`` users reach
for first (``n_vocab``, ``eot_token``, ``decode_single_token_bytes``,
``encode_batch(num_threads=)``, ``token_to_id``, ``get_vocab_size``...), with their
meaning; ``docs/api.md`` lists them side by side and where we differ on purpose.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from tokembed.errors import TokenizerError
from tokembed.tokenizer import _batch, _peer_methods
from tokembed.tokenizer._utf8 import utf8_lines
from tokembed.tokenizer.compiled import CompiledEncoder, DeferredTables, compiled_tables
from tokembed.tokenizer.decode import DecodeTable, Errors, StreamDecoder
from tokembed.tokenizer.encode import (
    Encoder,
    ReferenceEncoder,
    TextCheck,
    encode_ordinary_reference,
)
from tokembed.tokenizer.model import BPETables, address_hash
from tokembed.tokenizer.pretokenize import Pretokenizer
from tokembed.tokenizer.special import SpecialSet, aliases, find_disallowed, split_on_specials

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Tokenizer"]

_EOT = "<|endoftext|>"
_T = TypeVar("_T")
_R = TypeVar("_R")


class Tokenizer:
    """Byte-level BPE tokenizer: pre-tokenizer + merge tables + special tokens.

    Raises (from its methods): TokenizerError with codes UNKNOWN_SPECIAL_TOKEN,
    LONE_SURROGATE, UNREPRESENTABLE_BYTE (encode), INVALID_UTF8 (decode);
    DisallowedSpecialError(SPECIAL_TOKEN_DISALLOWED), also a ``ValueError``;
    UnknownTokenError(UNKNOWN_TOKEN_ID, UNKNOWN_PIECE), also a ``KeyError``.
    """

    _tables: BPETables | None
    _deferred: DeferredTables | None  # a rank file's, until its tables are first needed
    _specials: dict[str, int]

    def __init__(
        self,
        *,
        pretokenizer: Pretokenizer,
        tables: BPETables | DeferredTables,
        name: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        self.pretokenizer = pretokenizer
        self.tables = tables
        self.name = name
        self.metadata: dict[str, str] = dict(metadata or {})

    @property
    def tables(self) -> BPETables:
        """The validated tables (deferred ones, a rank file's, are built on first access)."""
        if self._tables is None:
            assert self._deferred is not None
            self._tables = self._deferred.build()
        return self._tables

    @tables.setter
    def tables(self, tables: BPETables | DeferredTables) -> None:
        self._tables = tables if isinstance(tables, BPETables) else None
        self._deferred = tables if isinstance(tables, DeferredTables) else None
        self._specials = dict(tables.specials)
        for cached in ("_engine", "_check"):
            self.__dict__.pop(cached, None)

    def __repr__(self) -> str:
        return (
            f"Tokenizer(name={self.name!r}, merges={self.n_merges}, "
            f"specials={len(self.tables.specials)}, pretokenizer={self.pretokenizer.name!r})"
        )

    # Caches are rebuilt on demand, so pickling (for worker processes) stays small.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for cached in ("_engine", "_check", "_decoder", "_piece_ids", "_sorted_pieces"):
            state.pop(cached, None)
        # A deferred tokenizer sends the rank file, which the worker compiles again, not the
        # explicit tables built from it (unpickling and checking o200k's took ~1 s a worker).
        if state.get("_deferred") is not None:
            state["_tables"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        deferred = self._deferred
        if deferred is not None and deferred.native is None:  # no compiled module here
            self._tables, self._deferred = deferred.build(), None

    # --- identity ---------------------------------------------------------------
    # Cached like _engine (tables and pre-tokenizer are fixed after construction): it is
    # 0.37 s for o200k's 200k pieces, and AddressedIds.from_lists(source=tok) asks per batch.
    @cached_property
    def address_hash(self) -> str:
        """SHA-256 over pre-tokenizer stages, pieces, merges and specials (not metadata)."""
        if self._tables is None and self._deferred is not None:
            return self._deferred.address_hash(self.pretokenizer.stages)
        return address_hash(self.tables, self.pretokenizer.stages)

    @property
    def n_merges(self) -> int:
        return len(self.tables.merges)

    @property
    def special_tokens(self) -> dict[str, int]:
        return dict(self.tables.specials)

    @property
    def aliases(self) -> dict[int, tuple[str, ...]]:
        """Special ids with more than one name (e.g. o200k_harmony's id 200018)."""
        return aliases(self.tables.specials)

    @property
    def n_vocab(self) -> int:
        """tiktoken's ``n_vocab``: the id range R = largest id + 1 (holes included)."""
        if self._tables is None and self._deferred is not None:
            return self._deferred.id_range  # without deriving a rank file's merges
        return self.tables.id_range

    @property
    def max_token_value(self) -> int:
        """tiktoken's ``max_token_value``: the largest defined id."""
        return self.n_vocab - 1

    @property
    def eot_token(self) -> int:
        """tiktoken's ``eot_token``: the id of ``<|endoftext|>``; raises UNKNOWN_SPECIAL_TOKEN."""
        return self.special_id(_EOT)

    @property
    def special_tokens_set(self) -> set[str]:
        """tiktoken's ``special_tokens_set``: the registered special-token names."""
        return set(self.tables.specials)

    def piece(self, id: int) -> bytes:
        """Bytes of one id (a special id gives its name's UTF-8 spelling)."""
        return self._decoder.decode_bytes([id])

    def decode_single_token_bytes(self, token: int) -> bytes:
        """tiktoken's name for :meth:`piece`; an unknown id raises UnknownTokenError (a KeyError)."""
        return self._decoder.decode_bytes([token])

    def decode_tokens_bytes(self, tokens: Iterable[int]) -> list[bytes]:
        """The bytes of each id, one entry per id."""
        return [self._decoder.decode_bytes([t]) for t in tokens]

    @cached_property
    def _piece_ids(self) -> dict[bytes, int]:
        # bytes -> id of ordinary pieces; a trainer can give two ids one spelling: lowest wins.
        out: dict[bytes, int] = {}
        for i, piece in sorted(self.tables.pieces.items()):
            out.setdefault(piece, i)
        return out

    @cached_property
    def _sorted_pieces(self) -> list[bytes]:
        return sorted(self._piece_ids)

    def token_byte_values(self) -> list[bytes]:
        """The bytes of every ordinary piece, sorted (tiktoken's ``token_byte_values``)."""
        return self._sorted_pieces

    def encode_single_token(self, text_or_bytes: str | bytes) -> int:
        """The one id whose bytes (or special name) are exactly ``text_or_bytes``.

        Special names are found whether or not they are allowed in :meth:`encode`.

        Raises:
            UnknownTokenError(UNKNOWN_PIECE): no single id spells it (also a ``KeyError``).
        """
        return _peer_methods.single_token(self, text_or_bytes)

    # --- Hugging Face tokenizers' names -----------------------------------------
    def id_to_token(self, id: int) -> str | None:
        """HF's spelling of an id (byte-level characters, ``"Ġ"`` for a space), or None."""
        return _peer_methods.id_to_token(self, id)

    def token_to_id(self, token: str) -> int | None:
        """Id of an HF token spelling (special name or byte-level characters), or None."""
        return _peer_methods.token_to_id(self, token)

    def get_vocab(self, with_added_tokens: bool = True) -> dict[str, int]:
        """HF's ``get_vocab``: token spelling → id, special names included.

        Special tokens belong to the vocabulary itself (our HF export writes them into the
        model's vocab), so ``with_added_tokens`` changes nothing, as in HF on such a file.
        """
        return _peer_methods.hf_vocab(self)

    def get_vocab_size(self, with_added_tokens: bool = True) -> int:
        """HF's ``get_vocab_size``: how many spellings :meth:`get_vocab` holds (not R)."""
        return len(self.get_vocab(with_added_tokens))

    def truncated(self, n_merges: int) -> Tokenizer:
        """The tokenizer of the first ``n_merges`` merges (no retraining)."""
        return Tokenizer(
            pretokenizer=self.pretokenizer,
            tables=self.tables.truncated(n_merges),
            name=self.name,
            metadata=self.metadata,
        )

    # --- encoding ---------------------------------------------------------------
    @cached_property
    def _engine(self) -> Encoder:
        """The compiled encoder where it is built, else the reference (see ``implementation``)."""
        if self._tables is None and self._deferred is not None:
            return CompiledEncoder(self._deferred.native, self.pretokenizer)
        native = compiled_tables(self.tables)
        if native is None:
            return ReferenceEncoder(self.tables, self.pretokenizer)
        return CompiledEncoder(native, self.pretokenizer)

    @cached_property
    def _check(self) -> TextCheck:
        if self._tables is None and self._deferred is not None:
            return TextCheck(self._deferred.native.missing_bytes())
        return TextCheck(self.tables.missing_bytes())

    def _checked(self, run: Callable[[_T], _R], value: _T, check: Callable[[_T], _T]) -> _R:
        """``run(check(value))``: ``value`` is a text or texts, ``check`` the text check.

        Where the engine refuses on its own whatever the check would find (the compiled
        encoder: ``Encoder.refusals``), ``run`` sees ``value`` first, and the check runs
        only after a refusal, to join surrogate pairs or raise the error that names the
        character; text with nothing to find is never scanned by the check at all. (The
        check was 2-4% of a cold SmolLM2 call, whose vocabulary lacks a byte, even on ASCII.)
        """
        refusals = self._engine.refusals
        if refusals:
            try:
                return run(value)
            except refusals:
                pass
        return run(check(value))

    @property
    def implementation(self) -> str:
        """Which code computes the ids: ``"compiled"`` (the C core, where it is built) or
        ``"reference"`` (Python: no compiler, or ``TOKEMBED_PURE_PYTHON=1``)."""
        return self._engine.implementation

    def encode_ordinary(self, text: str) -> list[int]:
        """Ids of ``text``; special-token spellings are ordinary text.

        A surrogate pair (``"\\ud83d\\udc4d"``, as JSON decoding yields) encodes as the
        character it stands for; a lone surrogate raises LONE_SURROGATE (tiktoken
        would encode U+FFFD in its place); UNREPRESENTABLE_BYTE names a character the
        vocabulary cannot spell.
        """
        return self._checked(self._engine.encode, text, self._check)

    def encode_ordinary_reference(self, text: str) -> list[int]:
        """The slow, obviously correct path (:func:`~.encode.encode_chunk_reference` on every
        chunk, nothing remembered); always equal to :meth:`encode_ordinary`."""
        return encode_ordinary_reference(self.tables, self.pretokenizer, text)

    def encode(
        self,
        text: str,
        *,
        allowed_special: SpecialSet = frozenset(),
        disallowed_special: SpecialSet = "all",
    ) -> list[int]:
        """Ids of ``text`` with tiktoken's special-token policy.

        Allowed special spellings become their ids; by default any registered
        special spelling raises SPECIAL_TOKEN_DISALLOWED; ``disallowed_special=frozenset()``
        encodes them as ordinary text.
        """
        specials = self._specials
        allowed = find_disallowed(
            text, specials, allowed_special=allowed_special, disallowed_special=disallowed_special
        )
        if not allowed:
            return self.encode_ordinary(text)
        out: list[int] = []
        for segment, is_special in split_on_specials(text, allowed):
            if is_special:
                out.append(specials[segment])
            else:
                out += self.encode_ordinary(segment)
        return out

    def encode_batch(
        self,
        texts: Sequence[str],
        *,
        workers: int = 1,
        num_threads: int | None = None,
        allowed_special: SpecialSet = frozenset(),
        disallowed_special: SpecialSet = "all",
        progress: bool = True,
    ) -> list[list[int]]:
        """``[self.encode(t, ...) for t in texts]``, optionally with ``workers`` threads (on
        the compiled encoder) or processes (the reference encoder).

        ``num_threads`` is tiktoken's name for ``workers`` (give one of them); unlike
        tiktoken's default of 8, ours is 1. Worker processes are spawned (forking could
        inherit locks held by other threads), so scripts that use them need the
        ``if __name__ == "__main__":`` guard.

        Raises:
            UsageError(INVALID_ARGUMENT): both names given with different values, or < 1.
        """
        ordinary = not self._specials or all(
            not isinstance(s, str) and not s for s in (allowed_special, disallowed_special)
        )
        return _batch.encode_batch(
            self,
            texts,
            workers=_peer_methods.workers(workers, num_threads),
            options={"allowed_special": allowed_special, "disallowed_special": disallowed_special},
            progress=progress,
            many=self._encode_ordinary_many if ordinary else None,
        )

    def _encode_ordinary_many(self, texts: Sequence[str]) -> list[list[int]]:
        """:meth:`encode_ordinary` of each text; one compiled call when the scanner splits."""
        return self._checked(self._engine.encode_many, texts, self._check.many)

    def encode_ordinary_batch(
        self, texts: Sequence[str], *, num_threads: int = 1, progress: bool = True
    ) -> list[list[int]]:
        """:meth:`encode_ordinary` of each text (special spellings are ordinary text)."""
        return self.encode_batch(
            texts, num_threads=num_threads, disallowed_special=frozenset(), progress=progress
        )

    def encode_ordinary_batch_to_numpy(
        self, texts: Sequence[str], *, num_threads: int = 1
    ) -> tuple[np.ndarray[Any, np.dtype[np.uint32]], np.ndarray[Any, np.dtype[np.int64]]]:
        """:meth:`encode_ordinary` of each text as one ``uint32`` array and the
        ``len(texts) + 1`` offsets that cut it: text ``i``'s ids are
        ``ids[offsets[i]:offsets[i + 1]]``. No Python int per id is made (bulk
        tokenization, as fastokens' ``encode_batch_flat``). ``num_threads`` > 1 encodes
        runs of texts on that many threads (the compiled encoder; a batch under ~128k
        characters stays on one), with the same result. The compiled encoder's ids array
        is read-only (a view of the bytes it filled; ``.copy()`` to change it).

        Example::

            >>> ids, offsets = tok.encode_ordinary_batch_to_numpy(["hello", "", "world"])  # doctest: +SKIP
            >>> offsets.tolist()  # doctest: +SKIP
            [0, 1, 1, 2]

        Raises:
            TokenizerError(LONE_SURROGATE): a text has a surrogate without its partner.
            UsageError(INVALID_ARGUMENT): ``num_threads`` is not an integer >= 1.
        """
        many, join = self._engine.encode_many_numpy, self._engine.join_flat

        def flat(checked: Sequence[str]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
            return _batch.encode_batch_flat(
                self, checked, workers=num_threads, many=many, join=join
            )

        return self._checked(flat, texts, self._check.many)

    def encode_lines_to_numpy(
        self, data: bytes | bytearray | memoryview
    ) -> tuple[np.ndarray[Any, np.dtype[np.uint32]], np.ndarray[Any, np.dtype[np.int64]]]:
        """Each non-empty line of the UTF-8 bytes ``data`` encoded as one text by
        :meth:`encode_ordinary`: lines are cut at line feeds and a carriage return that ends
        a line is dropped, as a corpus with one document per line is read. The same ids and
        offsets as :meth:`encode_ordinary_batch_to_numpy` of those lines, from one compiled
        call that makes no ``str`` per line.

        Example::

            >>> ids, offsets = tok.encode_lines_to_numpy(b"hello\\r\\n\\nworld\\n")  # doctest: +SKIP
            >>> offsets.tolist()  # doctest: +SKIP
            [0, 1, 2]

        Raises:
            TokenizerError(INVALID_UTF8): ``data`` is not UTF-8 (value: the bad byte's offset).
            TokenizerError(UNREPRESENTABLE_BYTE): a character needs a byte without an id.
        """
        if self._check.missing:  # the checked path names the character that needs it
            return self.encode_ordinary_batch_to_numpy(utf8_lines(data))
        return self._engine.encode_lines_numpy(data)

    def encode_to_numpy(
        self,
        text: str,
        *,
        allowed_special: SpecialSet = frozenset(),
        disallowed_special: SpecialSet = "all",
    ) -> np.ndarray[Any, np.dtype[np.uint32]]:
        """:meth:`encode` as a ``uint32`` NumPy array, as tiktoken returns it."""
        import numpy as np

        policy = {"allowed_special": allowed_special, "disallowed_special": disallowed_special}
        if not find_disallowed(text, self._specials, **policy):
            # no list in between
            return self._checked(self._engine.encode_numpy, text, self._check)
        ids = self.encode(
            text, allowed_special=allowed_special, disallowed_special=disallowed_special
        )
        return np.asarray(ids, dtype=np.uint32)

    def _encode_bytes(self, data: bytes) -> list[int]:
        """Ids of bytes that need not be UTF-8 (tiktoken's private ``_encode_bytes``);
        ``decode_bytes`` gives ``data`` back exactly."""
        return _peer_methods.encode_bytes(self, data)

    def encode_with_unstable(
        self,
        text: str,
        *,
        allowed_special: SpecialSet = frozenset(),
        disallowed_special: SpecialSet = "all",
    ) -> tuple[list[int], set[tuple[int, ...]]]:
        """Stable ids of ``text`` and the id sequences that may complete it (tiktoken's
        ``encode_with_unstable``): ``decode_bytes(stable + list(c))`` starts with ``text``
        for every completion ``c``. Raises as :meth:`encode`."""
        allowed = find_disallowed(
            text,
            self.tables.specials,
            allowed_special=allowed_special,
            disallowed_special=disallowed_special,
        )
        return _peer_methods.unstable_completions(self, text, allowed)

    # --- decoding ---------------------------------------------------------------
    @cached_property
    def _decoder(self) -> DecodeTable:
        if self._tables is None and self._deferred is not None:
            # A rank file's merges are derived on first use of .tables (seconds for o200k,
            # more for long crafted pieces); decoding needs only the pieces.
            return DecodeTable.from_pieces(self._deferred.pieces(), self._deferred.specials)
        return DecodeTable.from_tables(self.tables)

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        return self._decoder.decode_bytes(ids)

    def decode(self, ids: Iterable[int], *, errors: Errors = "strict") -> str:
        """Text of ``ids``; ``errors="strict"`` raises INVALID_UTF8 with the byte offset.

        ``"replace"`` (tiktoken's default) shows U+FFFD, ``"ignore"`` drops invalid bytes.
        """
        return self._decoder.decode(ids, errors=errors)

    def decode_batch(
        self, batch: Iterable[Iterable[int]], *, errors: Errors = "strict"
    ) -> list[str]:
        """:meth:`decode` of each id sequence."""
        return [self._decoder.decode(ids, errors=errors) for ids in batch]

    def decode_bytes_batch(self, batch: Iterable[Iterable[int]]) -> list[bytes]:
        """:meth:`decode_bytes` of each id sequence."""
        return [self._decoder.decode_bytes(ids) for ids in batch]

    def decode_with_offsets(self, tokens: Sequence[int]) -> tuple[str, list[int]]:
        """Strictly decoded text and the character offset at which each token starts (a
        token starting inside a character gets that character's offset)."""
        pieces = self.decode_tokens_bytes(tokens)
        text = self._decoder.decode(tokens, errors="strict")
        return text, _peer_methods.char_offsets(pieces)

    def stream_decoder(self, *, errors: Errors = "strict") -> StreamDecoder:
        """A decoder for ids arriving in pieces (holds an unfinished UTF-8 suffix)."""
        return self._decoder.stream(errors=errors)

    def special_id(self, name: str) -> int:
        """Id of a special-token name; raises UNKNOWN_SPECIAL_TOKEN."""
        try:
            return self.tables.specials[name]
        except KeyError:
            raise TokenizerError(
                "UNKNOWN_SPECIAL_TOKEN",
                f"{name!r} is not a special token of this tokenizer",
                value=name,
                fix=f"use one of {sorted(self.tables.specials)[:5]}...",
            ) from None
