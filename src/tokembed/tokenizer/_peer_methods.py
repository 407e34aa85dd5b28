"""The methods of tiktoken's and HF tokenizers' APIs that need more than a lookup.

:class:`~tokembed.tokenizer.tokenizer.Tokenizer` exposes these under the peers'
names (tiktoken's ``decode_with_offsets``, ``_encode_bytes``, ``encode_with_unstable``,
``encode_single_token``; HF's ``id_to_token``, ``token_to_id``, ``get_vocab``); they
are defined here on top of its public encode/decode methods, and tested against
the peers themselves on their own vocabularies.

Example::

    >>> char_offsets([b"a", b"\\xd0", b"\\x9f", b"b"])  # "aПb": the split letter starts at 1
    [0, 1, 1, 2]
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Protocol

from tokembed.errors import FormatError, UnknownTokenError, UsageError
from tokembed.tokenizer.bytes_unicode import bytes_to_token_text, token_text_to_bytes
from tokembed.tokenizer.encode import encode_chunk_reference
from tokembed.tokenizer.model import BPETables
from tokembed.tokenizer.pretokenize import Pretokenizer
from tokembed.tokenizer.special import SpecialSet, split_on_specials

__all__ = [
    "CoreTokenizer",
    "char_offsets",
    "encode_bytes",
    "hf_vocab",
    "id_to_token",
    "single_token",
    "token_to_id",
    "unstable_completions",
    "workers",
]


class CoreTokenizer(Protocol):
    """The encode/decode core these methods are built on (``tokenizer.Tokenizer`` has it);
    a protocol rather than an import keeps this module below ``tokenizer.py``."""

    pretokenizer: Pretokenizer
    tables: BPETables

    @property
    def _piece_ids(self) -> dict[bytes, int]: ...

    def encode_ordinary(self, text: str) -> list[int]: ...

    def encode(
        self,
        text: str,
        *,
        allowed_special: SpecialSet = ...,
        disallowed_special: SpecialSet = ...,
    ) -> list[int]: ...

    def decode_single_token_bytes(self, token: int) -> bytes: ...

    def decode_bytes(self, ids: Sequence[int]) -> bytes: ...

    def token_byte_values(self) -> list[bytes]: ...

    def id_to_token(self, id: int) -> str | None: ...


_WHITESPACE_BYTES = frozenset(b" \n\t")


def _is_continuation(byte: int) -> bool:
    return 0x80 <= byte < 0xC0


def char_offsets(pieces: Sequence[bytes]) -> list[int]:
    """Character offset, in the decoded text, at which each piece starts.

    A piece that begins inside a character (with a UTF-8 continuation byte) is
    given the offset of that character.
    """
    out: list[int] = []
    chars = 0  # characters started so far = bytes that are not continuation bytes
    for piece in pieces:
        inside = bool(piece) and _is_continuation(piece[0])
        out.append(max(0, chars - inside))
        chars += sum(not _is_continuation(b) for b in piece)
    return out


def _last_chunk_tokens(tok: CoreTokenizer, text: str) -> tuple[list[int], int]:
    """Ids of ``text`` (no specials) and how many of them the last pre-token chunk gave,
    extended backwards over tokens made only of spaces, tabs and newlines (a split there
    may vanish when text is appended)."""
    chunks = tok.pretokenizer.split(text)
    ids = tok.encode_ordinary(text)
    last = len(tok.encode_ordinary(chunks[-1])) if chunks else 0
    return ids, _extend_over_space(tok, ids, last)


def _extend_over_space(tok: CoreTokenizer, ids: list[int], last: int) -> int:
    def spaces(i: int) -> bool:
        return set(tok.decode_single_token_bytes(i)) <= _WHITESPACE_BYTES

    if last and spaces(ids[len(ids) - last]):
        while last < len(ids) and spaces(ids[len(ids) - last - 1]):
            last += 1
    return last


def _bpe_bytes(tok: CoreTokenizer, data: bytes) -> list[int]:
    """BPE of ``data`` as one chunk (no pre-tokenization), or its single id if it is a piece."""
    single = tok._piece_ids.get(data)
    return [single] if single is not None else encode_chunk_reference(tok.tables, data)


def encode_bytes(tok: CoreTokenizer, data: bytes) -> list[int]:
    """Ids of bytes that may not be UTF-8, as tiktoken's ``_encode_bytes`` defines them:
    the valid prefix is encoded as text, then the bytes of its last chunk plus the
    invalid rest are merged as one chunk. ``decode_bytes`` returns ``data`` exactly."""
    try:
        return tok.encode_ordinary(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        valid = exc.start
    ids, last = _last_chunk_tokens(tok, data[:valid].decode("utf-8"))
    keep = len(ids) - last
    rest = tok.decode_bytes(ids[keep:]) + data[valid:]
    return ids[:keep] + _bpe_bytes(tok, rest)


def _covering(tok: CoreTokenizer, ids: list[int], n_bytes: int) -> tuple[int, ...]:
    seq: list[int] = []
    covered = 0
    for i in ids:
        seq.append(i)
        covered += len(tok.decode_single_token_bytes(i))
        if covered >= n_bytes:
            break
    return tuple(seq)


def unstable_completions(
    tok: CoreTokenizer, text: str, allowed: frozenset[str]
) -> tuple[list[int], set[tuple[int, ...]]]:
    """Stable ids of ``text`` and the id sequences that could follow them once text is appended.

    The ids of the last pre-token chunk may change when more text arrives, so they are
    left out of the stable part; each completion, appended to it, decodes to bytes that
    start with ``text`` (tiktoken's ``encode_with_unstable`` contract).
    """
    segments = list(split_on_specials(text, allowed))
    if not segments or segments[-1][1]:
        return tok.encode(text, allowed_special=allowed, disallowed_special=frozenset()), set()
    head = text[: len(text) - len(segments[-1][0])]
    stable = tok.encode(head, allowed_special=allowed, disallowed_special=frozenset())
    ids, last = _last_chunk_tokens(tok, segments[-1][0])
    stable += ids[: len(ids) - last]
    unstable = tok.decode_bytes(ids[len(ids) - last :])
    if not unstable:
        return stable, set()
    values = tok.token_byte_values()

    def starting_with(prefix: bytes) -> list[bytes]:
        found = []
        k = bisect.bisect_left(values, prefix)
        while k < len(values) and values[k].startswith(prefix):
            found.append(values[k])
            k += 1
        return found

    completions: set[tuple[int, ...]] = {(tok._piece_ids[p],) for p in starting_with(unstable)}
    for cut in range(1, len(unstable)):
        prefix, suffix = unstable[:cut], unstable[cut:]
        for piece in starting_with(suffix):
            candidate = prefix + piece
            try:
                encoded = tok.encode_ordinary(candidate.decode("utf-8"))
            except UnicodeDecodeError:
                encoded = _bpe_bytes(tok, candidate)
            completions.add(_covering(tok, encoded, len(unstable)))
    # A trailing whitespace character can be split off by later text (gpt2's \s+(?!\S)).
    tail = unstable.decode("utf-8", "ignore")[-1:]
    if len(unstable) > 1 and tail.isspace():
        n = len(tail.encode("utf-8"))
        completions.add(tuple(_bpe_bytes(tok, unstable[:-n]) + _bpe_bytes(tok, unstable[-n:])))
    return stable, completions


def workers(workers: int, num_threads: int | None) -> int:
    """``workers``, or tiktoken's ``num_threads`` when that is the one given."""
    if num_threads is None or num_threads == workers:
        return workers
    if workers != 1:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"workers={workers} and num_threads={num_threads} disagree",
            value=(workers, num_threads),
            fix="give one of them (num_threads is tiktoken's name for workers)",
        )
    return num_threads


