"""Reading and atomically writing tokenizer files.

Every writer goes through :func:`write_atomic` (from ``tokembed.files.atomic``): the
bytes are written to a temporary file in the destination folder and renamed over
the target, so a crash never leaves half a tokenizer behind, and a path that is
one of the inputs is refused instead of overwritten.

Example::

    >>> write_atomic(Path("/tmp/x.json"), b"{}")  # doctest: +SKIP
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokembed.errors import FormatError, UsageError
from tokembed.files.atomic import check_output as write_atomic_check
from tokembed.files.atomic import write_atomic
from tokembed.files.os_errors import input_error

__all__ = ["read_bytes", "read_json", "require_file", "write_atomic", "write_atomic_check"]


def require_file(path: Path) -> Path:
    """``path`` itself if it is an existing file.

    Raises:
        UsageError(FILE_NOT_FOUND): nothing (or no file) is there.
        UsageError(NAME_TOO_LONG, FILE_UNREADABLE): the path cannot be examined.
    """
    try:
        is_file = path.is_file()
    except OSError as exc:  # a name too long is not "missing" to Path.is_file
        raise input_error(exc, path) from None
    if not is_file:
        raise UsageError(
            "FILE_NOT_FOUND",
            f"no such file: {path}",
            value=str(path),
            fix="check the path (a tokenizer file or a folder containing tokenizer.json)",
        )
    return path


def read_bytes(path: Path) -> bytes:
    """The contents of the file ``path``.

    Raises:
        UsageError(FILE_NOT_FOUND, FILE_UNREADABLE, NAME_TOO_LONG).
    """
    try:
        return require_file(path).read_bytes()
    except OSError as exc:
        raise input_error(exc, path) from None


def read_json(path: Path) -> Any:
    """Parsed JSON of ``path``.

    Raises:
        UsageError(FILE_NOT_FOUND, FILE_UNREADABLE, NAME_TOO_LONG): see :func:`read_bytes`.
        FormatError(MALFORMED_TOKENIZER_FILE): it is not UTF-8 JSON, or nests deeper
            than Python's JSON parser can follow.
    """
    raw = read_bytes(path)
    try:
        return json.loads(raw.decode("utf-8"))
    # ValueError also covers an integer past Python's 4300-digit conversion limit.
    except (ValueError, RecursionError) as exc:
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise FormatError(
            "MALFORMED_TOKENIZER_FILE",
            f"{path} is not valid UTF-8 JSON: {why}",
            value=str(path),
            fix="pass an unmodified tokenizer file",
        ) from None
