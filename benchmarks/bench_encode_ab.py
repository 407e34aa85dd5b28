"""Two builds of our encoder, cell by cell, in interleaved fresh processes.

One fresh-process sample of a cell varies by up to ±40% on a shared two-core machine, so one
``bench_encode.py`` table cannot tell a 10% change from the noise. This script decides a change
to the compiled encoder instead: for each cell it runs this checkout's build and a base build
alternately, ``--samples`` times each, every run in a fresh process exactly as
``bench_encode.py`` runs ours (load, encode "hello world", time one call), and prints both
medians, their ratio and the load. The two builds must return the same ids in every run (the
SHA-256 of the flat id list); if not, it says so and exits with status 1.

The two sides are not quite alike: this checkout against a worktree of the same commit read
0.89 on SmolLM2 English (medians of 15), so a fresh-process ratio within ~10% of 1 decides
nothing. A change behind a switch read when tables are made (``TOKEMBED_GRID``,
``TOKEMBED_SEGMENT``, ``TOKEMBED_PREJOIN``, ``TOKEMBED_BACKTRACK``, ``TOKEMBED_PAIRS``) is
better measured on one build, alternating runs with the switch on and off.

The base is another checkout with its compiled modules built in place, e.g. the commit before:

    git worktree add /tmp/base HEAD~1
    (cd /tmp/base && python setup.py build_ext --inplace -q)
    python benchmarks/bench_encode_ab.py /tmp/base --vocab qwen --text cjk
    python benchmarks/bench_encode_ab.py /tmp/base --vocab o200k --text ru --shape batch --threads 2
    python benchmarks/bench_encode_ab.py /tmp/base --vocab cl100k --text mixed --in-process --samples 21

``--in-process`` decides a change to the C core more finely: both checkouts' ``encode_core.c`` and
``scan.c`` are compiled as shared libraries (gcc, the extension's flags) and loaded into one
process (``native/inproc_ab.c``), which gives each build a fresh encoder in turn, encodes the
cell's text once with each, and compares their ids. An encoder against a copy of itself read
0.97-1.03 there (cl100k, English and 13 languages, medians of 11), where fresh processes swing
±40%; a cell's ratio still moved by up to ±15% between runs (GPT-2 on RusLit-40: 0.84, 1.07,
1.25), so repeat a run before believing a few percent. It leaves out the Python layer and a
process's first touches of its tables: a change it finds still has to show in
``bench_encode.py``. Long calls on one thread only.

Run it on a quiet machine: nothing else (tests, builds) beside it.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _env import load_line, machine_line
from bench_encode import TEXTS, TOKENIZERS, VOCABS, json_path_of, run_side, text_of

HERE = Path(__file__).resolve().parents[1] / "src"
NATIVE = Path("tokembed") / "tokenizer" / "_native"
# setup.py's flags for the extension, and what a shared library needs besides
_CFLAGS = ["-O3", "-std=c11", "-D_DEFAULT_SOURCE", "-fPIC", "-shared"]


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


def _core_library(src: Path, out: Path) -> Path:
    """``encode_core.c`` + ``scan.c`` of the checkout whose ``src/`` is ``src``, as ``out``
    (compiled once per run: a later cell finds it)."""
    if out.exists():
        return out
    native = src / NATIVE
    cmd = ["gcc", *_CFLAGS, f"-I{native}", str(native / "encode_core.c"), str(native / "scan.c")]
    subprocess.run([*cmd, "-o", str(out), "-lpthread"], check=True)
    return out


@functools.cache
def _tables_file(vocab: str, tmp: Path) -> tuple[Path, int, int]:
    """(the tables as inproc_ab.c reads them, scanner preset, dialect) of ``vocab``: a rank file
    as it is, a tokenizer.json's merges and pieces dumped (see the C file's header); loaded
    and dumped once per run, whatever the number of texts."""
    from tokembed.tokenizer.compiled import compiled_pieces
    from tokembed.tokenizer.dialect import DIALECTS
    from tokembed.tokenizer.formats import load_tokenizer
    from tokembed.tokenizer.patterns import scanner_id

    path = TOKENIZERS / VOCABS[vocab][0]
    tok = load_tokenizer(str(path))
    stages = tok.pretokenizer.stages
    preset = scanner_id(stages[0]) if len(stages) == 1 else None
    if preset is None:
        raise SystemExit(f"{vocab}: the compiled scanner does not split its pre-tokenizer")
    dialect = DIALECTS.index(tok.pretokenizer.dialect)
    if path.suffix == ".tiktoken":
        return path, preset, dialect
    tables = tok.tables
    # what compiled_tables hands the core (bytes without an id as -1)
    pieces = compiled_pieces(tables)
    out = tmp / f"{vocab}.merges"
    with out.open("wb") as f:
        f.write(struct.pack("<256q", *(-1 if b is None else b for b in tables.byte_ids)))
        f.write(struct.pack("<QB", len(tables.merges), int(tables.ignore_merges)))
        f.write(b"".join(struct.pack("<3I", *m) for m in tables.merges))
        f.write(struct.pack("<Q", len(pieces)))
        f.write(b"".join(struct.pack("<II", i, len(p)) + p for i, p in pieces))
    return out, preset, dialect


def compare_in_process(vocab: str, text: str, base: Path, samples: int, tmp: Path) -> bool:
    """Print one long one-thread cell's medians (MB/s) of the two C cores in one process;
    False if their ids differ."""
    libs = [
        _core_library(src, tmp / f"{name}.so") for name, src in (("base", base), ("this", HERE))
    ]
    driver = tmp / "inproc_ab"
    if not driver.exists():
        source = Path(__file__).resolve().parent / "native" / "inproc_ab.c"
        subprocess.run(["gcc", "-O2", str(source), "-o", str(driver), "-ldl"], check=True)
    tables, preset, dialect = _tables_file(vocab, tmp)
    text_path = tmp / f"{text}.txt"
    text_path.write_bytes(text_of(text, False).encode())
    args = [*map(str, libs), str(tables), str(preset), str(dialect), str(text_path), str(samples)]
    run = subprocess.run([str(driver), *args], capture_output=True, text=True)
    if run.returncode not in (0, 1):
        raise SystemExit(f"inproc_ab failed on {vocab} {text}: {run.stderr.strip()}")
    old, this, same = run.stdout.split()
    cell = f"{vocab:8} {text:6} long  1T in-process"
    print(
        f"{cell}  this {float(this):6.1f} MB/s  base {float(old):6.1f}  "
        f"this/base {float(this) / float(old):.3f}  (fresh encoders {samples}; {load_line('now')})",
        flush=True,
    )
    if same != "1":
        print(f"{cell}  IDS DIFFER between the builds")
    return same == "1"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("base", type=Path, help="the other checkout (its src/ is imported)")
    ap.add_argument("--vocab", choices=VOCABS, action="append", help="repeatable; default all")
    ap.add_argument("--text", choices=TEXTS, action="append", help="repeatable; default all")
    ap.add_argument("--shape", choices=("long", "batch"), action="append")
    ap.add_argument("--threads", type=int, choices=(1, 2), action="append")
    ap.add_argument("--samples", type=int, default=9, help="fresh processes per build and cell")
    ap.add_argument(
        "--in-process", action="store_true", help="the C cores alone, in one process (see above)"
    )
    args = ap.parse_args()
    base = args.base.resolve() / "src"
    if not (base / "tokembed").is_dir():
        raise SystemExit(f"{args.base}: no src/tokembed there; pass a tokembed checkout")
    print(machine_line())
    print(load_line("start"), flush=True)
    same = True
    with tempfile.TemporaryDirectory() as tmp:
        for vocab in args.vocab or list(VOCABS):
            if args.in_process:
                for text in args.text or list(TEXTS):
                    same = compare_in_process(vocab, text, base, args.samples, Path(tmp)) and same
                continue
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
