"""Corpus to training shards: ``tokembed tokenize`` against the tools users run for the same job.

Every side reads the same plain-text corpus (RusLit-40, decompressed and repeated up to
``--mb`` megabytes, one document per line), encodes it with the same vocabulary (GPT-2's, as tiktoken's ``r50k_base``
rank file, and ``o200k_base``; HF ``tokenizers`` reads tokembed's ``tokenizer.json`` export) and
writes the ids to disk; each runs in a fresh process, timed from start to exit (start-up,
tokenizer load, reading, encoding and writing: what a user waits for), and its peak
resident memory is the largest sum over its process tree, sampled every 20 ms. The sides, each at its documented
best configuration on this machine's cores:

* ``tokembed``: ``tokembed tokenize CORPUS -t TOK -o OUT --no-eot --workers N`` (Megatron
  indexed dataset; streaming, one process per worker);
* ``gigatoken``: ``Tokenizer.from_tiktoken`` then ``encode_files(TextFileSource([CORPUS], separator="\\n"))``
  (its own thread pool over all cores), then the flat ids written with NumPy;
* ``fastokens``: ``Tokenizer.from_tiktoken``, batches of 10,000 lines through ``encode_batch_flat`` (its thread pool),
  each batch's ids appended to one file;
* ``hf``: HF ``tokenizers`` ``encode_batch_fast`` on batches of 10,000 lines
  (``TOKENIZERS_PARALLELISM`` on), ids appended — what Megatron's
  ``preprocess_data.py`` does per worker.

No end-of-text ids are added anywhere, so every side's id stream must be the same:
the SHA-256 of each stream (as uint32) is printed and compared after the timing.

    python benchmarks/bench_shards.py                     # 200 MB, gpt2 and o200k
    python benchmarks/bench_shards.py --mb 2000 --vocab gpt2 --only tokembed  # memory at 2 GB
    python benchmarks/bench_shards.py --quick
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _env import load_line, machine_line

_DATA = Path(
    os.environ.get("TOKEMBED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)
_BATCH = 10_000
_SIDES = ("tokembed", "gigatoken", "fastokens", "hf")


def _corpus(folder: Path, mb: float) -> Path:
    """RusLit-40's lines repeated until the file holds ``mb`` megabytes."""
    with gzip.open(_DATA / "ruslit" / "ruslit40.txt.gz", "rb") as f:
        text = f.read()
    path = folder / "corpus.txt"
    want = int(mb * 1e6)
    with path.open("wb") as out:
        written = 0
        while written < want:
            piece = text[: want - written]
            cut = piece.rfind(b"\n") + 1 if len(piece) < len(text) else len(piece)
            if not cut:  # less than one line left to fill
                break
            out.write(piece[:cut])
            written += cut
    return path


def _tokenizer_files(folder: Path, vocab: str) -> dict[str, str]:
    """The vocabulary as each side loads it: our spec, a tokenizer.json, a rank file."""
    from tokembed.tokenizer import export_hf, load_tokenizer

    # GPT-2's vocabulary is tiktoken's r50k_base; HF tokenizers reads our export of it.
    name = "r50k_base" if vocab == "gpt2" else "o200k_base"
    ranks = str(_DATA / "tokenizers" / f"{name}.tiktoken")
    json_path = export_hf(load_tokenizer(ranks), folder / name)
    return {"spec": ranks, "json": str(json_path), "tiktoken": ranks, "encoding": name}


def _lines(path: Path):  # type: ignore[no-untyped-def]
    batch: list[str] = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line:
                batch.append(line)
            if len(batch) == _BATCH:
                yield batch
                batch = []
    if batch:
        yield batch


def _child(side: str, corpus: Path, out: Path, files: dict[str, str], dtype: str) -> None:
    """One side's whole job, run in this (fresh) process."""
    if side == "gigatoken":
        import gigatoken

        tok = gigatoken.Tokenizer.from_tiktoken(files["tiktoken"])
        docs = tok.encode_files(gigatoken.TextFileSource([str(corpus)], separator="\n"))
        import awkward as ak

        np.asarray(ak.flatten(docs), dtype=dtype).tofile(out / "ids.bin")
        return
    with (out / "ids.bin").open("wb") as f:
        if side == "fastokens":
            import fastokens

            if files["encoding"] == "r50k_base":  # not one of its presets: pattern and EOT given
                from tokembed.tokenizer.patterns import PATTERNS  # tiktoken's r50k regex

                tok = fastokens.Tokenizer.from_tiktoken(
                    files["tiktoken"],
                    pattern=PATTERNS["r50k"],
                    special_tokens={"<|endoftext|>": 50256},
                )
            else:
                tok = fastokens.Tokenizer.from_tiktoken(
                    files["tiktoken"], encoding=files["encoding"]
                )
            for batch in _lines(corpus):
                ids, _ = tok.encode_batch_flat(batch)
                np.frombuffer(ids, dtype="<u4").astype(dtype).tofile(f)
            return
        from tokenizers import Tokenizer

        hf = Tokenizer.from_file(files["json"])
        for batch in _lines(corpus):
            encs = hf.encode_batch_fast(batch, add_special_tokens=False)
            np.fromiter((i for e in encs for i in e.ids), dtype=dtype).tofile(f)


