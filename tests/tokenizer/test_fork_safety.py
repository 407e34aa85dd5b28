"""A process forked while another thread is inside the compiled encoder can still encode.

DataLoader-style workers fork while a tokenizing thread of the parent is inside the C core,
holding a shard lock of the tokenizer's shared chunk cache (or its own encoder's lock). The
child has only the forking thread; without repair those locks stay held and the child hangs
on its first cache access. The core makes such locks new in the child (a fork generation
bumped by ``pthread_atfork``) and drops what they guarded.

Set-up is never guarded by a ``pthread_once`` either: the scanner's class tables and the
fork handler are made at module import, so a child forked while a thread of a fresh
process does its very first scan cannot inherit an unfinished once.

Every vocabulary kind is covered: a rank file (tiktoken's rule), explicit merges with the
compiled scanner, and explicit merges split in Python (``encode_chunks``). Each child must
answer within a timeout with the ids the parent computes. The property test forks at random
moments; its budget follows the fuzzers' ``TOKEMBED_FUZZ`` profile (``ci``: FORK_CASES
examples of two children each, what ``make test`` runs; ``release``: 1,000).
"""

from __future__ import annotations

import os
import random
import select
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import data_path
from tokembed.tokenizer._native import load
from tokembed.tokenizer.compiled import CompiledEncoder
from tokembed.tokenizer.formats import load_tokenizer
from tokembed.tokenizer.pretokenize import Pretokenizer
from tokembed.tokenizer.tokenizer import Tokenizer

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

_KINDS = ("rank file", "merges", "merges, Python split")
_CHILD_TIMEOUT = 20.0  # seconds; a healthy child answers in well under one
FORK_CASES = 1000 if os.environ.get("TOKEMBED_FUZZ", "ci") == "release" else 12


@cache
def _tokenizer(kind: str) -> Tokenizer:
    """A tokenizer whose compiled engine has a tiny shared cache: every chunk takes a shard
    lock, and full shards are emptied and refilled all the time."""
    if kind == "rank file":
        tok = load_tokenizer(data_path("tokenizers", "o200k_base.tiktoken"))
    else:
        tok = load_tokenizer(data_path("tokenizers", "smollm2-135m"))
        if kind == "merges, Python split":  # a pattern the compiled scanner does not run
            tok = Tokenizer(
                pretokenizer=Pretokenizer.preset(r"\s?\w+|\s?[^\w\s]+|\s+"), tables=tok.tables
            )
    engine = tok._engine
    assert isinstance(engine, CompiledEncoder)
    tok.__dict__["_engine"] = CompiledEncoder(engine.tables, tok.pretokenizer, cache_limit=256)
    return tok


