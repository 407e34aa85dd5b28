"""Vocabulary-parallel embedding vs replicated, DTensor RowwiseParallel and Megatron-Core (gloo, CPU).

One run spawns ``--tp`` ranks in one gloo group. Every implementation gets the
same [V, d] table, the same ids [B, L] on every rank (tensor parallelism: the TP
group sees one batch) and the same upstream gradient; each step is forward,
backward and an AdamW step of what the rank stores. Steps are interleaved
(replicated, ours, DTensor, Megatron, replicated, ...) so drift hits all alike.

Each sharded implementation runs in both of its output configurations, and ours is
compared with the fastest peer of each:
* all-reduced output: DTensor ``RowwiseParallel(input_layouts=Replicate(),
  output_layouts=Replicate())``, Megatron-Core ``reduce_scatter_embeddings=False``;
* sequence-parallel output: DTensor ``output_layouts=Shard(1)`` (torchtitan's plan
  for ``tok_embeddings``), Megatron-Core ``sequence_parallel=True,
  reduce_scatter_embeddings=True`` (as its ``LanguageModelEmbedding`` sets it for a
  rotary model), ours ``sequence_parallel=True``.

Printed per implementation: median and min step time on rank 0, per-rank bytes of
the table and of table + gradient + AdamW moments, the bytes handed to
collectives per step (counted at the dispatcher), and the logical payload of each
table layout by ``schedule_payloads``' formulas. Targets: per-rank table bytes =
ceil(V/tp)/V of the replicated table; step time <= 1.1x DTensor's.

Usage: .venv/bin/python benchmarks/bench_parallel.py [--vocab 32000] [--dim 512]
       [--tokens 4096] [--tp 2] [--repeats 20]
Megatron-Core (``pip install megatron-core==0.16.1``) is optional: without it
its row says why it did not run.
"""

from __future__ import annotations

import argparse
import math
import os
import queue
import statistics
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from _env import load_line, machine_line
from tokembed.parallel.ledger import count_collectives, memory_ledger, schedule_payloads
from tokembed.parallel.vocab_embedding import VocabParallelEmbedding

_MiB = 2**20


def _replicated(full: torch.Tensor, tp: int, sp: bool) -> tuple[nn.Module, torch.Tensor]:
    emb = nn.Embedding.from_pretrained(full.clone(), freeze=False)
    return emb, emb.weight


def _ours(full: torch.Tensor, tp: int, sp: bool) -> tuple[nn.Module, torch.Tensor]:
    emb = VocabParallelEmbedding.from_embedding(
        nn.Embedding.from_pretrained(full, freeze=False), sequence_parallel=sp, sequence_dim=1
    )
    return emb, emb.weight


def _dtensor(full: torch.Tensor, tp: int, sp: bool) -> tuple[nn.Module, torch.Tensor]:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import RowwiseParallel, parallelize_module

    emb = nn.Embedding.from_pretrained(full.clone(), freeze=False)
    # torchtitan's plan for tok_embeddings: ids Replicate (RowwiseParallel's default
    # input is Shard(-1)), weight Shard(0), output Shard(1) - the partial sums are
    # reduce-scattered onto the sequence for the sequence-parallel norm that follows.
    # Without sequence parallelism the output is all-reduced to Replicate().
    plan = RowwiseParallel(
        input_layouts=Replicate(), output_layouts=Shard(1) if sp else Replicate()
    )
    parallelize_module(emb, init_device_mesh("cpu", (tp,)), plan)
    return emb, emb.weight


def _megatron(full: torch.Tensor, tp: int, sp: bool) -> tuple[nn.Module, torch.Tensor]:
    from megatron.core import parallel_state
    from megatron.core.model_parallel_config import ModelParallelConfig
    from megatron.core.tensor_parallel.layers import VocabParallelEmbedding as MegatronVPE

    if not parallel_state.model_parallel_is_initialized():
        parallel_state.initialize_model_parallel(tensor_model_parallel_size=tp)
    # As LanguageModelEmbedding builds it for a rotary model (no learned positions, no
    # token types): reduce_scatter_embeddings follows config.sequence_parallel, and
    # the reduce-scattered output is [s/tp, b, h] (Megatron's sequence-first layout).
    config = ModelParallelConfig(
        tensor_model_parallel_size=tp, sequence_parallel=sp, use_cpu_initialization=True
    )
    emb = MegatronVPE(
        full.shape[0], full.shape[1], init_method=nn.init.normal_, config=config,
        reduce_scatter_embeddings=sp,
    )  # fmt: skip
    with torch.no_grad():
        emb.weight.copy_(full[emb.vocab_start_index : emb.vocab_end_index])
    return emb, emb.weight


