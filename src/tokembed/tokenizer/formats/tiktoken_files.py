"""Loading and exporting tiktoken rank files (with their pattern and specials).

A rank file alone does not define a tokenizer: the regex and the special
tokens come from, in this order,

1. ``encoding=`` — a name known to :func:`~.encodings.encoding_spec`
   (tiktoken's plugins or our own table, e.g. ``"qwen"``);
2. a sidecar ``<file>.tiktoken.json`` beside the rank file (what :func:`export_tiktoken`
   writes: ``{"format": ..., "version": 1, "name", "pat_str", "special_tokens"}``,
   the keyword arguments of ``tiktoken.Encoding``, and ``ranks_sha256``, the hash of the
   rank file it was written with, which loading checks: a rank file and a sidecar from
   two different exports are refused instead of giving wrong special-token ids);
3. the file's stem when it is a known encoding name (``o200k_base.tiktoken``).

Anything else is refused rather than guessed.

A rank file means tiktoken's rule: join the adjacent pair whose concatenated bytes
have the lowest rank. When the compiled encoder is built, loading parses the file
in C and encodes with that rule directly; the explicit merge list
(:func:`~.ranks.ranks_to_tables`, under a second for 200k ranks) is derived only when
something needs the tables (decoding, export, the address hash, ...), and then
kept in a user cache folder keyed by the file's SHA-256 (:mod:`._derived_cache`),
so a later process reads it back instead of deriving it again.

Example::

    >>> tok = load_tiktoken("o200k_base.tiktoken", encoding="o200k_harmony")  # doctest: +SKIP
    >>> len(tok.tables.specials)  # doctest: +SKIP
    1091
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from tokembed.errors import FormatError, TokenizerError
from tokembed.files.atomic import write_files_atomic
from tokembed.tokenizer.compiled import DeferredTables, compiled_rank_tables
from tokembed.tokenizer.formats._build import build_pretokenizer, malformed, require_version
from tokembed.tokenizer.formats._derived_cache import cached_address_hash, cached_merges
from tokembed.tokenizer.formats._io import read_bytes, read_json
from tokembed.tokenizer.formats.encodings import EncodingSpec, encoding_spec, known_encodings
from tokembed.tokenizer.formats.ranks import (
    format_ranks,
    parse_ranks,
    ranks_to_tables,
    tables_to_ranks,
)
from tokembed.tokenizer.model import BPETables, address_hash
from tokembed.tokenizer.tokenizer import Tokenizer

__all__ = ["export_tiktoken", "load_tiktoken"]

_SIDECAR_FORMAT = "tokembed.tiktoken-sidecar"
_SIDECAR_VERSION = 1
_HASH_KEY = "ranks_sha256"
# tiktoken stores ranks as u32; a special id at or past this cannot be written for it.
_RANK_LIMIT = 2**32


def _sidecar_spec(path: Path, ranks_data: bytes) -> EncodingSpec:
    data = read_json(path)
    if not isinstance(data, dict) or data.get("format") != _SIDECAR_FORMAT:
        raise malformed(str(path), f"not a {_SIDECAR_FORMAT} file")
    require_version(
        str(path),
        "sidecar",
        data.get("version"),
        _SIDECAR_VERSION,
        fix="upgrade tokembed or re-export the tokenizer",
    )
    pattern, specials, name = data.get("pat_str"), data.get("special_tokens"), data.get("name")
    if not isinstance(pattern, str) or not isinstance(specials, dict):
        raise malformed(str(path), "sidecar needs 'pat_str' (string) and 'special_tokens' (object)")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in specials.values()):
        raise malformed(str(path), "special token ids must be integers", value=specials)
    if any(not k for k in specials):
        raise malformed(str(path), "a special token's name is empty", value="")
    recorded = data.get(_HASH_KEY)
    if recorded is not None and recorded != hashlib.sha256(ranks_data).hexdigest():
        raise FormatError(
            "HASH_MISMATCH",
            f"{path} was written with a different rank file than the one beside it",
            value=recorded,
            fix="the export was interrupted or the files were mixed: export the tokenizer again",
        )
    return EncodingSpec(name=str(name or path.stem), pattern=pattern, specials=specials)


def _spec_for(path: Path, encoding: str | None, ranks_data: bytes) -> EncodingSpec:
    if encoding is not None:
        return encoding_spec(encoding)
    sidecar = path.with_name(path.name + ".json")
    if sidecar.is_file():
        return _sidecar_spec(sidecar, ranks_data)
    if path.stem in known_encodings():
        return encoding_spec(path.stem)
    raise FormatError(
        "UNSUPPORTED_TOKENIZER",
        f"{path}: a rank file has no pattern or special tokens, and none were named",
        value=str(path),
        fix=f"pass encoding= (one of {', '.join(known_encodings())}) or put {sidecar.name} beside it",
    )


def _rank_file_tables(data: bytes, specials: Mapping[str, int], source: str) -> BPETables:
    """The explicit tables of a rank file (merges from the digest-keyed cache when there)."""
    ranks = parse_ranks(data, source=source)
    merges = cached_merges(data, lambda: ranks_to_tables(ranks).merges)
    pieces = {rank: piece for piece, rank in ranks.items()}
    return BPETables(pieces=pieces, merges=merges, specials=dict(specials), ignore_merges=True)


def _rank_file_address_hash(
    data: bytes, specials: Mapping[str, int], source: str, stages: Sequence[str]
) -> str:
    """The address hash of a rank file's tokenizer, from the digest-keyed cache when there."""
    key = json.dumps({"stages": list(stages), "specials": sorted(specials.items())})
    return cached_address_hash(
        data, key, lambda: address_hash(_rank_file_tables(data, specials, source), stages)
    )


