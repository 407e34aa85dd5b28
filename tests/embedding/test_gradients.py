"""Gradient admission by optimizer and layout, PAD-row guard, embedding param groups."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tokembed.embedding.gradients import admit_gradient, embedding_param_groups, guard_padding_row
from tokembed.embedding.lookup_config import check_sparse_options
from tokembed.errors import EmbeddingError, UsageError

IDS = torch.tensor([[1, 4, 1, 0], [4, 6, 1, 4]])


def _backward(emb: nn.Embedding, *, tied: bool = False) -> None:
    x = emb(IDS)  # [2, 4, d]
    loss = x.pow(2).sum()
    if tied:
        loss = loss + torch.log_softmax(x @ emb.weight.T, dim=-1).sum()
    loss.backward()


def _emb(sparse: bool) -> nn.Embedding:
    torch.manual_seed(0)
    return nn.Embedding(8, 3, sparse=sparse)


@pytest.mark.parametrize(
    ("cls", "kwargs"),
    [
        (torch.optim.SGD, {}),
        (torch.optim.SGD, {"momentum": 0.9}),
        (torch.optim.SparseAdam, {}),
        (torch.optim.Adagrad, {}),
    ],
)
def test_sparse_gradient_admitted_and_the_step_runs(cls: type, kwargs: dict[str, float]) -> None:
    emb = _emb(sparse=True)
    opt = cls(emb.parameters(), lr=0.1, **kwargs)
    _backward(emb)
    adm = admit_gradient(emb, opt)
    assert (adm.layout, adm.coalesced, adm.touched_rows) == ("sparse", False, 4)
    assert adm.optimizer == cls.__name__
    opt.step()  # torch agrees


@pytest.mark.parametrize("cls", [torch.optim.Adam, torch.optim.AdamW, torch.optim.RMSprop])
def test_sparse_gradient_refused_by_dense_optimizers_as_torch_does(cls: type) -> None:
    emb = _emb(sparse=True)
    opt = cls(emb.parameters(), lr=0.1)
    _backward(emb)
    with pytest.raises(EmbeddingError) as e:
        admit_gradient(emb, opt)
    assert e.value.code == "GRADIENT_LAYOUT_MISMATCH"
    with pytest.raises(RuntimeError, match="sparse"):
        opt.step()


@pytest.mark.failure_lab("5.4")
@pytest.mark.parametrize("cls", [torch.optim.SGD, torch.optim.Adagrad])
def test_sparse_gradient_with_weight_decay_is_refused(cls: type) -> None:
    """Optimizer name is treated as a complete sparse contract."""
    emb = _emb(sparse=True)
    opt = cls(emb.parameters(), lr=0.1, weight_decay=0.01)
    _backward(emb)
    with pytest.raises(EmbeddingError) as e:
        admit_gradient(emb, opt)
    assert e.value.code == "GRADIENT_LAYOUT_MISMATCH"
    with pytest.raises(RuntimeError):
        opt.step()


def test_dense_gradient_to_sparse_only_optimizer() -> None:
    emb = _emb(sparse=False)
    opt = torch.optim.SparseAdam(emb.parameters())
    _backward(emb)
    with pytest.raises(EmbeddingError) as e:
        admit_gradient(emb, opt)
    assert e.value.code == "GRADIENT_LAYOUT_MISMATCH"
    with pytest.raises(RuntimeError, match="dense"):
        opt.step()


def test_dense_gradient_admitted_by_adamw() -> None:
    emb = _emb(sparse=False)
    opt = torch.optim.AdamW(emb.parameters())
    _backward(emb)
    adm = admit_gradient(emb, opt)
    assert (adm.layout, adm.touched_rows, adm.dtype) == ("dense", 8, torch.float32)


@pytest.mark.failure_lab("5.6")
def test_tied_output_path_makes_the_gradient_dense() -> None:
    """Tied output gradient is dropped to preserve input sparsity."""
    emb = _emb(sparse=True)
    opt = torch.optim.SparseAdam(emb.parameters())
    # Declared tie: refused before anything else.
    with pytest.raises(EmbeddingError) as e:
        admit_gradient(emb, opt, tied=True)
    assert e.value.code == "TIED_DENSE_UNDER_SPARSE"
    # Undeclared tie: the observed gradient is dense although the lookup is sparse.
    _backward(emb, tied=True)
    assert emb.weight.grad is not None
    assert emb.weight.grad.layout == torch.strided
    assert torch.count_nonzero(emb.weight.grad.abs().sum(dim=1)) == 8  # every row, not 4
    with pytest.raises(EmbeddingError) as e:
        admit_gradient(emb, opt)
    assert e.value.code == "TIED_DENSE_UNDER_SPARSE"
    # SGD takes the dense sum, unless the run declared a sparse-only contract.
    sgd = torch.optim.SGD(emb.parameters(), lr=0.1)
    assert admit_gradient(emb, sgd, tied=True).layout == "dense"
    with pytest.raises(EmbeddingError) as e:
        admit_gradient(emb, sgd, tied=True, sparse_only=True)
    assert e.value.code == "TIED_DENSE_UNDER_SPARSE"


def test_sparse_with_frequency_scaling_is_refused_before_backward() -> None:
    with pytest.raises(EmbeddingError) as e:
        check_sparse_options(sparse=True, scale_grad_by_freq=True)
    assert e.value.code == "SPARSE_WITH_FREQ_SCALING"
    check_sparse_options(sparse=False, scale_grad_by_freq=True)
    emb = nn.Embedding(8, 3, sparse=True, scale_grad_by_freq=True)
    with pytest.raises(EmbeddingError) as e:
        admit_gradient(emb, torch.optim.SGD(emb.parameters(), lr=0.1))
    assert e.value.code == "SPARSE_WITH_FREQ_SCALING"
    with pytest.raises(RuntimeError):  # torch's own sparse backward refuses the pair
        emb(IDS).sum().backward()


@pytest.mark.failure_lab("5.3")
def test_uncoalesced_missing_and_unregistered() -> None:
    """Sparse layout is confused with sparse values."""
    emb = _emb(sparse=True)
    opt = torch.optim.SGD(emb.parameters(), lr=0.1)
    with pytest.raises(EmbeddingError) as e:
        admit_gradient(emb, opt)
    assert e.value.code == "MISSING_GRADIENT"
    _backward(emb)
    with pytest.raises(EmbeddingError) as e:
        admit_gradient(emb, opt, require_coalesced=True)
    assert e.value.code == "UNCOALESCED_GRADIENT"
    assert emb.weight.grad is not None
    emb.weight.grad = emb.weight.grad.coalesce()
    assert admit_gradient(emb, opt, require_coalesced=True).coalesced
    other = torch.optim.SGD([nn.Parameter(torch.zeros(2))], lr=0.1)
    with pytest.raises(UsageError) as u:
        admit_gradient(emb, other)
    assert u.value.code == "INVALID_ARGUMENT"


@pytest.mark.parametrize("sparse", [False, True])
def test_pad_guard_keeps_a_nonzero_pad_row_fixed_under_adamw_decay(sparse: bool) -> None:
    torch.manual_seed(0)
    emb = nn.Embedding(8, 3, sparse=sparse)
    pad_before = emb.weight.detach()[0].clone()
    assert torch.count_nonzero(pad_before) == 3
    cls = torch.optim.SGD if sparse else torch.optim.AdamW
    kwargs = {"lr": 0.1} if sparse else {"lr": 0.1, "weight_decay": 0.5}
    opt = cls(emb.parameters(), **kwargs)
    guard = guard_padding_row(emb.weight, 0, optimizer=opt)
    for _ in range(3):
        opt.zero_grad()
        _backward(emb, tied=not sparse)  # PAD id 0 occurs in IDS; tied path also reaches row 0
        grad = emb.weight.grad
        assert grad is not None
        assert torch.count_nonzero(grad.to_dense()[0]) == 0
        opt.step()
    assert torch.equal(emb.weight.detach()[0], pad_before)
    assert not torch.equal(emb.weight.detach()[1], torch.zeros(3))
    guard.remove()
    opt.zero_grad()
    _backward(emb, tied=not sparse)
    opt.step()
    assert not torch.equal(emb.weight.detach()[0], pad_before)


def test_pad_guard_zero_and_invalid_pad() -> None:
    emb = _emb(sparse=False)
    guard_padding_row(emb.weight, 7, zero=True)
    assert torch.count_nonzero(emb.weight[7]) == 0
    for bad in (-1, 8):
        with pytest.raises(EmbeddingError) as e:
            guard_padding_row(emb.weight, bad)
        assert e.value.code == "PAD_ID_INVALID"


class _Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.block = nn.Linear(4, 4)
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight  # tying: one Parameter, two roles


def test_param_groups_register_the_tied_table_once() -> None:
    model = _Tied()
    groups = embedding_param_groups(
        model,
        [model.embed.weight, model.head.weight],
        lr=1e-3,
        weight_decay=0.1,
        table_lr=1e-2,
        table_weight_decay=0.0,
    )
    table, rest = groups
    assert table["params"] == [model.embed.weight]
    assert (table["lr"], table["weight_decay"]) == (1e-2, 0.0)
    assert {id(p) for p in rest["params"]} == {id(model.block.weight), id(model.block.bias)}
    opt = torch.optim.AdamW(groups)  # torch refuses a parameter registered twice
    assert sum(len(g["params"]) for g in opt.param_groups) == 3
    with pytest.raises(UsageError) as e:
        embedding_param_groups(
            model,
            [nn.Parameter(torch.zeros(1))],
            lr=1.0,
            weight_decay=0.0,
            table_lr=1.0,
            table_weight_decay=0.0,
        )
    assert e.value.code == "INVALID_ARGUMENT"


def test_admission_reads_token_embedding_policy() -> None:
    from tokembed.embedding.lookup import TokenEmbedding

    torch.manual_seed(0)
    emb = TokenEmbedding(8, 3, sparse=True, padding_idx=0)
    opt = torch.optim.SparseAdam(emb.parameters())
    guard_padding_row(emb.weight, 0, optimizer=opt)
    emb(IDS).pow(2).sum().backward()
    adm = admit_gradient(emb, opt)
    assert (adm.layout, adm.touched_rows) == ("sparse", 3)  # rows 1, 4, 6; PAD 0 left out
    opt.step()
    with pytest.raises(EmbeddingError) as e:
        admit_gradient(emb, torch.optim.Adam(emb.parameters()))
    assert e.value.code == "GRADIENT_LAYOUT_MISMATCH"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_adagrad_sparse_on_cuda_is_not_admitted() -> None:
    emb = nn.Embedding(8, 3, sparse=True, device="cuda")
    emb(IDS.cuda()).sum().backward()
    with pytest.raises(EmbeddingError) as e:
        admit_gradient(emb, torch.optim.Adagrad(emb.parameters()))
    assert e.value.code == "GRADIENT_LAYOUT_MISMATCH"
    assert admit_gradient(emb, torch.optim.SparseAdam(emb.parameters())).layout == "sparse"
