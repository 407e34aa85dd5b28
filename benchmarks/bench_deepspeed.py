"""DeepSpeed AutoTP with and without the vocabulary-parallel embedding: per-rank bytes and step time.

Two ranks (``--tp 2``) in one gloo group on CPU. For ZeRO-1 and ZeRO-2 the same
untied Llama is wrapped twice by :func:`initialize_autotp`: once with
``vocab_parallel_embedding`` off (DeepSpeed's default: the input embedding
replicated on every TP rank) and once on (rows ``row_intervals(V, tp)[r]`` on rank
r). Steps (forward, backward, AdamW step) are interleaved across the four engines
so drift hits all alike. Printed per stage and rank: the bytes of the input
embedding's weight and of all the module's parameters on that rank (measured
on the rank's tensors), the median and min step time, and the ratios ours /
replicated. Targets: embedding bytes ~ ceil(V/tp)/V of the
replicated table; step time not above the replicated one.

Then vocabulary growth under ZeRO-3 (no AutoTP, the same ranks data-parallel, in
a spawn of its own: DeepSpeed's process groups are made once per process): an
untied Llama trains one AdamW step, grows by ``--growth`` rows with
:func:`~tokembed.migrate.zero3.migrate_zero3` (gather the fp32 masters and Adam
moments, migrate in one process, build a new engine). Printed: the wall time of
``migrate_zero3`` against its peer, ``migrate_model`` of the same model and AdamW
state in one process (the migration alone, no gathering or rebuilding), their
ratio, and ``deepspeed.initialize`` of a fresh engine of the grown size (the part of
ours that no migration avoids); each rank's partition bytes of the head before and after (never empty);
the step time before and after.

Usage: .venv/bin/python benchmarks/bench_deepspeed.py [--vocab 32000] [--hidden 256]
       [--layers 2] [--repeats 10] [--growth 320] [--quick]
"""

from __future__ import annotations

import argparse
import functools
import os
import queue
import statistics
import time
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from _env import load_line, machine_line

_MiB = 2**20
_MODES = ("replicated", "vocab-parallel")


def _model(args: argparse.Namespace) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=2 * args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=args.seq,
        tie_word_embeddings=False,
    )
    return LlamaForCausalLM(config)


def _join(rank: int, args: argparse.Namespace, port: int) -> Any:
    """Join the ranks' gloo group as a launcher would; returns the deepspeed module."""
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(args.tp))
    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", port, args.tp, is_master=rank == 0)
    dist.init_process_group(
        "gloo", store=store, rank=rank, world_size=args.tp, timeout=timedelta(seconds=600)
    )
    import deepspeed

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False  # gloo only, no JIT build
    return deepspeed


def _worker(rank: int, args: argparse.Namespace, port: int, results: Any) -> None:
    _join(rank, args, port)
    from tokembed.parallel.deepspeed_tp import initialize_autotp

    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, args.vocab, (args.batch, args.seq), generator=gen)
    engines: dict[tuple[int, str], Any] = {}
    for zero in (1, 2):
        for mode in _MODES:
            config = {
                "train_micro_batch_size_per_gpu": args.batch,
                "gradient_clipping": 0.0,
                "zero_optimization": {"stage": zero},
                "zero_allow_untested_optimizer": True,
                "tensor_parallel": {
                    "autotp_size": args.tp,
                    "vocab_parallel_embedding": mode == "vocab-parallel",
                },
                "steps_per_print": 10**9,
            }
            opt = functools.partial(torch.optim.AdamW, lr=1e-3)
            engines[zero, mode], *_ = initialize_autotp(_model(args), config, optimizer=opt)
    times: dict[tuple[int, str], list[float]] = {key: [] for key in engines}
    for step in range(args.repeats + 1):
        for key, engine in engines.items():
            dist.barrier()
            start = time.perf_counter()
            loss = engine(input_ids=ids, labels=ids).loss
            engine.backward(loss)
            engine.step()
            dist.barrier()
            if step:  # the first step of each engine builds caches: not timed
                times[key].append(time.perf_counter() - start)
    rows = {}
    for key, engine in engines.items():
        weight = engine.module.get_input_embeddings().weight
        rows[key] = {
            "embedding": weight.numel() * weight.element_size(),
            "model": sum(p.numel() * p.element_size() for p in engine.module.parameters()),
            "median": statistics.median(times[key]),
            "min": min(times[key]),
            "type": type(engine.module.get_input_embeddings()).__name__,
        }
    gathered: list[Any] = [None] * args.tp
    dist.all_gather_object(gathered, rows)
    if rank == 0:
        results.put(gathered)
    dist.barrier()
    dist.destroy_process_group()


def _timed_step(engine: Any, ids: torch.Tensor, rank: int, world: int) -> float:
    part = ids.shape[0] // world
    mine = ids[part * rank : part * (rank + 1)]
    dist.barrier()
    start = time.perf_counter()
    loss = engine(input_ids=mine, labels=mine).loss
    engine.backward(loss)
    engine.step()
    dist.barrier()
    return time.perf_counter() - start


