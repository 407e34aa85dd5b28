"""A port of the nn.EmbeddingBag part of PyTorch's test/nn/test_embedding.py, class swapped.

Each case re-checks, in our own code, what the upstream case of the same name checks,
with TokenEmbeddingBag (and TokenEmbedding where upstream compares a bag against
nn.Embedding) in place of torch's modules. Upstream cases that call
``F.embedding_bag`` directly run here through the module built over the same weight
(``from_pretrained``), so the table's own checks are on the path. The parametrization is
upstream's CPU instantiation (dtypes, modes, padding), so the counts compare one to one.
The cases whose outcome differs on purpose are listed in docs/embedding.md and tested at
the end of this file.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator

import pytest
import torch
import torch.nn.functional as F

from tokembed.embedding.lookup import TokenEmbedding as Embedding
from tokembed.embedding.variants.bag import TokenEmbeddingBag as EmbeddingBag

INDEX = (torch.int, torch.long)
# Upstream's dtype2prec_DONTUSE: the absolute tolerance of each weight dtype.
PREC = {torch.float: 1e-5, torch.double: 1e-5, torch.half: 1e-2, torch.bfloat16: 1e-1}


def _tol(w_dtype: torch.dtype) -> dict[str, float]:
    # Upstream's absolute tolerance, plus one rounding of the result in half and bfloat16:
    # a bag near 17 in float16 is 1/64 apart from its neighbour, beyond the 0.01 that
    # upstream's absolute-only tolerance meets only for its own random draw.
    low = w_dtype in (torch.half, torch.bfloat16)
    return {"atol": PREC[w_dtype], "rtol": torch.finfo(w_dtype).eps if low else 0.0}


IDS_OFFSETS = list(itertools.product(INDEX, INDEX))
IDS_OFFSETS_WEIGHT = list(
    itertools.product(INDEX, INDEX, (torch.half, torch.bfloat16, torch.float, torch.double))
)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    torch.manual_seed(0)


@pytest.fixture
def double_default() -> Iterator[None]:
    # Upstream's set_default_dtype(torch.double) around the case.
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.double)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def _close(actual: torch.Tensor | None, expected: torch.Tensor | None, **tol: float) -> None:
    assert actual is not None
    assert expected is not None
    if actual.is_sparse:
        actual = actual.to_dense()
    if expected.is_sparse:
        expected = expected.to_dense()
    torch.testing.assert_close(actual, expected, **tol)  # type: ignore[arg-type]


def _bag_over(weight: torch.Tensor, **kwargs: object) -> EmbeddingBag:
    # The module form of F.embedding_bag(ids, weight, ...): the same tensor, trainable.
    return EmbeddingBag.from_pretrained(weight, freeze=False, **kwargs)  # type: ignore[arg-type]


def _reference_bags(
    ids: torch.Tensor,
    weight: torch.Tensor,
    offsets: torch.Tensor,
    mode: str = "sum",
    per_sample_weights: torch.Tensor | None = None,
    include_last_offset: bool = False,
) -> torch.Tensor:
    """Bags reduced one by one from index_select (autograd flows to ``weight``)."""
    scale = per_sample_weights
    if scale is None:
        scale = torch.ones(ids.shape, dtype=weight.dtype)
    rows = weight.index_select(0, ids.long()) * scale.unsqueeze(1)
    starts = offsets.tolist()
    ends = starts[1:] + ([] if include_last_offset else [ids.numel()])
    bags = []
    for start, end in zip(starts, ends, strict=False):
        part = rows[start:end]
        if part.shape[0] == 0:
            bags.append(torch.zeros(weight.shape[1], dtype=rows.dtype))
        elif mode == "sum":
            bags.append(part.sum(0))
        elif mode == "mean":
            bags.append(part.sum(0) / part.shape[0])
        else:
            bags.append(part.max(0)[0])
    return torch.stack(bags)


# --- TestEmbeddingNN (no device) -------------------------------------------------------------


def test_embedding_bag_from_pretrained() -> None:
    table = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    bag = EmbeddingBag.from_pretrained(table)
    assert torch.equal(bag.weight, table)
    ids = torch.tensor([0, 1])
    assert torch.equal(bag(ids, torch.arange(ids.size(0))), table)


def test_embedding_bag_from_pretrained_padding_idx() -> None:
    table = torch.rand(4, 3, requires_grad=True)
    bag = EmbeddingBag.from_pretrained(table, padding_idx=2)
    assert torch.equal(bag.weight, table)  # the given rows, PAD row included, are kept


def test_embedding_bag_functional() -> None:
    ids, table = torch.tensor([[1, 3, 2], [0, 2, 1]]), torch.rand(4, 3, requires_grad=True)
    bag = EmbeddingBag(4, 3)
    bag.weight = torch.nn.Parameter(table)
    assert torch.equal(bag(ids), F.embedding_bag(ids, table))
    padded = EmbeddingBag(4, 3).from_pretrained(table, padding_idx=2)
    assert torch.equal(padded(ids), F.embedding_bag(ids, table, padding_idx=2))


def test_embedding_bag_padding_idx_error() -> None:
    ids, table = torch.tensor([[1, 3, 2], [0, 2, 1]]), torch.rand(4, 3)
    for pad in range(-6, 6):
        if -4 <= pad < 4:
            assert torch.equal(
                _bag_over(table, padding_idx=pad)(ids), F.embedding_bag(ids, table, padding_idx=pad)
            )
            EmbeddingBag(4, 3, padding_idx=pad)
        else:
            # Upstream: RuntimeError from F.embedding_bag, AssertionError from the module.
            # Here both are PAD_ID_INVALID at construction (test_differs_padding_idx_type).
            with pytest.raises(IndexError, match="PAD_ID_INVALID"):
                _bag_over(table, padding_idx=pad)


def test_embeddingbag_from_pretrained() -> None:
    table = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    bag = EmbeddingBag.from_pretrained(table)
    assert torch.equal(bag.weight.data, table)
    assert torch.equal(bag(torch.tensor([[0, 1]])), table.mean(0, keepdim=True))


def test_embeddingbag_from_pretrained_options(double_default: None) -> None:
    table = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    bag = EmbeddingBag.from_pretrained(
        table, max_norm=2.0, norm_type=0.5, scale_grad_by_freq=False, mode="max", sparse=False
    )
    out = bag(torch.tensor([[0, 1]]))
    assert torch.equal(out, table.max(0, keepdim=True)[0])
    # The shared table was renormalized in place.
    assert bool(table.ne(torch.arange(1, 7, dtype=table.dtype).view(2, 3)).all())
    assert bool(table.norm(p=0.5, dim=1).le(2.0).all())


def test_embeddingbag_include_last_offset() -> None:
    bag = EmbeddingBag(100, 3, include_last_offset=True, padding_idx=61)
    ids = torch.tensor([0, 1, 2, 3])
    want = torch.stack([bag.weight[0:3].mean(0), bag.weight[3]])
    # Upstream also feeds offsets [0, 3, 3] (last offset short of the input length),
    # which this table refuses on purpose (test_differs_include_last_offset_short).
    _close(bag(ids, torch.tensor([0, 3, 4])), want)


# --- TestEmbeddingNNDeviceType, CPU ----------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_embedding_bag_1D_padding_idx(dtype: torch.dtype) -> None:
    # 1-D ids cut into bags by offsets must equal the same bags as 2-D rows filled with PAD.
    rng = random.Random(0)
    features, per_bag, num_bags, words = 3, 10, 10, 100

    def flat_bags(include_last: bool, allpad: bool) -> tuple[torch.Tensor, torch.Tensor]:
        empty = rng.randrange(num_bags)
        full = rng.choice([b for b in range(num_bags) if b != empty])
        ids: list[int] = []
        starts: list[int] = []
        for b in range(num_bags):
            starts.append(len(ids))
            size = per_bag if b == full else 0 if b == empty else rng.randint(1, per_bag - 1)
            ids += [1 if allpad else rng.randrange(words) for _ in range(size)]
        if include_last:
            starts.append(len(ids))
        return torch.tensor(ids), torch.tensor(starts)

    def padded_rows(
        ids: torch.Tensor, starts: torch.Tensor, include_last: bool, pad: int
    ) -> torch.Tensor:
        bounds = [*starts.tolist()[: num_bags if include_last else None], ids.numel()]
        rows = torch.full((num_bags, per_bag), pad, dtype=torch.long)
        for b in range(num_bags):
            part = ids[bounds[b] : bounds[b + 1]]
            rows[b, : part.numel()] = part
        return rows

    for mode, sparse, include_last, allpad in itertools.product(
        ["max", "mean", "sum"], [False, True], [False, True], [False, True]
    ):
        if mode == "max" and sparse:
            continue
        ids, starts = flat_bags(include_last, allpad)
        for pad_1d in [*sorted(set(ids.tolist())), None]:
            pad_2d = pad_1d if pad_1d is not None else words
            rows = words if pad_1d is not None else words + 1
            weight = torch.randn(rows, features, dtype=dtype)
            flat = _bag_over(
                weight.clone(),
                padding_idx=pad_1d,
                mode=mode,
                sparse=sparse,
                include_last_offset=include_last,
            )
            fixed = _bag_over(weight.clone(), padding_idx=pad_2d, mode=mode, sparse=sparse)
            got = flat(ids, starts)
            want = fixed(padded_rows(ids, starts, include_last, pad_2d))
            _close(got, want)
            got.sum().backward()
            want.sum().backward()
            _close(flat.weight.grad, fixed.weight.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_embedding_bag_2D_padding_idx(dtype: torch.dtype) -> None:
    # 2-D bags with PAD equal a lookup followed by a reduction that skips PAD entries.
    rng = random.Random(0)

    def reduce_skipping_pad(
        ids: torch.Tensor, weight: torch.Tensor, mode: str, pad: int
    ) -> torch.Tensor:
        rows = F.embedding(ids, weight, padding_idx=pad)
        keep = ids.ne(pad).to(dtype).unsqueeze(-1)
        if mode == "max":
            out = rows.masked_fill(keep == 0, -float("inf")).amax(dim=1)
        else:
            out = (rows * keep).sum(dim=1)
            if mode == "mean":
                out = out / keep.sum(dim=1)
        if mode != "sum":  # an all-PAD bag is a zero row
            out = out.masked_fill(ids.eq(pad).all(dim=-1).unsqueeze(-1), 0)
        return out

    for mode, sparse, allpad, num_rows in itertools.product(
        ["max", "mean", "sum"], [False, True], [False, True], [1, 10]
    ):
        if mode == "max" and sparse:
            continue
        if allpad:
            ids = torch.ones(num_rows, 10, dtype=torch.long)
        else:
            ids = torch.randint(0, 10, (num_rows, 10))
            if num_rows > 1:
                dup = rng.randrange(num_rows)
                ids[dup] = ids[dup][0]  # one row of a single repeated id: all PAD below
        for pad in sorted(set(ids.flatten().tolist())):
            weight = torch.randn(10, 3, dtype=dtype)
            check = weight.clone().requires_grad_(True)
            bag = _bag_over(weight, padding_idx=pad, mode=mode, sparse=sparse)
            got, want = bag(ids), reduce_skipping_pad(ids, check, mode, pad)
            _close(got, want)
            want.sum().backward()
            got.sum().backward()
            _close(bag.weight.grad, check.grad)


@pytest.mark.parametrize(("ids_dtype", "offsets_dtype"), IDS_OFFSETS)
def test_embedding_bag_empty_input(ids_dtype: torch.dtype, offsets_dtype: torch.dtype) -> None:
    empty = torch.tensor([], dtype=ids_dtype)
    for sparse in (True, False):
        bag = EmbeddingBag(4, 3, sparse=sparse)
        for offsets in ([0], [0, 0]):
            out = bag(input=empty, offsets=torch.tensor(offsets, dtype=offsets_dtype))
            assert torch.equal(out, torch.zeros_like(out))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 0])
@pytest.mark.parametrize(
    ("w_dtype", "idx_dtype"), list(itertools.product((torch.float, torch.double), INDEX))
)
def test_embedding_bag_out_of_bounds_idx(
    w_dtype: torch.dtype, idx_dtype: torch.dtype, padding_idx: int | None, mode: str
) -> None:
    negative = torch.tensor([[-1, 1]], dtype=idx_dtype)
    positive = torch.tensor([[11, 8]], dtype=idx_dtype)
    bag = _bag_over(torch.randn(10, 2, dtype=w_dtype), padding_idx=padding_idx, mode=mode)
    scales: list[torch.Tensor | None] = [None]
    if mode == "sum":  # only "sum" takes per_sample_weights
        scales.append(torch.randn(negative.shape, dtype=w_dtype))
    for scale, ids in itertools.product(scales, (negative, positive)):
        with pytest.raises(RuntimeError, match="ID_OUT_OF_RANGE") as e:
            bag(ids, per_sample_weights=scale)
        assert isinstance(e.value, IndexError)  # and still nn.Embedding's type


def test_embedding_bag_dimension_errors() -> None:
    bag = _bag_over(torch.zeros(2, 6, dtype=torch.float64))
    ids = torch.full((2, 0, 0, 6, 6), 2, dtype=torch.int64)
    offsets = torch.full((2, 0, 0, 6, 6), 0, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"SHAPE_MISMATCH: bag ids must be 1-D .* or 2-D"):
        bag(ids, offsets)
    bag = _bag_over(torch.zeros(2, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="INVALID_BAG_OFFSETS: offsets must be 1-D"):
        bag(torch.full((2,), 1, dtype=torch.int64), offsets)
    # from_pretrained refuses a 3-D table; one assigned afterwards is refused at forward.
    with pytest.raises(RuntimeError, match="SHAPE_MISMATCH"):
        _bag_over(torch.zeros(2, 2, 2, dtype=torch.float64))
    bag.weight = torch.nn.Parameter(torch.zeros(2, 2, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="SHAPE_MISMATCH: the bag table must be 2-D"):
        bag(torch.full((2,), 2, dtype=torch.int64), torch.full((2,), 0, dtype=torch.int64))


@pytest.mark.parametrize(("ids_dtype", "offsets_dtype"), IDS_OFFSETS)
def test_EmbeddingBag_per_sample_weights_failures(
    ids_dtype: torch.dtype, offsets_dtype: torch.dtype
) -> None:
    bag = EmbeddingBag(5, 2, mode="sum").to(dtype=torch.float)
    ids = torch.tensor([3, 1, 1, 1, 4, 0], dtype=ids_dtype)
    offsets = torch.tensor([0, 0, 3, 3, 6], dtype=offsets_dtype)
    with pytest.raises(RuntimeError, match="have the same type as"):
        bag(ids, offsets, torch.randn_like(ids, dtype=torch.double))
    with pytest.raises(ValueError, match="same shape as the input"):
        bag(ids, offsets, torch.randn(5, dtype=torch.float))
    fixed = torch.randint(5, (7, 3), dtype=ids_dtype)
    with pytest.raises(ValueError, match="same shape as the input"):
        bag(fixed, None, torch.randn(7 * 3, dtype=torch.float))
    for mode in ("max", "mean"):
        other = EmbeddingBag(5, 2, mode=mode).to(dtype=torch.float)  # type: ignore[arg-type]
        with pytest.raises(NotImplementedError, match="only supported for mode='sum'"):
            other(fixed, None, torch.randn(7, 3, dtype=torch.float))


def _known_bag(mode: str, w_dtype: torch.dtype, include_last: bool = False) -> EmbeddingBag:
    bag = EmbeddingBag(5, 2, mode=mode, include_last_offset=include_last).to(dtype=w_dtype)  # type: ignore[arg-type]
    bag.weight.data.copy_(torch.arange(1, 11).view_as(bag.weight).to(w_dtype))
    return bag


@pytest.mark.parametrize(("ids_dtype", "offsets_dtype", "w_dtype"), IDS_OFFSETS_WEIGHT)
def test_EmbeddingBag_empty_per_sample_weights_and_offsets(
    ids_dtype: torch.dtype, offsets_dtype: torch.dtype, w_dtype: torch.dtype
) -> None:
    tol = _tol(w_dtype)
    for trainable in (True, False):
        bag = _known_bag("sum", w_dtype)
        ids = torch.tensor([], dtype=ids_dtype)
        offsets = torch.tensor([0, 0, 0, 0, 0], dtype=offsets_dtype)
        scale = torch.randn_like(ids, dtype=w_dtype).requires_grad_(trainable)
        want = _reference_bags(ids, bag.weight.detach(), offsets, "sum", scale.detach())
        got = bag(ids, offsets, scale)
        _close(got, want, **tol)
        got.backward(torch.randn_like(want))
        _close(bag.weight.grad, torch.zeros_like(bag.weight), **tol)
        if trainable:
            _close(scale.grad, torch.empty_like(scale), **tol)


@pytest.mark.parametrize(("ids_dtype", "offsets_dtype", "w_dtype"), IDS_OFFSETS_WEIGHT)
def test_EmbeddingBag_per_sample_weights_and_offsets(
    ids_dtype: torch.dtype, offsets_dtype: torch.dtype, w_dtype: torch.dtype
) -> None:
    tol = _tol(w_dtype)
    for trainable in (True, False):
        bag = _known_bag("sum", w_dtype)
        ids = torch.tensor([3, 1, 1, 1, 4, 0], dtype=ids_dtype)
        offsets = torch.tensor([0, 0, 3, 3, 6], dtype=offsets_dtype)
        scale = torch.randn_like(ids, dtype=w_dtype).requires_grad_(trainable)
        ref_scale = scale.detach().requires_grad_(trainable)
        ref_weight = bag.weight.detach().requires_grad_()
        want = _reference_bags(ids, ref_weight, offsets, "sum", ref_scale)
        got = bag(ids, offsets, scale)
        _close(got, want, **tol)
        grad = torch.randn_like(want)
        got.backward(grad)
        want.backward(grad)
        _close(bag.weight.grad, ref_weight.grad, **tol)
        if trainable:
            _close(scale.grad, ref_scale.grad, **tol)


@pytest.mark.parametrize(("ids_dtype", "offsets_dtype", "w_dtype"), IDS_OFFSETS_WEIGHT)
def test_EmbeddingBag_per_sample_weights_and_new_offsets(
    ids_dtype: torch.dtype, offsets_dtype: torch.dtype, w_dtype: torch.dtype
) -> None:
    tol = _tol(w_dtype)
    modes = (("sum", False), ("sum", True), ("max", False), ("mean", False))
    for (mode, weighted), trainable, include_last in itertools.product(
        modes, (True, False), (True, False)
    ):
        bag = _known_bag(mode, w_dtype, include_last)
        ids = torch.tensor([3, 1, 1, 1, 4, 0], dtype=ids_dtype)
        offsets = torch.tensor([0, 0, 3, 3, 6] + ([6] if include_last else []), dtype=offsets_dtype)
        scale = ref_scale = None
        if weighted:
            scale = torch.randn_like(ids, dtype=w_dtype).requires_grad_(trainable)
            ref_scale = scale.detach().requires_grad_(trainable)
        ref_weight = bag.weight.detach().requires_grad_()
        want = _reference_bags(ids, ref_weight, offsets, mode, ref_scale, include_last)
        got = bag(ids, offsets, scale)
        _close(got, want, **tol)
        peer = torch.nn.EmbeddingBag(5, 2, mode=mode, include_last_offset=include_last)
        peer.weight = torch.nn.Parameter(bag.weight.detach().clone())
        assert torch.equal(got, peer(ids, offsets, scale))  # and bit for bit torch's
        grad = torch.randn_like(want)
        got.backward(grad)
        want.backward(grad)
        _close(bag.weight.grad, ref_weight.grad, **tol)
        if weighted and trainable:
            assert scale is not None
            assert ref_scale is not None
            _close(scale.grad, ref_scale.grad, **tol)


def _bag_vs_lookup(
    n: int,
    d: int,
    b: int,
    length: int,
    *,
    max_norm: float | None = None,
    mode: str = "mean",
    w_dtype: torch.dtype = torch.float,
    ids_dtype: torch.dtype = torch.long,
    weighted: bool = False,
    trainable: bool = False,
    sparse: bool = False,
    backward: bool = True,
) -> None:
    """Equal-length bags equal a TokenEmbedding lookup followed by the bag's reduction."""
    bag = EmbeddingBag(n, d, mode=mode, sparse=sparse, max_norm=max_norm).to(w_dtype)  # type: ignore[arg-type]
    lookup = Embedding(n, d, max_norm=max_norm).to(w_dtype)
    lookup.weight.data.copy_(bag.weight)
    ids = torch.randint(n, (b, length), dtype=ids_dtype)
    offsets = torch.arange(0, b, dtype=ids_dtype).mul_(length)
    upstream = torch.rand(b, d, dtype=w_dtype)
    scale = ref_scale = None
    if weighted:
        scale = torch.randn(b, length, dtype=w_dtype).softmax(dim=-1)  # sums to 1 per bag
        ref_scale = scale.clone().requires_grad_(trainable)
        scale.requires_grad_(trainable)
        got = bag(ids.view(-1), offsets, scale.view(-1))
    else:
        got = bag(ids.view(-1), offsets)
    rows = lookup(ids)
    if mode == "sum":
        want = (rows * ref_scale.unsqueeze(-1)).sum(1) if ref_scale is not None else rows.sum(1)
    elif mode == "mean":
        want = rows.mean(1)
    else:
        want = rows.max(1)[0]
    _close(got, want, atol=PREC[w_dtype], rtol=0.0)
    if not backward:
        return
    got.backward(upstream)
    want.backward(upstream)
    # Larger numbers, more rounding: upstream allows 5x the forward tolerance here.
    _close(
        bag.weight.grad,
        lookup.weight.grad,
        atol=PREC[w_dtype] * 5,
        rtol=0.02 if w_dtype == torch.half else 0.0,
    )
    if weighted and trainable:
        assert scale is not None
        assert ref_scale is not None
        _close(scale.grad, ref_scale.grad, atol=PREC[w_dtype], rtol=0.0)


