"""A port of the nn.Embedding part of PyTorch's test/nn/test_embedding.py, class swapped:
each case below re-checks, in our own code, what the upstream case of the same name
checks, on TokenEmbedding instead of nn.Embedding. CUDA-only and functional-only upstream
cases are not ported; the cases whose outcome differs on purpose are listed in
docs/embedding.md and tested at the end. The nn.EmbeddingBag part is
tests/embedding/variants/test_bag_torch_port.py.
"""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

from tokembed.embedding.lookup import TokenEmbedding as Embedding

IDS = torch.tensor([[0, 2, 4, 5], [4, 3, 0, 9]])


def test_embedding_sparse_basic() -> None:
    emb = Embedding(10, 20, sparse=True)
    emb(IDS).sum().backward()
    assert emb.weight.grad is not None
    assert emb.weight.grad.is_sparse
    assert emb.weight.grad.shape == emb.weight.shape


@pytest.mark.parametrize(("rows", "cols", "ids"), [(0, 0, torch.tensor([])), (10, 0, IDS)])
def test_embedding_sparse_empty_tensor(rows: int, cols: int, ids: torch.Tensor) -> None:
    emb = Embedding(rows, cols, sparse=True)
    emb(ids.long()).sum().backward()
    assert emb.weight.grad is not None
    assert emb.weight.grad.is_sparse
    assert emb.weight.grad.shape == (rows, cols)


def test_move_sparse_half_embedding() -> None:
    emb = Embedding(10, 3, sparse=True)
    assert emb.weight.dtype == torch.get_default_dtype()
    emb.to(torch.float16)
    assert emb.weight.dtype == torch.float16
    assert (emb.num_embeddings, emb.embedding_dim) == (10, 3)


def test_embedding_max_norm() -> None:
    out = Embedding(22, 5, max_norm=1.0)(torch.tensor([2, 8, 8, 6]))
    assert torch.equal(out[1], out[2])
    assert bool(out.detach().norm(p=2, dim=1).le(1).all())


@pytest.mark.parametrize(
    "dtype",
    [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float, torch.double],
)
def test_embedding_from_pretrained(dtype: torch.dtype) -> None:
    table = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=dtype)
    emb = Embedding.from_pretrained(table)
    assert torch.equal(emb.weight.data, table)
    assert torch.equal(emb(torch.tensor([0, 1])), table)


def test_embedding_from_pretrained_padding_idx() -> None:
    table = torch.rand(4, 3)
    table[2] = 7.0
    emb = Embedding.from_pretrained(table, padding_idx=2)
    assert torch.equal(emb.weight[2], torch.full((3,), 7.0))  # the given PAD row is kept


def test_embedding_from_pretrained_options() -> None:
    table = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=torch.double)
    emb = Embedding.from_pretrained(table, max_norm=2.0, norm_type=0.5, sparse=True)
    out = emb(torch.tensor([0, 1]))
    assert torch.equal(out, table)  # the shared table was renormalized in place
    assert bool(table.ne(torch.arange(1, 7, dtype=table.dtype).view(2, 3)).all())
    assert bool(out.detach().norm(p=0.5, dim=1).le(2.0).all())


def test_embedding_functional() -> None:
    ids, table = torch.tensor([[1, 3, 2], [0, 2, 1]]), torch.rand(4, 3)
    emb = Embedding(4, 3)
    emb.weight.data = table
    assert torch.equal(emb(ids), F.embedding(ids, table))
    padded = Embedding(4, 3).from_pretrained(table, padding_idx=2)
    assert torch.equal(padded(ids), F.embedding(ids, table, padding_idx=2))


def test_embedding_backward() -> None:
    emb = Embedding(10, 3, sparse=True).double()
    ids = torch.tensor([7, 1, 3])
    emb(ids).sum().backward()
    emb(ids).sum().backward()
    assert emb.weight.grad is not None
    assert torch.equal(emb.weight.grad._indices(), ids.repeat(2).unsqueeze(0))
    assert torch.equal(emb.weight.grad._values(), torch.ones(6, 3, dtype=torch.double))


def test_embedding_max_norm_backward() -> None:
    weight = (torch.randn(4, 4) * 2).requires_grad_()
    emb = Embedding.from_pretrained(weight.detach(), freeze=False, max_norm=1.0)
    emb(torch.tensor([0, 1, 2, 2])).sum().backward()
    want = torch.tensor([[1.0, 1.0, 2.0, 0.0]]).transpose(0, 1).expand(4, 4)
    assert torch.equal(emb.weight.grad, want)  # type: ignore[arg-type]


def test_embedding_max_norm_fwd_AD() -> None:
    emb = Embedding(4, 4, max_norm=1.0)
    with torch.autograd.forward_ad.dual_level():
        dual = torch.autograd.forward_ad.make_dual(torch.randn(4, 4) * 2, torch.ones(4, 4))
        del emb.weight
        emb.weight = dual  # type: ignore[assignment]
        jvp = torch.autograd.forward_ad.unpack_dual(emb(torch.tensor([[0, 1], [2, 2]]))).tangent
    assert torch.equal(jvp, torch.ones(2, 2, 4))


@pytest.mark.parametrize("sparse", [False, True])
def test_embedding_padding_idx(sparse: bool) -> None:
    out = Embedding(10, 20, padding_idx=0, sparse=sparse)(IDS)
    assert (float(out[0][0].sum()), float(out[1][2].sum())) == (0.0, 0.0)
    neg = Embedding(10, 20, padding_idx=-2, sparse=sparse)  # row 8
    out = neg(torch.tensor([[0, 2, 8, 5], [4, 8, 0, 9]]))
    assert (float(out[0][2].sum()), float(out[1][1].sum())) == (0.0, 0.0)
    emb = Embedding(5, 2, padding_idx=0)
    for n, others in itertools.product((1, 2, 1000), ([], [1, 3], [2])):
        before = emb.weight[0].clone()
        emb(torch.tensor(others + [0] * n)).sum().backward()
        assert emb.weight.grad is not None
        assert torch.equal((emb.weight + emb.weight.grad)[0], before)
        emb.zero_grad()


# --- cases that differ on purpose (docs/embedding.md) ---------------------------------------


def test_differs_padding_idx_error_type() -> None:
    # Upstream: padding_idx outside [-V, V) is an AssertionError from the module.
    # Here: PAD_ID_INVALID, an IndexError, because assertions vanish under `python -O`.
    for pad in (-6, -5, 4, 5):
        with pytest.raises(IndexError, match="PAD_ID_INVALID"):
            Embedding(4, 3, padding_idx=pad)
    for pad in range(-4, 4):
        assert Embedding(4, 3, padding_idx=pad).padding_idx == pad % 4
