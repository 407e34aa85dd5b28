"""Atomic writes: sets of files, refused targets, stale temporary files and OS errors as codes."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tokembed.errors import UsageError
from tokembed.files.atomic import (
    TEMP_PREFIX,
    check_output,
    remove_stale_temps,
    write_atomic,
    write_files_atomic,
)
from tokembed.files.os_errors import input_error, output_error, read_file_bytes

SRC = Path(__file__).resolve().parents[1] / "src"


def test_set_of_files_is_written_with_readable_mode(tmp_path: Path) -> None:
    a, b = tmp_path / "sub" / "a", tmp_path / "sub" / "b"
    write_files_atomic([(a, b"1"), (b, b"22")])
    assert (a.read_bytes(), b.read_bytes()) == (b"1", b"22")
    assert stat.S_IMODE(a.stat().st_mode) & 0o044 == 0o044
    assert sorted(p.name for p in a.parent.iterdir()) == ["a", "b"]


def test_one_refused_target_writes_nothing(tmp_path: Path) -> None:
    keep = tmp_path / "input.txt"
    keep.write_bytes(b"data")
    with pytest.raises(UsageError) as e:
        write_files_atomic([(tmp_path / "new", b"x"), (keep, b"y")], inputs=[keep])
    assert e.value.code == "OUTPUT_EXISTS"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input.txt"]
    assert keep.read_bytes() == b"data"


def test_fifo_and_device_are_refused_not_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for target in (fifo, Path("/dev/null")):
        with pytest.raises(UsageError) as e:
            write_atomic(target, b"x")
        assert e.value.code == "OUTPUT_NOT_A_FILE"
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    link = tmp_path / "to-null"
    link.symlink_to("/dev/null")
    with pytest.raises(UsageError) as e:
        check_output(link)
    assert e.value.code == "OUTPUT_NOT_A_FILE"


def test_folder_target_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as e:
        write_atomic(tmp_path, b"x")
    assert e.value.code == "OUTPUT_EXISTS"


def test_parent_that_is_a_file_and_long_names_are_coded(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"")
    with pytest.raises(UsageError) as e:
        write_atomic(tmp_path / "f" / "out.json", b"x")
    assert e.value.code == "OUTPUT_PARENT_NOT_FOLDER"
    with pytest.raises(UsageError) as e:
        write_atomic(tmp_path / ("n" * 300), b"x")
    assert e.value.code == "NAME_TOO_LONG"
    with pytest.raises(UsageError) as e:
        read_file_bytes(tmp_path / ("n" * 300))
    assert e.value.code == "NAME_TOO_LONG"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


@pytest.mark.parametrize(
    ("number", "code"),
    [
        (errno.EROFS, "OUTPUT_READ_ONLY"),
        (errno.ENOSPC, "OUTPUT_NO_SPACE"),
        (errno.EDQUOT, "OUTPUT_NO_SPACE"),
        (errno.EACCES, "OUTPUT_PERMISSION_DENIED"),
        (errno.ENOTDIR, "OUTPUT_PARENT_NOT_FOLDER"),
        (errno.ENAMETOOLONG, "NAME_TOO_LONG"),
        (errno.EIO, "OUTPUT_WRITE_FAILED"),
    ],
)
def test_every_output_errno_has_a_code(number: int, code: str) -> None:
    err = output_error(OSError(number, os.strerror(number)), Path("out.json"))
    assert (err.code, err.value, err.exit_code) == (code, "out.json", 2)


def test_input_errors_have_codes(tmp_path: Path) -> None:
    assert input_error(OSError(errno.EACCES, "denied"), tmp_path).code == "FILE_UNREADABLE"
    with pytest.raises(UsageError) as e:
        read_file_bytes(tmp_path)  # a folder
    assert e.value.code == "FILE_UNREADABLE"


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere; permissions cannot refuse")
def test_unwritable_folder_is_coded(tmp_path: Path) -> None:
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(UsageError) as e:
            write_atomic(tmp_path / "x", b"x")
        assert e.value.code == "OUTPUT_PERMISSION_DENIED"
    finally:
        tmp_path.chmod(0o700)


def test_stale_temps_of_dead_processes_are_removed_on_the_next_write(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    stale = tmp_path / f"{TEMP_PREFIX}{dead.stdout.strip()}-abcd1234-out.json"
    stale.write_bytes(b"half")
    live = tmp_path / f"{TEMP_PREFIX}{os.getpid()}-abcd1234-out.json"
    live.write_bytes(b"in progress")
    other = tmp_path / ".out.json.x.tmp"  # not ours by name: never touched
    other.write_bytes(b"")
    write_atomic(tmp_path / "out.json", b"{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name, "out.json"])
    assert remove_stale_temps(tmp_path, now=time.time() + 2 * 24 * 3600) == [live]


_KILLED_EXPORT = """
import os, signal, sys
from tokembed.tokenizer.formats import export_tiktoken
from tokembed.tokenizer.model import BPETables
from tokembed.tokenizer.pretokenize import Pretokenizer
from tokembed.tokenizer.tokenizer import Tokenizer

