"""Reading text input: files, folders, globs, gzip and standard input, one way for every command.

Every command that reads text (``train``, ``encode``, ``demo``, ``measure``,
``report``) goes through :func:`expand_paths` and :func:`read_source` (whole files), or
:func:`iter_text_blocks` (files streamed in blocks, for training on corpora larger than memory):

* a folder is read recursively in sorted path order, hidden entries (``.git``) skipped;
  a glob's matches are sorted; ``"-"`` is standard input;
* gzip is recognised by its content (magic bytes ``1f 8b``), whatever the file is
  called: a gzip file named ``.txt`` is decompressed and a plain file named ``.gz``
  is read as it is. Decompression stops at ``max_decompressed_bytes``, so a small
  ``.gz`` cannot expand without limit;
* text must be UTF-8: a bad byte is reported with the file and its offset, never
  replaced.

Each :class:`SourceText` keeps the SHA-256 and size of the bytes as stored, so a
measurement can record exactly which files it read (:class:`FileRecord`).
:func:`default_corpus` is the ``.py`` sources of the running interpreter's standard
library, the demo's corpus when none is given.

Example::

    >>> sources = read_texts(["docs/", "notes/*.txt.gz"], max_bytes=8_000_000)  # doctest: +SKIP
    >>> sources[0].record.sha256  # doctest: +SKIP
"""

from __future__ import annotations

import codecs
import glob
import gzip
import hashlib
import io
import os
import re
import stat
import sys
import sysconfig
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import BinaryIO

from tokembed.errors import MeasureError, UsageError
from tokembed.files.os_errors import input_error

__all__ = [
    "DEFAULT_CORPUS_BYTES",
    "ERRORS",
    "MAX_DECOMPRESSED_BYTES",
    "STDIN",
    "TEXT_BLOCK_CHARS",
    "FileRecord",
    "SourceText",
    "TextBlock",
    "decode_utf8",
    "default_corpus",
    "expand_paths",
    "iter_lines",
    "iter_text_blocks",
    "read_source",
    "read_texts",
    "safe_cut",
]

# The whole CPython 3.11 stdlib is ~31.5 MB of .py; 40 MB takes all of it, and
# 16,384 merges train on it in ~8 s (whole demo ~30 s on 2 cores).
DEFAULT_CORPUS_BYTES = 40_000_000
# 1 GiB of text per file: 25x RusLit-40 (40,222,040 bytes unpacked from 10.9 MB), and
# small enough that a gzip bomb (1 MB can unpack to ~1 GB) fails cleanly instead of
# exhausting memory.
MAX_DECOMPRESSED_BYTES = 2**30
STDIN = "-"
# Characters per streamed block: ~8 MB of Cyrillic UTF-8, big enough that per-block costs
# vanish, small enough that a reader holds a few of them at most.
TEXT_BLOCK_CHARS = 1 << 22
_READ_BYTES = 1 << 20
# Where a text may be cut into two texts without changing any preset's pieces: after a line
# feed that follows a non-space character, before a character that is neither space nor '/'.
# (Python's \s holds every character the tokenizer engines call whitespace, and more.)
_SAFE_CUT = re.compile(r"(?<=\S\n)(?=[^\s/])")
_GZIP_MAGIC = b"\x1f\x8b"
# What a byte that is not UTF-8 does: refused with its file and offset, or read as U+FFFD.
ERRORS = ("strict", "replace")
_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True, slots=True)
class FileRecord:
    """A source file: its path, the SHA-256 of its bytes as stored, and their count."""

    path: str
    sha256: str
    bytes: int


@dataclass(frozen=True, kw_only=True)
class SourceText:
    """One file's text; ``name`` is its path as found (``"-"`` for stdin).

    ``record`` describes the bytes as stored (before decompression); it is None for
    texts that were not read from a file (built in memory).
    """

    name: str
    text: str
    record: FileRecord | None = None

    @property
    def n_bytes(self) -> int:
        """UTF-8 bytes of the text (after decompression)."""
        return len(self.text.encode("utf-8", "surrogatepass"))


