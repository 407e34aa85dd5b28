"""SummedEmbedding (BERT-style) equals Hugging Face BertEmbeddings and the oracle sum."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import assert_within, rounding_bound
from tokembed.embedding import oracles as O
from tokembed.embedding.variants.summed import SummedEmbedding
from tokembed.errors import EmbeddingError


def test_equals_huggingface_bert_embeddings() -> None:
    from transformers import BertConfig
    from transformers.models.bert.modeling_bert import BertEmbeddings

    torch.manual_seed(0)
    config = BertConfig(vocab_size=30, hidden_size=8, max_position_embeddings=16, type_vocab_size=2)
    peer = BertEmbeddings(config).eval()
    ours = SummedEmbedding(30, 8, type_count=2, max_positions=16, padding_idx=0).eval()
    ours.load_state_dict(peer.state_dict())  # key for key, strict
    ids = torch.tensor([[5, 6, 7, 0], [9, 2, 0, 0]])
    types = torch.tensor([[0, 0, 1, 1], [0, 1, 1, 1]])
    torch.testing.assert_close(ours(ids, token_type_ids=types), peer(ids, token_type_ids=types))
    torch.testing.assert_close(ours(ids), peer(ids))


def test_sum_is_three_gathers_before_layernorm() -> None:
    module = SummedEmbedding(10, 4, type_count=2, max_positions=6, dropout=0.0).double().eval()
    nn_norm = module.LayerNorm
    ids = np.array([[3, 1, 4], [1, 5, 9]])
    types = np.array([[0, 0, 1], [1, 1, 1]])
    positions = np.array([[0, 1, 2], [0, 1, 2]])
    total = (
        O.gather(module.word_embeddings.weight.detach().numpy(), ids)
        + O.gather(module.token_type_embeddings.weight.detach().numpy(), types)
        + O.gather(module.position_embeddings.weight.detach().numpy(), positions)
    )
    mean = total.mean(-1, keepdims=True)
    var = total.var(-1, keepdims=True)
    expected = (total - mean) / np.sqrt(var + nn_norm.eps)  # LayerNorm weight 1, bias 0
    out = module(torch.tensor(ids), token_type_ids=torch.tensor(types))
    # Three-term sums, a mean and a variance over 4 columns, a square root and a
    # division: about 3 + 2 * 4 + 2 roundings of values a few units in size.
    size = float(np.abs(total).max() + np.abs(expected).max())
    assert_within(out, expected, rounding_bound(np.float64, terms=3 + 2 * 4 + 2, magnitude=size))


def test_each_address_space_checks_its_own_range() -> None:
    module = SummedEmbedding(10, 4, type_count=2, max_positions=3)
    with pytest.raises(EmbeddingError) as e:
        module(torch.tensor([[1, 2, 3, 4]]))  # 4 positions, table has 3
    assert e.value.code == "ID_OUT_OF_RANGE"
    assert "position_ids[0, 3] = 3" in str(e.value)
    with pytest.raises(EmbeddingError) as e:
        module(torch.tensor([[1, 2]]), token_type_ids=torch.tensor([[0, 2]]))
    assert "token_type_ids[0, 1] = 2" in str(e.value)
    with pytest.raises(EmbeddingError) as e:
        module(torch.tensor([[1, 2]]), token_type_ids=torch.tensor([0, 1]))
    assert e.value.code == "SHAPE_MISMATCH"
