"""Batch encoding, in this process, in threads, or in a pool of worker processes.

On the compiled encoder (it releases the GIL while it merges, and while it splits the
scanned patterns too) the batch runs in threads - the calling thread and the process-wide
pool's (:func:`~tokembed.tokenizer.compiled.run_threaded`) - each with its own compiled
encoder sharing one chunk cache. The reference encoder needs processes: workers receive the
tokenizer once (pickled without its caches) and each builds its own encoder. Results
come back in input order either way.
"""

from __future__ import annotations

import array
import multiprocessing
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from tokembed.errors import UsageError
from tokembed.tokenizer.compiled import run_threaded
from tokembed.tokenizer.special import SpecialSet

__all__ = ["encode_batch", "encode_batch_flat", "progress_enabled"]


class _BatchEncoder(Protocol):
    """What a batch needs of a tokenizer (``Tokenizer`` is one; it must pickle for processes)."""

    @property
    def implementation(self) -> str: ...

    def encode(
        self, text: str, *, allowed_special: SpecialSet, disallowed_special: SpecialSet
    ) -> list[int]: ...


# Slices per thread: enough for the threads to even out texts of unequal length.
_SLICES_PER_WORKER = 8
# Compiled batches of fewer characters than this take one thread: starting threads and
# their encoders (each with an empty memo) then costs more than it saves (PUD's 1,000
# English lines, 111k characters: 0.73-1.00x of one thread on two).
_THREADED_MIN_CHARS = 1 << 17


def _short(texts: Sequence[str]) -> bool:
    """Whether ``texts`` hold fewer than :data:`_THREADED_MIN_CHARS` characters, reading only
    as many lengths as it takes: each ``len`` reads a str's header from memory, and summing
    all of a 7,000-line batch (the 7 Latin-script PUD languages) took 0.24 ms before its
    threads could start, where the first ~1,000 lines decide it (0.08 ms)."""
    total = 0
    for text in texts:
        total += len(text)
        if total >= _THREADED_MIN_CHARS:
            return False
    return True


_worker_tok: _BatchEncoder | None = None
_worker_opts: dict[str, Any] = {}


def _check_workers(workers: object, name: str, one: str) -> None:
    """Raise INVALID_ARGUMENT unless ``workers`` (the caller's ``name``) is an int >= 1."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"{name} must be an integer >= 1, got {workers!r}",
            value=workers,
            fix=f"pass {name}=1 ({one}) or more",
        )


def _runs(texts: Sequence[str], workers: int) -> list[Sequence[str]]:
    """``texts`` in runs of consecutive texts, :data:`_SLICES_PER_WORKER` per worker."""
    step = max(1, -(-len(texts) // (_SLICES_PER_WORKER * workers)))
    return [texts[i : i + step] for i in range(0, len(texts), step)]


def progress_enabled(progress: bool) -> bool:
    """Progress bars only when asked for and stderr is a terminal."""
    return progress and sys.stderr.isatty()


class _NoBar:
    """What a batch calls on its bar, doing nothing."""

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def _bar(total: int, progress: bool) -> Any:
    """A tqdm bar when one is shown, else a no-op: importing tqdm costs ~0.15 s of a fresh
    process, ten times encoding a thousand lines."""
    if not progress_enabled(progress):
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, unit="text")


def _init(tok: _BatchEncoder, opts: dict[str, Any]) -> None:
    global _worker_tok, _worker_opts
    _worker_tok, _worker_opts = tok, opts


def _encode_one(text: str) -> array.array[int]:
    assert _worker_tok is not None
    # An int64 array pickles as one buffer; a list pickles int by int (~3x slower here).
    return array.array("q", _worker_tok.encode(text, **_worker_opts))


def encode_batch(
    tok: _BatchEncoder,
    texts: Sequence[str],
    *,
    workers: int,
    options: Mapping[str, Any],
    progress: bool,
    many: Callable[[Sequence[str]], list[list[int]]] | None = None,
) -> list[list[int]]:
    """Encode each text with ``tok.encode(text, **options)``; order is preserved.

    ``many``, when given, encodes a run of texts at once with the same result (the
    compiled encoder's one call per run); it is used in this process and in threads.
    """
    _check_workers(workers, "workers", "this process")
    opts = dict(options)
    bar = _bar(len(texts), progress)

    def run(part: Sequence[str]) -> list[list[int]]:
        if many is not None:
            return many(part)
        return [tok.encode(text, **opts) for text in part]

    if tok.implementation == "compiled" and workers > 1 and _short(texts):
        workers = 1
    if workers == 1 or len(texts) < 2:
        out = []
        step = max(1, -(-len(texts) // _SLICES_PER_WORKER))
        for i in range(0, len(texts), step):
            out += run(texts[i : i + step])
            bar.update(min(step, len(texts) - i))
        bar.close()
        return out
    # Fail fast in the parent for policy errors that do not depend on the text.
    tok.encode("", **opts)
    if tok.implementation == "compiled":
        # The compiled encoder releases the GIL while it splits and merges, so threads
        # scale like tiktoken's own batch API without processes' start-up (1–2 s
        # each, which made process batches 0.6x tiktoken's threads on RusLit40).
        # Each task is a run of consecutive texts: one task per text would cost
        # more than encoding a short line, and the work left to the GIL (building
        # each result list) is then all that threads contend for.
        parts = _runs(texts, workers)

        def run_part(i: int) -> list[list[int]]:
            encoded = run(parts[i])
            bar.update(len(encoded))
            return encoded

        done: list[list[int]] = []
        for encoded in run_threaded(len(parts), run_part, threads=workers):
            done += encoded
        bar.close()
        return done
    # spawn, not fork: a forked child inherits locks held by the parent's threads
    # (a pool's, pytest's) and can hang.
    with multiprocessing.get_context("spawn").Pool(
        workers, initializer=_init, initargs=(tok, opts)
    ) as pool:
        out = []
        for ids in pool.imap(_encode_one, texts, chunksize=max(1, len(texts) // (8 * workers))):
            out.append(ids.tolist())
            bar.update()
    bar.close()
    return out


def encode_batch_flat(
    tok: _BatchEncoder,
    texts: Sequence[str],
    *,
    workers: int,
    many: Callable[[Sequence[str]], tuple[Any, Any]],
    join: Callable[[list[tuple[Any, Any]]], tuple[Any, Any]],
) -> tuple[Any, Any]:
    """``many(texts)`` - one ``uint32`` array of every text's ids and the ``len(texts) + 1``
    offsets that cut it - computed by runs of texts on up to ``workers`` threads on the
    compiled encoder (one where the batch is short: see ``_THREADED_MIN_CHARS``), and the
    runs' results joined in order by ``join`` (the encoder's ``join_flat``). No Python list
    or int is made per id."""
    _check_workers(workers, "num_threads", "this thread")
    if workers == 1 or len(texts) < 2 or tok.implementation != "compiled" or _short(texts):
        return many(texts)
    parts = _runs(texts, workers)
    return join(run_threaded(len(parts), lambda i: many(parts[i]), threads=workers))
