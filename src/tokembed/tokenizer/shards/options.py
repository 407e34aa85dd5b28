"""What a corpus-to-shards run is asked to do: :class:`TokenizeConfig`, checked in one place.

The options name the output format (``format``: Megatron-Core's indexed dataset or a flat
``.bin`` of ids), how documents are found (``doc``, ``field``, ``input_format``), whether
each document is followed by the end-of-text id (``eot``), what a byte that is not UTF-8
does (``errors``), where the work runs (``engine``, ``workers``, ``scheduler``), how much
input one shard holds (``shard_bytes``) and what an output folder that already holds
shards means (``resume``, ``overwrite``). :func:`id_dtype` is the smallest id type a
format can store a tokenizer's id range in.

Example::

    >>> TokenizeConfig(format="bin", doc="blank-line", workers=4).rule.spec
    'blank-line'
    >>> id_dtype(50_257, "megatron"), id_dtype(200_019, "bin"), id_dtype(200_019, "megatron")
    ('uint16', 'uint32', 'int32')
"""

from __future__ import annotations

from dataclasses import dataclass

from tokembed.errors import FormatError, UsageError
from tokembed.text.documents import INPUT_FORMATS, DocumentRule, parse_doc_rule
from tokembed.text.sources import ERRORS

__all__ = ["ENGINES", "FORMATS", "SHARD_BYTES", "TokenizeConfig", "id_dtype"]

FORMATS = ("megatron", "bin")
ENGINES = ("local", "dask")
# Input bytes per shard: 16 MiB of text is ~1 s of one core's encoding and ~4M tokens.
# Shards are the unit workers share, so the last one decides the wall time: a 200 MB
# corpus on 2 workers took 10.2 s as 64 MiB shards (4 shards, 128 MB on one worker) and
# 8.4 s as 16 MiB shards (13). A terabyte is ~65k shards; pass a larger size for fewer files.
SHARD_BYTES = 16 << 20
_UINT16_IDS = 1 << 16


def id_dtype(id_range: int, format: str) -> str:
    """The smallest id dtype of ``format`` that holds ids ``[0, id_range)``.

    ``uint16`` up to 65,536 ids; beyond, ``uint32`` in a flat ``.bin`` and ``int32`` in
    Megatron's indexed dataset (whose index has no unsigned 32-bit type).

    Raises:
        FormatError(ID_RANGE_TOO_LARGE): the ids do not fit the format's largest type.
    """
    if id_range <= _UINT16_IDS:
        return "uint16"
    wide, limit = ("int32", 1 << 31) if format == "megatron" else ("uint32", 1 << 32)
    if id_range > limit:
        raise FormatError(
            "ID_RANGE_TOO_LARGE",
            f"the tokenizer's id range R = {id_range:,} does not fit {wide} "
            f"(at most {limit:,} ids), the widest id type of the {format} format",
            value=id_range,
            fix="use a tokenizer whose ids fit 32 bits",
        )
    return wide


def _invalid(name: str, value: object, fix: str) -> UsageError:
    return UsageError("INVALID_ARGUMENT", f"{name} = {value!r} is invalid", value=value, fix=fix)


@dataclass(frozen=True, kw_only=True)
class TokenizeConfig:
    """Options of :func:`~tokembed.tokenizer.shards.tokenize.tokenize_corpus`.

    Attributes:
        format: ``"megatron"`` (``.bin`` + ``.idx``, read by Megatron-Core's
            ``IndexedDataset``) or ``"bin"`` (nanoGPT's flat ``.bin`` of ids, with a JSON
            sidecar and the document ends beside it).
        doc: document rule, ``"line"``, ``"blank-line"``, ``"file"`` or ``"sep:STRING"``
            (JSON Lines files have one document per record whatever it says).
        field: the JSON Lines field holding a record's text.
        input_format: ``"auto"`` (by file name: ``.jsonl``/``.ndjson``, ``.conllu``,
            else text), or ``"text"``, ``"jsonl"``, ``"conllu"`` for every input.
        eot: append the end-of-text id after each document: None (the default) where the
            tokenizer has ``<|endoftext|>``, True (required), False (never).
        errors: ``"strict"`` refuses a byte that is not UTF-8 (file and offset named);
            ``"replace"`` reads it as U+FFFD.
        workers: shards encoded at once on this machine (``engine="local"``: threads
            sharing one chunk cache where every shard is line documents of plain text read
            strictly by the compiled encoder, else processes), or the local cluster's
            workers (``engine="dask"`` without ``scheduler``).
        engine: ``"local"`` or ``"dask"`` (workers read their byte ranges themselves).
        scheduler: a Dask scheduler address (``tcp://host:8786``), only with ``"dask"``.
        shard_bytes: input bytes per shard (shards never cut a document).
        resume: continue the run the output folder's manifest records.
        overwrite: replace the shards the output folder holds.
        progress: a progress bar on stderr when it is a terminal.

    Raises:
        UsageError(INVALID_ARGUMENT): any field out of its domain, ``scheduler``
            without ``engine="dask"``, or both ``resume`` and ``overwrite``.
    """

    format: str = "megatron"
    doc: str = "line"
    field: str = "text"
    input_format: str = "auto"
    eot: bool | None = None
    errors: str = "strict"
    workers: int = 1
    engine: str = "local"
    scheduler: str | None = None
    shard_bytes: int = SHARD_BYTES
    resume: bool = False
    overwrite: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise _invalid("format", self.format, "use 'megatron' or 'bin'")
        parse_doc_rule(self.doc)
        if not isinstance(self.field, str) or not self.field:
            raise _invalid("field", self.field, "name the JSON field that holds the text")
        if self.input_format not in INPUT_FORMATS:
            raise _invalid("input_format", self.input_format, "use auto, text, jsonl or conllu")
        if self.eot not in (None, True, False):
            raise _invalid("eot", self.eot, "use None (where the tokenizer has one), True or False")
        if self.errors not in ERRORS:
            raise _invalid("errors", self.errors, "use 'strict' or 'replace'")
        for name in ("workers", "shard_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise _invalid(name, value, f"pass a positive integer {name}")
        if self.engine not in ENGINES:
            raise _invalid("engine", self.engine, "use 'local' or 'dask'")
        if self.scheduler is not None and self.engine != "dask":
            raise _invalid("scheduler", self.scheduler, "a scheduler needs engine='dask'")
        if self.resume and self.overwrite:
            raise _invalid("resume", self.resume, "pass resume or overwrite, not both")

    @property
    def rule(self) -> DocumentRule:
        """The parsed document rule."""
        return parse_doc_rule(self.doc)
