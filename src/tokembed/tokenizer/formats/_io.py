"""Reading and atomically writing tokenizer files.

Every writer goes through :func:`write_atomic` (from ``tokembed._atomic``): the
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

from tokembed._atomic import check_output as write_atomic_check
from tokembed._atomic import write_atomic
from tokembed.errors import FormatError, UsageError

__all__ = ["read_json", "require_file", "write_atomic", "write_atomic_check"]


def require_file(path: Path) -> Path:
    """``path`` itself if it is an existing file.

    Raises:
        UsageError(FILE_NOT_FOUND): nothing (or no file) is there.
    """
    if not path.is_file():
        raise UsageError(
            "FILE_NOT_FOUND",
            f"no such file: {path}",
            value=str(path),
            fix="check the path (a tokenizer file or a folder containing tokenizer.json)",
        )
    return path


def read_json(path: Path) -> Any:
    """Parsed JSON of ``path``.

    Raises:
        UsageError(FILE_NOT_FOUND): the file does not exist.
        FormatError(MALFORMED_TOKENIZER_FILE): it is not UTF-8 JSON.
    """
    raw = require_file(path).read_bytes()
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FormatError(
            "MALFORMED_TOKENIZER_FILE",
            f"{path} is not valid UTF-8 JSON: {exc}",
            value=str(path),
            fix="pass an unmodified tokenizer file",
        ) from None
