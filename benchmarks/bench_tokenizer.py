"""Tokenizer-core benchmark: our training and encoding against HF tokenizers, rustbpe and tiktoken.

Every measurement runs in a fresh subprocess, so its peak memory (``ru_maxrss``,
which counts Rust allocations that ``tracemalloc`` cannot see) belongs to it
alone; reading the input is included in memory for every side alike, timing is not.
The corpus is decompressed once into a plain text file that every side reads.

Each peer runs as its users run it, in every reasonable configuration, and ours
is compared with the fastest one (and, for memory, with the same row):

* training, HF ``tokenizers``: ``Tokenizer.train([path], trainer)`` (from the file)
  and ``Tokenizer.train_from_iterator(lines, trainer)`` (the file's lines); both
  with the same regex split, ``ByteLevel`` bytes and ``vocab_size = 256 + merges``.
  (Handing HF the whole corpus as one string makes it work on a single huge
  sequence: several times slower and larger than either; that is not a user setup.)
* training, ``rustbpe`` (nanochat's trainer) if installed:
  ``Tokenizer().train_from_iterator(lines, 256 + merges, pattern=same regex)``;
  also at ``vocab_size=256`` (no merges), so its counting and learning times can
  be told apart: learning ~ train(merges) - train(0).
* merge learning alone: the chunk table is counted once (in its own child) and
  saved; our compiled learner (and, with ``--reference``, the reference learner) then
  learns from it, each in a fresh child whose memory row is the process's peak
  (interpreter + table + learner).
* encoding, tiktoken: ``encode_ordinary(text)`` (one thread) and, for batches,
  ``encode_ordinary_batch(pieces, num_threads=k)`` for k = the CPU count and
  tiktoken's default 8.

Every row also gives CPU seconds (all threads of the measuring process plus our
counting workers): on a loaded, shared machine wall time follows the load, CPU time
far less, so both ratios are printed.

Thread settings are not changed here; the ones in force are printed (HF tokenizers,
rustbpe and tiktoken's batches use rayon/thread pools sized by the CPU count).

    python benchmarks/bench_tokenizer.py            # full: RusLit40, 4096 and 32768 merges
    python benchmarks/bench_tokenizer.py --quick    # small slices, a few minutes

Targets (issue): training RusLit40 at 4096 and 32768 merges <= 1.0x rustbpe's time and
peak memory with merges identical to the reference; encoding >= 0.9x tiktoken single
process; the pure reference encoder >= 1 MB/s. The training rows say which compiled
modules our run loaded (merge learning, counting): the rest ran in Python.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _env import load_line, machine_line

DATA = Path(
    os.environ.get("TOKEMBED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)
RUSLIT = DATA / "ruslit" / "ruslit40.txt.gz"
O200K = DATA / "tokenizers" / "o200k_base.tiktoken"
PUD_RU = DATA / "ud-pud-2.15" / "ru_pud-ud-test.conllu"
_BATCH_PIECES = 64


# --- inputs -------------------------------------------------------------------------
def _write_corpus(name: str, chars: int | None, path: Path) -> Path:
    """Decompress/extract corpus ``name`` (first ``chars`` characters) into ``path``."""
    if name == "pud-ru":
        lines = PUD_RU.read_text(encoding="utf-8").splitlines()
        text = "\n".join(x[9:] for x in lines if x.startswith("# text = ")) + "\n"
    else:
        with gzip.open(RUSLIT, "rt", encoding="utf-8") as f:
            text = f.read()
    path.write_text(text if chars is None else text[:chars], encoding="utf-8")
    return path


def _read(path: str, chars: int | None = None) -> str:
    text = Path(path).read_text(encoding="utf-8")
    return text if chars is None else text[:chars]


def _lines(path: str) -> Iterator[str]:
    with open(path, encoding="utf-8") as f:  # lines keep their "\n", as HF's file reader does
        yield from f


def _lines_batches(text: str, n: int) -> list[str]:
    """``text`` cut at line ends into about ``n`` pieces (no chunk straddles a cut)."""
    step = max(1, len(text) // n)
    out, pos = [], 0
    while pos < len(text):
        cut = text.find("\n", pos + step)
        cut = len(text) if cut < 0 else cut + 1
        out.append(text[pos:cut])
        pos = cut
    return out


# --- children (one measurement each) ----------------------------------------------------
def _compiled() -> list[str]:
    from tokembed.tokenizer._native import load

    return [name for name in ("_count", "_learn") if load(name) is not None]


def _train_ours(a: dict[str, Any]) -> dict[str, Any]:
    from tokembed.tokenizer import TrainConfig, train

    text = _read(a["file"])
    t0, c0 = time.perf_counter(), _cpu()
    tok = train(
        [text], config=TrainConfig(merges=a["merges"], workers=a["workers"], progress=False)
    )
    out = {
        "seconds": time.perf_counter() - t0,
        "cpu_s": _cpu() - c0,
        "merges": tok.n_merges,
        "compiled": _compiled(),
    }
    if a.get("save"):
        from tokembed.tokenizer.formats import save_tokenizer

        save_tokenizer(tok, a["save"])
        pieces = list(tok.tables.pieces.values())
        out["duplicate_pieces"] = len(pieces) - len(set(pieces))
    return out


def _train_hf(a: dict[str, Any]) -> dict[str, Any]:
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    from tokembed.tokenizer.patterns import PATTERNS

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PATTERNS["teaching"]), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=256 + a["merges"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    t0, c0 = time.perf_counter(), _cpu()
    if a["source"] == "files":
        tok.train([a["file"]], trainer=trainer)
    else:
        tok.train_from_iterator(_lines(a["file"]), trainer=trainer)
    return {
        "seconds": time.perf_counter() - t0,
        "cpu_s": _cpu() - c0,
        "merges": tok.get_vocab_size() - 256,
    }


def _train_rustbpe(a: dict[str, Any]) -> dict[str, Any]:
    import rustbpe

    from tokembed.tokenizer.patterns import PATTERNS

    tok = rustbpe.Tokenizer()
    t0, c0 = time.perf_counter(), _cpu()
    tok.train_from_iterator(_lines(a["file"]), 256 + a["merges"], pattern=PATTERNS["teaching"])
    return {
        "seconds": time.perf_counter() - t0,
        "cpu_s": _cpu() - c0,
        "merges": tok.vocab_size - 256,
    }


def _count_table(a: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    from tokembed.tokenizer._count import count_chunks
    from tokembed.tokenizer.pretokenize import Pretokenizer

    table = count_chunks(
        [_read(a["file"])], Pretokenizer.preset("teaching"), workers=a["workers"], progress=False
    )
    data = np.frombuffer(table.data, dtype=np.uint8)
    np.savez(a["path"], data=data, offsets=table.offsets, counts=table.counts)
    return {"chunks": len(table), "bytes": len(table.data)}


def _learn_alone(a: dict[str, Any]) -> dict[str, Any]:
    import hashlib

    import numpy as np

    if a["pure"]:
        os.environ["TOKEMBED_PURE_PYTHON"] = "1"
    from tokembed.tokenizer.chunks import ChunkTable
    from tokembed.tokenizer.learn import learn_merges

    with np.load(a["path"]) as z:
        table = ChunkTable(z["data"].tobytes(), z["offsets"], z["counts"])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0, c0 = time.perf_counter(), _cpu()
    pairs = learn_merges(table, merges=a["merges"])
    return {
        "seconds": time.perf_counter() - t0,
        "cpu_s": _cpu() - c0,
        "merges": len(pairs),
        "before_mb": before,
        "digest": hashlib.sha256(repr(pairs).encode()).hexdigest()[:12],
        "compiled": [] if a["pure"] else _compiled(),
    }


def _load(a: dict[str, Any]) -> Any:
    from tokembed.tokenizer.formats import load_tokenizer

    if a["vocab"] == "o200k":
        return load_tokenizer(O200K, encoding="o200k_base")
    return load_tokenizer(a["vocab"])


def _encode_ours(a: dict[str, Any]) -> dict[str, Any]:
    from tokembed.tokenizer.encode import ReferenceEncoder

    text = _read(a["file"], a["chars"])
    tok = _load(a)
    t0 = time.perf_counter()
    enc: Any = tok._engine
    setup = time.perf_counter() - t0
    dt, cpu, n = float("inf"), float("inf"), 0
    for _ in range(a["repeat"]):  # best of N: the machine is shared
        if a["mode"] == "memo":  # a cold memo each time: no free ride from the last run
            enc = ReferenceEncoder(tok.tables, tok.pretokenizer)
        t0, c0 = time.perf_counter(), _cpu()
        if a["mode"] == "reference":
            n = len(tok.encode_ordinary_reference(text))
        elif a["mode"] == "batch":
            batches = _lines_batches(text, _BATCH_PIECES)
            n = sum(map(len, tok.encode_batch(batches, workers=a["threads"], progress=False)))
        else:
            n = len(enc.encode(tok._check(text)))
        dt, cpu = min(dt, time.perf_counter() - t0), min(cpu, _cpu() - c0)
    return {
        "seconds": dt,
        "cpu_s": cpu,
        "mb_s": len(text.encode()) / dt / 1e6,
        "tokens": n,
        "setup_s": setup,
        "implementation": enc.implementation,
    }


def _encode_tiktoken(a: dict[str, Any]) -> dict[str, Any]:
    import tiktoken

    text = _read(a["file"], a["chars"])
    tok = _load(a)
    ranks = {p: i for i, p in tok.tables.pieces.items()}
    if len(ranks) != len(tok.tables.pieces):
        return {"skipped": "vocabulary has duplicate pieces; tiktoken cannot hold it"}
    enc = tiktoken.Encoding(
        "peer", pat_str=tok.pretokenizer.stages[0], mergeable_ranks=ranks, special_tokens={}
    )
    dt, cpu, n = float("inf"), float("inf"), 0
    for _ in range(a["repeat"]):
        t0, c0 = time.perf_counter(), _cpu()
        if a["mode"] == "batch":
            pieces = _lines_batches(text, _BATCH_PIECES)
            n = sum(map(len, enc.encode_ordinary_batch(pieces, num_threads=a["threads"])))
        else:
            n = len(enc.encode_ordinary(text))
        dt, cpu = min(dt, time.perf_counter() - t0), min(cpu, _cpu() - c0)
    return {"seconds": dt, "cpu_s": cpu, "mb_s": len(text.encode()) / dt / 1e6, "tokens": n}


def _write(a: dict[str, Any]) -> dict[str, Any]:
    _write_corpus(a["corpus"], a["chars"], Path(a["path"]))
    return {}


_CHILDREN = {
    "write": _write,
    "train_ours": _train_ours,
    "train_hf": _train_hf,
    "train_rustbpe": _train_rustbpe,
    "table": _count_table,
    "learn": _learn_alone,
    "encode_ours": _encode_ours,
    "encode_tiktoken": _encode_tiktoken,
}


def _cpu() -> float:
    """CPU seconds of this process (all threads) and of its reaped children (our workers)."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _child(spec: str) -> None:
    a = json.loads(spec)
    out = _CHILDREN[a["kind"]](a)
    out["maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def _prepare(name: str, chars: int | None, path: Path) -> Path:
    """Write the corpus file in a child: the parent stays small, because a child's
    ``ru_maxrss`` starts at the parent's peak resident size (Linux keeps it across exec)."""
    out = _run(kind="write", corpus=name, chars=chars, path=str(path))
    if "error" in out:
        raise SystemExit(f"cannot write corpus {name}: {out['error']}")
    return path


def _run(**a: Any) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(a)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --- report ---------------------------------------------------------------------------
def _ratio(x: float | None, y: float | None) -> str:
    return f"{x / y:.2f}x" if x and y else "n/a"


def _has_rustbpe() -> bool:
    try:
        import rustbpe  # noqa: F401
    except ImportError:
        return False
    return True


def _row(name: str, r: dict[str, Any], ours: dict[str, Any] | None) -> str:
    line = f"  {name:58}{r.get('seconds', 0):7.1f} s (cpu {r.get('cpu_s', 0):6.1f} s)"
    line += f" {r.get('maxrss_mb', 0):7.0f} MB  merges {r.get('merges', '?')}"
    if ours is not None and r is not ours:
        line += (
            f"  ours/this: time {_ratio(ours.get('seconds'), r.get('seconds'))},"
            f" cpu {_ratio(ours.get('cpu_s'), r.get('cpu_s'))},"
            f" memory {_ratio(ours.get('maxrss_mb'), r.get('maxrss_mb'))}"
        )
    if "duplicate_pieces" in r:
        line += f"  duplicate pieces {r['duplicate_pieces']}"
    if "error" in r:
        line += f"  ERROR {r['error']}"
    return line


def _train_block(
    label: str, merges: int, file: Path, workers: int, save: str | None, twin: bool
) -> None:
    print(f"train {label}, {merges} merges ({load_line('now')})", flush=True)
    runs: dict[str, dict[str, Any]] = {
        f"ours    tokembed train([whole text], workers={workers})": _run(
            kind="train_ours", file=str(file), merges=merges, workers=workers, save=save
        ),
        "peer    HF Tokenizer.train([file], BpeTrainer)": _run(
            kind="train_hf", file=str(file), merges=merges, source="files"
        ),
        "peer    HF Tokenizer.train_from_iterator(file lines)": _run(
            kind="train_hf", file=str(file), merges=merges, source="lines"
        ),
    }
    rust0: dict[str, Any] = {}
    if _has_rustbpe():
        runs["peer    rustbpe train_from_iterator(file lines)"] = _run(
            kind="train_rustbpe", file=str(file), merges=merges
        )
        rust0 = _run(kind="train_rustbpe", file=str(file), merges=0)
    else:
        print("  rustbpe: not installed (pip install rustbpe), its row is left out")
    ours_name = next(iter(runs))
    ours = runs[ours_name]
    for name, r in runs.items():
        print(_row(name, r, ours))
    compiled = ", ".join(ours.get("compiled", [])) or "none"
    print(f"  ours ran with compiled modules: {compiled} (the rest in Python)")
    peers = {n: r for n, r in runs.items() if r is not ours and "seconds" in r}
    if peers and "seconds" in ours:
        fast = min(peers, key=lambda n: peers[n]["seconds"])
        small = min(peers, key=lambda n: peers[n]["maxrss_mb"])
        print(
            f"  ours vs the fastest peer ({fast.split(maxsplit=1)[1]}): time"
            f" {_ratio(ours['seconds'], peers[fast]['seconds'])}, cpu"
            f" {_ratio(ours['cpu_s'], peers[fast]['cpu_s'])}, memory"
            f" {_ratio(ours['maxrss_mb'], peers[fast]['maxrss_mb'])};"
            f" vs the smallest peer ({small.split(maxsplit=1)[1]}): memory"
            f" {_ratio(ours['maxrss_mb'], peers[small]['maxrss_mb'])}",
            flush=True,
        )
    _learn_block(merges, file, workers, twin, runs, rust0)


def _learn_block(
    merges: int,
    file: Path,
    workers: int,
    twin: bool,
    runs: dict[str, dict[str, Any]],
    rust0: dict[str, Any],
) -> None:
    """Merge learning alone, from a chunk table counted beforehand."""
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "table.npz")
        table = _run(kind="table", file=str(file), workers=workers, path=path)
        if "error" in table:
            print(f"  learning alone: cannot count the table: {table['error']}")
            return
        print(
            f"  learning alone, from the counted table ({table['chunks']} unique chunks,"
            f" {table['bytes'] / 1e6:.1f} MB):",
            flush=True,
        )
        alone = {
            "ours    compiled learner (learn_merges)": _run(
                kind="learn", path=path, merges=merges, pure=False
            )
        }
        if twin:
            alone["ours    reference learner (learn_merges_reference)"] = _run(
                kind="learn", path=path, merges=merges, pure=True
            )
    first = next(iter(alone.values()))
    for name, r in alone.items():
        line = _row(name, r, first)
        line += f"  (before learning {r.get('before_mb', 0):.0f} MB, merges sha {r.get('digest')})"
        print(line)
    if twin and len({r.get("digest") for r in alone.values()}) != 1:
        print("  MERGES DIFFER between the compiled learner and the reference learner")
    rust = runs.get("peer    rustbpe train_from_iterator(file lines)", {})
    if "seconds" in rust and "seconds" in rust0:
        learn_s = rust["seconds"] - rust0["seconds"]
        print(
            f"  peer    rustbpe learning ~ train({merges}) - train(0 merges) ="
            f" {rust['seconds']:.1f} - {rust0['seconds']:.1f} = {learn_s:.1f} s;"
            f" ours/this: time {_ratio(first.get('seconds'), learn_s)}",
            flush=True,
        )


