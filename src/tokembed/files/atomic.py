"""Replace files atomically: write temporary siblings, fsync them, rename them over the targets.

A reader sees the old file or the complete new one, never a partial write, because
``os.replace`` within one folder is atomic on POSIX. Files that belong together
(:func:`write_files_atomic`) are all written and synced before the first rename, and
the last one renamed is the set's commit point: a reader that checks it (a sidecar
recording its partner's hash) sees either the whole new set or refuses.

Folders (a model folder, a distributed checkpoint) are written whole into a temporary
sibling folder (:func:`new_temp_folder`) and renamed into place (:func:`publish_folder`):
a reader sees no folder or a complete one.

Temporary files and folders are named ``.tokembed-tmp-<pid>-<random>-<name>``. A write killed
before its rename leaves one behind; the next write into that folder removes those
whose process is gone (or that are older than a day, in case the pid was reused).

Outputs are checked before anything is written: a path that is one of the command's
inputs, a folder, or a device, FIFO or socket is refused, so bad arguments never destroy
data. Every ``OSError`` while writing becomes a coded ``UsageError`` (see
:func:`tokembed.files.os_errors.output_error`). This module imports no torch.

Example::

    >>> write_bytes_atomic(Path("/tmp/x.json"), b"{}")  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from tokembed.errors import UsageError
from tokembed.files.os_errors import output_error

__all__ = [
    "TEMP_PREFIX",
    "check_new_folder",
    "check_output",
    "new_temp_folder",
    "publish_folder",
    "remove_stale_temps",
    "replace_with",
    "write_atomic",
    "write_bytes_atomic",
    "write_files_atomic",
]

TEMP_PREFIX = ".tokembed-tmp-"
# mkstemp-like files are 0600; what we write (tokenizers, reports, ledgers, shards) is meant
# to be read.
_MODE = 0o644
# A temporary file whose pid is alive may still be a write in progress, unless it is this old
# (pids are reused; no write of ours takes a day).
_STALE_SECONDS = 24 * 3600
# Keep the temporary name below the usual 255-byte limit even for long target names.
_NAME_ROOM = 120


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists but belongs to someone else
        return True
    return True


def remove_stale_temps(folder: Path, *, now: float | None = None) -> list[Path]:
    """Delete the temporary files killed writes left in ``folder``; returns what was removed.

    A temporary file is stale when the process in its name no longer runs, or it is
    older than a day. Files without the prefix are never touched; errors are ignored
    (another process may be cleaning up at the same time).
    """
    removed: list[Path] = []
    now = time.time() if now is None else now
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(TEMP_PREFIX):
            continue
        pid_text = entry.name[len(TEMP_PREFIX) :].split("-", 1)[0]
        try:
            old = now - entry.stat(follow_symlinks=False).st_mtime > _STALE_SECONDS
            if old or not pid_text.isdigit() or not _alive(int(pid_text)):
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            continue
    return removed


def _temp_name(target: Path) -> Path:
    return target.with_name(
        f"{TEMP_PREFIX}{os.getpid()}-{secrets.token_hex(4)}-{target.name[:_NAME_ROOM]}"
    )


def _fsync_folder(folder: Path) -> None:
    # Makes the renames themselves durable; some filesystems refuse fsync on a folder.
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _refuse(path: Path, why: str, code: str = "OUTPUT_EXISTS") -> UsageError:
    return UsageError(
        code, f"refusing to write {path}: {why}", value=str(path), fix="choose a new output path"
    )


def check_output(path: Path, *, inputs: Iterable[str | Path] = ()) -> Path:
    """The resolved ``path`` if it may be written: not one of ``inputs``, a regular file or new.

    Raises:
        UsageError(OUTPUT_EXISTS): ``path`` is one of ``inputs`` or an existing folder.
        UsageError(OUTPUT_NOT_A_FILE): ``path`` is a device, FIFO or socket.
        UsageError(NAME_TOO_LONG, OUTPUT_PARENT_NOT_FOLDER, OUTPUT_PERMISSION_DENIED, ...):
            the path cannot even be examined.
    """
    try:
        target = path.resolve()
        if any(target == Path(p).resolve() for p in inputs):
            raise _refuse(path, "it is one of the inputs")
        try:
            mode = os.stat(target).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return target  # new file; a parent that is a file is reported when writing
    except OSError as exc:
        raise output_error(exc, path) from None
    if stat.S_ISDIR(mode):
        raise _refuse(path, "it is a folder")
    if not stat.S_ISREG(mode):
        raise _refuse(path, "it is a device, FIFO or socket", "OUTPUT_NOT_A_FILE")
    return target


def _write_temp(target: Path, data: bytes) -> Path:
    tmp = _temp_name(target)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _MODE)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _MODE)  # the umask may have narrowed it
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def write_files_atomic(
    files: Sequence[tuple[Path, bytes]], *, inputs: Iterable[str | Path] = ()
) -> list[Path]:
    """Write every ``(path, data)``: all checked, then all written and synced, then renamed.

    Nothing is replaced unless every file was written completely; the last pair is
    renamed last, so a reader that verifies it against the others detects a set cut short
    by a kill between the renames. Returns the resolved paths.

    Raises:
        UsageError(OUTPUT_EXISTS, OUTPUT_NOT_A_FILE): see :func:`check_output`.
        UsageError(OUTPUT_READ_ONLY, OUTPUT_NO_SPACE, OUTPUT_PARENT_NOT_FOLDER,
            OUTPUT_PERMISSION_DENIED, NAME_TOO_LONG, OUTPUT_WRITE_FAILED): the OS refused;
            nothing is left behind.
    """
    keep = list(inputs)
    targets = [check_output(Path(p), inputs=keep) for p, _ in files]
    temps: list[Path] = []
    current = targets[0] if targets else Path()
    try:
        for folder in dict.fromkeys(t.parent for t in targets):
            current = folder
            folder.mkdir(parents=True, exist_ok=True)
            remove_stale_temps(folder)
        for target, (_, data) in zip(targets, files, strict=True):
            current = target
            temps.append(_write_temp(target, data))
        for tmp, target in zip(temps, targets, strict=True):
            current = target
            os.replace(tmp, target)
    except OSError as exc:
        for tmp in temps:
            tmp.unlink(missing_ok=True)
        raise output_error(exc, current) from None
    except BaseException:
        for tmp in temps:
            tmp.unlink(missing_ok=True)
        raise
    for folder in dict.fromkeys(t.parent for t in targets):
        _fsync_folder(folder)
    return targets


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``; the temporary file is removed if anything fails.

    Raises:
        UsageError: as :func:`write_files_atomic` (a folder, device or FIFO is refused).
    """
    write_files_atomic([(Path(path), data)])


