"""tokembed's own tokenizer file: versioned JSON that names its address space by hash.

Layout (version 1)::

    {"format": "tokembed.tokenizer", "version": 1, "name": ..., "metadata": {...},
     "pretokenizer": {"name": ..., "stages": [regex, ...], "dialect": "tiktoken"},
     "specials": {"<|endoftext|>": 100257, ...},
     "pieces": [[id, "hex bytes"], ...],          # ids that no merge produces
     "merges": [[left, right, result], ...],      # rank order
     "ignore_merges": true,                       # only when set (rank files)
     "address_hash": "sha256:..."}

The hash (:func:`tokembed.tokenizer.model.address_hash`) covers stages,
pieces, merges, specials and ``ignore_merges`` but not name or metadata; loading recomputes it
and refuses a file whose recorded hash differs (edited by hand, truncated…).

Example::

    >>> save_tokenizer(tok, "out/tok.json")   # doctest: +SKIP
    >>> load_native("out/tok.json").address_hash == tok.address_hash  # doctest: +SKIP
    True
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tokembed.errors import FormatError
from tokembed.tokenizer.dialect import DIALECTS
from tokembed.tokenizer.formats._build import (
    build_pretokenizer,
    build_tables,
    malformed,
    require_version,
)
from tokembed.tokenizer.formats._io import read_json, write_atomic
from tokembed.tokenizer.model import address_hash
from tokembed.tokenizer.tokenizer import Tokenizer

__all__ = [
    "from_document",
    "is_native",
    "load_native",
    "save_tokenizer",
    "to_document",
]

_FORMAT_NAME = "tokembed.tokenizer"
_FORMAT_VERSION = 1
_KEYS = {
    "format",
    "version",
    "name",
    "metadata",
    "pretokenizer",
    "specials",
    "pieces",
    "merges",
    "ignore_merges",
    "address_hash",
}


def is_native(data: Any) -> bool:
    """Whether parsed JSON claims to be our format (any version)."""
    return isinstance(data, dict) and data.get("format") == _FORMAT_NAME


def to_document(tok: Tokenizer) -> dict[str, Any]:
    """The version-1 JSON document of ``tok``."""
    tables = tok.tables
    results = {m[2] for m in tables.merges}
    rule = {"ignore_merges": True} if tables.ignore_merges else {}
    return {
        "format": _FORMAT_NAME,
        "version": _FORMAT_VERSION,
        "name": tok.name,
        "metadata": dict(tok.metadata),
        "pretokenizer": tok.pretokenizer.to_dict(),
        "specials": dict(sorted(tables.specials.items(), key=lambda kv: (kv[1], kv[0]))),
        "pieces": [[i, tables.pieces[i].hex()] for i in sorted(tables.pieces) if i not in results],
        "merges": [list(m) for m in tables.merges],
        **rule,
        "address_hash": address_hash(tables, tok.pretokenizer.stages),
    }


def _dump(doc: dict[str, Any]) -> bytes:
    """JSON with one top-level key per line and one merge or piece per line (diffable)."""
    out = ["{"]
    for k, (key, value) in enumerate(doc.items()):
        if isinstance(value, list) and value and isinstance(value[0], list):
            body = ",\n    ".join(json.dumps(v, separators=(",", ":")) for v in value)
            text = f"[\n    {body}\n  ]"
        else:
            text = json.dumps(value, ensure_ascii=False)
        out.append(f"  {json.dumps(key)}: {text}" + ("," if k < len(doc) - 1 else ""))
    out.append("}\n")
    return "\n".join(out).encode("utf-8")


def save_tokenizer(tok: Tokenizer, path: str | Path, *, inputs: Iterable[str | Path] = ()) -> Path:
    """Write ``tok`` as our JSON file, atomically; returns the path.

    Raises:
        UsageError(OUTPUT_EXISTS): ``path`` is one of ``inputs`` or a folder.
    """
    return write_atomic(Path(path), _dump(to_document(tok)), inputs=[Path(p) for p in inputs])


def _int(source: str, what: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise malformed(source, f"{what} must be a non-negative integer", value=value)
    return value


def from_document(data: Any, *, source: str) -> Tokenizer:
    """A tokenizer from a parsed version-1 document (see the module docstring)."""
    if not is_native(data):
        raise malformed(source, f"not a {_FORMAT_NAME} document")
    require_version(
        source,
        "format",
        data.get("version"),
        _FORMAT_VERSION,
        fix="upgrade tokembed or re-save the tokenizer with this version",
    )
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise malformed(source, f"unknown key {unknown[0]!r}", value=unknown[0])
    pre, specials_raw, metadata = (
        data.get("pretokenizer"),
        data.get("specials"),
        data.get("metadata"),
    )
    if not isinstance(pre, dict) or not isinstance(pre.get("stages"), list):
        raise malformed(source, "'pretokenizer' must be {'name': ..., 'stages': [...]}", value=pre)
    if not all(isinstance(s, str) for s in pre["stages"]):
        raise malformed(source, "pretokenizer stages must be strings", value=pre["stages"])
    if not isinstance(specials_raw, dict) or not isinstance(metadata, dict):
        raise malformed(source, "'specials' and 'metadata' must be objects")
    specials = {str(k): _int(source, f"special {k!r}", v) for k, v in specials_raw.items()}
    pieces: dict[int, bytes] = {}
    for entry in _list(source, data, "pieces"):
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], str)):
            raise malformed(source, "each piece must be [id, hex]", value=entry)
        try:
            pieces[_int(source, "piece id", entry[0])] = bytes.fromhex(entry[1])
        except ValueError:
            raise malformed(source, "piece bytes are not hex", value=entry) from None
    merges: list[tuple[int, int, int]] = []
    for rank, entry in enumerate(_list(source, data, "merges")):
        if not (isinstance(entry, list) and len(entry) == 3):
            raise malformed(source, f"merge #{rank} must be [left, right, result]", value=entry)
        left, right, result = (_int(source, f"merge #{rank} id", v) for v in entry)
        for part in (left, right):
            if part not in pieces:
                raise FormatError(
                    "MERGE_UNKNOWN_PIECE",
                    f"{source}: merge #{rank} names id {part}, not defined before it",
                    value=entry,
                    fix="each merge may only join base pieces or results of earlier merges",
                )
        if result in pieces:
            raise malformed(
                source, f"merge #{rank} result id {result} is already used", value=entry
            )
        pieces[result] = pieces[left] + pieces[right]
        merges.append((left, right, result))
    rule = data.get("ignore_merges", False)
    if not isinstance(rule, bool):
        raise malformed(source, "'ignore_merges' must be true or false", value=rule)
    tables = build_tables(
        source, pieces=pieces, merges=merges, specials=specials, ignore_merges=rule
    )
    name, dialect = pre.get("name"), pre.get("dialect")
    if dialect not in DIALECTS:
        raise malformed(source, f"unknown pre-tokenizer dialect {dialect!r}", value=dialect)
    pretokenizer = build_pretokenizer(
        source, pre["stages"], name=name if isinstance(name, str) else None, dialect=dialect
    )
    actual = address_hash(tables, pretokenizer.stages)
    if data.get("address_hash") != actual:
        raise FormatError(
            "HASH_MISMATCH",
            f"{source}: recorded address hash {data.get('address_hash')!r} differs from "
            f"the contents' hash {actual}",
            value=data.get("address_hash"),
            fix="the file was edited or damaged; restore it or re-save it with tokembed",
        )
    file_name = data.get("name")
    return Tokenizer(
        pretokenizer=pretokenizer,
        tables=tables,
        name=file_name if isinstance(file_name, str) else None,
        metadata={str(k): str(v) for k, v in metadata.items()},
    )


def _list(source: str, data: dict[str, Any], key: str) -> list[Any]:
    value = data.get(key)
    if not isinstance(value, list):
        raise malformed(source, f"{key!r} must be a list", value=type(value).__name__)
    return value


def load_native(path: str | Path) -> Tokenizer:
    """Read our JSON file.

    Raises:
        UsageError(FILE_NOT_FOUND); FormatError(MALFORMED_TOKENIZER_FILE,
        UNSUPPORTED_VERSION, MERGE_UNKNOWN_PIECE, HASH_MISMATCH).
    """
    return from_document(read_json(Path(path)), source=str(path))
