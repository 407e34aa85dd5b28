"""The manifest of a shard folder: which tokenizer, which inputs, which shards are complete.

``manifest.json`` is written when a run starts (every planned shard listed, none
complete), again after each shard is finished, and last with ``complete: true``; it is the
commit point of the folder: a shard counts only once the manifest lists it complete, with
the SHA-256 of each of its files. It records the tokenizer's address hash (so ids are
never read against another vocabulary), the SHA-256 and size of every input, the options
that decide the ids (shard format, dtype, document rule, EOT policy, UTF-8 policy, shard size)
and, per shard, the byte ranges of the inputs it holds and its document and token counts.
It holds no times, paths of the machine or worker counts: two runs over the same inputs
write the same bytes.

Example::

    >>> m = read_manifest(Path("shards"))  # doctest: +SKIP
    >>> m.address_hash, m.documents, m.tokens, m.complete  # doctest: +SKIP
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tokembed.tokenizer.shards.options import FORMATS
from tokembed.tokenizer.shards.shard_formats import DTYPES, malformed_shards, shard_files

__all__ = ["MANIFEST", "InputRecord", "Manifest", "ShardEntry", "manifest_bytes", "read_manifest"]

MANIFEST = "manifest.json"
_KIND = "tokembed-shards"
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True, kw_only=True)
class InputRecord:
    """One input file: its path as given, the SHA-256 of its bytes as stored, their count."""

    path: str
    sha256: str
    bytes: int


@dataclass(frozen=True, kw_only=True)
class ShardEntry:
    """One planned shard: ``ranges`` are (input index, start, stop or None) in order.

    ``text_bytes`` counts the UTF-8 bytes of its documents' text (after decompression);
    ``files`` maps each of its files to its SHA-256 once the shard is complete (None before).
    """

    name: str
    ranges: tuple[tuple[int, int, int | None], ...]
    documents: int = 0
    tokens: int = 0
    text_bytes: int = 0
    files: dict[str, str] | None = None

    @property
    def complete(self) -> bool:
        return self.files is not None


@dataclass(frozen=True, kw_only=True)
class Manifest:
    """Everything ``manifest.json`` says (see the module docstring)."""

    address_hash: str
    tokenizer_name: str | None
    id_range: int
    eot_id: int | None
    format: str
    dtype: str
    doc: str
    field: str
    input_format: str
    errors: str
    shard_bytes: int
    inputs: tuple[InputRecord, ...]
    shards: tuple[ShardEntry, ...]

    @property
    def complete(self) -> bool:
        """Every planned shard is written."""
        return all(s.complete for s in self.shards)

    @property
    def documents(self) -> int:
        return sum(s.documents for s in self.shards)

    @property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.shards)

    @property
    def text_bytes(self) -> int:
        """UTF-8 bytes of all documents' text (a compressed input counts unpacked)."""
        return sum(s.text_bytes for s in self.shards)

    def settings(self) -> dict[str, Any]:
        """What decides the ids: equal settings and inputs give equal shards."""
        data = _to_json(self)
        return {
            k: v
            for k, v in data.items()
            if k not in ("complete", "shards", "documents", "tokens", "text_bytes")
        }

    def with_shard(self, entry: ShardEntry) -> Manifest:
        """This manifest with the shard of the same name replaced by ``entry``."""
        shards = tuple(entry if s.name == entry.name else s for s in self.shards)
        return replace(self, shards=shards)


def _to_json(m: Manifest) -> dict[str, Any]:
    return {
        "format": _KIND,
        "version": 1,
        "complete": m.complete,
        "tokenizer": {
            "address_hash": m.address_hash,
            "name": m.tokenizer_name,
            "id_range": m.id_range,
            "eot_id": m.eot_id,
        },
        "shard_format": m.format,
        "dtype": m.dtype,
        "eot": m.eot_id is not None,
        "doc": m.doc,
        "field": m.field,
        "input_format": m.input_format,
        "errors": m.errors,
        "shard_bytes": m.shard_bytes,
        "documents": m.documents,
        "tokens": m.tokens,
        "text_bytes": m.text_bytes,
        "inputs": [{"path": i.path, "sha256": i.sha256, "bytes": i.bytes} for i in m.inputs],
        "shards": [
            {
                "name": s.name,
                "ranges": [list(r) for r in s.ranges],
                "documents": s.documents,
                "tokens": s.tokens,
                "text_bytes": s.text_bytes,
                "files": s.files,
            }
            for s in m.shards
        ],
    }


def manifest_bytes(m: Manifest) -> bytes:
    """The manifest as written: indented JSON, keys in a fixed order, a final line feed."""
    return (json.dumps(_to_json(m), indent=1, ensure_ascii=False) + "\n").encode()


