"""Embedding tables: checked lookup, initial-state paths and NumPy oracles (torch).

Owned by the lookup engineer; the init/gradients/numerics engineer appends their
exports here with small edits.
"""

from __future__ import annotations

from tokembed.embedding.contracts import INDEX_DTYPES, first_bad_position, same_device, validate_ids

__all__ = [
    "INDEX_DTYPES",
    "first_bad_position",
    "same_device",
    "validate_ids",
]
