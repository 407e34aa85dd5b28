"""Shard options: the smallest id type per format, every bad option refused in one place."""

from __future__ import annotations

import pytest

from tokembed.errors import FormatError, UsageError
from tokembed.tokenizer.shards import TokenizeConfig, id_dtype


def test_the_smallest_id_type_that_holds_the_range() -> None:
    assert id_dtype(65_536, "megatron") == id_dtype(65_536, "bin") == "uint16"
    assert id_dtype(65_537, "bin") == "uint32"
    assert id_dtype(65_537, "megatron") == "int32"
    assert id_dtype(2**32, "bin") == "uint32"
    for r, fmt in ((2**31 + 1, "megatron"), (2**32 + 1, "bin")):
        with pytest.raises(FormatError) as info:
            id_dtype(r, fmt)
        assert info.value.code == "ID_RANGE_TOO_LARGE"
        assert info.value.value == r


@pytest.mark.parametrize(
    "options",
    [
        {"format": "parquet"},
        {"doc": "page"},
        {"field": ""},
        {"input_format": "csv"},
        {"eot": "yes"},
        {"errors": "ignore"},
        {"workers": 0},
        {"workers": True},
        {"shard_bytes": -1},
        {"engine": "ray"},
        {"scheduler": "tcp://x:1"},
        {"resume": True, "overwrite": True},
    ],
)
def test_bad_options_are_refused(options: dict[str, object]) -> None:
    with pytest.raises(UsageError) as info:
        TokenizeConfig(**options)  # type: ignore[arg-type]
    assert info.value.code == "INVALID_ARGUMENT"