def _encode_rows(
    label: str, vocab: str, file: Path, chars: int | None, ref_chars: int, repeat: int, own: bool
) -> None:
    f, cpus = str(file), os.cpu_count() or 1
    print(f"encode {label}, best of {repeat} ({load_line('now')})", flush=True)
    single = {
        "ours    fast path (compiled encoder)": _run(
            kind="encode_ours", vocab=vocab, file=f, chars=chars, mode="fast", repeat=repeat
        ),
        "peer    tiktoken encode_ordinary (1 thread)": _run(
            kind="encode_tiktoken", vocab=vocab, file=f, chars=chars, mode="single", repeat=repeat
        ),
    }
    if own:  # our reference encoder (chunks memoized): no peer row of its own, slow
        single["ours    reference encoder (ReferenceEncoder)"] = _run(
            kind="encode_ours", vocab=vocab, file=f, chars=chars, mode="memo", repeat=1
        )
    batch = {
        f"ours    encode_batch({_BATCH_PIECES} pieces, workers={cpus})": _run(
            kind="encode_ours", vocab=vocab, file=f, chars=chars, mode="batch", repeat=repeat,
            threads=cpus,
        ),
    }  # fmt: skip
    for k in sorted({cpus, 8}):
        batch[f"peer    tiktoken encode_ordinary_batch(num_threads={k})"] = _run(
            kind="encode_tiktoken", vocab=vocab, file=f, chars=chars, mode="batch", repeat=repeat,
            threads=k,
        )  # fmt: skip
    ref = _run(kind="encode_ours", vocab=vocab, file=f, chars=ref_chars, mode="reference", repeat=1)
    for title, runs in (("one text, one thread", single), ("batch", batch)):
        print(f"  {title}:")
        peers = {n: r for n, r in runs.items() if n.startswith("peer") and "mb_s" in r}
        best = max(peers, key=lambda n: peers[n]["mb_s"]) if peers else None
        for name, r in runs.items():
            line = f"    {name:56}{r.get('mb_s', 0):7.2f} MB/s (cpu {r.get('cpu_s', 0):5.1f} s)"
            line += f" {r.get('maxrss_mb', 0):6.0f} MB"
            if name.startswith("ours") and best:
                line += (
                    f"  ours/fastest peer: speed {_ratio(r.get('mb_s'), peers[best]['mb_s'])},"
                    f" cpu {_ratio(r.get('cpu_s'), peers[best].get('cpu_s'))}"
                )
                if r.get("tokens") != peers[best].get("tokens"):
                    line += " TOKEN COUNT DIFFERS"
            if name.startswith("ours") and "setup_s" in r and "fast" in name:
                line += f"  ({r.get('implementation')}, setup {r['setup_s']:.1f} s)"
            for key in ("skipped", "error"):
                if key in r:
                    line += f"  {r[key]}"
            print(line)
    print(
        f"  reference encoder on {ref_chars / 1e6:.1f}M chars: {ref.get('mb_s', 0):.2f} MB/s",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small slices instead of all of RusLit40")
    ap.add_argument("--only", choices=["train", "encode"], help="run one half")
    ap.add_argument(
        "--workers", type=int, default=min(2, os.cpu_count() or 1), help="our counting processes"
    )
    ap.add_argument(
        "--repeat", type=int, default=2, help="encode passes per measurement (the best counts)"
    )
    ap.add_argument(
        "--own-encoder", action="store_true", help="also time our reference encoder (Python)"
    )
    ap.add_argument(
        "--reference",
        action="store_true",
        help="also time the reference learner at 4096 merges (Python: hours on RusLit40)",
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child)
        return
    print(machine_line())
    print(
        f"threads: ours train workers={args.workers} processes; HF tokenizers, rustbpe and"
        " tiktoken batches use their own rayon/thread pools (default size: the CPU count)"
    )
    print(load_line("start"), flush=True)
    chars = 3_000_000 if args.quick else None
    big = 4096 if args.quick else 32768
    with tempfile.TemporaryDirectory() as tmp:
        vocab = str(Path(tmp) / f"ruslit-{big}.json")
        ruslit = _prepare("ruslit", chars, Path(tmp) / "ruslit.txt")
        name = "RusLit40" + (" 3M chars" if args.quick else "")
        if args.only != "encode":
            pud = _prepare("pud-ru", None, Path(tmp) / "pud-ru.txt")
            twin = args.reference
            _train_block("PUD ru", 4096, pud, args.workers, None, twin)
            _train_block(name, 4096, ruslit, args.workers, vocab if args.quick else None, twin)
            if not args.quick:
                _train_block(name, 32768, ruslit, args.workers, vocab, False)
        if args.only != "train":
            full = ruslit if not args.quick else _prepare("ruslit", None, Path(tmp) / "all.txt")
            enc_chars = 5_000_000 if args.quick else None
            ref_chars = 300_000 if args.quick else 1_000_000
            _encode_rows(
                "RusLit40 o200k_base", "o200k", full, enc_chars, ref_chars, args.repeat,
                args.own_encoder,
            )  # fmt: skip
            if not Path(vocab).exists():
                _run(kind="train_ours", file=str(ruslit), merges=big, workers=args.workers,
                     save=vocab)  # fmt: skip
            _encode_rows(
                f"RusLit40 ours {big} merges", vocab, full, enc_chars, ref_chars, args.repeat,
                args.own_encoder,
            )  # fmt: skip
    print(load_line("end"))


if __name__ == "__main__":
    main()
