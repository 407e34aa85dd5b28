"""Byte accounts: table-layout payload formulas, per-rank memory, bytes actually handed to collectives."""

from __future__ import annotations

import math

import pytest
import torch
from _llama import HIDDEN, VOCAB
from _whole_model import world_results
from torch import nn

from tokembed.errors import UsageError
from tokembed.parallel.ledger import count_remote, memory_ledger, schedule_payloads

# A duplicate-id trace: V=8, d=3, two origin ranks of 4 ids.
_TRACE = [torch.tensor([1, 4, 1, 0]), torch.tensor([4, 6, 1, 4])]
_HALVES = [(0, 4), (4, 8)]


def test_trace_has_two_remote_occurrences() -> None:
    assert count_remote(_TRACE, _HALVES) == 2


def test_spec_communication_ledger_golden_numbers() -> None:
    # "logical routed payload: 80 bytes"; replicated gradient, Megatron output
    # reduction and column concatenation: 96 bytes each.
    payloads = schedule_payloads(num_embeddings=8, embedding_dim=3, n_tokens=8, n_remote=2)
    assert payloads == {
        "replicated": 96,
        "owner_routed": 80,
        "masked_local": 96,
        "column_sharded": 96,
    }
    # B decomposes as 2*(8+8) requests + 2*3*4 forward rows + 2*3*4 backward gradients.
    only_ids = schedule_payloads(num_embeddings=8, embedding_dim=0, n_tokens=8, n_remote=2)
    assert only_ids["owner_routed"] == 32


def test_payload_scales_with_value_width() -> None:
    bf16 = schedule_payloads(
        num_embeddings=32000, embedding_dim=512, n_tokens=4096, n_remote=2048, value_bytes=2
    )
    assert bf16["replicated"] == 32000 * 512 * 2
    assert bf16["masked_local"] == 4096 * 512 * 2
    assert bf16["owner_routed"] == 2048 * 16 + 2 * 2048 * 512 * 2


def test_negative_counts_and_mismatched_ranks_are_refused() -> None:
    with pytest.raises(UsageError) as e:
        schedule_payloads(num_embeddings=8, embedding_dim=3, n_tokens=-1, n_remote=0)
    assert e.value.code == "INVALID_ARGUMENT"
    with pytest.raises(UsageError) as e:
        count_remote(_TRACE, _HALVES[:1])
    assert e.value.code == "INVALID_ARGUMENT"


def test_memory_ledger_counts_adamw_state_and_tied_parameters_once() -> None:
    emb = nn.Embedding(10, 4)
    head = nn.Linear(4, 10, bias=False)
    head.weight = emb.weight  # tied: one Parameter
    model = nn.ModuleDict({"emb": emb, "head": head})
    opt = torch.optim.AdamW(model.parameters())
    head(emb(torch.tensor([1, 2]))).sum().backward()
    opt.step()
    ledger = memory_ledger(model, opt, table=emb.weight)
    assert ledger.parameters == 10 * 4 * 4
    assert ledger.gradients == 10 * 4 * 4
    # exp_avg + exp_avg_sq (fp32 [10, 4] each) + the fp32 scalar step counter.
    assert ledger.optimizer_state == 2 * 160 + 4
    assert ledger.table == 160
    assert ledger.total == 160 + 160 + 324


# --- real groups ----------------------------------------------------------------


@pytest.mark.distributed
@pytest.mark.xdist_group("tokembed-whole-model")
@pytest.mark.parametrize("world_size", [2, 4])
def test_measured_bytes_match_the_payload_formulas(world_size: int) -> None:
    for result in world_results(world_size):
        ledger = result["ledger"]
        formulas = schedule_payloads(
            num_embeddings=VOCAB, embedding_dim=HIDDEN, n_tokens=ledger["n_tokens"], n_remote=0
        )
        # Masked local rows: one all-reduce of the [N, d] partial output forward, nothing in
        # backward.
        assert ledger["vpe"] == {"all_reduce": (1, formulas["masked_local"])}
        # Replicated: the dense [V, d] gradient reduction of a replicated table.
        assert ledger["replicated"] == {"all_reduce": (1, formulas["replicated"])}
        # DTensor RowwiseParallel runs the masked local lookup through functional collectives.
        assert ledger["dtensor"] == {"all_reduce": (1, formulas["masked_local"])}


@pytest.mark.distributed
@pytest.mark.xdist_group("tokembed-whole-model")
@pytest.mark.parametrize("world_size", [2, 4])
def test_per_rank_table_bytes_are_a_ceil_share(world_size: int) -> None:
    results = world_results(world_size)
    full = VOCAB * HIDDEN * 4
    rows = [e - s for s, e in results[0]["intervals"]]
    for rank, result in enumerate(results):
        memory = result["ledger"]["memory"]
        assert memory.table == rows[rank] * HIDDEN * 4
        assert memory.parameters == memory.table
        assert memory.optimizer_state == 2 * memory.table + 4
    assert results[0]["ledger"]["memory"].table == math.ceil(VOCAB / world_size) * HIDDEN * 4
    assert sum(r["ledger"]["memory"].table for r in results) == full