def _zero3_worker(rank: int, args: argparse.Namespace, port: int, results: Any) -> None:
    import copy

    deepspeed = _join(rank, args, port)
    from tokembed.migrate import NewRows, RowMap, migrate_model, migrate_zero3

    world = args.tp
    rows = RowMap(
        old_rows=args.vocab,
        new_rows=args.vocab + args.growth,
        source=(*range(args.vocab), *([-1] * args.growth)),
    )
    config = {
        "train_micro_batch_size_per_gpu": args.batch // world,
        "gradient_clipping": 0.0,
        # The default reduce bucket (5e8 fp32 elements, 2 GB) is allocated by each engine.
        "zero_optimization": {
            "stage": 3,
            "stage3_param_persistence_threshold": 0,
            "reduce_bucket_size": 2**24,
        },
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 10**9,
    }
    opt = functools.partial(torch.optim.AdamW, lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, args.vocab, (args.batch, args.seq), generator=gen)
    model = _model(args)
    peer = copy.deepcopy(model)
    engine, *_ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), optimizer=opt, config=config
    )
    before = [_timed_step(engine, ids, rank, world) for _ in range(args.repeats + 1)][1:]
    head = engine.module.lm_head.weight
    head_before = head.ds_tensor.numel() * head.ds_tensor.element_size()
    dist.barrier()
    start = time.perf_counter()
    grown, _ = migrate_zero3(
        engine, rows, model=_model(args), config=config, optimizer=opt, init=NewRows()
    )
    dist.barrier()
    ours = time.perf_counter() - start
    head = grown.module.lm_head.weight
    head_after = head.ds_tensor.numel() * head.ds_tensor.element_size()
    new_ids = torch.randint(0, args.vocab + args.growth, (args.batch, args.seq), generator=gen)
    after = [_timed_step(grown, new_ids, rank, world) for _ in range(args.repeats + 1)][1:]
    # The part of ours no migration avoids: building an engine of the grown size.
    fresh = _model(argparse.Namespace(**{**vars(args), "vocab": args.vocab + args.growth}))
    dist.barrier()
    start = time.perf_counter()
    deepspeed.initialize(
        model=fresh, model_parameters=fresh.parameters(), optimizer=opt, config=config
    )
    dist.barrier()
    build = time.perf_counter() - start
    theirs = None
    if rank == 0:  # the peer: the same migration in one process, with its AdamW state
        peer_opt = opt(peer.parameters())
        peer(input_ids=ids, labels=ids).loss.backward()
        peer_opt.step()
        start = time.perf_counter()
        migrate_model(peer, rows, init=NewRows(), optimizer=peer_opt)
        theirs = time.perf_counter() - start
    row = {
        "ours": ours,
        "peer": theirs,
        "build": build,
        "head_before": head_before,
        "head_after": head_after,
        "before": statistics.median(before),
        "after": statistics.median(after),
    }
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, row)
    if rank == 0:
        results.put(gathered)
    dist.barrier()
    dist.destroy_process_group()


def _spawn(target: Any, args: argparse.Namespace) -> Any:
    store = dist.TCPStore("127.0.0.1", 0, 1, is_master=True, wait_for_workers=False)
    port = store.port
    del store  # free the port for rank 0's own master store
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=target, args=(r, args, port, results)) for r in range(args.tp)]
    for proc in procs:
        proc.start()
    try:
        return results.get(timeout=1800)
    except queue.Empty:
        return None
    finally:
        for proc in procs:
            proc.join(timeout=60)
            if proc.is_alive():
                proc.terminate()


def _print_zero3(per_rank: list[dict[str, Any]], args: argparse.Namespace) -> None:
    first = per_rank[0]
    print(f"\nZeRO-3 vocabulary growth (data parallel over {args.tp} ranks, +{args.growth} rows)")
    print(
        f"  migrate_zero3 {first['ours'] * 1e3:.1f} ms, peer migrate_model in one process "
        f"{first['peer'] * 1e3:.1f} ms, ratio {first['ours'] / first['peer']:.2f}; "
        f"deepspeed.initialize of a fresh engine of the grown size alone {first['build'] * 1e3:.1f} ms"
    )
    for rank, row in enumerate(per_rank):
        print(
            f"  rank {rank}: head partition {row['head_before'] / _MiB:.3f} -> "
            f"{row['head_after'] / _MiB:.3f} MiB, step median {row['before'] * 1e3:.1f} -> "
            f"{row['after'] * 1e3:.1f} ms"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--tp", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--growth", type=int, default=320, help="rows added under ZeRO-3")
    parser.add_argument("--quick", action="store_true", help="a tiny model, 2 steps: a smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.vocab, args.hidden, args.layers, args.seq, args.repeats = 1001, 32, 1, 16, 2
        args.growth = 37
    import deepspeed
    import transformers

    print(load_line("start"))
    print(machine_line())
    print(
        f"torch {torch.__version__}, deepspeed {deepspeed.__version__}, "
        f"transformers {transformers.__version__}; 1 intra-op thread per rank"
    )
    print(
        f"V={args.vocab} hidden={args.hidden} layers={args.layers} ids=[{args.batch}, {args.seq}] "
        f"tp={args.tp} repeats={args.repeats} (interleaved)"
    )
    per_rank = _spawn(_worker, args)
    if per_rank is None:
        print("no result within 30 minutes")
        return 1
    for zero in (1, 2):
        print(f"\nZeRO-{zero}")
        for rank, rows in enumerate(per_rank):
            rep, ours = rows[zero, "replicated"], rows[zero, "vocab-parallel"]
            for mode, row in (("replicated", rep), ("vocab-parallel", ours)):
                print(
                    f"  rank {rank} {mode:>14} ({row['type']}): embedding "
                    f"{row['embedding'] / _MiB:8.2f} MiB, all parameters "
                    f"{row['model'] / _MiB:8.2f} MiB, step median {row['median'] * 1e3:8.1f} ms "
                    f"(min {row['min'] * 1e3:.1f})"
                )
            print(
                f"  rank {rank} ratio vocab-parallel / replicated: embedding bytes "
                f"{ours['embedding'] / rep['embedding']:.4f}, step time "
                f"{ours['median'] / rep['median']:.3f}"
            )
    zero3 = _spawn(_zero3_worker, args)
    if zero3 is None:
        print("ZeRO-3 growth: no result within 30 minutes")
        return 1
    _print_zero3(zero3, args)
    print("\n" + load_line("end"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