renames = []
real = os.replace
def replace_then_die(a, b):
    real(a, b)
    renames.append(b)
    if len(renames) == 1 and sys.argv[2] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)  # killed between the two renames
os.replace = replace_then_die
merges = [(97, 98)] if sys.argv[2] == "kill" else []
tok = Tokenizer(pretokenizer=Pretokenizer.preset("teaching"),
                tables=BPETables.byte_level(merges=merges, specials={"<|end|>": 300}))
export_tiktoken(tok, sys.argv[1])
"""


def test_export_killed_between_renames_is_refused_then_cleaned(tmp_path: Path) -> None:
    from tokembed.errors import FormatError
    from tokembed.tokenizer.formats import load_tokenizer

    env = {**os.environ, "PYTHONPATH": str(SRC)}
    argv = [sys.executable, "-c", _KILLED_EXPORT, str(tmp_path)]
    subprocess.run([*argv, "whole"], env=env, check=True)
    assert load_tokenizer(tmp_path / "tokenizer.tiktoken").n_merges == 0
    killed = subprocess.run([*argv, "kill"], env=env, check=False)
    assert killed.returncode == -9
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(TEMP_PREFIX)]
    assert len(leftovers) == 1
    assert leftovers[0].endswith("tokenizer.tiktoken.json")
    with pytest.raises(FormatError) as e:  # new ranks beside the old sidecar
        load_tokenizer(tmp_path / "tokenizer.tiktoken")
    assert e.value.code == "HASH_MISMATCH"
    subprocess.run([*argv, "whole"], env=env, check=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "tokenizer.tiktoken",
        "tokenizer.tiktoken.json",
    ]


_KILLED_FOLDER = """
import sys, torch
from torch import nn
from tokembed.checkpoint.folder import save_model_folder
model = nn.Module()
model.table = nn.Parameter(torch.zeros(64, 1 << 20))  # 256 MiB: the kill lands mid-write
print("ready", flush=True)
save_model_folder(sys.argv[1], model, address_hash="sha256:" + "0" * 64,
                  extra={"report.json": b"{}"}, inputs=[])
"""


def test_a_model_folder_killed_mid_write_leaves_only_temps_the_cleanup_removes(
    tmp_path: Path,
) -> None:
    import signal

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_FOLDER, str(tmp_path / "out")],
        stdout=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(tmp_path.iterdir()):
        time.sleep(0.001)
    time.sleep(0.05)  # inside the write
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left, "the write finished before the kill"
    assert all(name.startswith(TEMP_PREFIX) for name in left), left  # the prefix cleanup knows
    assert not (tmp_path / "out").exists()
    # The next write into the folder (a model folder, a file) removes what the kill left.
    write_atomic(tmp_path / "x.json", b"{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]


def test_no_module_creates_a_temporary_path_outside_files_atomic() -> None:
    # Each temporary path gets the one prefix that remove_stale_temps finds only if it is
    # made by tokembed.files.atomic; the standard library's temp makers name theirs otherwise.
    src = Path(__file__).resolve().parents[2] / "src" / "tokembed"
    makers = ("mkdtemp(", "mkstemp(", "NamedTemporaryFile(", "TemporaryDirectory(", "mktemp(")
    found = [
        f"{path.relative_to(src)}: {maker}"
        for path in sorted(src.rglob("*.py"))
        for maker in makers
        if maker in path.read_text(encoding="utf-8")
    ]
    assert found == []
