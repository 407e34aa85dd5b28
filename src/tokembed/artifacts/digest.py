"""The one digest: ``"sha256:<hex>"`` of a tensor (:func:`tensor_digest`) or of plain data
(:func:`data_digest`: lists, dicts, strings and numbers, as canonical JSON).

Every place that names a tensor's exact contents uses :func:`tensor_digest`: the
digests a checkpoint records (``save_checkpoint(..., digests=True)``, checked by
``verify_checkpoint``), the evidence of a materialized table, a release
manifest's tensors and moments, quantized packs' source, frozen rows, the
tied-replica check across pipeline stages, the logical-table identity and the
guard against forwards that change their table.

Two tensors have equal digests exactly when they hold the same values bit for
bit, in the same order, with the same dtype and shape. The storage layout does
not count (a transposed view made contiguous again digests as the original);
the dtype and shape do, so an empty ``[0, 2]`` table differs from an empty
``[2, 0]`` one and a float32 table from the int32 tensor with the same bytes.
The ``sha256:`` prefix is the form of every hash the project records (the
tokenizer's address hash, vocabulary and row-map digests), so a reader can tell
the algorithm from the string.

A list of records (a report's input files, a checkpoint's table digests) is named by
:func:`data_digest`: the SHA-256 of its canonical JSON (keys sorted, no spaces, ASCII
escapes), so equal data digests equal wherever it is computed, and no torch is needed.

torch is imported when :func:`tensor_digest` is called, not with this module.

Example::

    >>> import torch
    >>> t = torch.arange(6.0).reshape(2, 3)
    >>> tensor_digest(t) == tensor_digest(t.t().contiguous().t())
    True
    >>> tensor_digest(t) == tensor_digest(t.double())
    False
    >>> tensor_digest(t)[:7]
    'sha256:'
    >>> data_digest([["a.py", 3]]) == data_digest([["a.py", 3]]) != data_digest([["a.py", 4]])
    True
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["data_digest", "tensor_digest"]


def tensor_digest(t: torch.Tensor) -> str:
    """``"sha256:<64 hex>"`` of ``t``'s dtype, shape and bytes in row-major order.

    The tensor is detached and, when needed, copied to a contiguous CPU tensor;
    its values are not changed. Any tensor dtype works (bytes are hashed as they
    are stored; NaN payloads count).

    Example::

        >>> tensor_digest(torch.zeros(0, 2)) != tensor_digest(torch.zeros(2, 0))
        True

    Raises:
        nothing of its own; a tensor torch cannot copy to the CPU raises torch's error.
    """
    import torch

    data = t.detach().contiguous().cpu()
    # The dtype and shape go first, separated so that no shape can read as another.
    h = hashlib.sha256(f"{data.dtype}|{tuple(data.shape)}|".encode())
    if data.numel():
        # numpy has no bfloat16/float8: hash the bytes through a uint8 view, uncopied.
        h.update(data.reshape(-1).view(torch.uint8).numpy().data)
    return "sha256:" + h.hexdigest()


def data_digest(value: object) -> str:
    """``"sha256:<64 hex>"`` of ``value`` as canonical JSON (keys sorted, no spaces).

    Tuples digest as the lists JSON makes of them; the order of a list counts, the
    order of a dict's keys does not.

    Example::

        >>> data_digest({"b": 1, "a": [2, 3]}) == data_digest({"a": (2, 3), "b": 1})
        True

    Raises:
        TypeError: ``value`` holds something JSON cannot write (a set, bytes, an object).
    """
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("ascii")).hexdigest()
