"""Text sources for training: user files, folders, globs, stdin, and the built-in default corpus.

:func:`read_texts` turns command-line style arguments into :class:`SourceText`
records, one per file, in a deterministic order: a folder is read recursively
in sorted path order (hidden entries such as ``.git`` skipped), a glob's
matches are sorted, ``.gz`` files are decompressed, ``"-"`` is standard
input. Text must be UTF-8: a bad byte is reported with the file and its
offset, never replaced.

:func:`default_corpus` is the ``.py`` sources of the running interpreter's
standard library (``sysconfig``'s ``stdlib`` path, site-packages excluded);
:func:`holdout_split` keeps whole files apart for held-out measurement.

Example::

    >>> sources = read_texts(["docs/", "notes/*.txt.gz"], max_bytes=8_000_000)  # doctest: +SKIP
    >>> train, held = holdout_split(sources, fraction=0.1)  # doctest: +SKIP
"""

from __future__ import annotations

import glob
import gzip
import hashlib
import sys
import sysconfig
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from tokembed.errors import MeasureError, TokenizerError, UsageError

__all__ = [
    "DEFAULT_CORPUS_BYTES",
    "SourceText",
    "default_corpus",
    "expand_paths",
    "holdout_split",
    "read_texts",
]

# The whole CPython 3.11 stdlib is ~31.5 MB of .py; 40 MB takes all of it, and
# 16,384 merges train on it in ~8 s (whole demo ~30 s on 2 cores).
DEFAULT_CORPUS_BYTES = 40_000_000
_STDIN = "-"
_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True, kw_only=True)
class SourceText:
    """One file's text; ``name`` is its path as found (``"-"`` for stdin)."""

    name: str
    text: str

    @property
    def n_bytes(self) -> int:
        return len(self.text.encode("utf-8", "surrogatepass"))


def _not_found(arg: str, what: str) -> UsageError:
    return UsageError(
        "FILE_NOT_FOUND",
        f"{what}: {arg}",
        value=arg,
        fix="pass existing files, folders, globs or '-' for standard input",
    )


def _walk(folder: Path) -> Iterator[Path]:
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            yield from _walk(entry)
        elif entry.is_file():
            yield entry


def expand_paths(paths_or_globs: Iterable[str]) -> list[str]:
    """Files named by the arguments, in order (folders recursive and sorted, globs sorted).

    Raises:
        UsageError(FILE_NOT_FOUND): an argument names nothing, or a glob matches no file.
    """
    out: list[str] = []
    for arg in paths_or_globs:
        path = Path(arg)
        if arg == _STDIN or path.is_file():
            out.append(arg)
        elif path.is_dir():
            out += [str(p) for p in _walk(path)]
        elif _GLOB_CHARS & set(arg):
            matches = sorted(m for m in glob.glob(arg, recursive=True) if Path(m).is_file())
            if not matches:
                raise _not_found(arg, "the pattern matches no file")
            out += matches
        else:
            raise _not_found(arg, "no such file or folder")
    return out


def _decode(name: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TokenizerError(
            "INVALID_UTF8",
            f"{name} is not UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start}",
            value=(name, exc.start),
            fix="convert the file to UTF-8 (e.g. iconv -t UTF-8) or leave it out",
        ) from None


def _read_bytes(name: str, stdin: BinaryIO | None) -> bytes:
    try:
        if name == _STDIN:
            return (stdin or sys.stdin.buffer).read()
        data = Path(name).read_bytes()
        # gzip magic number 1f 8b: decompress whatever the suffix says.
        return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    except (OSError, EOFError, zlib.error) as exc:
        raise MeasureError(
            "UNREADABLE_INPUT",
            f"cannot read {name}: {exc}",
            value=name,
            fix="check the file's permissions, or re-create a damaged .gz",
        ) from None


def read_texts(
    paths_or_globs: Iterable[str],
    *,
    max_bytes: int | None = None,
    stdin: BinaryIO | None = None,
) -> list[SourceText]:
    """One :class:`SourceText` per file; with ``max_bytes``, whole files in order while they fit.

    Raises:
        UsageError(FILE_NOT_FOUND): see :func:`expand_paths`.
        TokenizerError(INVALID_UTF8): a file is not UTF-8 (message: file and byte offset).
        MeasureError(UNREADABLE_INPUT): a file cannot be read or decompressed.
        TokenizerError(EMPTY_CORPUS): no text at all.
    """
    names = expand_paths(paths_or_globs)
    sources: list[SourceText] = []
    used = 0
    for name in names:
        data = _read_bytes(name, stdin)
        if max_bytes is not None and used + len(data) > max_bytes:
            continue
        used += len(data)
        sources.append(SourceText(name=name, text=_decode(name, data)))
    if not any(s.text for s in sources):
        raise TokenizerError(
            "EMPTY_CORPUS",
            f"no text in {len(names)} file(s)"
            + (f" within max_bytes={max_bytes}" if max_bytes is not None else ""),
            value=names[:3],
            fix="pass non-empty UTF-8 text files (or a larger max_bytes)",
        )
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
        TokenizerError(EMPTY_CORPUS): the interpreter has no readable stdlib sources.
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
        sources.append(SourceText(name=path.relative_to(root).as_posix(), text=text))
    if not sources:
        raise TokenizerError(
            "EMPTY_CORPUS",
            f"no readable .py files under {root}",
            value=str(root),
            fix="pass your own corpus with --corpus",
        )
    return sources


def holdout_split(
    sources: list[SourceText], *, fraction: float = 0.1
) -> tuple[list[SourceText], list[SourceText]]:
    """``(train, held_out)``: about ``fraction`` of the files, chosen by name hash, held out.

    Both sides are non-empty when there are two or more files; a single file is
    all training (nothing to hold out). Order inside each side is kept.

    Raises:
        UsageError(INVALID_ARGUMENT): ``fraction`` is not in [0, 1).
    """
    if not 0.0 <= fraction < 1.0:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"holdout fraction {fraction} is not in [0, 1)",
            value=fraction,
            fix="pass a fraction such as 0.1",
        )
    n = len(sources)
    k = min(max(round(fraction * n), 1 if fraction > 0 else 0), n - 1) if n >= 2 else 0
    held_names = {s.name for s in sorted(sources, key=lambda s: _shuffle_key(s.name))[:k]}
    return (
        [s for s in sources if s.name not in held_names],
        [s for s in sources if s.name in held_names],
    )