_Make = Callable[[torch.Tensor, int, bool], tuple[nn.Module, torch.Tensor]]
# name -> (factory, configuration printed per output mode: all-reduce, sequence-parallel).
# None: the implementation has no such mode.
_IMPLS: dict[str, tuple[_Make, tuple[str | None, str | None]]] = {
    "replicated nn.Embedding": (_replicated, ("every rank the full table", None)),
    "tokembed VocabParallelEmbedding": (
        _ours, ("sequence_parallel=False", "sequence_parallel=True, sequence_dim=1")
    ),
    "DTensor RowwiseParallel": (
        _dtensor,
        (
            "input_layouts=Replicate(), output_layouts=Replicate()",
            "input_layouts=Replicate(), output_layouts=Shard(1) (torchtitan)",
        ),
    ),
    "Megatron-Core VocabParallelEmbedding": (
        _megatron,
        (
            "reduce_scatter_embeddings=False",
            "sequence_parallel=True, reduce_scatter_embeddings=True",
        ),
    ),
}  # fmt: skip
_OURS = "tokembed VocabParallelEmbedding"
_PEERS = ("DTensor RowwiseParallel", "Megatron-Core VocabParallelEmbedding")
_MODES = ("all-reduced output", "sequence-parallel output")


def _measured(run: Callable[[], None]) -> tuple[int, int, dict[str, tuple[int, int]]]:
    """Bytes handed to collectives by ``run`` on this rank, and summed over the ranks."""
    with count_collectives() as ledger:
        run()
    total = torch.tensor([ledger.total_bytes], dtype=torch.int64)
    dist.all_reduce(total)
    return ledger.total_bytes, int(total), ledger.by_op()


def _payload_ledger(full: torch.Tensor, ids: torch.Tensor, tp: int) -> dict[str, Any]:
    """Each table layout of ``schedule_payloads`` once on the benchmark's ids: formula beside measurement.

    Replicated and owner-routed see data-parallel origins (rank r looks up its own 1/tp of
    the batch); masked-local and column-sharded see the tensor-parallel batch (every rank
    the same ids).
    """
    from tokembed.parallel.column import ColumnParallelEmbedding
    from tokembed.parallel.intervals import row_intervals
    from tokembed.parallel.ledger import count_remote
    from tokembed.parallel.routed import RowRoutedEmbedding

    rank = dist.get_rank()
    mine = ids.reshape(tp, -1)[rank]  # this origin rank's share, [N / tp]
    n_remote = count_remote(list(ids.reshape(tp, -1)), row_intervals(full.shape[0], tp))
    formulas = schedule_payloads(
        num_embeddings=full.shape[0], embedding_dim=full.shape[1], n_tokens=ids.numel(),
        n_remote=n_remote,
    )  # fmt: skip
    replicated = nn.Embedding.from_pretrained(full.clone(), freeze=False)
    replicated(mine).sum().backward()
    routed = RowRoutedEmbedding.from_embedding(nn.Embedding.from_pretrained(full, freeze=False))
    ours = VocabParallelEmbedding.from_embedding(nn.Embedding.from_pretrained(full, freeze=False))
    column = ColumnParallelEmbedding.from_embedding(
        nn.Embedding.from_pretrained(full, freeze=False)
    )
    assert replicated.weight.grad is not None
    grad = replicated.weight.grad
    return {
        "n_remote": n_remote,
        "replicated + DP grad all-reduce": (formulas["replicated"], _measured(lambda: dist.all_reduce(grad))),
        "owner-routed (RowRoutedEmbedding)": (
            formulas["owner_routed"], _measured(lambda: routed(mine).sum().backward())
        ),
        "masked local (ours)": (formulas["masked_local"], _measured(lambda: ours(ids).sum().backward())),
        "column-sharded (ColumnParallelEmbedding)": (
            formulas["column_sharded"], _measured(lambda: column(ids).sum().backward())
        ),
    }  # fmt: skip


