"""Replace a file atomically: write a temporary sibling, fsync it, rename it over the target.

A reader sees the old file or the complete new one, never a partial write, because
``os.replace`` within one folder is atomic on POSIX. :func:`write_atomic` also refuses
a target that is one of the command's inputs, so bad arguments never destroy data.
It imports no torch, so ``tokembed.tokenizer`` may use it.

Example::

    >>> write_bytes_atomic(Path("/tmp/x.json"), b"{}")  # doctest: +SKIP
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from tokembed.errors import UsageError

__all__ = ["check_output", "replace_with", "write_atomic", "write_bytes_atomic"]

# mkstemp creates 0600; what we write (tokenizers, reports, ledgers, shards) is meant to be read.
_MODE = 0o644


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``; the temporary file is removed if anything fails.

    Raises:
        OSError: the folder is missing or not writable (nothing is left behind).
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def replace_with(path: Path, write: Callable[[Path], None]) -> None:
    """Replace ``path`` with what ``write(tmp)`` puts at a temporary sibling path, atomically.

    For writers that stream to a path themselves (safetensors' ``save_file``), so a
    large file is never held as one ``bytes`` object. The temporary file is removed
    if ``write`` or the rename fails.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, _MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_output(path: Path, *, inputs: Iterable[str | Path] = ()) -> Path:
    """The resolved ``path`` if it may be written: not one of ``inputs``, not a folder.

    Raises:
        UsageError(OUTPUT_EXISTS): ``path`` is one of ``inputs`` or an existing folder.
    """
    target = path.resolve()
    if any(target == Path(p).resolve() for p in inputs) or target.is_dir():
        raise UsageError(
            "OUTPUT_EXISTS",
            f"refusing to write {path}: it is an input or a folder",
            value=str(path),
            fix="choose a new output path",
        )
    return target


def write_atomic(path: Path, data: bytes, *, inputs: Iterable[str | Path] = ()) -> Path:
    """Check ``path`` against ``inputs``, create its folder, replace it atomically; returns ``path``.

    Raises:
        UsageError(OUTPUT_EXISTS): ``path`` is one of ``inputs`` or an existing folder.
    """
    target = check_output(path, inputs=inputs)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(target, data)
    return path
