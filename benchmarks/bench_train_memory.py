"""Streaming training on a corpus larger than memory should allow: peak RSS, time, throughput.

The corpus is RusLit-40 repeated with variations, generated on the fly and never
held: repetition ``r`` upper-cases the text when ``r % 3 == 1`` and, in every
repetition, appends an ``r``-specific Cyrillic tag to five frequent words, so the
number of distinct chunks grows a little with the corpus (as in a real one) while
the corpus grows a lot. Every measurement runs in a fresh subprocess, so its peak
resident memory (``ru_maxrss``) is its own.

Rows:

* generation alone (the cost of making the stream, included in every other row);
* ours: ``train(stream, TrainConfig(merges, pattern="cl100k"))`` on the whole corpus,
  peak RSS against the 1.5 GB bound;
* counting throughput on the same stream: the compiled counter (1 and 2 threads) and
  the Python reference counter (on one repetition, or a quarter of a small corpus:
  it is ~10x slower);
* the peer ``rustbpe`` (``Tokenizer().train_from_iterator(lines, 256 + merges,
  pattern=cl100k)``, its documented streaming entry point, rayon threads over the CPU
  count) on the same stream, as lines;
* linear time: compiled counting at 1x, 2x and 4x of that size (CPU seconds per MB
  must stay flat).

Wall time follows the load of this shared machine; CPU seconds are printed beside it,
and throughputs are per CPU second. Reading RusLit-40 itself happens before the clocks
start; the generation row is the cost of making the stream, which the other rows include.

    python benchmarks/bench_train_memory.py             # 2 GB, 4096 merges (minutes)
    python benchmarks/bench_train_memory.py --gb 0.2    # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _env import load_line, machine_line

DATA = Path(
    os.environ.get("TOKEMBED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)
RUSLIT = DATA / "ruslit" / "ruslit40.txt.gz"
_WORDS = (" и ", " не ", " на ", " что ", " он ")
_LETTERS = "бвгджзклмнпрстфх"
_RSS_BOUND_MB = 1.5 * 1024


def _tag(r: int) -> str:
    """A short Cyrillic word that names repetition ``r``."""
    out = ""
    while True:
        out += _LETTERS[r % len(_LETTERS)]
        r //= len(_LETTERS)
        if not r:
            return out


def _base_blocks() -> list[str]:
    from tokembed.text.sources import iter_text_blocks

    return [b.text for b in iter_text_blocks([RUSLIT], block_chars=1 << 21)]


def corpus(base: list[str], target_bytes: int) -> Iterator[str]:
    """Blocks of the varied repetitions of ``base`` until ``target_bytes`` (UTF-8) are out."""
    sent, r = 0, 0
    while sent < target_bytes:
        for block in base:
            text = block.upper() if r % 3 == 1 else block
            for word in _WORDS:
                text = text.replace(word, f"{word[:-1]}{_tag(r)} ", 50)
            size = len(text.encode("utf-8"))
            if sent + size > target_bytes:
                return
            sent += size
            yield text
        r += 1


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


def _measure(a: dict[str, Any]) -> dict[str, Any]:
    from tokembed.tokenizer import Pretokenizer, TrainConfig, train
    from tokembed.tokenizer._count import count_chunks

    n = int(a["bytes"])
    base = _base_blocks()  # read before the clocks start: every row pays it alike
    t0, c0 = time.perf_counter(), _cpu()
    out: dict[str, Any] = {}
    if a["kind"] == "gen":
        out["bytes"] = sum(len(t.encode("utf-8")) for t in corpus(base, n))
    elif a["kind"] == "count":
        pre = Pretokenizer.preset("cl100k")
        table = count_chunks(corpus(base, n), pre, workers=a["workers"], progress=False)
        out["distinct"] = len(table)
        out["table_mb"] = table.nbytes / 2**20
    elif a["kind"] == "train":
        tok = train(
            corpus(base, n),
            config=TrainConfig(merges=a["merges"], pattern="cl100k", progress=False),
        )
        out["merges"] = tok.n_merges
    elif a["kind"] == "rustbpe":
        import rustbpe

        from tokembed.tokenizer.patterns import PATTERNS

        tok = rustbpe.Tokenizer()
        lines = (line for text in corpus(base, n) for line in text.splitlines(keepends=True))
        tok.train_from_iterator(lines, 256 + a["merges"], pattern=PATTERNS["cl100k"])
        out["merges"] = tok.vocab_size - 256
    out["seconds"] = time.perf_counter() - t0
    out["cpu_s"] = _cpu() - c0
    out["maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def _run(env: dict[str, str] | None = None, **a: Any) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(a)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()
        return {"error": tail[-1] if tail else "failed"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _row(label: str, r: dict[str, Any], n_bytes: int, gen: dict[str, Any] | None = None) -> str:
    if "error" in r:
        return f"  {label:<44} error: {r['error']}"
    mb = n_bytes / 1e6
    line = (
        f"  {label:<44} {r['seconds']:7.1f} s wall {r['cpu_s']:7.1f} s cpu "
        f"{r['maxrss_mb']:6.0f} MB peak {mb / r['cpu_s']:6.1f} MB/cpu-s"
    )
    if gen is not None and "cpu_s" in gen and r["cpu_s"] > gen["cpu_s"]:
        line += f" ({mb / (r['cpu_s'] - gen['cpu_s']):6.1f} without generating)"
    for key in ("distinct", "merges"):
        if key in r:
            line += f"  {key}={r[key]:,}"
    return line


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gb", type=float, default=2.0, help="corpus size in GB (1e9 bytes)")
    p.add_argument("--merges", type=int, default=4096)
    p.add_argument("--no-peer", action="store_true", help="leave rustbpe out")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(_measure(json.loads(args.child))))
        return
    if not RUSLIT.exists():
        raise SystemExit(f"RusLit-40 not found at {RUSLIT} (set TOKEMBED_DATA)")
    print(machine_line())
    print(load_line("start"))
    total = int(args.gb * 1e9)
    # One repetition of RusLit-40 (40,222,040 UTF-8 bytes), or less for a small --gb.
    one = min(40_222_040, total // 4)
    print(
        f"corpus: RusLit-40 repeated with variations, {total / 1e9:.2f} GB, {args.merges} merges, cl100k"
    )
    gen = _run(kind="gen", bytes=total)
    print(_row("generation alone", gen, total))
    ours = _run(kind="train", bytes=total, merges=args.merges)
    print(_row("ours   train(stream) [C counter, 1 worker]", ours, total))
    if "maxrss_mb" in ours:
        verdict = "within" if ours["maxrss_mb"] <= _RSS_BOUND_MB else "OVER"
        print(f"  peak RSS {ours['maxrss_mb']:.0f} MB: {verdict} the {_RSS_BOUND_MB:.0f} MB bound")
    if not args.no_peer:
        peer = _run(kind="rustbpe", bytes=total, merges=args.merges)
        print(_row("peer   rustbpe train_from_iterator(lines)", peer, total))
        if "error" not in peer and "error" not in ours:
            print(f"  time ours / rustbpe: {ours['seconds'] / peer['seconds']:.2f}x wall, "
                  f"{ours['cpu_s'] / peer['cpu_s']:.2f}x cpu; peak memory "
                  f"{ours['maxrss_mb'] / peer['maxrss_mb']:.2f}x")  # fmt: skip
    print("counting throughput (same stream):")
    for workers in (1, 2):
        r = _run(kind="count", bytes=total, workers=workers)
        print(_row(f"C counter, {workers} thread(s)", r, total, gen))
    gen1 = _run(kind="gen", bytes=one)
    py = _run(kind="count", bytes=one, workers=1, env={"TOKEMBED_PURE_PYTHON": "1"})
    c1 = _run(kind="count", bytes=one, workers=1)
    print(_row(f"Python counter, {one / 1e6:.0f} MB", py, one, gen1))
    print(_row(f"C counter, {one / 1e6:.0f} MB", c1, one, gen1))
    print("linear time (C counter, 1 thread):")
    for k in (1, 2, 4):
        r = _run(kind="count", bytes=k * one, workers=1)
        if "error" not in r:
            print(f"  {k}x ({k * one / 1e6:6.1f} MB): {r['seconds']:6.2f} s wall, {r['cpu_s']:6.2f} s cpu, "
                  f"{r['cpu_s'] / (k * one / 1e6) * 1e3:.2f} ms cpu per MB")  # fmt: skip
    print(load_line("end"))


if __name__ == "__main__":
    main()
