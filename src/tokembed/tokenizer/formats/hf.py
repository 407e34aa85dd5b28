"""Hugging Face ``tokenizer.json`` (byte-level BPE): load and export.

Loading maps the file's components through the declarative tables in
``_hf_components`` and refuses anything that would encode differently
(normalizers, prefix spaces, dropout, byte fallback, templates that add
tokens, non-special added tokens). Added special tokens become specials even
when the vocabulary also lists them (SmolLM2 puts its 17 at ids 0–16).

A byte the vocabulary lacks is *not* dropped as HF does (SmolLM2 lacks 21
single bytes; HF encodes ``"a\\x04b"`` like ``"ab"``): tokembed's encoder
refuses it with ``UNREPRESENTABLE_BYTE``.

Export writes one ``Split`` (Isolated) per pre-tokenizer stage, spelled for
Oniguruma (:mod:`~tokembed.tokenizer.oniguruma`), followed by a regex-free ``ByteLevel``, so ``tokenizers.Tokenizer.from_file`` encodes like us.

Example::

    >>> tok = load_hf("smollm2-135m/tokenizer.json")  # doctest: +SKIP
    >>> sorted(tok.tables.specials.values())[:3]  # doctest: +SKIP
    [0, 1, 2]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tokembed.errors import FormatError
from tokembed.tokenizer.bytes_unicode import bytes_to_token_text, token_text_to_bytes
from tokembed.tokenizer.formats._build import (
    build_pretokenizer,
    build_tables,
    malformed,
    require_distinct_pieces,
)
from tokembed.tokenizer.formats._hf_components import (
    TOP_LEVEL_KEYS,
    check_component,
    pretokenizer_stages,
)
from tokembed.tokenizer.formats._io import read_json, write_atomic
from tokembed.tokenizer.oniguruma import to_onig
from tokembed.tokenizer.tokenizer import Tokenizer

__all__ = [
    "export_hf",
    "extend_hf_document",
    "from_hf_document",
    "is_hf_document",
    "load_hf",
    "tables_from_vocab",
    "write_hf_document",
]


def is_hf_document(data: Any) -> bool:
    """Whether parsed JSON looks like a ``tokenizer.json`` (has a ``model`` object)."""
    return isinstance(data, dict) and isinstance(data.get("model"), dict)


def _merge_pair(source: str, rank: int, entry: Any) -> tuple[str, str]:
    if isinstance(entry, str):
        parts = entry.split(" ")
    elif isinstance(entry, list):
        parts = entry
    else:
        parts = []
    if len(parts) != 2 or not all(isinstance(p, str) for p in parts):
        raise malformed(source, f"merge #{rank} is not two token strings", value=entry)
    return parts[0], parts[1]


def tables_from_vocab(
    source: str,
    *,
    vocab: Mapping[str, Any],
    merges: Iterable[Any],
    specials: Mapping[str, int],
) -> tuple[dict[int, bytes], list[tuple[int, int, int]]]:
    """Pieces and id merges from HF's byte-level ``vocab`` and string ``merges``.

    Vocabulary entries whose id is a special token are left out of the pieces.

    Raises:
        FormatError(MALFORMED_TOKENIZER_FILE): bad ids, repeated ids, bad merge entries.
        FormatError(MERGE_UNKNOWN_PIECE): a merge's part or result is not in the vocabulary.
        FormatError(UNSUPPORTED_TOKENIZER): a merge involves a special token's id.
    """
    special_ids = set(specials.values())
    pieces: dict[int, bytes] = {}
    for text, i in vocab.items():
        if not isinstance(i, int) or isinstance(i, bool) or i < 0:
            raise malformed(
                source, f"vocabulary id of {text!r} is not a non-negative integer", value=i
            )
        if i in pieces:
            raise malformed(source, f"vocabulary id {i} is used twice", value=text)
        if i not in special_ids:
            pieces[i] = token_text_to_bytes(text)
    id_merges: list[tuple[int, int, int]] = []
    for rank, entry in enumerate(merges):
        left, right = _merge_pair(source, rank, entry)
        ids = [vocab.get(left), vocab.get(right), vocab.get(left + right)]
        if any(i is None for i in ids):
            missing = [
                t for t, i in zip((left, right, left + right), ids, strict=True) if i is None
            ]
            raise FormatError(
                "MERGE_UNKNOWN_PIECE",
                f"{source}: merge #{rank} ({left!r} + {right!r}) names {missing[0]!r}, "
                "which is not in the vocabulary",
                value=(left, right),
                fix="the vocabulary must hold both parts and their concatenation",
            )
        triple = (int(ids[0]), int(ids[1]), int(ids[2]))  # type: ignore[arg-type]
        if special_ids.intersection(triple):
            raise FormatError(
                "UNSUPPORTED_TOKENIZER",
                f"{source}: merge #{rank} involves a special token's id",
                value=triple,
                fix="special tokens must not take part in merges",
            )
        id_merges.append(triple)
    return pieces, id_merges


def _specials(source: str, added: Any) -> dict[str, int]:
    if not isinstance(added, list):
        raise malformed(source, "'added_tokens' must be a list", value=type(added).__name__)
    specials: dict[str, int] = {}
    for token in added:
        if not isinstance(token, dict):  # found by fuzzing: [null] passed the component check
            raise malformed(source, "each added token must be an object", value=token)
        check_component("added_token", token, source)
        content, i = token.get("content"), token.get("id")
        if not isinstance(content, str) or not isinstance(i, int) or i < 0:
            raise malformed(source, "an added token needs a string content and an id", value=token)
        specials[content] = i
    return specials


def from_hf_document(data: Any, *, source: str) -> Tokenizer:
    """A tokenizer from a parsed ``tokenizer.json`` (see the module docstring for the rules).

    Raises:
        FormatError(MALFORMED_TOKENIZER_FILE, UNSUPPORTED_TOKENIZER, MERGE_UNKNOWN_PIECE).
    """
    if not is_hf_document(data):
        raise malformed(source, "not a Hugging Face tokenizer.json (no 'model' object)")
    unknown = sorted(set(data) - TOP_LEVEL_KEYS)
    if unknown:
        raise malformed(source, f"unknown key {unknown[0]!r}", value=unknown[0])
    for key in ("truncation", "padding"):
        if data.get(key) is not None:
            raise FormatError(
                "UNSUPPORTED_TOKENIZER",
                f"{source}: {key!r} is set; it would cut or pad every encoding",
                value=key,
                fix=f"set {key!r} to null in the file",
            )
    for kind in ("normalizer", "decoder", "post_processor", "model"):
        check_component(kind, data.get(kind), source)
    pre = data.get("pre_tokenizer")
    if pre is None:
        raise FormatError(
            "UNSUPPORTED_TOKENIZER",
            f"{source}: no pre_tokenizer, so the vocabulary is not byte-level",
            value=None,
            fix="tokembed reads byte-level BPE (ByteLevel pre-tokenizer) only",
        )
    stages = pretokenizer_stages(pre, source)
    specials = _specials(source, data.get("added_tokens", []))
    model = data["model"]
    vocab, merges = model.get("vocab"), model.get("merges")
    if not isinstance(vocab, dict) or not isinstance(merges, list):
        raise malformed(source, "model needs 'vocab' (object) and 'merges' (list)")
    pieces, id_merges = tables_from_vocab(source, vocab=vocab, merges=merges, specials=specials)
    return Tokenizer(
        pretokenizer=build_pretokenizer(source, stages, dialect="huggingface"),
        tables=build_tables(
            source,
            pieces=pieces,
            merges=id_merges,
            specials=specials,
            ignore_merges=model.get("ignore_merges") is True,
        ),
        name=Path(source).parent.name or None,
        metadata={"source_format": "huggingface", "source": Path(source).name},
    )


def load_hf(path: str | Path) -> Tokenizer:
    """Read a ``tokenizer.json`` file."""
    return from_hf_document(read_json(Path(path)), source=str(path))


def _check_onig(stages: Iterable[str]) -> None:
    """Refuse a regex HF's engine (Oniguruma) rejects, when ``tokenizers`` is installed."""
    try:
        from tokenizers import Regex
    except ImportError:
        return
    for stage in stages:
        try:
            Regex(stage)
        except Exception as exc:  # tokenizers raises a bare Exception for a bad regex
            raise FormatError(
                "UNSUPPORTED_TOKENIZER",
                f"Hugging Face's regex engine rejects pre-tokenizer stage {stage!r}: {exc}",
                value=stage,
                fix="use a pattern both `regex` and Oniguruma accept, or keep the native format",
            ) from exc


