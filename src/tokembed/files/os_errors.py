"""Turn the operating system's refusals into coded errors, for reads and for writes.

An ``OSError`` carries an errno that says why the kernel refused (a read-only
filesystem, a full disk, a parent that is a file, a name past the filesystem's
limit). Each reason a user can act on gets its own code, so the CLI prints one
line that says what to change instead of a traceback.

Example::

    >>> try:
    ...     Path("/proc/version").write_bytes(b"")  # doctest: +SKIP
    ... except OSError as exc:
    ...     raise output_error(exc, Path("/proc/version"))  # doctest: +SKIP
"""

from __future__ import annotations

import errno
from pathlib import Path

from tokembed.errors import UsageError

__all__ = ["input_error", "output_error", "read_file_bytes"]

# A path echoed in a one-line error is cut here (a name too long may be thousands of bytes).
_SHOWN = 200

# errno -> (code, what happened, what to do). Anything else is OUTPUT_WRITE_FAILED.
_OUTPUT: dict[int, tuple[str, str, str]] = {
    errno.EROFS: ("OUTPUT_READ_ONLY", "the filesystem is read-only", "write to a writable folder"),
    errno.EACCES: (
        "OUTPUT_PERMISSION_DENIED",
        "permission denied",
        "write to a folder you may write to",
    ),
    errno.EPERM: (
        "OUTPUT_PERMISSION_DENIED",
        "operation not permitted",
        "write to a folder you may write to",
    ),
    errno.ENOSPC: (
        "OUTPUT_NO_SPACE",
        "no space left on the device",
        "free space or write elsewhere",
    ),
    errno.EDQUOT: ("OUTPUT_NO_SPACE", "disk quota exceeded", "free space or write elsewhere"),
    errno.ENOTDIR: (
        "OUTPUT_PARENT_NOT_FOLDER",
        "a parent of the path is a file, not a folder",
        "choose a path whose parents are folders",
    ),
    errno.EEXIST: (
        "OUTPUT_PARENT_NOT_FOLDER",
        "a parent of the path exists and is not a folder",
        "choose a path whose parents are folders",
    ),
    errno.ENAMETOOLONG: (
        "NAME_TOO_LONG",
        "a file name is longer than the filesystem allows",
        "choose a shorter name",
    ),
}


def output_error(exc: OSError, path: Path) -> UsageError:
    """The coded error for ``exc``, raised while writing ``path``.

    Returns (does not raise) a ``UsageError`` with OUTPUT_READ_ONLY, OUTPUT_PERMISSION_DENIED,
    OUTPUT_NO_SPACE, OUTPUT_PARENT_NOT_FOLDER, NAME_TOO_LONG or OUTPUT_WRITE_FAILED.
    """
    code, why, fix = _OUTPUT.get(
        exc.errno or 0,
        ("OUTPUT_WRITE_FAILED", exc.strerror or str(exc), "check the output path and the disk"),
    )
    shown = str(path) if len(str(path)) <= _SHOWN else str(path)[:_SHOWN] + "…"
    return UsageError(code, f"cannot write {shown}: {why}", value=shown, fix=fix)


def input_error(exc: OSError, path: Path) -> UsageError:
    """The coded error for ``exc``, raised while reading ``path`` (missing files excepted).

    Returns a ``UsageError`` with NAME_TOO_LONG, FILE_NOT_FOUND or FILE_UNREADABLE.
    """
    if exc.errno == errno.ENAMETOOLONG:
        return UsageError(
            "NAME_TOO_LONG",
            f"cannot read {str(path)[:_SHOWN]}…: a file name is longer than the filesystem allows",
            value=str(path)[:_SHOWN],
            fix="check the path",
        )
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return UsageError(
            "FILE_NOT_FOUND", f"no such file: {path}", value=str(path), fix="check the path"
        )
    return UsageError(
        "FILE_UNREADABLE",
        f"cannot read {path}: {exc.strerror or exc}",
        value=str(path),
        fix="check the file's permissions (or that it is a file, not a folder)",
    )


def read_file_bytes(path: Path) -> bytes:
    """The contents of ``path``; every OS refusal becomes a coded error.

    Raises:
        UsageError(FILE_NOT_FOUND, FILE_UNREADABLE, NAME_TOO_LONG).
    """
    try:
        return path.read_bytes()
    except OSError as exc:
        raise input_error(exc, path) from None
