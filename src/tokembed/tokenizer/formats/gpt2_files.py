"""GPT-2's original pair of files: ``vocab.json`` (spelling → id) and ``merges.txt``.

Both spell bytes with GPT-2's printable table (:mod:`~tokembed.tokenizer.bytes_unicode`); the
pre-tokenizer is GPT-2's regex as Hugging Face's ByteLevel applies it
(preset ``gpt2-hf``). ``merges.txt`` starts with a ``#version`` line, then one
``left right`` pair per line in rank order.

The pair has no notion of special tokens: GPT-2 simply lists
``<|endoftext|>`` (id 50256) in ``vocab.json``. Here an entry that is spelled
``<|…|>``, is longer than one byte and is produced by no merge is read as a
special token, so it is never matched inside ordinary text.

Example::

    >>> tok = load_vocab_merges("gpt2-hf")  # doctest: +SKIP
    >>> tok.tables.specials  # doctest: +SKIP
    {'<|endoftext|>': 50256}
"""

from __future__ import annotations

from pathlib import Path

import regex

from tokembed.tokenizer.formats._build import build_pretokenizer, build_tables, malformed
from tokembed.tokenizer.formats._io import read_bytes, read_json
from tokembed.tokenizer.formats.hf import tables_from_vocab
from tokembed.tokenizer.patterns import PATTERNS
from tokembed.tokenizer.tokenizer import Tokenizer

__all__ = ["load_vocab_merges"]

_SPECIAL_SPELLING = regex.compile(r"<\|[^|\s]+\|>")


def load_vocab_merges(folder: str | Path) -> Tokenizer:
    """A tokenizer from ``folder/vocab.json`` and ``folder/merges.txt``.

    Raises:
        UsageError(FILE_NOT_FOUND); FormatError(MALFORMED_TOKENIZER_FILE, MERGE_UNKNOWN_PIECE).
    """
    folder = Path(folder)
    vocab_path, merges_path = folder / "vocab.json", folder / "merges.txt"
    vocab = read_json(vocab_path)
    if not isinstance(vocab, dict):
        raise malformed(str(vocab_path), "vocab.json must map token spellings to ids")
    try:
        text = read_bytes(merges_path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise malformed(str(merges_path), f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    lines = [line for line in text.splitlines() if line and not line.startswith("#version")]
    if not lines:
        raise malformed(str(merges_path), "no merges (an empty merges.txt)")
    merged = {left + right for left, _, right in (line.partition(" ") for line in lines)}
    specials = {
        t: i
        for t, i in vocab.items()
        if _SPECIAL_SPELLING.fullmatch(t) and t not in merged and isinstance(i, int)
    }
    pieces, merges = tables_from_vocab(
        str(merges_path), vocab=vocab, merges=lines, specials=specials
    )
    return Tokenizer(
        pretokenizer=build_pretokenizer(
            str(folder), [PATTERNS["gpt2-hf"]], name="gpt2-hf", dialect="huggingface"
        ),
        tables=build_tables(str(folder), pieces=pieces, merges=merges, specials=specials),
        name=folder.name or None,
        metadata={"source_format": "gpt2-vocab-merges", "source": folder.name},
    )
