"""Vocabulary growth: tokembed's migrate_model vs transformers' resize_token_embeddings.

The model (defaults from the issue): a Llama with no decoder layers, a V=128,000 x
d=4,096 fp32 input table, an untied output head with a bias, and AdamW state
(exp_avg, exp_avg_sq, step) on all three tensors, grown by M=1,024 tokens. Each
side runs in a fresh subprocess (so neither inherits the other's allocator
state) and reports wall time of the migration and its peak RSS above the
process's RSS just before it (Linux: /proc/self/clear_refs resets VmHWM).

* tokembed: ``migrate_model(..., optimizer=opt)`` with ``mean`` rows (and once
  with ``mean_cov``, transformers' own rule), old rows verified bit for bit,
  Adam moments moved row by row and the step kept;
* transformers: ``resize_token_embeddings(V + M, mean_resizing=True)``, its
  documented growth path; it migrates no optimizer state (the moments stay at
  V rows, keyed to Parameters the model no longer uses), so its process does not
  build the state at all; peaks are compared above each process's own baseline.

Target: tokembed's peak at most one table above the model's own memory.

Usage: .venv/bin/python benchmarks/bench_migrate.py [--vocab 128000 --dim 4096 --added 1024]
(tokembed's process needs about 7 tables of memory: 15 GB at the defaults).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

SIDES = ("tokembed-mean", "tokembed-mean_cov", "transformers")


def _mib(field: str) -> float:
    status = Path("/proc/self/status").read_text()
    return int(re.search(rf"{field}:\s+(\d+) kB", status).group(1)) / 1024  # type: ignore[union-attr]


def _build(vocab: int, dim: int, *, state: bool = True):  # type: ignore[no-untyped-def]
    import torch
    from torch import nn
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=dim,
        intermediate_size=16,
        num_hidden_layers=0,
        num_attention_heads=1,
        num_key_value_heads=1,
        tie_word_embeddings=False,
    )
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
        model.lm_head = nn.Linear(dim, vocab, bias=True)
    model = model.to_empty(device="cpu")
    gen = torch.Generator().manual_seed(0)
    params = [model.model.embed_tokens.weight, model.lm_head.weight, model.lm_head.bias]
    opt = torch.optim.AdamW(params, lr=1e-4)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02, generator=gen)
        for p in params if state else ():  # as after training: nonzero moments, step 100
            opt.state[p] = {
                "step": torch.tensor(100.0),
                "exp_avg": torch.empty_like(p).normal_(0.0, 1e-3, generator=gen),
                "exp_avg_sq": torch.empty_like(p).uniform_(0.0, 1e-6, generator=gen),
            }
    return model, opt


def _worker(side: str, vocab: int, dim: int, added: int) -> dict[str, object]:
    import torch

    torch.manual_seed(0)
    # transformers neither reads nor moves optimizer state: its process skips building it
    # (4 tables less to hold); the peak is measured above each process's own baseline.
    model, opt = _build(vocab, dim, state=side != "transformers")
    Path("/proc/self/clear_refs").write_text("5")  # reset the high-water mark
    before = _mib("VmRSS")
    start = time.perf_counter()
    if side == "transformers":
        model.resize_token_embeddings(vocab + added, mean_resizing=True)
    else:
        from tokembed.migrate import NewRows, RowMap, migrate_model

        rows = RowMap(old_rows=vocab, new_rows=vocab + added, source=(*range(vocab), *[-1] * added))
        migrate_model(model, rows, optimizer=opt, init=NewRows(name=side.split("-")[1]))
    seconds = time.perf_counter() - start
    peak = _mib("VmHWM")
    moments = opt.state.get(model.lm_head.weight, {}).get("exp_avg")
    return {
        "side": side,
        "seconds": seconds,
        "rss_before_mib": before,
        "peak_above_mib": peak - before,
        "table_mib": vocab * dim * 4 / 2**20,
        "optimizer_rows": None if moments is None else int(moments.shape[0]),
        "head_rows": int(model.lm_head.weight.shape[0]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=128_000)
    parser.add_argument("--dim", type=int, default=4_096)
    parser.add_argument("--added", type=int, default=1_024)
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES))
    parser.add_argument("--worker", choices=SIDES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(_worker(args.worker, args.vocab, args.dim, args.added)))
        return 0
    sizes = ["--vocab", str(args.vocab), "--dim", str(args.dim), "--added", str(args.added)]
    results = {}
    print(
        f"V={args.vocab:,} d={args.dim:,} +{args.added:,} rows, fp32, untied head + bias + AdamW state"
    )
    print(f"one table = {args.vocab * args.dim * 4 / 2**20:,.0f} MiB")
    print(
        f"{'side':<20}{'seconds':>9}{'RSS before':>12}{'peak above':>12}{'tables':>8}{'moment rows':>13}"
    )
    for side in args.sides:
        done = subprocess.run(
            [sys.executable, __file__, "--worker", side, *sizes],
            capture_output=True,
            text=True,
            check=True,
        )
        r = results[side] = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"{side:<20}{r['seconds']:>9.2f}{r['rss_before_mib']:>12,.0f}{r['peak_above_mib']:>12,.0f}"
            f"{r['peak_above_mib'] / r['table_mib']:>8.2f}{r['optimizer_rows']!s:>13}",
            flush=True,
        )
    peer = results.get("transformers")
    for side in (s for s in results if s != "transformers" and peer):
        print(f"{side} / transformers: time {results[side]['seconds'] / peer['seconds']:.2f}x, "
              f"peak {results[side]['peak_above_mib'] / max(peer['peak_above_mib'], 1):.2f}x")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
