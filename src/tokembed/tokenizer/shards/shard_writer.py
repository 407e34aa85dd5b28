"""Encode one planned shard: its documents' ids streamed into ``NAME.bin``, its index beside it.

One function, :func:`encode_shard`, runs wherever a shard is encoded (this process, a
worker process, a Dask worker): it reads the shard's byte ranges itself, cuts them into
documents, encodes them with the one compiled encoder in batches of about a megabyte
(:meth:`~tokembed.tokenizer.Tokenizer.encode_ordinary_batch_to_numpy`: text that spells a special
token is ordinary text; only the end-of-text policy adds special ids), and streams the ids
to a temporary file renamed into place when the shard is whole. Memory is bounded by the
batch and by the shard's document lengths, never by the corpus.

Documents longer than the batch are encoded in pieces cut where every pre-tokenizer
preset splits the parts like the whole (:func:`tokembed.text.sources.safe_cut`), so a
file-sized document is never held; a tokenizer whose pre-tokenizer is not a preset gets
each document whole, because only the presets are known to split there alike.

Example::

    >>> entry = encode_shard(job)  # doctest: +SKIP
    >>> entry.documents, entry.tokens, sorted(entry.files)  # doctest: +SKIP
    (1000, 23817, ['shard-00000.bin', 'shard-00000.idx'])
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from tokembed.errors import TokenizerError
from tokembed.files.atomic import replace_with, write_files_atomic
from tokembed.text.documents import input_format_of, iter_document_pieces
from tokembed.text.ranges import ByteRange, iter_range_line_bytes
from tokembed.text.sources import decode_utf8
from tokembed.tokenizer.patterns import PATTERNS
from tokembed.tokenizer.shards.manifest import ShardEntry
from tokembed.tokenizer.shards.options import TokenizeConfig
from tokembed.tokenizer.shards.plan import byte_ranges
from tokembed.tokenizer.shards.shard_formats import (
    MAX_MEGATRON_DOCUMENT_TOKENS,
    document_too_long,
    ids_file,
    index_files,
)
from tokembed.tokenizer.tokenizer import Tokenizer

__all__ = ["BATCH_CHARS", "ShardJob", "encode_shard", "runs_without_gil", "shard_digests"]

# Characters per compiled batch call: ~1 MB amortises the call (a few microseconds) over
# ~250k ids and keeps a worker's resident text small.
BATCH_CHARS = 1 << 20
_PRESET_STAGES = frozenset(PATTERNS.values())


@dataclass(frozen=True, kw_only=True)
class ShardJob:
    """Everything one shard's encoding needs, picklable for worker processes.

    ``names`` are the run's input files (their order is the manifest's); ``dtype`` and
    ``eot_id`` were fixed for the run; ``entry`` is the planned shard.
    """

    entry: ShardEntry
    names: tuple[str, ...]
    folder: str
    config: TokenizeConfig
    dtype: str
    eot_id: int | None
    address_hash: str


def _lines_from_bytes(config: TokenizeConfig, r: ByteRange) -> bool:
    """Whether ``r`` is plain text cut into lines, refused where not UTF-8: then its bytes go
    to the compiled encoder as they are (:meth:`_IdsWriter.add_lines`)."""
    return (
        config.rule.kind == "line"
        and config.errors == "strict"
        and input_format_of(r.path, config.input_format) == "text"
    )


def runs_without_gil(job: ShardJob, tokenizer: Tokenizer) -> bool:
    """Whether ``job``'s encoding is the compiled encoder's on bytes read as they are, which
    holds the GIL only between megabyte batches: then threads of one process run it in
    parallel and share one chunk cache (processes each pay for a corpus's first words)."""
    if tokenizer.implementation != "compiled":
        return False
    return all(_lines_from_bytes(job.config, r) for r in byte_ranges(job.entry, job.names))


def _splits_like_presets(tokenizer: Tokenizer) -> bool:
    return all(stage in _PRESET_STAGES for stage in tokenizer.pretokenizer.stages)


class _IdsWriter:
    """Batches of document pieces encoded and appended to an open file, hashed as written.

    Each batch's ids come back as one array (no Python int per id); the end-of-text ids
    and the documents' lengths are computed with NumPy over the whole batch.
    """

    def __init__(self, f: BinaryIO, *, dtype: str, eot_id: int | None, megatron: bool) -> None:
        self.f = f
        self.dtype = np.dtype(dtype).newbyteorder("<")
        self.eot_id = eot_id
        self.limit = MAX_MEGATRON_DOCUMENT_TOKENS if megatron else None
        self.digest = hashlib.sha256()
        self.lengths: list[np.ndarray[Any, Any]] = []
        self.open = 0  # tokens of the document still being written
        self.text_bytes = 0

    def add(self, tokenizer: Tokenizer, texts: list[str], ends: list[bool]) -> None:
        """Encode document pieces (``ends[i]``: piece ``i`` finishes its document) and append."""
        ids, offsets = tokenizer.encode_ordinary_batch_to_numpy(texts)
        self.add_ids(ids, offsets, np.asarray(ends, dtype=bool))
        self.text_bytes += len("".join(texts).encode("utf-8", "surrogatepass"))  # one call

    def add_ids(
        self,
        ids: np.ndarray[Any, np.dtype[np.uint32]],
        offsets: np.ndarray[Any, np.dtype[np.int64]],
        done: np.ndarray[Any, np.dtype[np.bool_]],
    ) -> None:
        """Append encoded pieces: ``ids[offsets[i]:offsets[i + 1]]`` is piece ``i``, which
        finishes its document where ``done[i]``."""
        sizes = np.diff(offsets)
        if self.eot_id is not None:
            ids = np.insert(ids, offsets[1:][done], self.eot_id)  # after each finished document
            sizes = sizes + done
        totals = self.open + np.cumsum(sizes)
        finished = totals[done]
        lengths = np.diff(finished, prepend=0)
        self.open = int(totals[-1] - (finished[-1] if len(finished) else 0))
        longest = max(int(lengths.max()) if len(lengths) else 0, self.open)
        if self.limit is not None and longest > self.limit:
            raise document_too_long(longest, self.limit)
        data = ids.astype(self.dtype, copy=False).tobytes()
        self.f.write(data)
        self.digest.update(data)
        self.lengths.append(lengths)

    def add_lines(
        self, tokenizer: Tokenizer, r: ByteRange, *, stdin: BinaryIO | None
    ) -> Iterator[int]:
        """Encode and append every line of ``r`` as a document (the ``line`` rule on plain
        text), straight from its bytes; yields the text bytes of each block as it is done.

        The same documents and ids as cutting the decoded text into lines, without a ``str``
        per line: ~40% of a worker's time on RusLit-40 went to decoding, cutting and
        re-encoding lines in Python before the compiled encoder saw them.
        """
        for offset, block in iter_range_line_bytes(r, stdin=stdin):
            try:
                ids, offsets = tokenizer.encode_lines_to_numpy(block)
            except TokenizerError as exc:
                if exc.code == "INVALID_UTF8":
                    decode_utf8(r.path, block, offset=offset)  # the file and its byte offset
                raise
            if len(offsets) > 1:
                self.add_ids(ids, offsets, np.ones(len(offsets) - 1, dtype=bool))
            # a document's text excludes its line feed and a carriage return before it
            n_bytes = len(block) - block.count(b"\n")
            if b"\r" in block:  # one memchr; counting the pair is a slower substring search
                n_bytes -= block.count(b"\r\n") + block.endswith(b"\r")
            self.text_bytes += n_bytes
            yield n_bytes

    def document_lengths(self) -> np.ndarray[Any, Any]:
        return np.concatenate([np.zeros(0, np.int64), *self.lengths]).astype(np.int64)


def encode_shard(
    job: ShardJob,
    tokenizer: Tokenizer,
    *,
    on_bytes: Callable[[int], None] | None = None,
    stdin: BinaryIO | None = None,
) -> ShardEntry:
    """Encode ``job``'s shard into its files under ``job.folder``; the entry, complete.

    ``on_bytes`` is told the UTF-8 bytes of each batch as it is encoded (a progress bar).
    The ids file is written to a temporary sibling and renamed after the index is known;
    a failure leaves no file of the shard behind under its own name.

    Raises:
        FormatError(DOCUMENT_TOO_LONG): a Megatron document of more than 2**31 - 1 tokens.
        MeasureError(INPUT_NOT_UTF8, UNREADABLE_INPUT, MALFORMED_JSONL, ...): bad input.
        UsageError(OUTPUT_NO_SPACE, OUTPUT_WRITE_FAILED, ...): the OS refused a write.
    """
    config = job.config
    folder = Path(job.folder)
    name = job.entry.name
    max_piece = BATCH_CHARS if _splits_like_presets(tokenizer) else None
    holder: list[_IdsWriter] = []

    def write_ids(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            out = _IdsWriter(
                f, dtype=job.dtype, eot_id=job.eot_id, megatron=config.format == "megatron"
            )
            holder.append(out)
            texts: list[str] = []
            ends: list[bool] = []
            held = 0

            def flush() -> None:
                nonlocal held
                if not texts:
                    return
                before = out.text_bytes
                out.add(tokenizer, texts, ends)
                if on_bytes is not None:
                    on_bytes(out.text_bytes - before)
                texts.clear()
                ends.clear()
                held = 0

            for r in byte_ranges(job.entry, job.names):
                if _lines_from_bytes(config, r):
                    for n_bytes in out.add_lines(tokenizer, r, stdin=stdin):
                        if on_bytes is not None:
                            on_bytes(n_bytes)
                    continue
                for text, last in iter_document_pieces(
                    r,
                    rule=config.rule,
                    input_format=config.input_format,
                    field=config.field,
                    errors=config.errors,
                    max_piece_chars=max_piece,
                    stdin=stdin,
                ):
                    texts.append(text)
                    ends.append(last)
                    held += len(text)
                    if held >= BATCH_CHARS:
                        flush()
                flush()

    ids_path = folder / ids_file(name)
    replace_with(ids_path, write_ids)
    out = holder[0]
    lengths = out.document_lengths()
    index = index_files(
        name,
        config.format,
        dtype=job.dtype,
        lengths=lengths,
        address_hash=job.address_hash,
        eot_id=job.eot_id,
    )
    try:
        write_files_atomic([(folder / n, data) for n, data in index])
    except BaseException:
        ids_path.unlink(missing_ok=True)  # no shard file stays visible without its index
        raise
    files = {ids_file(name): out.digest.hexdigest()}
    files.update({n: hashlib.sha256(data).hexdigest() for n, data in index})
    return replace(
        job.entry,
        documents=len(lengths),
        tokens=int(lengths.sum()),
        text_bytes=out.text_bytes,
        files=files,
    )


def shard_digests(folder: Path, names: Sequence[str]) -> dict[str, str | None]:
    """The SHA-256 of each of the files ``names`` under ``folder`` (None: missing/unreadable)."""
    out: dict[str, str | None] = {}
    for n in names:
        digest = hashlib.sha256()
        try:
            with open(folder / n, "rb") as f:
                while block := f.read(1 << 20):
                    digest.update(block)
        except OSError:
            out[n] = None
            continue
        out[n] = digest.hexdigest()
    return out