@pytest.mark.parametrize(
    ("ids_dtype", "w_dtype"), list(itertools.product(INDEX, (torch.float, torch.double)))
)
def test_EmbeddingBag_per_sample_weights_and_no_offsets(
    ids_dtype: torch.dtype, w_dtype: torch.dtype
) -> None:
    for sparse, trainable in itertools.product((True, False), (True, False)):
        kwargs = {"mode": "sum", "w_dtype": w_dtype, "ids_dtype": ids_dtype, "sparse": sparse}
        for shape in ((2, 3, 5, 7), (2, 5, 53, 23), (101, 5, 3, 7), (2, 101, 3, 7)):
            _bag_vs_lookup(*shape, weighted=True, trainable=trainable, **kwargs)  # type: ignore[arg-type]


def _check_known_bags(
    mode: str,
    sparse: bool,
    *,
    w_dtype: torch.dtype = torch.double,
    ids_dtype: torch.dtype = torch.long,
    offsets_dtype: torch.dtype = torch.long,
    backward: bool = True,
) -> None:
    """Upstream's _test_EmbeddingBag: a worked example, 2-D bags, empty bags, random
    bags against the lookup, and the refused input combinations."""
    bag = EmbeddingBag(5, 2, mode=mode, sparse=sparse).to(w_dtype)  # type: ignore[arg-type]
    bag.weight.data.copy_(torch.arange(1, 11).view_as(bag.weight).to(w_dtype))
    ids = torch.tensor([3, 1, 1, 1, 4, 0], dtype=ids_dtype)
    offsets = torch.tensor([0, 0, 3, 3, 6], dtype=offsets_dtype)  # bags 0, 2 and 4 are empty
    grad_two = torch.tensor([1, 2, 3, 4], dtype=w_dtype).view(2, 2)
    grad_five = torch.tensor([99, 99, 1, 2, 99, 99, 3, 4, 99, 99], dtype=w_dtype).view(5, 2)
    if mode in ("sum", "mean"):
        den = 1 if mode == "sum" else 3
        out_two = torch.tensor([[13, 16], [13, 16]], dtype=w_dtype) / den
        out_five = torch.tensor([[0, 0], [13, 16], [0, 0], [13, 16], [0, 0]], dtype=w_dtype) / den
        grad_weight = torch.tensor([[3, 4], [5, 8], [0, 0], [1, 2], [3, 4]], dtype=w_dtype) / den
    else:
        out_two = torch.tensor([[7, 8], [9, 10]], dtype=w_dtype)
        out_five = torch.tensor([[0, 0], [7, 8], [0, 0], [9, 10], [0, 0]], dtype=w_dtype)
        grad_weight = torch.tensor([[0, 0], [0, 0], [0, 0], [1, 2], [3, 4]], dtype=w_dtype)
    tol = _tol(w_dtype)

    out = bag(ids, offsets)
    out.backward(grad_five)
    _close(out, out_five)
    _close(bag.weight.grad, grad_weight, **tol)

    bag.zero_grad()
    out = bag(ids.view(2, -1))  # the same bags as 2 x 3
    out.backward(grad_two)
    _close(out, out_two)
    _close(bag.weight.grad, grad_weight, **tol)

    bag.zero_grad()
    bag(
        torch.tensor([], dtype=ids_dtype), torch.tensor([0, 0, 0, 0], dtype=offsets_dtype)
    ).sum().backward()
    _close(bag.weight.grad, torch.zeros_like(bag.weight))

    rng = random.Random(0)
    kwargs = {
        "mode": mode,
        "sparse": sparse,
        "w_dtype": w_dtype,
        "ids_dtype": ids_dtype,
        "backward": backward,
    }
    sizes = (rng.randint(1, 100), rng.randint(1, 100), rng.randint(1, 50), rng.randint(1, 50))
    _bag_vs_lookup(*sizes, **kwargs)  # type: ignore[arg-type]
    for max_norm in (None, 3.0):
        for shape in itertools.product([1, 2], repeat=4):
            _bag_vs_lookup(*shape, max_norm=max_norm, **kwargs)  # type: ignore[arg-type]

    bag = EmbeddingBag(10, 20, mode=mode, sparse=sparse)  # type: ignore[arg-type]
    fixed = torch.ones(3, 4, dtype=ids_dtype)
    starts = torch.arange(0, 3, dtype=offsets_dtype)
    with pytest.raises(ValueError, match="INVALID_BAG_OFFSETS"):
        bag(fixed, starts)  # 2-D ids take no offsets
    with pytest.raises(ValueError, match="INVALID_BAG_OFFSETS"):
        bag(fixed.view(-1))  # 1-D ids need them
    starts[0] = 1
    with pytest.raises(RuntimeError, match="INVALID_BAG_OFFSETS"):
        bag(fixed.view(-1), starts)
    starts[0], starts[-1] = 0, 100
    with pytest.raises(RuntimeError, match="INVALID_BAG_OFFSETS"):
        bag(fixed.view(-1), starts)


