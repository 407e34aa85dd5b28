"""Payload and MAC calculators: one-hot, gradient, bridge, classifier and projector figures, real ids."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from conftest import data_path, pud_text
from tokembed.errors import EmbeddingError, UsageError
from tokembed.measure.memory import GIB, KIB, MIB, TableConfig, load_table_config
from tokembed.measure.payloads import (
    classifier_macs,
    gradient_payload,
    lookup_payload,
    projector_cost,
)

V, H, D = 128_000, 4_096, 256  # a LLaMA-3-sized vocabulary and width, bridge width 256


def test_one_hot_versus_gather() -> None:
    pay = lookup_payload(batch=8, seq_len=2_048, vocab_size=128_000)
    assert pay.id_entries == 16_384
    assert pay.one_hot_entries == 2_097_152_000
    assert pay.id_bytes == 128 * KIB
    assert pay.one_hot_bytes / GIB == 15.625
    assert round(pay.selector_bytes / GIB, 3) == 3.906
    assert pay.entry_ratio == 128_000
    with_rows = lookup_payload(batch=8, seq_len=2_048, vocab_size=128_000, embedding_dim=4_096)
    assert with_rows.gather_output_bytes == 16_384 * 4_096 * 2


def test_dense_versus_sparse_gradient() -> None:
    g = gradient_payload(vocab_size=V, embedding_dim=H, unique_rows=4_096)
    assert round(g.dense_bytes / GIB, 3) == 1.953
    assert g.sparse_value_bytes == 64 * MIB
    assert g.sparse_index_bytes == 32 * KIB
    assert g.sparse_bytes == 64 * MIB + 32 * KIB
    every_row = gradient_payload(vocab_size=V, embedding_dim=H, unique_rows=V)
    assert every_row.sparse_bytes > every_row.dense_bytes  # touched-everything: no saving
    with pytest.raises(UsageError) as e:
        gradient_payload(vocab_size=V, embedding_dim=H, unique_rows=V + 1)
    assert e.value.code == "INVALID_ARGUMENT"


def test_classifier_macs() -> None:
    m, n = 100, 30
    direct = classifier_macs(
        TableConfig(vocab_size=V, hidden_size=H, tied=True), input_rows=m, output_rows=n
    )
    assert direct == {"input_bridge": 0, "output_bridge": 0, "classifier": n * V * H}
    fact = classifier_macs(
        TableConfig(vocab_size=V, hidden_size=H, embedding_dim=D, tied=True),
        input_rows=m,
        output_rows=n,
    )
    assert fact == {"input_bridge": m * D * H, "output_bridge": n * H * D, "classifier": n * V * D}


@pytest.fixture(scope="module")
def smollm2_ids() -> torch.Tensor:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(data_path("tokenizers", "smollm2-135m", "tokenizer.json")))
    text = pud_text("en")[:20_000]
    return torch.tensor(tok.encode(text).ids, dtype=torch.int64)


def test_gradient_payload_equals_a_real_sparse_gradient(smollm2_ids: torch.Tensor) -> None:
    # Real ids (SmolLM2 tokenizer on PUD English) into a V=49,152 table of width 8.
    cfg = load_table_config(data_path("tokenizers", "smollm2-135m", "config.json"))
    emb = nn.Embedding(cfg.vocab_size, 8, sparse=True)
    emb(smollm2_ids).sum().backward()
    assert emb.weight.grad is not None
    grad = emb.weight.grad.coalesce()
    unique = int(smollm2_ids.unique().numel())
    pay = gradient_payload(vocab_size=cfg.vocab_size, embedding_dim=8, unique_rows=unique)
    values, indices = grad.values(), grad.indices()
    assert pay.sparse_value_bytes == values.numel() * values.element_size()
    assert pay.sparse_index_bytes == indices.numel() * indices.element_size()
    dense = grad.to_dense()
    assert pay.dense_bytes == dense.numel() * dense.element_size()
    assert 0 < unique < cfg.vocab_size // 4  # a few thousand touched rows: sparse pays off
    assert pay.sparse_bytes < pay.dense_bytes / 4
    onehot = lookup_payload(batch=1, seq_len=smollm2_ids.numel(), vocab_size=cfg.vocab_size)
    assert (
        onehot.one_hot_bytes
        == torch.nn.functional.one_hot(smollm2_ids[:100], cfg.vocab_size).element_size()
        * smollm2_ids.numel()
        * cfg.vocab_size
    )


def test_factorized_bridge_macs() -> None:
    macs = classifier_macs(
        TableConfig(vocab_size=V, hidden_size=H, embedding_dim=D, tied=False),
        input_rows=8 * 2_048,
        output_rows=0,
    )
    assert macs["input_bridge"] == 8 * 2_048 * D * H  # BL * E_d * H


def test_media_projector() -> None:
    proj = projector_cost(batch=1, n_media=576, d_media=1_024, d_model=4_096)
    assert (proj.parameters, proj.parameter_bytes) == (4_194_304, 8 * MIB)
    assert proj.macs == 2_415_919_104
    assert (proj.projected_elements, proj.projected_bytes) == (2_359_296, 4.5 * MIB)
    with pytest.raises(EmbeddingError) as e:
        projector_cost(batch=0, n_media=576, d_media=1_024, d_model=4_096)
    assert e.value.code == "INVALID_CONFIG"
