"""NumPy float64 references for every lookup operator and its backward (no torch here).

Each function is the plain textbook formula, written for reading, not speed;
tests prove the torch paths (F.embedding, nn.Embedding options, EmbeddingBag,
tied heads, :class:`~tokembed.embedding.lookup.TokenEmbedding`) equal to them.

* forward: :func:`gather` (X = E[ids]), :func:`one_hot_product` (X = S E with the
  declared V), :func:`bag_reduce` (sum/mean/max over offsets),
  :func:`max_norm_renorm` (the in-place rescale of selected rows),
  :func:`sinusoidal_positions` (the original Transformer's fixed position table).
* backward: :func:`scatter_add_backward` (dE = S^T G, duplicates accumulate,
  PAD excluded), :func:`frequency_scaled_backward` with an explicit count,
  :func:`data_parallel_frequency_backward` (rank-local vs global count scope),
  :func:`coalesce_rows` (sparse layout), :func:`tied_two_path_gradient`
  (S^T G_X + D^T C), :func:`cross_entropy_residual`, :func:`central_difference`.

Example::

    >>> E = np.array([[1.0, 0], [2, 0], [0, 1]])
    >>> scatter_add_backward(np.array([0, 2, 0]), gather(E, np.array([0, 2, 0])), 3).tolist()
    [[2.0, 0.0], [0.0, 0.0], [0.0, 1.0]]
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "bag_reduce",
    "central_difference",
    "coalesce_rows",
    "cross_entropy_residual",
    "data_parallel_frequency_backward",
    "frequency_scaled_backward",
    "gather",
    "max_norm_renorm",
    "one_hot_product",
    "row_counts",
    "scatter_add_backward",
    "sinusoidal_positions",
    "softmax",
    "tied_two_path_gradient",
]

Array = NDArray[np.float64]
Ids = NDArray[np.int64]


def _f64(x: ArrayLike) -> Array:
    return np.asarray(x, dtype=np.float64)


def _ids(x: ArrayLike) -> Ids:
    return np.asarray(x, dtype=np.int64)


def gather(weight: ArrayLike, ids: ArrayLike) -> Array:
    """X[..., :] = E[ids[...], :], shape [*ids.shape, d]."""
    return _f64(weight)[_ids(ids)]


def one_hot_product(weight: ArrayLike, ids: ArrayLike) -> Array:
    """S @ E with S[..., v] = 1[v == id], V taken from the table (never from ids.max())."""
    table = _f64(weight)
    selectors = np.eye(table.shape[0], dtype=np.float64)[_ids(ids)]  # [*ids.shape, V]
    return selectors @ table


def _flat(ids: ArrayLike, grad_output: ArrayLike) -> tuple[Ids, Array]:
    flat = _ids(ids).reshape(-1)
    return flat, _f64(grad_output).reshape(flat.size, -1)


def row_counts(ids: ArrayLike, num_embeddings: int, *, padding_idx: int | None = None) -> Ids:
    """c_j: occurrences of row j in ids, PAD occurrences not counted."""
    flat = _ids(ids).reshape(-1)
    if padding_idx is not None:
        flat = flat[flat != padding_idx]
    return np.bincount(flat, minlength=num_embeddings).astype(np.int64)


def scatter_add_backward(
    ids: ArrayLike, grad_output: ArrayLike, num_embeddings: int, *, padding_idx: int | None = None
) -> Array:
    """dE_j = sum over positions t with ids_t = j (j != PAD) of G_t (np.add.at accumulates)."""
    flat, rows = _flat(ids, grad_output)
    grad = np.zeros((num_embeddings, rows.shape[1]))
    keep = np.ones(flat.size, dtype=bool) if padding_idx is None else flat != padding_idx
    np.add.at(grad, flat[keep], rows[keep])
    return grad


def frequency_scaled_backward(
    ids: ArrayLike,
    grad_output: ArrayLike,
    num_embeddings: int,
    *,
    padding_idx: int | None = None,
    counts: ArrayLike | None = None,
) -> Array:
    """dE_j / c_j (0 where c_j = 0); ``counts`` defaults to this call's own row counts."""
    grad = scatter_add_backward(ids, grad_output, num_embeddings, padding_idx=padding_idx)
    c = row_counts(ids, num_embeddings, padding_idx=padding_idx) if counts is None else counts
    return grad / np.maximum(_f64(c), 1.0)[:, None]


def data_parallel_frequency_backward(
    rank_ids: Sequence[ArrayLike],
    rank_grads: Sequence[ArrayLike],
    num_embeddings: int,
    *,
    scope: Literal["local", "global"],
    padding_idx: int | None = None,
) -> Array:
    """SUM over ranks of frequency-scaled gradients, counting per rank or over all ranks."""
    global_counts = sum(row_counts(i, num_embeddings, padding_idx=padding_idx) for i in rank_ids)
    total = np.zeros((num_embeddings, _f64(rank_grads[0]).shape[-1]))
    for ids, grads in zip(rank_ids, rank_grads, strict=True):
        counts = None if scope == "local" else global_counts
        total += frequency_scaled_backward(
            ids, grads, num_embeddings, padding_idx=padding_idx, counts=counts
        )
    return total