def write_atomic(path: Path, data: bytes, *, inputs: Iterable[str | Path] = ()) -> Path:
    """Check ``path`` against ``inputs``, create its folder, replace it atomically; returns ``path``.

    Raises:
        UsageError(OUTPUT_EXISTS): ``path`` is one of ``inputs`` or an existing folder.
        UsageError: the other codes of :func:`write_files_atomic`.
    """
    write_files_atomic([(Path(path), data)], inputs=inputs)
    return path


def replace_with(path: Path, write: Callable[[Path], None]) -> None:
    """Replace ``path`` with what ``write(tmp)`` puts at a temporary sibling path, atomically.

    For writers that stream to a path themselves (safetensors' ``save_file``), so a
    large file is never held as one ``bytes`` object. The temporary file carries
    :data:`TEMP_PREFIX` (cleaned up later if a kill leaves it) and is removed if
    ``write`` or the rename fails.

    Raises:
        UsageError: as :func:`write_files_atomic`.
    """
    target = check_output(Path(path))
    tmp = _temp_name(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(target.parent)
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, _MODE)
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise output_error(exc, target) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_folder(target.parent)


def check_new_folder(path: Path, *, inputs: Iterable[str | Path] = ()) -> Path:
    """The resolved ``path`` if a new folder may be created there: not an input, not existing.

    Raises:
        UsageError(OUTPUT_EXISTS): ``path`` exists or is one of ``inputs``.
        UsageError(NAME_TOO_LONG, OUTPUT_PARENT_NOT_FOLDER, ...): it cannot be examined.
    """
    try:
        target = Path(path).resolve()
        if any(target == Path(p).resolve() for p in inputs):
            raise _refuse(path, "it is one of the inputs")
        exists = os.path.lexists(target)
    except OSError as exc:
        raise output_error(exc, Path(path)) from None
    if exists:
        raise UsageError(
            "OUTPUT_EXISTS",
            f"refusing to write {path}: it exists",
            value=str(path),
            fix="choose a new output folder",
        )
    return target


def new_temp_folder(target: Path) -> Path:
    """Create the temporary sibling folder a folder ``target`` is written into.

    Its name carries :data:`TEMP_PREFIX` and this process id, so a write killed before
    :func:`publish_folder` leaves a folder that :func:`remove_stale_temps` removes.

    Raises:
        UsageError: as :func:`write_files_atomic` (the parent cannot be created or written).
    """
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(target.parent)
        tmp = _temp_name(target)
        tmp.mkdir(mode=0o755)
    except OSError as exc:
        raise output_error(exc, target) from None
    return tmp


def publish_folder(tmp: Path, target: Path) -> None:
    """Rename the complete folder ``tmp`` (from :func:`new_temp_folder`) to ``target``.

    The files inside are fsynced first and the parent after the rename. On failure
    ``tmp`` is removed.

    Raises:
        UsageError(OUTPUT_EXISTS): ``target`` appeared meanwhile.
        UsageError: the other codes of :func:`write_files_atomic`.
    """
    try:
        for entry in os.scandir(tmp):
            if entry.is_file(follow_symlinks=False):
                with open(entry.path, "rb") as f:
                    os.fsync(f.fileno())
        _fsync_folder(tmp)
        os.chmod(tmp, 0o755)  # the umask may have narrowed it; a folder is read like a file
        if os.path.lexists(target):
            raise _refuse(target, "it exists")
        os.rename(tmp, target)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise output_error(exc, target) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_folder(target.parent)
