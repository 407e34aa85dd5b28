"""Stamped id batches: ids that carry the address space (tokenizer hash) that produced them.

An id is meaningful only against one ordered vocabulary: two tokenizers with the same V can map the same
integer to different pieces, and every shape check still passes. A table bound
to an address hash therefore wants to know which tokenizer produced the batch.
:class:`AddressedIds` is that batch: the ids tensor (not copied), the producing
tokenizer's ``address_hash`` ("sha256:<64 hex>", see
``tokembed.tokenizer.model.address_hash``) and the PAD id the producer used
(None: the producer pads nothing). :class:`~tokembed.embedding.lookup.TokenEmbedding`
accepts it wherever it accepts a bare tensor.

Example::

    >>> batch = AddressedIds(ids=torch.tensor([[1, 4]]), address_hash="sha256:" + "0" * 64)
    >>> batch.shape
    torch.Size([1, 4])
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from tokembed.errors import EmbeddingError, UsageError

__all__ = ["AddressedIds", "SupportsAddressHash", "admit_ids", "check_address_hash"]

_HASH = re.compile(r"sha256:[0-9a-f]{64}")


class SupportsAddressHash(Protocol):
    """Anything that names its address space (``tokembed.tokenizer.Tokenizer`` does)."""

    @property
    def address_hash(self) -> str: ...


def check_address_hash(address_hash: str) -> str:
    """Return ``address_hash`` if it has the form "sha256:<64 lowercase hex>".

    Raises:
        UsageError INVALID_ARGUMENT: any other string.
    """
    if not isinstance(address_hash, str) or not _HASH.fullmatch(address_hash):
        raise UsageError(
            "INVALID_ARGUMENT",
            f"an address hash looks like 'sha256:<64 hex>', got {address_hash!r}",
            value=address_hash,
            fix="pass tokenizer.address_hash",
        )
    return address_hash


@dataclass(frozen=True, kw_only=True, eq=False)
class AddressedIds:
    """Integer ids stamped with the address space that produced them.

    Attributes:
        ids: the id tensor, used as is (no copy, no cast).
        address_hash: "sha256:..." of the producing tokenizer.
        pad_id: the id the producer used for padding positions, or None when the
            batch has no padding convention. A table with ``padding_idx`` refuses a
            batch whose ``pad_id`` differs (PAD_ID_INVALID).

    Raises:
        UsageError INVALID_ARGUMENT: malformed hash, or ids not a tensor.
    """

    ids: torch.Tensor
    address_hash: str
    pad_id: int | None = None

    def __post_init__(self) -> None:
        check_address_hash(self.address_hash)
        if not isinstance(self.ids, torch.Tensor):
            raise UsageError(
                "INVALID_ARGUMENT",
                f"AddressedIds.ids must be a tensor, got {type(self.ids).__name__}",
                value=type(self.ids).__name__,
                fix="use AddressedIds.from_lists(...) for Python lists",
            )

    @classmethod
    def from_lists(
        cls,
        rows: Sequence[Sequence[int]],
        *,
        source: SupportsAddressHash | str,
        pad_id: int | None = None,
        length: int | None = None,
    ) -> AddressedIds:
        """Right-pad encoded rows into one int64 [B, L] batch stamped with ``source``'s hash.

        ``length`` defaults to the longest row. Padding requires ``pad_id``.

        Example::

            >>> AddressedIds.from_lists([[5, 6], [7]], source="sha256:" + "a" * 64, pad_id=0).ids
            tensor([[5, 6],
                    [7, 0]])

        Raises:
            UsageError INVALID_ARGUMENT: rows need padding but ``pad_id`` is None,
                or a row is longer than ``length``.
        """
        address_hash = source if isinstance(source, str) else source.address_hash
        width = max((len(r) for r in rows), default=0) if length is None else length
        if any(len(r) > width for r in rows):
            raise UsageError(
                "INVALID_ARGUMENT",
                f"a row is longer than length={width}",
                value=width,
                fix="truncate rows before batching, or raise length",
            )
        if pad_id is None and any(len(r) != width for r in rows):
            raise UsageError(
                "INVALID_ARGUMENT",
                "rows have different lengths and no pad_id was given",
                value=sorted({len(r) for r in rows}),
                fix="pass pad_id= (the tokenizer's PAD id, a real row address)",
            )
        fill = 0 if pad_id is None else pad_id
        ids = torch.full((len(rows), width), fill, dtype=torch.int64)
        for b, row in enumerate(rows):
            ids[b, : len(row)] = torch.as_tensor(list(row), dtype=torch.int64)
        return cls(ids=ids, address_hash=address_hash, pad_id=pad_id)

    @property
    def shape(self) -> torch.Size:
        return self.ids.shape

    def attention_mask(self) -> torch.Tensor:
        """Bool [*shape]: False at PAD positions (all True when the batch has no PAD)."""
        if self.pad_id is None:
            return torch.ones_like(self.ids, dtype=torch.bool)
        return self.ids.ne(self.pad_id)


def admit_ids(
    batch: torch.Tensor | AddressedIds,
    *,
    address_hash: str | None,
    padding_idx: int | None,
    require_address: bool = False,
) -> torch.Tensor:
    """The ids of ``batch`` if its address space and PAD id agree with a table's.

    A bare tensor passes unless ``require_address``; a stamped batch must carry the
    table's hash (when the table is bound) and a ``pad_id`` equal to ``padding_idx``.

    Raises:
        EmbeddingError ADDRESS_HASH_MISMATCH: other hash, or bare ids where stamped are required.
        EmbeddingError PAD_ID_INVALID: the batch's PAD id differs from ``padding_idx``.
    """
    if not isinstance(batch, AddressedIds):
        if require_address:
            raise EmbeddingError(
                "ADDRESS_HASH_MISMATCH",
                f"the table is bound to {address_hash} and requires stamped batches;"
                " got bare ids whose tokenizer is unknown",
                value=None,
                fix="wrap the ids: AddressedIds(ids=..., address_hash=tokenizer.address_hash)",
            )
        return batch
    if address_hash is not None and batch.address_hash != address_hash:
        raise EmbeddingError(
            "ADDRESS_HASH_MISMATCH",
            f"ids come from address space {batch.address_hash} but the table's rows were"
            f" trained for {address_hash}; in-range ids would read the wrong rows",
            value=batch.address_hash,
            fix="encode with the tokenizer the table is bound to, or load the matching table",
        )
    if batch.pad_id != padding_idx:
        raise EmbeddingError(
            "PAD_ID_INVALID",
            f"the batch pads with id {batch.pad_id} but the table's padding_idx is"
            f" {padding_idx}; PAD rows would train as content or content rows freeze",
            value=(batch.pad_id, padding_idx),
            fix="make the tokenizer's PAD id and padding_idx the same row (or both None)",
        )
    return batch.ids
