"""Checked TokenEmbedding vs bare F.embedding: forward+backward on the same ids and table.

Defaults follow the spec's sizing example (0x04): B=8, L=2048, V=128,000,
d=1024, float32 on CPU. Both paths run in one process on identical inputs,
interleaved (ours, peer, ours, ...) so drift hits both; the median of each is
reported with the ratio ours/peer. Target: ratio <= 1.05.

``--traced`` adds the same comparison for the traced forms: the checked lookup under
torch.compile(fullgraph=True) vs nn.Embedding under torch.compile(fullgraph=True)
(inductor, the default backend), and torch.export'ed TokenEmbedding vs torch.export'ed
nn.Embedding (both run through ``ExportedProgram.module()``). There the checks are
traced tensor asserts (no host read), so the ratio is the asserts' cost.

Usage: .venv/bin/python benchmarks/bench_embedding.py [--repeats 15] [--forward-only] [--traced]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from tokembed.embedding.lookup import TokenEmbedding
from tokembed.embedding.lookup_checks import admit_lookup_ids


def _step(fn, ids: torch.Tensor, weight: torch.Tensor, grad: torch.Tensor, backward: bool) -> float:  # type: ignore[no-untyped-def]
    weight.grad = None
    for param in getattr(fn, "parameters", list)():  # an exported module holds its own
        param.grad = None
    start = time.perf_counter()
    out = fn(ids)
    if backward:
        out.backward(grad)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=2048)
    parser.add_argument("--vocab", type=int, default=128_000)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--forward-only", action="store_true")
    parser.add_argument(
        "--traced", action="store_true", help="also compare compiled and exported forms"
    )
    args = parser.parse_args(argv)

    gen = torch.Generator().manual_seed(0)
    ours = TokenEmbedding(args.vocab, args.dim, padding_idx=0)
    weight = ours.weight  # the peer uses the very same Parameter
    ids = torch.randint(0, args.vocab, (args.batch, args.length), generator=gen)
    grad = torch.randn(args.batch, args.length, args.dim, generator=gen)
    backward = not args.forward_only

    def peer(x: torch.Tensor) -> torch.Tensor:
        return F.embedding(x, weight, padding_idx=0)

    assert torch.equal(ours(ids), peer(ids))
    for _ in range(2):  # warm-up: allocator, thread pool
        _step(ours, ids, weight, grad, backward)
        _step(peer, ids, weight, grad, backward)
    times_ours, times_peer = [], []
    for _ in range(args.repeats):
        times_ours.append(_step(ours, ids, weight, grad, backward))
        times_peer.append(_step(peer, ids, weight, grad, backward))
    # The checks alone (dtype/device, fused aminmax, one host read), timed in isolation.
    device = weight.device
    check = [
        _time(lambda: admit_lookup_ids(ids, ours.config, device=device))
        for _ in range(args.repeats)
    ]
    what = "forward" if args.forward_only else "forward+backward"
    print(
        f"{what}  B={args.batch} L={args.length} V={args.vocab} d={args.dim} float32"
        f" cpu threads={torch.get_num_threads()} repeats={args.repeats}"
    )
    print(f"  {'':26}{'median':>10}{'min':>10}")
    for name, times in (
        ("TokenEmbedding (checked)", times_ours),
        ("F.embedding (peer)", times_peer),
    ):
        print(f"  {name:26}{statistics.median(times) * 1e3:8.2f}ms{min(times) * 1e3:8.2f}ms")
    ratio_median = statistics.median(times_ours) / statistics.median(times_peer)
    print(f"  {'ratio ours/peer':26}{ratio_median:10.3f}{min(times_ours) / min(times_peer):10.3f}")
    print(
        f"  {'id checks alone':26}{statistics.median(check) * 1e3:8.3f}ms{min(check) * 1e3:8.3f}ms"
    )
    if args.traced:
        _traced(ours, ids, grad, backward, args.repeats)
    return 0


def _traced(
    ours: TokenEmbedding, ids: torch.Tensor, grad: torch.Tensor, backward: bool, repeats: int
) -> None:
    weight = ours.weight
    plain = nn.Embedding(ours.num_embeddings, ours.embedding_dim, padding_idx=0, device="meta")
    plain.weight = weight  # the same Parameter as ours
    pairs = {
        "compiled": (
            torch.compile(ours, fullgraph=True),
            torch.compile(plain, fullgraph=True),
        ),
        "exported": (
            torch.export.export(ours, (ids,)).module(),
            torch.export.export(plain, (ids,)).module(),
        ),
    }
    for form, (mine, peer) in pairs.items():
        assert torch.equal(mine(ids), peer(ids))
        for _ in range(2):  # warm-up: compilation, autotuning, allocator
            _step(mine, ids, weight, grad, backward)
            _step(peer, ids, weight, grad, backward)
        times_ours, times_peer = [], []
        for _ in range(repeats):
            times_ours.append(_step(mine, ids, weight, grad, backward))
            times_peer.append(_step(peer, ids, weight, grad, backward))
        print(f"  {form}: torch.{'compile(fullgraph=True)' if form == 'compiled' else 'export'}")
        for name, times in (
            (f"TokenEmbedding ({form})", times_ours),
            (f"nn.Embedding ({form})", times_peer),
        ):
            print(f"  {name:26}{statistics.median(times) * 1e3:8.2f}ms{min(times) * 1e3:8.2f}ms")
        ratio = statistics.median(times_ours) / statistics.median(times_peer)
        print(f"  {'ratio ours/peer':26}{ratio:10.3f}{min(times_ours) / min(times_peer):10.3f}")


def _time(fn) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


if __name__ == "__main__":
    raise SystemExit(main())
