"""The NumPy oracles reproduce worked hand traces exactly (no torch involved)."""

from __future__ import annotations

import ast
import inspect

import numpy as np
from _lookup_spec import (
    LECTURE_IDS,
    LECTURE_TABLE,
    NORM_IDS,
    NORM_TABLE,
    RANK_GRADS,
    RANK_IDS,
    SPEC_BRIDGE,
    SPEC_IDS,
    SPEC_TABLE,
    TIED_CONTEXTS,
    TIED_GRAD_X,
    TIED_IDS,
    TIED_RESIDUAL,
    TIED_TOTAL,
)

from conftest import assert_within, rounding_bound
from tokembed.embedding import oracles as O


def test_oracle_module_imports_numpy_only() -> None:
    tree = ast.parse(inspect.getsource(O))
    imported = {
        (node.module or "").split(".")[0] if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported <= {"__future__", "collections", "typing", "numpy", "itertools"}


# --- forward: gather, bridge, one-hot -------------------------------------------------------


def test_gather_and_one_hot_agree_on_spec_trace() -> None:
    x = O.gather(SPEC_TABLE, SPEC_IDS)
    assert x.shape == (2, 4, 3)
    assert np.array_equal(x, O.one_hot_product(SPEC_TABLE, SPEC_IDS))
    assert np.array_equal(x[1, 3], SPEC_TABLE[0])  # the PAD position still selects row 0
    assert np.array_equal(x[0, 0], x[1, 0])  # duplicate id 1 at (0,0) and (1,0)


def test_factorized_bridge_trace() -> None:
    hidden = O.gather(SPEC_TABLE, SPEC_IDS) @ SPEC_BRIDGE  # [2,4,3] @ [3,5]
    assert hidden.shape == (2, 4, 5)
    assert hidden[0, 0].tolist() == [1.5, 0.0, 1.5, -0.5, -1.0]  # E[1] @ P
    assert hidden[0, 1].tolist() == [1.5, 0.0, 0.0, 0.5, -2.0]  # E[4] @ P


def test_one_hot_width_is_the_declared_vocabulary() -> None:
    # ids touch only rows 0..2 of an 8-row table: the product still uses V = 8.
    small = O.one_hot_product(SPEC_TABLE, [[0, 2, 1]])
    assert np.array_equal(small, SPEC_TABLE[[[0, 2, 1]]])


# --- backward: scatter-add ---------------------------------------------------------------------


def test_duplicate_ids_accumulate() -> None:
    ids = np.concatenate(RANK_IDS)
    grads = np.concatenate(RANK_GRADS)
    d_e = O.scatter_add_backward(ids, grads, 8, padding_idx=0)
    assert d_e[1].tolist() == [5, 3, 2]
    assert d_e[4].tolist() == [6, 3, 1]
    assert d_e[6].tolist() == [0, 1, 3]
    assert d_e[0].tolist() == [0, 0, 0]  # PAD's [9,9,9] never arrives
    assert not d_e[[2, 3, 5, 7]].any()


def test_fancy_index_plus_equals_overwrites_duplicates() -> None:
    # The failure "duplicate IDs overwrite instead of accumulate", in NumPy terms.
    ids = np.concatenate(RANK_IDS)
    grads = np.concatenate(RANK_GRADS).astype(float)
    wrong = np.zeros((8, 3))
    wrong[ids] += grads  # one write per distinct index: the last occurrence wins
    right = O.scatter_add_backward(ids, grads, 8)
    assert wrong[1].tolist() == [1, 2, 1]  # only rank 1's last occurrence of id 1
    assert right[1].tolist() == [5, 3, 2]


def test_frequency_count_scopes_differ() -> None:
    local = O.data_parallel_frequency_backward(
        RANK_IDS, RANK_GRADS, 8, scope="local", padding_idx=0
    )
    glob = O.data_parallel_frequency_backward(
        RANK_IDS, RANK_GRADS, 8, scope="global", padding_idx=0
    )
    assert local[1].tolist() == [3.0, 2.5, 1.5]
    assert local[4].tolist() == [3.0, 2.5, 0.5]
    # Sums of up to 8 small integers (<= 9) divided by a count: a few roundings each.
    bound = rounding_bound(np.float64, terms=8 + 1, magnitude=9.0)
    assert_within(glob[1], [5 / 3, 1.0, 2 / 3], bound)
    assert_within(glob[4], [2.0, 1.0, 1 / 3], bound)
    assert glob[6].tolist() == local[6].tolist() == [0, 1, 3]  # count 1 in both scopes
    assert np.abs(local - glob).max() > 1.0  # the scopes differ by whole units


def test_coalesced_sparse_rows() -> None:
    ids = np.concatenate(RANK_IDS)
    unique, values = O.coalesce_rows(ids, np.concatenate(RANK_GRADS), padding_idx=0)
    assert unique.tolist() == [1, 4, 6]
    assert values.tolist() == [[5, 3, 2], [6, 3, 1], [0, 1, 3]]
    dense = np.zeros((8, 3))
    dense[unique] = values
    assert np.array_equal(
        dense, O.scatter_add_backward(ids, np.concatenate(RANK_GRADS), 8, padding_idx=0)
    )


# --- bags, max_norm ------------------------------------------------------------


def test_bag_sum_and_mean() -> None:
    flat, offsets = np.array(SPEC_IDS).reshape(-1), [0, 4, 8]
    kw = {"padding_idx": 0, "include_last_offset": True}
    assert O.bag_reduce(SPEC_TABLE, flat, offsets, mode="sum", **kw).tolist() == [
        [2.0, 3.0, 1.5],
        [1.5, 0.5, 3.0],
    ]
    mean = O.bag_reduce(SPEC_TABLE, flat, offsets, mode="mean", **kw)
    # A sum of at most 4 halves and ones, then one division.
    assert_within(
        mean,
        [[0.5, 0.75, 0.375], [0.5, 0.5 / 3, 1.0]],
        rounding_bound(np.float64, terms=4 + 1, magnitude=3.0),
    )
    # without excluding PAD, bag 1's mean would divide by 4
    assert O.bag_reduce(SPEC_TABLE, flat, [0, 4], mode="mean")[1, 2] == 0.75


def test_max_norm_trace() -> None:
    renormed, changed = O.max_norm_renorm(NORM_TABLE, NORM_IDS, max_norm=2.0, eps=0.0)
    assert changed.tolist() == [1]
    # A norm over 4 entries, a division and a product, values <= 5.
    assert_within(
        renormed[1], [1.2, 1.6, 0.0, 0.0], rounding_bound(np.float64, terms=4 + 2, magnitude=5.0)
    )
    for row in (0, 2, 3, 4):  # selected-but-small, and unselected (row 3 norm 10)
        assert np.array_equal(renormed[row], NORM_TABLE[row])


# --- tied trace, three-row learning step --------------------------------------------------------------


def test_tied_two_path_gradient() -> None:
    total = O.tied_two_path_gradient(TIED_IDS, TIED_GRAD_X, TIED_CONTEXTS, TIED_RESIDUAL, 4)
    # Each entry sums at most 2 lookups and 2 context products of values <= 2 (the
    # decimals 0.1, 0.2... are themselves rounded).
    bound = rounding_bound(np.float64, terms=4, magnitude=2.0 * 2)
    assert_within(total, TIED_TOTAL, bound)
    output_only = np.array(TIED_RESIDUAL).T @ np.array(TIED_CONTEXTS)
    want = [[0.1, 0, -0.5], [-0.4, -0.7, 0.6], [0.2, 0.1, -0.8], [0.1, 0.6, 0.7]]
    assert_within(output_only, want, bound)
    assert_within(np.array(TIED_RESIDUAL).sum(axis=1), 0.0, bound)


def test_lecture_lookup_and_tied_untied_scores() -> None:
    assert O.gather(LECTURE_TABLE, LECTURE_IDS).tolist() == [[1, 0], [0, 1], [1, 0]]
    h = np.array([1.0, 0.0])
    z_tied = h @ LECTURE_TABLE.T  # U = E^T
    assert z_tied.tolist() == [1, 2, 0]
    assert np.round(O.softmax(z_tied), 4).tolist() == [0.2447, 0.6652, 0.0900]
    assert int(np.argmax(z_tied)) == 1  # h = E_0, yet the tied head prefers id 1
    untied = np.array([[0.0, 1, -1], [2, 0, 1]])
    assert (h @ untied).tolist() == [0, 1, -1]


def _lecture_loss(table: np.ndarray) -> float:
    return 0.5 * float(np.sum(O.gather(table, LECTURE_IDS) ** 2))  # targets Y_t = [0, 0]


def test_lecture_learning_step_and_finite_differences() -> None:
    assert _lecture_loss(LECTURE_TABLE) == 1.5
    grad = O.scatter_add_backward(LECTURE_IDS, O.gather(LECTURE_TABLE, LECTURE_IDS), 3)
    assert grad.tolist() == [[2, 0], [0, 0], [0, 1]]
    # The loss is quadratic, so the central difference has no truncation error; left is
    # the rounding of two losses (6 squares <= 4, summed) divided by 2h, h = 1e-6.
    fd_bound = rounding_bound(np.float64, terms=6 + 2, magnitude=4.0) / 1e-6
    assert_within(O.central_difference(_lecture_loss, LECTURE_TABLE), grad, fd_bound)
    stepped = LECTURE_TABLE - 0.1 * grad
    # w - 0.1 g: one product and one difference of values <= 2 (0.1 is itself rounded).
    step = rounding_bound(np.float64, terms=3, magnitude=2.0)
    assert_within(stepped, [[0.8, 0], [2, 0], [0, 0.9]], step)
    loss_bound = rounding_bound(np.float64, terms=6, magnitude=2.0) + 6 * 2 * step
    assert_within(_lecture_loss(stepped), 1.045, loss_bound)


def test_cross_entropy_residual_rows_sum_to_zero() -> None:
    d = O.cross_entropy_residual([[1.0, 2.0, 0.0]], [0])
    # The worked example prints 4 decimals: half a unit of the last place.
    assert_within(d, [[0.2447 - 1, 0.6652, 0.0900]], 0.5e-4)
    # Three exps (an ulp each), their sum and three divisions, values <= 1.
    assert_within(d.sum(), 0.0, rounding_bound(np.float64, terms=3 + 3 + 3, magnitude=1.0))


def test_sinusoidal_positions_first_rows() -> None:
    pe = O.sinusoidal_positions(3, 4)
    assert pe[0].tolist() == [0.0, 1.0, 0.0, 1.0]
    # 1 / 10000^(2k/d) by another route (exp/log or power, an ulp or two each), then sin/cos.
    want = [np.sin(1), np.cos(1), np.sin(0.01), np.cos(0.01)]
    assert_within(pe[1], want, rounding_bound(np.float64, terms=4, magnitude=1.0))
