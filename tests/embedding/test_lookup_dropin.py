"""TokenEmbedding / TokenEmbeddingBag accept what nn.Embedding / nn.EmbeddingBag accept, with
the same meaning: constructor (positional too), from_pretrained, _weight/_freeze, settable
options, empty tables, norm_type=inf, max_norm=0, negative padding_idx, and the id range
taken from the current weight. Each is compared with torch's own class on the same input."""

from __future__ import annotations

import copy
import inspect
import pickle

import pytest
import torch
from torch import nn

from tokembed.embedding.lookup import TokenEmbedding
from tokembed.embedding.variants.bag import TokenEmbeddingBag
from tokembed.errors import EmbeddingError, UsageError


def _pair(*args: object, **kwargs: object) -> tuple[nn.Embedding, TokenEmbedding]:
    torch.manual_seed(0)
    ref = nn.Embedding(*args, **kwargs)  # type: ignore[arg-type]
    torch.manual_seed(0)
    ours = TokenEmbedding(*args, **kwargs)  # type: ignore[arg-type]
    return ref, ours


def test_is_an_nn_embedding_with_its_signature() -> None:
    assert issubclass(TokenEmbedding, nn.Embedding)
    assert issubclass(TokenEmbeddingBag, nn.EmbeddingBag)
    for ours, theirs in ((TokenEmbedding, nn.Embedding), (TokenEmbeddingBag, nn.EmbeddingBag)):
        mine = list(inspect.signature(ours.__init__).parameters)
        torch_names = list(inspect.signature(theirs.__init__).parameters)
        assert mine[: len(torch_names)] == torch_names  # same positions, then our keywords
    assert list(inspect.signature(TokenEmbedding.forward).parameters)[:2] == ["self", "input"]


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((10, 3, 0), {}),  # positional padding_idx
        ((10, 3, -2, 1.5, float("inf")), {}),  # negative padding_idx, inf norm
        ((10, 3), {"max_norm": 0.0}),
        ((0, 3), {}),
        ((5, 0), {}),
        ((10, 3), {"scale_grad_by_freq": True}),
        ((10, 3), {"sparse": True, "padding_idx": 4}),
        ((10, 3), {"_freeze": True, "dtype": torch.float64}),
    ],
)
def test_constructor_matches_torch(args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    ref, ours = _pair(*args, **kwargs)
    assert repr(ours).replace("TokenEmbedding", "Embedding") == repr(ref)
    for name in ("num_embeddings", "embedding_dim", "padding_idx", "max_norm", "norm_type"):
        assert getattr(ours, name) == getattr(ref, name), name
    assert (ours.scale_grad_by_freq, ours.sparse) == (ref.scale_grad_by_freq, ref.sparse)
    assert ours.weight.requires_grad == ref.weight.requires_grad
    assert torch.equal(ours.weight, ref.weight)
    v = ref.num_embeddings
    ids = torch.arange(v).reshape(1, v) if v else torch.empty(1, 0, dtype=torch.long)
    got, want = ours(ids), ref(ids)
    assert torch.equal(got, want)
    if want.requires_grad:
        (got * torch.arange(got.numel()).reshape(got.shape)).sum().backward()
        (want * torch.arange(want.numel()).reshape(want.shape)).sum().backward()
        assert ours.weight.grad is not None
        assert ref.weight.grad is not None
        assert torch.equal(ours.weight.grad.to_dense(), ref.weight.grad.to_dense())


def test_from_pretrained_weight_and_freeze_as_torch() -> None:
    table = torch.arange(12.0).reshape(4, 3)
    ref = nn.Embedding.from_pretrained(table, padding_idx=-1)
    ours = TokenEmbedding.from_pretrained(table, padding_idx=-1)
    assert ours.padding_idx == ref.padding_idx == 3
    assert not ours.weight.requires_grad
    assert ours.weight.data_ptr() == table.data_ptr()  # shared, as torch shares it
    assert torch.equal(ours(torch.tensor([3, 0])), ref(torch.tensor([3, 0])))
    trainable = TokenEmbedding.from_pretrained(table, freeze=False)
    assert trainable.weight.requires_grad
    via_weight = TokenEmbedding(4, 3, _weight=table, _freeze=True)
    assert not via_weight.weight.requires_grad
    with pytest.raises(RuntimeError) as e:
        TokenEmbedding.from_pretrained(torch.zeros(4))
    assert getattr(e.value, "code", None) == "SHAPE_MISMATCH"
    with pytest.raises(ValueError, match="INVALID_ARGUMENT") as v:
        TokenEmbedding(4, 3, _weight=table, weight=table)
    assert getattr(v.value, "code", None) == "INVALID_ARGUMENT"


def test_options_are_settable_and_revalidated() -> None:
    ref, ours = _pair(10, 3)
    for name, value in (
        ("padding_idx", -1),
        ("max_norm", 1.0),
        ("norm_type", 1.0),
        ("scale_grad_by_freq", True),
    ):
        setattr(ref, name, value if name != "padding_idx" else 9)  # torch stores it as given
        setattr(ours, name, value)
    assert ours.padding_idx == 9
    assert ours.config.count_scope == "invocation"  # nn.Embedding's per-call counts
    ids = torch.tensor([[1, 1, 9, 4]])
    assert torch.equal(ours(ids), ref(ids))
    assert torch.equal(ours.weight, ref.weight)  # max_norm renormalized the same rows
    ours.scale_grad_by_freq = False
    assert ours.config.count_scope is None
    ours.sparse = True
    assert ours.config.sparse
    with pytest.raises(IndexError) as e:
        ours.padding_idx = 10
    assert getattr(e.value, "code", None) == "PAD_ID_INVALID"
    with pytest.raises(ValueError, match="INVALID_ARGUMENT") as v:
        ours.max_norm = -1.0
    assert getattr(v.value, "code", None) == "INVALID_ARGUMENT"


def test_id_range_follows_the_current_weight() -> None:
    emb = TokenEmbedding(4, 3)
    emb.weight = nn.Parameter(torch.randn(6, 3))
    assert emb(torch.tensor([5])).shape == (1, 3)  # a new row, addressable at once
    with pytest.raises(IndexError) as e:
        emb(torch.tensor([6]))
    assert getattr(e.value, "code", None) == "ID_OUT_OF_RANGE"
    emb.weight.data = torch.randn(8, 3)  # the way resize_token_embeddings grows a table
    emb.num_embeddings = 8
    assert emb(torch.tensor([7])).shape == (1, 3)


def test_errors_are_the_builtin_types_torch_raises() -> None:
    emb, ref = TokenEmbedding(4, 3), nn.Embedding(4, 3)
    for bad, builtin in ((torch.tensor([4]), IndexError), (torch.tensor([1.0]), RuntimeError)):
        with pytest.raises(builtin):
            ref(bad)
        with pytest.raises(builtin) as e:
            emb(bad)
        assert isinstance(e.value, EmbeddingError)


def test_state_dict_copy_and_pickle_round_trip() -> None:
    ref, ours = _pair(6, 2, padding_idx=1, max_norm=2.0)
    ref.load_state_dict(ours.state_dict())
    assert torch.equal(ref.weight, ours.weight)
    for clone in (copy.deepcopy(ours), pickle.loads(pickle.dumps(ours))):
        assert clone.config == ours.config
        assert torch.equal(clone.weight, ours.weight)


# --- TokenEmbeddingBag -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"mode": "sum", "padding_idx": -1},
        {"mode": "mean", "max_norm": 1.0, "norm_type": 1.0},
        {"mode": "mean", "scale_grad_by_freq": True},
        {"mode": "max", "padding_idx": 2},
        {"mode": "sum", "sparse": True, "include_last_offset": True},
    ],
)
def test_bag_matches_torch(kwargs: dict[str, object]) -> None:
    torch.manual_seed(0)
    ref = nn.EmbeddingBag(7, 3, **kwargs)  # type: ignore[arg-type]
    torch.manual_seed(0)
    ours = TokenEmbeddingBag(7, 3, **kwargs)  # type: ignore[arg-type]
    assert repr(ours).replace("TokenEmbeddingBag", "EmbeddingBag") == repr(ref)
    ids = torch.tensor([1, 6, 2, 2, 5, 0])
    offsets = torch.tensor([0, 2, 6] if ours.include_last_offset else [0, 2])
    got, want = ours(ids, offsets), ref(ids, offsets)
    assert torch.equal(got, want)
    got.sum().backward()
    want.sum().backward()
    assert ours.weight.grad is not None
    assert ref.weight.grad is not None
    assert torch.equal(ours.weight.grad.to_dense(), ref.weight.grad.to_dense())


def test_bag_from_pretrained_reset_and_current_range() -> None:
    table = torch.arange(8.0).reshape(4, 2)
    ours = TokenEmbeddingBag.from_pretrained(table, mode="sum", padding_idx=0)
    ref = nn.EmbeddingBag.from_pretrained(table, mode="sum", padding_idx=0)
    assert not ours.weight.requires_grad
    ids = torch.tensor([[0, 3], [1, 2]])
    assert torch.equal(ours(ids), ref(ids))
    ours.weight = nn.Parameter(torch.randn(6, 2))
    assert ours(torch.tensor([[5]])).shape == (1, 2)
    ours.reset_parameters()
    assert not ours.weight[0].any()
    with pytest.raises(IndexError):
        ours(torch.tensor([[6]]))
    with pytest.raises(UsageError):
        TokenEmbeddingBag(4, 2, mode="median")  # type: ignore[arg-type]
