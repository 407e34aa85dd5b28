"""Global-norm clipping without densifying: equal to clip_grad_norm_ on the dense gradient."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from conftest import data_path, pud_text

# The gloo harness lives with the parallel tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "parallel"))
from _harness import run_ranks

from tokembed.embedding.clipping import check_global_norm, clip_grad_norm_sparse_
from tokembed.errors import EmbeddingError, UsageError

# Worked trace: V=8, d=3, uncoalesced rows [1,4,1,4,6,1,4] -> coalesced [[5,3,2],[6,3,1],[0,1,3]].
ROWS = torch.tensor([1, 4, 1, 4, 6, 1, 4])
VALUES = torch.tensor(
    [[1, 0, 1], [0, 2, 0], [3, 1, 0], [2, 0, 1], [0, 1, 3], [1, 2, 1], [4, 1, 0]],
    dtype=torch.float32,
)


def _sparse() -> torch.Tensor:
    return torch.sparse_coo_tensor(ROWS.unsqueeze(0), VALUES, (8, 3), check_invariants=True)


def test_spec_trace_coalesces_before_squaring() -> None:
    dense = _sparse().to_dense()
    assert dense[[1, 4, 6]].tolist() == [[5, 3, 2], [6, 3, 1], [0, 1, 3]]
    w = nn.Parameter(torch.zeros(8, 3))
    w.grad = _sparse()
    norm = clip_grad_norm_sparse_([w], 1e9)
    # 25+9+4 + 36+9+1 + 0+1+9 = 94, not the 47 of the uncoalesced rows squared.
    assert float(norm) == pytest.approx(94**0.5)
    assert w.grad.layout == torch.sparse_coo
    assert w.grad.is_coalesced()


@pytest.mark.parametrize("max_norm", [0.5, 3.0, 100.0])
def test_sparse_and_dense_mix_equals_torch_on_densified(max_norm: float) -> None:
    torch.manual_seed(0)
    emb = nn.Embedding(50, 6, sparse=True)
    head = nn.Linear(6, 5)
    ids = torch.randint(0, 50, (4, 9))
    head(emb(ids)).pow(2).sum().backward()
    assert emb.weight.grad is not None
    assert emb.weight.grad.layout == torch.sparse_coo
    dense_copy = [emb.weight.grad.to_dense(), head.weight.grad.clone(), head.bias.grad.clone()]
    peers = [nn.Parameter(torch.zeros_like(g)) for g in dense_copy]
    for p, g in zip(peers, dense_copy, strict=True):
        p.grad = g
    want = nn.utils.clip_grad_norm_(peers, max_norm)
    got = clip_grad_norm_sparse_([emb.weight, *head.parameters()], max_norm)
    torch.testing.assert_close(got, want)
    assert emb.weight.grad.layout == torch.sparse_coo  # never densified
    torch.testing.assert_close(emb.weight.grad.to_dense(), peers[0].grad)
    torch.testing.assert_close(head.weight.grad, peers[1].grad)


def test_invalid_max_norm() -> None:
    with pytest.raises(UsageError) as e:
        clip_grad_norm_sparse_([], 0.0)
    assert e.value.code == "INVALID_ARGUMENT"


def _rank(rank: int, world: int, store: str, out: str, full: torch.Tensor) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        lo, hi = rank * 4, min((rank + 1) * 4, full.shape[0])  # rows [0,4) and [4,7)
        results = {}
        for layout in ("dense", "sparse"):
            w = nn.Parameter(torch.zeros(hi - lo, full.shape[1]))
            local = full[lo:hi].clone()
            w.grad = local.to_sparse() if layout == "sparse" else local
            norm = clip_grad_norm_sparse_([w], 1.0, group=dist.group.WORLD)
            assert w.grad.layout == (torch.sparse_coo if layout == "sparse" else torch.strided)
            results[layout] = {"norm": norm, "grad": w.grad.to_dense()}
        torch.save(results, f"{out}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.distributed
def test_row_sharded_clipping_on_two_gloo_ranks(tmp_path: Path) -> None:
    torch.manual_seed(1)
    full = torch.randn(7, 3)
    full[2] = 0  # an untouched row
    mp.spawn(_rank, args=(2, str(tmp_path / "store"), str(tmp_path), full), nprocs=2)
    peer = nn.Parameter(torch.zeros(7, 3))
    peer.grad = full.clone()
    want = nn.utils.clip_grad_norm_([peer], 1.0)
    parts = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    for layout in ("dense", "sparse"):
        for part in parts:
            torch.testing.assert_close(part[layout]["norm"], want)
        torch.testing.assert_close(torch.cat([p[layout]["grad"] for p in parts]), peer.grad)
    # Local clipping would have clipped each shard by its own norm (both exceed 1).
    local_norms = [float(full[:4].norm()), float(full[4:].norm())]
    assert all(n > 1.0 for n in local_norms)


def test_real_token_ids_sparse_clip_equals_dense_peer() -> None:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(data_path("tokenizers", "smollm2-135m", "tokenizer.json")))
    ids = torch.tensor(tok.encode(pud_text("de")[:8_000]).ids)
    torch.manual_seed(0)
    emb = nn.Embedding(49_152, 8, sparse=True)
    upstream = torch.randn(ids.numel(), 8)
    (emb(ids) * upstream).sum().backward()
    assert emb.weight.grad is not None
    peer = nn.Parameter(torch.zeros(49_152, 8))
    peer.grad = emb.weight.grad.to_dense()
    want = nn.utils.clip_grad_norm_([peer], 1.0)
    got = clip_grad_norm_sparse_([emb.weight], 1.0)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(emb.weight.grad.to_dense(), peer.grad)
    assert emb.weight.grad.values().shape[0] == ids.unique().numel()


def _clip_then_check(rank: int, world: int, full: torch.Tensor, mode: str) -> object:
    lo, hi = rank * 4, min((rank + 1) * 4, full.shape[0])
    w = nn.Parameter(torch.zeros(hi - lo, full.shape[1]))
    w.grad = full[lo:hi].clone()
    if mode == "local":
        nn.utils.clip_grad_norm_([w], 1.0)  # each owner clips by its own norm
    else:
        clip_grad_norm_sparse_([w], 1.0, group=dist.group.WORLD)
    try:
        return check_global_norm([w], 1.0, group=dist.group.WORLD)
    except EmbeddingError as e:
        return (e.code, e.value)


@pytest.mark.failure_lab("5.5")
@pytest.mark.distributed
def test_local_clipping_is_not_global_clipping() -> None:
    """Local clipping is called global clipping.

    Two row shards each clipped to norm 1 by clip_grad_norm_ leave a global norm near sqrt(2).
    """
    torch.manual_seed(1)
    full = torch.randn(7, 3) * 3  # both shards' norms exceed 1
    local = run_ranks(_clip_then_check, 2, full, "local")
    codes = {r[0] for r in local}  # type: ignore[index]
    assert codes == {"CLIP_NOT_GLOBAL"}
    # Each shard keeps norm n / (n + 1e-6) after torch's clip; float32 scaling rounds each
    # value once, so the norm is within a few eps32 of the float64 figure.
    shards = [float(full[:4].double().norm()), float(full[4:].double().norm())]
    want = sum((n / (n + 1e-6)) ** 2 for n in shards) ** 0.5
    eps32 = torch.finfo(torch.float32).eps
    assert local[0][1] == pytest.approx(want, rel=4 * eps32, abs=0)  # type: ignore[index]
    assert want > 1.4
    clipped = run_ranks(_clip_then_check, 2, full, "global")
    assert clipped[0] == clipped[1] <= 1.0 * (1 + torch.finfo(torch.float32).eps)
    with pytest.raises(UsageError):
        check_global_norm([], 0.0)
