"""ScaledSinusoidalEmbedding: content scale once, sinusoid once; double application refused."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from conftest import assert_within, rounding_bound
from tokembed.embedding import oracles as O
from tokembed.embedding.stamps import add_positions, apply_input_scale, require_rows, row_stamp
from tokembed.embedding.variants.sinusoidal import ScaledSinusoidalEmbedding, sinusoidal_table
from tokembed.errors import EmbeddingError


def test_harvard_scaling() -> None:
    wrapper = ScaledSinusoidalEmbedding(11, 8, dropout=0.0)
    ids = torch.tensor([[1, 3]])
    raw = F.embedding(ids, wrapper.lut.weight)
    torch.testing.assert_close(wrapper.content(ids), raw * math.sqrt(wrapper.d_model))
    expected = raw * math.sqrt(8) + torch.tensor(O.sinusoidal_positions(2, 8), dtype=torch.float32)
    torch.testing.assert_close(wrapper(ids), expected)
    assert list(wrapper.state_dict()) == ["lut.weight"]


def test_sinusoid_table_equals_oracle() -> None:
    for d in (8, 7):  # odd width: one fewer cosine column
        # Computed in float64 and rounded once to float32 (values <= 1): eps32 covers the
        # final rounding plus the float64 routes' differences (~64 eps64 in the angle).
        bound = rounding_bound(torch.float32, terms=1, magnitude=1.0)
        assert_within(sinusoidal_table(64, d), O.sinusoidal_positions(64, d), bound)


def test_scale_and_positions_cannot_be_applied_twice() -> None:
    wrapper = ScaledSinusoidalEmbedding(11, 8, dropout=0.1).train()
    out = wrapper(torch.tensor([[1, 3, 5]]))
    stamp = row_stamp(out)  # survives dropout
    assert stamp is not None
    assert stamp.scale == math.sqrt(8)
    assert stamp.positions == "sinusoidal"
    with pytest.raises(EmbeddingError) as e:
        apply_input_scale(out, math.sqrt(8), by="caller")
    assert e.value.code == "SCALE_APPLIED_TWICE"
    with pytest.raises(EmbeddingError) as e:
        add_positions(out, wrapper.get_buffer("pe")[:3], name="sinusoidal", by="caller")
    assert e.value.code == "POSITION_APPLIED_TWICE"


def test_sequence_longer_than_table() -> None:
    with pytest.raises(EmbeddingError) as e:
        ScaledSinusoidalEmbedding(11, 4, max_len=2)(torch.tensor([[1, 2, 3]]))
    assert e.value.code == "SHAPE_MISMATCH"


@pytest.mark.failure_lab("7.10")
def test_content_rows_where_the_stack_expects_positions_are_refused() -> None:
    """Calling only Embeddings when code expects Embeddings + PositionalEncoding.

    content() is [B, L, d] like forward(), but carries no positions.
    """
    wrapper = ScaledSinusoidalEmbedding(11, 8, dropout=0.0)
    ids = torch.tensor([[1, 3, 5]])
    content, full = wrapper.content(ids), wrapper(ids)
    assert content.shape == full.shape  # the shape cannot tell them apart
    with pytest.raises(EmbeddingError) as e:
        require_rows(content, positions=True, by="encoder")
    assert (e.value.code, e.value.value) == ("POSITIONS_MISSING", (1, 3, 8))
    stamp = require_rows(full, positions=True, by="encoder")
    assert stamp is not None
    assert (stamp.positions, stamp.scale) == ("sinusoidal", math.sqrt(8))


@pytest.mark.failure_lab("7.11")
def test_positioned_rows_where_raw_content_was_intended_are_refused() -> None:
    """Calling src_embed when only raw content embeddings were intended.

    The caller adds its own positions later; rows from forward() already have them.
    """
    wrapper = ScaledSinusoidalEmbedding(11, 8, dropout=0.0)
    ids = torch.tensor([[1, 3, 5]])
    early = wrapper(ids)  # src_embed = Embeddings + PositionalEncoding
    with pytest.raises(EmbeddingError) as e:
        require_rows(early, positions=False, by="decoder input")
    assert (e.value.code, e.value.value) == ("POSITIONS_UNEXPECTED", "sinusoidal")
    with pytest.raises(EmbeddingError) as e:  # and adding them where intended: twice
        add_positions(early, wrapper.get_buffer("pe")[:3], name="sinusoidal", by="caller")
    assert e.value.code == "POSITION_APPLIED_TWICE"
    raw = require_rows(wrapper.content(ids), positions=False, by="decoder input")
    assert raw is not None
    assert raw.positions is None
