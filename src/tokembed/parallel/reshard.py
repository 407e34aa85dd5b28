"""Row-sharded embedding checkpoints: save at one tensor-parallel size, load at another.

A checkpoint directory holds one safetensors file per rank with that rank's rows
``[s_r, e_r)`` (tensor ``"weight"``, the interval also in the file's metadata) and
a JSON manifest ``layout.json`` naming the logical table: ``V``, ``d``, dtype,
the interval of every file, and optionally the tokenizer address hash the rows
belong to. Loading at any size reads, for each target interval, only the
overlapping slices of the saved files, so the logical table — not the physical
files — is what survives a reshard: shards edited one by one could otherwise
drift from any table that was ever trained.

Refusals (ParallelError SHARD_LAYOUT_MISMATCH): a manifest whose intervals leave a
gap or overlap, a file whose rows, width, dtype or recorded interval disagree
with the manifest, a missing file, or a target table of another shape. A target
bound to another tokenizer gets EmbeddingError ADDRESS_HASH_MISMATCH.

Example::

    save_vocab_shards(emb_tp2, ckpt)       # every rank of the TP=2 group
    load_vocab_shards(emb_tp4, ckpt)       # every rank of a TP=4 group: its rows only
    torch.equal(emb_tp4.gather_weight(), emb_tp2_full)   # True
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed import ProcessGroup

from tokembed.artifacts.safetensors_writer import write_safetensors
from tokembed.embedding.addressed import check_address_hash
from tokembed.embedding.lookup_checks import check_finite, check_pad_row
from tokembed.embedding.lookup_config import LookupConfig
from tokembed.errors import EmbeddingError, ParallelError, UsageError
from tokembed.files.atomic import replace_with, write_bytes_atomic
from tokembed.parallel.intervals import validate_cover

__all__ = [
    "MANIFEST_NAME",
    "RowShardedModule",
    "ShardLayout",
    "load_rows",
    "load_vocab_shards",
    "read_layout",
    "save_shard",
    "save_vocab_shards",
]

MANIFEST_NAME = "layout.json"
_FORMAT = "tokembed.vocab_shards"
_VERSION = 1
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


@contextlib.contextmanager
def _damaged_shard(path: Path) -> Iterator[None]:
    """Turn what a truncated or garbled safetensors file raises into SHARD_LAYOUT_MISMATCH."""
    from safetensors import SafetensorError

    try:
        yield
    except (SafetensorError, OSError, ValueError, TypeError, KeyError, RuntimeError) as error:
        raise _mismatch(
            f"shard file {path} is damaged ({type(error).__name__}: {error})",
            str(path),
            "re-save the checkpoint (the file is truncated or not a safetensors shard)",
        ) from None


def _check_layout_fields(layout: ShardLayout) -> None:
    """Refuse a manifest whose numbers or file names cannot describe one table in its folder."""
    if layout.num_embeddings < 0 or layout.embedding_dim < 0:
        raise ValueError("negative table size")
    if layout.dtype not in {_dtype_name(t) for t in _SAFETENSORS_DTYPES.values()}:
        raise ValueError(f"dtype {layout.dtype!r} is not an embedding table's")
    if len(layout.files) != len(layout.intervals):
        raise ValueError("one file per interval is needed")
    for name in layout.files:  # names inside the checkpoint folder only
        if not name or name != Path(name).name or name in (".", ".."):
            raise ValueError(f"file name {name!r} leaves the checkpoint folder")


@dataclass(frozen=True, kw_only=True)
class ShardLayout:
    """The logical table a checkpoint directory claims to hold (from ``layout.json``)."""

    num_embeddings: int
    embedding_dim: int
    dtype: str
    intervals: tuple[tuple[int, int], ...]
    files: tuple[str, ...]
    address_hash: str | None = None

    def __post_init__(self) -> None:
        if self.address_hash is not None:
            check_address_hash(self.address_hash)
        if len(self.files) != len(self.intervals):
            raise _mismatch(
                f"{len(self.files)} files for {len(self.intervals)} intervals",
                (len(self.files), len(self.intervals)),
                "write one file per interval (save_vocab_shards does)",
            )
        try:
            validate_cover(self.intervals, self.num_embeddings)
        except ParallelError as error:
            raise _mismatch(
                f"manifest intervals do not cover [0, {self.num_embeddings}) exactly once "
                f"({error.code}: {error.message})",
                list(self.intervals),
                "re-save the shards from one consistent tensor-parallel group",
            ) from error

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": _FORMAT,
                "version": _VERSION,
                "num_embeddings": self.num_embeddings,
                "embedding_dim": self.embedding_dim,
                "dtype": self.dtype,
                "intervals": [list(iv) for iv in self.intervals],
                "files": list(self.files),
                "address_hash": self.address_hash,
            },
            indent=1,
        )


def _file_name(rank: int, world_size: int) -> str:
    return f"shard-{rank:05d}-of-{world_size:05d}.safetensors"


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def save_shard(
    directory: str | os.PathLike[str],
    weight: torch.Tensor,
    *,
    num_embeddings: int,
    intervals: Sequence[tuple[int, int]],
    rank: int,
    address_hash: str | None = None,
) -> Path:
    """Write rank ``rank``'s rows ``weight`` ([e_r - s_r, d]); rank 0 also writes the manifest.

    No collective: usable from any process that holds a shard. Returns the shard path.

    Raises:
        ParallelError SHARD_LAYOUT_MISMATCH: ``weight`` has not ``e_r - s_r`` rows, or
            the intervals do not cover ``[0, num_embeddings)``.
    """
    layout = ShardLayout(
        num_embeddings=num_embeddings,
        embedding_dim=int(weight.shape[1]),
        dtype=_dtype_name(weight.dtype),
        intervals=tuple((int(s), int(e)) for s, e in intervals),
        files=tuple(_file_name(r, len(intervals)) for r in range(len(intervals))),
        address_hash=address_hash,
    )
    start, end = layout.intervals[rank]
    if weight.dim() != 2 or weight.shape[0] != end - start:
        raise _mismatch(
            f"rank {rank} holds {tuple(weight.shape)} but its interval [{start}, {end}) "
            f"has {end - start} rows",
            tuple(weight.shape),
            "save the shard of the layer whose intervals you pass",
        )
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"vocab_start": str(start), "vocab_end": str(end), "num_embeddings": str(num_embeddings)}
    path = out / layout.files[rank]
    # Streamed from the tensor (block-wise if it is on a device or strided): a shard is
    # never held as one bytes object beside the table.
    shard = {_TENSOR: weight.detach()}
    replace_with(path, lambda tmp: write_safetensors(tmp, shard, metadata=meta))
    if rank == 0:
        write_bytes_atomic(out / MANIFEST_NAME, layout.to_json().encode())
    return path


def save_vocab_shards(
    emb: RowShardedModule,
    directory: str | os.PathLike[str],
    *,
    address_hash: str | None = None,
) -> None:
    """Every rank of ``emb.group`` writes its shard; returns after all files exist (barrier).

    ``address_hash`` defaults to the tokenizer ``emb`` is bound to (``emb.config``).
    """
    save_shard(
        directory,
        emb.weight,
        num_embeddings=emb.num_embeddings,
        intervals=emb.intervals,
        rank=emb.rank,
        address_hash=emb.config.address_hash if address_hash is None else address_hash,
    )
    dist.barrier(group=emb.group)


def read_layout(directory: str | os.PathLike[str]) -> ShardLayout:
    """Parse and validate ``layout.json``; check every listed file's header against it.

    Raises:
        ParallelError SHARD_LAYOUT_MISMATCH: missing or malformed manifest, gap or
            overlap, a missing file, or a file whose shape/dtype/interval disagrees.
    """
    from safetensors import safe_open

    root = Path(directory)
    try:
        raw = json.loads((root / MANIFEST_NAME).read_bytes().decode("utf-8"))
        if not isinstance(raw, dict):
            raise TypeError("the manifest is not a JSON object")
        if raw.get("format") != _FORMAT or raw.get("version") != _VERSION:
            raise KeyError("format")
        layout = ShardLayout(
            num_embeddings=int(raw["num_embeddings"]),
            embedding_dim=int(raw["embedding_dim"]),
            dtype=str(raw["dtype"]),
            intervals=tuple((int(s), int(e)) for s, e in raw["intervals"]),
            files=tuple(str(f) for f in raw["files"]),
            address_hash=raw.get("address_hash"),
        )
        _check_layout_fields(layout)
    except (OSError, ValueError, KeyError, TypeError, UsageError, RecursionError) as error:
        raise _mismatch(
            f"{root / MANIFEST_NAME} is missing or not a {_FORMAT} v{_VERSION} manifest "
            f"({type(error).__name__}: {error})",
            str(root / MANIFEST_NAME),
            "point at a directory written by save_vocab_shards",
        ) from error
    for name, (start, end) in zip(layout.files, layout.intervals, strict=True):
        path = root / name
        with _damaged_shard(path):  # is_file raises on a name too long
            if not path.is_file():
                raise _mismatch(f"shard file {path} is missing", str(path), "copy every shard file")
            with safe_open(str(path), framework="pt") as f:
                meta = f.metadata() or {}
                piece = f.get_slice(_TENSOR)
                shape, dtype = tuple(piece.get_shape()), piece.get_dtype()
            recorded = (int(meta.get("vocab_start", -1)), int(meta.get("vocab_end", -1)))
        dtype_ok = _dtype_name(_SAFETENSORS_DTYPES.get(dtype, torch.uint8)) == layout.dtype
        if shape != (end - start, layout.embedding_dim) or recorded != (start, end) or not dtype_ok:
            raise _mismatch(
                f"{name} holds {shape} {dtype} for rows {list(recorded)} but the manifest "
                f"says [{end - start}, {layout.embedding_dim}] {layout.dtype} for [{start}, {end})",
                name,
                "the manifest and the files come from different saves: re-save them together",
            )
    return layout


# safetensors header dtype names -> torch dtypes (the ones an embedding table uses).
_SAFETENSORS_DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
}


def load_rows(
    directory: str | os.PathLike[str],
    start: int,
    end: int,
    *,
    layout: ShardLayout | None = None,
) -> torch.Tensor:
    """Global rows ``[start, end)`` of the saved logical table, read slice by slice.

    Only the overlapping parts of the files are read. ``load_rows(d, 0, V)`` is the
    full table (the reference reconstruction).

    Raises:
        ParallelError SHARD_LAYOUT_MISMATCH: as :func:`read_layout`, or
            ``[start, end)`` outside ``[0, V)``.
    """
    from safetensors import safe_open

    layout = read_layout(directory) if layout is None else layout
    if not 0 <= start <= end <= layout.num_embeddings:
        raise _mismatch(
            f"rows [{start}, {end}) are outside the saved table's [0, {layout.num_embeddings})",
            (start, end),
            "load into a table with the saved number of rows",
        )
    parts: list[torch.Tensor] = []
    for name, (s, e) in zip(layout.files, layout.intervals, strict=True):
        lo, hi = max(s, start), min(e, end)
        if lo >= hi:
            continue
        path = Path(directory) / name
        with _damaged_shard(path), safe_open(str(path), framework="pt") as f:
            parts.append(f.get_slice(_TENSOR)[lo - s : hi - s])  # [hi - lo, d]
    if not parts:  # an empty target interval (a tail rank of an uneven split)
        return torch.empty(0, layout.embedding_dim, dtype=getattr(torch, layout.dtype))
    return torch.cat(parts)


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