def single_token(tok: CoreTokenizer, text_or_bytes: str | bytes) -> int:
    """tiktoken's ``encode_single_token``: the id whose bytes or special name are exactly these."""
    data = text_or_bytes.encode("utf-8") if isinstance(text_or_bytes, str) else text_or_bytes
    found = tok._piece_ids.get(data)
    if found is None:
        found = tok.tables.specials.get(data.decode("utf-8", "replace"))
    if found is None:
        raise UnknownTokenError(
            "UNKNOWN_PIECE",
            f"{text_or_bytes!r} is not a single token of this tokenizer",
            value=text_or_bytes,
            fix="use encode() for text that spans several tokens",
        )
    return found


def id_to_token(tok: CoreTokenizer, id: int) -> str | None:
    """HF's spelling of an id: its special name, or its bytes as byte-level characters."""
    names = [n for n, sid in tok.tables.specials.items() if sid == id]
    if names:
        return names[0]
    piece = tok.tables.pieces.get(id)
    return None if piece is None else bytes_to_token_text(piece)


def token_to_id(tok: CoreTokenizer, token: str) -> int | None:
    """The id of an HF spelling (special name or byte-level characters), or None."""
    if token in tok.tables.specials:
        return tok.tables.specials[token]
    try:
        return tok._piece_ids.get(token_text_to_bytes(token))
    except FormatError:  # a character outside the byte-level table spells no piece
        return None


def hf_vocab(tok: CoreTokenizer) -> dict[str, int]:
    """HF's ``get_vocab``: spelling → id for every piece, special names included."""
    vocab = {tok.id_to_token(i) or "": i for i in tok.tables.pieces}
    vocab.update(tok.tables.specials)
    return vocab