def _run(
    side: str, corpus: Path, out: Path, files: dict[str, str], workers: int
) -> tuple[float, int]:
    """Seconds and peak RSS (bytes) of one side in a fresh process."""
    if side == "tokembed":
        cmd = [sys.executable, "-m", "tokembed.cli", "--quiet", "tokenize", str(corpus), "-t",
               files["spec"], "-o", str(out), "--no-eot", "--workers", str(workers)]  # fmt: skip
    else:
        out.mkdir()
        cmd = [sys.executable, __file__, "--child", side, "--corpus", str(corpus), "--out", str(out),
               "--files", repr(files)]  # fmt: skip
    import psutil

    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    peak = 0
    root = psutil.Process(proc.pid)
    while proc.poll() is None:
        # The whole process tree's resident memory (tokembed's workers are processes),
        # sampled every 20 ms; the kernel's ru_maxrss is per process and, after a fork
        # from this (large) parent, starts at the parent's size.
        try:
            tree = [root, *root.children(recursive=True)]
            peak = max(peak, sum(p.memory_info().rss for p in tree))
        except psutil.Error:
            pass
        time.sleep(0.02)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{side} failed with status {proc.returncode}: {' '.join(cmd)}")
    return seconds, peak


def _stream_digest(side: str, out: Path, dtype: str) -> tuple[str, int]:
    """SHA-256 and length of the side's id stream as little-endian uint32."""
    if side == "tokembed":
        from tokembed.embedding import open_shards

        shards = open_shards(out)
        parts = [
            np.memmap(out / f"{s.name}.bin", dtype=shards.manifest.dtype, mode="r")
            for s in shards.manifest.shards
        ]
    else:
        parts = [np.fromfile(out / "ids.bin", dtype=dtype)]
    digest, n = hashlib.sha256(), 0
    for p in parts:
        digest.update(np.asarray(p, dtype="<u4").tobytes())
        n += len(p)
    return digest.hexdigest()[:16], n


def _version(side: str) -> str:
    from importlib.metadata import version

    return (
        {
            "tokembed": "tokembed",
            "gigatoken": "gigatoken",
            "fastokens": "fastokens",
            "hf": "tokenizers",
        }[side]
        + " "
        + version(
            {
                "tokembed": "tokembed",
                "gigatoken": "gigatoken",
                "fastokens": "fastokens",
                "hf": "tokenizers",
            }[side]
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=200.0, help="corpus size in MB (default 200)")
    parser.add_argument("--vocab", choices=("gpt2", "o200k", "both"), default="both")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--only", choices=_SIDES, action="append")
    parser.add_argument("--quick", action="store_true", help="5 MB, to check the script runs")
    parser.add_argument("--child", choices=_SIDES[1:], help=argparse.SUPPRESS)
    parser.add_argument("--corpus", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--files", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        import ast

        files = ast.literal_eval(args.files)
        dtype = "<u2" if files["encoding"] == "r50k_base" else "<u4"
        _child(args.child, Path(args.corpus), Path(args.out), files, dtype)
        return
    mb = 5.0 if args.quick else args.mb
    sides = args.only or list(_SIDES)
    vocabs = ["gpt2", "o200k"] if args.vocab == "both" else [args.vocab]
    print(load_line("start"))
    print(machine_line())
    print(
        "sides: " + ", ".join(_version(s) for s in sides) + f"; tokembed --workers {args.workers}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        corpus = _corpus(folder, mb)
        size = corpus.stat().st_size
        print(f"corpus: RusLit-40 lines repeated, {size / 1e6:.1f} MB, one document per line")
        for vocab in vocabs:
            files = _tokenizer_files(folder, vocab)
            results = {}
            for side in sides:
                out = folder / f"{vocab}-{side}"
                seconds, rss = _run(side, corpus, out, files, args.workers)
                dtype = "<u2" if vocab == "gpt2" else "<u4"
                results[side] = (seconds, rss, *_stream_digest(side, out, dtype))
                shutil.rmtree(out)
            print(
                f"\n{vocab}: {'side':<10} {'seconds':>8} {'MB/s':>7} {'peak RSS MB':>12} {'ids':>12}  stream sha256"
            )
            ours = results.get("tokembed")
            for side, (seconds, rss, digest, n) in results.items():
                ratio = (
                    ""
                    if ours is None or side == "tokembed"
                    else f"  tokembed is {seconds / ours[0]:.2f}x its speed"
                )
                print(
                    f"{'':>{len(vocab) + 1}} {side:<10} {seconds:8.2f} {size / seconds / 1e6:7.1f} {rss / 1e6:12.0f} {n:12,}  {digest}{ratio}"
                )
            same = len({r[2] for r in results.values()}) == 1
            print(f"{'':>{len(vocab) + 1}} id streams identical: {same}")
    print(load_line("end"))


if __name__ == "__main__":
    main()
