"""Real token ids (SmolLM2's 49,152-id tokenizer on PUD English) through the sharded layers.

The references are NumPy float64 oracles from :mod:`tokembed.embedding.oracles`:
the gather, the scatter-add backward and the tied two-path gradient
``dE = S^T G_X + D^T C``. Four gloo ranks hold 12,288 rows each; the tied
embedding + head + vocab-parallel cross entropy, and the owner-routed lookup
with a quarter of the sentences per rank, must reproduce them. The layers run
in float64 like the oracles, so the only differences are the order of
additions, bounded from float64's eps (lookups are copies: exact).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from _harness import run_ranks
from torch.testing import assert_close

from conftest import data_path, pud_text, rounding_bound
from tokembed.embedding import oracles
from tokembed.parallel import (
    RowRoutedEmbedding,
    VocabParallelEmbedding,
    VocabParallelLMHead,
    vocab_parallel_cross_entropy,
)

pytestmark = pytest.mark.distributed

V, D, N = 49152, 8, 256  # SmolLM2-135M vocabulary; 256 tokens keep the float64 oracle at 100 MB


def _bound(terms: int, magnitude: float) -> float:
    return rounding_bound(torch.float64, terms=terms, magnitude=magnitude)


@pytest.fixture(scope="module")
def real_ids() -> torch.Tensor:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(data_path("tokenizers", "smollm2-135m", "tokenizer.json")))
    ids = tok.encode(pud_text("en")).ids[:N]
    assert len(ids) == N
    return torch.tensor(ids, dtype=torch.int64)


def _table() -> torch.Tensor:
    return torch.randn(V, D, generator=torch.Generator().manual_seed(0)).double() * 0.5


def _on_ranks(rank: int, world: int, ids: torch.Tensor) -> dict[str, Any]:
    table = _table()
    emb = VocabParallelEmbedding(V, D, dtype=torch.float64)
    with torch.no_grad():
        emb.weight.copy_(table[emb.vocab_start : emb.vocab_end])
    head = VocabParallelLMHead(D, V, tie_to=emb)
    x = emb(ids)  # [N, D], the contexts C of the tied head
    loss = vocab_parallel_cross_entropy(
        head(x[:-1]), ids[1:], vocab_start=head.vocab_start, reduction="sum"
    )
    loss.backward()
    assert emb.weight.grad is not None
    tied_grad = emb.weight.grad  # this rank's rows of dE, both paths summed in one .grad
    routed = RowRoutedEmbedding(V, D, dtype=torch.float64)
    with torch.no_grad():
        routed.weight.copy_(table[routed.vocab_start : routed.vocab_end])
    quarter = ids.numel() // world
    mine = slice(rank * quarter, (rank + 1) * quarter)
    upstream = torch.linspace(-1.0, 1.0, N * D, dtype=torch.float64).reshape(N, D)
    out = routed(ids[mine])
    (out * upstream[mine]).sum().backward()
    assert routed.weight.grad is not None
    return {
        "x": x.detach(),
        "loss": loss.item(),
        "tied_rows": (emb.vocab_start, tied_grad),
        "routed_out": out.detach(),
        "routed_rows": (routed.vocab_start, routed.weight.grad),
    }


def test_sharded_layers_match_numpy_oracles_on_real_ids(real_ids: torch.Tensor) -> None:
    results = run_ranks(_on_ranks, 4, real_ids)
    table = _table().numpy()
    ids = real_ids.numpy()
    x = oracles.gather(table, ids)  # [N, D]
    for r in results:
        assert_close(r["x"].double(), torch.from_numpy(x), rtol=0, atol=0)
    # Tied head on contexts C = x[:-1] predicting ids[1:]: D = softmax(C E^T) - Y.
    residual = oracles.cross_entropy_residual(x[:-1] @ table.T, ids[1:])  # [N-1, V]
    log_z = np.log(np.exp(x[:-1] @ table.T).sum(axis=1))
    loss = float((log_z - (x[:-1] * table[ids[1:]]).sum(axis=1)).sum())
    grad_x = np.concatenate([residual @ table, np.zeros((1, D))])  # the last position has no target
    tied = oracles.tied_two_path_gradient(ids, grad_x, x[:-1], residual, V)
    got = torch.cat([r["tied_rows"][1] for r in results]).double()
    assert [r["tied_rows"][0] for r in results] == [0, 12288, 24576, 36864]
    # One step of the tied head reorders the softmax sum over V (split over 4
    # ranks), the dot products over D and the sum over the N - 1 positions.
    terms = V + D + N
    assert all(abs(r["loss"] - loss) <= _bound(terms, abs(loss)) for r in results)
    assert_close(got, torch.from_numpy(tied), rtol=0, atol=_bound(terms, float(np.abs(tied).max())))
    # Routed: each rank looked up its quarter; the shards hold the global scatter-add.
    upstream = torch.linspace(-1.0, 1.0, N * D, dtype=torch.float64).reshape(N, D).numpy()
    routed = torch.cat([r["routed_rows"][1] for r in results]).double()
    expected = oracles.scatter_add_backward(ids, upstream, V)
    # A row's gradient sums the upstream rows of its N or fewer occurrences.
    bound = _bound(N, float(np.abs(expected).max()))
    assert_close(routed, torch.from_numpy(expected), rtol=0, atol=bound)
    got_out = torch.cat([r["routed_out"] for r in results]).double()
    assert_close(got_out, torch.from_numpy(x), rtol=0, atol=0)
