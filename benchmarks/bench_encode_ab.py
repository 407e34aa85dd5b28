"""Two builds of our encoder, cell by cell, in interleaved fresh processes.

One fresh-process sample of a cell varies by up to ±40% on a shared two-core machine, so one
``bench_encode.py`` table cannot tell a 10% change from the noise. This script decides a change
to the compiled encoder instead: for each cell it runs this checkout's build and a base build
alternately, ``--samples`` times each, every run in a fresh process exactly as
``bench_encode.py`` runs ours (load, encode "hello world", time one call), and prints both
medians, their ratio and the load. The two builds must return the same ids in every run (the
SHA-256 of the flat id list); if not, it says so and exits with status 1.

The base is another checkout with its compiled modules built in place, e.g. the commit before:

    git worktree add /tmp/base HEAD~1
    (cd /tmp/base && python setup.py build_ext --inplace -q)
    python benchmarks/bench_encode_ab.py /tmp/base --vocab qwen --text cjk
    python benchmarks/bench_encode_ab.py /tmp/base --vocab o200k --text ru --shape batch --threads 2

Run it on a quiet machine: nothing else (tests, builds) beside it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from _env import load_line, machine_line
from bench_encode import TEXTS, VOCABS, json_path_of, run_side, text_of

HERE = Path(__file__).resolve().parents[1] / "src"


def compare(spec: dict[str, Any], base: Path, samples: int) -> bool:
    """Print one cell's medians (MB/s) for this build and the base; False if ids differ."""
    n = len(text_of(str(spec["text"]), False).encode())
    speeds: dict[str, list[float]] = {"this": [], "base": []}
    shas: set[str] = set()
    for _ in range(samples):
        for name, src in (("base", base), ("this", HERE)):
            r = run_side(spec, src)
            if "error" in r:
                raise SystemExit(f"{name} build failed on {spec}: {r['error']}")
            speeds[name].append(n / r["wall"] / 1e6)
            shas.add(r["sha"])
    this, old = statistics.median(speeds["this"]), statistics.median(speeds["base"])
    cell = f"{spec['vocab']:8} {spec['text']:6} {spec['shape']:5} {spec['threads']}T"
    print(
        f"{cell}  this {this:6.1f} MB/s  base {old:6.1f}  this/base {this / old:.3f}  "
        f"(samples {samples}; {load_line('now')})",
        flush=True,
    )
    if len(shas) > 1:
        print(f"{cell}  IDS DIFFER between the builds")
    return len(shas) == 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("base", type=Path, help="the other checkout (its src/ is imported)")
    ap.add_argument("--vocab", choices=VOCABS, action="append", help="repeatable; default all")
    ap.add_argument("--text", choices=TEXTS, action="append", help="repeatable; default all")
    ap.add_argument("--shape", choices=("long", "batch"), action="append")
    ap.add_argument("--threads", type=int, choices=(1, 2), action="append")
    ap.add_argument("--samples", type=int, default=9, help="fresh processes per build and cell")
    args = ap.parse_args()
    base = args.base.resolve() / "src"
    if not (base / "tokembed").is_dir():
        raise SystemExit(f"{args.base}: no src/tokembed there; pass a tokembed checkout")
    print(machine_line())
    print(load_line("start"), flush=True)
    same = True
    with tempfile.TemporaryDirectory() as tmp:
        for vocab in args.vocab or list(VOCABS):
            json_path = json_path_of(vocab, Path(tmp))
            for text in args.text or list(TEXTS):
                for shape in args.shape or ("long",):
                    for threads in args.threads or (1,):
                        spec = {"vocab": vocab, "text": text, "shape": shape, "threads": threads}
                        spec.update(quick=False, json=json_path, side="ours")
                        same = compare(spec, base, args.samples) and same
    print(load_line("end"))
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
