"""Deriving a merge list from a rank file: the compiled heap replay against the reference.

``ranks_to_tables`` finds, for every piece of a ``.tiktoken`` file, the two parts
tiktoken's joining leaves in it. The reference (``lowest_rank_split`` for every
piece, run with ``TOKEMBED_PURE_PYTHON=1``) rescans every pair after each join,
O(n^2) for a piece of n bytes; a crafted chain of ever longer pieces
(``a^2, a^3, ..., a^N``, N^2/2 bytes) then costs the cube of its longest piece.
The compiled deriver (``_native/ranks_core.c``) keeps candidate pairs in a heap,
O(n log n) per piece, so a file costs about its size.

Inputs: the chains a^2..a^1000 (a 675 KB rank file) and a^2..a^3000 (6 MB), and
the real o200k_base file from ``../shared/data/tokenizers``. Both implementations
run in this process, one after the other on each input, and must give the same
merges; the ratio column is reference seconds / compiled seconds.

    python benchmarks/bench_rank_derivation.py            # the full inputs (minutes)
    python benchmarks/bench_rank_derivation.py --quick    # a^2..a^300, a^2..a^600, r50k_base
"""

from __future__ import annotations

import argparse
import os
import time
from importlib.metadata import version
from pathlib import Path

from _env import load_line, machine_line
from tokembed.tokenizer.formats.ranks import format_ranks, parse_ranks, ranks_to_tables

DATA = Path(
    os.environ.get("TOKEMBED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)
TOKENIZERS = DATA / "tokenizers"


def _chain(longest: int) -> dict[bytes, int]:
    ranks = {bytes([b]): b for b in range(256)}
    for k in range(2, longest + 1):
        ranks[b"a" * k] = len(ranks)
    return ranks


def _derive(ranks: dict[bytes, int], *, reference: bool) -> tuple[float, tuple[object, ...]]:
    before = os.environ.get("TOKEMBED_PURE_PYTHON")
    os.environ["TOKEMBED_PURE_PYTHON"] = "1" if reference else "0"
    try:
        t0 = time.perf_counter()
        merges = ranks_to_tables(ranks).merges
        return time.perf_counter() - t0, merges
    finally:
        if before is None:
            del os.environ["TOKEMBED_PURE_PYTHON"]
        else:
            os.environ["TOKEMBED_PURE_PYTHON"] = before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small inputs (seconds)")
    args = parser.parse_args()
    if args.quick:
        inputs = [("chain a^2..a^300", 300), ("chain a^2..a^600", 600), ("r50k_base", None)]
    else:
        inputs = [("chain a^2..a^1000", 1000), ("chain a^2..a^3000", 3000), ("o200k_base", None)]
    print(load_line("start"))
    print(machine_line())
    print(f"tokembed {version('tokembed')}; peer: its own pure-Python reference (no library)")
    print(
        f"{'input':<20} {'file':>9} {'pieces':>8} {'reference s':>12} {'compiled s':>11} {'ratio':>7}"
    )
    for label, longest in inputs:
        if longest is None:
            data = (TOKENIZERS / f"{label}.tiktoken").read_bytes()
            ranks = parse_ranks(data)
        else:
            ranks = _chain(longest)
            data = format_ranks(ranks)
        compiled_s, compiled = _derive(ranks, reference=False)
        reference_s, reference = _derive(ranks, reference=True)
        if compiled != reference:
            raise SystemExit(f"{label}: the compiled merges differ from the reference's")
        size = f"{len(data) / 1e6:.2f} MB" if len(data) >= 1e6 else f"{len(data) / 1e3:.0f} KB"
        print(
            f"{label:<20} {size:>9} {len(ranks):>8,} {reference_s:>12.3f} {compiled_s:>11.3f}"
            f" {reference_s / compiled_s:>6.1f}x"
        )
    print(load_line("end"))


if __name__ == "__main__":
    main()
