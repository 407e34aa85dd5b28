"""The one tensor digest: exact, layout-independent, and the form every recorder uses."""

from __future__ import annotations

import re
from pathlib import Path

import torch
from torch import nn

from tokembed.artifacts.digest import data_digest, tensor_digest
from tokembed.artifacts.safetensors_header import read_checkpoint_metadata


def _table() -> torch.Tensor:
    return torch.tensor([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0], [1.0, 0.0]])  # row norms 5, .5, 10, 1


def test_digest_is_exact_and_layout_independent() -> None:
    t = _table()
    assert tensor_digest(t) == tensor_digest(t.t().contiguous().t())
    assert tensor_digest(t) != tensor_digest(t.double())
    assert tensor_digest(t) != tensor_digest(t[[1, 0, 2, 3]])
    assert tensor_digest(torch.empty(0, 2)) != tensor_digest(torch.empty(2, 0))


def test_digest_form_and_dtypes_numpy_lacks() -> None:
    t = _table()
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", tensor_digest(t))
    assert tensor_digest(t.bfloat16()) != tensor_digest(t.half())  # same width, other bits
    same_bytes = t.view(torch.int32)
    assert tensor_digest(same_bytes) != tensor_digest(t)  # equal bytes, another dtype
    assert tensor_digest(t.requires_grad_()) == tensor_digest(_table())  # values, not autograd


def test_the_digest_a_checkpoint_records_is_this_one(tmp_path: Path) -> None:
    from tokembed.checkpoint import save_checkpoint
    from tokembed.embedding.materialize import TableSpec, materialize_fresh

    model = nn.Linear(3, 2)
    path = save_checkpoint(model, tmp_path / "c.safetensors", digests=True)
    meta = read_checkpoint_metadata(path)
    assert meta is not None
    assert meta["tensors"]["weight"]["sha256"] == tensor_digest(model.weight)
    fresh = materialize_fresh(TableSpec(num_embeddings=4, embedding_dim=2))
    assert fresh.evidence["sha256"] == tensor_digest(fresh.weight)


def test_data_digest_is_the_sha256_of_canonical_json() -> None:
    import hashlib

    rows = [["a.py", "sha256:00", 3], ["b.py", "sha256:11", 40]]
    text = '[["a.py","sha256:00",3],["b.py","sha256:11",40]]'
    assert data_digest(rows) == "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    assert data_digest(rows) == data_digest([tuple(r) for r in rows])  # tuples are lists
    assert data_digest(rows) != data_digest(rows[::-1])  # a list's order counts
    assert data_digest({"b": 1, "a": "é"}) == data_digest({"a": "é", "b": 1})  # keys do not
    assert data_digest({"a": "é"}) == ("sha256:" + hashlib.sha256(b'{"a":"\\u00e9"}').hexdigest())