class _Reader:
    """Typed access to a JSON document, every mistake a MALFORMED_SHARDS naming the key."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def get(self, obj: object, key: str, kind: type | tuple[type, ...], where: str = "") -> Any:
        if not isinstance(obj, dict) or key not in obj:
            raise malformed_shards(self.path, f"{where}{key!r} is missing")
        value = obj[key]
        if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            raise malformed_shards(self.path, f"{where}{key!r} has the wrong type")
        if not isinstance(value, kind):
            raise malformed_shards(self.path, f"{where}{key!r} has the wrong type")
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            raise malformed_shards(self.path, f"{where}{key!r} is negative")
        return value

    def sha256(self, value: object, where: str) -> str:
        if not isinstance(value, str) or len(value) != 64 or not set(value) <= _HEX:
            raise malformed_shards(self.path, f"{where} is not a SHA-256")
        return value


def _shard(r: _Reader, raw: object, i: int, n_inputs: int, format: str) -> ShardEntry:
    where = f"shards[{i}]."
    name = r.get(raw, "name", str, where)
    if not name or "/" in name or name.startswith("."):
        raise malformed_shards(r.path, f"{where}name {name!r} is not a file name")
    ranges = []
    for item in r.get(raw, "ranges", list, where):
        ok = isinstance(item, list) and len(item) == 3
        ok = ok and all(isinstance(x, int) and not isinstance(x, bool) for x in item[:2])
        ok = ok and (
            item[2] is None or (isinstance(item[2], int) and not isinstance(item[2], bool))
        )
        if not ok or not 0 <= item[0] < n_inputs or item[1] < 0:
            raise malformed_shards(r.path, f"{where}ranges has a bad entry {item!r}")
        ranges.append((item[0], item[1], item[2]))
    files = raw.get("files") if isinstance(raw, dict) else None
    if files is not None:
        if not isinstance(files, dict) or set(files) != set(shard_files(name, format)):
            raise malformed_shards(r.path, f"{where}files are not the files of a {format} shard")
        files = {k: r.sha256(v, f"{where}files[{k!r}]") for k, v in files.items()}
    return ShardEntry(
        name=name,
        ranges=tuple(ranges),
        documents=r.get(raw, "documents", int, where),
        tokens=r.get(raw, "tokens", int, where),
        text_bytes=r.get(raw, "text_bytes", int, where),
        files=files,
    )


def read_manifest(folder: Path) -> Manifest:
    """The manifest of the shard folder ``folder``, checked field by field.

    Raises:
        FormatError(MALFORMED_SHARDS): no ``manifest.json``, or it is not JSON of the
            expected shape (a missing or mistyped field, an unknown shard format or dtype).
    """
    path = Path(folder) / MANIFEST
    try:
        data = json.loads(path.read_bytes())
    except OSError as exc:
        raise malformed_shards(path, f"cannot be read ({exc.strerror or exc})") from None
    except (ValueError, RecursionError):
        raise malformed_shards(path, "not JSON") from None
    r = _Reader(path)
    if r.get(data, "format", str) != _KIND or r.get(data, "version", int) != 1:
        raise malformed_shards(path, f"not a version 1 {_KIND} manifest")
    tok = r.get(data, "tokenizer", dict)
    address_hash = r.get(tok, "address_hash", str, "tokenizer.")
    if not address_hash.startswith("sha256:"):
        raise malformed_shards(path, "tokenizer.address_hash is not 'sha256:<hex>'")
    r.sha256(address_hash.removeprefix("sha256:"), "tokenizer.address_hash")
    name = r.get(tok, "name", (str, type(None)), "tokenizer.")
    eot_id = r.get(tok, "eot_id", (int, type(None)), "tokenizer.")
    shard_format = r.get(data, "shard_format", str)
    dtype = r.get(data, "dtype", str)
    if shard_format not in FORMATS or dtype not in DTYPES:
        raise malformed_shards(path, f"unknown shard format {shard_format!r} or dtype {dtype!r}")
    inputs = []
    for i, raw in enumerate(r.get(data, "inputs", list)):
        where = f"inputs[{i}]."
        inputs.append(
            InputRecord(
                path=r.get(raw, "path", str, where),
                sha256=r.sha256(r.get(raw, "sha256", str, where), f"{where}sha256"),
                bytes=r.get(raw, "bytes", int, where),
            )
        )
    raw_shards = r.get(data, "shards", list)
    shards = tuple(_shard(r, s, i, len(inputs), shard_format) for i, s in enumerate(raw_shards))
    if len({s.name for s in shards}) != len(shards):
        raise malformed_shards(path, "two shards share a name")
    return Manifest(
        address_hash=address_hash,
        tokenizer_name=name,
        id_range=r.get(tok, "id_range", int, "tokenizer."),
        eot_id=eot_id,
        format=shard_format,
        dtype=dtype,
        doc=r.get(data, "doc", str),
        field=r.get(data, "field", str),
        input_format=r.get(data, "input_format", str),
        errors=r.get(data, "errors", str),
        shard_bytes=r.get(data, "shard_bytes", int),
        inputs=tuple(inputs),
        shards=shards,
    )