def to_hf_document(tok: Tokenizer) -> dict[str, Any]:
    """The ``tokenizer.json`` document of ``tok``.

    Special tokens are listed in ``model.vocab`` too, so HF keeps their ids.

    Raises:
        FormatError(UNSUPPORTED_TOKENIZER): two ids share one piece (HF keys by spelling),
            a special id has several names, or a special is spelled like a piece.
    """
    tables = tok.tables
    require_distinct_pieces(
        tables,
        "; tokenizer.json names tokens by their spelling",
        fix="keep this tokenizer in the native format",
    )
    vocab = {bytes_to_token_text(p): i for i, p in sorted(tables.pieces.items())}
    onig_stages = [to_onig(s) for s in tok.pretokenizer.stages]
    _check_onig(onig_stages)
    # HF gives an added token the id its content has in model.vocab, else the next free id
    # after the vocabulary; listing specials in the vocab (as SmolLM2 does) keeps our ids.
    aliased = {i: n for i, n in tok.aliases.items() if len(n) > 1}
    if aliased:
        first = min(aliased)
        raise FormatError(
            "UNSUPPORTED_TOKENIZER",
            f"special id {first} has several names {list(aliased[first])}; "
            "tokenizer.json keeps one name per id",
            value=first,
            fix="drop the alias names or keep the native format",
        )
    clash = sorted(set(tables.specials) & set(vocab))
    if clash:
        raise FormatError(
            "UNSUPPORTED_TOKENIZER",
            f"special token {clash[0]!r} is spelled like an ordinary piece in tokenizer.json",
            value=clash[0],
            fix="rename the special token or keep the native format",
        )
    vocab |= dict(sorted(tables.specials.items(), key=lambda kv: (kv[1], kv[0])))
    text = {i: bytes_to_token_text(p) for i, p in tables.pieces.items()}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True}
    flags = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": i, "content": name, **flags, "special": True}
            for name, i in sorted(tables.specials.items(), key=lambda kv: (kv[1], kv[0]))
        ],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": s}, "behavior": "Isolated", "invert": False}
                for s in onig_stages
            ]
            + [{**byte_level, "use_regex": False}],
        },
        "post_processor": None,
        "decoder": {**byte_level, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": tables.ignore_merges,
            "vocab": vocab,
            "merges": [[text[left], text[right]] for left, right, _ in tables.merges],
        },
    }


