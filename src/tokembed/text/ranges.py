"""Plain text files read in byte ranges, so that several machines can read one corpus in parts.

:func:`split_ranges` cuts files just after line feeds near a target size; each
:class:`ByteRange` is then read on its own with :func:`read_range` (with an optional
look-ahead past its end, for a scanner that must see where the next text starts), and
the parts concatenated in order give exactly the text :func:`~tokembed.text.sources.read_source`
reads from the whole file. A gzip file cannot be entered in the middle and stays one
range; standard input cannot be split. :class:`TextFiles` names the files of a corpus
without reading them, for a counter that sends them to workers.

Example::

    >>> ranges = split_ranges(["corpus.txt"], target_bytes=8 << 20)  # doctest: +SKIP
    >>> text, ahead = read_range(ranges[1], overlap_bytes=32 << 10)  # doctest: +SKIP
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from gzip import GzipFile
from pathlib import Path
from typing import BinaryIO

from tokembed.errors import UsageError
from tokembed.text.sources import (
    _GZIP_MAGIC,
    STDIN,
    _check_errors,
    _decoded_pieces,
    _not_found,
    _open_text_stream,
    _raw_blocks,
    _unreadable,
    decode_utf8,
    read_source,
)

__all__ = [
    "ByteRange",
    "TextFiles",
    "iter_range_line_bytes",
    "iter_range_text",
    "read_range",
    "split_ranges",
]


@dataclass(frozen=True, kw_only=True)
class ByteRange:
    """Bytes ``[start, stop)`` of one file's text; ``stop`` None: to the end (a whole file).

    A range starts at the file's start or just after a line feed, so it begins and ends on a
    character boundary. A gzip file cannot be entered in the middle: it is one whole range,
    decompressed when read. ``index`` numbers the file in its corpus (ranges of one file
    share it).
    """

    path: str
    index: int
    start: int
    stop: int | None

    @property
    def first(self) -> bool:
        """The range begins its file's text."""
        return self.start == 0

    @property
    def last(self) -> bool:
        """The range ends its file's text."""
        return self.stop is None


_NEWLINE_PROBE = 1 << 16  # bytes read at a time while looking for the line feed after a cut


def _cuts(f: BinaryIO, size: int, target: int, delimiter: bytes = b"\n") -> list[int]:
    """Offsets just after the first ``delimiter`` ending at or past each multiple of ``target``."""
    cuts: list[int] = []
    pos = target
    keep = len(delimiter) - 1  # bytes of one read kept for a delimiter cut by the next read
    while pos < size:
        # a delimiter ending right before ``pos`` makes ``pos`` itself a cut
        f.seek(max(pos - len(delimiter), 0))
        held = b""
        while True:
            block = f.read(_NEWLINE_PROBE)
            if not block:
                return cuts
            window = held + block
            at = window.find(delimiter)
            if at >= 0:
                break
            held = window[-keep:] if keep else b""
        cut = f.tell() - len(window) + at + len(delimiter)
        if cut >= size:
            return cuts
        cuts.append(cut)
        pos = cut + target
    return cuts


def split_ranges(
    paths: Iterable[str | Path], *, target_bytes: int, delimiter: bytes = b"\n"
) -> list[ByteRange]:
    """The files cut into ranges of about ``target_bytes``, each cut just after a line feed.

    ``delimiter`` cuts just after those bytes instead (a document separator, for instance;
    it must not be empty). Files keep their order and ranges their order within a file; a file with no line feed
    past a cut point, a gzip file, and a file shorter than ``target_bytes`` are one range.
    Standard input (``"-"``) cannot be split into ranges and is refused.

    Example::

        >>> [(r.start, r.stop) for r in split_ranges(["big.txt"], target_bytes=64 << 20)]  # doctest: +SKIP
        [(0, 67108901), (67108901, None)]

    Raises:
        UsageError(INVALID_ARGUMENT): ``target_bytes`` < 1, an empty ``delimiter``, or
            ``"-"`` among the paths.
        UsageError(FILE_NOT_FOUND): a path is not a file.
        MeasureError(UNREADABLE_INPUT): a file cannot be read.
    """
    if not delimiter:
        raise UsageError(
            "INVALID_ARGUMENT",
            "an empty delimiter cuts nowhere",
            value=delimiter,
            fix="pass the bytes after which a file may be cut, such as b'\\n'",
        )
    if isinstance(target_bytes, bool) or not isinstance(target_bytes, int) or target_bytes < 1:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"target_bytes = {target_bytes!r} is invalid",
            value=target_bytes,
            fix="pass a positive number of bytes per range",
        )
    ranges: list[ByteRange] = []
    for index, item in enumerate(paths):
        name = str(item)
        if name == STDIN:
            raise UsageError(
                "INVALID_ARGUMENT",
                "standard input cannot be read in byte ranges",
                value=name,
                fix="save the text to a file and pass its path",
            )
        if not Path(name).is_file():
            raise _not_found(name, "no such file")
        try:
            with open(name, "rb") as f:
                gz = f.read(2) == _GZIP_MAGIC
                cuts = [] if gz else _cuts(f, Path(name).stat().st_size, target_bytes, delimiter)
        except OSError as exc:
            raise _unreadable(name, exc) from None
        bounds = [0, *cuts]
        stops: list[int | None] = [*cuts, None]
        ranges += [
            ByteRange(path=name, index=index, start=a, stop=b)
            for a, b in zip(bounds, stops, strict=True)
        ]
    return ranges