@pytest.mark.parametrize(("ids_dtype", "offsets_dtype", "w_dtype"), IDS_OFFSETS_WEIGHT)
def test_embedding_bag_device(
    ids_dtype: torch.dtype, offsets_dtype: torch.dtype, w_dtype: torch.dtype, double_default: None
) -> None:
    dtypes = {"w_dtype": w_dtype, "ids_dtype": ids_dtype, "offsets_dtype": offsets_dtype}
    for mode in ("sum", "mean", "max"):
        _check_known_bags(mode, False, **dtypes)  # type: ignore[arg-type]
    # Upstream skips the sparse backward for float and half on CPU (its precision there).
    backward = w_dtype not in (torch.float, torch.half)
    for mode in ("sum", "mean"):
        _check_known_bags(mode, True, backward=backward, **dtypes)  # type: ignore[arg-type]


@pytest.mark.parametrize(("ids_dtype", "offsets_dtype", "w_dtype"), IDS_OFFSETS_WEIGHT)
def test_embedding_bag_non_contiguous_weight(
    ids_dtype: torch.dtype, offsets_dtype: torch.dtype, w_dtype: torch.dtype
) -> None:
    strided = torch.randn(3, 4, dtype=w_dtype)[:, :3]
    assert not strided.is_contiguous()
    ids = torch.tensor([0, 1, 2], dtype=ids_dtype)
    offsets = torch.tensor([0, 2], dtype=offsets_dtype)
    for mode in ("sum", "mean", "max"):
        got = _bag_over(strided, mode=mode)(ids, offsets)
        _close(got, _bag_over(strided.contiguous(), mode=mode)(ids, offsets))


