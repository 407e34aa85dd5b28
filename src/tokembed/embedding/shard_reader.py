"""Token shards read back as training batches stamped with the tokenizer that made them.

:func:`open_shards` opens a folder written by ``tokembed tokenize`` (either format): it
reads the manifest, refuses a run that has not finished, checks every shard's index
against its ids file, and memory-maps the ids (nothing is loaded until asked for).
The result, :class:`TokenShards`, is a sequence of documents (``len``, ``[i]``: a
document's ids, its end-of-text id included when the run appended one) and a flat
token stream across shards in order (``window(start, length)``: the training batch
nanoGPT-style loaders cut). Batches are :class:`~tokembed.embedding.addressed.AddressedIds`
stamped with the manifest's address hash, so a :class:`~tokembed.embedding.TokenEmbedding`
bound to another tokenizer refuses them with ``ADDRESS_HASH_MISMATCH`` before step 0.

Example::

    >>> shards = open_shards("shards")  # doctest: +SKIP
    >>> len(shards), shards.tokens  # doctest: +SKIP
    (6021, 1799936)
    >>> batch = shards.window(0, 1024, rows=8)  # doctest: +SKIP
    >>> batch.shape, batch.address_hash == tok.address_hash  # doctest: +SKIP
    (torch.Size([8, 1024]), True)
"""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tokembed.embedding.addressed import AddressedIds
from tokembed.errors import FormatError, UsageError
from tokembed.tokenizer.shards.manifest import Manifest, read_manifest
from tokembed.tokenizer.shards.shard_formats import (
    ids_file,
    malformed_shards,
    read_document_ends,
)

__all__ = ["TokenShards", "open_shards"]


class TokenShards:
    """The documents and the token stream of a finished shard folder (see the module docstring).

    Attributes:
        manifest: the folder's manifest (address hash, inputs, counts, options).
    """

    def __init__(self, folder: Path, manifest: Manifest) -> None:
        self.folder = folder
        self.manifest = manifest
        self._ids: list[np.ndarray[Any, Any]] = []
        self._ends: list[np.ndarray[Any, Any]] = []
        for shard in manifest.shards:
            ends = read_document_ends(folder, shard.name, manifest.format, manifest.dtype)
            if len(ends) != shard.documents or (int(ends[-1]) if len(ends) else 0) != shard.tokens:
                raise malformed_shards(
                    folder / shard.name, "its index disagrees with the manifest's counts"
                )
            path = folder / ids_file(shard.name)
            dtype = np.dtype(manifest.dtype).newbyteorder("<")
            ids = np.memmap(path, dtype=dtype, mode="r") if shard.tokens else np.empty(0, dtype)
            self._ids.append(ids)
            self._ends.append(ends)
        self._first_doc = np.cumsum([0] + [len(e) for e in self._ends]).tolist()
        self._first_token = np.cumsum([0] + [len(i) for i in self._ids]).tolist()

    @property
    def address_hash(self) -> str:
        """The address hash of the tokenizer that made the ids."""
        return self.manifest.address_hash

    @property
    def tokens(self) -> int:
        """Ids in the whole stream (end-of-text ids included)."""
        return int(self._first_token[-1])

    def __len__(self) -> int:
        return int(self._first_doc[-1])

    def __getitem__(self, index: int) -> torch.Tensor:
        """The ids of document ``index`` (negative counts from the end) as int64.

        Raises:
            IndexError: ``index`` is outside ``[-len, len)`` (also a UsageError).
        """
        n = len(self)
        if isinstance(index, bool) or not isinstance(index, int) or not -n <= index < n:
            raise _out_of_range("document", index, n)
        index %= n
        shard = bisect.bisect_right(self._first_doc, index) - 1
        local = index - self._first_doc[shard]
        ends = self._ends[shard]
        start = int(ends[local - 1]) if local else 0
        return torch.from_numpy(self._ids[shard][start : int(ends[local])].astype(np.int64))

    def window(self, start: int, length: int, *, rows: int = 1) -> AddressedIds:
        """``rows`` consecutive windows of ``length`` ids of the stream from ``start``.

        Row ``r`` holds ids ``[start + r * length, start + (r + 1) * length)``; windows
        cross document and shard ends (the end-of-text ids mark documents).

        Raises:
            IndexError: the windows run past the end of the stream, or a negative
                ``start`` or non-positive ``length``/``rows`` (also a UsageError).
        """
        for name, value, low in (("start", start, 0), ("length", length, 1), ("rows", rows, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise _out_of_range(name, value, self.tokens)
        stop = start + rows * length
        if stop > self.tokens:
            raise _out_of_range("window end", stop, self.tokens)
        flat = np.empty(stop - start, dtype=np.int64)
        at = start
        while at < stop:
            shard = bisect.bisect_right(self._first_token, at) - 1
            local = at - self._first_token[shard]
            take = min(stop - at, len(self._ids[shard]) - local)
            flat[at - start : at - start + take] = self._ids[shard][local : local + take]
            at += take
        ids = torch.from_numpy(flat).view(rows, length)
        return AddressedIds(ids=ids, address_hash=self.address_hash)


def _out_of_range(name: str, value: object, size: int) -> UsageError:
    # Also an IndexError (besides INVALID_ARGUMENT's ValueError), as a sequence's index is.
    return UsageError(
        "INVALID_ARGUMENT",
        f"{name} {value!r} is outside the shards ({size:,})",
        value=value,
        fix="index documents in [-len, len) and windows inside the token stream",
        also=(IndexError,),
    )


def open_shards(folder: str | Path) -> TokenShards:
    """The shards under ``folder``, checked (see the module docstring).

    Raises:
        FormatError(MALFORMED_SHARDS): the manifest, an index or an ids file is missing,
            malformed, or disagrees with the others.
        FormatError(SHARDS_INCOMPLETE): the run that writes the folder has not finished.
    """
    folder = Path(folder)
    manifest = read_manifest(folder)
    if not manifest.complete:
        missing = [s.name for s in manifest.shards if not s.complete]
        raise FormatError(
            "SHARDS_INCOMPLETE",
            f"{folder}: {len(missing)} of {len(manifest.shards)} shards are not written yet "
            f"({missing[0]}, ...)",
            value=missing,
            fix="finish the run (tokembed tokenize ... --resume) before reading",
        )
    return TokenShards(folder, manifest)