def read_range(r: ByteRange, *, overlap_bytes: int = 0, errors: str = "strict") -> tuple[str, str]:
    """The range's text, and the text of up to ``overlap_bytes`` bytes after it.

    The overlap ends on a character boundary (a character cut by the limit is left out)
    and is empty for a range that ends its file. A whole range (``start == 0`` and
    ``stop`` None) is read by :func:`read_source`, gzip included, with its checks.
    ``errors="replace"`` reads a byte that is not UTF-8 as U+FFFD instead of refusing it.

    Raises:
        UsageError(FILE_NOT_FOUND): the file is gone.
        MeasureError(UNREADABLE_INPUT, INPUT_TOO_LARGE): see :func:`read_source`.
        MeasureError(INPUT_NOT_UTF8): a bad byte; the offset is counted from the file's start.
    """
    if r.first and r.last:
        return read_source(r.path, errors=errors).text, ""
    _check_errors(errors)
    if not Path(r.path).is_file():
        raise _not_found(r.path, "no such file")
    try:
        with open(r.path, "rb") as f:
            f.seek(r.start)
            data = f.read() if r.stop is None else f.read(r.stop - r.start)
            extra = b"" if r.stop is None else f.read(overlap_bytes)
    except OSError as exc:
        raise _unreadable(r.path, exc) from None
    text = decode_utf8(r.path, data, offset=r.start, errors=errors)
    # final=False: a character the limit cut in two is held back, not an error
    tail = decode_utf8(r.path, extra, offset=r.start + len(data), final=False, errors=errors)
    return text, tail


@contextmanager
def _opened(
    r: ByteRange, stdin: BinaryIO | None
) -> Iterator[tuple[BinaryIO | GzipFile, int, int | None]]:
    """The range's byte stream (gzip decompressed for a whole range, ``"-"`` is ``stdin``),
    where it starts in its file, and how many bytes to read (None: to the end)."""
    if r.path == STDIN:
        yield _open_text_stream(stdin or sys.stdin.buffer), 0, None
        return
    if not Path(r.path).is_file():
        raise _not_found(r.path, "no such file")
    try:
        f = open(r.path, "rb")  # noqa: SIM115  (closed below, after the last piece)
    except OSError as exc:
        raise _unreadable(r.path, exc) from None
    with f:
        if r.first and r.last:
            yield _open_text_stream(f), 0, None
            return
        f.seek(r.start)
        yield f, r.start, None if r.stop is None else r.stop - r.start


def iter_range_text(
    r: ByteRange, *, errors: str = "strict", stdin: BinaryIO | None = None
) -> Iterator[str]:
    """The range's text streamed in pieces of about a megabyte, never held whole.

    The pieces joined are :func:`read_range`'s text. A whole range (``start == 0``,
    ``stop`` None) is read like :func:`~tokembed.text.sources.iter_text_blocks` reads a
    file: gzip recognised by content, and ``path == "-"`` is ``stdin`` (default the
    process's standard input). Pieces end anywhere, even inside a word.

    Example::

        >>> "".join(iter_range_text(split_ranges(["a.txt"], target_bytes=1 << 20)[0]))  # doctest: +SKIP

    Raises:
        UsageError(FILE_NOT_FOUND): the file is gone.
        UsageError(INVALID_ARGUMENT): ``errors`` is neither "strict" nor "replace".
        MeasureError(UNREADABLE_INPUT, INPUT_NOT_UTF8): see :func:`read_range`.
    """
    _check_errors(errors)
    with _opened(r, stdin) as (stream, offset, length):
        yield from _decoded_pieces(r.path, stream, errors=errors, offset=offset, length=length)


def iter_range_line_bytes(
    r: ByteRange, *, stdin: BinaryIO | None = None
) -> Iterator[tuple[int, bytes]]:
    """The range's bytes, undecoded, in blocks of whole lines of about a megabyte or more,
    each with the offset in its file's text where it starts.

    Every block but the range's last ends just after a line feed; a line longer than a
    read is held whole (as a line reader would hold it). The blocks joined are the
    range's bytes (decompressed for a gzip file), so a document rule that cuts at line
    feeds can run on them without a ``str`` per line; :func:`~.sources.decode_utf8` of a
    block with its offset names the first byte that is not UTF-8 as the file's offset.

    Example::

        >>> [(at, len(b)) for at, b in iter_range_line_bytes(r)]  # doctest: +SKIP
        [(0, 1048601), (1048601, 523877)]

    Raises:
        UsageError(FILE_NOT_FOUND): the file is gone.
        MeasureError(UNREADABLE_INPUT): the file cannot be read, or its gzip is damaged.
    """
    with _opened(r, stdin) as (stream, offset, length):
        held: list[bytes] = []  # a line still open, in the reads that hold it
        for data in _raw_blocks(r.path, stream, length=length):
            cut = data.rfind(b"\n") + 1
            if not cut:
                held.append(data)
                continue
            block = b"".join([*held, data[:cut]]) if held else data[:cut]
            yield offset, block
            offset += len(block)
            held = [data[cut:]] if cut < len(data) else []
        if held:
            yield offset, b"".join(held)


@dataclass(frozen=True)
class TextFiles:
    """Files whose texts are read lazily, one text per file, in order.

    Iterating yields each file's text through :func:`read_source` (what ``train`` reads
    when the files are counted in this process); a cluster instead reads
    :meth:`ranges` of them on its workers.

    Example::

        >>> files = TextFiles(expand_paths(["corpus/"]))  # doctest: +SKIP
        >>> sum(len(t) for t in files)  # doctest: +SKIP
    """

    paths: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "paths", tuple(str(p) for p in self.paths))

    def __iter__(self) -> Iterator[str]:
        for path in self.paths:
            yield read_source(path).text

    def __len__(self) -> int:
        return len(self.paths)

    def ranges(self, *, target_bytes: int) -> list[ByteRange]:
        """See :func:`split_ranges`."""
        return split_ranges(self.paths, target_bytes=target_bytes)