def _not_found(arg: str, what: str) -> UsageError:
    if _mode(Path(arg)) is not None and not Path(arg).is_dir():  # there, but not text
        return UsageError(
            "FILE_UNREADABLE",
            f"{arg} is not a regular file (a socket or device, or a pipe where byte ranges "
            "are needed)",
            value=arg,
            fix="pass regular files, folders, globs, or '-' for standard input",
        )
    return UsageError(
        "FILE_NOT_FOUND",
        f"{what}: {arg}",
        value=arg,
        fix="pass existing files, folders, globs or '-' for standard input",
    )


def _mode(path: Path) -> int | None:
    """``path``'s stat mode; None when nothing is there. A refusal to look is coded.

    ``Path.is_file`` raises PermissionError for a path under a folder that may not be
    searched; that becomes FILE_UNREADABLE here instead of a traceback.
    """
    try:
        return os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError, ValueError):
        return None
    except OSError as exc:
        raise input_error(exc, path) from None


def _readable(path: Path) -> bool:
    """A regular file, a FIFO (``<(cmd)``, ``mkfifo``) or a character device (``/dev/null``)."""
    mode = _mode(path)
    return mode is not None and (stat.S_ISREG(mode) or stat.S_ISFIFO(mode) or stat.S_ISCHR(mode))


def _walk(folder: Path) -> Iterator[Path]:
    """The files under ``folder``, sorted; a folder that may not be listed or searched is
    FILE_UNREADABLE (Path.iterdir and Path.is_dir raise PermissionError)."""
    try:
        entries = sorted(folder.iterdir(), key=lambda p: p.name)
    except OSError as exc:
        raise input_error(exc, folder) from None
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            is_dir, is_file = entry.is_dir(), entry.is_file()
        except OSError as exc:
            raise input_error(exc, entry) from None
        if is_dir:
            yield from _walk(entry)
        elif is_file:
            yield entry


def expand_paths(paths_or_globs: Iterable[str | Path]) -> list[str]:
    """Files named by the arguments, in order (folders recursive and sorted, globs sorted).

    A FIFO or character device (``<(cmd)``, ``/dev/null``) is read like a file.

    Raises:
        UsageError(FILE_NOT_FOUND): an argument names nothing, or a glob matches no file.
        UsageError(FILE_UNREADABLE): an argument is a socket or block device, or a folder
            that may not be listed.
    """
    out: list[str] = []
    for item in paths_or_globs:
        arg = str(item)
        path = Path(arg)
        if arg == STDIN or _readable(path):
            out.append(arg)
        elif _mode(path) is not None and stat.S_ISDIR(_mode(path) or 0):
            out += [str(p) for p in _walk(path)]
        elif _GLOB_CHARS & set(arg):
            matches = sorted(m for m in glob.glob(arg, recursive=True) if Path(m).is_file())
            if not matches:
                raise _not_found(arg, "the pattern matches no file")
            out += matches
        else:
            raise _not_found(arg, "no such file or folder")
    return out


def _unreadable(name: str, why: object) -> MeasureError:
    return MeasureError(
        "UNREADABLE_INPUT",
        f"cannot read {name}: {why}",
        value=name,
        fix="check the file's permissions, or re-create a damaged .gz",
    )


