"""Distributed checkpoints of a tied table with AdamW state: tokembed vs plain DCP; migration.

Part 1, at 2 and 4 gloo ranks: one tied fp32 table [V, H] (embedding and head one
Parameter) sharded by FSDP2 (``fully_shard``), with AdamW state (two [V, H]
moments and a step). Peer: ``torch.distributed.checkpoint.save`` / ``load`` of the
same state (``model.state_dict()`` plus the moments as DTensors), at its documented
usage. Ours: ``save_checkpoint(model, folder, optimizer=adam)`` and
``load_checkpoint(model, folder, optimizer=adam)``, which add the record (alias
map, address hash, layout, metadata digest), the checks before any value and the
atomic publish of the folder. Ours and the peer alternate, ``--repeats`` times;
the best time of each is printed with the ratio (target: ours <= 1.05x plain) and
each rank's peak RSS above its RSS before the operation (max over ranks).

Part 2, one process: migrating that checkpoint to V + 1% rows, sharded
(``migrate_checkpoint``: table by table from the folder, no model) vs gathered
(load the whole model and optimizer in one process, ``migrate_model``, save), each
in a fresh subprocess: wall time and peak RSS above the start.

Run: ``python benchmarks/bench_dcp.py [--rows 128000 --dim 4096] [--quick]``
(``--quick``: a [4096, 64] table, one repeat: checks that the script runs).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import load_line, machine_line


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(field)


def _reset_peak() -> int:
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM back to the current RSS
    return _status("VmRSS")


def _model(rows: int, dim: int) -> Any:
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Module()
    model.emb = nn.Embedding(rows, dim)
    model.head = nn.Linear(dim, rows, bias=False)
    model.head.weight = model.emb.weight
    return model


def _adam(model: Any) -> Any:
    import torch

    adam = torch.optim.AdamW(model.parameters(), lr=1e-3)
    p = model.emb.weight
    adam.state[p] = {
        "step": torch.tensor(7.0),
        "exp_avg": torch.full_like(p, 1e-3),
        "exp_avg_sq": torch.full_like(p, 1e-6),
    }
    return adam


def _rank(rank: int, world: int, port: int, args: Any, out: Any) -> None:
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from tokembed.checkpoint import load_checkpoint, save_checkpoint

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    model = _model(args.rows, args.dim)
    fully_shard(model, mesh=init_device_mesh("cpu", (world,)))
    adam = _adam(model)
    p = model.emb.weight  # a DTensor now; its moments are DTensors of the same placement
    root = Path(args.dir)
    results: dict[str, list[tuple[float, int]]] = {}

    def plain_state() -> dict[str, Any]:
        state = dict(model.state_dict())
        state.update({f"optimizer/{k}": v for k, v in adam.state[p].items()})
        return state

    def timed(name: str, fn: Any) -> None:
        dist.barrier()
        before = _reset_peak()
        start = time.perf_counter()
        fn()
        dist.barrier()
        results.setdefault(name, []).append(
            (time.perf_counter() - start, _status("VmHWM") - before)
        )

    for i in range(args.repeats):
        ours, plain = root / f"ours-{i}", root / f"plain-{i}"
        timed("ours save", lambda o=ours: save_checkpoint(model, o, optimizer=adam))
        timed("plain save", lambda q=plain: dcp.save(plain_state(), checkpoint_id=q))
        timed("ours load", lambda o=ours: load_checkpoint(model, o, optimizer=adam))
        timed("plain load", lambda q=plain: dcp.load(plain_state(), checkpoint_id=q))
        dist.barrier()
        if rank == 0 and i + 1 < args.repeats:
            shutil.rmtree(ours)
            shutil.rmtree(plain)
    out.put((rank, results))
    dist.destroy_process_group()


def _checkpoints(world: int, args: Any) -> dict[str, tuple[float, int]]:
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(r, world, port, args, out)) for r in range(world)]
    for proc in procs:
        proc.start()
    per_rank = [out.get(timeout=3600) for _ in procs]
    for proc in procs:
        proc.join()
    summary: dict[str, tuple[float, int]] = {}
    for name in per_rank[0][1]:
        seconds = min(max(r[1][name][i][0] for r in per_rank) for i in range(args.repeats))
        peak = max(m for r in per_rank for _, m in r[1][name])
        summary[name] = (seconds, peak)
    return summary


def _migrate_child(how: str, folder: str, out: str, rows: int, dim: int) -> None:
    import torch

    from tokembed.checkpoint import load_checkpoint, save_checkpoint
    from tokembed.migrate import RowMap, VocabRoles, migrate_checkpoint, migrate_model

    new = rows + max(1, rows // 100)
    rowmap = RowMap(old_rows=rows, new_rows=new, source=(*range(rows), *[-1] * (new - rows)))
    roles = VocabRoles(input="emb.weight", output="head.weight", tied=True)
    torch.set_num_threads(1)
    before = _reset_peak()
    start = time.perf_counter()
    if how == "sharded":
        migrate_checkpoint(folder, out, rowmap, roles=roles)
    else:
        model = _model(rows, dim)
        load_checkpoint(model, folder)
        adam = torch.optim.AdamW(model.parameters(), lr=1e-3)
        load_checkpoint(model, folder, optimizer=adam)
        migrate_model(model, rowmap, roles=roles, optimizer=adam)
        save_checkpoint(model, out, optimizer=adam, distributed=True)
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "peak_above": _status("VmHWM") - before}))


def _migration(folder: Path, args: Any) -> dict[str, dict[str, float]]:
    results = {}
    for how in ("sharded", "gathered"):
        out = folder.with_name(f"migrated-{how}")
        cmd = [sys.executable, __file__, "--child", how, str(folder), str(out)]
        cmd += [str(args.rows), str(args.dim)]
        text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        results[how] = json.loads(text.strip().splitlines()[-1])
        shutil.rmtree(out)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=128_000)
    parser.add_argument("--dim", type=int, default=4_096)
    parser.add_argument("--worlds", default="2,4")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where the folders go (default: a temp dir)")
    parser.add_argument("--quick", action="store_true", help="a [4096, 64] table, one repeat")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        how, folder, out, rows, dim = args.child
        _migrate_child(how, folder, out, int(rows), int(dim))
        return
    if args.quick:
        args.rows, args.dim, args.repeats = 4096, 64, 1
    import torch

    gib = 2**30
    table = args.rows * args.dim * 4
    print(load_line("start"))
    print(machine_line())
    print(f"torch {torch.__version__} (peer: torch.distributed.checkpoint of the same torch)")
    print(f"tied fp32 table [{args.rows:,}, {args.dim:,}] = {table / gib:.3f} GiB + AdamW "
          f"moments {2 * table / gib:.3f} GiB; FSDP2 over gloo; best of {args.repeats}")  # fmt: skip
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        last = None
        for world in (int(w) for w in args.worlds.split(",")):
            args.dir = str(Path(tmp) / f"w{world}")
            Path(args.dir).mkdir()
            summary = _checkpoints(world, args)
            print(f"\n{world} ranks   {'seconds':>9}{'peak GiB':>10}   (peak: max over ranks)")
            for name, (seconds, peak) in summary.items():
                print(f"  {name:<11}{seconds:>9.3f}{peak / gib:>10.3f}")
            for op in ("save", "load"):
                ours, plain = summary[f"ours {op}"][0], summary[f"plain {op}"][0]
                verdict = "met" if ours <= 1.05 * plain else "MISSED"
                print(f"  {op}: ours/plain = {ours / plain:.3f} (target <= 1.05: {verdict})")
            last = Path(args.dir) / f"ours-{args.repeats - 1}"
        assert last is not None
        migration = _migration(last, args)
        print("\nmigration to V + 1% rows, one process   seconds  peak GiB")
        for how, r in migration.items():
            print(f"  {how:<37}{r['seconds']:>8.3f}{r['peak_above'] / gib:>10.3f}")
        s, g = migration["sharded"], migration["gathered"]
        print(f"  sharded/gathered: time {s['seconds'] / g['seconds']:.3f}, "
              f"peak {s['peak_above'] / max(g['peak_above'], 1):.3f}")  # fmt: skip
    print(load_line("end"))


if __name__ == "__main__":
    main()
