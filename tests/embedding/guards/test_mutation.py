"""unchanged_table: a max_norm forward changes the table it reads."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from conftest import assert_within, rounding_bound
from tokembed.artifacts.digest import tensor_digest
from tokembed.embedding import TokenEmbedding
from tokembed.embedding import oracles as O
from tokembed.embedding.guards import unchanged_table
from tokembed.errors import EmbeddingError


def _table() -> torch.Tensor:
    return torch.tensor([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0], [1.0, 0.0]])  # row norms 5, .5, 10, 1


@pytest.mark.failure_lab("7.8")
def test_a_max_norm_lookup_changes_the_table_it_reads() -> None:
    """Ignoring max_norm as a forward mutation.

    An evaluation pass, under no_grad, with no optimizer, rewrites rows 0 and 2.
    """
    emb = nn.Embedding.from_pretrained(_table(), freeze=True, max_norm=1.0)
    emb.eval()
    before = tensor_digest(emb.weight)
    with (
        pytest.raises(EmbeddingError) as e,
        torch.no_grad(),
        unchanged_table(emb.weight, by="evaluation"),
    ):
        emb(torch.tensor([0, 1, 2, 0]))
    assert (e.value.code, e.value.value) == ("TABLE_MUTATED_IN_FORWARD", [0, 2])
    assert tensor_digest(emb.weight) != before  # a hash taken before the pass is stale
    expected, changed = O.max_norm_renorm(_table().numpy(), [0, 1, 2, 0], max_norm=1.0)
    assert changed.tolist() == [0, 2]
    # float32 norm of two terms, one division and one product, values at most 1 after renorm.
    assert_within(emb.weight, expected, rounding_bound(torch.float32, terms=4, magnitude=1.0))
    ours = TokenEmbedding(4, 2, weight=_table(), max_norm=1.0)  # the same in-place rule
    with pytest.raises(EmbeddingError) as e, unchanged_table(ours.weight, by="lookup"):
        ours(torch.tensor([[2]]))
    assert (e.value.code, e.value.value) == ("TABLE_MUTATED_IN_FORWARD", [2])


def test_a_lookup_without_max_norm_leaves_the_table() -> None:
    emb = nn.Embedding.from_pretrained(_table())
    with unchanged_table(emb.weight, by="evaluation") as digest:
        emb(torch.tensor([0, 1, 2]))
    assert digest == tensor_digest(_table())
    with pytest.raises(EmbeddingError) as e, unchanged_table(emb.weight, by="x", keep_copy=False):
        F.embedding(torch.tensor([2]), emb.weight, max_norm=1.0)
    assert e.value.code == "TABLE_MUTATED_IN_FORWARD"
    assert isinstance(e.value.value, tuple)  # two digests, no copy to name rows
