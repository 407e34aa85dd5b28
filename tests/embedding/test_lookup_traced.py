"""The lookup's checks survive tracing: torch.compile(fullgraph=True) and torch.export keep
them as tensor asserts (no host read, no graph break), torch.jit.trace checks its example and
warns, vmap, meta and fake tensors run without the checks that need values, and
checks="async"/"off" switch them."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

from tokembed.embedding.lookup import TokenEmbedding
from tokembed.embedding.variants.bag import TokenEmbeddingBag

GOOD = torch.tensor([[1, 0, 4], [2, 3, 3]])
BAD = torch.tensor([[1, 0, 4], [2, 5, 3]])  # 5 is outside a 5-row table


def _table(**policy: object) -> TokenEmbedding:
    torch.manual_seed(0)
    return TokenEmbedding(5, 3, padding_idx=0, **policy)  # type: ignore[arg-type]


def test_compile_fullgraph_keeps_range_and_pad_row_checks() -> None:
    emb = _table(zero_pad_row=True)
    torch._dynamo.reset()
    compiled = torch.compile(emb, fullgraph=True, backend="aot_eager")
    out = compiled(GOOD)
    assert torch.equal(out, F.embedding(GOOD, emb.weight, 0))
    out.sum().backward()
    assert emb.weight.grad is not None
    assert torch.equal(emb.weight.grad[0], torch.zeros(3))
    with pytest.raises(RuntimeError, match="ID_OUT_OF_RANGE"):
        compiled(BAD)
    with pytest.raises(RuntimeError, match="ID_OUT_OF_RANGE"):
        compiled(torch.tensor([[1, -1, 2], [0, 0, 0]]))
    with torch.no_grad():
        emb.weight[0] = 1.0
    with pytest.raises(RuntimeError, match="PAD_ROW_NOT_ZERO"):
        compiled(GOOD)


def test_export_graph_holds_the_assert_and_enforces_it() -> None:
    emb = _table(one_hot_guard=True)
    program = torch.export.export(emb, (GOOD,))
    targets = {str(n.target) for n in program.graph.nodes if n.op == "call_function"}
    assert "aten._assert_async.msg" in targets
    module = program.module()
    assert torch.equal(module(GOOD), emb(GOOD))
    with pytest.raises(RuntimeError, match="ID_OUT_OF_RANGE"):
        module(BAD)


def test_jit_trace_warns_that_its_graph_cannot_hold_the_checks() -> None:
    # TorchScript's tracer drops aten::_assert_async, so the checks would vanish
    # silently: the example is checked and a TracerWarning names what is lost.
    emb = _table()
    with pytest.warns(torch.jit.TracerWarning, match="does not record tokembed's value checks"):
        traced = torch.jit.trace(emb, (GOOD,))
    assert torch.equal(traced(GOOD), emb(GOOD))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        with pytest.raises(IndexError, match="ID_OUT_OF_RANGE"):
            torch.jit.trace(emb, (BAD,))


def test_vmap_meta_and_fake_tensors_run_without_value_checks() -> None:
    emb = _table()
    batched = torch.vmap(emb)(GOOD)
    assert torch.equal(batched, emb(GOOD))
    meta = TokenEmbedding(7, 2, padding_idx=-1, device="meta")
    assert meta(torch.zeros(2, 4, dtype=torch.long, device="meta")).shape == (2, 4, 2)
    with FakeTensorMode() as mode:
        fake_emb = TokenEmbedding(9, 4, zero_pad_row=True, padding_idx=1)
        ids = mode.from_tensor(GOOD)
        assert fake_emb(ids).shape == (2, 3, 4)


def test_check_modes_async_and_off() -> None:
    with pytest.raises(RuntimeError, match="ID_OUT_OF_RANGE"):
        _table(checks="async")(BAD)  # an assert, no host read in eager mode either
    off = _table(checks="off")
    with pytest.raises(IndexError):  # the gather's own bounds check, as nn.Embedding
        off(BAD)
    with pytest.raises(RuntimeError) as e:  # the dtype check needs no values: always on
        off(BAD.float())
    assert getattr(e.value, "code", None) == "INDEX_DTYPE_MISMATCH"


def test_bag_compiles_fullgraph_with_offset_and_range_checks() -> None:
    torch.manual_seed(0)
    bag = TokenEmbeddingBag(5, 3, mode="sum")
    torch._dynamo.reset()
    compiled = torch.compile(bag, fullgraph=True, backend="aot_eager")
    ids, offsets = torch.tensor([1, 2, 4, 0]), torch.tensor([0, 1, 3])
    assert torch.equal(compiled(ids, offsets), bag(ids, offsets))
    with pytest.raises(RuntimeError, match="INVALID_BAG_OFFSETS"):
        compiled(ids, torch.tensor([0, 3, 1]))
    with pytest.raises(RuntimeError, match="ID_OUT_OF_RANGE"):
        compiled(torch.tensor([1, 2, 5, 0]), offsets)
