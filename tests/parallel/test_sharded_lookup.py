"""Sharded tables keep TokenEmbedding's contract, on real gloo groups.

One TokenEmbedding (PAD row 7 on rank 1, zero_pad_row, input scale, bound to a
tokenizer hash) is sharded three ways (vocabulary-parallel, row-routed,
column-parallel) and through ``shard_input_embedding``; every shard must give
TokenEmbedding's output (stamped once) and refuse what it refuses, with the same
class and code on every rank: address-hash mismatch, PAD-id disagreement, the
``-1`` PAD convention, out-of-range ids, one-hot selectors, a non-zero PAD row
(on the rank that holds it, agreed with its peers) and a checkpoint carrying one.
Saved shards record the table's tokenizer binding, and loading checks it.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from _harness import run_ranks
from torch import nn

from tokembed.embedding.addressed import AddressedIds
from tokembed.embedding.lookup import TokenEmbedding
from tokembed.embedding.lookup_config import LookupConfig, LookupPolicy
from tokembed.embedding.stamps import apply_input_scale, row_stamp
from tokembed.errors import EmbeddingError, ParallelError, TokembedError, UsageError
from tokembed.parallel import (
    ColumnParallelEmbedding,
    RowRoutedEmbedding,
    VocabParallelEmbedding,
    VocabParallelLMHead,
    load_vocab_shards,
    save_vocab_shards,
    shard_input_embedding,
)
from tokembed.parallel._sharded_lookup import table_source

HASH_A, HASH_B = ("sha256:" + c * 64 for c in "ab")  # the form of Tokenizer.address_hash
V, D, PAD, SCALE = 10, 4, 7, 2.0  # over 2 ranks: rows [0, 5) and [5, 10), PAD on rank 1


def _outcome(fn: Callable[[], object]) -> str:
    try:
        fn()
    except TokembedError as error:
        return f"{type(error).__name__}:{error.code}:{error.value}"
    return "ok"


def _reference() -> TokenEmbedding:
    torch.manual_seed(0)
    return TokenEmbedding(  # one_hot_guard (opt-in) travels with the config to every shard
        V,
        D,
        padding_idx=PAD,
        zero_pad_row=True,
        input_scale=SCALE,
        address_hash=HASH_A,
        one_hot_guard=True,
    )


class _Tiny(nn.Module):
    """The two accessors shard_input_embedding / shard_lm_head use, as on an HF model."""

    def __init__(self, emb: nn.Module, head: nn.Linear | None = None) -> None:
        super().__init__()
        self.embed, self.head = emb, head

    def get_input_embeddings(self) -> nn.Module:
        return self.embed

    def set_input_embeddings(self, module: nn.Module) -> None:
        self.embed = module

    def get_output_embeddings(self) -> nn.Module | None:
        return self.head

    def set_output_embeddings(self, module: nn.Linear) -> None:
        self.head = module


def _table_contract(table: Any, rank: int, ref: TokenEmbedding) -> dict[str, Any]:
    ids = torch.tensor([[1, PAD, 9, 5]])
    good = AddressedIds(ids=ids, address_hash=HASH_A, pad_id=PAD)
    got = table(good)
    stamp = row_stamp(got)
    out: dict[str, Any] = {
        "equal": torch.equal(got, ref(good)),
        "stamp": None if stamp is None else (stamp.scale, stamp.scale_by),
        "twice": _outcome(lambda: apply_input_scale(got, SCALE, by="caller")),
        "other_hash": _outcome(lambda: table(AddressedIds(ids=ids, address_hash=HASH_B))),
        "other_pad": _outcome(lambda: table(AddressedIds(ids=ids, address_hash=HASH_A, pad_id=0))),
        "minus_one": _outcome(lambda: table(torch.tensor([[1, -1]]))),
        "out_of_range": _outcome(lambda: table(torch.tensor([[1, V]]))),
        "one_hot": _outcome(lambda: table(F.one_hot(torch.tensor([1, 3, 2]), V))),
        # Only rank 1 brings another tokenizer's batch: its peers raise with it.
        "rank1_hash": _outcome(
            lambda: table(
                AddressedIds(ids=ids, address_hash=HASH_B if rank == 1 else HASH_A, pad_id=PAD)
            )
        ),
        "pad_row_fresh": table.check_pad_row() is None,
    }
    # A PAD row written non-zero where this rank holds it (rows: rank 1; columns: rank 0).
    holds_pad = table.local_padding_idx is not None
    writes = holds_pad and (isinstance(table, ColumnParallelEmbedding) == (rank == 0))
    saved = table.weight.detach().clone()
    if writes:
        saved[table.local_padding_idx] = 1.0
    out["load_nonzero_pad"] = _outcome(lambda: table.load_state_dict({"weight": saved}))
    with torch.no_grad():
        table.weight.copy_(saved)
    out["nonzero_pad"] = _outcome(lambda: table(torch.tensor([[1, 2]])))
    if holds_pad:
        with torch.no_grad():  # every PAD row was zero before: zeroing restores the table
            table.weight[table.local_padding_idx].zero_()
    out["after"] = tuple(table(torch.tensor([[0, 9]])).shape)  # the group is still in step
    return out


def _sharded_model(ref: TokenEmbedding) -> dict[str, Any]:
    model = _Tiny(TokenEmbedding.from_config(ref.config, weight=ref.weight.detach().clone()))
    vpe = shard_input_embedding(model)
    assert vpe is not None
    good = AddressedIds(ids=torch.tensor([[PAD, 3, 8]]), address_hash=HASH_A, pad_id=PAD)
    out: dict[str, Any] = {
        "config": vpe.config == ref.config,
        "equal": torch.equal(model.embed(good), ref(good)),
        "other_hash": _outcome(
            lambda: model.embed(AddressedIds(ids=good.ids, address_hash=HASH_B, pad_id=PAD))
        ),
        "head_other_hash": _outcome(
            lambda: VocabParallelLMHead(D, V, tie_to=vpe, address_hash=HASH_B)
        ),
        "bind_short": _outcome(lambda: vpe.bind_address(HASH_B, id_range=V + 1)),
    }
    vpe.bind_address(HASH_B)
    out["rebound"] = vpe.config.address_hash == HASH_B
    # A tied TokenEmbedding + head: the head shares the embedding's Parameter and config.
    emb = TokenEmbedding.from_config(ref.config, weight=ref.weight.detach().clone())
    head = nn.Linear(D, V, bias=False)
    head.weight = emb.weight
    tied = _Tiny(emb, head)
    shard_input_embedding(tied, tie=True)
    out["tied"] = tied.head.weight is tied.embed.weight and tied.head.config is tied.embed.config
    out["tied_equal"] = torch.equal(tied.embed(good), ref(good))
    return out


def _checkpoint(ref: TokenEmbedding, rank: int, root: str) -> dict[str, Any]:
    """Saved shards record the table's binding; loading checks it and the PAD row."""
    saved = VocabParallelEmbedding.from_embedding(ref)
    save_vocab_shards(saved, f"{root}/good")  # the address hash comes from the config
    same = VocabParallelEmbedding.from_config(ref.config)
    load_vocab_shards(same, f"{root}/good")
    other = VocabParallelEmbedding.from_config(replace(ref.config, address_hash=HASH_B))
    if saved.local_padding_idx is not None:
        with torch.no_grad():
            saved.weight[saved.local_padding_idx] = 1.0
    save_vocab_shards(saved, f"{root}/trained_pad")
    return {
        "round_trip": torch.equal(same.gather_weight(), ref.weight.detach()),
        "other_hash": _outcome(lambda: load_vocab_shards(other, f"{root}/good")),
        "trained_pad": _outcome(lambda: load_vocab_shards(same, f"{root}/trained_pad")),
    }


