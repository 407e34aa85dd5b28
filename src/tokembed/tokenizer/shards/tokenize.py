"""Corpus to training shards: :func:`tokenize_corpus`, the one driver behind ``tokembed tokenize``.

A run hashes every input, plans its shards from the inputs and the options alone
(:mod:`.plan`), writes ``manifest.json`` listing them, encodes the shards that are not yet
complete (:mod:`.shard_writer`) in this process, in worker processes (``workers``) or on a Dask
cluster (``engine="dask"``), and rewrites the manifest after each finished shard. The
plan does not depend on where shards run, so the output is byte-identical for every
worker count and engine; an interrupted run resumes from its manifest (``resume``)
re-encoding only the shards it does not list complete (and verified by SHA-256).

Choices a user sees:

* an output folder that holds anything is refused unless it is a shard folder and
  ``resume`` or ``overwrite`` is given; ``overwrite`` removes only the shard files and
  the manifest, never other files;
* the end-of-text id follows each document where the tokenizer has ``<|endoftext|>``
  (``eot=None``), always (``True``, refused without one) or never (``False``);
* standard input (``"-"``) is copied to a temporary file in the output folder while it is
  hashed, then read like a file; it cannot be resumed.

Example::

    >>> tok = Tokenizer.from_tiktoken("gpt2")  # doctest: +SKIP
    >>> m = tokenize_corpus(["corpus/"], tokenizer=tok, output="shards",
    ...                     config=TokenizeConfig(format="megatron", workers=2))  # doctest: +SKIP
    >>> m.documents, m.tokens, m.dtype  # doctest: +SKIP
    (120000, 31250112, 'uint16')
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Executor, Future
from dataclasses import replace
from pathlib import Path
from typing import Any

from tokembed.errors import TokenizerError, UsageError
from tokembed.files.atomic import TEMP_PREFIX, remove_stale_temps, write_atomic
from tokembed.files.os_errors import output_error
from tokembed.text.sources import STDIN, expand_paths
from tokembed.tokenizer.shards.cluster import dask_shards
from tokembed.tokenizer.shards.manifest import (
    MANIFEST,
    InputRecord,
    Manifest,
    ShardEntry,
    manifest_bytes,
    read_manifest,
)
from tokembed.tokenizer.shards.options import TokenizeConfig, id_dtype
from tokembed.tokenizer.shards.plan import hash_input, plan_shards
from tokembed.tokenizer.shards.shard_writer import (
    ShardJob,
    encode_shard,
    runs_without_gil,
    shard_digests,
)
from tokembed.tokenizer.tokenizer import Tokenizer

__all__ = ["tokenize_corpus"]

_EOT = "<|endoftext|>"
_SHARD_FILE = re.compile(r"shard-\d{5}\.(bin|idx|json|ends\.npy)")
_SPOOL_READ = 1 << 20


def _eot_id(tokenizer: Tokenizer, eot: bool | None) -> int | None:
    if eot is False:
        return None
    found = tokenizer.special_tokens.get(_EOT)
    if found is None and eot:
        raise TokenizerError(
            "UNKNOWN_SPECIAL_TOKEN",
            f"the tokenizer has no {_EOT} to end documents with",
            value=_EOT,
            fix="add the special token to the tokenizer, or pass --no-eot",
        )
    return found


def _refuse_folder(folder: Path, why: str) -> UsageError:
    return UsageError(
        "OUTPUT_EXISTS",
        f"refusing to write shards into {folder}: {why}",
        value=str(folder),
        fix="choose a new output folder, or pass --resume (continue) or --overwrite (replace)",
    )


def _prepare_folder(folder: Path, names: Sequence[str], config: TokenizeConfig) -> Manifest | None:
    """Check the output folder; the old manifest when resuming; clear shards to overwrite."""
    try:
        if folder.exists() and not folder.is_dir():
            raise _refuse_folder(folder, "it is a file")
        resolved = folder.resolve()
        for name in names:
            if name != STDIN and Path(name).resolve().is_relative_to(resolved):
                raise _refuse_folder(folder, f"the input {name} is inside it")
        folder.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(folder)
        held = sorted(p.name for p in folder.iterdir())
    except OSError as exc:
        raise output_error(exc, folder) from None
    if not held:
        return None
    if MANIFEST not in held:
        raise _refuse_folder(folder, f"it holds files that are not shards ({held[0]}, ...)")
    if config.resume:
        return read_manifest(folder)
    if not config.overwrite:
        raise _refuse_folder(folder, "it already holds shards")
    for name in held:
        if name == MANIFEST or _SHARD_FILE.fullmatch(name):
            with contextlib.suppress(FileNotFoundError):
                (folder / name).unlink()
    return None


def _spool_stdin(folder: Path, stdin: Any) -> tuple[Path, InputRecord]:
    """Standard input copied to a temporary file in ``folder`` (hashed as it is copied)."""
    raw = stdin if stdin is not None else sys.stdin.buffer
    path = folder / f"{TEMP_PREFIX}{os.getpid()}-stdin"
    digest, size = hashlib.sha256(), 0
    try:
        with open(path, "wb") as f:
            while block := raw.read(_SPOOL_READ):
                f.write(block)
                digest.update(block)
                size += len(block)
    except OSError as exc:
        path.unlink(missing_ok=True)
        raise output_error(exc, path) from None
    return path, InputRecord(path=STDIN, sha256=digest.hexdigest(), bytes=size)


def _resumed(old: Manifest, new: Manifest, folder: Path) -> Manifest:
    """``new`` with the shards ``old`` completed and whose files still verify."""
    before, now = old.settings(), new.settings()
    if before != now or [s.ranges for s in old.shards] != [s.ranges for s in new.shards]:
        changed = sorted(k for k, v in now.items() if before.get(k) != v) or ["shard plan"]
        raise UsageError(
            "RESUME_MISMATCH",
            f"the run in {folder} was started with other {', '.join(changed)}",
            value=changed,
            fix="resume with the same inputs, tokenizer and options, or pass --overwrite",
        )
    out = new
    for shard in old.shards:
        if shard.files is not None and shard_digests(folder, list(shard.files)) == shard.files:
            out = out.with_shard(shard)
    return out


def _write_manifest(folder: Path, manifest: Manifest) -> None:
    write_atomic(folder / MANIFEST, manifest_bytes(manifest))


def _local_results(
    jobs: list[ShardJob], tokenizer: Tokenizer, workers: int
) -> Iterator[ShardEntry]:
    if workers == 1 or len(jobs) == 1:
        for job in jobs:
            yield encode_shard(job, tokenizer)
        return
    if all(runs_without_gil(job, tokenizer) for job in jobs):
        # Threads: the encoder releases the GIL and its chunk cache is shared, so a corpus's
        # first words are encoded once, not once per process. 200 MB of RusLit-40 lines on
        # o200k, 2 workers: 2.0-2.2 s in processes, 1.5-1.6 s in threads.
        yield from _thread_results(jobs, tokenizer, workers)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    # Spawned, not forked: a fork could inherit locks held by this process's other threads.
    # An executor, not a Pool: a worker that dies while starting (a script without the
    # __main__ guard re-runs itself in it) breaks the executor instead of hanging the run.
    context = multiprocessing.get_context("spawn")
    n = min(workers, len(jobs))
    try:
        pool = ProcessPoolExecutor(
            n, mp_context=context, initializer=_init_worker, initargs=(tokenizer,)
        )
        yield from _finished(pool, [pool.submit(_encode_in_worker, job) for job in jobs])
    except BrokenProcessPool as exc:
        raise TokenizerError(
            "WORKERS_NOT_STARTED",
            f"the {n} worker processes for tokenizing stopped before finishing: {exc}",
            value=n,
            fix='run it from a script whose calls sit under `if __name__ == "__main__":`, '
            "or pass workers=1",
        ) from None


def _thread_results(
    jobs: list[ShardJob], tokenizer: Tokenizer, workers: int
) -> Iterator[ShardEntry]:
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(min(workers, len(jobs)), thread_name_prefix="tokembed-shard")
    yield from _finished(pool, [pool.submit(encode_shard, job, tokenizer) for job in jobs])


def _finished(pool: Executor, futures: list[Future[ShardEntry]]) -> Iterator[ShardEntry]:
    """The entries of the shards as they finish. After the first failure no shard starts,
    the ones running finish and are still yielded (so the manifest lists every shard whose
    files exist), and then the failure is raised. The pool is shut down either way."""
    from concurrent.futures import FIRST_COMPLETED, wait

    error: BaseException | None = None
    pending = set(futures)
    try:
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                exc = future.exception()
                if exc is None:
                    yield future.result()
                elif error is None:
                    error = exc
                    # Cancelled here, not by shutdown(cancel_futures=True): a future the
                    # executor cancels never wakes a wait() on it.
                    pending = {f for f in pending if not f.cancel()}  # the running ones
    finally:  # a failure, or a caller that stops early
        pool.shutdown(wait=True, cancel_futures=True)
    if error is not None:
        raise error


_WORKER_TOKENIZER: list[Tokenizer] = []


def _init_worker(tokenizer: Tokenizer) -> None:
    _WORKER_TOKENIZER[:] = [tokenizer]


def _encode_in_worker(job: ShardJob) -> ShardEntry:
    return encode_shard(job, _WORKER_TOKENIZER[0])


def _input_bytes(job: ShardJob) -> int:
    """Input bytes of the job's shard (a progress bar's step)."""
    total = 0
    for index, start, stop in job.entry.ranges:
        end = os.path.getsize(job.names[index]) if stop is None else stop
        total += end - start
    return total


def tokenize_corpus(
    inputs: Iterable[str | Path],
    *,
    tokenizer: Tokenizer,
    output: str | Path,
    config: TokenizeConfig | None = None,
    stdin: Any = None,
) -> Manifest:
    """Tokenize the files ``inputs`` (files, folders, globs, ``"-"``) into shards under ``output``.

    Returns the final manifest (``complete`` True). ``stdin`` replaces the process's
    standard input for ``"-"``.

    Raises:
        UsageError(OUTPUT_EXISTS): the output folder holds files (see the module docstring).
        UsageError(RESUME_MISMATCH): ``resume`` with other inputs, tokenizer or options.
        UsageError(INVALID_ARGUMENT): ``"-"`` with ``resume``.
        TokenizerError(UNKNOWN_SPECIAL_TOKEN): ``eot=True`` and no ``<|endoftext|>``.
        FormatError(ID_RANGE_TOO_LARGE, DOCUMENT_TOO_LONG, MALFORMED_SHARDS): see
            :func:`~.options.id_dtype`, :mod:`.shard_formats`, :func:`~.manifest.read_manifest`.
        MeasureError(INPUT_NOT_UTF8, MALFORMED_JSONL, EMPTY_INPUT, ...): bad input.
        UsageError(OUTPUT_NO_SPACE, OUTPUT_WRITE_FAILED, ...): the OS refused a write; the
            manifest lists the shards that are complete.
    """
    config = config or TokenizeConfig()
    names = expand_paths(inputs)
    if STDIN in names and config.resume:
        raise UsageError(
            "INVALID_ARGUMENT",
            "a run that reads standard input cannot be resumed",
            value=STDIN,
            fix="save the input to a file and tokenize that",
        )
    dtype = id_dtype(tokenizer.n_vocab, config.format)
    eot_id = _eot_id(tokenizer, config.eot)
    folder = Path(output)
    old = _prepare_folder(folder, names, config)
    spooled: Path | None = None
    try:
        records: list[InputRecord] = []
        paths: list[str] = []
        for name in names:
            if name == STDIN:
                spooled, record = _spool_stdin(folder, stdin)
                paths.append(str(spooled))
            else:
                record = hash_input(name)
                paths.append(name)
            records.append(record)
        plan = plan_shards(paths, config)
        manifest = Manifest(
            address_hash=tokenizer.address_hash,
            tokenizer_name=getattr(tokenizer, "name", None),
            id_range=tokenizer.n_vocab,
            eot_id=eot_id,
            format=config.format,
            dtype=dtype,
            doc=config.rule.spec,
            field=config.field,
            input_format=config.input_format,
            errors=config.errors,
            shard_bytes=config.shard_bytes,
            inputs=tuple(records),
            shards=plan,
        )
        if old is not None:
            manifest = _resumed(old, manifest, folder)
        _write_manifest(folder, manifest)
        jobs = [
            ShardJob(
                entry=s,
                names=tuple(paths),
                folder=str(folder),
                config=replace(config, progress=False),
                dtype=dtype,
                eot_id=eot_id,
                address_hash=manifest.address_hash,
            )
            for s in manifest.shards
            if not s.complete
        ]
        manifest = _run(jobs, manifest, folder, tokenizer, config)
    finally:
        if spooled is not None:
            spooled.unlink(missing_ok=True)
    return manifest


def _run(
    jobs: list[ShardJob],
    manifest: Manifest,
    folder: Path,
    tokenizer: Tokenizer,
    config: TokenizeConfig,
) -> Manifest:
    from tqdm.auto import tqdm

    # The bar counts input bytes, shard by shard (sizes known before any shard runs).
    sizes = {j.entry.name: _input_bytes(j) for j in jobs}
    show = config.progress and sys.stderr.isatty()
    bar = tqdm(
        total=sum(sizes.values()), unit="B", unit_scale=True, desc="tokenize", disable=not show
    )
    with bar:
        if config.engine == "dask":
            results = dask_shards(
                jobs, tokenizer, scheduler=config.scheduler, workers=config.workers
            )
        else:
            results = _local_results(jobs, tokenizer, config.workers)
        for entry in results:
            manifest = manifest.with_shard(entry)
            _write_manifest(folder, manifest)
            bar.update(sizes[entry.name])
    return manifest