def _rank_file_pieces(data: bytes, source: str) -> dict[int, bytes]:
    """Id -> bytes of a rank file, without deriving its merges (what decoding needs)."""
    return {rank: piece for piece, rank in parse_ranks(data, source=source).items()}


def _native_ranks(data: bytes, specials: Mapping[str, int]) -> Any | None:
    """Compiled rank tables when the file and specials surely load without error, else None
    (then the Python parser runs and raises the precise error, or loads a corner case)."""
    tables = compiled_rank_tables(data)
    if tables is None:
        return None
    # Dense ranks 0..n-1 (all real files): a special id conflicts iff it is below n.
    dense = tables.max_rank + 1 == tables.size
    if tables.missing_bytes() or not dense:
        return None
    if any(not tables.size <= sid for sid in specials.values()):
        return None
    return tables


def load_tiktoken(path: str | Path, *, encoding: str | None = None) -> Tokenizer:
    """A tokenizer from a ``.tiktoken`` rank file; ids equal ranks, merges derived exactly
    (when the compiled encoder is built: on first use of the tables, see above).

    Raises:
        UsageError(FILE_NOT_FOUND); FormatError(MALFORMED_RANKS, UNSUPPORTED_TOKENIZER,
        UNSUPPORTED_VERSION, MALFORMED_TOKENIZER_FILE).
    """
    path = Path(path)
    data = read_bytes(path)
    spec = _spec_for(path, encoding, data)
    pretokenizer = build_pretokenizer(str(path), [spec.pattern], dialect="tiktoken")
    metadata = {"source_format": "tiktoken", "encoding": spec.name, "source": path.name}
    native = _native_ranks(data, spec.specials)
    if native is not None:
        deferred = DeferredTables(
            native=native,
            build=partial(_rank_file_tables, data, dict(spec.specials), str(path)),
            specials=dict(spec.specials),
            pieces=partial(_rank_file_pieces, data, str(path)),
            remake=partial(compiled_rank_tables, data),
            id_range=max([native.max_rank, *spec.specials.values()]) + 1,
            address_hash=partial(_rank_file_address_hash, data, dict(spec.specials), str(path)),
        )
        return Tokenizer(
            pretokenizer=pretokenizer, tables=deferred, name=spec.name, metadata=metadata
        )
    ranks = parse_ranks(data, source=str(path))
    missing = sorted(set(range(256)) - {p[0] for p in ranks if len(p) == 1})
    if missing:  # tiktoken's byte-pair encoding assumes every single byte has a rank
        raise FormatError(
            "MALFORMED_RANKS",
            f"{path} has no rank for {len(missing)} single bytes (first: 0x{missing[0]:02x})",
            value=missing[:16],
            fix="a rank file must give every one of the 256 bytes a rank",
        )
    try:
        tables = _rank_file_tables(data, spec.specials, str(path))
    except TokenizerError as exc:  # a special id that is also a rank: wrong encoding name
        raise malformed(str(path), f"{exc.code}: {exc.message}", value=exc.value) from exc
    return Tokenizer(pretokenizer=pretokenizer, tables=tables, name=spec.name, metadata=metadata)