def _step(
    module: nn.Module, opt: torch.optim.Optimizer, ids: torch.Tensor, grad: torch.Tensor
) -> None:
    opt.zero_grad(set_to_none=True)
    module(ids).backward(grad)
    opt.step()


def _local(t: torch.Tensor, name: str, sp: bool, rank: int, tp: int) -> torch.Tensor:
    """This rank's share of a full [B, L, d] output (or its gradient) in ``name``'s layout."""
    if not sp or name == "replicated nn.Embedding":
        return t
    part = t.chunk(tp, dim=1)[rank]  # [B, L/tp, d]
    if name.startswith("Megatron"):
        return part.transpose(0, 1).contiguous()  # Megatron's sequence-first [L/tp, B, d]
    return part.contiguous()


def _worker(rank: int, args: argparse.Namespace, port: int, results: Any) -> None:
    # Thread settings as before (explicit here and printed): one intra-op pool of
    # args.threads per rank, so tp ranks share the cores without oversubscribing.
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    torch.set_num_threads(args.threads)
    store = dist.TCPStore("127.0.0.1", port, args.tp, is_master=rank == 0)
    dist.init_process_group(
        "gloo", store=store, rank=rank, world_size=args.tp, timeout=timedelta(seconds=600)
    )
    gen = torch.Generator().manual_seed(0)
    full = torch.randn(args.vocab, args.dim, generator=gen)  # [V, d], same on every rank
    batch = 4
    ids = torch.randint(0, args.vocab, (batch, args.tokens // batch), generator=gen)
    grad = torch.randn(batch, args.tokens // batch, args.dim, generator=gen)
    expected = nn.functional.embedding(ids, full)
    built: dict[tuple[str, str], tuple[nn.Module, torch.Tensor, torch.optim.Optimizer]] = {}
    grads: dict[tuple[str, str], torch.Tensor] = {}
    skipped: dict[str, str] = {}
    for name, (make, configs) in _IMPLS.items():
        for mode, config in zip(_MODES, configs, strict=True):
            if config is None or name in skipped:
                continue
            sp = mode == _MODES[1]
            try:
                module, table = make(full, args.tp, sp)
                out = module(ids)
            except ImportError as error:
                skipped[name] = f"not installed ({error.name})"
                continue
            except (AssertionError, RuntimeError) as error:
                if "CUDA" not in str(error):
                    raise
                # Megatron-Core 0.16's reduce-scatter allocates its output on
                # torch.cuda.current_device(): that configuration needs a GPU.
                skipped[f"{name} ({mode})"] = f"needs CUDA here: {error}"
                continue
            # Same lookup before timing, in each implementation's own output layout.
            assert torch.equal(out, _local(expected, name, sp, rank, args.tp)), name
            key = (mode, name)
            built[key] = (module, table, torch.optim.AdamW(module.parameters(), lr=1e-3))
            grads[key] = _local(grad, name, sp, rank, args.tp)
    for _ in range(2):  # warm-up: allocator, thread pool, AdamW state
        for key, (module, _, opt) in built.items():
            _step(module, opt, ids, grads[key])
    times: dict[tuple[str, str], list[float]] = {key: [] for key in built}
    for _ in range(args.repeats):
        for key, (module, _, opt) in built.items():
            dist.barrier()
            start = time.perf_counter()
            _step(module, opt, ids, grads[key])
            # DTensor hands back its output before the all-reduce has finished, and a
            # step that never reads the output would stop the clock early; gloo's
            # barrier waits for all prior work, so every step ends with its collectives.
            dist.barrier()
            times[key].append(time.perf_counter() - start)
    rows = {}
    for key, (module, table, opt) in built.items():
        with count_collectives() as ledger:
            _step(module, opt, ids, grads[key])
        memory = memory_ledger(module, opt, table=table)
        rows[key] = {
            "median": statistics.median(times[key]),
            "min": min(times[key]),
            "table": memory.table,
            "total": memory.total,
            "collective": ledger.total_bytes,
            "calls": ledger.by_op(),
        }
    payloads = _payload_ledger(full, ids, args.tp)
    if rank == 0:
        results.put((rows, skipped, payloads))
    dist.barrier()
    dist.destroy_process_group()


def _report(
    args: argparse.Namespace,
    rows: dict[tuple[str, str], dict[str, Any]],
    skipped: dict[str, str],
) -> None:
    payload = schedule_payloads(
        num_embeddings=args.vocab, embedding_dim=args.dim, n_tokens=args.tokens, n_remote=0
    )
    print(
        f"V={args.vocab} d={args.dim} tokens={args.tokens} tp={args.tp} float32 gloo/cpu "
        f"repeats={args.repeats}; step = forward + backward + AdamW (lr 1e-3, torch defaults)"
        " + a barrier (every collective done)"
    )
    print(
        f"threads: torch.set_num_threads({args.threads}) and OMP_NUM_THREADS={args.threads}"
        f" in each of the {args.tp} ranks (--threads, at most cpu_count // tp)"
    )
    for mode in _MODES:
        print(f"{mode}:")
        print(
            f"  {'':38}{'median':>9}{'min':>9}{'table/rank':>12}{'+grad+adam':>12}"
            f"{'coll./step':>12}"
        )
        for (m, name), row in rows.items():
            if m != mode:
                continue
            config = _IMPLS[name][1][_MODES.index(mode)]
            print(
                f"  {name:38}{row['median'] * 1e3:7.1f}ms{row['min'] * 1e3:7.1f}ms"
                f"{row['table'] / _MiB:9.2f}MiB{row['total'] / _MiB:9.2f}MiB"
                f"{row['collective'] / _MiB:9.2f}MiB  {row['calls']}"
            )
            print(f"  {'':4}config: {config}")
        ours = rows[(mode, _OURS)]
        peers = {name: rows[(mode, name)] for name in _PEERS if (mode, name) in rows}
        for name, row in peers.items():
            print(
                f"  step time ours/{name:38}{ours['median'] / row['median']:.3f} (median)"
                f" {ours['min'] / row['min']:.3f} (min)"
            )
        if peers:
            best = min(peers, key=lambda n: peers[n]["median"])
            print(
                f"  vs the fastest peer here ({best}): "
                f"{ours['median'] / peers[best]['median']:.3f} (median)"
            )
    for name, why in skipped.items():
        print(f"  {name}: did not run: {why}")
    ours, replicated = rows[(_MODES[0], _OURS)], rows[(_MODES[0], "replicated nn.Embedding")]
    share = math.ceil(args.vocab / args.tp) / args.vocab
    print(f"table bytes ours/replicated      {ours['table'] / replicated['table']:.4f}"
          f"  (target ceil(V/tp)/V = {share:.4f})")  # fmt: skip
    fastest = {
        mode: min(
            (rows[(mode, n)]["median"] for n in _PEERS if (mode, n) in rows), default=math.nan
        )
        for mode in _MODES
    }
    best_ours = min(rows[(mode, _OURS)]["median"] for mode in _MODES)
    print(
        f"ours at its best vs the fastest peer configuration overall: "
        f"{best_ours / min(fastest.values()):.3f} (median)"
    )
    print(
        f"logical payload/step: masked-local reduction {payload['masked_local'] / _MiB:.2f}MiB,"
        f" replicated+DP gradient {payload['replicated'] / _MiB:.2f}MiB (if the table were data-parallel)"
    )


def _report_payloads(payloads: dict[str, Any]) -> None:
    print(
        f"payload per step by table layout (N_remote={payloads.pop('n_remote')}): formula vs bytes "
        "handed to collectives on rank 0 / summed over ranks"
    )
    for name, (formula, (rank0, total, calls)) in payloads.items():
        print(
            f"  {name:38}{formula / _MiB:9.2f}MiB{rank0 / _MiB:9.2f}MiB{total / _MiB:9.2f}MiB  {calls}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--tp", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    args = parser.parse_args(argv)
    args.threads = max(1, min(args.threads, (os.cpu_count() or args.tp) // args.tp))
    print(machine_line())
    print(load_line("start"), flush=True)
    store = dist.TCPStore("127.0.0.1", 0, 1, is_master=True, wait_for_workers=False)
    port = store.port
    del store  # free the port for rank 0's own master store
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(r, args, port, results)) for r in range(args.tp)]
    for proc in procs:
        proc.start()
    while True:  # a rank that raises prints its traceback and exits: stop waiting then
        try:
            rows, skipped, payloads = results.get(timeout=5)
            break
        except queue.Empty:
            if any(p.exitcode not in (None, 0) for p in procs):
                for proc in procs:
                    proc.kill()
                return 1
    for proc in procs:
        proc.join()
    _report(args, rows, skipped)
    _report_payloads(payloads)
    print(load_line("end"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
