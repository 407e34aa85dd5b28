"""Row stamps: scale and positions each applied once; stamps carried, not invented."""

from __future__ import annotations

import pytest
import torch

from tokembed.embedding.stamps import add_positions, apply_input_scale, carry_stamp, row_stamp
from tokembed.errors import EmbeddingError, UsageError


def test_scale_then_positions_then_refusals() -> None:
    rows = torch.ones(2, 3, 4)
    assert row_stamp(rows) is None
    scaled = apply_input_scale(rows, 2.0, by="lut")
    assert torch.equal(scaled, rows * 2)
    placed = add_positions(scaled, torch.zeros(3, 4), name="learned", by="model")
    stamp = row_stamp(placed)
    assert stamp is not None
    assert (stamp.scale, stamp.scale_by, stamp.positions) == (2.0, "lut", "learned")
    with pytest.raises(EmbeddingError) as e:
        apply_input_scale(placed, 2.0, by="caller")
    assert e.value.code == "SCALE_APPLIED_TWICE"
    with pytest.raises(EmbeddingError) as e:
        add_positions(placed, torch.zeros(3, 4), name="learned", by="caller")
    assert e.value.code == "POSITION_APPLIED_TWICE"


def test_untracked_arithmetic_gives_an_unstamped_tensor() -> None:
    scaled = apply_input_scale(torch.ones(2), 3.0, by="lut")
    assert row_stamp(scaled * 1.0) is None  # documented limit: only stamped ops are tracked
    assert row_stamp(carry_stamp(scaled, scaled * 1.0)) == row_stamp(scaled)


def test_bad_factor_and_bad_position_shape() -> None:
    with pytest.raises(UsageError):
        apply_input_scale(torch.ones(2), 0.0, by="lut")
    with pytest.raises(EmbeddingError) as e:
        add_positions(torch.ones(2, 3, 4), torch.zeros(5, 4), name="sinusoidal", by="x")
    assert e.value.code == "SHAPE_MISMATCH"
