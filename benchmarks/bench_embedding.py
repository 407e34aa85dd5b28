"""Checked TokenEmbedding vs bare F.embedding: forward+backward on the same ids and table.

Defaults: B=8, L=2048, V=128,000 (a 128k vocabulary, as in recent LLMs),
d=1024, float32 on CPU. Every configuration runs in one process on identical
inputs and one shared weight Parameter, interleaved (ours, peer, ours, ...) so
drift hits all; the median of each is reported. Target: ratio <= 1.05.

The peer runs in each configuration its users pick for this task, and ours is
compared with the fastest of them as well as with its like:
* ``F.embedding`` with a dense gradient (what ``nn.Embedding`` calls; the default);
* ``F.embedding(..., sparse=True)`` (``nn.Embedding(sparse=True)``): the gradient
  holds only the looked-up rows, for ``SparseAdam``/``SGD``;
* ``torch.compile`` of the dense ``F.embedding`` (Inductor, CPU; compile time is
  spent in the warm-up and not timed). ``--no-compile`` leaves it out.
Ours runs dense and ``sparse=True`` (the same option as nn.Embedding's).

The traced forms are compared like with like (``--no-traced`` leaves them out):
* ``torch.compile(fullgraph=True)`` of TokenEmbedding vs of ``nn.Embedding``
  (Inductor); the checks are traced tensor asserts there, no host read;
* ``torch.export`` of TokenEmbedding vs of ``nn.Embedding``, each run through
  ``ExportedProgram.module()`` (the exported graph holds the asserts).

Usage: .venv/bin/python benchmarks/bench_embedding.py [--repeats 15] [--forward-only]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from _env import load_line, machine_line
from tokembed.embedding.lookup import TokenEmbedding
from tokembed.embedding.lookup_checks import admit_lookup_ids

_Fn = Callable[[torch.Tensor], torch.Tensor]


def _step(
    fn: _Fn, ids: torch.Tensor, weight: torch.Tensor, grad: torch.Tensor, backward: bool
) -> float:
    weight.grad = None
    for param in getattr(fn, "parameters", list)():  # an exported module holds its own
        param.grad = None
    start = time.perf_counter()
    out = fn(ids)
    if backward:
        out.backward(grad)
    return time.perf_counter() - start


def _grad_bytes(weight: torch.Tensor) -> int:
    g = weight.grad
    if g is None:
        return 0
    if g.is_sparse:
        g = g.coalesce()
        return g.values().nbytes + g.indices().nbytes
    return g.nbytes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=2048)
    parser.add_argument("--vocab", type=int, default=128_000)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--forward-only", action="store_true")
    parser.add_argument("--no-compile", action="store_true", help="leave out torch.compile")
    parser.add_argument(
        "--no-traced",
        action="store_true",
        help="leave out compiled (fullgraph) and exported TokenEmbedding vs nn.Embedding",
    )
    args = parser.parse_args(argv)
    print(machine_line())
    print(load_line("start"), flush=True)

    gen = torch.Generator().manual_seed(0)
    ours = TokenEmbedding(args.vocab, args.dim, padding_idx=0)
    weight = ours.weight  # every configuration uses the very same Parameter
    ours_sparse = TokenEmbedding(args.vocab, args.dim, padding_idx=0, weight=weight, sparse=True)
    ids = torch.randint(0, args.vocab, (args.batch, args.length), generator=gen)
    grad = torch.randn(args.batch, args.length, args.dim, generator=gen)
    backward = not args.forward_only

    def peer(x: torch.Tensor) -> torch.Tensor:
        return F.embedding(x, weight, padding_idx=0)

    def peer_sparse(x: torch.Tensor) -> torch.Tensor:
        return F.embedding(x, weight, padding_idx=0, sparse=True)

    impls: dict[str, _Fn] = {
        "ours TokenEmbedding (checked), dense grad": ours,
        "ours TokenEmbedding (checked), sparse=True": ours_sparse,
        "peer F.embedding, dense grad": peer,
        "peer F.embedding, sparse=True": peer_sparse,
    }
    if not args.no_compile:
        impls["peer torch.compile(F.embedding), dense"] = torch.compile(peer)
    if not args.no_traced:
        plain = nn.Embedding(args.vocab, args.dim, padding_idx=0, device="meta")
        plain.weight = weight
        impls["ours torch.compile(TokenEmbedding, fullgraph)"] = torch.compile(ours, fullgraph=True)
        impls["peer torch.compile(nn.Embedding, fullgraph)"] = torch.compile(plain, fullgraph=True)
        impls["ours torch.export(TokenEmbedding)"] = torch.export.export(ours, (ids,)).module()
        impls["peer torch.export(nn.Embedding)"] = torch.export.export(plain, (ids,)).module()
    expected = peer(ids)
    first: dict[str, float] = {}  # first forward + first step: Inductor compiles in them
    for name, fn in impls.items():
        start = time.perf_counter()
        assert torch.equal(fn(ids), expected), name
        first[name] = time.perf_counter() - start + _step(fn, ids, weight, grad, backward)
    for _ in range(2):  # warm-up: allocator, thread pool
        for fn in impls.values():
            _step(fn, ids, weight, grad, backward)
    times: dict[str, list[float]] = {name: [] for name in impls}
    grad_bytes: dict[str, int] = {}
    for _ in range(args.repeats):
        for name, fn in impls.items():
            times[name].append(_step(fn, ids, weight, grad, backward))
            grad_bytes[name] = _grad_bytes(weight)
    # The checks alone (dtype/device, fused aminmax, one host read), timed in isolation.
    device = weight.device
    check = [
        _time(lambda: admit_lookup_ids(ids, ours.config, device=device))
        for _ in range(args.repeats)
    ]
    what = "forward" if args.forward_only else "forward+backward"
    print(
        f"{what}  B={args.batch} L={args.length} V={args.vocab} d={args.dim} float32"
        f" cpu, torch threads={torch.get_num_threads()} (torch's default, not set here)"
        f" repeats={args.repeats}"
    )
    print(f"  {'':46}{'median':>10}{'min':>10}{'grad':>12}")
    for name, ts in times.items():
        print(
            f"  {name:46}{statistics.median(ts) * 1e3:8.2f}ms{min(ts) * 1e3:8.2f}ms"
            f"{grad_bytes[name] / 2**20:9.1f}MiB"
        )
    for name, seconds in first.items():
        if "compile" in name:
            print(f"  ({name}: first forward+step incl. compilation {seconds:.1f} s, not timed)")
    med = {name: statistics.median(ts) for name, ts in times.items()}
    pairs = [
        ("ours TokenEmbedding (checked), dense grad", "peer F.embedding, dense grad"),
        ("ours TokenEmbedding (checked), sparse=True", "peer F.embedding, sparse=True"),
    ]
    if not args.no_traced:
        pairs += [
            (
                "ours torch.compile(TokenEmbedding, fullgraph)",
                "peer torch.compile(nn.Embedding, fullgraph)",
            ),
            ("ours torch.export(TokenEmbedding)", "peer torch.export(nn.Embedding)"),
        ]
    for o, p in pairs:
        print(
            f"  ratio {o[len('ours ') :]:42} / {p[len('peer ') :]}: {med[o] / med[p]:.3f} (median)"
        )
    peers = {n: t for n, t in med.items() if n.startswith("peer")}
    best_peer = min(peers, key=peers.__getitem__)
    dense_peers = {n: t for n, t in peers.items() if "sparse" not in n}
    best_dense = min(dense_peers, key=dense_peers.__getitem__)
    o = "ours TokenEmbedding (checked), dense grad"
    print(
        f"  ratio ours dense / fastest dense-grad peer ({best_dense}): {med[o] / med[best_dense]:.3f}"
    )
    best_ours = min((n for n in med if n.startswith("ours")), key=med.__getitem__)
    print(
        f"  ratio ours at its best ({best_ours}) / fastest peer ({best_peer}): "
        f"{med[best_ours] / med[best_peer]:.3f}"
    )
    print(
        f"  {'id checks alone':46}{statistics.median(check) * 1e3:8.3f}ms{min(check) * 1e3:8.3f}ms"
    )
    print(load_line("end"))
    return 0


def _time(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


if __name__ == "__main__":
    raise SystemExit(main())