@cache
def _busy_text(seed: int) -> str:
    """Words no cache has seen, so the encoding thread is almost always inside a shard lock."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyzабвгдеж中文한국"
    return " ".join("".join(rng.choices(letters, k=rng.randint(2, 12))) for _ in range(30_000))


@contextmanager
def _encoding_thread(tok: Tokenizer, seed: int) -> Iterator[None]:
    stop = threading.Event()
    texts = [_busy_text(seed % 3 + k) for k in range(2)]

    def run() -> None:
        k = 0
        while not stop.is_set():
            tok.encode_ordinary(texts[k % 2])
            k += 1

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _fork_and_encode(tok: Tokenizer, text: str) -> list[int] | None:
    """Fork; the child encodes ``text`` and sends the ids back. None: the child hung."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        try:
            os.close(read)
            ids = tok.encode_ordinary(text)
            os.write(write, (",".join(map(str, ids)) + "\n").encode())
        finally:
            os._exit(0)
    os.close(write)
    chunks, deadline = [], time.monotonic() + _CHILD_TIMEOUT
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                return None
            chunk = os.read(read, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    body = b"".join(chunks).decode().strip()
    return [int(i) for i in body.split(",")] if body else []


def _check(kind: str, *, children: int, seed: int, text: str) -> None:
    tok = _tokenizer(kind)
    expected = tok.encode_ordinary(text)
    rng = random.Random(seed)
    with _encoding_thread(tok, seed):
        time.sleep(0.05)  # the thread is inside the C core now
        for _ in range(children):
            time.sleep(rng.uniform(0, 0.01))
            assert _fork_and_encode(tok, text) == expected, kind


@pytest.mark.parametrize("kind", _KINDS)
def test_children_forked_during_an_encode_encode_like_the_parent(kind: str) -> None:
    _check(kind, children=8, seed=1, text=_busy_text(7)[:20_000] + " Hello, мир! 12345")


def test_the_repair_happens_in_the_child_and_only_there() -> None:
    module = load("_encode")
    assert module is not None
    tok = _tokenizer("merges")
    assert module.fork_repairs() == 0  # the parent's locks are never touched
    read, write = os.pipe()
    with _encoding_thread(tok, 2):
        time.sleep(0.05)
        pid = os.fork()
        if pid == 0:
            try:
                tok.encode_ordinary("hello world")
                os.write(write, str(module.fork_repairs()).encode())
            finally:
                os._exit(0)
        os.close(write)
        assert select.select([read], [], [], _CHILD_TIMEOUT)[0], "the child hung"
        repaired = int(os.read(read, 64) or b"0")
        os.close(read)
        os.waitpid(pid, 0)
    assert repaired >= 1  # the shared cache (and any encoder of the child) was made new
    assert module.fork_repairs() == 0


@settings(
    max_examples=FORK_CASES,
    deadline=timedelta(seconds=120),
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
@given(
    kind=st.sampled_from(_KINDS),
    seed=st.integers(0, 10_000),
    text=st.text("abc xyz, Hello! 12\nабвгд 中文 한국", max_size=200),  # bytes every kind has
)
def test_fork_during_encode_property(kind: str, seed: int, text: str) -> None:
    _check(kind, children=2, seed=seed, text=text)


# A fresh interpreter (its scanner tables untouched until now): threads start their very
# first scan while the main thread forks children that encode at once. Each child must exit
# within the bound with the right ids; the script reports how many hung or answered wrong.
_FIRST_SCAN = r"""
import os, signal, sys, threading, time
from tokembed.tokenizer.model import BPETables
from tokembed.tokenizer.pretokenize import Pretokenizer
from tokembed.tokenizer.tokenizer import Tokenizer

children, bound = int(sys.argv[1]), float(sys.argv[2])
tok = Tokenizer(pretokenizer=Pretokenizer.preset("cl100k"), tables=BPETables.byte_level(merges=[]))
assert tok.implementation == "compiled", tok.implementation
text, want = "héllo wörld 中文 " * 2000, list(b"hello world")
go = threading.Event()
threads = [threading.Thread(target=lambda: (go.wait(), tok.encode_ordinary(text)), daemon=True)
           for _ in range(3)]
for t in threads:
    t.start()
go.set()
pids = []
for _ in range(children):
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if tok.encode_ordinary("hello world") == want else 3)
        finally:
            os._exit(4)
    pids.append(pid)
hung = wrong = 0
deadline = time.monotonic() + bound
for pid in pids:
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            wrong += os.waitstatus_to_exitcode(status) != 0
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            hung += 1
            break
        time.sleep(0.01)
print(f"hung {hung} wrong {wrong}")
"""


def test_children_forked_during_the_first_scan_of_a_fresh_process_encode() -> None:
    """The scanner's class tables are filled at module import (no ``pthread_once`` around a
    first scan): a child forked while a thread fills them must not wait on it forever."""
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-c", _FIRST_SCAN, "16", str(_CHILD_TIMEOUT)],
        capture_output=True,
        text=True,
        timeout=4 * _CHILD_TIMEOUT,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["hung", "0", "wrong", "0"]


def test_no_compiled_module_guards_its_set_up_with_a_once() -> None:
    """A ``pthread_once`` (or any lock) held by a thread when the process forks stays held in
    the child: where the C library does not repair an interrupted once (glibc does, musl does
    not), the child hangs. The compiled modules do their set-up at import instead."""
    from pathlib import Path

    for name in ("_encode", "_count", "_learn"):
        module = load(name)
        assert module is not None
        assert module.__file__ is not None
        assert b"pthread_once" not in Path(module.__file__).read_bytes(), name