def _contracts(rank: int, world: int, root: str) -> dict[str, Any]:
    ref = _reference()
    bare = VocabParallelEmbedding(V, D, address_hash=HASH_A, require_address=True)
    fresh = VocabParallelEmbedding(V, D, padding_idx=PAD)
    return {
        "vocab": _table_contract(VocabParallelEmbedding.from_embedding(ref), rank, ref),
        "routed": _table_contract(RowRoutedEmbedding.from_embedding(ref), rank, ref),
        "column": _table_contract(ColumnParallelEmbedding.from_embedding(ref), rank, ref),
        "model": _sharded_model(ref),
        "checkpoint": _checkpoint(ref, rank, root),
        "bare": _outcome(lambda: bare(torch.tensor([1, 2]))),
        "fresh_pad_zero": (
            None
            if fresh.local_padding_idx is None
            else bool(fresh.weight[fresh.local_padding_idx].eq(0).all())
        ),
    }


@pytest.mark.distributed
def test_sharded_tables_keep_the_lookup_contract(tmp_path: Path) -> None:
    results = run_ranks(_contracts, 2, str(tmp_path))
    for rank, r in enumerate(results):
        for name in ("vocab", "routed", "column"):
            t = r[name]
            peer = 1 - rank
            holder = 0 if name == "column" else 1  # the rank whose PAD row was written
            assert t["equal"] is True, name
            assert t["stamp"] == (SCALE, type_name(name)), name
            assert t["twice"] == "EmbeddingError:SCALE_APPLIED_TWICE:(2.0, 2.0)"
            assert t["other_hash"] == f"EmbeddingError:ADDRESS_HASH_MISMATCH:{HASH_B}"
            assert t["other_pad"] == "EmbeddingError:PAD_ID_INVALID:(0, 7)"
            assert t["minus_one"] == "EmbeddingError:PAD_ID_INVALID:-1"
            assert t["out_of_range"] == "EmbeddingError:ID_OUT_OF_RANGE:10"
            assert t["one_hot"] == "EmbeddingError:OPERATOR_CONTRACT_MISMATCH:(3, 10)"
            # Agreed (routed always; the others because zero_pad_row is set): rank 0
            # raises the same class and code, naming rank 1.
            assert t["rank1_hash"] == "EmbeddingError:ADDRESS_HASH_MISMATCH:" + (
                HASH_B if rank == 1 else "1"
            ), name
            assert t["pad_row_fresh"] is True
            assert t["load_nonzero_pad"] == (
                "EmbeddingError:PAD_ROW_NOT_ZERO:7" if rank == holder else "ok"
            ), name
            assert t["nonzero_pad"] == (
                "EmbeddingError:PAD_ROW_NOT_ZERO:7"
                if rank == holder
                else f"EmbeddingError:PAD_ROW_NOT_ZERO:{peer}"
            ), name
            assert t["after"] == (1, 2, D)
        m = r["model"]
        assert m["config"] is m["equal"] is m["rebound"] is m["tied"] is m["tied_equal"] is True
        assert m["other_hash"] == f"EmbeddingError:ADDRESS_HASH_MISMATCH:{HASH_B}"
        assert m["head_other_hash"] == f"EmbeddingError:ADDRESS_HASH_MISMATCH:{HASH_A}"
        assert m["bind_short"] == "EmbeddingError:ID_OUT_OF_RANGE:10"
        assert r["bare"] == "EmbeddingError:ADDRESS_HASH_MISMATCH:None"
        c = r["checkpoint"]
        assert c["round_trip"] is True
        assert c["other_hash"] == f"EmbeddingError:ADDRESS_HASH_MISMATCH:{HASH_A}"
        # Loading is per rank: only the PAD row's owner (rank 1) holds the trained row.
        assert c["trained_pad"] == ("EmbeddingError:PAD_ROW_NOT_ZERO:7" if rank == 1 else "ok")
        assert r["fresh_pad_zero"] == (True if rank == 1 else None)


