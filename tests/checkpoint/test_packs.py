"""Quantized role packs are one tie only when both derive from the one source table."""

from __future__ import annotations

import pytest
import torch

from tokembed.checkpoint import check_packs_tied, derive_pack
from tokembed.errors import CheckpointError


def test_absmax_int8_pack_golden_values() -> None:
    table = torch.tensor([[0.5, -1.0, 0.25], [2.0, 1.0, -0.5]])
    pack = derive_pack(table, role="input")
    assert torch.equal(pack.scale, torch.tensor([1.0, 2.0]) / 127)
    assert pack.data.tolist() == [[64, -127, 32], [127, 64, -32]]


def test_packs_derived_from_one_source_are_tied() -> None:
    table = torch.randn(5, 4, generator=torch.Generator().manual_seed(0))
    check_packs_tied(table, [derive_pack(table, role="input"), derive_pack(table, role="output")])


def test_edited_packed_values_are_no_longer_derived() -> None:
    table = torch.randn(5, 4, generator=torch.Generator().manual_seed(0))
    pack = derive_pack(table, role="output")
    pack.data[0, 0] += 1  # a runtime edited the packed output role in place
    with pytest.raises(CheckpointError) as e:
        check_packs_tied(table, [derive_pack(table, role="input"), pack])
    assert (e.value.code, e.value.value) == ("QUANTIZED_PACKS_NOT_TIED", "output")