@pytest.mark.parametrize(("ids_dtype", "offsets_dtype"), IDS_OFFSETS)
def test_embedding_bag_bfloat16(
    ids_dtype: torch.dtype, offsets_dtype: torch.dtype, double_default: None
) -> None:
    dtypes = {"ids_dtype": ids_dtype, "offsets_dtype": offsets_dtype}
    for mode in ("sum", "mean"):
        _check_known_bags(mode, True, w_dtype=torch.bfloat16, **dtypes)  # type: ignore[arg-type]


@pytest.mark.parametrize(("ids_dtype", "offsets_dtype"), IDS_OFFSETS)
def test_embedding_bag_half(ids_dtype: torch.dtype, offsets_dtype: torch.dtype) -> None:
    _check_known_bags(
        "sum", True, w_dtype=torch.float16, ids_dtype=ids_dtype, offsets_dtype=offsets_dtype
    )


@pytest.mark.parametrize(
    ("bag_grad", "scale_grad"), [(True, True), (True, False), (False, True), (False, False)]
)
def test_embedding_bag_per_sample_weights_grad(bag_grad: bool, scale_grad: bool) -> None:
    bag = EmbeddingBag(256, 256, mode="sum")
    bag.requires_grad_(bag_grad)
    ids = torch.arange(1, 5).expand(3, -1)  # an expanded (stride-0) batch of 2-D bags
    scale = torch.rand(3, 4, requires_grad=scale_grad)
    out = bag(ids, per_sample_weights=F.softmax(scale, dim=-1))
    assert out.shape == (3, 256)


