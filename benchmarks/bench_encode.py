"""Encoding speed, cell by cell: our compiled encoder against the fastest exact encoders.

A cell is a vocabulary x a text x a shape (one long call, or one batch call over the
text's lines) x a thread count (1 or 2). Every side of every cell runs in a fresh process
that loads its tokenizer, encodes "hello world" (the tiny warm-up), then times one call:
caches start empty, as in a job that tokenizes a corpus once. A cell's runs go round by
round, each side once a round (a different side first each round), and each side's fastest
run counts; the ``medians`` columns give the ratio of the same two sides' median runs, which
a host's drift moves less than the best of a few. The ids of each side are hashed (SHA-256 of
the flat id list) and compared with the reference peer of the vocabulary (tiktoken for rank
files, HF ``tokenizers`` for ``tokenizer.json``); a side with other ids is printed but marked
``NOT EXACT`` and never counts as the fastest peer.

Sides, each at its best documented configuration (versions printed at the start):

Only the library call is timed; turning what it returns into one flat list of ints (to
hash it) is not.

* ours: ``load_tokenizer(file)``; long: ``set_encode_threads(k)`` then
  ``encode_ordinary(text)``; batch: ``encode_ordinary_batch_to_numpy(lines, num_threads=k)``
  (its flat bulk path: one ``uint32`` array and offsets, as fastokens' ``encode_batch_flat``).
* tiktoken: ``Encoding(name, pat_str, mergeable_ranks)``; long: ``encode_ordinary`` (one
  thread always); batch: ``encode_ordinary_batch(lines, num_threads=k)``.
* fastokens: ``Tokenizer.from_tiktoken(file, encoding=...)`` (or ``pattern=`` for qwen) /
  ``Tokenizer.from_file(tokenizer.json)``; long: ``encode_ordinary`` / ``encode(...,
  add_special_tokens=False)``; batch: ``encode_batch_flat`` (its flat-buffer bulk path);
  threads: ``FASTOKENS_BPE_THREADS=k`` and ``RAYON_NUM_THREADS=k``.
* gigatoken: ``Tokenizer.from_tiktoken(file[, pretokenizer="qwen2"])`` / ``from_json(contents)``; long:
  ``encode``; batch: ``encode_batch``; threads: ``RAYON_NUM_THREADS=k``.
* tokie and kitoken (``tokenizer.json`` only): ``tokie.Tokenizer.from_json(...)``
  ``encode``/``encode_batch_flat``; ``kitoken.Kitoken.from_tokenizers_file`` ``encode``/
  ``encode_all``; threads: ``RAYON_NUM_THREADS=k``.
* HF tokenizers: ``Tokenizer.from_file``; ``encode`` / ``encode_batch_fast``; threads:
  ``RAYON_NUM_THREADS=k`` (``TOKENIZERS_PARALLELISM=true``).

Texts (from ``../shared/data``): English (PUD en), Russian (RusLit-40, 4 MB; 1 MB with
``--quick``), CJK (PUD zh + ko, and ja where the data has it) and mixed (all 13 PUD
languages). Asked for by name only, the 13 split by script: ``latin`` (PUD de, en, es, fi,
fr, id, tr) and ``other`` (ar, hi, ko, ru, th, zh); at ced93a0, one thread, long calls,
we led on the first by the least (o200k 1.09x fastokens, cl100k 1.12x, qwen 1.08x, medians
1.10x, 1.14x, 1.10x; SmolLM2 1.13x, GPT-2 1.12x) and on the second by more (1.14-1.50x),
which is why the mixed cells lead by less than the others.
A side that gives no result for a vocabulary (it refuses it, or fails) prints why once and
is skipped for the rest of that vocabulary.

In the table, ``(1 thread)`` after our two-thread ratio marks a cell our encoder keeps on
one thread by design (a long text under 1 MiB, a batch under 128K characters): its ratio
is the same code measured twice, i.e. the noise between fresh processes. A second table
follows it: every side's MB/s in every cell, the fastest exact peer of the cell marked.

    python benchmarks/bench_encode.py                 # every cell, best of 3 (~25 min)
    python benchmarks/bench_encode.py --runs 1        # one sample per side and cell (~10 min)
    python benchmarks/bench_encode.py --quick         # 1 MB Russian, 1 and 2 threads
    python benchmarks/bench_encode.py --vocab o200k --text ru --threads 1
    python benchmarks/bench_encode.py --vocab cl100k --text latin --text other --threads 1

To decide a change to our encoder, compare two builds with ``bench_encode_ab.py``.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from _env import load_line, machine_line

DATA = Path(
    os.environ.get("TOKEMBED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)
TOKENIZERS = DATA / "tokenizers"
# vocabulary -> (file or folder, tiktoken's encoding name where it has one)
VOCABS: dict[str, tuple[str, str | None]] = {
    "o200k": ("o200k_base.tiktoken", "o200k_base"),
    "cl100k": ("cl100k_base.tiktoken", "cl100k_base"),
    "qwen": ("qwen.tiktoken", None),
    "smollm2": ("smollm2-135m", None),
    "gpt2": ("gpt2-hf", None),
}
TEXTS = ("en", "ru", "cjk", "mixed")
# The 13 languages split by script, asked for by name only: where a 13-language cell's time
# goes (Latin-script words are merged from bytes when new; the other scripts mostly cut,
# backtracked or merged from letters).
SPLIT_TEXTS = ("latin", "other")
_TEXT_NAMES = {
    "en": "English",
    "ru": "Russian",
    "cjk": "CJK",
    "mixed": "13 languages",
    "latin": "Latin script",
    "other": "other scripts",
}
_PUD = {
    "en": ("en",),
    "cjk": ("zh", "ja", "ko"),
    "mixed": None,
    "latin": ("de", "en", "es", "fi", "fr", "id", "tr"),
    "other": ("ar", "hi", "ko", "ru", "th", "zh"),
}
PEERS = ("tiktoken", "fastokens", "gigatoken", "tokie", "kitoken", "hf")


def _rank_vocab(vocab: str) -> bool:
    """Whether ``vocab`` is a tiktoken rank file (else an HF folder)."""
    return VOCABS[vocab][0].endswith(".tiktoken")


def text_of(name: str, quick: bool) -> str:
    """One of TEXTS, read from the shared data."""
    if name == "ru":
        with gzip.open(DATA / "ruslit" / "ruslit40.txt.gz", "rb") as f:
            return f.read(1_000_000 if quick else 4_000_000).decode("utf-8", "ignore")
    langs = _PUD[name]
    lines = []
    for path in sorted((DATA / "ud-pud-2.15").glob("*.conllu")):
        if langs is not None and path.name[:2] not in langs:
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("# text = "):
                lines.append(line[len("# text = ") :])
    return "\n".join(lines) + "\n"


def json_path_of(vocab: str, tmp: Path) -> str:
    """What a child is given for ``vocab``: its ``tokenizer.json`` (written under ``tmp`` where
    the folder has GPT-2's two files), or "" for a rank file."""
    return "" if _rank_vocab(vocab) else str(_hf_json(TOKENIZERS / VOCABS[vocab][0], tmp))


def _hf_json(folder: Path, tmp: Path) -> Path:
    """``tokenizer.json`` of an HF folder (GPT-2's two files are saved as one first)."""
    if (folder / "tokenizer.json").is_file():
        return folder / "tokenizer.json"
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.BPE.from_file(str(folder / "vocab.json"), str(folder / "merges.txt")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    path = tmp / f"{folder.name}.tokenizer.json"
    tok.save(str(path))
    return path


# ---- one side of one cell, in a fresh process ------------------------------------------
def _ids_of(raw: Any) -> list[int]:
    """The flat id list of what a side returned (untimed): ids, a list of id sequences,
    a flat (ids, offsets) pair of buffers or arrays."""
    import numpy as np

    if isinstance(raw, tuple):
        ids = raw[0]
        return (np.frombuffer(ids, "<u4") if isinstance(ids, bytes) else ids).tolist()
    if len(raw) and not isinstance(raw[0], int | np.integer):  # a list of NumPy ids is flat
        return [int(i) for ids in raw for i in ids]
    return [int(i) for i in raw]


def _build(side: str, vocab: str, json_path: str, threads: int) -> tuple[Any, Any]:
    """(long(text), batch(lines)) of one side, each returning what the library returns
    (ids, a list of id sequences, or flat buffers); only that call is timed."""
    file, encoding = VOCABS[vocab]
    path = str(TOKENIZERS / file)
    rank = _rank_vocab(vocab)
    if side == "ours":
        from tokembed.tokenizer.compiled import set_encode_threads
        from tokembed.tokenizer.formats import load_tokenizer

        tok = load_tokenizer(path)
        set_encode_threads(threads)
        return tok.encode_ordinary, lambda ls: tok.encode_ordinary_batch_to_numpy(
            ls, num_threads=threads
        )
    if side == "tiktoken":
        if not rank:
            raise RuntimeError("reads rank files only")
        import tiktoken

        from tokembed.tokenizer.formats import load_tokenizer
        from tokembed.tokenizer.formats.ranks import parse_ranks

        pattern = load_tokenizer(path).pretokenizer.stages[0]
        enc = tiktoken.Encoding(
            vocab,
            pat_str=pattern,
            mergeable_ranks=parse_ranks(Path(path).read_bytes()),
            special_tokens={},
        )
        return enc.encode_ordinary, lambda ls: enc.encode_ordinary_batch(ls, num_threads=threads)
    if side == "fastokens":
        import fastokens

        if rank and encoding:
            ft = fastokens.Tokenizer.from_tiktoken(path, encoding=encoding)
        elif rank:  # qwen: its split pattern as our loader reads it
            from tokembed.tokenizer.formats import load_tokenizer

            pattern = load_tokenizer(path).pretokenizer.stages[0]
            ft = fastokens.Tokenizer.from_tiktoken(path, pattern=pattern)
        else:
            ft = fastokens.Tokenizer.from_file(json_path)
        if rank:
            long = lambda t: ft.encode_ordinary(t).ids  # noqa: E731
        else:
            long = lambda t: ft.encode(t, add_special_tokens=False).ids  # noqa: E731
        return long, ft.encode_batch_flat
    if side == "gigatoken":
        import gigatoken

        if rank:
            if encoding:
                gt = gigatoken.Tokenizer.from_tiktoken(path)
            else:
                gt = gigatoken.Tokenizer.from_tiktoken(path, pretokenizer="qwen2")
        else:
            gt = gigatoken.Tokenizer.from_json(Path(json_path).read_bytes())
        return lambda t: list(gt.encode(t)), gt.encode_batch
    if side == "tokie":
        if rank:
            raise RuntimeError("loads tokenizer.json only")
        import tokie

        tt = tokie.Tokenizer.from_json(json_path)
        return (
            lambda t: tt.encode(t, add_special_tokens=False).ids,
            lambda ls: tt.encode_batch_flat(ls, add_special_tokens=False),  # type: ignore[attr-defined]
        )
    if side == "kitoken":
        if rank:
            raise RuntimeError("not measured on rank files (tiktoken is their reference)")
        import kitoken

        kt = kitoken.Kitoken.from_tokenizers_file(json_path)
        return lambda t: kt.encode(t), kt.encode_all
    if side == "hf":
        from tokenizers import Tokenizer

        if rank:
            raise RuntimeError("no rank-file loader")
        hf = Tokenizer.from_file(json_path)
        return (
            lambda t: hf.encode(t, add_special_tokens=False).ids,
            lambda ls: [e.ids for e in hf.encode_batch_fast(ls, add_special_tokens=False)],
        )
    raise ValueError(side)


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one side of one cell in this process; its time, CPU time and id hash."""
    text = text_of(spec["text"], spec["quick"])
    long, batch = _build(spec["side"], spec["vocab"], spec["json"], spec["threads"])
    warm = long("hello world")
    assert warm, "warm-up gave no ids"
    arg: Any = text if spec["shape"] == "long" else text.splitlines(keepends=True)
    fn = long if spec["shape"] == "long" else batch
    t0, c0 = time.perf_counter(), time.process_time()
    raw = fn(arg)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    ids = _ids_of(raw)
    digest = hashlib.sha256(" ".join(map(str, ids)).encode()).hexdigest()[:12]
    # Ours starts its pool only when a call is split over threads (a long text from 1 MiB,
    # a batch from 128K characters); below that a 2-thread cell runs the 1-thread code.
    pool = any(t.name.startswith("tokembed-encode") for t in threading.enumerate())
    return {"wall": wall, "cpu": cpu, "ids": len(ids), "sha": digest, "threaded": pool}


def _env_for(side: str, threads: int, src: Path | None = None) -> dict[str, str]:
    """The child's environment; ``src``: the source tree tokembed is imported from (default
    this checkout's, with its compiled modules built in place)."""
    k = str(threads)
    env = {**os.environ, "RAYON_NUM_THREADS": k, "RAYON_RS_NUM_CPUS": k}
    env.update(FASTOKENS_BPE_THREADS=k, TOKENIZERS_PARALLELISM="true", OPENBLAS_NUM_THREADS="1")
    tree = src or Path(__file__).resolve().parents[1] / "src"
    env["PYTHONPATH"] = str(tree) + os.pathsep + os.environ.get("PYTHONPATH", "")
    return env


def run_side(spec: dict[str, Any], src: Path | None = None) -> dict[str, Any]:
    """One side of one cell in a fresh process (see ``child``); ``{"error": ...}`` when the
    side refuses or fails."""
    cmd = [sys.executable, __file__, "--child", json.dumps(spec)]
    out = subprocess.run(
        cmd, capture_output=True, text=True, env=_env_for(spec["side"], spec["threads"], src)
    )
    if out.returncode != 0:
        lines = (out.stderr or out.stdout).strip().splitlines()
        named = [ln for ln in lines if "Error" in ln or "error" in ln] or lines
        return {"error": named[-1].strip()[:120] if named else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---- the table ---------------------------------------------------------------------------
def _cell(
    vocab: str,
    text: str,
    shape: str,
    threads: int,
    args: argparse.Namespace,
    json_path: str,
    refused: dict[tuple[str, str], str],
) -> dict[str, Any]:
    n = len(text_of(text, args.quick).encode())
    reference = "tiktoken" if _rank_vocab(vocab) else "hf"
    base = {"vocab": vocab, "text": text, "shape": shape, "threads": threads}
    base.update(quick=args.quick, json=json_path)
    results: dict[str, dict[str, Any]] = {}
    sides = [side for side in ("ours", *args.peers) if (side, vocab) not in refused]
    # Round by round, every side once a round and a different side first each round, so that
    # a slow phase of a shared host (for seconds at a time, page faults many times slower) is
    # spread over the sides instead of landing on one side's samples. When the sides ran one
    # after another, all five of our samples of one cell fell in one (qwen, 13 languages, one
    # thread: 42.7 MB/s at best, 0.89x fastokens; minutes before, interleaved with it by hand,
    # 49.5-50.7 in five of six processes).
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for k in range(args.runs):
        first = k % len(sides) if sides else 0
        for side in sides[first:] + sides[:first]:
            runs[side].append(run_side({**base, "side": side}))
    for side in sides:
        r = min(runs[side], key=lambda run: run.get("wall", float("inf")))
        if "error" in r:
            refused[(side, vocab)] = r["error"]
            print(f"    {side:10} no result on {vocab} (skipped for the rest of it): {r['error']}")
            continue
        # the median beside the best: a host whose speed drifts by 5-20% over minutes moves
        # the best of a few fresh processes by as much, and a side level with another shows
        # it as ratios on both sides of 1.0 between runs
        r["walls"] = sorted(run["wall"] for run in runs[side] if "wall" in run)
        results[side] = r
    ref = results.get(reference)
    head = f"  {vocab:8} {_TEXT_NAMES[text]:13} {shape:5} {threads} thread{'s' if threads > 1 else ' '}"
    best_side, best = None, None
    for side, r in results.items():
        r["mbs"] = n / r["wall"] / 1e6
        r["median_mbs"] = n / statistics.median(r["walls"]) / 1e6
        r["exact"] = ref is None or r["sha"] == ref["sha"]
        if side != "ours" and r["exact"] and (best is None or r["mbs"] > best["mbs"]):
            best_side, best = side, r
    ours = results.get("ours")
    line = head + f"  ours {ours['mbs']:6.1f} MB/s" if ours else head + "  ours failed"
    if ours and best:
        line += f"  fastest exact peer {best_side} {best['mbs']:6.1f}  ours/peer {ours['mbs'] / best['mbs']:.2f}x"
        line += f" (medians {ours['median_mbs'] / best['median_mbs']:.2f}x)"
    if ours and not ours["exact"]:
        line += "  OURS NOT EXACT"
    if ref is None:
        line += f"  (no ids from {reference}: exactness unchecked)"
    print(line, flush=True)
    for side, r in results.items():
        mark = "" if r["exact"] else "  NOT EXACT"
        spread = f"median {r['median_mbs']:6.1f}, slowest {n / r['walls'][-1] / 1e6:6.1f}"
        print(
            f"      {side:10} {r['mbs']:7.1f} MB/s  ({spread} of {len(r['walls'])})"
            f"  cpu {r['cpu']:6.2f} s  {r['ids']} ids{mark}"
        )
    return {"cell": base, "n": n, "results": results, "best": best_side, "checked": ref is not None}


def _summary(cells: list[dict[str, Any]]) -> None:
    """Markdown: per (vocab, text, shape), 1 and 2 threads, ours vs the fastest exact peer
    (best runs, then the ratio of the same two sides' medians). On two threads the peer's
    figure is the better of its two- and one-thread runs."""
    print(
        "\n| vocabulary | text | shape | ours 1T MB/s | peer 1T | ours/peer | medians | ours 2T | peer 2T | ours/peer | medians | ours 2T/1T | peer 2T/1T |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    by: dict[tuple[str, str, str], dict[int, dict[str, Any]]] = {}
    for c in cells:
        key = (c["cell"]["vocab"], c["cell"]["text"], c["cell"]["shape"])
        by.setdefault(key, {})[c["cell"]["threads"]] = c
    for (vocab, text, shape), t in by.items():
        row = [vocab, _TEXT_NAMES[text], shape]
        per: dict[int, tuple[float, float, str]] = {}
        medians: dict[int, float] = {}  # the fastest peer's median MB/s
        for k in (1, 2):
            got = t.get(k)
            if got is None or "ours" not in got["results"] or got["best"] is None:
                row += ["", "", "", ""]
                continue
            o, p = got["results"]["ours"]["mbs"], got["results"][got["best"]]["mbs"]
            om, pm = got["results"]["ours"]["median_mbs"], got["results"][got["best"]]["median_mbs"]
            name = got["best"]
            if k == 2 and 1 in per and per[1][1] > p:
                # a peer that slows down on two threads would be run on one by its users
                p, pm, name = per[1][1], medians[1], f"{per[1][2]} on 1 thread"
            per[k] = (o, p, got["best"])
            medians[k] = pm
            row += [f"{o:.1f}", f"{p:.1f} {name}", f"{o / p:.2f}x", f"{om / pm:.2f}x"]
        if 1 in per and 2 in per:
            peer2 = t[2]["results"].get(per[1][2])
            one = "" if t[2]["results"]["ours"].get("threaded") else " (1 thread)"
            row += [f"{per[2][0] / per[1][0]:.2f}x{one}"]
            row += [f"{peer2['mbs'] / per[1][1]:.2f}x" if peer2 else ""]
        else:
            row += ["", ""]
        print("| " + " | ".join(row) + " |")


def _every_side(cells: list[dict[str, Any]], peers: list[str]) -> None:
    """Markdown: every side's MB/s in every cell (the whole table behind the summary); ``—``
    where a side gave no result (it refused the vocabulary or failed: the cell's lines say
    why), ``not exact`` beside other ids than the reference's, ``unchecked`` where the
    reference gave none to compare with."""
    sides = ["ours", *peers]
    print("\n| vocabulary | text | shape | threads | " + " | ".join(sides) + " |")
    print("|---|---|---|---|" + "---|" * len(sides))
    for c in cells:
        cell, results = c["cell"], c["results"]
        row = [cell["vocab"], _TEXT_NAMES[cell["text"]], cell["shape"], str(cell["threads"])]
        for side in sides:
            r = results.get(side)
            if r is None:
                row.append("—")
                continue
            best = " **fastest peer**" if side == c["best"] else ""
            mark = "" if r["exact"] else " not exact"
            row.append(f"{r['mbs']:.1f}{best}{mark}" + ("" if c["checked"] else " unchecked"))
        print("| " + " | ".join(row) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="1 MB of Russian; o200k and SmolLM2")
    ap.add_argument("--vocab", choices=VOCABS, action="append", help="repeatable; default all")
    ap.add_argument(
        "--text",
        choices=TEXTS + SPLIT_TEXTS,
        action="append",
        help="repeatable; default all but latin and other (the 13 languages split by script)",
    )
    ap.add_argument("--shape", choices=("long", "batch"), action="append")
    ap.add_argument("--threads", type=int, choices=(1, 2), action="append")
    ap.add_argument("--peers", nargs="*", default=list(PEERS), choices=PEERS)
    ap.add_argument(
        "--runs",
        type=int,
        default=3,
        help="fresh processes per side and cell, run round by round; the fastest counts (one "
        "sample varies by up to ~40%% on a shared 2-core machine)",
    )
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    print(machine_line())
    sides = ["tokembed", "tiktoken", "fastokens", "gigatoken", "tokie", "kitoken", "tokenizers"]
    print("versions: " + ", ".join(f"{s} {_version(s)}" for s in sides))
    print(load_line("start"), flush=True)
    vocabs = args.vocab or (["o200k", "smollm2"] if args.quick else list(VOCABS))
    texts = args.text or (["ru", "mixed"] if args.quick else list(TEXTS))
    cells: list[dict[str, Any]] = []
    refused: dict[tuple[str, str], str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for vocab in vocabs:
            json_path = json_path_of(vocab, Path(tmp))
            print(f"{vocab} ({load_line('now')})", flush=True)
            for text in texts:
                for shape in args.shape or ("long", "batch"):
                    for threads in args.threads or (1, 2):
                        cells.append(_cell(vocab, text, shape, threads, args, json_path, refused))
    _summary(cells)
    _every_side(cells, args.peers)
    print(load_line("end"))


def _version(dist: str) -> str:
    try:
        return version(dist)
    except Exception:  # a peer that is not installed
        return "absent"


if __name__ == "__main__":
    main()
