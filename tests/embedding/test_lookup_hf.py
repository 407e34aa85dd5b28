"""TokenEmbedding swapped into a transformers LlamaForCausalLM (built from a small config):
resize_token_embeddings, generate, torch.compile(fullgraph=True) and torch.export all work,
give the same numbers as the stock model, and keep the table's checks."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tokembed.embedding.lookup import TokenEmbedding

transformers = pytest.importorskip("transformers")

V, GROWN = 64, 80


def _models() -> tuple[Any, Any]:
    config = transformers.LlamaConfig(
        vocab_size=V,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=32,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    stock = transformers.LlamaForCausalLM(config).eval()
    ours = transformers.LlamaForCausalLM(config).eval()
    ours.load_state_dict(stock.state_dict())
    ours.set_input_embeddings(TokenEmbedding.from_embedding(ours.get_input_embeddings()))
    return stock, ours


def _ids(high: int) -> torch.Tensor:
    return torch.randint(1, high, (2, 7), generator=torch.Generator().manual_seed(1))


def test_resize_and_generate_match_the_stock_model() -> None:
    stock, ours = _models()
    assert ours.get_input_embeddings().padding_idx == 0
    for model in (stock, ours):
        model.resize_token_embeddings(GROWN)
    table = ours.get_input_embeddings()
    assert isinstance(table, TokenEmbedding)
    assert tuple(table.weight.shape) == (GROWN, 16)
    assert table.num_embeddings == GROWN
    ours.load_state_dict(stock.state_dict())  # the same new rows (their init is random)
    ids = _ids(GROWN)
    assert int(ids.max()) >= V  # a grown row is addressed
    with torch.no_grad():
        assert torch.equal(ours(ids).logits, stock(ids).logits)
    kwargs = {"max_new_tokens": 3, "do_sample": False, "pad_token_id": 0}
    assert torch.equal(ours.generate(ids, **kwargs), stock.generate(ids, **kwargs))
    with pytest.raises(IndexError) as e:  # the table's check, named as torch names it
        ours(torch.tensor([[1, GROWN]]))
    assert getattr(e.value, "code", None) == "ID_OUT_OF_RANGE"


def test_compile_fullgraph_and_export_keep_the_check() -> None:
    stock, ours = _models()
    ids = _ids(V)
    with torch.no_grad():
        want = stock(ids, use_cache=False).logits
        torch._dynamo.reset()
        compiled = torch.compile(ours, fullgraph=True, backend="aot_eager")
        assert torch.equal(compiled(ids, use_cache=False).logits, want)
        with pytest.raises(RuntimeError, match="ID_OUT_OF_RANGE"):
            compiled(torch.tensor([[1, V] * 3 + [2]]), use_cache=False)
        program = torch.export.export(ours, (ids,), kwargs={"use_cache": False})
        targets = {str(n.target) for n in program.graph.nodes if n.op == "call_function"}
        assert "aten._assert_async.msg" in targets
        exported = program.module()
        assert torch.equal(exported(ids, use_cache=False).logits, want)
        with pytest.raises(RuntimeError, match="ID_OUT_OF_RANGE"):
            exported(torch.tensor([[1, V] * 3 + [2]] * 2), use_cache=False)