# --- cases that differ on purpose (docs/embedding.md) ---------------------------------------


def test_differs_padding_idx_type() -> None:
    # Upstream: padding_idx outside [-V, V) is an AssertionError from the module.
    # Here: PAD_ID_INVALID, an IndexError, because assertions vanish under `python -O`.
    for pad in (-6, -5, 4, 5):
        with pytest.raises(IndexError, match="PAD_ID_INVALID"):
            EmbeddingBag(4, 3, padding_idx=pad)
    for pad in range(-4, 4):
        assert EmbeddingBag(4, 3, padding_idx=pad).padding_idx == pad % 4


def test_differs_include_last_offset_short() -> None:
    # Upstream accepts include_last_offset=True with a last offset short of the input
    # length (the tail ids are silently ignored); here that is INVALID_BAG_OFFSETS.
    bag = EmbeddingBag(100, 3, include_last_offset=True, padding_idx=61)
    with pytest.raises(RuntimeError, match="INVALID_BAG_OFFSETS"):
        bag(torch.tensor([0, 1, 2, 3]), torch.tensor([0, 3, 3]))


def test_differs_empty_offsets_with_ids() -> None:
    # Upstream returns zero bags for empty offsets over non-empty ids (the ids are dropped);
    # here no bag starts at 0, so the ids belong to none: INVALID_BAG_OFFSETS.
    with pytest.raises(RuntimeError, match="INVALID_BAG_OFFSETS: offsets are empty"):
        EmbeddingBag(4, 3)(torch.tensor([1, 2, 3]), torch.tensor([], dtype=torch.long))
    assert EmbeddingBag(4, 3)(
        torch.tensor([], dtype=torch.long), torch.tensor([], dtype=torch.long)
    ).shape == (0, 3)


