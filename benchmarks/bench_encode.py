"""Encoding benchmark: our compiled encoder against tokie, HF tokenizers and tiktoken, one run.

Every row encodes the same text; ids are compared with the peer's and a difference
is printed. Ours always starts cold: a freshly loaded tokenizer, so its chunk cache
is empty (the best of ``--repeat`` passes, each on a new tokenizer, counts; the
machine is shared). Peers run as their documentation shows them at their fastest:

* HF-format vocabularies (``tokenizer.json``; GPT-2's ``vocab.json`` + ``merges.txt``
  are saved as one by HF ``tokenizers`` first):
  ``tokie.Tokenizer.from_json(path).encode(text, add_special_tokens=False)``
  (tokie 0.1.4) and HF ``tokenizers`` ``Tokenizer.encode(text, add_special_tokens=False)``;
  for batches of lines ``tokie``'s ``encode_batch`` and HF's ``encode_batch_fast``
  (both parallel on their own thread pools, sized by the CPU count).
* rank files: ``tiktoken.Encoding(pat_str, mergeable_ranks).encode_ordinary(text)``
  on one thread, and ``encode_ordinary_batch(lines, num_threads=k)`` for k = 1, the
  CPU count and tiktoken's default 8 (the fastest is the comparison).
* cold start, whole processes (median of ``--runs``): ``load_tokenizer(file)`` plus
  ``encode("hello world")``, our CLI ``tokembed encode -t FILE "hello world"``, and
  tiktoken's ``load_tiktoken_bpe(file)`` + ``Encoding(...)`` + ``encode``.
* batch scaling: our ``encode_ordinary_batch(lines, num_threads=2)`` over ``=1``, beside
  a control (two threads hashing with SHA-256, which never takes the GIL) that shows how
  much two threads can gain at all on the machine as loaded.

Ours is measured twice on one long text: as shipped (one ``encode_ordinary`` call
may cut a text of 256 KiB or more at safe cuts and use up to ``min(cpu_count, 4)``
threads; the row names the count) and forced onto one thread with
``set_encode_threads(1)``, the figure to set beside tiktoken's single-threaded
``encode_ordinary``.

Wall seconds and CPU seconds (all threads of this process) are both printed: on a
loaded machine wall time follows the load, CPU time far less. Targets: encoding
>= 1.0x tokie (HF vocabularies) and >= 1.0x tiktoken on one thread (rank files);
2 threads >= 1.8x one; cold start <= 1.5x tiktoken's.

    python benchmarks/bench_encode.py             # 4.4 MB of RusLit-40 + all 13 PUD languages
    python benchmarks/bench_encode.py --quick     # 1 MB slices
    python benchmarks/bench_encode.py --only rank --rank-file qwen   # one rank file
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from _env import load_line, machine_line

DATA = Path(
    os.environ.get("TOKEMBED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)
TOKENIZERS = DATA / "tokenizers"
RANK_FILES = ("o200k_base", "cl100k_base", "qwen")
HF_FOLDERS = ("smollm2-135m", "gpt2-hf")


def _texts(n_bytes: int) -> dict[str, str]:
    with gzip.open(DATA / "ruslit" / "ruslit40.txt.gz", "rb") as f:
        ruslit = f.read(n_bytes).decode("utf-8", "ignore")
    pud = []
    for path in sorted((DATA / "ud-pud-2.15").glob("*.conllu")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("# text = "):
                pud.append(line[len("# text = ") :])
    return {"RusLit-40": ruslit, "PUD x13": "\n".join(pud) + "\n"}


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _best(
    fn: Callable[[], Any], repeat: int, fresh: Callable[[], Any] | None = None
) -> tuple[float, float, Any]:
    """(wall s, cpu s, result) of the best of ``repeat`` calls; ``fresh()`` runs before each,
    untimed, and its value is passed to ``fn`` (a newly loaded tokenizer: a cold cache)."""
    wall, cpu, out = float("inf"), float("inf"), None
    for _ in range(repeat):
        arg = fresh() if fresh is not None else None
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn(arg) if fresh is not None else fn()  # type: ignore[call-arg]
        wall, cpu = min(wall, time.perf_counter() - t0), min(cpu, time.process_time() - c0)
    return wall, cpu, out


def _row(
    name: str,
    n_bytes: int,
    wall: float,
    cpu: float,
    ref: tuple[float, float] | None,
    note: str = "",
) -> None:
    line = f"    {name:58} {n_bytes / wall / 1e6:7.2f} MB/s  cpu {cpu:6.2f} s"
    if ref is not None:
        line += f"  ours/peer speed {ref[0] / wall:5.2f}x, cpu {ref[1] / cpu:5.2f}x"
    print(line + (f"  {note}" if note else ""), flush=True)


def _ours(text: str) -> Callable[[Any], list[int]]:
    return lambda tok: tok.encode_ordinary(text)


def _ours_rows(
    text: str, fresh: Callable[[], Any], repeat: int, label: str, ref: tuple[float, float]
) -> list[int]:
    """Print ours as shipped (threads named) and forced onto one thread; the ids returned."""
    from tokembed.tokenizer.compiled import set_encode_threads

    tok = fresh()
    parts = getattr(tok._engine, "parts", lambda _: None)(text)
    threads = 1 if parts is None else len(parts)
    n = len(text.encode())
    w, c, ours = _best(_ours(text), repeat, fresh)
    set_encode_threads(1)
    try:
        w1, c1, one = _best(_ours(text), repeat, fresh)
    finally:
        set_encode_threads(None)
    same = "ids equal" if ours == one else "IDS DIFFER (threads)"
    _row(f"{label} [{threads} thread{'s' if threads > 1 else ''}]", n, w, c, ref, same)
    _row(f"{label} [1 thread, set_encode_threads(1)]", n, w1, c1, ref)
    return ours  # type: ignore[no-any-return]


def _ours_batch(lines: list[str], threads: int) -> Callable[[Any], list[list[int]]]:
    return lambda tok: tok.encode_ordinary_batch(lines, num_threads=threads, progress=False)


def _loader(source: Path) -> Callable[[], Any]:
    from tokembed.tokenizer.formats import load_tokenizer

    return lambda: load_tokenizer(source)


def _flat(batch: list[list[int]]) -> list[int]:
    return [i for ids in batch for i in ids]


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


def _hf_section(texts: dict[str, str], repeat: int, tmp: Path) -> None:
    import tokie
    from tokenizers import Tokenizer as HFTokenizer

    for name in HF_FOLDERS:
        fresh = _loader(TOKENIZERS / name)
        json_path = _hf_json(TOKENIZERS / name, tmp)
        peer_tokie = tokie.Tokenizer.from_json(str(json_path))
        peer_hf = HFTokenizer.from_file(str(json_path))
        for label, text in texts.items():
            n = len(text.encode())
            print(f"  {name} on {label} ({n / 1e6:.1f} MB, {load_line('now')})")
            tok = fresh()
            tw, tc, theirs = _best(
                partial(peer_tokie.encode, text, add_special_tokens=False), repeat
            )
            hw, hc, hf = _best(partial(peer_hf.encode, text, add_special_tokens=False), repeat)
            split = "compiled split" if getattr(tok._engine, "scanner", None) else "Python split"
            _row("peer tokie encode", n, tw, tc, None)
            _row("peer HF tokenizers encode", n, hw, hc, None)
            label = f"ours encode_ordinary [{tok.implementation}, {split}], cold"
            ours = _ours_rows(text, fresh, repeat, label, (tw, tc))
            same = "ids equal" if ours == theirs.ids == hf.ids else "IDS DIFFER"
            print(f"    ours vs tokie and HF tokenizers: {same}", flush=True)
            lines = _lines(text)
            batch = partial(peer_tokie.encode_batch, lines, add_special_tokens=False)
            tw, tc, tb = _best(batch, repeat)
            batch = partial(peer_hf.encode_batch_fast, lines, add_special_tokens=False)
            hw, hc, hb = _best(batch, repeat)
            w, c, ob = _best(_ours_batch(lines, 2), repeat, fresh)
            flat_tb, flat_hb = _flat([e.ids for e in tb]), _flat([e.ids for e in hb])
            same = "ids equal" if _flat(ob) == flat_tb == flat_hb else "IDS DIFFER"
            _row(f"peer tokie encode_batch ({len(lines)} lines)", n, tw, tc, None)
            _row("peer HF tokenizers encode_batch_fast", n, hw, hc, None)
            _row("ours encode_ordinary_batch(num_threads=2), cold", n, w, c, (tw, tc), same)


def _rank_section(texts: dict[str, str], repeat: int, names: tuple[str, ...]) -> None:
    import tiktoken

    from tokembed.tokenizer.formats.ranks import parse_ranks

    for name in names:
        path = TOKENIZERS / f"{name}.tiktoken"
        fresh = _loader(path)
        tok = fresh()
        peer = tiktoken.Encoding(
            name,
            pat_str=tok.pretokenizer.stages[0],
            mergeable_ranks=parse_ranks(path.read_bytes()),
            special_tokens={},
        )
        for label, text in texts.items():
            n = len(text.encode())
            print(f"  {name} on {label} ({n / 1e6:.1f} MB, {load_line('now')})")
            tw, tc, theirs = _best(partial(peer.encode_ordinary, text), repeat)
            split = "compiled split" if getattr(tok._engine, "scanner", None) else "Python split"
            _row("peer tiktoken encode_ordinary (1 thread)", n, tw, tc, None)
            label = f"ours encode_ordinary [{tok.implementation}, {split}], cold"
            ours = _ours_rows(text, fresh, repeat, label, (tw, tc))
            same = "ids equal" if ours == theirs else "IDS DIFFER"
            print(f"    ours vs tiktoken: {same}", flush=True)
            lines = _lines(text)
            best: tuple[float, float, int] | None = None
            for k in sorted({1, os.cpu_count() or 1, 8}):
                batch = partial(peer.encode_ordinary_batch, lines, num_threads=k)
                bw, bc, tb = _best(batch, repeat)
                _row(f"peer tiktoken encode_ordinary_batch(num_threads={k})", n, bw, bc, None)
                if best is None or bw < best[0]:
                    best = (bw, bc, k)
            assert best is not None
            w, c, ob = _best(_ours_batch(lines, 2), repeat, fresh)
            same = "ids equal" if _flat(ob) == _flat(tb) else "IDS DIFFER"
            _row(
                f"ours encode_ordinary_batch(num_threads=2) vs k={best[2]}", n, w, c, best[:2], same
            )


def _threads_control(repeat: int) -> float:
    """Speed-up of 2 threads over 1 on work that needs no GIL at all (SHA-256 of 100 MB
    each): the most any threaded code can gain on this machine under its current load."""
    import hashlib
    import threading

    data = b"x" * 100_000_000

    def run(k: int) -> float:
        threads = [threading.Thread(target=hashlib.sha256, args=(data,)) for _ in range(k)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return (time.perf_counter() - t0) / k

    one = min(run(1) for _ in range(repeat))
    two = min(run(2) for _ in range(repeat))
    return one / two


def _scaling_section(texts: dict[str, str], repeat: int) -> None:
    text = texts["RusLit-40"]
    lines, n = _lines(text), len(text.encode())
    ceiling = _threads_control(repeat)
    print(f"  control: 2 threads of GIL-free SHA-256 run {ceiling:.2f}x one ({load_line('now')})")
    for source in (TOKENIZERS / "o200k_base.tiktoken", TOKENIZERS / "smollm2-135m"):
        fresh = _loader(source)
        print(f"  {source.name} on RusLit-40, {len(lines)} lines ({load_line('now')})")
        w1, c1, one = _best(_ours_batch(lines, 1), repeat, fresh)
        w2, c2, two = _best(_ours_batch(lines, 2), repeat, fresh)
        same = "equal" if one == two else "DIFFER"
        _row("ours 1 worker", n, w1, c1, None)
        _row("ours 2 workers (threads)", n, w2, c2, None, f"speed-up {w1 / w2:.2f}x, ids {same}")


_OURS = """
import sys
from tokembed.tokenizer.formats import load_tokenizer
print(load_tokenizer(sys.argv[1]).encode("hello world"))
"""
_TIKTOKEN = """
import sys, tiktoken
from tiktoken.load import load_tiktoken_bpe
enc = tiktoken.Encoding("x", pat_str=sys.argv[2], mergeable_ranks=load_tiktoken_bpe(sys.argv[1]), special_tokens={})
print(enc.encode("hello world"))
"""


def _median_process(cmd: list[str], runs: int, env: dict[str, str]) -> float:
    subprocess.run(cmd, check=True, capture_output=True, env=env)  # warm the file cache
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _cold_start_section(runs: int) -> None:
    from tokembed.tokenizer.formats import load_tokenizer

    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for name in ("o200k_base", "cl100k_base"):
        path = str(TOKENIZERS / f"{name}.tiktoken")
        pattern = load_tokenizer(path).pretokenizer.stages[0]
        peer = _median_process([sys.executable, "-c", _TIKTOKEN, path, pattern], runs, env)
        ours = _median_process([sys.executable, "-c", _OURS, path], runs, env)
        cli_main = "import sys; from tokembed.cli import main; sys.exit(main(sys.argv[1:]))"
        cli = _median_process(
            [sys.executable, "-c", cli_main, "encode", "-t", path, "hello world"], runs, env
        )
        print(f"  {name}, median of {runs} whole processes ({load_line('now')})")
        print(f"    peer tiktoken load_tiktoken_bpe + Encoding + encode   {peer:6.2f} s")
        print(
            f"    ours load_tokenizer + encode                          {ours:6.2f} s  ours/peer {ours / peer:.2f}x"
        )
        print(
            f"    ours CLI tokembed encode -t FILE 'hello world'        {cli:6.2f} s  ours/peer {cli / peer:.2f}x"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 MB slices instead of 4.4 MB")
    ap.add_argument(
        "--repeat", type=int, default=3, help="passes per measurement (the best counts)"
    )
    ap.add_argument("--runs", type=int, default=5, help="whole processes per cold-start figure")
    ap.add_argument("--only", choices=["hf", "rank", "scaling", "cold"], help="run one section")
    ap.add_argument(
        "--rank-file",
        choices=RANK_FILES,
        action="append",
        help="rank files of the rank section (repeatable; default: all)",
    )
    args = ap.parse_args()
    print(machine_line())
    print(load_line("start"), flush=True)
    texts = _texts(1_000_000 if args.quick else 4_400_000)
    with tempfile.TemporaryDirectory() as tmp:
        if args.only in (None, "hf"):
            print("HF-format vocabularies: ours vs tokie and HF tokenizers")
            _hf_section(texts, args.repeat, Path(tmp))
    if args.only in (None, "rank"):
        print("rank files: ours vs tiktoken")
        _rank_section(texts, args.repeat, tuple(args.rank_file or RANK_FILES))
    if args.only in (None, "scaling"):
        print("batch scaling: threads, one compiled encoder (and cache) each")
        _scaling_section(texts, args.repeat)
    if args.only in (None, "cold"):
        print("cold start")
        _cold_start_section(args.runs)
    print(load_line("end"))


if __name__ == "__main__":
    main()
