"""tiktoken's encodings by name (``get_encoding("o200k_base")``), through tiktoken's own cache.

A name is resolved by the tiktoken package's registered constructor, which reads
its rank file(s) with ``tiktoken.load``. That module keeps a download cache: the
folder ``$TIKTOKEN_CACHE_DIR``, else ``$DATA_GYM_CACHE_DIR``, else
``<tempdir>/data-gym-cache``, holding one file per address, named by the SHA-1
hex digest of the address and checked against the SHA-256 the constructor
expects. A cached file is read without network access; a missing one is
downloaded (and cached) by tiktoken when the machine is online. Offline,
ENCODING_UNAVAILABLE names the files it looked for and how to pass a rank file
instead. The ranks, pattern and special tokens are tiktoken's own objects, so
the result encodes id-for-id like ``tiktoken.get_encoding(name)``.

Example::

    >>> tok = get_encoding("cl100k_base")  # doctest: +SKIP
    >>> tok.encode("hello world"), tok.n_vocab  # doctest: +SKIP
    ([15339, 1917], 100277)
"""

from __future__ import annotations

import hashlib
import importlib
import os
import pkgutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tokembed.errors import TokenizerError, UsageError
from tokembed.tokenizer.formats._build import build_pretokenizer, malformed
from tokembed.tokenizer.formats.encodings import (
    OWN_ENCODINGS,
    encoding_spec,
    known_encodings,
    rank_addresses,
    unknown_encoding,
)
from tokembed.tokenizer.formats.ranks import ranks_to_tables
from tokembed.tokenizer.tokenizer import Tokenizer

__all__ = [
    "encoding_for_model",
    "encoding_name_for_model",
    "get_encoding",
    "list_encoding_names",
    "tiktoken_cache_dir",
]

# One tokenizer per (name, encoding, cache folder) and process, as tiktoken keeps one
# Encoding per name: loading o200k derives 200k merges (seconds), so load once.
_LOADED: dict[tuple[str, str, str | None], Tokenizer] = {}


def tiktoken_cache_dir() -> Path | None:
    """The folder tiktoken caches rank files in, or None when caching is disabled (``""``)."""
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            return Path(os.environ[var]) if os.environ[var] else None
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def _cache_file(address: str) -> Path | None:
    folder = tiktoken_cache_dir()
    key = hashlib.sha1(address.encode()).hexdigest()  # tiktoken's cache key
    return None if folder is None else folder / key


def list_encoding_names() -> list[str]:
    """Names :func:`get_encoding` knows (tiktoken's plugins; empty without tiktoken)."""
    return [n for n in known_encodings() if n not in OWN_ENCODINGS]


def _constructors() -> dict[str, Callable[[], Any]]:
    try:
        import tiktoken_ext
    except ImportError:
        return {}
    found: dict[str, Callable[[], Any]] = {}
    for info in pkgutil.iter_modules(tiktoken_ext.__path__, "tiktoken_ext."):
        table = getattr(importlib.import_module(info.name), "ENCODING_CONSTRUCTORS", None)
        if isinstance(table, dict):
            for name, ctor in table.items():
                found.setdefault(name, ctor)
    return found


def _unavailable(name: str, exc: BaseException) -> UsageError:
    files = [f"{a} (cache file {_cache_file(a) or 'none: caching disabled'})" for a in
             rank_addresses(name)]  # fmt: skip
    return UsageError(
        "ENCODING_UNAVAILABLE",
        f"the ranks of {name!r} are not in tiktoken's cache and could not be downloaded "
        f"({type(exc).__name__}); looked for {'; '.join(files) or 'no address'}",
        value=name,
        fix=(
            "go online once, copy the file to that cache path (or set TIKTOKEN_CACHE_DIR), "
            f"or pass the rank file itself, e.g. {name}.tiktoken"
        ),
    )


def _ranks_of(name: str) -> dict[bytes, int]:
    if name in OWN_ENCODINGS:
        raise UsageError(
            "ENCODING_UNAVAILABLE",
            f"{name!r} names a pattern and special tokens only; its ranks are not published "
            "through tiktoken",
            value=name,
            fix=f"pass its rank file with this encoding, e.g. {name}.tiktoken@{name}",
        )
    ctor = _constructors().get(name)
    if ctor is None:
        raise unknown_encoding(name)
    try:
        made = ctor()
    except Exception as exc:  # network, hash or import errors all mean "not available here"
        raise _unavailable(name, exc) from exc
    ranks: dict[bytes, int] = made["mergeable_ranks"]
    return ranks


def get_encoding(name: str, *, encoding: str | None = None) -> Tokenizer:
    """The tokenizer of tiktoken's encoding ``name`` (ranks from tiktoken's cache).

    ``encoding`` takes the pattern and special tokens from another encoding over the
    same ranks (``get_encoding("o200k_base", encoding="o200k_harmony")``).

    Raises:
        UsageError(UNKNOWN_ENCODING): tiktoken registers no such name.
        UsageError(ENCODING_UNAVAILABLE): the ranks are neither cached nor downloadable.
        FormatError(MALFORMED_TOKENIZER_FILE): the special ids collide with ranks.
    """
    key = (name, encoding or name, str(tiktoken_cache_dir()))
    if key in _LOADED:
        return _LOADED[key]
    ranks = _ranks_of(name)
    spec = encoding_spec(encoding or name)
    try:
        tables = ranks_to_tables(ranks, specials=spec.specials)
    except TokenizerError as exc:
        raise malformed(name, f"{exc.code}: {exc.message}", value=exc.value) from exc
    tok = Tokenizer(
        pretokenizer=build_pretokenizer(spec.name, [spec.pattern], dialect="tiktoken"),
        tables=tables,
        name=spec.name,
        metadata={"source_format": "tiktoken", "encoding": spec.name, "source": name},
    )
    _LOADED[key] = tok
    return tok


def encoding_name_for_model(model: str) -> str:
    """tiktoken's encoding name for an OpenAI model name (``"gpt-4o"`` → ``"o200k_base"``).

    Raises:
        UsageError(UNKNOWN_ENCODING): tiktoken maps no encoding to ``model``.
    """
    try:
        from tiktoken.model import encoding_name_for_model as lookup
    except ImportError:
        raise unknown_encoding(model) from None
    try:
        return str(lookup(model))
    except KeyError:
        raise UsageError(
            "UNKNOWN_ENCODING",
            f"tiktoken maps no encoding to the model name {model!r}",
            value=model,
            fix="name the encoding itself, e.g. get_encoding('o200k_base')",
        ) from None


def encoding_for_model(model: str) -> Tokenizer:
    """``get_encoding(encoding_name_for_model(model))``; raises as both do."""
    return get_encoding(encoding_name_for_model(model))