def type_name(name: str) -> str:
    return {
        "vocab": "VocabParallelEmbedding",
        "routed": "RowRoutedEmbedding",
        "column": "ColumnParallelEmbedding",
    }[name]


# --- without a group: what is refused before any rank is asked -------------------------


def test_lookup_policy_names_every_config_field_but_the_shape() -> None:
    shape = {"num_embeddings", "embedding_dim"}
    assert (
        set(typing.get_type_hints(LookupPolicy)) == {f.name for f in fields(LookupConfig)} - shape
    )


@pytest.mark.parametrize(
    ("build", "error", "code"),
    [
        (lambda: VocabParallelEmbedding(V, D, sparse=True), UsageError, "INVALID_ARGUMENT"),
        (lambda: RowRoutedEmbedding(V, D, padding_idx=V), EmbeddingError, "PAD_ID_INVALID"),
        (lambda: ColumnParallelEmbedding(V, D, max_norm=1.0), UsageError, "INVALID_ARGUMENT"),
        (
            lambda: VocabParallelEmbedding(V, D, address_hash="tok-a"),
            UsageError,
            "INVALID_ARGUMENT",
        ),
        (
            lambda: table_source(nn.Linear(D, V), allow_max_norm=True),
            ParallelError,
            "NOT_AN_EMBEDDING",
        ),
        (
            lambda: table_source(nn.Embedding(V, D, scale_grad_by_freq=True), allow_max_norm=True),
            UsageError,
            "INVALID_ARGUMENT",
        ),
    ],
    ids=["sparse", "pad-not-a-row", "column-max-norm", "hash-format", "linear", "freq"],
)
def test_sharded_tables_refuse_what_they_cannot_keep(
    build: Callable[[], object], error: type[TokembedError], code: str
) -> None:
    with pytest.raises(error) as e:
        build()
    assert e.value.code == code


def test_table_source_keeps_a_token_embeddings_config() -> None:
    ref = _reference()
    config, weight = table_source(ref, allow_max_norm=True)
    assert config == ref.config
    assert weight is ref.weight
