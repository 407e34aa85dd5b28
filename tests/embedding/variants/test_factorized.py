"""FactorizedEmbedding: the worked bridge trace (E[1] @ P, E[4] @ P) and the width contract."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from tokembed.embedding import oracles as O
from tokembed.embedding.lookup import TokenEmbedding
from tokembed.embedding.variants.factorized import FactorizedEmbedding
from tokembed.errors import EmbeddingError

# The worked-example fixtures live with the lookup tests, one folder up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _lookup_spec import SPEC_BRIDGE, SPEC_IDS, SPEC_TABLE


def _spec_module() -> FactorizedEmbedding:
    module = FactorizedEmbedding(8, 3, 5, padding_idx=0, dtype=torch.float64)
    module.load_state_dict(
        {"lookup.weight": torch.tensor(SPEC_TABLE), "bridge.weight": torch.tensor(SPEC_BRIDGE.T)}
    )
    return module


def test_worked_bridge_trace() -> None:
    module = _spec_module()
    ids = torch.tensor(SPEC_IDS)
    lexical = module.lookup(ids)
    initial = module(ids)
    assert lexical.shape == (2, 4, 3)
    assert initial.shape == (2, 4, 5)
    assert torch.equal(initial[0, 0], module.bridge(module.lookup.weight[1]))
    assert initial[0, 0].tolist() == [1.5, 0.0, 1.5, -0.5, -1.0]
    assert initial[0, 1].tolist() == [1.5, 0.0, 0.0, 0.5, -2.0]
    expected = O.gather(SPEC_TABLE, SPEC_IDS) @ SPEC_BRIDGE
    # Entries are 0, +-0.5 and +-1: every product and sum is exact in float64.
    assert np.array_equal(initial.detach().numpy(), expected)
    assert torch.equal(initial[1, 3], module.bridge(module.lookup.weight[0]))  # PAD row, unmasked


def test_factorized_shape_and_backward_through_bridge() -> None:
    module = _spec_module()
    ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
    assert module.lookup(ids).shape == (2, 3, module.lookup.embedding_dim)
    hidden = module(ids)
    assert hidden.shape == (2, 3, module.bridge.out_features)
    g = torch.ones_like(hidden)
    hidden.backward(g)
    # input-path gradient of the lexical table: S^T (G P^T)
    expected = O.scatter_add_backward(ids.numpy(), g.numpy() @ SPEC_BRIDGE.T, 8, padding_idx=0)
    assert module.lookup.weight.grad is not None
    # Ones times halves, summed over six positions: exact in float64.
    assert np.array_equal(module.lookup.weight.grad.numpy(), expected)


def test_bridge_width_mismatch() -> None:
    lookup = TokenEmbedding(8, 3)
    with pytest.raises(EmbeddingError) as e:
        FactorizedEmbedding.from_parts(lookup, nn.Linear(4, 5, bias=False))
    assert e.value.code == "BRIDGE_INPUT_WIDTH_MISMATCH"
    module = FactorizedEmbedding.from_parts(lookup, nn.Linear(3, 5, bias=False))
    assert module.lookup is lookup
    module.bridge = nn.Linear(6, 5, bias=False)  # swapped after construction
    with pytest.raises(EmbeddingError) as e:
        module(torch.tensor([[1]]))
    assert e.value.code == "BRIDGE_INPUT_WIDTH_MISMATCH"


def test_lookup_errors_surface_through_the_path() -> None:
    module = FactorizedEmbedding(8, 3, 5)
    with pytest.raises(EmbeddingError) as e:
        module(torch.tensor([[1, 8]]))
    assert e.value.code == "ID_OUT_OF_RANGE"
