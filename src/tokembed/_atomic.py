"""Replace a file atomically: write a temporary sibling, fsync it, rename it over the target.

A reader sees the old file or the complete new one, never a partial write, because
``os.replace`` within one folder is atomic on POSIX. The caller creates the folder and
checks what may be overwritten; this module only moves bytes. It imports no torch, so
``tokembed.tokenizer`` may use it.

Example::

    >>> write_bytes_atomic(Path("/tmp/x.json"), b"{}")  # doctest: +SKIP
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_bytes_atomic"]

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