def test_differs_unknown_mode_at_construction() -> None:
    # Upstream builds the module and raises ValueError at the first forward; here the
    # constructor refuses it (INVALID_ARGUMENT, also a ValueError).
    with pytest.raises(ValueError, match="INVALID_ARGUMENT: unknown mode 'median'"):
        EmbeddingBag(4, 3, mode="median")  # type: ignore[arg-type]


# --- the built-in type of each refusal, against nn.EmbeddingBag ------------------------------

_LONG = torch.long
# case -> (the call, the built-in type nn.EmbeddingBag raises for it)
_REFUSALS: dict[str, tuple[Callable[[torch.nn.EmbeddingBag], object], type[Exception]]] = {
    "2-D ids with offsets": (
        lambda b: b(torch.ones(3, 4, dtype=_LONG), torch.arange(3)),
        ValueError,
    ),
    "1-D ids without offsets": (lambda b: b(torch.ones(12, dtype=_LONG)), ValueError),
    "offsets not 1-D": (
        lambda b: b(torch.ones(2, dtype=_LONG), torch.zeros(2, 2, dtype=_LONG)),
        ValueError,
    ),
    "ids of 3 dimensions": (lambda b: b(torch.ones(2, 2, 2, dtype=_LONG)), ValueError),
    "offsets[0] != 0": (
        lambda b: b(torch.ones(12, dtype=_LONG), torch.tensor([1, 2])),
        RuntimeError,
    ),
    "offset past the input": (
        lambda b: b(torch.ones(12, dtype=_LONG), torch.tensor([0, 100])),
        RuntimeError,
    ),
    "decreasing offsets": (
        lambda b: b(torch.ones(12, dtype=_LONG), torch.tensor([0, 5, 2])),
        RuntimeError,
    ),
    "id past the table": (lambda b: b(torch.tensor([[11, 1]])), RuntimeError),
    "negative id": (lambda b: b(torch.tensor([-1, 1]), torch.tensor([0])), RuntimeError),
    "float ids": (lambda b: b(torch.ones(2, 2)), RuntimeError),
    "float offsets": (
        lambda b: b(torch.ones(4, dtype=_LONG), torch.tensor([0.0, 2.0])),
        RuntimeError,
    ),
}


@pytest.mark.parametrize("case", sorted(_REFUSALS))
def test_refusal_is_also_the_type_torch_raises(case: str) -> None:
    call, builtin = _REFUSALS[case]
    with pytest.raises(builtin) as theirs:
        call(torch.nn.EmbeddingBag(10, 3))
    assert type(theirs.value) is builtin  # the table above is torch's behaviour
    with pytest.raises(builtin) as ours:
        call(EmbeddingBag(10, 3))
    assert getattr(ours.value, "code", None)  # and it carries its code
