"""PyTorch's own samples for nn.Embedding / nn.EmbeddingBag, run through our classes.

The ModuleInfo samples (``torch.testing._internal.common_modules.module_db``) and the OpInfo
samples of ``nn.functional.embedding`` / ``nn.functional.embedding_bag``
(``common_methods_invocations.op_db``, their reference inputs where defined) are replayed on
TokenEmbedding / TokenEmbeddingBag and on torch's own op with the same weights: outputs,
weights after the call (max_norm renormalizes in place) and gradients must be identical.
Nothing is expected to differ: every sample is a valid lookup.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tokembed.embedding.lookup import TokenEmbedding
from tokembed.embedding.variants.bag import TokenEmbeddingBag

pytest.importorskip("expecttest", reason="torch.testing._internal imports expecttest")
common_modules = pytest.importorskip("torch.testing._internal.common_modules")
common_methods = pytest.importorskip("torch.testing._internal.common_methods_invocations")

DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _op(name: str) -> Any:
    return next(op for op in common_methods.op_db if op.name == name)


def _op_samples(name: str, dtype: torch.dtype) -> Iterator[Any]:
    op = _op(name)
    samples = getattr(op, "reference_inputs", None) or op.sample_inputs
    yield from samples("cpu", dtype, requires_grad=True)


def _grads_equal(ours: torch.Tensor, ref: torch.Tensor) -> None:
    assert ours.grad is not None
    assert ref.grad is not None
    assert ours.grad.is_sparse == ref.grad.is_sparse
    assert torch.equal(ours.grad.to_dense(), ref.grad.to_dense())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_module_db_samples(dtype: torch.dtype) -> None:
    info = next(m for m in common_modules.module_db if m.name == "nn.Embedding")
    samples = info.module_inputs_func(
        info, device="cpu", dtype=dtype, requires_grad=True, training=True
    )
    assert samples
    for sample in samples:
        ctor, fwd = sample.constructor_input, sample.forward_input
        torch.manual_seed(0)
        ref = nn.Embedding(*ctor.args, **ctor.kwargs, dtype=dtype)
        torch.manual_seed(0)
        ours = TokenEmbedding(*ctor.args, **ctor.kwargs, dtype=dtype)
        got, want = ours(*fwd.args, **fwd.kwargs), ref(*fwd.args, **fwd.kwargs)
        assert torch.equal(got, want)
        got.sum().backward()
        want.sum().backward()
        _grads_equal(ours.weight, ref.weight)


@pytest.mark.parametrize("dtype", DTYPES)
def test_op_db_embedding_samples(dtype: torch.dtype) -> None:
    count = 0
    for sample in _op_samples("nn.functional.embedding", dtype):
        (ids,), kwargs = sample.args, dict(sample.kwargs)
        ref_w = sample.input.detach().clone().requires_grad_()
        ours = TokenEmbedding.from_pretrained(sample.input.detach().clone(), freeze=False, **kwargs)
        got, want = ours(ids), F.embedding(ids, ref_w, **kwargs)
        assert torch.equal(got, want)
        assert torch.equal(ours.weight.detach(), ref_w.detach())
        got.sum().backward()
        want.sum().backward()
        _grads_equal(ours.weight, ref_w)
        count += 1
    assert count >= 3


@pytest.mark.parametrize("dtype", DTYPES)
def test_op_db_embedding_bag_samples(dtype: torch.dtype) -> None:
    count = 0
    for sample in _op_samples("nn.functional.embedding_bag", dtype):
        (ids,), kwargs = sample.args, dict(sample.kwargs)
        offsets = kwargs.pop("offsets", None)
        weights = kwargs.pop("per_sample_weights", None)
        ref_w = sample.input.detach().clone().requires_grad_()
        ours = TokenEmbeddingBag.from_pretrained(
            sample.input.detach().clone(), freeze=False, **kwargs
        )
        ours_psw = None if weights is None else weights.detach().clone().requires_grad_()
        ref_psw = None if weights is None else weights.detach().clone().requires_grad_()
        got = ours(ids, offsets, ours_psw)
        want = F.embedding_bag(ids, ref_w, offsets, per_sample_weights=ref_psw, **kwargs)
        assert torch.equal(got, want)
        assert torch.equal(ours.weight.detach(), ref_w.detach())
        got.sum().backward()
        want.sum().backward()
        _grads_equal(ours.weight, ref_w)
        if ours_psw is not None and ref_psw is not None:
            _grads_equal(ours_psw, ref_psw)
        count += 1
    assert count >= 10
