"""What binds a checkpoint to a model, shared by the single-file and the DCP loader."""

from __future__ import annotations

import pytest
import torch
from _models import TinyLM

from tokembed.checkpoint.binding import (
    check_tokenizer,
    is_sharded,
    refuse_hidden_sharing,
    restore_graph,
    row_tables,
)
from tokembed.errors import TokembedError

HASH = "sha256:" + "1" * 64


def test_restore_graph_merges_recorded_and_model_aliases() -> None:
    untied = TinyLM(tied=False)
    graph = restore_graph(untied, {"aliases": {"lm_head.weight": "embed.weight"}})
    assert graph.aliases() == {"lm_head.weight": "embed.weight"}
    assert restore_graph(TinyLM(), None).aliases() == {"lm_head.weight": "embed.weight"}
    assert restore_graph(untied, None).aliases() == {}


def test_check_tokenizer() -> None:
    check_tokenizer({"address_hash": HASH}, HASH)
    check_tokenizer({"address_hash": HASH}, None)  # no tokenizer given: nothing to check
    with pytest.raises(TokembedError) as info:
        check_tokenizer({"address_hash": HASH}, "sha256:" + "2" * 64)
    assert info.value.code == "ADDRESS_HASH_MISMATCH"
    with pytest.raises(TokembedError):
        check_tokenizer(None, HASH)


def test_hidden_sharing_and_plain_models() -> None:
    base = torch.zeros(4, 2)
    with pytest.raises(TokembedError) as info:
        refuse_hidden_sharing({"a": base, "b": base.view(4, 2)})
    assert info.value.code == "UNDECLARED_TIE"
    refuse_hidden_sharing({"a": base, "b": base.clone()})
    assert not is_sharded(TinyLM())
    assert row_tables(TinyLM()) == {}
