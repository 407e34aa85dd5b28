"""TokenEmbedding against F.embedding / nn.Embedding and the NumPy oracles, plus every refusal."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from _lookup_spec import (
    LECTURE_IDS,
    LECTURE_TABLE,
    NORM_IDS,
    NORM_TABLE,
    RANK_GRADS,
    RANK_IDS,
    SPEC_IDS,
    SPEC_TABLE,
    TIED_CONTEXTS,
    TIED_GRAD_X,
    TIED_IDS,
    TIED_RESIDUAL,
    TIED_TOTAL,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from conftest import assert_within, rounding_bound
from tokembed.embedding import oracles as O
from tokembed.embedding.addressed import AddressedIds
from tokembed.embedding.frequency import row_counts
from tokembed.embedding.lookup import LookupConfig, TokenEmbedding
from tokembed.embedding.stamps import apply_input_scale, row_stamp
from tokembed.errors import EmbeddingError, UsageError

HASH_A = "sha256:" + "a" * 64
HASH_B = "sha256:" + "b" * 64


def _spec_embedding(**policy: object) -> TokenEmbedding:
    weight = torch.tensor(SPEC_TABLE, dtype=torch.float64)
    return TokenEmbedding(8, 3, weight=weight, **policy)  # type: ignore[arg-type]


def _ids() -> torch.Tensor:
    return torch.tensor(SPEC_IDS)


def _code(excinfo: pytest.ExceptionInfo[Exception]) -> str:
    return str(getattr(excinfo.value, "code", ""))


# --- forward equality ------------------------------------------------------------------------


def test_worked_trace_shapes_values_and_pad_position() -> None:
    emb = _spec_embedding(padding_idx=0)
    ids = _ids()
    x = emb(ids)
    assert ids.dtype == torch.int64
    assert x.shape == (2, 4, 3)
    assert x.dtype == torch.float64
    assert torch.equal(x, F.embedding(ids, emb.weight))
    assert np.array_equal(x.detach().numpy(), O.gather(SPEC_TABLE, SPEC_IDS))
    assert torch.equal(x[1, 3], emb.weight[0])  # PAD is physically selected
    assert ids.ne(0).tolist() == [[True] * 4, [True, True, True, False]]


def test_gathered_rows_are_fresh_storage() -> None:
    emb = _spec_embedding()
    x = emb(_ids())
    assert x.stride() == (12, 3, 1)
    assert x.untyped_storage().data_ptr() != emb.weight.untyped_storage().data_ptr()
    # duplicate id 1 at (0,0) and (1,0): equal values at element offsets 0 and 12
    assert torch.equal(x[0, 0], x[1, 0])
    flat = x.reshape(-1)
    assert torch.equal(flat[0:3], flat[12:15])
    assert [i * 3 for i in (0, 1, 2, 4, 5, 6)] == [0, 3, 6, 12, 15, 18]  # row starts, d_e = 3


def test_int32_ids_and_nn_embedding_state_dict_interop() -> None:
    ref = nn.Embedding(11, 5, padding_idx=3)
    ours = TokenEmbedding(11, 5, padding_idx=3)
    ours.load_state_dict(ref.state_dict())
    assert list(ours.state_dict()) == ["weight"]
    ids = torch.tensor([[2, 7, 2], [0, 10, 3]], dtype=torch.int32)
    assert torch.equal(ours(ids), ref(ids))
    ref.load_state_dict(ours.state_dict())
    wrapped = TokenEmbedding.from_embedding(ref)
    assert wrapped.weight is ref.weight
    assert wrapped.padding_idx == 3


def test_lookup_matches_one_hot() -> None:
    torch.manual_seed(0)
    ids = torch.tensor([[2, 7, 2], [0, 10, 4]])
    emb = TokenEmbedding(11, 5)
    selected = F.one_hot(ids, num_classes=11).to(emb.weight.dtype) @ emb.weight
    torch.testing.assert_close(emb(ids), selected)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 40).flatmap(
        lambda v: st.tuples(
            st.just(v),
            st.lists(
                st.lists(st.integers(0, v - 1), min_size=1, max_size=6), min_size=1, max_size=4
            ),
        )
    )
)
def test_forward_and_backward_equal_oracles_property(case: tuple[int, list[list[int]]]) -> None:
    v, rows = case
    width = min(len(r) for r in rows)
    ids_np = np.array([r[:width] for r in rows])
    rng = np.random.default_rng(v)
    table = rng.standard_normal((v, 4))
    grad_out = rng.standard_normal((*ids_np.shape, 4))
    emb = TokenEmbedding(v, 4, weight=torch.tensor(table))
    out = emb(torch.tensor(ids_np))
    assert np.array_equal(out.detach().numpy(), O.gather(table, ids_np))
    out.backward(torch.tensor(grad_out))
    assert emb.weight.grad is not None
    # Each row sums its occurrences' gradients; any two orders agree to n eps sum|g|.
    sizes = O.scatter_add_backward(ids_np, np.abs(grad_out), v)
    bound = rounding_bound(np.float64, terms=ids_np.size, magnitude=1.0) * sizes
    assert_within(emb.weight.grad, O.scatter_add_backward(ids_np, grad_out, v), bound)


# --- backward traces ------------------------------------------------------------------------------


def test_repeated_ids_scatter_add() -> None:
    emb = TokenEmbedding(8, 3)
    loss = (emb(torch.tensor([4, 2, 4])) * torch.tensor([1.0, 1.0, 2.0]).unsqueeze(-1)).sum()
    loss.backward()
    assert emb.weight.grad is not None
    assert emb.weight.grad[4].tolist() == [3.0, 3.0, 3.0]
    assert emb.weight.grad[2].tolist() == [1.0, 1.0, 1.0]


def test_duplicates_and_pad_trace_dense_and_sparse() -> None:
    ids = torch.tensor(RANK_IDS)  # both origin ranks as one [2, 4] batch
    grads = torch.tensor(RANK_GRADS, dtype=torch.float64)
    expected = O.scatter_add_backward(RANK_IDS, RANK_GRADS, 8, padding_idx=0)
    dense = _spec_embedding(padding_idx=0)
    dense(ids).backward(grads)
    assert dense.weight.grad is not None
    assert np.array_equal(dense.weight.grad.numpy(), expected)

    sparse = _spec_embedding(padding_idx=0, sparse=True)
    sparse(ids).backward(grads)
    grad = sparse.weight.grad
    assert grad is not None
    assert grad.layout == torch.sparse_coo
    # uncoalesced: one stored row per non-PAD occurrence, in batch order
    assert grad._indices()[0].tolist() == [1, 4, 1, 4, 6, 1, 4]
    unique, values = O.coalesce_rows(RANK_IDS, RANK_GRADS, padding_idx=0)
    coalesced = grad.coalesce()
    assert coalesced.indices()[0].tolist() == unique.tolist() == [1, 4, 6]
    assert coalesced.values().tolist() == values.tolist() == [[5, 3, 2], [6, 3, 1], [0, 1, 3]]
    assert np.array_equal(grad.to_dense().numpy(), expected)


def test_frequency_scopes_invocation_vs_global() -> None:
    grads = [torch.tensor(g, dtype=torch.float64) for g in RANK_GRADS]
    ids = [torch.tensor(i) for i in RANK_IDS]

    local = _spec_embedding(padding_idx=0, scale_grad_by_freq=True, count_scope="invocation")
    torch_ref = nn.Embedding(8, 3, padding_idx=0, scale_grad_by_freq=True, dtype=torch.float64)
    for rank in range(2):  # one invocation per origin rank, gradients summed (DP SUM)
        local(ids[rank]).backward(grads[rank])
        torch_ref(ids[rank]).backward(grads[rank])
    assert local.weight.grad is not None
    assert torch_ref.weight.grad is not None
    expected_local = O.data_parallel_frequency_backward(
        RANK_IDS, RANK_GRADS, 8, scope="local", padding_idx=0
    )
    assert np.array_equal(local.weight.grad.numpy(), expected_local)
    assert np.array_equal(torch_ref.weight.grad.numpy(), expected_local)
    assert local.weight.grad[1].tolist() == [3.0, 2.5, 1.5]

    glob = _spec_embedding(padding_idx=0, scale_grad_by_freq=True, count_scope="global")
    counts = row_counts(ids[0], 8, padding_idx=0) + row_counts(ids[1], 8, padding_idx=0)  # SUM
    for rank in range(2):
        glob(ids[rank], row_counts=counts).backward(grads[rank])
    assert glob.weight.grad is not None
    expected_global = O.data_parallel_frequency_backward(
        RANK_IDS, RANK_GRADS, 8, scope="global", padding_idx=0
    )
    # Sums of up to 8 small integers divided by a count: a few roundings of values <= 9.
    bound = rounding_bound(np.float64, terms=8 + 1, magnitude=9.0)
    assert_within(glob.weight.grad, expected_global, bound)
    assert_within(glob.weight.grad[4], [2.0, 1.0, 1 / 3], bound)


def test_global_scope_with_one_rank_equals_torch_scale_grad_by_freq() -> None:
    ids = torch.tensor([[3, 1, 3, 3], [2, 1, 0, 3]])
    g = torch.randn(2, 4, 5, generator=torch.Generator().manual_seed(1))
    ref = nn.Embedding(6, 5, scale_grad_by_freq=True)
    ours = TokenEmbedding.from_embedding(ref, count_scope="global")
    ours(ids, row_counts=row_counts(ids, 6)).backward(g)
    assert ours.weight.grad is not None
    expected = ours.weight.grad.clone()
    ours.weight.grad = None
    ref(ids).backward(g)
    assert ref.weight.grad is not None
    torch.testing.assert_close(expected, ref.weight.grad)


def test_max_norm_trace_reports_changed_rows() -> None:
    weight = torch.tensor(NORM_TABLE, dtype=torch.float32)
    emb = TokenEmbedding(5, 4, weight=weight.clone(), max_norm=2.0)
    ref = nn.Embedding(5, 4, max_norm=2.0, _weight=weight.clone())
    ids = torch.tensor(NORM_IDS)
    out = emb(ids)
    torch.testing.assert_close(out, ref(ids))
    torch.testing.assert_close(emb.weight.detach(), ref.weight.detach())
    assert emb.last_renormalized_rows is not None
    assert emb.last_renormalized_rows.tolist() == [1]
    expected, changed = O.max_norm_renorm(NORM_TABLE, NORM_IDS, max_norm=2.0)
    assert changed.tolist() == [1]
    # fp32: a norm over 4 entries, a division and a product per entry, values <= 5.
    bound = rounding_bound(torch.float32, terms=4 + 2, magnitude=5.0)
    assert_within(emb.weight, expected, bound)
    assert_within(emb.weight[1], [1.2, 1.6, 0, 0], bound)
    assert torch.equal(emb.weight[3].detach(), weight[3])  # norm 10 but not selected
    emb(ids)
    assert emb.last_renormalized_rows.tolist() == []  # already within the bound


def test_tied_head_two_path_gradient() -> None:
    emb = TokenEmbedding(4, 3, dtype=torch.float64)
    head = nn.Linear(3, 4, bias=False, dtype=torch.float64)
    head.weight = emb.weight  # one Parameter, two roles
    assert head.weight is emb.weight
    x = emb(torch.tensor(TIED_IDS))
    logits = head(torch.tensor(TIED_CONTEXTS, dtype=torch.float64))  # Z = C E^T
    grad_x = torch.tensor(TIED_GRAD_X, dtype=torch.float64)
    residual = torch.tensor(TIED_RESIDUAL, dtype=torch.float64)
    ((x * grad_x).sum() + (logits * residual).sum()).backward()
    assert emb.weight.grad is not None
    # Each entry sums at most 2 lookups and 2 context products of values <= 2.
    bound = rounding_bound(np.float64, terms=4, magnitude=2.0 * 2)
    assert_within(emb.weight.grad, TIED_TOTAL, bound)


def test_tied_head_with_cross_entropy_and_input_scale_equals_oracle() -> None:
    torch.manual_seed(3)
    scale = math.sqrt(3.0)
    emb = TokenEmbedding(4, 3, dtype=torch.float64, input_scale=scale)
    contexts = torch.randn(5, 3, dtype=torch.float64)
    targets = torch.tensor([0, 3, 2, 2, 1])
    grad_x = torch.randn(3, 3, dtype=torch.float64)
    x = emb(torch.tensor(TIED_IDS))
    logits = F.linear(contexts, emb.weight)
    ((x * grad_x).sum() + F.cross_entropy(logits, targets, reduction="sum")).backward()
    residual = O.cross_entropy_residual(logits.detach().numpy(), targets.numpy())
    expected = O.tied_two_path_gradient(
        TIED_IDS, grad_x.numpy(), contexts.numpy(), residual, 4, input_scale=scale
    )
    assert emb.weight.grad is not None
    # Softmax over 4 rows of dot products over 3, summed over 5 contexts and 3 lookups;
    # exp and log add an ulp each (torch and NumPy may use different libraries).
    size = (
        float(contexts.abs().max() * emb.weight.detach().abs().max() + grad_x.abs().max()) * scale
    )
    bound = rounding_bound(np.float64, terms=4 + 3 + 5 + 3 + 2, magnitude=max(size, 1.0))
    assert_within(emb.weight.grad, expected, bound)
    assert (emb.weight.grad != 0).any(dim=1).all()  # rows 0 and 2 absent from input, still updated


def test_three_row_learning_step() -> None:
    emb = TokenEmbedding(3, 2, weight=torch.tensor(LECTURE_TABLE))
    ids = torch.tensor(LECTURE_IDS)
    assert emb(ids).tolist() == [[1, 0], [0, 1], [1, 0]]
    h = torch.tensor([1.0, 0.0], dtype=torch.float64)
    probs = torch.softmax(F.linear(h, emb.weight), dim=-1)  # tied: U = E^T
    assert [round(p, 4) for p in probs.tolist()] == [0.2447, 0.6652, 0.0900]
    optimizer = torch.optim.SGD(emb.parameters(), lr=0.1)
    loss = 0.5 * emb(ids).pow(2).sum()
    assert loss.item() == 1.5
    loss.backward()
    assert emb.weight.grad is not None
    assert emb.weight.grad.tolist() == [[2, 0], [0, 0], [0, 1]]
    optimizer.step()
    # w - 0.1 g: one product and one difference of values <= 2 (0.1 is itself rounded).
    step = rounding_bound(np.float64, terms=3, magnitude=2.0)
    assert_within(emb.weight, [[0.8, 0], [2, 0], [0, 0.9]], step)
    # Squares and a sum of 6 entries <= 2 that already carry the step's rounding.
    loss = (0.5 * emb(ids).pow(2).sum()).item()
    assert_within(loss, 1.045, rounding_bound(np.float64, terms=6, magnitude=2.0) + 6 * 2 * step)


# --- input scale ----------------------------------------------------------------------------------


@pytest.mark.failure_lab("7.2")
def test_input_scale_applied_once_and_recorded() -> None:
    """Applying sqrt(d_model) twice."""
    emb = TokenEmbedding(11, 16, input_scale=math.sqrt(16))
    ids = torch.tensor([[1, 3]])
    out = emb(ids)
    torch.testing.assert_close(out, F.embedding(ids, emb.weight) * 4.0)
    stamp = row_stamp(out)
    assert stamp is not None
    assert stamp.scale == 4.0
    assert stamp.scale_by == "TokenEmbedding"
    with pytest.raises(EmbeddingError) as e:
        apply_input_scale(out, math.sqrt(16), by="caller")  # Harvard wrapper scaling again
    assert e.value.code == "SCALE_APPLIED_TWICE"


# --- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "code"),
    [
        ("cat dog .", "INDEX_DTYPE_MISMATCH"),  # strings
        (torch.tensor([[2314.0, 4812.0]]), "INDEX_DTYPE_MISMATCH"),  # floats / embedded rows
        (torch.randn(1, 2, 3), "INDEX_DTYPE_MISMATCH"),  # already embedded floats
        (F.one_hot(torch.tensor([[1, 2]]), 8).float(), "INDEX_DTYPE_MISMATCH"),
        (torch.tensor([[1, 8]]), "ID_OUT_OF_RANGE"),  # tokenizer emits beyond V
        (torch.tensor([[1, 4, -1]]), "PAD_ID_INVALID"),  # LLaMA pad -1 as an address
        (torch.tensor([[1, 2]], device="meta"), "DEVICE_MISMATCH"),
    ],
)
def test_lookup_refusals(bad: object, code: str) -> None:
    emb = _spec_embedding(padding_idx=0)
    with pytest.raises(EmbeddingError) as e:
        emb(bad)  # type: ignore[arg-type]
    assert e.value.code == code


@pytest.mark.failure_lab("2.3")
def test_one_hot_guard_is_an_opt_in_policy() -> None:
    # Integer one-hot selectors are also a valid id batch (rows 0 and 1), so only a
    # table built with one_hot_guard=True refuses them; nn.Embedding never does.
    """One-hot vectors passed into nn.Embedding."""
    selectors = F.one_hot(torch.tensor([[1, 2, 6]]), 8)
    guarded = _spec_embedding(padding_idx=0, one_hot_guard=True)
    with pytest.raises(EmbeddingError) as e:
        guarded(selectors)
    assert e.value.code == "OPERATOR_CONTRACT_MISMATCH"
    plain = _spec_embedding(padding_idx=0)
    assert torch.equal(plain(selectors), F.embedding(selectors, plain.weight, 0))
    small = TokenEmbedding(3, 2)  # last axis == V and one 1 per row: still ids by default
    assert small(torch.tensor([[0, 1, 0]])).shape == (1, 3, 2)


@pytest.mark.failure_lab("4.2")
def test_pad_convention_naming_is_switchable() -> None:
    """pad_id=-1 passed into embedding lookup."""
    named = TokenEmbedding(8, 3)
    with pytest.raises(IndexError) as e:
        named(torch.tensor([[1, -1]]))
    assert _code(e) == "PAD_ID_INVALID"
    plain = TokenEmbedding(8, 3, name_pad_convention=False)
    with pytest.raises(IndexError) as e:
        plain(torch.tensor([[1, -1]]))
    assert _code(e) == "ID_OUT_OF_RANGE"


def test_out_of_range_message_names_first_position_and_role() -> None:
    emb = TokenEmbedding(8, 3, role="position_ids")
    with pytest.raises(EmbeddingError) as e:
        emb(torch.tensor([[1, 2, 3], [4, 9, 12]]))
    assert e.value.code == "ID_OUT_OF_RANGE"
    assert e.value.value == 9
    assert "position_ids[1, 1] = 9" in str(e.value)


def test_media_features_cast_to_ids_are_refused() -> None:
    features = torch.randn(2, 4, 16, generator=torch.Generator().manual_seed(0))  # [B, n, d_media]
    emb = TokenEmbedding(50, 8)
    with pytest.raises(EmbeddingError) as e:
        emb(features)
    assert e.value.code == "INDEX_DTYPE_MISMATCH"
    with pytest.raises(EmbeddingError) as e:
        emb((features * 100).long())  # the cast "works" and yields negative / huge rows
    assert e.value.code in ("ID_OUT_OF_RANGE", "PAD_ID_INVALID")


@pytest.mark.failure_lab("2.4")
def test_already_embedded_rows_are_not_ids() -> None:
    """Already embedded floats passed into nn.Embedding.

    [B, L, d] rows from one table handed to another lookup: refused like nn.Embedding does.
    """
    first = TokenEmbedding(8, 3)
    rows = first(torch.tensor([[1, 2, 5]]))  # [1, 3, 3] floats, sequence-like
    second = TokenEmbedding(8, 3)
    with pytest.raises(EmbeddingError) as e:
        second(rows)
    assert (e.value.code, e.value.value) == ("INDEX_DTYPE_MISMATCH", torch.float32)
    with pytest.raises(RuntimeError):  # the peer refuses too, without a code
        nn.Embedding(8, 3)(rows)


@pytest.mark.failure_lab("2.5")
def test_media_features_cast_to_in_range_ids_have_no_address() -> None:
    """Media features cast to IDs.

    Cast features can land inside [0, V); only the address binding tells them from ids.
    """
    features = torch.rand(2, 4, 16, generator=torch.Generator().manual_seed(0))  # [B, n, d_media]
    cast = (features * 8).long()[..., 0]  # [B, n] integers in [0, 8): valid-looking addresses
    plain = TokenEmbedding(8, 3)
    assert plain(cast).shape == (2, 4, 3)  # an unbound table reads them as token rows
    bound = TokenEmbedding(8, 3, address_hash=HASH_A, require_address=True)
    with pytest.raises(EmbeddingError) as e:
        bound(cast)
    assert (e.value.code, e.value.value) == ("ADDRESS_HASH_MISMATCH", None)
    ids = AddressedIds(ids=torch.tensor([[1, 2]]), address_hash=HASH_A)
    assert bound(ids).shape == (1, 2, 3)  # ids from the bound tokenizer pass


@pytest.mark.skipif(not torch.cuda.is_available(), reason="a second device is needed to route")
def test_declared_route_copies_ids_refused_otherwise() -> None:
    ids = torch.tensor([[1, 2]])  # CPU ids
    routed = TokenEmbedding(8, 3, id_route="copy", device="cuda")
    out = routed(ids)  # copied to the table's device explicitly
    assert out.device.type == "cuda"
    assert torch.equal(out.cpu(), F.embedding(ids, routed.weight.detach().cpu()))
    with pytest.raises(EmbeddingError) as e:
        TokenEmbedding(8, 3, device="cuda")(ids)
    assert e.value.code == "DEVICE_MISMATCH"


# --- address binding --------------------------------------------------------------------------------


def test_address_hash_binding() -> None:
    emb = _spec_embedding(padding_idx=0, address_hash=HASH_A)
    ids = _ids()
    good = AddressedIds(ids=ids, address_hash=HASH_A, pad_id=0)
    assert torch.equal(emb(good), emb(ids))  # bare ids still accepted unless required
    with pytest.raises(EmbeddingError) as e:
        emb(AddressedIds(ids=ids, address_hash=HASH_B, pad_id=0))
    assert e.value.code == "ADDRESS_HASH_MISMATCH"
    assert e.value.value == HASH_B
    strict = _spec_embedding(padding_idx=0, address_hash=HASH_A, require_address=True)
    with pytest.raises(EmbeddingError) as e:
        strict(ids)
    assert e.value.code == "ADDRESS_HASH_MISMATCH"


def test_swapped_source_and_target_tables_are_refused() -> None:
    src = TokenEmbedding(8, 3, address_hash=HASH_A)
    tgt = TokenEmbedding(8, 3, address_hash=HASH_B)
    tgt_batch = AddressedIds(ids=torch.tensor([[1, 2]]), address_hash=HASH_B)
    assert tgt(tgt_batch).shape == (1, 2, 3)
    with pytest.raises(EmbeddingError) as e:
        src(tgt_batch)  # same V, same shapes, wrong address space
    assert e.value.code == "ADDRESS_HASH_MISMATCH"


class _FakeTables:
    id_range = 9


class _FakeTokenizer:
    address_hash = HASH_B
    tables = _FakeTables()


def test_bind_address_checks_row_count_against_tokenizer() -> None:
    emb = TokenEmbedding(8, 3)
    with pytest.raises(EmbeddingError) as e:
        emb.bind_address(_FakeTokenizer())
    assert (e.value.code, e.value.value) == ("ID_OUT_OF_RANGE", 8)  # ids up to 8, rows 0..7
    emb.bind_address(HASH_A, id_range=8)
    assert emb.config.address_hash == HASH_A
    with pytest.raises(UsageError) as u:
        emb.bind_address("md5:abc")
    assert u.value.code == "INVALID_ARGUMENT"


# --- PAD policy --------------------------------------------------------------------------------------


@pytest.mark.failure_lab("4.3")
@pytest.mark.parametrize(
    ("batch_pad", "table_pad"),
    [(0, None), (None, 0), (0, 2), (-1, 0)],
)
def test_batch_and_table_pad_ids_must_agree(batch_pad: int | None, table_pad: int | None) -> None:
    """PAD row updates unexpectedly."""
    emb = TokenEmbedding(8, 3, padding_idx=table_pad)
    batch = AddressedIds(ids=torch.tensor([[1, 2]]), address_hash=HASH_A, pad_id=batch_pad)
    with pytest.raises(EmbeddingError) as e:
        emb(batch)
    assert e.value.code == "PAD_ID_INVALID"


@pytest.mark.parametrize("padding_idx", [-9, 8])
def test_padding_idx_must_be_a_row(padding_idx: int) -> None:
    with pytest.raises(EmbeddingError) as e:
        TokenEmbedding(8, 3, padding_idx=padding_idx)
    assert e.value.code == "PAD_ID_INVALID"


@pytest.mark.failure_lab("7.7")
def test_zero_pad_row_policy() -> None:
    """Assuming padding_idx forces a permanent zero row."""
    nonzero = torch.tensor(SPEC_TABLE)
    nonzero[0] = 1.0
    with pytest.raises(EmbeddingError) as e:  # supplied weights bypass the constructor's zeroing
        TokenEmbedding(8, 3, weight=nonzero, padding_idx=0, zero_pad_row=True)
    assert e.value.code == "PAD_ROW_NOT_ZERO"
    allowed = TokenEmbedding(8, 3, weight=nonzero.clone(), padding_idx=0)  # gradient rule only
    assert allowed(torch.tensor([0])).tolist() == [[1.0, 1.0, 1.0]]

    emb = TokenEmbedding(8, 3, padding_idx=0, zero_pad_row=True)
    with pytest.raises(EmbeddingError) as e:  # a checkpoint with a nonzero PAD row
        emb.load_state_dict({"weight": nonzero})
    assert e.value.code == "PAD_ROW_NOT_ZERO"
    assert not emb.weight[1:].eq(nonzero[1:].float()).all()  # refused before copying
    emb.load_state_dict({"weight": torch.tensor(SPEC_TABLE, dtype=torch.float32)})
    assert not emb.weight[0].any()
    x = emb(_ids())
    assert not x[_ids() == 0].any()  # PAD positions read a zero row
    opt = torch.optim.AdamW(emb.parameters(), lr=0.1, weight_decay=0.1)
    x.sum().backward()
    opt.step()
    assert not emb.weight[0].any()  # zero row stays zero under decoupled decay
    with torch.no_grad():
        emb.weight[0] += 0.5  # e.g. a checkpoint or a tied head wrote it
    with pytest.raises(EmbeddingError) as e:
        emb(_ids())
    assert e.value.code == "PAD_ROW_NOT_ZERO"


def test_pad_row_receives_no_lookup_gradient() -> None:
    emb = TokenEmbedding(8, 3, padding_idx=0)
    emb(_ids()).sum().backward()
    assert emb.weight.grad is not None
    assert not emb.weight.grad[0].any()
    assert emb.weight.grad[2].tolist() == [2.0, 2.0, 2.0]
    unpadded = TokenEmbedding(8, 3)  # PAD row updates unexpectedly without padding_idx
    unpadded(_ids()).sum().backward()
    assert unpadded.weight.grad is not None
    assert unpadded.weight.grad[0].tolist() == [1.0] * 3


# --- configuration -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "code"),
    [
        ({"scale_grad_by_freq": True}, "FREQ_COUNT_SCOPE_UNDECLARED"),
        (
            {"scale_grad_by_freq": True, "count_scope": "invocation", "sparse": True},
            "SPARSE_WITH_FREQ_SCALING",
        ),
        ({"count_scope": "global"}, "INVALID_ARGUMENT"),
        ({"zero_pad_row": True}, "INVALID_ARGUMENT"),
        ({"max_norm": -1.0}, "INVALID_ARGUMENT"),
        ({"norm_type": 0.0}, "INVALID_ARGUMENT"),
        ({"checks": "never"}, "INVALID_ARGUMENT"),
        ({"input_scale": float("nan")}, "INVALID_ARGUMENT"),
        ({"address_hash": "sha256:xyz"}, "INVALID_ARGUMENT"),
        ({"require_address": True}, "INVALID_ARGUMENT"),
        ({"id_route": "teleport"}, "INVALID_ARGUMENT"),
    ],
)
def test_config_refusals(policy: dict[str, object], code: str) -> None:
    with pytest.raises((EmbeddingError, UsageError)) as e:
        LookupConfig(num_embeddings=8, embedding_dim=3, **policy)  # type: ignore[arg-type]
    assert _code(e) == code


@pytest.mark.failure_lab("5.2")
def test_global_scope_needs_counts() -> None:
    """Frequency scaling uses an undeclared count scope."""
    emb = TokenEmbedding(8, 3, scale_grad_by_freq=True, count_scope="global")
    with pytest.raises(EmbeddingError) as e:
        emb(_ids())
    assert e.value.code == "FREQ_COUNT_SCOPE_UNDECLARED"
    with pytest.raises(EmbeddingError) as e:
        emb(_ids(), row_counts=torch.ones(7, dtype=torch.int64))
    assert e.value.code == "SHAPE_MISMATCH"


def test_from_config_round_trip_and_repr() -> None:
    config = LookupConfig(num_embeddings=8, embedding_dim=3, padding_idx=0, input_scale=2.0)
    emb = TokenEmbedding.from_config(config)
    assert emb.config == config
    assert "padding_idx=0" in repr(emb)
    assert "input_scale=2.0" in repr(emb)
    with pytest.raises(EmbeddingError) as e:
        TokenEmbedding(8, 3, weight=torch.zeros(7, 3))
    assert e.value.code == "SHAPE_MISMATCH"


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_weights_are_refused_at_construction_and_load(bad: float) -> None:
    weight = torch.zeros(5, 3)
    weight[3, 2] = bad
    with pytest.raises(EmbeddingError) as e:
        TokenEmbedding(5, 3, weight=weight)
    assert (e.value.code, e.value.value) == ("NON_FINITE_VALUES", 3)
    emb = TokenEmbedding(5, 3)
    before = emb.weight.detach().clone()
    with pytest.raises(EmbeddingError) as e:
        emb.load_state_dict({"weight": weight})
    assert e.value.code == "NON_FINITE_VALUES"
    assert torch.equal(emb.weight, before)
