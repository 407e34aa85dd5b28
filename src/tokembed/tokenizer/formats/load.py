"""One entry point that recognizes every tokenizer file tokembed reads.

:func:`load_tokenizer` accepts

* our JSON (``"format": "tokembed.tokenizer"``),
* a Hugging Face ``tokenizer.json`` (any JSON with a ``model`` object) or a folder holding one,
* a folder (or its ``vocab.json``) with GPT-2's ``vocab.json`` + ``merges.txt``,
* a folder holding exactly one ``.tiktoken`` file (what ``export_tiktoken`` writes),
* a ``.tiktoken`` file, or a file whose first line reads like one (``BASE64 RANK``),
  as a tiktoken rank file (``encoding=`` names its pattern and specials),
* a tiktoken encoding name that is not a path (``"o200k_base"``), through
  tiktoken's cache (see :mod:`~tokembed.tokenizer.formats.named`).

Any other file (a corpus ``.txt``, say) is refused as "not a tokenizer file".

``encoding=`` only makes sense for rank files; passing it with another kind is
a usage error rather than silently ignored.

Example::

    >>> load_tokenizer("/data/o200k_base.tiktoken", encoding="o200k_harmony")  # doctest: +SKIP
"""

from __future__ import annotations

import re
from pathlib import Path

from tokembed.errors import FormatError, UsageError
from tokembed.files.os_errors import input_error
from tokembed.tokenizer.formats._build import malformed
from tokembed.tokenizer.formats._io import read_json, require_file
from tokembed.tokenizer.formats.encodings import known_encodings, unknown_encoding
from tokembed.tokenizer.formats.gpt2_files import load_vocab_merges
from tokembed.tokenizer.formats.hf import from_hf_document, is_hf_document
from tokembed.tokenizer.formats.named import get_encoding
from tokembed.tokenizer.formats.native import from_document, is_native
from tokembed.tokenizer.formats.tiktoken_files import load_tiktoken
from tokembed.tokenizer.tokenizer import Tokenizer

__all__ = ["load_tokenizer"]


def _no_encoding(encoding: str | None, path: Path) -> None:
    if encoding is not None:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"encoding={encoding!r} applies to tiktoken rank files, but {path} is not one",
            value=encoding,
            fix="drop the encoding option for this file",
        )


_RANK_LINE = re.compile(rb"[A-Za-z0-9+/]+=*[ \t]+[0-9]+\r?\n?")
_KINDS = (
    "tokembed JSON, a HF tokenizer.json (or its folder), a .tiktoken rank file, "
    "a vocab.json + merges.txt folder, or an encoding name such as o200k_base"
)


def _looks_like_ranks(path: Path) -> bool:
    with path.open("rb") as f:
        first = f.readline(256)
    return _RANK_LINE.fullmatch(first) is not None


def _not_found(spec: str | Path) -> UsageError:
    text = str(spec)
    if "/" not in text and "." not in text and known_encodings():
        return unknown_encoding(text)  # a mistyped name rather than a path
    return UsageError(
        "FILE_NOT_FOUND",
        f"no such file, folder or encoding name: {text}",
        value=text,
        fix=f"pass {_KINDS}",
    )


def _looks_like_json(path: Path) -> bool:
    with path.open("rb") as f:
        head = f.read(64).lstrip()
    return head.startswith(b"{")


def load_tokenizer(path: str | Path, *, encoding: str | None = None) -> Tokenizer:
    """Load any supported tokenizer file, folder or encoding name (see the module docstring).

    Raises:
        UsageError(FILE_NOT_FOUND): nothing there, or a folder without a known file.
        UsageError(UNKNOWN_ENCODING): neither a path nor a known encoding name.
        UsageError(ENCODING_UNAVAILABLE): a name whose ranks are not cached, offline.
        UsageError(INVALID_ARGUMENT): ``encoding`` given for a file that is not a rank file.
        FormatError(UNSUPPORTED_TOKENIZER): a file of no kind listed above.
        UsageError(FILE_UNREADABLE, NAME_TOO_LONG): the OS refused to read it.
        FormatError: the file is malformed or cannot be represented (codes in each reader).
    """
    try:
        return _load(path, encoding)
    except OSError as exc:  # permissions, a name too long: the readers' own checks come first
        raise input_error(exc, Path(path)) from None


def _load(spec: str | Path, encoding: str | None) -> Tokenizer:
    path = Path(spec)
    if not path.exists():
        if str(spec) in known_encodings():
            return get_encoding(str(spec), encoding=encoding)
        raise _not_found(spec)
    if path.is_dir():
        if (path / "tokenizer.json").is_file():
            path = path / "tokenizer.json"
        elif (path / "vocab.json").is_file() and (path / "merges.txt").is_file():
            _no_encoding(encoding, path)
            return load_vocab_merges(path)
        elif len(rank_files := sorted(path.glob("*.tiktoken"))) == 1:
            path = rank_files[0]
        else:
            raise UsageError(
                "FILE_NOT_FOUND",
                f"{path} holds no tokenizer.json, vocab.json + merges.txt or single .tiktoken file",
                value=str(path),
                fix="pass a tokenizer file or a folder containing one",
            )
    require_file(path)
    if path.name == "vocab.json" and (path.parent / "merges.txt").is_file():
        _no_encoding(encoding, path)
        return load_vocab_merges(path.parent)
    if path.suffix != ".tiktoken" and _looks_like_json(path):
        _no_encoding(encoding, path)
        data = read_json(path)
        if is_native(data):
            return from_document(data, source=str(path))
        if is_hf_document(data):
            return from_hf_document(data, source=str(path))
        raise malformed(str(path), "JSON that is neither a tokembed nor a Hugging Face tokenizer")
    if path.suffix != ".tiktoken" and not _looks_like_ranks(path):
        raise FormatError(
            "UNSUPPORTED_TOKENIZER",
            f"{path} is not a tokenizer file tokembed reads",
            value=str(path),
            fix=f"pass {_KINDS}",
        )
    return load_tiktoken(path, encoding=encoding)
