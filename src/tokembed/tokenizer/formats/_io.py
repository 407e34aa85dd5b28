"""Reading and atomically writing tokenizer files.

Every writer goes through :func:`write_atomic`: the bytes are written to a
temporary file in the destination folder and renamed over the target, so a
crash never leaves half a tokenizer behind, and a path that is one of the
inputs is refused instead of overwritten.

Example::

    >>> write_atomic(Path("/tmp/x.json"), b"{}")  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tokembed._atomic import write_bytes_atomic
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


def write_atomic_check(path: Path, *, inputs: Iterable[Path] = ()) -> Path:
    """The resolved ``path`` if :func:`write_atomic` may write it.

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


def write_atomic(path: Path, data: bytes, *, inputs: Iterable[Path] = ()) -> Path:
    """Write ``data`` to ``path`` via a temporary file and a rename; returns ``path``.

    Raises:
        UsageError(OUTPUT_EXISTS): ``path`` is one of ``inputs`` or an existing folder.
    """
    target = write_atomic_check(path, inputs=inputs)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(target, data)
    return path
