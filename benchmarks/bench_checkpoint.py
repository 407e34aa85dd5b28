"""Checkpoint save/load of a tied table with Adam state: tokembed vs safetensors vs torch.save.

The model is one tied [V, H] fp32 table (embedding and lm_head share the
Parameter) with Adam state (two [V, H] moments and a step): at the default
V=128,000, H=4,096 that is 2 GiB of weights and 4 GiB of moments. Each
(method, save|load) runs in a fresh subprocess so peak RSS belongs to that
operation alone: the child builds the model, resets its peak-RSS counter
(``/proc/self/clear_refs``), runs the operation and reports wall time and the
peak RSS above the RSS it had before (Linux ``VmHWM - VmRSS``).

Peers, each at its documented usage:

* safetensors 0.x: ``safetensors.torch.save_model`` / ``load_model`` (drops the
  duplicate tied name, re-ties by the model) plus ``save_file`` / ``load_file``
  of the Adam tensors and ``Optimizer.load_state_dict``;
* torch: ``torch.save({"model": state_dict, "optimizer": state_dict})`` and
  ``torch.load`` (weights_only) + ``load_state_dict``;
* safetensors+fsync (save only): the safetensors save followed by ``os.fsync`` of
  both files, the durability tokembed's atomic write pays for (informational).

tokembed: ``save_checkpoint(model, path, optimizer=adam)`` (written to a temp
file, fsynced, renamed: the peers do not fsync) and ``load_checkpoint(model,
path, optimizer=adam)``. Files are read back while still in the page cache for
every method. Targets: time <= 1.1x safetensors, peak <= safetensors + one table.

Run: ``python benchmarks/bench_checkpoint.py [--rows 128000 --dim 4096 --dir /tmp]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

METHODS = ("tokembed", "safetensors", "torch", "safetensors+fsync")


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024  # kB -> bytes
    raise RuntimeError(field)


def _build(rows: int, dim: int, *, with_state: bool) -> tuple[Any, Any]:
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Module()
    model.embed = nn.Embedding(rows, dim)  # [V, H] fp32
    model.lm_head = nn.Linear(dim, rows, bias=False)
    model.lm_head.weight = model.embed.weight  # the tie
    adam = torch.optim.Adam(model.parameters(), lr=1e-3)
    if with_state:
        p = model.embed.weight
        adam.state[p] = {
            "step": torch.tensor(7.0),
            "exp_avg": torch.full_like(p, 1e-3),
            "exp_avg_sq": torch.full_like(p, 1e-6),
        }
    return model, adam


def _save(method: str, model: Any, adam: Any, base: Path) -> None:
    import torch

    if method == "tokembed":
        from tokembed.checkpoint import save_checkpoint

        save_checkpoint(model, base.with_suffix(".safetensors"), optimizer=adam)
    elif method.startswith("safetensors"):
        from safetensors.torch import save_file, save_model

        files = [base.with_suffix(".model.safetensors"), base.with_suffix(".optim.safetensors")]
        save_model(model, str(files[0]))
        sd = adam.state_dict()
        flat = {f"{i}.{k}": v for i, s in sd["state"].items() for k, v in s.items()}
        meta = {"param_groups": json.dumps(sd["param_groups"])}
        save_file(flat, str(files[1]), metadata=meta)
        if method.endswith("+fsync"):
            for path in files:
                fd = os.open(path, os.O_RDONLY)
                os.fsync(fd)
                os.close(fd)
    else:
        torch.save(
            {"model": model.state_dict(), "optimizer": adam.state_dict()}, base.with_suffix(".pt")
        )


def _load(method: str, model: Any, adam: Any, base: Path) -> None:
    import torch

    if method == "tokembed":
        from tokembed.checkpoint import load_checkpoint

        load_checkpoint(model, base.with_suffix(".safetensors"), optimizer=adam)
    elif method == "safetensors":
        from safetensors import safe_open
        from safetensors.torch import load_file, load_model

        load_model(model, str(base.with_suffix(".model.safetensors")))
        path = str(base.with_suffix(".optim.safetensors"))
        with safe_open(path, "pt") as f:
            groups = json.loads(f.metadata()["param_groups"])
        state: dict[int, dict[str, Any]] = {}
        for key, value in load_file(path).items():
            index, name = key.split(".", 1)
            state.setdefault(int(index), {})[name] = value
        adam.load_state_dict({"state": state, "param_groups": groups})
    else:
        sd = torch.load(base.with_suffix(".pt"), weights_only=True)
        model.load_state_dict(sd["model"])
        adam.load_state_dict(sd["optimizer"])


def _child(method: str, op: str, base: Path, rows: int, dim: int) -> None:
    import safetensors.torch  # noqa: F401  (imports happen before the clock starts)

    import tokembed.checkpoint  # noqa: F401

    model, adam = _build(rows, dim, with_state=op == "save")
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    before = _status("VmRSS")
    start = time.perf_counter()
    (_save if op == "save" else _load)(method, model, adam, base)
    seconds = time.perf_counter() - start
    peak = _status("VmHWM")
    if op == "load":  # the loaded state must be there, tied
        assert model.lm_head.weight is model.embed.weight
        assert float(adam.state[model.embed.weight]["step"]) == 7.0
    print(json.dumps({"seconds": seconds, "peak_above": peak - before, "before": before}))


def _run(method: str, op: str, base: Path, rows: int, dim: int) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--child", method, op, str(base), str(rows), str(dim)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=128_000)
    parser.add_argument("--dim", type=int, default=4_096)
    parser.add_argument(
        "--dir", default=None, help="where the checkpoint files go (default: a temp dir)"
    )
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset")
    parser.add_argument("--ops", default="save,load", help="save, load or both")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        method, op, base, rows, dim = args.child
        _child(method, op, Path(base), int(rows), int(dim))
        return
    table = args.rows * args.dim * 4
    gib = 2**30
    print(f"tied fp32 table [{args.rows:,}, {args.dim:,}] = {table / gib:.2f} GiB, Adam moments "
          f"{2 * table / gib:.2f} GiB; fresh subprocess per operation; peak = VmHWM - VmRSS before")  # fmt: skip
    results: dict[tuple[str, str], dict[str, float]] = {}
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        ops = [op for op in ("save", "load") if op in args.ops.split(",")]
        for method in args.methods.split(","):
            base = Path(tmp) / method
            for op in ops if not method.endswith("+fsync") else ["save"]:
                results[method, op] = _run(method, op, base, args.rows, args.dim)
            for f in Path(tmp).glob(f"{method}*"):
                f.unlink()
    print(f"{'method':<18}{'op':<6}{'seconds':>9}{'peak GiB':>10}{'time/st':>9}{'peak-st GiB':>13}")
    for (method, op), r in results.items():
        st = results.get(("safetensors", op), r)
        print(
            f"{method:<18}{op:<6}{r['seconds']:>9.2f}{r['peak_above'] / gib:>10.2f}"
            f"{r['seconds'] / st['seconds']:>9.2f}{(r['peak_above'] - st['peak_above']) / gib:>13.2f}"
        )
    for op in ops:
        if ("tokembed", op) not in results or ("safetensors", op) not in results:
            continue
        ours, st = results["tokembed", op], results["safetensors", op]
        ok_t = ours["seconds"] <= 1.1 * st["seconds"]
        ok_m = ours["peak_above"] <= st["peak_above"] + table
        print(f"{op}: time target (<= 1.1x safetensors) {'met' if ok_t else 'MISSED'}, "
              f"memory target (<= safetensors + one table) {'met' if ok_m else 'MISSED'}")  # fmt: skip


if __name__ == "__main__":
    main()
