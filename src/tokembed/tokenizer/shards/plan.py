"""Which input bytes each shard holds: a plan fixed by the inputs and the options alone.

Files are cut into byte ranges of about ``shard_bytes`` just after the bytes that end a
document (``\\n`` for lines and JSON Lines records, an empty line for blank-line
paragraphs, a separator that cannot overlap itself; see
:attr:`~tokembed.text.documents.DocumentRule.cut_after`), with
:func:`~tokembed.text.ranges.split_ranges`; a gzip file, a CoNLL-U file, a file that is
one document and standard input stay whole. Consecutive ranges are then packed into shards
of at most ``shard_bytes`` (a range that is larger is a shard of its own; standard input
always is). No worker count or engine enters the plan, so every way of running it writes
the same shards, and a resumed run finds the same ones.

Example::

    >>> plan = plan_shards(["a.txt", "big.txt"], TokenizeConfig(shard_bytes=64 << 20))  # doctest: +SKIP
    >>> [(s.name, s.ranges) for s in plan]  # doctest: +SKIP
    [('shard-00000', ((0, 0, None), (1, 0, 67108901))), ('shard-00001', ((1, 67108901, None),))]
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from tokembed.files.os_errors import input_error
from tokembed.text.documents import input_format_of
from tokembed.text.ranges import ByteRange, split_ranges
from tokembed.text.sources import STDIN
from tokembed.tokenizer.shards.manifest import InputRecord, ShardEntry
from tokembed.tokenizer.shards.options import TokenizeConfig

__all__ = ["byte_ranges", "hash_input", "plan_shards", "shard_name"]

_HASH_READ = 1 << 20


def shard_name(index: int) -> str:
    """The name of the ``index``-th shard (its files are ``NAME.bin`` and the index beside it)."""
    return f"shard-{index:05d}"


def _delimiter(name: str, config: TokenizeConfig) -> bytes | None:
    kind = input_format_of(name, config.input_format)
    if kind == "jsonl":
        return b"\n"
    if kind == "conllu":
        return None
    return config.rule.cut_after


def _size(name: str) -> int:
    try:
        return os.path.getsize(name)
    except OSError as exc:
        raise input_error(exc, Path(name)) from None


def plan_shards(names: Sequence[str], config: TokenizeConfig) -> tuple[ShardEntry, ...]:
    """The shards of the files ``names`` (expanded already; ``"-"`` is standard input).

    Raises:
        UsageError(FILE_NOT_FOUND, FILE_UNREADABLE): a file is gone or cannot be read.
        MeasureError(UNREADABLE_INPUT): see :func:`~tokembed.text.ranges.split_ranges`.
    """
    units: list[tuple[tuple[int, int, int | None], int | None]] = []  # (range, bytes)
    for index, name in enumerate(names):
        if name == STDIN:
            units.append(((index, 0, None), None))
            continue
        size = _size(name)
        delimiter = _delimiter(name, config)
        if delimiter is None:
            units.append(((index, 0, None), size))
            continue
        for r in split_ranges([name], target_bytes=config.shard_bytes, delimiter=delimiter):
            stop = size if r.stop is None else r.stop
            units.append(((index, r.start, r.stop), stop - r.start))
    groups: list[list[tuple[int, int, int | None]]] = []
    held = 0
    for unit, n_bytes in units:
        if n_bytes is None:  # standard input: a shard of its own
            groups.append([unit])
            held = config.shard_bytes
            continue
        if not groups or held + n_bytes > config.shard_bytes:
            groups.append([])
            held = 0
        groups[-1].append(unit)
        held += n_bytes
    return tuple(
        ShardEntry(name=shard_name(i), ranges=tuple(group)) for i, group in enumerate(groups)
    )


def byte_ranges(entry: ShardEntry, names: Sequence[str]) -> list[ByteRange]:
    """The shard's ranges as :class:`~tokembed.text.ranges.ByteRange` of the files ``names``."""
    return [
        ByteRange(path=names[index], index=index, start=start, stop=stop)
        for index, start, stop in entry.ranges
    ]


def hash_input(name: str) -> InputRecord:
    """The SHA-256 and size of one input file's bytes as stored.

    Raises:
        UsageError(FILE_NOT_FOUND, FILE_UNREADABLE, NAME_TOO_LONG): it cannot be read.
    """
    digest = hashlib.sha256()
    size = 0
    try:
        with open(name, "rb") as f:
            while block := f.read(_HASH_READ):
                digest.update(block)
                size += len(block)
    except OSError as exc:
        raise input_error(exc, Path(name)) from None
    return InputRecord(path=name, sha256=digest.hexdigest(), bytes=size)
