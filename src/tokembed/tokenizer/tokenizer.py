"""The :class:`Tokenizer` facade: one object for encode, decode and the address hash.

It binds a :class:`Pretokenizer` to validated :class:`BPETables` and delegates:
``encode.py`` (ids), ``special.py`` (special-token policy), ``decode.py``
(bytes, text, streams). It does not read or write files (``formats/`` does).

Example::

    >>> from tokembed.tokenizer import BPETables, Pretokenizer, Tokenizer
    >>> tok = Tokenizer(pretokenizer=Pretokenizer.preset("teaching"),
    ...                 tables=BPETables.byte_level(merges=[(104, 105)], specials={"<|end|>": 257}))
    >>> tok.encode("hi<|end|>", allowed_special="all")
    [256, 257]
    >>> tok.decode([256, 33])
    'hi!'
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from typing import Any

from tokembed.errors import TokenizerError
from tokembed.tokenizer import _batch
from tokembed.tokenizer.decode import DecodeTable, Errors, StreamDecoder
from tokembed.tokenizer.encode import FastEncoder, encode_ordinary_reference
from tokembed.tokenizer.model import BPETables, address_hash
from tokembed.tokenizer.pretokenize import Pretokenizer
from tokembed.tokenizer.special import SpecialSet, aliases, find_disallowed, split_on_specials

__all__ = ["Tokenizer"]


class Tokenizer:
    """Byte-level BPE tokenizer: pre-tokenizer + merge tables + special tokens.

    Raises (from its methods): TokenizerError with codes SPECIAL_TOKEN_DISALLOWED,
    UNKNOWN_SPECIAL_TOKEN, LONE_SURROGATE, UNREPRESENTABLE_BYTE (encode);
    UNKNOWN_TOKEN_ID, INVALID_UTF8 (decode).
    """

    def __init__(
        self,
        *,
        pretokenizer: Pretokenizer,
        tables: BPETables,
        name: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        self.pretokenizer = pretokenizer
        self.tables = tables
        self.name = name
        self.metadata: dict[str, str] = dict(metadata or {})

    def __repr__(self) -> str:
        return (
            f"Tokenizer(name={self.name!r}, merges={self.n_merges}, "
            f"specials={len(self.tables.specials)}, pretokenizer={self.pretokenizer.name!r})"
        )

    # Caches are rebuilt on demand, so pickling (for worker processes) stays small;
    # a verified tiktoken eligibility travels along so workers skip re-checking it.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        fast = state.pop("_fast", None)
        state.pop("_decoder", None)
        if fast is not None:
            state["_verified"] = fast.backend == "tiktoken"
        return state

    # --- identity ---------------------------------------------------------------
    # Cached like _fast (tables and pre-tokenizer are fixed after construction): it is
    # 0.37 s for o200k's 200k pieces, and AddressedIds.from_lists(source=tok) asks per batch.
    @cached_property
    def address_hash(self) -> str:
        """SHA-256 over pre-tokenizer stages, pieces, merges and specials (not metadata)."""
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

    def piece(self, id: int) -> bytes:
        """Bytes of one id (a special id gives its name's UTF-8 spelling)."""
        return self._decoder.decode_bytes([id])

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
    def _fast(self) -> FastEncoder:
        verified = self.__dict__.get("_verified", False)
        return FastEncoder(self.tables, self.pretokenizer, verified=verified)

    @property
    def backend(self) -> str:
        """Engine of the fast path: ``"tiktoken"`` when exact for this vocabulary, else ``"cached"``."""
        return self._fast.backend

    def encode_ordinary(self, text: str) -> list[int]:
        """Ids of ``text``; special-token spellings are ordinary text."""
        return self._fast.encode_ordinary(text)

    def encode_ordinary_reference(self, text: str) -> list[int]:
        """The slow, obviously correct path; always equal to :meth:`encode_ordinary`."""
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
        special spelling raises SPECIAL_TOKEN_DISALLOWED; ``disallowed_special=()``
        encodes them as ordinary text.
        """
        specials = self.tables.specials
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
        allowed_special: SpecialSet = frozenset(),
        disallowed_special: SpecialSet = "all",
        progress: bool = True,
    ) -> list[list[int]]:
        """``[self.encode(t, ...) for t in texts]``, optionally with ``workers`` threads (on
        tiktoken's core) or processes (own encoder).

        Workers are spawned (forking could inherit locks held by tiktoken's threads),
        so scripts with ``workers > 1`` need the ``if __name__ == "__main__":`` guard.
        """
        return _batch.encode_batch(
            self,
            texts,
            workers=workers,
            options={"allowed_special": allowed_special, "disallowed_special": disallowed_special},
            progress=progress,
        )

    # --- decoding ---------------------------------------------------------------
    @cached_property
    def _decoder(self) -> DecodeTable:
        return DecodeTable.from_tables(self.tables)

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        return self._decoder.decode_bytes(ids)

    def decode(self, ids: Iterable[int], *, errors: Errors = "strict") -> str:
        """Text of ``ids``; ``errors="strict"`` raises INVALID_UTF8 with the byte offset."""
        return self._decoder.decode(ids, errors=errors)

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
