"""Row-sharded embedding checkpoints: save at one tensor-parallel size, load at another.

A vocabulary-sharded table is saved as a distributed checkpoint folder
(:func:`tokembed.artifacts.dcp_io.write_dcp`, the project's one writer of sharded
state): the logical ``[V, d]`` tensor ``"weight"``, each rank's rows ``[s_r, e_r)``
one chunk of it, and the record (``tokembed.json``) naming the tokenizer address
hash the rows belong to and the intervals they were saved at. Loading at any size
reads, for each target interval, only the overlapping chunks, so the logical table
— not the physical files — is what survives a reshard. A whole model with such
tables goes through :func:`tokembed.checkpoint.save_checkpoint` into the same kind
of folder; these functions serve one table.

Refusals: ParallelError SHARD_LAYOUT_MISMATCH for saved chunks that leave a gap or
overlap, a folder that holds no table, rows outside the table or a target table
of another shape; CheckpointError CHECKPOINT_SHARD_MISSING / MALFORMED_CHECKPOINT
for a damaged folder (as :func:`~tokembed.artifacts.dcp_metadata.read_dcp_metadata`);
EmbeddingError ADDRESS_HASH_MISMATCH for a target bound to another tokenizer.

Example::

    save_vocab_shards(emb_tp2, ckpt)       # every rank of the TP=2 group
    load_vocab_shards(emb_tp4, ckpt)       # every rank of a TP=4 group: its rows only
    torch.equal(emb_tp4.gather_weight(), emb_tp2_full)   # True
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn
from torch.distributed import ProcessGroup

from tokembed.artifacts.dcp_io import TensorPiece, read_dcp_tensor, write_dcp
from tokembed.artifacts.dcp_metadata import read_dcp_metadata, read_dcp_record
from tokembed.embedding.addressed import check_address_hash
from tokembed.embedding.lookup_checks import check_finite, check_pad_row
from tokembed.embedding.lookup_config import LookupConfig
from tokembed.errors import EmbeddingError, ParallelError
from tokembed.parallel.intervals import validate_cover

__all__ = [
    "RowShardedModule",
    "ShardLayout",
    "load_rows",
    "load_vocab_shards",
    "read_layout",
    "save_shards",
    "save_vocab_shards",
]

_TENSOR = "weight"


class RowShardedModule(Protocol):
    """What saving and loading need of a row-sharded table: VocabParallelEmbedding,
    VocabParallelLMHead (untied), RowRoutedEmbedding."""

    weight: nn.Parameter
    group: ProcessGroup | None
    config: LookupConfig

    @property
    def num_embeddings(self) -> int: ...

    @property
    def embedding_dim(self) -> int: ...

    @property
    def intervals(self) -> list[tuple[int, int]]: ...

    @property
    def rank(self) -> int: ...

    @property
    def vocab_start(self) -> int: ...

    @property
    def vocab_end(self) -> int: ...


def _mismatch(message: str, value: object, fix: str) -> ParallelError:
    return ParallelError("SHARD_LAYOUT_MISMATCH", message, value=value, fix=fix)


@dataclass(frozen=True, kw_only=True)
class ShardLayout:
    """The logical table a checkpoint folder holds: its size, dtype, saved row intervals.

    ``files`` names the data file that holds each interval's rows.
    """

    num_embeddings: int
    embedding_dim: int
    dtype: str
    intervals: tuple[tuple[int, int], ...]
    files: tuple[str, ...]
    address_hash: str | None = None

    def __post_init__(self) -> None:
        if self.address_hash is not None:
            check_address_hash(self.address_hash)
        try:
            validate_cover(self.intervals, self.num_embeddings)
        except ParallelError as error:
            raise _mismatch(
                f"saved intervals {[list(iv) for iv in self.intervals]} do not cover "
                f"[0, {self.num_embeddings}) exactly once ({error.code}: {error.message})",
                list(self.intervals),
                "re-save the shards from one consistent tensor-parallel group",
            ) from error


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _pieces(weights: Sequence[tuple[int, torch.Tensor]], num_embeddings: int) -> list[TensorPiece]:
    pieces = []
    for start, weight in weights:
        if weight.dim() != 2:
            raise _mismatch(
                f"a shard of a table is [rows, d], not {tuple(weight.shape)}",
                tuple(weight.shape),
                "save the weight of a row-sharded table",
            )
        shape = (num_embeddings, int(weight.shape[1]))
        pieces.append(
            TensorPiece(name=_TENSOR, shape=shape, offset=(start, 0), tensor=weight.detach())
        )
    return pieces


def _record(
    num_embeddings: int, intervals: Sequence[tuple[int, int]], address_hash: str | None
) -> dict[str, Any]:
    return {
        "address_hash": address_hash,
        "layout": {
            "world_size": len(intervals),
            "tables": {
                _TENSOR: {
                    "num_embeddings": num_embeddings,
                    "intervals": [[int(s), int(e)] for s, e in intervals],
                }
            },
        },
    }


def _check_rows(
    weights: Sequence[torch.Tensor], intervals: Sequence[tuple[int, int]], num_embeddings: int
) -> None:
    try:
        validate_cover([(int(s), int(e)) for s, e in intervals], num_embeddings)
    except ParallelError as error:
        raise _mismatch(
            f"intervals do not cover [0, {num_embeddings}) exactly once ({error.message})",
            list(intervals),
            "pass the intervals of one tensor-parallel group",
        ) from error
    for rank, (weight, (start, end)) in enumerate(zip(weights, intervals, strict=True)):
        if weight.dim() != 2 or weight.shape[0] != end - start:
            raise _mismatch(
                f"rank {rank} holds {tuple(weight.shape)} but its interval [{start}, {end}) "
                f"has {end - start} rows",
                tuple(weight.shape),
                "save the shard of the layer whose intervals you pass",
            )


def save_shards(
    directory: str | os.PathLike[str],
    weights: Sequence[torch.Tensor],
    *,
    num_embeddings: int,
    intervals: Sequence[tuple[int, int]],
    address_hash: str | None = None,
) -> Path:
    """Write every rank's rows ``weights[r]`` (``[e_r - s_r, d]``) from one process.

    For shards gathered in one place (tests, conversion tools); a group saves with
    :func:`save_vocab_shards`. Returns the new folder.

    Raises:
        ParallelError SHARD_LAYOUT_MISMATCH: a shard has not ``e_r - s_r`` rows, or
            the intervals do not cover ``[0, num_embeddings)`` exactly once.
        UsageError OUTPUT_EXISTS: the folder exists.
    """
    if len(weights) != len(intervals):
        raise _mismatch(
            f"{len(weights)} shards for {len(intervals)} intervals",
            (len(weights), len(intervals)),
            "pass one shard per interval",
        )
    _check_rows(weights, intervals, num_embeddings)
    pieces = _pieces([(s, w) for (s, _), w in zip(intervals, weights, strict=True)], num_embeddings)
    record = _record(num_embeddings, intervals, address_hash)
    return write_dcp(directory, pieces, record=record, group=None) if pieces else Path(directory)


def save_vocab_shards(
    emb: RowShardedModule,
    directory: str | os.PathLike[str],
    *,
    address_hash: str | None = None,
) -> Path:
    """Every rank of ``emb.group`` writes its rows into one new checkpoint folder (collective).

    ``address_hash`` defaults to the tokenizer ``emb`` is bound to (``emb.config``).
    Returns the folder once every rank's rows are written and it is published.

    Raises:
        UsageError OUTPUT_EXISTS: the folder exists (on every rank).
    """
    start, end = emb.vocab_start, emb.vocab_end
    _check_rows_local(emb.weight, start, end)
    pieces = _pieces([(start, emb.weight)], emb.num_embeddings)
    record = _record(
        emb.num_embeddings,
        emb.intervals,
        emb.config.address_hash if address_hash is None else address_hash,
    )
    return write_dcp(directory, pieces, record=record, group=emb.group)


def _check_rows_local(weight: torch.Tensor, start: int, end: int) -> None:
    if weight.dim() != 2 or weight.shape[0] != end - start:
        raise _mismatch(
            f"the layer holds {tuple(weight.shape)} for rows [{start}, {end})",
            tuple(weight.shape),
            "save a row-sharded table whose weight holds its interval's rows",
        )


def read_layout(directory: str | os.PathLike[str]) -> ShardLayout:
    """The saved table of a checkpoint folder, checked before any value is read.

    Raises:
        ParallelError SHARD_LAYOUT_MISMATCH: the folder holds no ``[V, d]`` table, or
            its saved chunks leave a gap, overlap, or cut the hidden dimension.
        CheckpointError MALFORMED_CHECKPOINT / CHECKPOINT_SHARD_MISSING; UsageError
            FILE_NOT_FOUND: as :func:`~tokembed.artifacts.dcp_metadata.read_dcp_metadata`.
    """
    root = Path(directory)
    meta = read_dcp_metadata(root)
    record = read_dcp_record(root, metadata=meta) or {}
    saved = meta.state_dict_metadata.get(_TENSOR)
    size = tuple(getattr(saved, "size", ()))
    if saved is None or len(size) != 2:
        raise _mismatch(
            f"{root} holds no [V, d] table {_TENSOR!r}",
            str(root),
            "point at a folder written by save_vocab_shards",
        )
    chunks = sorted(saved.chunks, key=lambda c: tuple(c.offsets))
    if any(int(c.offsets[1]) != 0 or int(c.sizes[1]) != int(size[1]) for c in chunks):
        raise _mismatch(
            f"{root}: a saved chunk of {_TENSOR!r} does not span the hidden dimension",
            str(root),
            "save row-sharded tables (whole rows per rank)",
        )
    intervals = tuple((int(c.offsets[0]), int(c.offsets[0]) + int(c.sizes[0])) for c in chunks)
    from torch.distributed.checkpoint.metadata import MetadataIndex

    files = tuple(
        str(meta.storage_data[MetadataIndex(_TENSOR, c.offsets)].relative_path) for c in chunks
    )
    return ShardLayout(
        num_embeddings=int(size[0]),
        embedding_dim=int(size[1]),
        dtype=_dtype_name(saved.properties.dtype),
        intervals=intervals,
        files=files,
        address_hash=record.get("address_hash"),
    )


def load_rows(
    directory: str | os.PathLike[str],
    start: int,
    end: int,
    *,
    layout: ShardLayout | None = None,
) -> torch.Tensor:
    """Global rows ``[start, end)`` of the saved logical table, read chunk by chunk.

    Only the overlapping chunks are read. ``load_rows(d, 0, V)`` is the full table
    (the reference reconstruction).

    Raises:
        ParallelError SHARD_LAYOUT_MISMATCH: as :func:`read_layout`, or
            ``[start, end)`` outside ``[0, V)``.
        CheckpointError: as :func:`read_layout`.
    """
    layout = read_layout(directory) if layout is None else layout
    if not 0 <= start <= end <= layout.num_embeddings:
        raise _mismatch(
            f"rows [{start}, {end}) are outside the saved table's [0, {layout.num_embeddings})",
            (start, end),
            "load into a table with the saved number of rows",
        )
    if start == end:  # an empty target interval (a tail rank of an uneven split)
        return torch.empty(0, layout.embedding_dim, dtype=getattr(torch, layout.dtype))
    return read_dcp_tensor(directory, _TENSOR, rows=(start, end))


def load_vocab_shards(
    emb: RowShardedModule,
    directory: str | os.PathLike[str],
    *,
    address_hash: str | None = None,
) -> ShardLayout:
    """Fill ``emb``'s local rows from a checkpoint saved at any tensor-parallel size.

    Non-collective: each rank reads only its own rows. A saved table that names
    a tokenizer must name ``address_hash`` (default: the one ``emb`` is bound to);
    under ``zero_pad_row`` the loaded PAD row must be zero.

    Raises:
        ParallelError SHARD_LAYOUT_MISMATCH: a different [V, d] or dtype than ``emb``,
            or an inconsistent checkpoint (see :func:`read_layout`).
        EmbeddingError ADDRESS_HASH_MISMATCH: both sides name a tokenizer and they differ.
        EmbeddingError NON_FINITE_VALUES: a loaded row holds NaN or infinity (the layer
            is left unchanged).
        EmbeddingError PAD_ROW_NOT_ZERO: the loaded PAD row is not zero under
            ``zero_pad_row`` (the layer is left unchanged).
    """
    if address_hash is None:
        address_hash = emb.config.address_hash
    layout = read_layout(directory)
    target = (emb.num_embeddings, emb.embedding_dim, _dtype_name(emb.weight.dtype))
    saved = (layout.num_embeddings, layout.embedding_dim, layout.dtype)
    if target != saved:
        raise _mismatch(
            f"the checkpoint holds a [{saved[0]}, {saved[1]}] {saved[2]} table, the layer "
            f"is [{target[0]}, {target[1]}] {target[2]}",
            saved,
            "load into a layer of the saved shape and dtype",
        )
    if address_hash is not None and layout.address_hash not in (None, address_hash):
        raise EmbeddingError(
            "ADDRESS_HASH_MISMATCH",
            f"the shards belong to tokenizer {layout.address_hash}, not {address_hash}",
            value=layout.address_hash,
            fix="load the table saved for this tokenizer",
        )
    rows = load_rows(directory, emb.vocab_start, emb.vocab_end, layout=layout)
    check_finite(rows, what=f"shards in {directory}")
    pad = emb.config.padding_idx
    if pad is not None and emb.vocab_start <= pad < emb.vocab_end:
        check_pad_row(rows[pad - emb.vocab_start], emb.config)
    with torch.no_grad():
        emb.weight.copy_(rows)
    return layout
