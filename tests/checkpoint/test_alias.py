"""Alias graphs: groups by object identity, re-pointing aliases, proving identity."""

from __future__ import annotations

import pytest
import torch
from _models import TinyLM

from tokembed.checkpoint import AliasGraph, alias_graph, apply_aliases, same_storage, verify_aliases
from tokembed.errors import CheckpointError


def test_alias_graph_names_the_first_registration_canonical() -> None:
    graph = alias_graph(TinyLM(tied=True))
    assert graph.groups == (("embed.weight", "lm_head.weight"),)
    assert graph.aliases() == {"lm_head.weight": "embed.weight"}
    assert graph.canonical("lm_head.weight") == "embed.weight"
    assert graph.canonical("body.weight") == "body.weight"
    assert alias_graph(TinyLM(tied=False)).groups == ()


def test_apply_aliases_reties_an_independently_built_model_and_verify_proves_it() -> None:
    model = TinyLM(tied=False)
    graph = AliasGraph.from_aliases({"lm_head.weight": "embed.weight"})
    with pytest.raises(CheckpointError) as e:
        verify_aliases(model, graph)
    assert e.value.code == "ALIAS_GRAPH_LOST"
    assert apply_aliases(model, graph) == ["lm_head.weight"]
    assert model.lm_head.weight is model.embed.weight
    verify_aliases(model, graph)
    assert apply_aliases(model, graph) == []  # idempotent


def test_equal_values_in_two_storages_do_not_verify() -> None:
    model = TinyLM(tied=False)
    with torch.no_grad():
        model.lm_head.weight.copy_(model.embed.weight)
    assert not same_storage(model.lm_head.weight, model.embed.weight)
    with pytest.raises(CheckpointError) as e:
        verify_aliases(model, AliasGraph.from_aliases({"lm_head.weight": "embed.weight"}))
    assert e.value.code == "ALIAS_GRAPH_LOST"


def test_same_storage_compares_offset_and_stride_not_only_the_pointer() -> None:
    base = torch.zeros(4, 6)
    assert same_storage(base, base.view(4, 6))
    assert not same_storage(base[1:], base[:3])  # same storage, other offset
    assert not same_storage(base.t(), base.view(6, 4))  # same bytes, other stride


def test_malformed_graphs_and_unknown_names_are_refused() -> None:
    with pytest.raises(CheckpointError) as e:
        AliasGraph(groups=(("a", "b"), ("b", "c")))
    assert e.value.code == "MALFORMED_CHECKPOINT"
    with pytest.raises(CheckpointError) as e:
        apply_aliases(TinyLM(), AliasGraph.from_aliases({"head.weight": "embed.weight"}))
    assert e.value.code == "MALFORMED_CHECKPOINT"
    with pytest.raises(CheckpointError) as e:
        apply_aliases(TinyLM(), AliasGraph.from_aliases({"body.weight": "embed.weight"}))
    assert e.value.code == "TIE_SHAPE_MISMATCH"


def test_from_aliases_collapses_chains() -> None:
    graph = AliasGraph.from_aliases({"c": "b", "b": "a"})
    assert graph.aliases() == {"b": "a", "c": "a"}
