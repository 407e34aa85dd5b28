"""check_output_head: the head's vocabulary axis and layout against the input table; tying across vocabularies."""

from __future__ import annotations

import pytest
import torch
from _models import TinyLM
from torch import nn

from conftest import assert_within, rounding_bound
from tokembed.checkpoint import check_output_head, tie
from tokembed.embedding import TokenEmbedding
from tokembed.errors import CheckpointError, UsageError

HASH_SRC = "sha256:" + "1" * 64
HASH_TGT = "sha256:" + "2" * 64


def _code(*args: object, **kwargs: object) -> tuple[str, object]:
    with pytest.raises(CheckpointError) as e:
        check_output_head(*args, **kwargs)  # type: ignore[arg-type]
    return e.value.code, e.value.value


@pytest.mark.failure_lab("12.1")
def test_an_untied_head_of_another_vocabulary_is_refused() -> None:
    """Output head and input embedding vocabulary dimensions disagree.

    The embedding grew to 12 rows; the untied head still scores 11 ids.
    """
    model = TinyLM(tied=False)
    check_output_head(model.embed, model.lm_head)
    grown = nn.Embedding(12, 4)
    ids = torch.tensor([[11]])
    assert model.lm_head(grown(ids)).shape == (1, 1, 11)  # lookup works, logits are short
    assert _code(grown, model.lm_head) == ("HEAD_VOCAB_MISMATCH", (11, 12))
    check_output_head(grown, model.lm_head, vocab_size=11)  # a declared output vocabulary


@pytest.mark.failure_lab("12.4")
def test_a_transposed_head_is_refused() -> None:
    """Using transposed weight layout incorrectly.

    A custom head stores W as [d, V] and computes hidden @ W; nn.Linear stores [V, d].
    """
    embed = nn.Embedding(11, 4)
    custom = torch.randn(4, 11, dtype=torch.float64)  # [d, V]
    hidden = torch.randn(2, 4, dtype=torch.float64)
    linear = nn.Linear(4, 11, bias=False, dtype=torch.float64)
    with torch.no_grad():
        linear.weight.copy_(custom.t())
    # Same logits up to the order of a 4-term dot product (two kernels).
    bound = rounding_bound(
        torch.float64, terms=4, magnitude=4 * float(hidden.abs().max() * custom.abs().max())
    )
    assert_within(hidden @ custom, linear(hidden).detach(), bound)
    assert _code(embed, custom) == ("HEAD_LAYOUT_MISMATCH", (4, 11))
    check_output_head(embed, linear)
    assert _code(embed, nn.Linear(5, 11, bias=False)) == ("HEAD_LAYOUT_MISMATCH", (11, 5))
    check_output_head(nn.Embedding(11, 3), nn.Linear(5, 11, bias=False), hidden_size=5)
    with pytest.raises(UsageError) as e:
        check_output_head(embed, nn.ReLU())
    assert e.value.code == "INVALID_ARGUMENT"


@pytest.mark.failure_lab("12.3")
def test_tables_of_other_vocabularies_are_not_tied() -> None:
    """Tying incompatible source, target, and output tables.

    Source, target and output tables of one shape, two vocabularies.
    """
    model = nn.Module()
    model.src = TokenEmbedding(11, 4, address_hash=HASH_SRC)
    model.tgt = TokenEmbedding(11, 4, address_hash=HASH_TGT)
    model.generator = nn.Linear(4, 11, bias=False)
    with pytest.raises(CheckpointError) as e:  # target vocabulary's generator onto the source
        tie(model, keep="input", pair=("src.weight", "generator.weight"),
            vocabularies=(HASH_SRC, HASH_TGT))  # fmt: skip
    assert (e.value.code, e.value.value) == ("VOCABULARY_IDENTITY_MISMATCH", (HASH_SRC, HASH_TGT))
    with pytest.raises(CheckpointError) as e:
        tie(model, keep="input", pair=("src.weight", "tgt.weight"))
    assert e.value.code == "VOCABULARY_IDENTITY_MISMATCH"
    assert model.get_parameter("generator.weight") is not model.get_parameter("src.weight")
    tie(model, keep="input", pair=("tgt.weight", "generator.weight"),
        vocabularies=(HASH_TGT, HASH_TGT))  # fmt: skip
    assert model.get_parameter("generator.weight") is model.get_parameter("tgt.weight")