def _gunzip(name: str, data: bytes, limit: int) -> bytes:
    """Decompress every gzip member of ``data``; refuse more than ``limit`` bytes of output."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
            out = f.read(limit + 1)
    except (OSError, EOFError, zlib.error) as exc:  # damaged or truncated
        raise _unreadable(name, exc) from None
    if len(out) > limit:
        raise _too_large(name, limit)
    return out


def _too_large(name: str, limit: int) -> MeasureError:
    return MeasureError(
        "INPUT_TOO_LARGE",
        f"{name} decompresses to more than {limit:,} bytes",
        value=name,
        fix="decompress it yourself and pass the text, or raise max_decompressed_bytes",
    )


def _not_utf8(name: str, byte: int, offset: int) -> MeasureError:
    return MeasureError(
        "INPUT_NOT_UTF8",
        f"{name} is not UTF-8: byte 0x{byte:02x} at offset {offset}",
        value=(name, offset),
        fix="convert the file to UTF-8 (e.g. iconv -t UTF-8) or leave it out",
    )


def _check_errors(errors: str) -> None:
    if errors not in ERRORS:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"unknown UTF-8 error policy {errors!r}",
            value=errors,
            fix="pass errors='strict' (refuse a bad byte) or errors='replace' (read it as U+FFFD)",
        )


def decode_utf8(
    name: str, data: bytes, *, offset: int = 0, final: bool = True, errors: str = "strict"
) -> str:
    """``data`` (bytes of the file ``name`` from ``offset`` on) as UTF-8 text.

    A bad byte is refused with MeasureError(INPUT_NOT_UTF8) naming the file and its offset
    there (``offset`` + its index in ``data``).

    ``final=False``: a character cut in two at the end is left out instead of refused.
    ``errors="replace"``: a bad byte reads as U+FFFD instead of being refused.
    """
    try:
        if final:
            return data.decode("utf-8", errors)
        return codecs.getincrementaldecoder("utf-8")(errors).decode(data, final=False)
    except UnicodeDecodeError as exc:
        raise _not_utf8(name, data[exc.start], offset + exc.start) from None


def read_source(
    name: str | Path,
    *,
    stdin: BinaryIO | None = None,
    max_decompressed_bytes: int = MAX_DECOMPRESSED_BYTES,
    errors: str = "strict",
) -> SourceText:
    """The text of one file (``"-"``: ``stdin``, default the process's standard input).

    ``errors="replace"`` reads a byte that is not UTF-8 as U+FFFD instead of refusing it.

    Raises:
        UsageError(INVALID_ARGUMENT): ``errors`` is neither "strict" nor "replace".
        UsageError(FILE_NOT_FOUND): no such file.
        MeasureError(UNREADABLE_INPUT): the file cannot be read, or its gzip is damaged.
        MeasureError(INPUT_TOO_LARGE): gzip content unpacks past ``max_decompressed_bytes``.
        MeasureError(INPUT_NOT_UTF8): the text is not UTF-8 (message: file and byte offset).
    """
    name = str(name)
    _check_errors(errors)
    if name != STDIN and not _readable(Path(name)):
        raise _not_found(name, "no such file")
    try:
        stored = (stdin or sys.stdin.buffer).read() if name == STDIN else Path(name).read_bytes()
    except OSError as exc:
        raise _unreadable(name, exc) from None
    record = FileRecord(path=name, sha256=hashlib.sha256(stored).hexdigest(), bytes=len(stored))
    data = _gunzip(name, stored, max_decompressed_bytes) if stored[:2] == _GZIP_MAGIC else stored
    return SourceText(name=name, text=decode_utf8(name, data, errors=errors), record=record)


@dataclass(frozen=True, slots=True)
class TextBlock:
    """Consecutive text of the file ``name`` (``"-"`` for stdin), in file order."""

    name: str
    text: str


def _first_two(raw: BinaryIO) -> bytes:
    """The stream's first two bytes, left unread (buffered streams peek, others seek back)."""
    peek = getattr(raw, "peek", None)
    if peek is not None:
        return bytes(peek(2)[:2])
    head = raw.read(2)
    raw.seek(-len(head), io.SEEK_CUR)
    return head


def _raw_blocks(
    name: str,
    stream: BinaryIO | gzip.GzipFile,
    *,
    limit: int | None = None,
    length: int | None = None,
) -> Iterator[bytes]:
    """The bytes of ``stream`` as read, about a megabyte at a time, until it ends or
    ``length`` bytes are read; more than ``limit`` bytes are refused."""
    read = 0
    while True:
        want = _READ_BYTES if length is None else min(_READ_BYTES, length - read)
        try:
            data = stream.read(want) if want > 0 else b""
        except (OSError, EOFError, zlib.error) as exc:  # unreadable, damaged or truncated gzip
            raise _unreadable(name, exc) from None
        if not data:
            return
        read += len(data)
        if limit is not None and read > limit:
            raise _too_large(name, limit)
        yield data


def _decoded_pieces(
    name: str,
    stream: BinaryIO | gzip.GzipFile,
    *,
    limit: int | None = None,
    errors: str = "strict",
    offset: int = 0,
    length: int | None = None,
) -> Iterator[str]:
    """The text of ``stream`` decoded as it is read, in pieces of about a megabyte.

    ``offset`` is where the stream starts in its file (bad bytes are named by their offset
    in the file); ``length`` stops after that many bytes; ``limit`` refuses more.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors)
    read = 0
    # the empty read at the end flushes the decoder (a cut character is refused there)
    for data in chain(_raw_blocks(name, stream, limit=limit, length=length), [b""]):
        pending = decoder.getstate()[0]
        try:
            text = decoder.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            at = offset + read - len(pending) + exc.start
            raise _not_utf8(name, exc.object[exc.start], at) from None
        read += len(data)
        if text:
            yield text


def _open_text_stream(raw: BinaryIO) -> BinaryIO | gzip.GzipFile:
    """``raw``, or its decompressed content when it starts with gzip's magic bytes."""
    return gzip.GzipFile(fileobj=raw) if _first_two(raw) == _GZIP_MAGIC else raw


def _stream_blocks(
    name: str, raw: BinaryIO, block_chars: int | None, limit: int | None, errors: str = "strict"
) -> Iterator[str]:
    """The decoded text of ``raw`` (gzip recognised by content) in blocks cut at safe points."""
    buf, searched = "", 0
    for text in _decoded_pieces(name, _open_text_stream(raw), limit=limit, errors=errors):
        buf += text
        while block_chars is not None and len(buf) >= block_chars:
            cut = _SAFE_CUT.search(buf, max(block_chars, searched - 2))
            if cut is None:
                searched = len(buf)  # no cut yet: read on, and search only the new text
                break
            yield buf[: cut.start()]
            buf, searched = buf[cut.start() :], 0
    if buf:
        yield buf


def iter_lines(pieces: Iterable[str]) -> Iterator[str]:
    """The lines of text given in pieces cut anywhere, without their line feeds.

    The last line is yielded even when empty (``"a\\n"`` gives ``"a"``, ``""``), as
    ``str.split("\\n")`` of the joined pieces gives them.

    Example::

        >>> list(iter_lines(["on", "e\\ntw", "o"]))
        ['one', 'two']
    """
    buf = ""
    for piece in pieces:
        buf += piece
        if "\n" not in piece:
            continue
        *lines, buf = buf.split("\n")
        yield from lines
    yield buf


def safe_cut(text: str, start: int) -> int | None:
    """The first index >= ``start`` where ``text`` may be cut into two texts that every
    pre-tokenizer preset splits into the same chunks as the whole, or None.

    Such a point follows a line feed after a non-space character and precedes a character
    that is neither space nor '/'; :func:`iter_text_blocks` cuts there.

    Example::

        >>> safe_cut("one\ntwo\nthree", 1)
        4
    """
    cut = _SAFE_CUT.search(text, start)
    return None if cut is None else cut.start()


def iter_text_blocks(
    paths_or_globs: Iterable[str | Path],
    *,
    block_chars: int | None = TEXT_BLOCK_CHARS,
    stdin: BinaryIO | None = None,
    max_decompressed_bytes: int | None = None,
    errors: str = "strict",
) -> Iterator[TextBlock]:
    """The files' texts as a stream of blocks of about ``block_chars`` characters or more.

    Nothing holds a whole file: each is read, decompressed and decoded incrementally.
    A block ends only where cutting a text into two texts keeps every pre-tokenizer
    preset's chunks (a line feed between a non-space character and a character that is
    neither space nor '/'), so training on the blocks of a file learns exactly what
    training on the whole file learns; a file without such a point is one block.
    ``block_chars=None`` yields each file whole (for regexes that are not presets). A
    block never spans two files. Unlike :func:`read_source`, decompression has no size
    limit by default (memory stays bounded by the block size). ``errors="replace"`` reads
    a byte that is not UTF-8 as U+FFFD instead of refusing it.

    Example::

        >>> for block in iter_text_blocks(["corpus/"], block_chars=1 << 20):  # doctest: +SKIP
        ...     counter.add(block.text)

    Raises:
        UsageError(FILE_NOT_FOUND): see :func:`expand_paths`.
        MeasureError(UNREADABLE_INPUT, INPUT_TOO_LARGE, INPUT_NOT_UTF8): as :func:`read_source`
            (the byte offset counts from the start of the decompressed file).
        MeasureError(EMPTY_INPUT): no text at all (raised when the stream ends).
    """
    _check_errors(errors)
    names = expand_paths(paths_or_globs)
    any_text = False
    for name in names:
        if name == STDIN:
            raw = stdin or sys.stdin.buffer
            for text in _stream_blocks(name, raw, block_chars, max_decompressed_bytes, errors):
                any_text = True
                yield TextBlock(name=name, text=text)
            continue
        try:
            f = open(name, "rb")  # noqa: SIM115  (closed below, after the generator's last block)
        except OSError as exc:
            raise _unreadable(name, exc) from None
        with f:
            for text in _stream_blocks(name, f, block_chars, max_decompressed_bytes, errors):
                any_text = True
                yield TextBlock(name=name, text=text)
    if not any_text:
        raise _empty(names, "")


def _empty(names: list[str], detail: str) -> MeasureError:
    return MeasureError(
        "EMPTY_INPUT",
        f"no text in {len(names)} file(s){detail}",
        value=names[:3],
        fix="pass non-empty UTF-8 text files",
    )


def read_texts(
    paths_or_globs: Iterable[str | Path],
    *,
    max_bytes: int | None = None,
    stdin: BinaryIO | None = None,
    max_decompressed_bytes: int = MAX_DECOMPRESSED_BYTES,
) -> list[SourceText]:
    """One :class:`SourceText` per file; with ``max_bytes``, whole files in order while they fit.

    Raises:
        UsageError(FILE_NOT_FOUND): see :func:`expand_paths`.
        MeasureError(UNREADABLE_INPUT, INPUT_TOO_LARGE, INPUT_NOT_UTF8): see :func:`read_source`.
        MeasureError(EMPTY_INPUT): no text at all.
    """
    names = expand_paths(paths_or_globs)
    sources: list[SourceText] = []
    used = 0
    for name in names:
        # Under max_bytes a compressed file is unpacked only as far as the room left: a small
        # .gz holding gigabytes is skipped (it cannot fit) after reading that much, not all.
        room = max_decompressed_bytes if max_bytes is None else max(max_bytes - used, 0)
        limit = min(max_decompressed_bytes, room)
        try:
            source = read_source(name, stdin=stdin, max_decompressed_bytes=limit)
        except MeasureError as exc:
            if exc.code == "INPUT_TOO_LARGE" and limit < max_decompressed_bytes:
                continue
            raise
        if max_bytes is not None and used + source.n_bytes > max_bytes:
            continue
        used += source.n_bytes
        sources.append(source)
    if not any(s.text for s in sources):
        raise _empty(names, f" within max_bytes={max_bytes}" if max_bytes is not None else "")
    return sources


def _shuffle_key(name: str) -> str:
    """A fixed pseudo-random order that does not depend on the set of files."""
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()


def default_corpus(*, max_bytes: int = DEFAULT_CORPUS_BYTES) -> list[SourceText]:
    """Up to ``max_bytes`` of the standard library's ``.py`` files, whole files.

    Files are visited in an order fixed by the SHA-256 of their relative path, so
    a capped corpus mixes modules instead of taking the alphabetically first
    ones; files that are not UTF-8 (a few test fixtures) are skipped.

    Raises:
        MeasureError(EMPTY_INPUT): the interpreter has no readable stdlib sources.
    """
    root = Path(sysconfig.get_paths()["stdlib"])
    files = [
        p
        for p in root.rglob("*.py")
        if not {"site-packages", "dist-packages", "__pycache__"} & set(p.parts) and p.is_file()
    ]
    files.sort(key=lambda p: _shuffle_key(p.relative_to(root).as_posix()))
    sources: list[SourceText] = []
    used = 0
    for path in files:
        data = path.read_bytes()
        if used + len(data) > max_bytes:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        used += len(data)
        name = path.relative_to(root).as_posix()
        record = FileRecord(path=name, sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))
        sources.append(SourceText(name=name, text=text, record=record))
    if not sources:
        raise _empty([str(root)], f" under {root} (no readable .py files)")
    return sources