def extend_hf_document(
    data: Any, base: Tokenizer, new: Tokenizer, *, source: str
) -> dict[str, Any]:
    """The base's ``tokenizer.json`` document ``data`` with ``new``'s additions written in.

    ``new`` is ``base`` continued (``TrainConfig(base=...)``): its merges past the base's go
    to the end of ``model.merges`` (in the file's own spelling, ``"a b"`` or ``["a", "b"]``),
    its new pieces into ``model.vocab``, its new specials into ``added_tokens`` (and the
    vocabulary, which is how HF keeps an added token's id); a reserved special taken over is
    renamed in place. Everything else (pre-tokenizer, normalizer, decoder, post-processor,
    the other added tokens) is kept as it is. The document read back equals ``new``.

    Raises:
        FormatError(UNSUPPORTED_TOKENIZER): a new piece is spelled like a vocabulary entry
            (HF names tokens by their spelling) or the document read back differs from ``new``.
    """
    import copy

    out: dict[str, Any] = copy.deepcopy(data)
    model = out["model"]
    vocab: dict[str, int] = model["vocab"]
    old, tables = base.tables, new.tables
    text = {i: bytes_to_token_text(p) for i, p in tables.pieces.items()}
    for i in sorted(set(tables.pieces) - set(old.pieces)):
        if text[i] in vocab:
            raise FormatError(
                "UNSUPPORTED_TOKENIZER",
                f"new piece {text[i]!r} (id {i}) is spelled like vocabulary entry "
                f"{vocab[text[i]]}; tokenizer.json names tokens by their spelling",
                value=i,
                fix="keep this tokenizer in the native format (-o NEW.json --format tokembed)",
            )
        vocab[text[i]] = i
    as_strings = bool(model["merges"]) and isinstance(model["merges"][0], str)
    for left, right, _ in tables.merges[len(old.merges) :]:
        pair = [text[left], text[right]]
        model["merges"].append(" ".join(pair) if as_strings else pair)
    gone = {name: sid for name, sid in old.specials.items() if name not in tables.specials}
    added = {name: sid for name, sid in tables.specials.items() if name not in old.specials}
    flags = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False}
    entries = out.setdefault("added_tokens", [])
    for name, sid in gone.items():  # a reserved slot taken over: the new name replaces it
        entries[:] = [e for e in entries if e.get("content") != name]
        if vocab.get(name) == sid:
            del vocab[name]
    for name, sid in sorted(added.items(), key=lambda kv: kv[1]):
        entries.append({"id": sid, "content": name, **flags, "special": True})
        vocab[name] = sid
    entries.sort(key=lambda e: e["id"])
    model["vocab"] = dict(sorted(vocab.items(), key=lambda kv: kv[1]))
    back = from_hf_document(out, source=source)
    if back.address_hash != new.address_hash:
        raise FormatError(
            "UNSUPPORTED_TOKENIZER",
            f"{source}: the extended tokenizer.json does not read back as the extended tokenizer",
            value=source,
            fix="keep this tokenizer in the native format (-o NEW.json --format tokembed)",
        )
    return out


def write_hf_document(
    data: dict[str, Any], path: str | Path, *, inputs: Iterable[str | Path] = ()
) -> Path:
    """Write a ``tokenizer.json`` document (``path`` as in :func:`export_hf`); returns its path."""
    target = Path(path)
    if target.suffix != ".json":
        target = target / "tokenizer.json"
    text = json.dumps(data, ensure_ascii=False, indent=2) + "\n"
    return write_atomic(target, text.encode("utf-8"), inputs=[Path(p) for p in inputs])


def export_hf(tok: Tokenizer, path: str | Path, *, inputs: Iterable[str | Path] = ()) -> Path:
    """Write ``tok`` as a ``tokenizer.json`` file; returns its path.

    ``path`` ending in ``.json`` is the file itself; any other path is a folder
    (created if needed) that receives ``tokenizer.json``.

    Raises:
        FormatError(UNSUPPORTED_TOKENIZER): see :func:`to_hf_document`.
        UsageError(OUTPUT_EXISTS): the file is one of ``inputs``.
    """
    return write_hf_document(to_hf_document(tok), path, inputs=inputs)
