"""Continuing a trained tokenizer: time and peak memory against training from scratch and `bpe-continue`.

Rows (each in a fresh subprocess, so its peak resident memory, ``VmHWM``, is its own;
reading RusLit-40 happens before the clock starts):

* ``extend o200k``: ``train(texts, TrainConfig(merges=N, base=o200k_base))`` — the base's
  merges applied to every chunk (compiled encoder), then N merges (compiled learner);
* ``extend smollm2``: the same from SmolLM2-135M's ``tokenizer.json``;
* ``scratch o200k-pattern`` / ``scratch smollm2-pattern``: ``train`` with the same number of
  merges from bytes, under the same pre-tokenizer (what continuing is compared with);
* ``bpe-continue smollm2`` / ``bpe-continue o200k``: the PyPI package
  (``continue_training(base, texts=[...], vocab_size=len(vocab) + N)``), when installed;
  its o200k base is our ``export_hf`` of o200k (the conversion is not timed).

Loading the base is timed apart from learning (``load s``); o200k's explicit merge list is
derived once and cached on disk, so the first run on a machine pays seconds more. ``learn s``
includes counting the chunks (the same work as from scratch), encoding them with the base,
learning, and building the new tables (for o200k about 1.5 s of validating 200k pieces).

    python benchmarks/bench_extend.py            # RusLit-40, 4,096 merges
    python benchmarks/bench_extend.py --quick    # 2 M characters, 256 merges (a smoke run)
"""

from __future__ import annotations

import argparse
import gzip
import importlib.metadata
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _env import load_line, machine_line

DATA = Path(
    os.environ.get("TOKEMBED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)
RUSLIT = DATA / "ruslit" / "ruslit40.txt.gz"
O200K = DATA / "tokenizers" / "o200k_base.tiktoken"
SMOLLM2 = DATA / "tokenizers" / "smollm2-135m" / "tokenizer.json"
_CASES = (
    "extend o200k",
    "scratch o200k-pattern",
    "bpe-continue o200k",
    "extend smollm2",
    "scratch smollm2-pattern",
    "bpe-continue smollm2",
)


def _texts(chars: int | None) -> list[str]:
    with gzip.open(RUSLIT, "rt", encoding="utf-8") as f:
        text = f.read() if chars is None else f.read(chars)
    # Blocks of ~1 MB cut at line ends: how the CLI streams a file (each is pre-tokenized alone).
    out, start = [], 0
    while start < len(text):
        end = text.find("\n", start + (1 << 20))
        end = len(text) if end < 0 else end + 1
        out.append(text[start:end])
        start = end
    return out


def _base(name: str) -> Any:
    from tokembed.tokenizer import load_tokenizer

    return load_tokenizer(O200K if name == "o200k" else SMOLLM2)


def _peak_rss_mb() -> float:
    """This process's peak resident memory. ``VmHWM`` rather than ``ru_maxrss``: Linux carries
    ru_maxrss over from the parent through fork and exec, so every row would read the parent's
    peak (the o200k conversion)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _one(case: str, chars: int | None, merges: int, hf_o200k: str | None) -> dict[str, Any]:
    """One row, measured in this process (the parent starts a fresh one per row)."""
    kind, name = case.split(" ")
    texts = _texts(chars)
    start = time.perf_counter()
    if kind == "bpe-continue":
        from bpe_continue import continue_training
        from tokenizers import Tokenizer

        base_hf = Tokenizer.from_file(hf_o200k if name == "o200k" else str(SMOLLM2))
        loaded = time.perf_counter()
        size = base_hf.get_vocab_size()
        new = continue_training(base_hf, texts=texts, vocab_size=size + merges, show_progress=False)
        learned = new.get_vocab_size() - size
    else:
        from tokembed.tokenizer import TrainConfig, train

        base = _base(name.split("-")[0])
        if kind == "extend":
            base.tables  # noqa: B018  (derive a rank file's merges: part of loading)
            loaded = time.perf_counter()
            config = TrainConfig(merges=merges, base=base, progress=False)
            learned = train(texts, config=config).n_merges - base.n_merges
        else:
            loaded = time.perf_counter()
            pre = base.pretokenizer
            config = TrainConfig(
                merges=merges, pattern=pre.stages[0], dialect=pre.dialect, progress=False
            )
            learned = train(texts, config=config).n_merges
    end = time.perf_counter()
    return {
        "case": case,
        "load_s": round(loaded - start, 3),
        "learn_s": round(end - loaded, 3),
        "peak_rss_mb": _peak_rss_mb(),
        "merges": learned,
    }


def _run(case: str, args: argparse.Namespace, hf_o200k: str | None) -> dict[str, Any] | str:
    cmd = [sys.executable, __file__, "--one", case, "--merges", str(args.merges)]
    cmd += ["--chars", str(args.chars)] if args.chars else []
    cmd += ["--hf-o200k", hf_o200k] if hf_o200k else []
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=3600)
    if proc.returncode:
        return (proc.stderr.strip().splitlines() or ["failed"])[-1]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _versions() -> str:
    out = []
    for dist in ("tokembed", "bpe-continue", "tokenizers"):
        try:
            out.append(f"{dist} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{dist} not installed")
    return ", ".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="2 M characters, 256 merges")
    p.add_argument("--merges", type=int, default=4096)
    p.add_argument("--chars", type=int, default=None, help="first characters of RusLit-40")
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--hf-o200k", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(_one(args.one, args.chars, args.merges, args.hf_o200k)))
        return
    if args.quick:
        args.merges, args.chars = 256, args.chars or 2_000_000
    print(load_line("start"))
    print(machine_line())
    print(_versions())
    print(f"corpus: RusLit-40, {'all' if args.chars is None else f'{args.chars:,} characters'}; "
          f"{args.merges:,} merges")  # fmt: skip
    have_peer = importlib.util.find_spec("bpe_continue") is not None
    with tempfile.TemporaryDirectory() as tmp:
        hf_o200k = None
        if have_peer:
            from tokembed.tokenizer.formats import export_hf

            hf_o200k = str(export_hf(_base("o200k"), Path(tmp) / "o200k.json"))
        rows: dict[str, dict[str, Any] | str] = {}
        for case in _CASES:
            if case.startswith("bpe-continue") and not have_peer:
                rows[case] = "bpe-continue is not installed (pip install bpe-continue)"
                continue
            rows[case] = _run(case, args, hf_o200k)
    print(f"{'case':<26} {'load s':>8} {'learn s':>9} {'peak RSS MB':>12} {'merges':>7}")
    for case, row in rows.items():
        if isinstance(row, str):
            print(f"{case:<26} {row}")
            continue
        print(f"{case:<26} {row['load_s']:>8.2f} {row['learn_s']:>9.2f} "
              f"{row['peak_rss_mb']:>12.1f} {row['merges']:>7}")  # fmt: skip
    print("ratios (learn time, peak RSS):")
    for name in ("o200k", "smollm2"):
        ours = rows[f"extend {name}"]
        for other in (f"scratch {name}-pattern", f"bpe-continue {name}"):
            peer = rows[other]
            if isinstance(ours, dict) and isinstance(peer, dict):
                t = peer["learn_s"] / max(ours["learn_s"], 1e-9)
                m = peer["peak_rss_mb"] / max(ours["peak_rss_mb"], 1e-9)
                print(f"  {other} / extend {name}: time {t:.2f}x, peak RSS {m:.2f}x")
    print(load_line("end"))


if __name__ == "__main__":
    main()