def export_tiktoken(
    tok: Tokenizer, directory: str | Path, *, inputs: Iterable[str | Path] = ()
) -> Path:
    """Write ``<name>.tiktoken`` and its sidecar ``<name>.tiktoken.json`` into ``directory``.

    Returns the rank file's path. tiktoken reads it back as
    ``tiktoken.Encoding(mergeable_ranks=load_tiktoken_bpe(path), **sidecar)``
    (minus the ``format``, ``version`` and ``ranks_sha256`` keys). Both files are
    written completely before either is renamed into place, the sidecar last.

    Raises:
        FormatError(UNSUPPORTED_TOKENIZER): more than one pre-tokenizer stage, or merges
            that tiktoken's rank-based joining cannot reproduce (see ``tables_to_ranks``).
        FormatError(SPECIAL_ID_UNREPRESENTABLE): a special id tiktoken cannot store.
        UsageError(OUTPUT_EXISTS): a file to write is one of ``inputs``.
    """
    if len(tok.pretokenizer.stages) != 1:
        raise FormatError(
            "UNSUPPORTED_TOKENIZER",
            f"tiktoken has one regex; this tokenizer has {len(tok.pretokenizer.stages)} stages",
            value=list(tok.pretokenizer.stages),
            fix="export this tokenizer with --format hf instead",
        )
    ranks = tables_to_ranks(tok.tables)
    too_big = {k: v for k, v in tok.tables.specials.items() if not 0 <= v < _RANK_LIMIT}
    if too_big:
        raise FormatError(
            "SPECIAL_ID_UNREPRESENTABLE",
            f"tiktoken stores ids below 2^32; special tokens {sorted(too_big)} are not",
            value=too_big,
            fix="give the special tokens ids below 2^32, or export with --format hf",
        )
    directory = Path(directory)
    stem = tok.name or "tokenizer"
    sidecar: dict[str, Any] = {
        "format": _SIDECAR_FORMAT,
        "version": _SIDECAR_VERSION,
        "name": stem,
        "pat_str": tok.pretokenizer.stages[0],
        "special_tokens": dict(sorted(tok.tables.specials.items(), key=lambda kv: kv[1])),
    }
    rank_bytes = format_ranks(ranks)
    sidecar[_HASH_KEY] = hashlib.sha256(rank_bytes).hexdigest()
    rank_path, sidecar_path = directory / f"{stem}.tiktoken", directory / f"{stem}.tiktoken.json"
    text = json.dumps(sidecar, ensure_ascii=False, indent=2) + "\n"
    # The sidecar goes last: it names the rank file's hash, so it commits the pair.
    write_files_atomic(
        [(rank_path, rank_bytes), (sidecar_path, text.encode("utf-8"))],
        inputs=[Path(p) for p in inputs],
    )
    return rank_path