def coalesce_rows(
    ids: ArrayLike, grad_output: ArrayLike, *, padding_idx: int | None = None
) -> tuple[Ids, Array]:
    """Sorted unique touched rows and their summed gradient rows (one value per row)."""
    flat, rows = _flat(ids, grad_output)
    if padding_idx is not None:
        keep = flat != padding_idx
        flat, rows = flat[keep], rows[keep]
    unique, inverse = np.unique(flat, return_inverse=True)
    values = np.zeros((unique.size, rows.shape[1]))
    np.add.at(values, inverse.reshape(-1), rows)
    return unique.astype(np.int64), values


def bag_reduce(
    weight: ArrayLike,
    ids: ArrayLike,
    offsets: ArrayLike,
    *,
    mode: Literal["sum", "mean", "max"],
    padding_idx: int | None = None,
    include_last_offset: bool = False,
    per_sample_weights: ArrayLike | None = None,
) -> Array:
    """One row per bag [o_j, o_{j+1}); PAD excluded; empty bags (or all-PAD) give zeros."""
    table, flat = _f64(weight), _ids(ids).reshape(-1)
    bounds = [int(o) for o in _ids(offsets)]
    if not include_last_offset:
        bounds.append(flat.size)
    scale = np.ones(flat.size) if per_sample_weights is None else _f64(per_sample_weights)
    out = np.zeros((len(bounds) - 1, table.shape[1]))
    for j, (start, end) in enumerate(itertools.pairwise(bounds)):
        members = [t for t in range(start, end) if flat[t] != padding_idx]
        if not members:
            continue
        rows = np.stack([table[flat[t]] * scale[t] for t in members])
        if mode == "sum":
            out[j] = rows.sum(axis=0)
        elif mode == "mean":
            out[j] = rows.sum(axis=0) / len(members)
        else:
            out[j] = rows.max(axis=0)
    return out


def max_norm_renorm(
    weight: ArrayLike, ids: ArrayLike, *, max_norm: float, norm_type: float = 2.0, eps: float = 1e-7
) -> tuple[Array, Ids]:
    """Rescale each distinct selected row with norm > m to m/(norm + eps); return (E', changed).

    ``eps`` is PyTorch's guard in embedding_renorm_ (1e-7); pass 0 for the exact formula.
    """
    table = _f64(weight).copy()
    changed = []
    for row in np.unique(_ids(ids)):
        norm = float(np.sum(np.abs(table[row]) ** norm_type) ** (1.0 / norm_type))
        if norm > max_norm:
            table[row] *= max_norm / (norm + eps)
            changed.append(int(row))
    return table, np.asarray(changed, dtype=np.int64)


def sinusoidal_positions(length: int, d_model: int) -> Array:
    """PE[p, 2k] = sin(p / 10000^(2k/d)), PE[p, 2k+1] = cos(...) (Vaswani et al. 2017)."""
    pe = np.zeros((length, d_model))
    for p in range(length):
        for k in range(0, d_model, 2):
            angle = p / 10000.0 ** (k / d_model)
            pe[p, k] = np.sin(angle)
            if k + 1 < d_model:
                pe[p, k + 1] = np.cos(angle)
    return pe


def softmax(logits: ArrayLike) -> Array:
    """exp(z - max z) / sum, along the last axis."""
    z = _f64(logits)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def cross_entropy_residual(logits: ArrayLike, targets: ArrayLike) -> Array:
    """D = softmax(Z) - Y for integer targets [N] (the sum-reduced cross-entropy gradient)."""
    probs = softmax(logits)
    probs[np.arange(probs.shape[0]), _ids(targets)] -= 1.0
    return probs


def tied_two_path_gradient(
    ids: ArrayLike,
    grad_input: ArrayLike,
    contexts: ArrayLike,
    residual: ArrayLike,
    num_embeddings: int,
    *,
    input_scale: float = 1.0,
    padding_idx: int | None = None,
) -> Array:
    """dE = s * S^T G_X + D^T C for one table used by lookup (scaled by s) and head Z = C E^T."""
    input_path = scatter_add_backward(ids, grad_input, num_embeddings, padding_idx=padding_idx)
    return input_scale * input_path + _f64(residual).T @ _f64(contexts)


def central_difference(
    loss: Callable[[Array], float], point: ArrayLike, *, step: float = 1e-6
) -> Array:
    """dL/dx_i ~ (L(x + h e_i) - L(x - h e_i)) / 2h for every coordinate (error O(h^2))."""
    x = _f64(point)
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[index] += step
        down[index] -= step
        grad[index] = (loss(up) - loss(down)) / (2 * step)
    return grad
